"""A session store is someone else's data (issue 21): what a row may hold, who
is named as asking, which lock is whose, what is printed about the store, and
that every store failure ends as the README's exit 3.

Real parts: the CLI in subprocesses, both stores (a folder; the PostgreSQL
that scripts/postgres_up.sh starts, under -m postgres), the scripted Ollama
server and the NetBox double. A "teammate" is another connection to the same
database (or another process on the same folder) doing what its role allows.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ormsgpack
import pytest

from netbox_chat.store.choose import Store
from netbox_chat.store.errors import NoSuchSession
from netbox_chat.store.migrations import RECORD_PREFIX, schema_version
from netbox_chat.store.postgres import HeldElsewhere, PgSession
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.old_releases import (
    BEFORE_SMALL_TABLES,
    RELEASES,
    has_postgres,
    release,
    release_argv,
)
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest, scratch_database, with_url
from tests.drive.process import SITES, cli, first_turn
from tests.drive.pty import PROMPT

# --- item 1: a row never chooses code ----------------------------------------------------


def packed_call(module: str, name: str, argument: Any) -> bytes:
    """A msgpack blob as LangGraph's own encoder lays out "build module.name(arg)"
    (langgraph/checkpoint/serde/jsonplus.py, EXT_CONSTRUCTOR_SINGLE_ARG = 0)."""
    return ormsgpack.packb(ormsgpack.Ext(0, ormsgpack.packb([module, name, argument])))


def inside_a_message(module: str, name: str, argument: Any) -> bytes:
    """The same call nested in an allowed AIMessage's fields (EXT_PYDANTIC_V2 = 5)."""
    inner = ormsgpack.Ext(0, ormsgpack.packb([module, name, argument]))
    fields = {"content": "hello", "additional_kwargs": {"x": inner}}
    record = ["langchain_core.messages.ai", "AIMessage", fields, "model_validate_json"]
    return ormsgpack.packb([ormsgpack.Ext(5, ormsgpack.packb(record))])


def rewrite_messages(store: StoreUnderTest, session_id: str, blob: bytes) -> int:
    """What a teammate's role can do: replace the session's stored `messages`
    writes with `blob` (type msgpack). Returns the rows rewritten."""
    if store.kind == "folder":
        path = Path(store.value) / f"{session_id}.sqlite"
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            return conn.execute(
                "UPDATE writes SET type = 'msgpack', value = ? WHERE channel = 'messages'",
                (blob,),
            ).rowcount
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(store.value)) as conn:
        return int(
            conn.execute(
                "UPDATE checkpoint_writes SET type = 'msgpack', blob = %s "
                "WHERE thread_id = %s AND channel = 'messages'",
                (blob, session_id),
            ).rowcount
        )


@pytest.fixture
def marker() -> Iterator[Path]:
    """A file only a payload that ran would create."""
    path = Path(tempfile.gettempdir()) / f"nbc-ran-{os.getpid()}"
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.parametrize("where", ["top level", "inside a message"])
def test_a_row_naming_code_is_refused_and_nothing_of_it_runs(
    where: str,
    store: StoreUnderTest,
    store_env: dict[str, str],
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    marker: Path,
    tmp_path: Path,
) -> None:
    session_id = first_turn(store_env, ollama)
    make = packed_call if where == "top level" else inside_a_message
    assert rewrite_messages(store, session_id, make("os", "system", f"touch {marker}")) > 0

    ollama.script([Text("never asked")])
    refused = cli(store_env, "ask", "and now?", "--session", session_id)
    elsewhere = {**chat_env, "NETBOX_CHAT_SESSIONS": str(tmp_path / "elsewhere")}
    copied = cli(store_env, "copy", session_id, "--to", str(tmp_path / "elsewhere"))

    assert not marker.exists()
    for out in (refused, copied):
        assert out.returncode == 3, out.stderr
        assert out.stderr.strip().splitlines() == [
            f"netbox-chat: session {session_id} holds a stored value of type os.system, "
            "which netbox-chat never writes: refused, nothing of it was run"
        ]
    assert len(ollama.requests) == 1  # the first turn's; refused before any model call
    assert json.loads(cli(elsewhere, "ls", "--json").stdout) == []  # the copy left nothing


