"""What only a database store has: a connection that can drop mid-turn, a
writer on another machine, a server that refuses or lacks the schema, and an
install without the postgres extra.

Real PostgreSQL (scripts/postgres_up.sh, NETBOX_CHAT_TEST_PG), the real CLI in
subprocesses, the scripted Ollama server and the NetBox double.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from netbox_chat.agent import history
from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation, RollingBack, TurnEvent
from netbox_chat.store.choose import open_store
from netbox_chat.store.errors import StoreError
from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Delay, ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest, with_url
from tests.drive.process import SITES as SITES_CALL
from tests.drive.process import cli, first_turn, hold_in_a_tool

INSTALL_HINT = "pip install 'netbox-chat[postgres]'"


def replaced(url: str, **parts: str) -> str:
    split = urlsplit(url)
    user = parts.get("user", split.username or "")
    password = parts.get("password", split.password or "")
    netloc = (
        f"{user}:{password}@{parts.get('host', split.hostname)}:{parts.get('port', split.port)}"
    )
    return urlunsplit(split._replace(netloc=netloc, path=parts.get("path", split.path)))


def test_a_connection_dropped_mid_turn_is_rolled_back_when_next_opened(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    from netbox_chat.store import postgres as pgstore

    session_id = first_turn(store_env, ollama)
    before = inspect(pg.value, session_id)["messages"]
    holder = hold_in_a_tool(store_env, ollama, netbox, session_id, seconds=3.0)
    with contextlib.closing(pgstore.connect(pg.value)) as admin:
        (killed,) = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name LIKE %s",
            (f"netbox-chat {holder.pid}@%",),
        ).fetchone()
    assert killed == 1  # a process with a session open holds one connection
    ollama.script([Text("Sites: a, b.")])  # the model's answer after the tool
    _, err = holder.communicate(timeout=60)
    assert holder.returncode == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "session database" in lines[0]
    assert f"the next time session {session_id} is opened" in lines[0]

    ollama.script([Text("Two sites.")])
    resumed = cli(store_env, "ask", "how many now?", "--session", session_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "turn 2 was interrupted and rolled back" in resumed.stderr
    state = inspect(pg.value, session_id)
    assert state["messages"][: len(before)] == before
    assert [t["status"] for t in state["turns"]] == ["done", "interrupted", "done"]
    assert state["head_problems"] == [] and state["pending_writes"] == 0


def test_a_writer_on_another_machine_is_named_and_its_lock_dies_with_it(
    pg: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Two connections with different `application_name`: the other machine's
    netbox-chat, as the server reports it, holds the session's advisory lock."""
    import psycopg

    from netbox_chat.store.postgres import LOCK_KEY

    session_id = first_turn(store_env, ollama)
    other = psycopg.connect(
        pg.value, autocommit=True, application_name="netbox-chat 4242@night-shift-laptop"
    )
    try:
        lock = "SELECT pg_advisory_lock(" + LOCK_KEY.format(sid="%(sid)s") + ")"
        other.execute(lock, {"sid": session_id})
        refused = cli(store_env, "ask", "mine now?", "--session", session_id)
        assert refused.returncode == 4, refused.stderr
        assert refused.stderr.strip() == (
            f"netbox-chat: session {session_id} is open in another netbox-chat "
            "(pid 4242 on night-shift-laptop)"
        )
        (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
        assert summary["is_open"] and summary["open_by"] == 4242
        assert summary["holder"] == "netbox-chat 4242@night-shift-laptop"
        assert len(ollama.requests) == 1  # refused before any model call
    finally:
        other.close()  # the server drops the lock with the connection
    ollama.script([Text("Yours.")])
    mine = cli(store_env, "ask", "mine now?", "--session", session_id)
    assert mine.returncode == 0, mine.stderr


def test_an_unreachable_or_refusing_server_fails_closed_with_exit_3(
    pg: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    secret = urlsplit(pg.value).password or ""
    for url, words in [
        (replaced(pg.value, port="1"), "Connection refused"),
        (replaced(pg.value, password="not-the-password"), "password authentication failed"),
    ]:
        for args in (["ask", "hello?"], ["ls"], ["resume", "abc"]):
            out = cli(with_url(store_env, url), *args)
            assert out.returncode == 3, (args, out.stderr)
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1 and words in lines[0], lines
            assert lines[0].startswith("netbox-chat: cannot open the session store postgresql://")
            assert secret not in out.stderr and "not-the-password" not in out.stderr
    assert ollama.requests == []  # never a model call, never a fallback


def test_a_database_without_the_schema_is_refused_until_init_store(
    pg: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    from netbox_chat.store import postgres as pgstore

    scratch = f"netbox_chat_scratch_{uuid.uuid4().hex[:8]}"
    url = replaced(pg.value, path=f"/{scratch}")
    with contextlib.closing(pgstore.connect(pg.value)) as admin:
        admin.execute(f"CREATE DATABASE {scratch}")
    try:
        env = with_url(store_env, url)
        for args in (["ask", "hello?"], ["ls"]):
            out = cli(env, *args)
            assert out.returncode == 3, out.stderr
            assert out.stderr.strip().endswith(
                "has no netbox-chat schema: create it with `netbox-chat doctor --init-store`"
            )
        assert ollama.requests == []
        with contextlib.closing(pgstore.connect(url)) as conn:
            assert conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'netbox_chat'"
            ).fetchone() == (0,)

        checked = cli(env, "doctor")
        assert "✗ session store" in checked.stdout and "--init-store" in checked.stdout
        made = cli(env, "doctor", "--init-store")
        assert made.returncode == 0, made.stderr
        assert f"schema netbox_chat created (version {pgstore.PG_SCHEMA_VERSION}" in made.stdout
        again = cli(env, "doctor", "--init-store")
        assert "already current" in again.stdout
        assert "✓ session store" in cli(env, "doctor").stdout

        ollama.script([Text("Hello.")])
        asked = cli(env, "ask", "hello?")
        assert asked.returncode == 0, asked.stderr
    finally:
        with contextlib.closing(pgstore.connect(pg.value)) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {scratch} WITH (FORCE)")


def test_without_the_extra_a_database_url_names_the_install_command(
    chat_env: dict[str, str], tmp_path: Path
) -> None:
    """An install without psycopg: a package named psycopg that cannot be
    imported stands first on the path, as a missing one would fail."""
    blocked = tmp_path / "no-extra" / "psycopg"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'psycopg'\")\n"
    )
    env = {
        **chat_env,
        "PYTHONPATH": os.pathsep.join([str(blocked.parent), str(Path(__file__).parent.parent)]),
        "NETBOX_CHAT_STORE": "postgresql://team@db.example:5432/netbox_chat",
    }
    for args in (["ls"], ["ask", "hello?"], ["export", "abc"]):
        out = cli(env, *args)
        assert out.returncode == 3, out.stderr
        assert out.stderr.strip() == (
            f"netbox-chat: a PostgreSQL session store needs the postgres extra: {INSTALL_HINT}"
        )


def test_copy_hands_a_session_to_the_team_and_back_with_its_memory(
    pg: StoreUnderTest,
    store_env: dict[str, str],
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    tmp_path: Path,
) -> None:
    laptop = tmp_path / "laptop"
    local = {**chat_env, "NETBOX_CHAT_SESSIONS": str(laptop)}
    ollama.script([SITES_CALL], [Text("Three sites: DM-Akron, DM-Columbus, DM-Dayton.")])
    made = cli(local, "ask", "which sites are there?", "--json")
    assert made.returncode == 0, made.stderr
    session_id = json.loads(made.stdout)["session"]
    local_export = json.loads(cli(local, "export", session_id, "--format", "json").stdout)

    copied = cli(local, "copy", session_id[:4], "--to", pg.value)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.startswith(f"copied session {session_id} (")
    assert pg.value.split("@")[0].split(":")[-1] not in copied.stdout  # no password shown
    team_export = json.loads(cli(store_env, "export", session_id, "--format", "json").stdout)
    assert team_export["turns"] == local_export["turns"]  # times and who asked, as they were

    ollama.script([Text("Dayton is the newest.")])
    resumed = cli(store_env, "ask", "which is the newest?", "--session", session_id)
    assert resumed.returncode == 0, resumed.stderr
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "which sites are there?" in sent and "DM-Akron, DM-Columbus" in sent
    assert '"role": "tool"' in sent  # the tool result came along too

    again = cli(local, "copy", session_id, "--to", pg.value)
    assert again.returncode == 1 and "is already in" in again.stderr

    back = tmp_path / "back"
    returned = cli(store_env, "copy", session_id, "--to", str(back))
    assert returned.returncode == 0, returned.stderr
    home = {**chat_env, "NETBOX_CHAT_SESSIONS": str(back)}
    ollama.script([Text("Three, still.")])
    last = cli(home, "ask", "how many in all?", "--session", session_id)
    assert last.returncode == 0, last.stderr
    humans = [m["content"] for m in inspect(back, session_id)["messages"] if m["type"] == "human"]
    assert humans == ["which sites are there?", "which is the newest?", "how many in all?"]


def test_the_postgres_saver_crosses_the_same_bridge_as_the_sqlite_one() -> None:
    """Every async method the Pregel loop may call runs the sync PostgresSaver's
    own method on a worker thread, through the one bridge (and so is drained
    before a rollback), never PostgresSaver's NotImplementedError."""
    pytest.importorskip("psycopg")
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.postgres import PostgresSaver

    from netbox_chat.checkpoints.postgres import BridgedPostgresSaver
    from netbox_chat.checkpoints.sqlite import BRIDGED_METHODS, BridgedSqliteSaver, SyncSaverBridge

    for name in BRIDGED_METHODS:
        bridged = getattr(BridgedPostgresSaver, name)
        assert bridged is getattr(SyncSaverBridge, name) is getattr(BridgedSqliteSaver, name)
        assert bridged is not getattr(PostgresSaver, name)
        assert bridged is not getattr(BaseCheckpointSaver, name)


# --- one transaction on PostgreSQL too ------------------------------------------------------

# What PostgreSQL says when its disk fills up, raised by a trigger on one
# statement, in the middle of the transaction it belongs to.
DISK_FULL = "could not extend file: No space left on device"


@contextlib.contextmanager
def failing(url: str, table: str, when: str) -> Iterator[None]:
    """Make one kind of statement on `table` fail as a full disk does."""
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(url)) as admin:
        admin.execute(
            "CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{DISK_FULL}'; END $$"
        )
        admin.execute(
            f"CREATE TRIGGER disk_full BEFORE {when} ON {table} FOR EACH ROW "
            "EXECUTE FUNCTION disk_full()"
        )
        try:
            yield
        finally:
            admin.execute(f"DROP TRIGGER disk_full ON {table}")


