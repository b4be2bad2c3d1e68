"""Sessions without LangChain: ids, resolving, the lock (on both stores,
through the `store` fixture), and what only session files have: listing
without a trace on disk, file modes, companions, schema checks and
migrations of a file. Real SQLite files in a temp folder, and the test
PostgreSQL database."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from netbox_chat.config import ModelServer
from netbox_chat.errors import ExitStatus
from netbox_chat.store.errors import AmbiguousSession, NoSuchSession, SessionBusy, UnreadableSession
from netbox_chat.store.ids import InvalidSessionId, normalize_session_id
from netbox_chat.store.migrations import MIGRATIONS, RECORD_PREFIX
from netbox_chat.store.sessions import SCHEMA_VERSION, SessionFile, SessionStore
from tests.doubles.old_releases import answered_file_at_schema
from tests.doubles.stores import StoreUnderTest, make_session
from tests.drive.process import python, start


def folder_fingerprint(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
        for p in sorted(folder.iterdir())
    }


@pytest.mark.parametrize(
    "bad",
    ["../x", "/etc/passwd", "", "a" * 200, "ab\x00cd", "ab\ncd", "sess/../../x", "ilou", "ABC!"],
)
def test_hostile_ids_are_rejected_before_any_path_is_built(bad: str) -> None:
    with pytest.raises(InvalidSessionId) as info:
        normalize_session_id(bad)
    assert info.value.exit_status == ExitStatus.USER_ERROR
    assert "\n" not in str(info.value)


def test_ids_are_short_typeable_and_prefixes_resolve(store: StoreUnderTest) -> None:
    sessions = store.store()
    first = make_session(sessions)
    assert len(first) == 8 and first == normalize_session_id(first.upper())
    assert sessions.resolve(first[:3]) == first
    with pytest.raises(NoSuchSession):
        sessions.resolve("zzzzzzzz" if not first.startswith("z") else "yyyyyyyy")


def test_ambiguous_prefix_lists_candidates(store: StoreUnderTest) -> None:
    sessions = store.store()
    ids = set()
    while True:  # ids are random: make two that share a first character
        ids.add(make_session(sessions))
        firsts = [i[0] for i in ids]
        shared = {c for c in firsts if firsts.count(c) > 1}
        if shared:
            break
    prefix = shared.pop()
    with pytest.raises(AmbiguousSession) as info:
        sessions.resolve(prefix)
    assert set(info.value.candidates) == {i for i in ids if i.startswith(prefix)}


def test_listing_never_writes_anything(tmp_path: Path) -> None:
    """Session files only: what SQLite would leave on disk (a database store
    lists on a read-only connection, `PgSessionStore.reading`)."""
    store = SessionStore(tmp_path)
    sid = make_session(store, "which devices at DM-Akron are offline?")
    (tmp_path / "zzzzzzzz.sqlite").write_bytes(b"not a database at all")
    before = folder_fingerprint(tmp_path)
    summaries = {s.id: s for s in store.list_sessions()}
    assert folder_fingerprint(tmp_path) == before  # no -wal/-shm, no rewrite
    assert summaries[sid].title == "which devices at DM-Akron are offline?"
    assert summaries[sid].turns == 1
    assert summaries[sid].unreadable is None
    assert summaries["zzzzzzzz"].unreadable


def test_files_are_private_to_their_owner(tmp_path: Path) -> None:
    """Session files only: a database's rows are guarded by its logins."""
    store = SessionStore(tmp_path / "sessions")
    sid = make_session(store)
    assert stat.S_IMODE((tmp_path / "sessions").stat().st_mode) == 0o700
    assert stat.S_IMODE(store.path_for(sid).stat().st_mode) == 0o600


def test_one_writer_per_session(store: StoreUnderTest) -> None:
    sessions = store.store()
    sid = make_session(sessions)
    with store.open(sid):
        with pytest.raises(SessionBusy) as info:
            store.open(sid)
        assert info.value.exit_status == ExitStatus.SESSION_BUSY
        assert f"pid {os.getpid()}" in str(info.value)
        assert sessions.summarize(sid).is_open
        with pytest.raises(SessionBusy):
            sessions.forget(sid)
    assert not sessions.summarize(sid).is_open
    with store.open(sid):
        pass