def test_an_allowed_type_with_arguments_it_rejects_is_refused(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """An AIMessage whose content is not text: built by its validating
    constructor, refused, never taken unchecked."""
    session_id = first_turn(store_env, ollama)
    record = ["langchain_core.messages.ai", "AIMessage", {"content": 42}, "model_validate_json"]
    blob = ormsgpack.packb([ormsgpack.Ext(5, ormsgpack.packb(record))])
    assert rewrite_messages(store, session_id, blob) > 0
    ollama.script([Text("never asked")])
    out = cli(store_env, "ask", "and now?", "--session", session_id)
    assert out.returncode == 3, out.stderr
    assert "type langchain_core.messages.ai.AIMessage (ValidationError)" in out.stderr


# --- item 7: forget --unanswered looks again under the lock ------------------------------


def never_answered(store: Store) -> str:
    """What a crash in a new session's first turn leaves: a session without an answer."""
    with store.create(model="qwen3:8b") as session:
        number = session.begin_turn("first try", base_checkpoint_id=None, base_message_count=0)
        session.finish_turn(number, "interrupted")
        return session.id


def test_forget_unanswered_keeps_a_session_answered_after_its_scan(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from netbox_chat.cli import app as cli_module

    session_id = never_answered(store.store())
    kind = type(store.store())
    scan = kind.unanswered

    def scan_then_someone_answers(self: Any) -> list[str]:
        found = scan(self)
        ollama.script([Text("the answer they were shown")])
        answered = cli(store_env, "ask", "second try", "--session", session_id)
        assert answered.returncode == 0, answered.stderr
        return found

    monkeypatch.setattr(kind, "unanswered", scan_then_someone_answers)
    result = CliRunner().invoke(cli_module.app, ["forget", "--unanswered"], env=store_env)
    assert result.exit_code == 0, result.output
    assert session_id in store.session_ids()
    assert f"kept {session_id}: answered since the scan" in result.output
    assert [t["answer"] for t in store.turns(session_id)][-1] == "the answer they were shown"


# --- items 8 and 17: the lock ------------------------------------------------------------


def test_an_open_racing_a_forget_is_refused_not_left_writing_a_deleted_id(
    pg: StoreUnderTest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another terminal's `forget --yes` lands in the instant before `open`
    takes the lock: open must then find the session gone, not return it."""
    with pg.create() as session:
        session_id = session.id
    take_lock = PgSession._lock

    def forgotten_just_before(self: PgSession) -> None:
        monkeypatch.setattr(PgSession, "_lock", take_lock)
        pg.store().forget(session_id)
        take_lock(self)

    monkeypatch.setattr(PgSession, "_lock", forgotten_just_before)
    with pytest.raises(NoSuchSession):
        pg.open(session_id)


def test_a_closed_session_is_free_at_once(pg: StoreUnderTest) -> None:
    """`forget` then `resume`, or a REPL's exit then `-c`, in the same instant:
    the server frees a closed connection's lock only once it notices the client
    has gone, so close must unlock first, or the next open is refused as
    "open in another netbox-chat (unknown)"."""
    holder = pg.create()
    for _ in range(40):
        # The next process is connected and ready when the holder closes.
        waiting = PgSession(pg.store(), holder.id)
        waiting._connect()
        holder.close()
        waiting._lock()
        holder = waiting
    holder.close()


def test_a_lock_left_by_an_ended_netbox_chat_is_waited_out_not_refused(
    pg: StoreUnderTest,
) -> None:
    """A netbox-chat killed while a session was open leaves the lock to the
    server, which frees it once it notices: the next open waits that moment
    out. One of this machine's still running is refused at once, by pid, and
    so is a holder whose name (a teammate's to choose) gives no pid there can be."""
    import subprocess
    import threading

    import psycopg

    from netbox_chat.store.postgres import LOCK_KEY, application_name

    with pg.create() as session:
        session_id = session.id
    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid no longer runs
    lock = "SELECT pg_advisory_lock(" + LOCK_KEY.format(sid="%(sid)s") + ")"
    for holder_pid, running in ((ended.pid, False), (os.getpid(), True), (10**30, True)):
        conn = psycopg.connect(
            pg.value, autocommit=True, application_name=application_name(holder_pid)
        )
        conn.execute(lock, {"sid": session_id})
        freed = threading.Timer(0.3, conn.close)  # the server notices, a moment later
        freed.start()
        try:
            if running:
                with pytest.raises(HeldElsewhere, match=f"pid {holder_pid} on "):
                    pg.open(session_id)
            else:
                pg.open(session_id).close()
        finally:
            freed.join()


# Two ids whose hashtext() is the same (-1873989405): the old 32-bit lock key.
TWINS = ("ktxqyq8r", "vjzdjb1b")


def test_sessions_whose_ids_hash_alike_do_not_lock_each_other_out(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
) -> None:
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(pg.value)) as conn:
        hashes = conn.execute("SELECT hashtext(%s), hashtext(%s)", TWINS).fetchone()
    assert hashes is not None and hashes[0] == hashes[1]
    store = pg.store()
    for session_id in TWINS:
        store.create(model="qwen3:8b", session_id=session_id).close()
    with pg.open(TWINS[0]):
        listed = {s["id"]: s["is_open"] for s in json.loads(cli(store_env, "ls", "--json").stdout)}
        assert listed == {TWINS[0]: True, TWINS[1]: False}
        forgot = cli(store_env, "forget", "--yes", TWINS[1])
        assert forgot.returncode == 0, forgot.stderr
    assert pg.session_ids() == [TWINS[0]]


def test_a_lock_in_another_database_on_the_server_is_not_a_holder(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
) -> None:
    """The same key locked in the server's `postgres` database: pg_locks lists
    it, but it holds nothing of ours."""
    import psycopg

    from netbox_chat.store.postgres import LOCK_KEY

    session_id = first_turn(store_env, ollama)
    other_db = urlsplit(pg.value)._replace(path="/postgres").geturl()
    with psycopg.connect(
        other_db, autocommit=True, application_name="netbox-chat 4242@elsewhere"
    ) as other:
        other.execute(
            "SELECT pg_advisory_lock(" + LOCK_KEY.format(sid="%(sid)s") + ")",
            {"sid": session_id},
        )
        (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
        assert not summary["is_open"] and summary["holder"] is None
        ollama.script([Text("Still mine.")])
        mine = cli(store_env, "ask", "mine?", "--session", session_id)
        assert mine.returncode == 0, mine.stderr


# --- item 15: who asked ------------------------------------------------------------------


def test_the_team_store_records_the_database_role_that_asked(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
) -> None:
    role = urlsplit(pg.value).username
    session_id = first_turn({**store_env, "LOGNAME": "not-me", "USER": "not-me"}, ollama)
    (turn,) = json.loads(cli(store_env, "export", session_id, "--format", "json").stdout)["turns"]
    assert turn["asked_by"].startswith(f"{role} (not-me@")  # the claim only beside it
    (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
    assert summary["asked_by"] == [turn["asked_by"]]


# --- items 12 and 19: the URL, its password, and the store's failures -------------------


SECRET = "S3CRETPW"


def test_the_store_password_is_never_printed_and_a_typed_one_is_warned_about(
    pg: StoreUnderTest,
    store_env: dict[str, str],
) -> None:
    parts = urlsplit(pg.value)
    host = f"{parts.hostname}:{parts.port}"
    working = f"postgresql://{parts.username}@{host}{parts.path}?password={parts.password}"
    env = {k: v for k, v in store_env.items() if k != "NETBOX_CHAT_STORE"}
    runs = {
        "config, ?password=": cli(
            env, "config", "--store", f"postgresql://alice@{host}/x?password={SECRET}"
        ),
        "ls, ?password=, refused": cli(
            env, "ls", "--store", f"postgresql://alice@{host}/x?password={SECRET}"
        ),
        "ls, a bad %-escape": cli(env, "ls", "--store", f"postgresql://alice:{SECRET}%ZZ@{host}/x"),
        "ls, ?password=, working": cli(env, "ls", "--store", working),
        "ls, user:password@": cli(env, "ls", "--store", pg.value),
    }
    for what, out in runs.items():
        text = out.stdout + out.stderr
        assert SECRET not in text and str(parts.password) not in text, (what, text)
        warning = [line for line in out.stderr.splitlines() if "visible to other users" in line]
        assert warning == [
            "netbox-chat: a password in --store is visible to other users in `ps` and kept "
            "in your shell history: put it in ~/.pgpass or PGPASSWORD instead"
        ], what
    assert runs["ls, a bad %-escape"].returncode == 3
    assert 'invalid percent-encoded token: "***"' in runs["ls, a bad %-escape"].stderr
    assert runs["ls, ?password=, working"].returncode == 0
    from_env = cli(with_url(env, working), "ls")
    assert from_env.returncode == 0 and "visible to other users" not in from_env.stderr


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql://alice:pw@db.example:54x2/netops", 'invalid integer value "54x2"'),
        ("postgresql://alice:pw@[::1/netops", 'looking for matching "]"'),
    ],
)
@pytest.mark.parametrize("command", ["ls", "config", "ask"])
@pytest.mark.postgres  # libpq parses the URL: it needs the postgres extra, not a server
def test_a_malformed_store_url_is_a_store_error_not_a_bug(
    url: str, words: str, command: str, chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    pytest.importorskip("psycopg")
    args = [command, "hello?"] if command == "ask" else [command]
    out = cli(with_url(chat_env, url), *args)
    assert out.returncode == 3, out.stderr
    (line,) = out.stderr.strip().splitlines()
    shown = url.replace(":pw@", "@")  # the password is never printed
    assert line.startswith(f"netbox-chat: the session store URL {shown} is malformed: ")
    assert words in line and ":pw@" not in line
    assert ollama.requests == []


def test_a_connection_dropped_in_a_new_sessions_first_turn_is_exit_3_with_its_result(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    """README: a connection lost mid-turn ends it with exit 3 and the server's
    words; `--json` still ends with the result object."""
    from netbox_chat.store import postgres as pgstore
    from tests.drive.process import ask, wait_until

    netbox.delays["dcim/sites"] = 3.0
    ollama.script([SITES], [Text("Sites: a, b.")])
    proc = ask(store_env, "list the sites slowly", "--json")
    wait_until(lambda: any("dcim/sites" in r for r in netbox.requests), "no tool call")
    with contextlib.closing(pgstore.connect(pg.value)) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"netbox-chat {proc.pid}@%",),
        )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    (line,) = err.strip().splitlines()
    assert "unexpected error" not in line and "connection" in line
    result = json.loads(out)
    assert result["status"] == "failed" and result["kept"] is True
    assert result["error"] == line.removeprefix("netbox-chat: ")
    (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
    assert summary["id"] == result["session"] and summary["unanswered"]


# --- item 1: what earlier releases wrote still opens -------------------------------------


def release_session(code: Path, env: dict[str, str], ollama: ScriptedOllama, cwd: Path) -> str:
    """A session as that release writes it, through its own CLI and REPL: a
    tool call by `ask`, then in its REPL three more turns, a rewind (an
    `Overwrite` of the messages) and a compaction (a summary written over
    them). The three turns are typed in the REPL rather than asked by three
    more `ask` processes: the same release's code writes them either way, and
    each start of a release's CLI costs seconds (LangGraph is imported anew)."""
    import time

    import pexpect

    from tests.drive.pty import on_a_terminal

    ollama.script([SITES], [Text("Three sites: DM-Akron, DM-Columbus, DM-Dayton.")])
    old = release_argv(code)
    asked = cli(env, "ask", "which sites?", "--json", program=old, cwd=cwd, timeout=None)
    assert asked.returncode == 0, asked.stderr
    session_id = str(json.loads(asked.stdout)["session"])
    child = on_a_terminal(env, "resume", session_id, program=old, cwd=cwd, timeout=180)
    try:
        for n in (2, 3, 4):
            child.expect(PROMPT)
            time.sleep(0.3)  # let the prompt finish redrawing before typing at it
            ollama.script([Text(f"answer {n}")])
            child.sendline(f"question {n}")
            child.expect(f"answer {n}")
        # A compaction's report: its text, or (9022a98) the dataclass it printed.
        for command, outcome in (
            ("/rewind 3", "set aside"),
            ("/compact", "compacted |summarized="),
        ):
            child.expect(PROMPT)
            if command == "/compact":
                ollama.script([Text("SUMMARY: the user asked which sites there are.")])
            child.sendline(command)
            child.expect(outcome)
        child.expect(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return session_id


@pytest.mark.timeout(600)  # four turns and a REPL of that release, on a loaded machine
@pytest.mark.parametrize("commit", list(RELEASES))
@pytest.mark.long
def test_a_session_written_by_an_earlier_release_opens_and_goes_on(
    commit: str,
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    tmp_path: Path,
) -> None:
    with contextlib.ExitStack() as stack:
        code = stack.enter_context(release(commit))
        if code is None:
            pytest.skip("no git history to take the release from")
        if store.kind == "folder":
            # Releases before the database store knew only NETBOX_CHAT_SESSIONS.
            env, today_env = {**store_env, "NETBOX_CHAT_SESSIONS": store.value}, store_env
        elif not has_postgres(code):
            pytest.skip(f"{commit} had no database store")
        else:
            # A team store as that release made it, at its own schema, which
            # today's `doctor --init-store` then migrates, as a team upgrades.
            env = today_env = with_url(store_env, stack.enter_context(scratch_database()))
            made = cli(env, "doctor", "--init-store", program=release_argv(code), timeout=None)
            assert made.returncode == 0, made.stderr
        session_id = release_session(code, env, ollama, tmp_path)
        if store.kind == "postgres":
            migrated = cli(today_env, "doctor", "--init-store")
            assert migrated.returncode == 0, migrated.stderr
        before = seen(today_env, session_id)  # read as that release left it (never written)
        records = migration_records(store, session_id)
        ollama.script([Text("Still three.")])
        today = cli(today_env, "ask", "how many again?", "--session", session_id)
        after = seen(today_env, session_id)  # while the scratch database is there
        records_after = migration_records(store, session_id)
    assert today.returncode == 0, today.stderr
    sent = [m.get("content", "") for m in ollama.requests[-1]["messages"]]
    assert any("SUMMARY: the user asked" in text for text in sent)
    assert "question 4" not in json.dumps(sent)  # rewound away, as that release left it
    assert sent[-1] == "how many again?"
    # The first open migrated the file: nothing of what it held is lost.
    assert [e["kind"] for e in before["edits"]] == ["rewind", "compact"]
    assert after["edits"] == before["edits"]
    assert len(after["turns"]) == len(before["turns"]) + 1
    # Columns a migration added read as their defaults; what the release wrote stays.
    assert [ledger_row(t) for t in after["turns"][:-1]] == [ledger_row(t) for t in before["turns"]]
    assert {k: after[k] for k in KEPT} == {k: before[k] for k in KEPT}
    assert after["listed"]["title"] == before["listed"]["title"] == before["title"]
    assert after["listed"]["unreadable"] is None
    assert records.items() <= records_after.items()


KEPT = ("title", "created_at", "model_at_start")
WRITTEN = ("number", "status", "question", "answer", "started_at", "ended_at", "tokens")


def ledger_row(turn: dict[str, Any]) -> dict[str, Any]:
    """What every release wrote of a turn, as `export` shows it."""
    return {key: turn[key] for key in (*WRITTEN, "tool_calls")}


def seen(env: dict[str, str], session_id: str) -> dict[str, Any]:
    """What `export --format json` and `ls --json` show of a session."""
    exported = cli(env, "export", session_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    listed = cli(env, "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [row for row in json.loads(listed.stdout) if row["id"] == session_id]
    return {**json.loads(exported.stdout), "listed": rows[0]}


def migration_records(store: StoreUnderTest, session_id: str) -> dict[str, str]:
    """A session file's record of each migration and when it ran, wherever
    its schema keeps them (a table of its own before schema 8); none in the
    database, whose store records its schema once."""
    if store.kind != "folder":
        return {}
    path = Path(store.value) / f"{session_id}.sqlite"
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'session_migrations'").fetchone():
            return dict(conn.execute("SELECT name, applied_at FROM session_migrations"))
        rows = conn.execute(
            "SELECT substr(key, ?), value FROM session_meta WHERE key LIKE ?",
            (len(RECORD_PREFIX) + 1, f"{RECORD_PREFIX}%"),
        )
        return dict(rows)


def test_the_release_before_refuses_a_file_of_this_schema(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """A file of schema 8 opened by the last release of schema 7: refused as
    made by a newer netbox-chat (exit 3), listed as unreadable, left as it
    was; today's netbox-chat then goes on with it."""
    session_id = first_turn(chat_env, ollama)
    path = Path(chat_env["NETBOX_CHAT_SESSIONS"]) / f"{session_id}.sqlite"
    before = path.read_bytes()
    with release(BEFORE_SMALL_TABLES) as code:
        if code is None:
            pytest.skip("no git history to take the release from")
        old = release_argv(code)
        asked = cli(chat_env, "ask", "and now?", "--session", session_id, program=old, timeout=None)
        listed = cli(chat_env, "ls", "--json", program=old, timeout=None)
    newer = f"made by a newer netbox-chat (schema {schema_version()}, this one knows 7)"
    assert asked.returncode == 3
    assert asked.stderr.strip().splitlines() == [
        f"netbox-chat: session {session_id} is unreadable: {newer}"
    ]
    (row,) = json.loads(listed.stdout)
    assert row["id"] == session_id and newer in row["unreadable"]
    assert path.read_bytes() == before
    ollama.script([Text("Still three.")])
    assert cli(chat_env, "ask", "and now?", "--session", session_id).returncode == 0