def pg_conversation(pg: StoreUnderTest, ollama: ScriptedOllama) -> Conversation:
    from netbox_chat.checkpoints.saver import open_saver

    settings = pg.settings(ollama_url=ollama.url)
    session = open_store(settings).create(model=settings.model)
    saver = open_saver(session)
    graph = build_agent(settings, [], saver)
    return Conversation(session, graph, saver, find_end_node(graph))


async def test_a_rewind_whose_ledger_record_fails_changes_nothing_on_postgres(
    pg: StoreUnderTest, ollama: ScriptedOllama
) -> None:
    """The rewind's `update_state`, its check and its ledger row are one
    transaction on the database too: a full disk on the ledger's row leaves
    every checkpoint row as it was."""
    conversation = pg_conversation(pg, ollama)
    session_id = conversation.session.id
    for n in (1, 2):
        ollama.script([Text(f"answer {n}")])
        assert (await conversation.run_turn(f"question {n}")).status == "done"
    before = pg.thread_rows(session_id)
    with failing(pg.value, "history_edits", "INSERT"):
        with pytest.raises(history.HistoryEditError, match=f"{DISK_FULL}.*nothing changed"):
            history.rewind(conversation, 1)
        assert pg.thread_rows(session_id) == before
        assert pg.statuses(session_id) == [(1, "done"), (2, "done")]
    assert history.rewind(conversation, 1).set_aside == [2]
    conversation.session.close()
    state = inspect(pg.value, session_id)
    assert [m["content"] for m in state["messages"]] == ["question 1", "answer 1"]


