"""Issue 11, the storage half: no finished turn is ever lost, and no write is
ever half done.

Real parts: session files made by SessionFile, the real deepagents graph, the
real ChatOllama over HTTP against the scripted server, the real CLI. Storage
faults are real SQLite errors: a TEMP trigger on one connection fails one
statement the way a full disk or an I/O error does, in the middle of the
transaction it belongs to, without touching the file; a disk that is really
full is in tests/test_safety.py (a small tmpfs). After every path the ledger
is checked against the checkpoint tables (`assert_ledger_agrees`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.agent import history
from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation, RollingBack, TextDelta, TurnEvent
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.config import resolve_settings
from netbox_chat.errors import ExitStatus, UserFacingError
from netbox_chat.store import migrations
from netbox_chat.store.choose import OpenSession
from netbox_chat.store.errors import StoreError
from netbox_chat.store.sessions import SessionFile, SessionStore
from tests.doubles.inspect_session import assert_ledger_agrees, read_from_fresh_process
from tests.doubles.old_releases import answered_file_at_schema
from tests.doubles.ollama_server import Delay, ScriptedOllama, StreamError, Text
from tests.doubles.savers import stuck_write
from tests.doubles.stores import StoreUnderTest
from tests.drive.runner import invoke

# What SQLite says when the disk fills up; RAISE(ABORT) makes it a real
# SQLite error on that statement, which undoes the statement and leaves the
# transaction to its owner, as SQLITE_FULL does.
DISK_FULL = "database or disk is full"


def open_conversation(session: OpenSession, ollama: ScriptedOllama) -> Conversation:
    settings = resolve_settings(ollama_url=ollama.url, env={})
    saver = open_saver(session)
    graph = build_agent(settings, [], saver)
    return Conversation(session, graph, saver, find_end_node(graph))


def close(conversation: Conversation) -> None:
    conversation.saver.conn.close()
    conversation.session.close()


def reopen(conversation: Conversation, ollama: ScriptedOllama) -> Conversation:
    close(conversation)
    session = SessionFile.open(conversation.session.store, conversation.session.id)
    return open_conversation(session, ollama)


@pytest.fixture
async def conversation(ollama: ScriptedOllama, sessions_dir: Path) -> AsyncIterator[Conversation]:
    session = SessionFile.create(SessionStore(sessions_dir), model="qwen3:8b")
    yield open_conversation(session, ollama)


def fail_statement(conn: sqlite3.Connection, name: str, when: str) -> None:
    """Make one kind of statement on this connection fail as a full disk does."""
    conn.execute(f"CREATE TEMP TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, '{DISK_FULL}'); END")


def free_space(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f"DROP TRIGGER temp.{name}")


def contents(conversation: Conversation) -> list[Any]:
    return [m.content for m in conversation.messages()]


async def cancel_while_waiting(conversation: Conversation, question: str) -> Any:
    """Cancel a turn while the model is still thinking (its reply is delayed)."""
    task = asyncio.create_task(conversation.run_turn(question))
    await asyncio.sleep(0.5)
    task.cancel()
    return await task


def thread_rows(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "checkpoints": conn.execute(
            "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints ORDER BY 1"
        ).fetchall(),
        "writes": conn.execute(
            "SELECT checkpoint_id, task_id, idx, channel FROM writes ORDER BY 1, 2, 3"
        ).fetchall(),
    }


# --- defect 1: a later turn never deletes finished turns ----------------------------------


async def test_a_turn_whose_rollback_was_not_recorded_is_finished_before_the_next(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    """Turn 2 is cancelled and the ledger write after its rollback fails (disk
    full): the REPL shows the red line and the user asks on. The next turn
    first finishes turn 2 in the ledger, so reopening the session later keeps
    turn 3, which the user has read."""
    ollama.script([Text("answer one")])
    assert (await conversation.run_turn("question one")).status == "done"

    ledger = conversation.session.db
    fail_statement(ledger, "full", "BEFORE UPDATE OF status ON turns WHEN new.number = 2")
    seen: dict[str, Any] = {}

    def sink(event: TurnEvent) -> None:
        if isinstance(event, RollingBack):
            seen["rows"] = thread_rows(conversation.saver.conn)

    ollama.script([Delay(3.0), Text("too late")])
    task = asyncio.create_task(conversation.run_turn("question two", sink))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(StoreError, match="could not be rolled back now"):
        await task
    assert [t.status for t in conversation.session.turns()] == ["done", "running"]
    # the rollback and its record are one transaction: neither was written
    assert thread_rows(conversation.saver.conn) == seen["rows"]

    # Still full: the next question is refused before the model is asked.
    requests = len(ollama.requests)
    with pytest.raises(StoreError, match=DISK_FULL):
        await conversation.run_turn("question three")
    assert len(ollama.requests) == requests
    assert [t.status for t in conversation.session.turns()] == ["done", "running"]

    free_space(ledger, "full")
    ollama.script([Text("answer three")])
    assert (await conversation.run_turn("question three")).status == "done"
    statuses = [(t.number, t.status) for t in conversation.session.turns()]
    assert statuses == [(1, "done"), (2, "cancelled"), (3, "done")]

    resumed = reopen(conversation, ollama)
    assert resumed.recover_interrupted() == []
    assert contents(resumed) == ["question one", "answer one", "question three", "answer three"]
    close(resumed)
    assert_ledger_agrees(resumed.session.store.root, resumed.session.id)


async def test_recovery_never_rolls_back_under_a_later_finished_turn(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    """A file written before the fix: turn 2 still `running` although turn 3
    finished after it (its rollback had been done, its record had not). The
    next open records turn 2 and deletes nothing; turn 3 stays."""
    for n in (1, 2, 3):
        ollama.script([Text(f"answer {n}")])
        assert (await conversation.run_turn(f"question {n}")).status == "done"
    ledger = conversation.session.db
    ledger.execute("UPDATE turns SET status = 'running' WHERE number = 2")
    ledger.commit()
    before = thread_rows(conversation.saver.conn)

    resumed = reopen(conversation, ollama)
    (report,) = resumed.recover_interrupted()
    assert report.turn == 2 and report.removed_messages == 0
    assert thread_rows(resumed.saver.conn) == before
    assert [t.status for t in resumed.session.turns()] == ["done", "interrupted", "done"]
    close(resumed)
    assert_ledger_agrees(resumed.session.store.root, resumed.session.id)


# --- defect 2: the rollback is one transaction --------------------------------------------


async def test_a_rollback_that_fails_half_way_leaves_nothing_half_done(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    """Pass 2 (the writes on the base) fails after pass 1 (the turn's
    checkpoints) ran: neither may stay, and the next turn finishes the
    rollback once the disk has room again. The turn fails mid-answer: a
    cancelled one stores nothing to roll back (checkpoints.sqlite.Run)."""
    ollama.script([Text("answer one")])
    await conversation.run_turn("question one")
    base = conversation.head_checkpoint_id()
    saver = conversation.saver
    fail_statement(saver.conn, "full", f"BEFORE DELETE ON writes WHEN old.checkpoint_id = '{base}'")
    seen: dict[str, Any] = {}

    def sink(event: TurnEvent) -> None:
        if isinstance(event, RollingBack):  # right before the rollback starts
            seen["rows"] = thread_rows(saver.conn)

    ollama.script([Text("half an "), StreamError("llama runner process has terminated")])
    with pytest.raises(StoreError, match="could not be rolled back now"):
        await conversation.run_turn("question two", sink)
    assert thread_rows(saver.conn) == seen["rows"]  # pass 1 undone with pass 2

    free_space(saver.conn, "full")
    ollama.script([Text("answer three")])
    assert (await conversation.run_turn("question three")).status == "done"
    assert [t.status for t in conversation.session.turns()] == ["done", "failed", "done"]
    assert "question two" not in json.dumps(ollama.requests[-1]["messages"])
    close(conversation)
    state = read_from_fresh_process(conversation.session.store.root, conversation.session.id)
    assert [m["content"] for m in state["messages"]] == [
        "question one",
        "answer one",
        "question three",
        "answer three",
    ]


# --- defect 3: rewind and compaction through a copy of the saver ---------------------------


@pytest.fixture
def strict_msgpack(monkeypatch: pytest.MonkeyPatch) -> None:
    """LANGGRAPH_STRICT_MSGPACK=true, which LangGraph reads once at import:
    `compile()` then hands the graph `with_allowlist`'s shallow copy of the
    saver (langgraph/graph/state.py)."""
    import langgraph._internal._serde as graph_serde
    import langgraph.checkpoint.serde._msgpack as msgpack_flags

    monkeypatch.setattr(graph_serde, "STRICT_MSGPACK_ENABLED", True)
    monkeypatch.setattr(msgpack_flags, "STRICT_MSGPACK_ENABLED", True)


@pytest.mark.usefixtures("strict_msgpack")
async def test_a_rewind_that_fails_half_way_through_a_saver_copy_changes_nothing(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    session = SessionFile.create(SessionStore(sessions_dir), model="qwen3:8b")
    conversation = open_conversation(session, ollama)
    assert conversation.graph.checkpointer is not conversation.saver  # the copy
    for n in (1, 2):
        ollama.script([Text(f"answer {n}")])
        await conversation.run_turn(f"question {n}")
    before = thread_rows(conversation.saver.conn)
    # update_state stores its writes on the head, then the new checkpoint:
    # the second of the two fails.
    fail_statement(conversation.saver.conn, "full", "BEFORE INSERT ON checkpoints")
    with pytest.raises(history.HistoryEditError, match="nothing changed"):
        history.rewind(conversation, 1)
    assert thread_rows(conversation.saver.conn) == before
    assert len(conversation.messages()) == 4
    assert [t.status for t in session.turns()] == ["done", "done"]

    free_space(conversation.saver.conn, "full")
    assert history.rewind(conversation, 1).messages_after == 2
    assert contents(conversation) == ["question 1", "answer 1"]
    close(conversation)
    assert_ledger_agrees(session.store.root, session.id)


async def test_a_rewind_whose_ledger_record_fails_changes_nothing(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    """The rewind and its record in the ledger are one transaction: a full
    disk on the ledger's row leaves the conversation as it was, so /history
    can never disagree with what the model sees."""
    for n in (1, 2):
        ollama.script([Text(f"answer {n}")])
        await conversation.run_turn(f"question {n}")
    db = conversation.session.db
    with db.atomic():  # there once a file has had an edit (m008); a trigger needs it
        migrations.create_history_edits(db)
    before = thread_rows(conversation.saver.conn)
    fail_statement(db, "full", "BEFORE INSERT ON history_edits")
    with pytest.raises(history.HistoryEditError, match=f"{DISK_FULL}.*nothing changed"):
        history.rewind(conversation, 1)
    assert thread_rows(conversation.saver.conn) == before
    assert [t.status for t in conversation.session.turns()] == ["done", "done"]
    free_space(conversation.session.db, "full")
    assert history.rewind(conversation, 1).set_aside == [2]
    close(conversation)
    assert_ledger_agrees(conversation.session.store.root, conversation.session.id)


# --- defect 4: migrations -----------------------------------------------------------------


def schema_1_session(store: SessionStore) -> str:
    """A session file as the release before recorded migrations left it
    (schema 1): one answered turn."""
    store.ensure_root()
    sid = "schema1a"
    answered_file_at_schema(store.path_for(sid), 1, recorded=False)
    return sid


def turn_columns(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[1] for row in conn.execute("PRAGMA table_info(turns)")]
    finally:
        conn.close()


def test_a_migration_that_fails_half_way_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """Schema 2 is two ALTERs. A failure after the first (a crash would do
    the same) must leave schema 1 whole, and the next open migrates it."""
    store = SessionStore(tmp_path)
    sid = schema_1_session(store)
    path = store.path_for(sid)
    columns = turn_columns(path)
    real = migrations.MIGRATIONS[1]

    def first_alter_then_fail(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE turns DROP COLUMN snapshot_message_ids")
        raise sqlite3.OperationalError("disk I/O error")

    migrations.MIGRATIONS[1] = first_alter_then_fail
    try:
        with pytest.raises(StoreError, match="disk I/O error") as failed:
            SessionFile.open(store, sid)
    finally:
        migrations.MIGRATIONS[1] = real
    assert failed.value.exit_status == ExitStatus.STORE_ERROR
    assert turn_columns(path) == columns

    with SessionFile.open(store, sid) as session:
        assert session.meta()["schema_version"] == str(migrations.schema_version())
        assert [(t.question, t.status) for t in session.turns()] == [("which sites?", "done")]
        applied = [
            key.removeprefix(migrations.RECORD_PREFIX)
            for key in session.meta()
            if key.startswith(migrations.RECORD_PREFIX)
        ]
    assert sorted(applied) == [
        "m002_base_message_count",
        "m003_turn_measurements",
        "m004_asked_by",
        "m005_turn_model",
        "m006_turn_server",
        "m007_turn_grounding",
        "m008_fold_small_tables",
    ]
    assert "snapshot_message_ids" not in turn_columns(path)


def test_export_reads_a_schema_1_file_without_writing_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    sid = schema_1_session(store)
    before = store.path_for(sid).read_bytes()
    ran = invoke(["export", sid, "--format", "json"], env={"NETBOX_CHAT_SESSIONS": str(store.root)})
    assert ran.exit_code == 0, ran.stderr
    transcript = json.loads(ran.stdout)
    assert transcript["schema_version"] == 1
    assert [(t["question"], t["answer"]) for t in transcript["turns"]] == [
        ("which sites?", "Three sites.")
    ]
    assert store.path_for(sid).read_bytes() == before


# --- defect 5: a clock stepped back between two processes -----------------------------------


@pytest.fixture
def clock_an_hour_behind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The next process starts with the wall clock stepped back an hour (NTP,
    a restored VM): checkpoint ids come from `time.time_ns()`, and LangGraph
    keeps them increasing only within one process."""
    import langgraph.checkpoint.base.id as checkpoint_ids

    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3600 * 10**9)
    monkeypatch.setattr(checkpoint_ids, "_last_v6_timestamp", None)  # a new process
    yield


