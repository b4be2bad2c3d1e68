"""The grounding check through the real CLI: `ask --json` and stream-json
carry it, the ledger keeps it, `export` shows it; on both kinds of model
server (Ollama's API and an OpenAI-compatible /v1)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.inspect_session import turn_rows
from tests.doubles.ollama_server import ScriptedOllama, Stall, Text, ToolCall
from tests.drive.process import ask, cli
from tests.drive.pty import PROMPT, leave, plain, spawn

LOOK = ToolCall(
    "netbox_get_objects", {"object_type": "dcim.device", "filters": {"site": "dm-akron"}}
)
MADE_UP = (
    "DM-Akron has 17 devices, among them dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-sw03."
)


@pytest.mark.model_servers("ollama", "llama.cpp")
def test_ask_json_carries_the_grounding_and_the_ledger_and_export_keep_it(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([LOOK], [Text(MADE_UP)], [Text("DM-Akron has 3 devices.")])
    asked = cli(chat_env, "ask", "how many devices at DM-Akron?", "--json")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert result["grounding"] == {
        "claims": 5,
        "ungrounded": [
            {"text": "17 devices", "kind": "count"},
            {"text": "dmi01-akron-sw03", "kind": "name"},
        ],
        "without_netbox": False,
        "unchecked": [],
    }
    # The next turn makes no call: its facts rest on the earlier result.
    again = cli(chat_env, "ask", "--continue", "and how many really?", "--json")
    assert json.loads(again.stdout)["grounding"] == {
        "claims": 2, "ungrounded": [], "without_netbox": False, "unchecked": []
    }  # fmt: skip

    exported = cli(chat_env, "export", result["session"], "--format", "json")
    turns = json.loads(exported.stdout)["turns"]
    assert [t["grounding"] for t in turns] == [result["grounding"], {
        "claims": 2, "ungrounded": [], "without_netbox": False, "unchecked": []
    }]  # fmt: skip
    markdown = cli(chat_env, "export", result["session"]).stdout
    assert "> ⚠ 2 not in NetBox's replies: 17 devices, dmi01-akron-sw03\n" in markdown
    assert markdown.count("not in NetBox's replies") == 1


def test_facts_with_no_tool_call_say_so_in_stream_json(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("There are 12 devices at DM-Akron.")])
    streamed = cli(chat_env, "ask", "how many devices at DM-Akron?", "--stream-json")
    assert streamed.returncode == 0, streamed.stderr
    last = json.loads(streamed.stdout.splitlines()[-1])
    # DM-Akron came from the question, but with nothing looked up the answer
    # states it as a NetBox fact all the same (issue 38).
    assert last["grounding"] == {
        "claims": 2,
        "ungrounded": [
            {"text": "12 devices", "kind": "number"},
            {"text": "DM-Akron", "kind": "name"},
        ],
        "without_netbox": True,
        "unchecked": [],
    }


def test_retry_asks_the_model_once_within_the_turn_and_checks_again(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([LOOK], [Text(MADE_UP)], [Text("DM-Akron has 3 devices.")])
    asked = cli(chat_env, "ask", "how many devices at DM-Akron?", "--json", "--grounding", "retry")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert result["answer"] == "DM-Akron has 3 devices."
    assert result["grounding"] == {
        "claims": 2, "ungrounded": [], "without_netbox": False, "unchecked": []
    }  # fmt: skip
    assert result["turn"] == 1 and len(ollama.requests) == 3
    told = json.dumps(ollama.requests[-1]["messages"])
    assert "17 devices (count)" in told and "dmi01-akron-sw03 (name)" in told

    # The retry's tokens count in the turn: more than the same turn without it.
    ollama.script([LOOK], [Text(MADE_UP)])
    marked = json.loads(cli(chat_env, "ask", "how many devices at DM-Akron?", "--json").stdout)
    assert result["tokens"]["in"] > marked["tokens"]["in"]
    assert result["tokens"]["out"] > marked["tokens"]["out"]


@pytest.mark.model_servers("ollama", "llama.cpp")
def test_the_repl_marks_ungrounded_claims_and_names_them_after_the_answer(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """On a terminal: each claim NetBox's replies do not hold is marked where
    it stands in the answer, and one line after the answer names them; an
    answer whose claims all rest on NetBox shows neither."""
    ollama.script(
        [LOOK],
        [Text(MADE_UP, chunk_delay=0.01)],
        [Text("DM-Akron has 3 devices: dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-rtr01.")],
        [Text("There are 12 devices at DM-Columbus.")],
    )
    child = spawn(chat_env)

    def turn(question: str) -> str:
        child.sendline(question)
        child.expect(r"tokens \d")
        shown = (child.before or "") + child.after
        child.expect(PROMPT)
        return plain(shown + (child.before or ""))

    first = turn("how many devices at DM-Akron?")
    second = turn("name them")
    third = turn("and at DM-Columbus?")
    child.sendline("/show 1")
    child.expect("the answer's claims")
    child.expect(PROMPT)
    shown = plain(child.before or "")
    leave(child)

    assert "17 devices\u2020" in first and "dmi01-akron-sw03\u2020" in first
    assert "dmi01-akron-sw01\u2020" not in first  # a real name is not marked
    assert "\u2020 2 not in NetBox's replies: 17 devices, dmi01-akron-sw03" in first
    assert "\u2020" not in second and "not in NetBox" not in second
    # No tool call this turn, but the earlier result stays evidence: 12 is not in it.
    assert "12 devices\u2020" in third
    assert "1 not in NetBox's replies: 12 devices" in third
    # /show: per claim, the call it rests on, by number (the calls are listed above it)
    assert "✓ dmi01-akron-sw01 (name): in call 1 (netbox_get_objects)" in shown
    assert "✓ DM-Akron (name): in call 1 (netbox_get_objects)" in shown
    assert "\u2020 17 devices (count): not in NetBox's replies (NetBox counts 3)" in shown
    assert "\u2020 dmi01-akron-sw03 (name): not in NetBox's replies" in shown


def test_the_ledger_keeps_each_turns_grounding_in_either_store(
    store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """A named migration added the column to both stores (m007, PostgreSQL
    schema 5); `export` reads it back from the ledger."""
    ollama.script([LOOK], [Text(MADE_UP)])
    asked = cli(store_env, "ask", "how many devices at DM-Akron?", "--json")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    exported = cli(store_env, "export", result["session"], "--format", "json")
    assert exported.returncode == 0, exported.stderr
    (turn,) = json.loads(exported.stdout)["turns"]
    assert turn["grounding"] == result["grounding"]
    assert [c["text"] for c in turn["grounding"]["ungrounded"]] == [
        "17 devices",
        "dmi01-akron-sw03",
    ]


def test_a_signal_during_the_retry_rolls_it_back_with_the_turn(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """The retry is part of the turn: a SIGINT while the model corrects its
    answer cancels the whole turn, and the conversation keeps neither answer."""
    ollama.script([Text("Three sites.")], [LOOK], [Text(MADE_UP)], [Stall()])
    first = ask(chat_env, "how many sites?", "--json")
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    session_id = json.loads(out)["session"]
    proc = ask(
        chat_env, "how many devices at DM-Akron?", "--json", "--session", session_id,
        "--grounding", "retry",
    )  # fmt: skip
    ollama.wait_for_requests(4, timeout=60)  # the retry is waiting for the model
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert json.loads(out)["status"] == "cancelled"
    (path,) = sessions_dir.glob("*.sqlite")
    assert turn_rows(path) == [(1, "done"), (2, "cancelled")]
    state = inspect(sessions_dir, path.stem)
    assert len(state["messages"]) == 2 and state["pending_writes"] == 0
