"""The same promises from both session stores: a folder of session files and a
PostgreSQL database (`--store postgresql://...`), through one fixture.

Real parts: the real CLI in subprocesses (`python -m netbox_chat`), the real
deepagents graph and ChatOllama against the scripted Ollama server, the NetBox
double, and what a fresh process reads back (tests/doubles/inspect_session.py). The
Postgres parameter runs against the database scripts/postgres_up.sh starts.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import SITES, cli, first_turn, hold_in_a_tool, python, wait_until
from tests.drive.runner import invoke

# --- a session, resumed --------------------------------------------------------------------


def test_a_session_resumes_with_its_memory_and_lists_read_only(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    session_id = first_turn(store_env, ollama)
    ollama.script([Text("Still three.")])
    again = cli(store_env, "ask", "and now?", "--session", session_id[:5])
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "Still three."
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "how many sites?" in sent and "Three sites." in sent  # the memory came back

    listed = cli(store_env, "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert summary["id"] == session_id and summary["turns"] == 2
    assert summary["title"] == "how many sites?" and not summary["is_open"]

    me = f"{getpass.getuser()}@{socket.gethostname()}"
    if store.kind == "postgres":  # the server's login role first, the OS user beside it
        me = f"{urlsplit(store.value).username} ({me})"
    assert summary["asked_by"] == [me]  # who asked, never a token

    exported = cli(store_env, "export", session_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    turns = json.loads(exported.stdout)["turns"]
    assert [(t["question"], t["asked_by"]) for t in turns] == [
        ("how many sites?", me),
        ("and now?", me),
    ]
    assert f"asked by {me}" in cli(store_env, "export", session_id).stdout


# --- Ctrl-C and kill -9 ------------------------------------------------------------------


def test_ctrl_c_in_ask_restores_the_thread_row_for_row(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    session_id = first_turn(store_env, ollama)
    rows_before = store.thread_rows(session_id)
    before = inspect(store.value, session_id)["messages"]

    proc = hold_in_a_tool(store_env, ollama, netbox, session_id)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in err

    # Every checkpoint, blob and write is as it was: the rollback deleted only
    # what the turn created (on Postgres: blobs shared by version stay).
    assert store.thread_rows(session_id) == rows_before
    state = inspect(store.value, session_id)
    assert state["messages"] == before
    assert state["next"] == [] and state["pending_writes"] == 0
    assert [t["status"] for t in state["turns"]] == ["done", "cancelled"]


@pytest.mark.long
def test_kill_9_mid_turn_is_rolled_back_by_the_next_process(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    session_id = first_turn(store_env, ollama)
    before = inspect(store.value, session_id)["messages"]
    proc = hold_in_a_tool(store_env, ollama, netbox, session_id)
    proc.kill()
    proc.wait(timeout=10)
    assert store.statuses(session_id) == [(1, "done"), (2, "running")]

    netbox.delays.clear()
    ollama.script([Text("Two sites now.")])
    resumed = cli(store_env, "ask", "how many now?", "--session", session_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "turn 2 was interrupted and rolled back" in resumed.stderr
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "list the sites slowly" not in sent

    state = inspect(store.value, session_id)
    assert state["messages"][: len(before)] == before
    assert [m["content"] for m in state["messages"] if m["type"] == "human"] == [
        "how many sites?",
        "how many now?",
    ]
    assert state["head_problems"] == [] and state["pending_writes"] == 0
    assert [t["status"] for t in state["turns"]] == ["done", "interrupted", "done"]


# --- one writer ---------------------------------------------------------------------------


def test_one_writer_per_session_and_a_dead_writer_blocks_nobody(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    session_id = first_turn(store_env, ollama)
    holder = hold_in_a_tool(store_env, ollama, netbox, session_id)
    try:
        second = cli(store_env, "ask", "me too", "--session", session_id)
        assert second.returncode == 4, second.stderr
        assert f"session {session_id} is open in another netbox-chat (pid {holder.pid}" in (
            second.stderr
        )
        assert len(second.stderr.strip().splitlines()) == 1
        refused = cli(store_env, "forget", session_id, "--yes")
        assert refused.returncode == 4, refused.stderr
        (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
        assert summary["is_open"] and summary["open_by"] == holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=10)
    netbox.delays.clear()
    ollama.script([Text("Three.")])
    after = cli(store_env, "ask", "now?", "--session", session_id)
    assert after.returncode == 0, after.stderr


# --- forget ----------------------------------------------------------------------------------


def test_forget_removes_every_row_of_the_session_and_only_those(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    gone = first_turn(store_env, ollama)
    kept = first_turn(store_env, ollama)
    kept_rows = store.thread_rows(kept)
    done = cli(store_env, "forget", gone, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"forgot session {gone}"
    if store.kind == "folder":
        assert sorted(p.name for p in Path(store.value).glob("*.sqlite*")) == [f"{kept}.sqlite"]
    else:
        assert store.rows_left(gone) == 0
    assert store.thread_rows(kept) == kept_rows
    assert [s["id"] for s in json.loads(cli(store_env, "ls", "--json").stdout)] == [kept]
    missing = cli(store_env, "export", gone)
    assert missing.returncode == 1 and f"no session {gone!r}" in missing.stderr


# --- rewind and compaction, through the REPL's own calls --------------------------------------


REWIND_AND_COMPACT = r"""
import asyncio, json, sys
from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.models.ollama import build_model
from netbox_chat.config import resolve_settings
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.store.choose import open_store
from netbox_chat.agent import history
from netbox_chat.agent.turns import Conversation
from tests.doubles.ollama_server import ScriptedOllama, Text

