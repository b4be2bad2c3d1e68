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
    def atomic(self) -> Iterator[None]:
        """Commit everything written inside the block, or nothing; nested
        blocks are savepoints (psycopg's `transaction()`)."""
        with self.transaction():
            yield