async def test_a_rollback_whose_ledger_record_fails_leaves_nothing_half_done_on_postgres(
    pg: StoreUnderTest, ollama: ScriptedOllama
) -> None:
    """A cancelled turn's rollback and the ledger row that records it are one
    transaction: when the row cannot be written the turn's rows stay as they
    were (the ledger still says `running`), and the next turn finishes the
    rollback first."""
    conversation = pg_conversation(pg, ollama)
    session_id = conversation.session.id
    ollama.script([Text("answer one")])
    assert (await conversation.run_turn("question one")).status == "done"
    seen: dict[str, Any] = {}

    def sink(event: TurnEvent) -> None:
        if isinstance(event, RollingBack):  # right before the rollback starts
            seen["rows"] = pg.thread_rows(session_id)

    with failing(pg.value, "turns", "UPDATE"):
        ollama.script([Delay(3.0), Text("too late")])
        task = asyncio.create_task(conversation.run_turn("question two", sink))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(StoreError, match="could not be rolled back now"):
            await task
        assert pg.thread_rows(session_id) == seen["rows"]
        assert pg.statuses(session_id) == [(1, "done"), (2, "running")]
    ollama.script([Text("answer three")])
    assert (await conversation.run_turn("question three")).status == "done"
    assert pg.statuses(session_id) == [(1, "done"), (2, "cancelled"), (3, "done")]
    assert "question two" not in json.dumps(ollama.requests[-1]["messages"])
    conversation.session.close()
    state = inspect(pg.value, session_id)
    assert [m["content"] for m in state["messages"]] == [
        "question one",
        "answer one",
        "question three",
        "answer three",
    ]


