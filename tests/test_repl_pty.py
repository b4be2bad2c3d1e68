"""The real `netbox-chat` REPL through a real pty (pexpect): the happy path
with resume and memory, Ctrl-C at several moments of a turn, and what `resume`
does before its first prompt (a crashed turn rolled back, `--at N`), checked
afterwards from the session (fresh process) and the servers' records. The
session, cancel, crash and rewind tests run on both stores (the `store`
fixture); the rest are about the terminal, not where sessions are kept."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Delay, ScriptedOllama, Text, Thinking, ToolCall
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import ask, cli, wait_for_running, wait_until
from tests.drive.process import first_turn as first_session
from tests.drive.pty import (
    DIM,
    PROMPT,
    leave,
    only_session,
    plain,
    resume,
    spawn,
)

DEVICES_OFFLINE = ToolCall(
    "netbox_get_objects",
    {"object_type": "dcim.device", "filters": {"site": "dm-akron", "status": "offline"}},
)


# The REPL on Ollama's API and on one OpenAI-compatible dialect (llama-server);
# tests/test_openai.py cancels on all five, where when the server notices differs.
@pytest.mark.model_servers("ollama", "llama.cpp")
def test_chat_quit_ls_resume_and_the_model_remembers(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [DEVICES_OFFLINE],
        [Text("One device is **offline** at DM-Akron: `dmi01-akron-sw02`.", chunk_delay=0.02)],
    )
    child = spawn(store_env)
    child.sendline("which devices at DM-Akron are offline?")
    child.expect(r"netbox_get_objects\S{0,20}\(object_type=\"dcim.device\"")  # the tool line
    child.expect("dmi01-akron-sw02")  # the streamed answer
    child.expect(r"tokens \d{1,3},\d{3} in / \d+ out")  # two requests, grouped: 2,999
    child.expect(PROMPT)
    child.sendline("/history")
    child.expect("which devices at DM-Akron are offline")
    child.expect(PROMPT)
    child.sendline("/tokens")
    child.expect("total")
    child.expect(PROMPT)
    leave(child)

    session_id = store.only_session()
    listing = cli(store_env, "ls", check=True).stdout
    assert session_id in listing and "which devices at DM-Akron are offline?" in listing

    ollama.script([Text("Columbus has no offline devices.")])
    child, recap = resume(store_env, session_id[:4])
    assert "1 turn, 4 messages" in recap and "dmi01-akron-sw02" in recap
    child.sendline("and at Columbus?")
    child.expect("no offline devices")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "which devices at DM-Akron are offline?" in sent
    assert "dmi01-akron-sw02" in sent and "and at Columbus?" in sent


MOMENTS = {
    "before the first token": ([Delay(5.0), Text("too late")], "thinking"),
    "mid-stream": ([Text("one two three four five six seven eight", chunk_delay=0.4)], "two"),
    "while the model thinks": (
        [Thinking("hmm, which sites does the user mean here", chunk_delay=0.4), Text("never")],
        "which",
    ),
    "while NetBox answers": (
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        "waiting for",
    ),
    "between parallel tools": (
        [
            ToolCall(
                "netbox_get_objects",
                {"object_type": "dcim.device", "filters": {"site": "dm-akron"}},
            ),
            ToolCall("netbox_get_objects", {"object_type": "dcim.site"}),
        ],
        "→",
    ),
}


# The REPL on Ollama's API and on one OpenAI-compatible dialect (llama-server);
# tests/test_openai.py cancels on all five, where when the server notices differs.
# One REPL cancels at every moment in turn, as a user who presses Ctrl-C
# often does: each cancel must leave the session as the one before it left it.
@pytest.mark.long
@pytest.mark.model_servers("ollama", "llama.cpp")
def test_ctrl_c_cancels_and_rolls_back_at_any_moment(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    netbox.delays["dcim/sites"] = 4.0
    ollama.script([Text("Three sites: DM-Akron, DM-Columbus, DM-Dayton.")])
    child = spawn(store_env)
    child.sendline("list the sites")
    child.expect("DM-Dayton")
    child.expect(PROMPT)

    request_of: dict[str, int] = {}  # each moment's cancelled request, by index
    for moment, (reply, wait_for) in MOMENTS.items():
        request_of[moment] = len(ollama.requests)
        seen = len(netbox.requests)
        ollama.script(reply)
        child.sendline("the question to cancel")
        child.expect(wait_for)
        ollama.wait_for_requests(request_of[moment] + 1)  # the request reached the model
        if moment in ("while NetBox answers", "between parallel tools"):
            # The status line names the tool as it starts; its request comes a moment later.
            wait_until(
                lambda seen=seen: any("dcim/sites" in path for path in netbox.requests[seen:]),
                f"{moment}: the tool never called NetBox",
                timeout=10,
            )
        started = time.monotonic()
        child.sendintr()
        child.expect("rolled back")
        child.expect(PROMPT)
        assert time.monotonic() - started < 3.0, f"{moment}: the prompt came back late"
        child.expect("the question to cancel")  # back in the input line to edit
        child.sendintr()  # Ctrl-C at the prompt: clears the line, nothing else
        child.expect(PROMPT)
        if moment == "mid-stream":  # the model's stream was hung up on
            wait_until(
                lambda: request_of["mid-stream"] in ollama.disconnects,
                f"{moment}: the model's stream was not hung up on",
                timeout=2.0,
            )
    leave(child)

    session_id = store.only_session()
    state = inspect(store.value, session_id)
    inspect_messages = [(m["type"], m["content"]) for m in state["messages"]]
    before = [("human", "list the sites"), ("ai", "Three sites: DM-Akron, DM-Columbus, DM-Dayton.")]
    assert inspect_messages == before  # I1
    assert state["next"] == [] and state["pending_writes"] == 0  # I2
    cancelled = dict(zip(MOMENTS, state["turns"][1:], strict=True))
    for moment, turn in cancelled.items():  # I6
        assert (turn["status"], turn["question"]) == ("cancelled", "the question to cancel"), moment
    # Both tool moments aborted their NetBox request (one each, 4 s long).
    assert sum("dcim/sites" in path for path in netbox.disconnects) == 2, netbox.disconnects
    thought = store.turns(session_id)[1 + list(MOMENTS).index("while the model thinks")]
    assert thought["thinking"].startswith("hmm, which")  # the ledger keeps what it thought
    assert thought["thinking_seconds"] > 0  # and how long

    time.sleep(1.0)
    assert inspect(store.value, session_id)["messages"] == state["messages"]  # I3
    ollama.script([Text("Sure.")])
    child = spawn(store_env, "resume", session_id)
    child.sendline("next question")
    child.expect("Sure.")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])  # I4
    assert "list the sites" in sent and "next question" in sent
    assert "the question to cancel" not in sent


def test_pasting_several_lines_sends_them_as_one_question(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Both noted.")])
    child = spawn(chat_env)
    child.send(
        "\x1b[200~which sites are active?\nand which are planned?\x1b[201~"
    )  # bracketed paste
    child.send("\r")
    child.expect("Both noted.")
    child.expect(PROMPT)
    leave(child)
    question = ollama.requests[-1]["messages"][-1]["content"]
    assert question == "which sites are active?\nand which are planned?"


# Crash recovery on Ollama's API and on one OpenAI-compatible dialect (llama-server):
# the rollback is the store's, the resumed request the server's own.
@pytest.mark.model_servers("ollama", "llama.cpp")
@pytest.mark.long
def test_resume_rolls_back_a_crashed_turn_before_the_prompt(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    session_id = first_session(store_env, ollama)
    ollama.script([Delay(30.0), Text("never sent")])
    crashed = ask(store_env, "the question that crashed", "--session", session_id)
    wait_for_running(store, session_id, 2)
    ollama.wait_for_requests(2)
    crashed.kill()
    crashed.wait(timeout=10)

    # Recovery needs the agent before the prompt; the recap comes after it.
    ollama.script([Text("Still three sites.")])
    child, shown = resume(store_env, session_id)
    assert "turn 2 was interrupted and rolled back" in shown
    assert "1 turn, 2 messages" in shown and "Three sites." in shown
    assert "turn 2 was interrupted: the question that crashed" in shown
    child.sendline("and now?")
    child.expect("Still three sites.")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "how many sites?" in sent and "the question that crashed" not in sent
    store.assert_ledger_agrees(session_id)


def test_resume_at_goes_back_before_the_prompt_and_the_recap_says_so(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    session_id = first_session(store_env, ollama)
    ollama.script([Text("Two devices.")])
    later = ask(store_env, "how many devices?", "--session", session_id)
    assert later.wait(timeout=60) == 0

    ollama.script([Text("Back at the sites.")])
    child, shown = resume(store_env, session_id, "--at", "1")
    assert "1 turn, 2 messages" in shown
    assert "turn 1: how many sites?" in shown and "Three sites." in shown
    assert "Two devices." not in shown
    child.sendline("and then?")
    child.expect("Back at the sites.")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "how many sites?" in sent and "how many devices?" not in sent
    store.assert_ledger_agrees(session_id)


def test_thinking_streams_dimmed_then_collapses_and_can_be_switched_off(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    reasoning = "The user wants the sites. One call to the site list will do."
    ollama.script(
        [Thinking(reasoning, chunk_delay=0.05), Text("Three sites.", chunk_delay=0.05)],
        [Text("Still three.")],
        [Thinking("Levels are not for me."), Text("Three again.")],
    )
    child = spawn(chat_env)
    assert "thinking: the model's default" in plain(child.before or "")
    child.sendline("list the sites")
    child.expect(DIM + r"\s*The user wants")  # the live area, dimmed
    child.expect(r"thought for \d+\.\ds")  # collapsed to one line when the answer starts
    child.expect(r"([\s\S]*?)tokens [\d,]+ in")
    assert "Three sites." in plain(child.match.group(1))
    assert "The user wants" not in child.match.group(1)  # gone from the screen
    child.expect(PROMPT)
    child.sendline("/thinking")
    child.expect("turn 1 · thought for")
    child.expect("One call to the site list will do.")
    child.expect(PROMPT)

    child.sendline("/think off")
    child.expect("thinking off for the rest of this session")
    child.expect(PROMPT)
    child.sendline("and now?")
    child.expect("Still three.")
    child.expect(PROMPT)
    assert ollama.requests[0]["think"] is True and ollama.requests[1]["think"] is False
    assert "One call to the site list" not in json.dumps(ollama.requests[1]["messages"])

    child.sendline("/think high")
    child.expect("qwen3:8b takes no thinking levels; thinking on")
    child.expect(PROMPT)
    child.sendline("once more")
    child.expect("Three again.")
    child.expect(PROMPT)
    leave(child)
    assert ollama.requests[2]["think"] is True
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [t["status"] for t in turns] == ["done", "done", "done"]


def test_think_on_a_model_that_cannot_is_a_note_before_the_answer(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Three sites.")])
    child = spawn(chat_env, "--think", "--model", "qwen2.5:7b")
    assert "thinking on" in plain(child.before or "")
    child.sendline("list the sites")
    child.expect("qwen2.5:7b cannot think; answering without thinking")
    child.expect("Three sites.")
    child.expect(PROMPT)
    leave(child)
    assert "think" not in ollama.requests[0]


def test_think_tags_in_the_content_are_shown_as_thinking_never_as_the_answer(
    chat_env: dict[str, str],
) -> None:
    # Ollama before 0.9.0 has no `think`; the tags arrive inside the content, cut anywhere.
    with ScriptedOllama(version="0.8.0") as old:
        old.script(
            [
                Text(
                    "<think>pondering the sites</think>\n\nThree sites.",
                    chunk_delay=0.05,
                    chunks=["<thi", "nk>pondering", " the sites</th", "ink>\n\n", "Three sites."],
                )
            ],
        )
        child = spawn({**chat_env, "OLLAMA_HOST": old.url})
        screen = io.StringIO()
        child.logfile_read = screen
        child.sendline("list the sites")
        child.expect(DIM + r"\s*pondering")
        child.expect(r"([\s\S]*?)tokens [\d,]+ in")
        assert "Three sites." in plain(child.match.group(1))
        child.expect(PROMPT)
        leave(child)
    shown = plain(screen.getvalue())
    assert "pondering" in shown and "<th" not in shown and "ink>" not in shown


def test_resume_no_think_asks_the_model_not_to_think(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    session_id = first_session(chat_env, ollama)
    assert ollama.requests[0]["think"] is True  # qwen3:8b's own default: it thinks
    ollama.script([Thinking("not wanted"), Text("Still three sites.")])
    child = spawn(chat_env, "resume", session_id, "--no-think")
    child.sendline("and now?")
    child.expect("Still three sites.")
    child.expect(PROMPT)
    leave(child)
    assert ollama.requests[-1]["think"] is False


# --- a Ctrl-C while the outcome is being recorded (issue 21, item 4) -------------------------

SLOW_COMMIT = """
CREATE OR REPLACE FUNCTION nbc_test_slow_write() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$;
CREATE TRIGGER nbc_test_slow_done BEFORE UPDATE ON turns FOR EACH ROW
    WHEN (NEW.status = 'done') EXECUTE FUNCTION nbc_test_slow_write();
