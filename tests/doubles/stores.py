"""A session store of either kind for the tests: a sessions folder, or the
PostgreSQL database named by NETBOX_CHAT_TEST_PG (scripts/postgres_up.sh).

The Postgres kind is skipped when NETBOX_CHAT_TEST_PG is unset, and fails
instead when NETBOX_CHAT_REQUIRE_PG=1 (CI sets it), so a missing database can
never pass as a green run. Everything here reads the store from outside,
without the lock, the way another process or machine would see it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from netbox_chat.cli.export import read_transcript
from netbox_chat.config import Settings, resolve_settings
from netbox_chat.store.choose import OpenSession, Store, open_store
from netbox_chat.store.migrations import has_table
from netbox_chat.store.postgres import PgSessionStore
from tests.doubles.inspect_session import assert_ledger_agrees, fresh_connection, ledger_problems

PG_ENV = "NETBOX_CHAT_TEST_PG"
REQUIRE_PG_ENV = "NETBOX_CHAT_REQUIRE_PG"
LANGGRAPH_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")
OUR_TABLES = ("history_edits", "turns", "session_meta")


def database_url() -> str:
    """The test database, or skip (fail under NETBOX_CHAT_REQUIRE_PG=1)."""
    url = os.environ.get(PG_ENV)
    if url:
        return worker_database(url, os.environ.get("PYTEST_XDIST_WORKER", ""))
    if os.environ.get(REQUIRE_PG_ENV) == "1":
        pytest.fail(f"{REQUIRE_PG_ENV}=1 but {PG_ENV} is not set (run scripts/postgres_up.sh)")
    pytest.skip(f"no PostgreSQL for this test: set {PG_ENV} (scripts/postgres_up.sh)")


@functools.cache
def worker_database(url: str, worker: str) -> str:
    """The test database of this xdist worker (`gw0`, ...) on the test
    server, made on first use and kept: each test empties the database it
    uses, and the workers run tests at once. Without xdist, the one named."""
    import psycopg

    from netbox_chat.store import postgres as pgstore

    if not worker:
        return url
    name = f"{urlsplit(url).path.strip('/')}_{worker}"
    with contextlib.closing(pgstore.connect(url)) as admin:
        made = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if made is None:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                admin.execute(f"CREATE DATABASE {name}")  # another run's same worker
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A database of its own on the test server, dropped after: for a store
    an earlier release makes with its own schema, which the shared test
    database (always at today's schema) cannot stand in for."""
    from netbox_chat.store import postgres as pgstore

    admin_url = database_url()
    name = f"netbox_chat_scratch_{uuid.uuid4().hex[:8]}"
    with contextlib.closing(pgstore.connect(admin_url)) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        with contextlib.closing(pgstore.connect(admin_url)) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def empty_database(url: str) -> None:
    """Create the schema if needed and remove every session from it."""
    from netbox_chat.checkpoints.postgres import setup_tables
    from netbox_chat.store import postgres as pgstore

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

    def create(self, model: str = "qwen3:8b") -> OpenSession:
        """A new session, open for writing (locked), as `netbox-chat` makes one."""
        return self.store().create(model=model)

    def open(self, session_id: str) -> OpenSession:
        return self.store().open(session_id)

    def session_ids(self) -> list[str]:
        store = self.store()
        try:
            return store.session_ids()
        finally:
            _close(store)

    def only_session(self) -> str:
        (session_id,) = self.session_ids()
        return session_id

    def turns(self, session_id: str) -> list[dict[str, Any]]:
        """The ledger's turns as `export --format json` shows them, read
        without the lock, even mid-turn ([] if the session has none yet)."""
        store = self.store()
        try:
            return list(read_transcript(store, session_id, thinking=True)["turns"])
        except Exception:
            return []
        finally:
            _close(store)

    def statuses(self, session_id: str) -> list[tuple[int, str]]:
        """The ledger's (number, status) pairs, read without the lock ([] if none yet)."""
        return [(t["number"], t["status"]) for t in self.turns(session_id)]

    def ledger_problems(self, session_id: str, *, after_crash: bool = False) -> list[str]:
        return ledger_problems(self.value, session_id, after_crash=after_crash)

    def assert_ledger_agrees(self, session_id: str, *, after_crash: bool = False) -> None:
        assert_ledger_agrees(self.value, session_id, after_crash=after_crash)

    def thread_rows(self, session_id: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row LangGraph keeps for the session, as stored, in a stable order."""
        with fresh_connection(self.value, session_id) as conn:
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

    def snapshot(self, session_id: str) -> dict[str, list[tuple[Any, ...]]]:
        """Everything a turn or a history edit could write: LangGraph's rows and
        the ledger's (an empty LangGraph table and a missing one count the same)."""
        folder = self.kind == "folder"
        where, params = ("", ()) if folder else ("WHERE session_id = %s", (session_id,))
        with fresh_connection(self.value, session_id) as conn:
            # A file without history_edits has none: it gets the table at its
            # first edit (m008), like `Ledger.edits`.
            ledger = {
                name: conn.execute(
                    f"SELECT * FROM {table} {where} ORDER BY {order}", params
                ).fetchall()
                if not folder or has_table(conn, table)
                else []
                for name, table, order in (
                    ("turns", "turns", "number"),
                    ("edits", "history_edits", "id"),
                )
            }
            unwritten = (
                folder
                and not conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'"
                ).fetchone()
            )
        langgraph = {"checkpoints": [], "writes": []} if unwritten else self.thread_rows(session_id)
        return {**langgraph, **ledger}

    def stored_bytes(self, session_id: str) -> int:
        """The bytes LangGraph stores for the session: checkpoints, their
        channel values (blobs, on Postgres) and pending writes."""
        with fresh_connection(self.value, session_id) as conn:
            if self.kind == "folder":
                queries = (
                    "SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints",
                    "SELECT sum(length(value)) FROM writes",
                )
                params: tuple[str, ...] = ()
            else:
                queries = (
                    "SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text)) "
                    "FROM checkpoints WHERE thread_id = %s",
                    "SELECT sum(octet_length(blob)) FROM checkpoint_blobs WHERE thread_id = %s",
                    "SELECT sum(octet_length(blob)) FROM checkpoint_writes WHERE thread_id = %s",
                )
                params = (session_id,)
            return sum(int(conn.execute(sql, params).fetchone()[0] or 0) for sql in queries)

    def rows_left(self, session_id: str) -> int:
        """How many rows of `session_id` remain anywhere in a database store."""
        with fresh_connection(self.value, session_id) as conn:
            return sum(
                conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} = %s", (session_id,)
                ).fetchone()[0]
                for tables, column in ((LANGGRAPH_TABLES, "thread_id"), (OUR_TABLES, "session_id"))
                for table in tables
            )


def _close(store: Store) -> None:
    """A database store keeps its read-only connection until closed."""
    if isinstance(store, PgSessionStore):
        store.close()


def make_session(store: Store, question: str = "which sites?") -> str:
    with store.create(model="qwen3:8b") as session:
        number = session.begin_turn(question, base_checkpoint_id=None, base_message_count=0)
        session.finish_turn(number, "done", answer="three", message_count=2)
        return session.id


def with_url(env: dict[str, str], url: str) -> dict[str, str]:
    return {**env, "NETBOX_CHAT_STORE": url}
