"""The one way to make a group of SQLite writes atomic: `Connection.atomic()`.

Every write that must land whole goes through it: the rollback's two passes,
a rewind's or a compaction's `update_state` with its verification, each
schema migration and the ledger's own rows. It is modelled on sqlite-utils'
nestable `db.atomic()` (a transaction, or a savepoint inside one), with two
things that helper does not need to know:

- LangGraph's `SqliteSaver` commits after every call, even when the call
  raised (`cursor()` commits in its `finally`). While `atomic()` is open,
  `commit()` on this connection is held back: the block commits once at its
  end or rolls back on any error. The saver and every copy of it
  (`with_allowlist` hands the graph a shallow copy when strict msgpack is on)
  write through the same connection object, so they are all held.
- `executescript` commits whatever is open before it runs, so it is refused
  inside `atomic()`; migrations run their statements one by one instead.

It also opens a session file for reading without writing anything
(`read_only_connection`): listing, `export` and the lock's holder read that way.

This module imports nothing beyond the standard library (sessions.py uses it,
and `ls` must start fast).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Connection(sqlite3.Connection):
    """A `sqlite3.Connection` (pass it as `factory=`) with `atomic()`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.depth = 0  # how many atomic() blocks are open

    @contextlib.contextmanager
    def atomic(self, *, synced: bool = True) -> Iterator[None]:
        """Commit everything written inside the block, or nothing.

        Nested blocks are savepoints: an inner failure that is caught undoes
        only the inner block.

        `synced=False` (outermost block only): the commit does not wait for
        the disk (`PRAGMA synchronous = NORMAL` for it; the file is in WAL
        mode). A crash of the process loses nothing; a power cut may lose
        this commit and any others like it after the last synced one, never
        one before it, and the file stays whole
        (https://www.sqlite.org/pragma.html#pragma_synchronous,
        https://www.sqlite.org/wal.html#durability). For records whose loss
        the next open repairs (a turn's start and its rollback); the wait is
        milliseconds, up to hundreds while the disk is busy, on the path of a
        Ctrl-C."""
        savepoint = f"atomic_{self.depth}"
        relaxed = not synced and self.depth == 0
        if self.depth == 0:
            if self.in_transaction:  # an implicit transaction someone left open
                super().commit()
            if relaxed:
                level = int(self.execute("PRAGMA synchronous").fetchone()[0])
                self.execute("PRAGMA synchronous = NORMAL")
            self.execute("BEGIN IMMEDIATE")
        else:
            self.execute(f"SAVEPOINT {savepoint}")
        self.depth += 1
        try:
            try:
                yield
            except BaseException:
                self.depth -= 1
                self._undo(savepoint)
                raise
            self.depth -= 1
            if self.depth:
                self.execute(f"RELEASE {savepoint}")
                return
            try:
                super().commit()
            except BaseException:
                self._undo(savepoint)
                raise
        finally:
            if relaxed:
                self.execute(f"PRAGMA synchronous = {level}")

    def _undo(self, savepoint: str) -> None:
        # SQLite itself may already have rolled the whole transaction back
        # (disk full, I/O error); then there is no savepoint left to go to.
        if self.depth and self.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.execute(f"ROLLBACK TO {savepoint}")
                self.execute(f"RELEASE {savepoint}")
                return
        if self.in_transaction:
            super().rollback()

    def commit(self) -> None:
        """Commit, unless an `atomic()` block is open: it commits at its end."""
        if self.depth == 0:
            super().commit()

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        if self.depth:
            raise sqlite3.ProgrammingError(
                "executescript() commits the open transaction: not inside atomic()"
            )
        return super().executescript(sql_script)


@contextlib.contextmanager
def read_only_connection(
    path: Path, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> Iterator[sqlite3.Connection]:
    """Open a session without writing anything, not even SQLite's side files
    (`factory`: the connection class a LangGraph saver on it wants).

    A read-only open of a WAL database creates `-wal` and `-shm` files and
    leaves them behind. When no `-wal` exists nobody is writing, so the file
    is opened `immutable`; otherwise a writer is live and its side files are
    already there to share.
    """
    live = Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
    conn = sqlite3.connect(uri, uri=True, timeout=2.0, factory=factory)
    try:
        yield conn
    finally:
        conn.close()