CREATE TRIGGER nbc_test_slow_compact BEFORE INSERT ON history_edits FOR EACH ROW
    EXECUTE FUNCTION nbc_test_slow_write();
"""
NO_SLOW_COMMIT = """
DROP TRIGGER IF EXISTS nbc_test_slow_done ON turns;
DROP TRIGGER IF EXISTS nbc_test_slow_compact ON history_edits;
DROP FUNCTION IF EXISTS nbc_test_slow_write();
"""


def _run_sql(url: str, sql: str) -> None:
    import contextlib

    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(url)) as db:
        for statement in filter(str.strip, sql.split(";\n")):
            db.execute(statement)


def _wait_for_the_slow_write(url: str) -> None:
    """Until a netbox-chat connection is inside the trigger's pg_sleep, i.e.
    in the middle of writing the outcome."""
    import contextlib

    from netbox_chat.store import postgres as pgstore

    deadline = time.monotonic() + 20
    with contextlib.closing(pgstore.connect(url)) as db:
        while time.monotonic() < deadline:
            if db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone():
                return
            time.sleep(0.02)
    raise AssertionError("the outcome was never written")


@pytest.mark.postgres
@pytest.mark.parametrize("what", ["turn", "/compact"])
def test_ctrl_c_while_the_outcome_is_recorded_shows_what_was_recorded(
    what: str, chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """The database holds the COMMIT of a finished turn's answer (or of a
    /compact) for two seconds, as a slow server would, and Ctrl-C comes in
    that instant. The answer is recorded: the REPL shows it as answered, does
    not offer the question again, and the model sees it next time; a written
    compaction is reported as done."""
    from tests.doubles.stores import database_url, empty_database

    url = database_url()
    empty_database(url)
    env = {**chat_env, "NETBOX_CHAT_STORE": url}
    child = spawn(env)
    for n in range(3 if what == "/compact" else 1):
        ollama.script([Text(f"Answer {n}: three sites.")])
        child.sendline(f"question {n}")
        child.expect(f"Answer {n}")
        child.expect(PROMPT)
    _run_sql(url, SLOW_COMMIT)
    try:
        if what == "turn":
            ollama.script([Text("There are EXACTLY three sites.")])
            child.sendline("how many sites?")
            child.expect("EXACTLY")
        else:
            ollama.script([Text("A summary: three sites.")])
            child.sendline("/compact")
        _wait_for_the_slow_write(url)
        child.sendintr()
        shown = "turn 2 ·" if what == "turn" else "compacted 2 messages into a summary"
        child.expect(shown)
        child.expect(PROMPT)
    finally:
        _run_sql(url, NO_SLOW_COMMIT)
    assert "cancelled" not in plain(child.before or "")
    requests = len(ollama.requests)
    time.sleep(0.3)
    child.sendline("/tokens")  # a question offered again would be sent with it
    child.expect("total")
    child.expect(PROMPT)
    assert len(ollama.requests) == requests
    ollama.script([Text("Yes.")])
    child.sendline("sure?")
    child.expect("Yes.")
    child.expect(PROMPT)
    leave(child)
    sent = json.dumps(ollama.requests[-1]["messages"])
    if what == "turn":
        assert "There are EXACTLY three sites." in sent
    else:
        assert "A summary: three sites." in sent and "question 0" not in sent