_HOLD = """
import sys, time
from netbox_chat.config import resolve_settings
from netbox_chat.store.choose import open_store
session = open_store(resolve_settings(store=sys.argv[1], env={})).open(sys.argv[2])
print("held", flush=True)
time.sleep(60)
"""


def test_a_lock_left_by_a_dead_process_blocks_nobody(store: StoreUnderTest) -> None:
    """The lock goes with the process: a file's flock with its descriptor, the
    database's advisory lock with its connection, which the server drops."""
    sid = make_session(store.store())
    holder = start(dict(os.environ), store.value, sid, program=python(_HOLD), stderr=None)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with pytest.raises(SessionBusy, match=f"pid {holder.pid}"):
        store.open(sid)
    holder.kill()
    holder.wait()
    with store.open(sid):
        pass


def test_forget_removes_the_file_and_its_companions(tmp_path: Path) -> None:
    """Session files only: SQLite's -wal/-shm companions. Forgetting on both
    stores is tests/test_stores.py's forget test."""
    store = SessionStore(tmp_path)
    sid = make_session(store)
    keep = make_session(store)
    for companion in ("-wal", "-shm"):
        Path(f"{store.path_for(sid)}{companion}").write_bytes(b"")
    store.forget(sid)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".netbox-chat", f"{keep}.sqlite"]
    with pytest.raises(NoSuchSession):
        store.resolve(sid)