# --- the answer to COMMIT is lost (issue 21, item 5) ------------------------------------------


@pytest.mark.parametrize(
    ("forward", "refuse_after"),
    [(True, False), (True, True), (False, True)],
    ids=["committed-answer-lost", "committed-store-gone", "never-committed-store-gone"],
)
def test_what_the_user_is_told_after_a_lost_commit_is_what_the_store_holds(
    forward: bool,
    refuse_after: bool,
    pg: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
) -> None:
    """The connection drops as a finished turn's answer is committed. When
    the store can be asked again, the user is told what it holds (here: the
    answer is kept, exit 0). When it cannot, the user is told that it is not
    known, exit 6, and the next open settles it either way, saying so."""
    from tests.doubles.pg_proxy import CommitCutter

    session_id = first_turn(store_env, ollama)
    proxy = CommitCutter(pg.value, forward=forward, refuse_after=refuse_after)
    try:
        ollama.script([Text("The SECOND answer.")])
        cut = cli(with_url(store_env, proxy.url), "ask", "second question", "--session", session_id)
    finally:
        proxy.close()
    assert proxy.cut.is_set()
    if not refuse_after:
        assert (cut.returncode, cut.stdout, cut.stderr) == (0, "The SECOND answer.\n", "")
    else:
        assert cut.returncode == 6 and cut.stdout == ""
        lines = cut.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith(
            "netbox-chat: turn 2: the session store failed while the answer was recorded ("
        )
        assert lines[0].endswith(
            "whether it was kept cannot be known now; the next time session "
            f"{session_id} is opened it is settled: kept, or rolled back and said so"
        )

    ollama.script([Text("ok")])
    after = cli(store_env, "ask", "third question", "--session", session_id)
    assert after.returncode == 0, after.stderr
    sent = json.dumps(ollama.requests[-1]["messages"])
    statuses = [t["status"] for t in inspect(pg.value, session_id)["turns"]]
    if forward:  # the server committed: the answer is kept, and the model has it
        assert after.stderr == "" and "The SECOND answer." in sent
        assert statuses == ["done", "done", "done"]
    else:
        assert after.stderr.startswith("turn 2 was interrupted and rolled back")
        assert "The SECOND answer." not in sent and "second question" not in sent
        assert statuses == ["done", "interrupted", "done"]
    pg.assert_ledger_agrees(session_id)
