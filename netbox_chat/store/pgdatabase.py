"""A psycopg connection with the same `atomic()` as a session file's
(`database.py`), so the code that makes a rollback, a rewind or a compaction
one transaction with its ledger rows (`session.db.atomic()`) does not ask
which store it has.

PostgreSQL needs none of the SQLite connection's tricks: the connection is in
autocommit (LangGraph's `setup()` runs CREATE INDEX CONCURRENTLY), and inside
`transaction()` every statement on it, LangGraph's saver's included, joins
one real transaction; a nested block is a savepoint. Imported only for a
database store: psycopg costs 100 ms or more to import.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg


class PgConnection(psycopg.Connection[Any]):
    """A `psycopg.Connection` (made with `PgConnection.connect`) with `atomic()`."""

    @contextlib.contextmanager
    def atomic(self, *, synced: bool = True) -> Iterator[None]:
        """Commit everything written inside the block, or nothing; nested
        blocks are savepoints (psycopg's `transaction()`).

        `synced=False` (outermost block only), as on a session file: the
        commit does not wait for the server's WAL flush (`synchronous_commit`
        off for this transaction). A server crash may lose it and any later
        ones like it, never an earlier commit, and the database stays whole
        (https://www.postgresql.org/docs/current/wal-async-commit.html)."""
        outermost = self.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self.transaction():
            if outermost and not synced:
                self.execute("SET LOCAL synchronous_commit TO OFF")
            yield