async def main(store_value, action):
    with ScriptedOllama() as ollama:
        settings = resolve_settings(store=store_value, ollama_url=ollama.url, env={})
        store = open_store(settings)
        session = store.create(model=settings.model) if action == "new" else store.open(action)
        saver = open_saver(session)
        model = build_model(settings)
        graph = build_agent(settings, [], saver, model=model)
        conv = Conversation(session, graph, saver, find_end_node(graph), model=model)
        out = {"session": session.id}
        if action == "new":
            for n in range(1, 5):
                ollama.script([Text(f"answer {n}")])
                assert (await conv.run_turn(f"question {n}")).status == "done"
            ollama.script([Text("SUMMARY of questions 1 and 2")])
            out["compact"] = str(await history.compact(conv))
            out["rewind"] = str(history.rewind(conv, 3))
        else:
            ollama.script([Text("answer 5")])
            out["status"] = (await conv.run_turn("question 5")).status
            out["sent"] = [m["content"] for m in ollama.requests[-1]["messages"]
                           if m["role"] != "system"]
        session.close()
    print(json.dumps(out))

asyncio.run(main(*sys.argv[1:3]))
"""


@pytest.mark.long
def test_rewind_and_compaction_hold_from_a_fresh_process(store: StoreUnderTest) -> None:
    def run(action: str) -> dict[str, Any]:
        out = cli(
            dict(os.environ), store.value, action, program=python(REWIND_AND_COMPACT), timeout=90
        )
        assert out.returncode == 0, out.stderr
        return dict(json.loads(out.stdout))

    made = run("new")
    assert made["compact"].startswith("compacted 4 messages into a summary + last 2 exchanges")
    # Turn 3 ended before the compaction, so the rewind undoes it too.
    assert made["rewind"].startswith("rewound to turn 3: 1 later turn set aside")
    assert "the compaction since then is undone" in made["rewind"]
    session_id = made["session"]

    state = inspect(store.value, session_id)
    humans = [m["content"] for m in state["messages"] if m["type"] == "human"]
    assert humans == ["question 1", "question 2", "question 3"]
    assert [t["status"] for t in state["turns"]] == ["done", "done", "done", "rewound"]

    later = run(session_id)
    assert later["status"] == "done"
    assert later["sent"] == [
        "question 1",
        "answer 1",
        "question 2",
        "answer 2",
        "question 3",
        "answer 3",
        "question 5",
    ]


# --- the REPL ------------------------------------------------------------------------------


def test_the_repl_chats_cancels_and_resumes_the_latest_on_either_store(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    from tests.drive.pty import PROMPT, leave, resume, spawn

    ollama.script([Text("Three sites.")])
    child = spawn(store_env)
    child.sendline("how many sites?")
    child.expect("Three sites.")
    child.expect(PROMPT)
    netbox.delays["dcim/sites"] = 10.0
    ollama.script([SITES])
    seen = len(netbox.requests)
    child.sendline("list them slowly")
    wait_until(lambda: len(netbox.requests) > seen, "the tool never called NetBox")
    child.sendintr()
    child.expect("cancelled")
    child.expect(PROMPT)
    leave(child)

    ollama.script([Text("Still three.")])
    child, recap = resume(store_env, "--latest")  # the most recent session
    assert "how many sites?" in recap and "Three sites." in recap
    child.sendline("and now?")
    child.expect("Still three.")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "how many sites?" in sent and "list them slowly" not in sent


@pytest.mark.postgres  # a database URL is read by libpq: the postgres extra, not a server
def test_the_store_is_a_setting_like_the_others_and_its_password_is_never_shown(
    tmp_path: Path,
) -> None:
    """`store` comes from a flag, the environment, a profile or the file's top
    level; a folder there is the sessions folder (a --sessions-dir flag still
    wins over a file's), a database URL is used over any folder, and
    `netbox-chat config` shows the URL without its password."""
    pytest.importorskip("psycopg")

    from netbox_chat.config import ConfigError, resolve_settings

    url = "postgresql://alice:s3cret-pw@db.example:5432/netops"
    path = tmp_path / "config" / "netbox-chat" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(f'store = "{tmp_path / "from-file"}"\n\n[profiles.team]\nstore = "{url}"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    plain = resolve_settings(env=env)
    assert (plain.store, plain.sessions_dir) == (None, tmp_path / "from-file")
    assert plain.origins["sessions_dir"] == "file"
    flagged = resolve_settings(env=env, sessions_dir=tmp_path / "flag")
    assert flagged.sessions_dir == tmp_path / "flag"
    team = resolve_settings(env=env, profile="team", sessions_dir=tmp_path / "flag")
    assert team.store == url and "s3cret" not in repr(team)
    with pytest.raises(ConfigError, match=r"unknown session store mysql://"):
        resolve_settings(env={}, store="mysql://db/x")

    shown = invoke(
        ["config", "--profile", "team"], env={**env, "NETBOX_CHAT_STORE": "", "COLUMNS": "200"}
    )
    assert shown.exit_code == 0, shown.output
    assert "postgresql://alice@db.example:5432/netops" in shown.stdout
    assert "s3cret-pw" not in shown.output
