"""A session store of either kind for the tests: a sessions folder, or the
PostgreSQL database named by NETBOX_CHAT_TEST_PG (scripts/postgres_up.sh).

The Postgres kind is skipped when NETBOX_CHAT_TEST_PG is unset, and fails
instead when NETBOX_CHAT_REQUIRE_PG=1 (CI sets it), so a missing database can
never pass as a green run. Everything here reads the store from outside,
without the lock, the way another process or machine would see it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.config import Settings, resolve_settings
from netbox_chat.export import read_transcript
from netbox_chat.pgstore import PgSessionStore
from netbox_chat.sessions import read_only_connection
from netbox_chat.stores import Store, open_store

PG_ENV = "NETBOX_CHAT_TEST_PG"
REQUIRE_PG_ENV = "NETBOX_CHAT_REQUIRE_PG"
LANGGRAPH_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")
OUR_TABLES = ("history_edits", "turns", "session_meta")


def database_url() -> str:
    """The test database, or skip (fail under NETBOX_CHAT_REQUIRE_PG=1)."""
    url = os.environ.get(PG_ENV)
    if url:
        return url
    if os.environ.get(REQUIRE_PG_ENV) == "1":
        pytest.fail(f"{REQUIRE_PG_ENV}=1 but {PG_ENV} is not set (run scripts/postgres_up.sh)")
    pytest.skip(f"no PostgreSQL for this test: set {PG_ENV} (scripts/postgres_up.sh)")


def empty_database(url: str) -> None:
    """Create the schema if needed and remove every session from it."""
    from netbox_chat import pgstore
    from netbox_chat.pgsaver import setup_tables

    with contextlib.closing(pgstore.connect(url)) as conn:
        pgstore.migrate(conn)
        setup_tables(conn)
        conn.execute(f"TRUNCATE {', '.join(LANGGRAPH_TABLES + OUR_TABLES)}")


@dataclass(frozen=True)
class StoreUnderTest:
    kind: str  # "folder" or "postgres"
    value: str  # what --store / NETBOX_CHAT_STORE gets

    def settings(self, **overrides: Any) -> Settings:
        return resolve_settings(store=self.value, env={}, **overrides)

    def store(self) -> Store:
        return open_store(self.settings())

    def statuses(self, session_id: str) -> list[tuple[int, str]]:
        """The ledger's (number, status) pairs, read without the lock ([] if none yet)."""
        store = self.store()
        try:
            turns = read_transcript(store, session_id)["turns"]
        except Exception:
            return []
        finally:
            if isinstance(store, PgSessionStore):
                store.close()
        return [(t["number"], t["status"]) for t in turns]

    def thread_rows(self, session_id: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row LangGraph keeps for the session, as stored, in a stable order."""
        with self._connection(session_id) as conn:
            if self.kind == "folder":
                return {
                    "checkpoints": conn.execute(
                        "SELECT checkpoint_id, parent_checkpoint_id, checkpoint, metadata "
                        "FROM checkpoints ORDER BY checkpoint_id"
                    ).fetchall(),
                    "writes": conn.execute(
                        "SELECT checkpoint_id, task_id, idx, channel, value FROM writes "
                        "ORDER BY 1, 2, 3"
                    ).fetchall(),
                }
            where = "WHERE thread_id = %s"
            return {
                "checkpoints": conn.execute(
                    "SELECT checkpoint_id, parent_checkpoint_id, checkpoint::text, "
                    f"metadata::text FROM checkpoints {where} ORDER BY checkpoint_id",
                    (session_id,),
                ).fetchall(),
                "blobs": conn.execute(
                    "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
                    f"{where} ORDER BY 1, 2, 3",
                    (session_id,),
                ).fetchall(),
                "writes": conn.execute(
                    "SELECT checkpoint_id, task_id, idx, channel, type, blob "
                    f"FROM checkpoint_writes {where} ORDER BY 1, 2, 3",
                    (session_id,),
                ).fetchall(),
            }

    def rows_left(self, session_id: str) -> int:
        """How many rows of `session_id` remain anywhere in a database store."""
        with self._connection(session_id) as conn:
            return sum(
                conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} = %s", (session_id,)
                ).fetchone()[0]
                for tables, column in ((LANGGRAPH_TABLES, "thread_id"), (OUR_TABLES, "session_id"))
                for table in tables
            )

    @contextlib.contextmanager
    def _connection(self, session_id: str) -> Iterator[Any]:
        if self.kind == "folder":
            # read_only_connection leaves no -wal/-shm behind, as `ls` does not
            with read_only_connection(Path(self.value, f"{session_id}.sqlite")) as db:
                yield db
            return
        from netbox_chat import pgstore

        with contextlib.closing(pgstore.connect(self.value, read_only=True)) as conn:
            yield conn