def test_foreign_damaged_and_newer_files_are_refused_not_rewritten(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    newer = make_session(store)
    conn = sqlite3.connect(store.path_for(newer))
    conn.execute("UPDATE session_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    foreign = store.path_for("aaaaaaaa")
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.commit()
    conn.close()
    truncated = store.path_for("bbbbbbbb")
    truncated.write_bytes(store.path_for(newer).read_bytes()[:1000])
    junk = store.path_for("cccccccc")
    junk.write_bytes(b"\x00" * 10 + b"hello")
    before = folder_fingerprint(tmp_path)
    for sid, words in [
        (newer, "newer netbox-chat"),
        ("aaaaaaaa", "not a netbox-chat session"),
        ("bbbbbbbb", "unreadable"),
        ("cccccccc", "unreadable"),
    ]:
        with pytest.raises(UnreadableSession) as info:
            SessionFile.open(store, sid)
        assert words in str(info.value)
        assert info.value.exit_status == ExitStatus.STORE_ERROR
        assert store.summarize(sid).unreadable
    assert folder_fingerprint(tmp_path) == before


def old_session(store: SessionStore, version: int, *, recorded: bool = True) -> Path:
    """A session file of an earlier schema (its own tables as that release
    made them), with meta, one answered turn, and the caller's rows to add."""
    store.ensure_root()
    path = store.path_for("oldschma")
    answered_file_at_schema(path, version, recorded=recorded, answer="three")
    return path


def test_a_session_from_schema_1_is_migrated_on_open(tmp_path: Path) -> None:
    """Schema 1 kept every message id of a running turn; schema 2 keeps a count.
    A file written by that release opens, keeps its ledger, and a turn it
    left running is still there to roll back."""
    store = SessionStore(tmp_path)
    path = old_session(store, 1, recorded=False)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO turns(question, status, started_at, snapshot_message_ids) "
            "VALUES ('left running', 'running', '2026-11-01T00:00:00+00:00', '[\"a\", \"b\"]')"
        )

    with SessionFile.open(store, "oldschma") as session:
        assert session.meta()["schema_version"] == str(SCHEMA_VERSION)
        assert [(t.question, t.status) for t in session.turns()] == [
            ("which sites?", "done"),
            ("left running", "running"),
        ]
        assert session.running_turns()[0].base_message_count is None
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(turns)")]
    assert "snapshot_message_ids" not in columns and "base_message_count" in columns


def tables(path: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT name, type FROM sqlite_schema"))


@pytest.mark.parametrize("edited", [True, False], ids=["with-edits", "never-edited"])
def test_a_schema_7_file_keeps_everything_in_fewer_tables(tmp_path: Path, edited: bool) -> None:
    """Schema 8 folds the one-page tables of schema 7 (issue 32, item 15):
    the meta, the turns, the history edits and each migration's record
    (with its time) are all there after the open, in a `WITHOUT ROWID`
    `session_meta`, without `session_migrations`, and with `history_edits`
    only if the file had edits. A rewind then creates the table again."""
    store = SessionStore(tmp_path)
    path = old_session(store, 7)
    if edited:
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(
                "INSERT INTO history_edits(kind, at, detail) VALUES "
                "('rewind', '2026-11-02T00:00:00+00:00', '{\"to_turn\": 1}')"
            )
    assert {"session_migrations", "sqlite_autoindex_session_meta_1"} <= set(tables(path))

    with SessionFile.open(store, "oldschma") as session:
        meta = session.meta()
        assert [(t.number, t.question, t.answer) for t in session.turns()] == [
            (1, "which sites?", "three")
        ]
        edits = session.edits()
    assert {k: meta[k] for k in ("created_at", "model", "title", "schema_version")} == {
        "created_at": "2026-11-01T00:00:00+00:00",
        "model": "m",
        "title": "which sites?",
        "schema_version": str(SCHEMA_VERSION),
    }
    records = {
        k.removeprefix(RECORD_PREFIX): v for k, v in meta.items() if k.startswith(RECORD_PREFIX)
    }
    old = {step.__name__: "2026-11-01T00:00:00+00:00" for step in MIGRATIONS[:7]}
    assert {k: v for k, v in records.items() if k in old} == old
    assert set(records) - set(old) == {"m008_fold_small_tables"}
    assert edits == ([("rewind", "2026-11-02T00:00:00+00:00", {"to_turn": 1})] if edited else [])
    left = tables(path)
    assert "session_migrations" not in left and "sqlite_autoindex_session_meta_1" not in left
    assert ("history_edits" in left) == edited
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'session_meta'"
        ).fetchone()
    assert sql.rstrip().endswith("WITHOUT ROWID")

    with SessionFile.open(store, "oldschma") as session:
        session.record_edit("rewind", to_turn=1)
        assert [kind for kind, _, _ in session.edits()] == ["rewind"] * (2 if edited else 1)
    assert "history_edits" in tables(path)


def test_unwritable_folder_fails_closed(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "file-not-folder"
        blocked.write_text("x")
        store = SessionStore(blocked / "sessions")
    else:
        tmp_path.chmod(0o500)
        store = SessionStore(tmp_path / "sessions")
    with pytest.raises(Exception) as info:
        SessionFile.create(store, model="m")
    assert getattr(info.value, "exit_status", None) == ExitStatus.STORE_ERROR


def test_ls_reads_a_file_the_same_in_one_query_as_step_by_step(tmp_path: Path) -> None:
    """`ls` reads a file of this schema with one query and any other file
    step by step: both give the same row, for the store's own turns and for
    rows someone forged (a bad server, a number as asker, a second asker)."""
    store = SessionStore(tmp_path)
    sid = make_session(store, "which sites?")
    with store.open(sid) as session:
        number = session.begin_turn(
            "and devices?",
            base_checkpoint_id=None,
            base_message_count=2,
            model="llama3.1:8b",
            server=ModelServer("openai", "http", "10.0.0.5", 8080, None),
        )
        session.finish_turn(number, "done", answer="four", message_count=4)
    conn = sqlite3.connect(store.path_for(sid))
    conn.execute("UPDATE turns SET asked_by = 7 WHERE number = 1")
    conn.execute(
        "INSERT INTO turns(number, question, status, started_at, asked_by, model,"
        " provider, server_scheme, server_host, server_port) VALUES (3, 'q', "
        "'cancelled', '2999-01-01', 'zed@host', 'm\x1b[2J', 'openai', 'http', "
        "'evil@host/x', 80)"
    )
    conn.commit()
    one_query = store.summarize(sid)
    conn.execute("UPDATE session_meta SET value = '5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    step_by_step = store.summarize(sid)
    assert replace(one_query, size_bytes=0) == replace(step_by_step, size_bytes=0)
    assert (one_query.turns, one_query.unanswered, one_query.last_active) == (
        2,
        False,
        "2999-01-01",
    )
    assert one_query.asked_by == ("7", "root@vm", "zed@host")  # the table escapes what it shows
    assert one_query.server is None  # the forged newest row names no server
    assert one_query.model == "qwen3:8b"  # not the escape sequence: the session's own model