@pytest.fixture
async def on_either_store(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> AsyncIterator[Conversation]:
    """A conversation on a new session in either store (the `store` fixture)."""
    yield open_conversation(store.create(), ollama)


async def test_a_turn_after_the_clock_stepped_back_is_seen_and_rolls_back(
    on_either_store: Conversation,
    store: StoreUnderTest,
    ollama: ScriptedOllama,
    request: pytest.FixtureRequest,
) -> None:
    conversation = on_either_store
    ollama.script([Text("answer one")])
    await conversation.run_turn("question one")
    close(conversation)
    request.getfixturevalue("clock_an_hour_behind")
    resumed = open_conversation(store.open(conversation.session.id), ollama)
    ollama.script([Text("answer two")])
    assert (await resumed.run_turn("question two")).status == "done"
    assert contents(resumed) == ["question one", "answer one", "question two", "answer two"]
    assert resumed.head_problems() == []
    # the turn's checkpoint became the head, though its id's clock is an hour behind
    assert resumed.head_checkpoint_id() == resumed.session.turns()[-1].end_checkpoint_id
    after_two = store.thread_rows(resumed.session.id)

    ollama.script([Delay(3.0), Text("too late")])
    outcome = await cancel_while_waiting(resumed, "question three")
    assert outcome.rollback is not None and outcome.rollback.verified
    assert store.thread_rows(resumed.session.id) == after_two  # exactly, not only the head
    ollama.script([Text("answer four")])
    assert (await resumed.run_turn("question four")).status == "done"
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "answer two" in sent and "question three" not in sent
    assert [t.status for t in resumed.session.turns()] == ["done", "done", "cancelled", "done"]
    close(resumed)
    store.assert_ledger_agrees(resumed.session.id)


async def test_a_finished_turn_whose_checkpoint_did_not_become_the_head_is_rolled_back(
    on_either_store: Conversation,
    store: StoreUnderTest,
    ollama: ScriptedOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check behind the fix above: should the clock step back while a
    turn runs and LangGraph's id generator forget its last id, the finished
    turn's checkpoint sorts below the old head. The turn must not be recorded
    as done (the model would never see it); it fails and is rolled back,
    row for row: its checkpoint sorts below the base, so a rollback that
    deleted only ids after the base would leave it behind."""
    import langgraph.checkpoint.base.id as checkpoint_ids

    conversation = on_either_store
    ollama.script([Text("answer one")])
    await conversation.run_turn("question one")
    before = store.thread_rows(conversation.session.id)
    real = time.time_ns

    def step_back(event: TurnEvent) -> None:
        if isinstance(event, TextDelta):
            monkeypatch.setattr(time, "time_ns", lambda: real() - 3600 * 10**9)
            monkeypatch.setattr(checkpoint_ids, "_last_v6_timestamp", None)

    ollama.script([Text("answer two")])
    outcome = await conversation.run_turn("question two", step_back)
    assert outcome.status == "failed" and outcome.error
    assert "did not become the session's head" in outcome.error
    assert outcome.rollback is not None and outcome.rollback.verified
    assert contents(conversation) == ["question one", "answer one"]
    assert store.thread_rows(conversation.session.id) == before

    ollama.script([Text("answer three")])
    assert (await conversation.run_turn("question three")).status == "done"
    assert contents(conversation)[-1] == "answer three"
    close(conversation)
    store.assert_ledger_agrees(conversation.session.id)


# --- defect 9: a write still running when the rollback would start ----------------------------


async def test_a_rollback_waits_for_no_write_it_cannot_see_finish(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    """drain() timing out: the rollback does not run (a write could land
    after it), the turn stays running in the ledger, the user is told, and the
    next turn finishes it once the write is done."""
    ollama.script([Text("answer one")])
    await conversation.run_turn("question one")
    conversation.saver.drain_timeout = 0.3
    call, release = await stuck_write(conversation.saver)
    ollama.script([Text("partial"), StreamError("model crashed")])
    with pytest.raises(StoreError, match=r"still running after 0\.3 s") as failed:
        await conversation.run_turn("question two")
    assert "could not be rolled back now" in str(failed.value)
    assert [t.status for t in conversation.session.turns()] == ["done", "running"]

    with pytest.raises(UserFacingError, match="still running"):
        history.rewind(conversation, 0)
    release.set()
    await call
    ollama.script([Text("answer three")])
    assert (await conversation.run_turn("question three")).status == "done"
    assert [t.status for t in conversation.session.turns()] == ["done", "failed", "done"]
    assert "question two" not in json.dumps(ollama.requests[-1]["messages"])

    call, release = await stuck_write(conversation.saver)  # and a rewind waits too
    with pytest.raises(history.HistoryEditError, match=r"still running.*nothing changed"):
        history.rewind(conversation, 1)
    release.set()
    await call
    assert len(conversation.messages()) == 4
    close(conversation)
    assert_ledger_agrees(conversation.session.store.root, conversation.session.id)


# --- defect 6: file systems SQLite's WAL mode does not work on ----------------------------------


def nfs_mount_table(folder: Path, table: Path) -> Path:
    """A kernel mount table (proc(5) format) that puts `folder` on NFS."""
    table.write_text(
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
        f"97 22 0:52 / {folder} rw,relatime shared:50 - nfs4 "
        "filer:/export/sessions rw,vers=4.2\n"
    )
    return table


def test_a_sessions_folder_on_nfs_is_refused_with_exit_3(
    chat_env: dict[str, str],
    sessions_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel's mount table says the folder is NFS: refuse before any
    file is created, in one line (no NFS server here, so the table is one
    written for the test in the kernel's own format, proc(5))."""
    import netbox_chat.store.sessions as sessions

    sessions_dir.mkdir(parents=True)
    monkeypatch.setattr(sessions, "MOUNTINFO", nfs_mount_table(sessions_dir, tmp_path / "mnt"))
    ran = invoke(["ask", "which sites?"], env=chat_env)
    assert ran.exit_code == ExitStatus.STORE_ERROR
    (line,) = ran.stderr.splitlines()
    assert "is on a network file system (nfs4)" in line and "local disk" in line
    assert list(sessions_dir.iterdir()) == []


# --- defect 1 through the REPL, on a disk that is really full -------------------------------


def test_the_repl_after_a_turn_the_full_disk_left_unrecorded_keeps_later_answers(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """The disk fills up while turn 2 is answered: neither the turn nor its
    rollback can be written, the REPL says so and goes on. Once there is room,
    the next question first finishes turn 2, and its answer survives `resume`."""
    from tests.doubles.disks import tmpfs
    from tests.drive.pty import PROMPT, leave, only_session, resume, spawn

    with tmpfs(tmp_path / "small", "size=2m,mode=0700") as mount:
        sessions_dir = mount / "sessions"
        env = dict(chat_env, NETBOX_CHAT_SESSIONS=str(sessions_dir))
        filler = mount / "filler"

        def fill_the_disk(body: dict[str, Any]) -> list[Any]:
            with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * 65536)
            ollama.responder = None
            return [Text("An answer nobody can store.")]

        ollama.script([Text("Three sites.")])
        child = spawn(env)
        child.sendline("which sites?")
        child.expect("Three sites.")
        child.expect(PROMPT)
        ollama.responder = fill_the_disk
        child.sendline("which devices?")
        child.expect("could not be rolled back now")
        child.expect(PROMPT)

        filler.unlink()
        ollama.script([Text("Two devices are offline.")])
        child.sendcontrol("u")  # the failed question came back to the line
        child.sendline("which devices are offline?")
        child.expect("Two devices are offline.")
        child.expect(PROMPT)
        leave(child)
        sid = only_session(sessions_dir)
        assert_ledger_agrees(sessions_dir, sid)

        ollama.script([Text("Still two.")])
        child, shown = resume(env, sid)
        assert "was interrupted and rolled back" not in shown
        assert "Two devices are offline." in shown
        child.sendline("and now?")
        child.expect("Still two.")
        child.expect(PROMPT)
        leave(child)
        questions = [m["content"] for m in ollama.requests[-1]["messages"] if m["role"] == "user"]
        assert questions == ["which sites?", "which devices are offline?", "and now?"]
        state = read_from_fresh_process(sessions_dir, sid)
        assert [t["status"] for t in state["turns"]] == ["done", "failed", "done", "done"]


def test_doctor_flags_a_sessions_folder_on_nfs(
    chat_env: dict[str, str],
    sessions_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import netbox_chat.store.sessions as sessions

    sessions_dir.mkdir(parents=True)
    monkeypatch.setattr(sessions, "MOUNTINFO", nfs_mount_table(sessions_dir, tmp_path / "mnt"))
    ran = invoke(["doctor"], env=chat_env)
    assert ran.exit_code == ExitStatus.USER_ERROR
    (line,) = [line for line in ran.stdout.splitlines() if "sessions folder" in line]
    assert line.startswith("✗") and "network file system (nfs4)" in line
