"""Thinking models through the real CLI (Typer's runner), the real deepagents
graph and the real chat model against the scripted server: the trace is shown
as thinking, never as the answer, recorded in the ledger, sent back within its
turn in the field that server reads and left out of later turns; the switch
sends what the server accepts and says so when it cannot.

Where the wire differs per server (the reasoning field: `thinking` on Ollama's
API, `reasoning` or `reasoning_content` on /v1), a test runs on every model
server; the switch on Ollama's API and vLLM; what only Ollama's API tells
(whether a model can think, and in levels) on Ollama alone. tests/doubles/wire.py reads
each server's fields."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from netbox_chat.cli.app import app
from netbox_chat.models.thinking import ThinkSplitter, split_thinking
from tests.doubles.ollama_server import ScriptedOllama, Text, Thinking, ToolCall
from tests.doubles.wire import reasoning_sent_back, thinking_asked
from tests.drive.runner import invoke

REASONING = "The user wants the sites. I should call netbox_get_objects for dcim.site."
ANSWER = "Three sites: DM-Akron, DM-Columbus, DM-Dayton."


def ask(env: dict[str, str], *args: str, code: int = 0) -> Any:
    result = invoke(["ask", *args], env=env)
    assert result.exit_code == code, result.output
    return result


def ask_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    return dict(json.loads(ask(env, *args, "--json").stdout))


def ledger_row(sessions_dir: Path, session: str, number: int = 1) -> tuple[Any, ...]:
    conn = sqlite3.connect(sessions_dir / f"{session}.sqlite")
    try:
        row = conn.execute(
            "SELECT answer, thinking, thinking_seconds, thinking_chars FROM turns WHERE number = ?",
            (number,),
        ).fetchone()
    finally:
        conn.close()
    return tuple(row)


def sent(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


@pytest.mark.model_servers()  # each server's own reasoning field
def test_thinking_is_kept_apart_from_the_answer_and_not_sent_again(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script(
        [Thinking(REASONING), ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Thinking("Three came back; list them."), Text(ANSWER)],
    )
    result = ask_json(chat_env, "list the sites")
    assert result["answer"] == ANSWER
    assert REASONING in result["thinking"] and "Three came back" in result["thinking"]
    assert result["thinking_seconds"] is not None and result["thinking_seconds"] >= 0
    assert thinking_asked(ollama, ollama.requests[0]) is not False  # qwen3:8b thinks
    # Inside the turn the model gets its own thinking back, in the field this server
    # reads: Ollama's templates, gpt-oss and Qwen3 on /v1 expect it (facts 2.2).
    assert reasoning_sent_back(ollama, ollama.requests[1]) == [REASONING]
    assert REASONING not in json.dumps([m.get("content") for m in ollama.requests[1]["messages"]])

    answer, thinking, seconds, chars = ledger_row(sessions_dir, result["session"])
    assert answer == ANSWER and thinking == result["thinking"]
    assert chars == len(thinking) and seconds == result["thinking_seconds"]

    ollama.script([Text("Yes, DM-Akron.")])
    ask_json(chat_env, "is Akron one of them?", "--session", result["session"])
    later = sent(ollama.requests[-1])
    assert ANSWER in later and "is Akron one of them?" in later
    assert "Three came back" not in later and REASONING not in later
    assert reasoning_sent_back(ollama, ollama.requests[-1]) == []


@pytest.mark.model_servers()  # each server's own reasoning field
def test_stream_json_streams_the_thinking_apart_from_the_answer(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """The events the REPL draws (thinking dimmed, the answer plain) are the
    ones `--stream-json` prints: the trace only ever as thinking."""
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    result = ask(chat_env, "list the sites", "--stream-json")
    events = [json.loads(line) for line in result.stdout.splitlines()]
    shown = {
        kind: "".join(e["text"] for e in events if e["type"] == kind)
        for kind in ("thinking_delta", "text_delta")
    }
    assert shown == {"thinking_delta": REASONING, "text_delta": ANSWER}
    assert events[-1]["type"] == "result"
    assert (events[-1]["answer"], events[-1]["thinking"]) == (ANSWER, REASONING)


def test_think_tags_in_content_are_thinking_not_answer(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    """Ollama before 0.9.0 had no `think`: qwen3 wrote its trace into the
    content. On Ollama alone: the other servers this test would stand for (a
    /v1 server with no reasoning parser) are not scripted."""
    with ScriptedOllama(version="0.8.0") as old:
        env = {**chat_env, "OLLAMA_HOST": old.url}
        old.script([Thinking(REASONING, chunk_delay=0.01), Text(ANSWER, chunk_delay=0.01)])
        result = ask_json(env, "list the sites")
        assert result["answer"] == ANSWER and "<think>" not in result["answer"]
        assert result["thinking"] == REASONING
        answer, thinking, _, chars = ledger_row(sessions_dir, result["session"])
        assert answer == ANSWER and thinking == REASONING and chars == len(REASONING)
        assert "think" not in old.requests[0]  # nothing it would not understand

        old.script([Text("Yes.")])
        ask_json(env, "is Akron one of them?", "--session", result["session"])
        later = sent(old.requests[-1])
        assert ANSWER in later and "<think>" not in later and REASONING not in later

        exported = invoke(["export", result["session"]], env=env).stdout
        assert ANSWER in exported and "<think>" not in exported and REASONING not in exported
        assert "thought for" in exported


@pytest.mark.model_servers("ollama", "vllm")
def test_no_think_asks_for_no_thinking(chat_env: dict[str, str], ollama: ScriptedOllama) -> None:
    """Off is `think: false` on Ollama's API, `reasoning_effort: "none"` on /v1
    (which the scripted servers honour, as llama.cpp, vLLM, SGLang and Ollama do)."""
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    result = ask_json(chat_env, "list the sites", "--no-think")
    assert thinking_asked(ollama, ollama.requests[0]) is False
    assert result["answer"] == ANSWER and result["thinking"] is None
    assert result["thinking_seconds"] is None

    ollama.script([Text(ANSWER)])
    ask_json({**chat_env, "NETBOX_CHAT_THINK": "off"}, "list the sites")
    assert thinking_asked(ollama, ollama.requests[-1]) is False
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    result = ask_json({**chat_env, "NETBOX_CHAT_THINK": "off"}, "list the sites", "--think")
    assert thinking_asked(ollama, ollama.requests[-1]) is not False
    assert result["thinking"] == REASONING


def test_asking_a_model_that_cannot_think_to_think_is_a_note_not_a_400(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """On Ollama's API alone: only it says what a model can do (/api/show
    `capabilities`); a /v1 server does not, and the choice is left to the
    model there (thinking.plan_thinking)."""
    ollama.script([Text(ANSWER)])
    result = ask(chat_env, "list the sites", "--think", "--model", "qwen2.5:7b")
    assert result.stdout.strip() == ANSWER
    assert result.stderr.strip() == (
        "netbox-chat: qwen2.5:7b cannot think; answering without thinking"
    )
    assert "think" not in ollama.requests[0]


@pytest.mark.parametrize(
    ("setting", "think", "note"),
    [
        ("off", "low", "gpt-oss:20b cannot stop thinking; it thinks as little as it can (low)"),
        ("high", "high", ""),
        (None, True, ""),
    ],
)
def test_gpt_oss_takes_levels_and_cannot_stop(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    setting: str | None,
    think: object,
    note: str,
) -> None:
    """On Ollama's API alone: only it says what a model can do (/api/show
    `capabilities`); a /v1 server does not, and the choice is left to the
    model there (thinking.plan_thinking)."""
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    env = {**chat_env, "NETBOX_CHAT_MODEL": "gpt-oss:20b"}
    if setting is not None:
        env["NETBOX_CHAT_THINK"] = setting
    result = ask(env, "list the sites", "--json")
    assert ollama.requests[0]["think"] == think
    assert json.loads(result.stdout)["thinking"] == REASONING  # its thinking is still shown
    assert result.stderr.strip() == (f"netbox-chat: {note}" if note else "")


def test_a_level_on_a_model_without_levels_turns_thinking_on(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """On Ollama's API alone: only it says what a model can do (/api/show
    `capabilities`); a /v1 server does not, and the choice is left to the
    model there (thinking.plan_thinking)."""
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    result = ask({**chat_env, "NETBOX_CHAT_THINK": "high"}, "list the sites", "--json")
    assert ollama.requests[0]["think"] is True
    assert "qwen3:8b takes no thinking levels; thinking on" in result.stderr


def test_a_bad_think_setting_is_a_one_line_error(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    result = ask({**chat_env, "NETBOX_CHAT_THINK": "maybe"}, "list the sites", code=1)
    assert result.stderr.strip() == (
        "netbox-chat: NETBOX_CHAT_THINK must be one of on, off, low, medium, high, got 'maybe'"
    )
    assert ollama.requests == [] and not sessions_dir.exists()


def test_export_shows_the_thinking_only_when_asked(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Thinking(REASONING), Text(ANSWER)])
    session = ask_json(chat_env, "list the sites")["session"]
    runner = CliRunner()
    plain = runner.invoke(app, ["export", session], env=chat_env).stdout
    assert ANSWER in plain and REASONING not in plain
    assert f"{len(REASONING)} characters" in plain
    full = runner.invoke(app, ["export", session, "--thinking"], env=chat_env).stdout
    assert f"> {REASONING}" in full
    data = json.loads(runner.invoke(app, ["export", session, "-f", "json"], env=chat_env).stdout)
    (turn,) = data["turns"]
    assert turn["answer"] == ANSWER and "thinking" not in turn
    assert turn["thinking_chars"] == len(REASONING) and turn["thinking_seconds"] is not None
    with_text = runner.invoke(
        app, ["export", session, "-f", "json", "--thinking"], env=chat_env
    ).stdout
    assert json.loads(with_text)["turns"][0]["thinking"] == REASONING


@pytest.mark.parametrize(
    "chunks",
    [
        ["<think>\nplan it\n</think>\n\nThe answer."],
        ["<thi", "nk>plan", " it</th", "ink>", "\n\n", "The answer."],
        ["<", "think", ">plan it<", "/think>The", " answer."],
    ],
)
def test_think_tags_cut_anywhere_never_reach_the_answer(chunks: list[str]) -> None:
    splitter = ThinkSplitter()
    parts = [splitter.feed(chunk) for chunk in chunks] + [splitter.finish()]
    thinking = "".join(t for t, _ in parts)
    answer = "".join(a for _, a in parts)
    assert thinking.strip() == "plan it" and answer == "The answer."
    assert all("<" not in a for _, a in parts)


def test_an_unclosed_think_at_the_start_is_all_thinking_while_it_streams() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think>still ") == ("still ", "")
    assert splitter.feed("going") == ("going", "")
    assert split_thinking("<think>never closed") == ("never closed", "")


def test_a_less_than_sign_in_an_answer_is_kept() -> None:
    assert split_thinking("a < b and <b>bold</b>") == ("", "a < b and <b>bold</b>")


QUOTING = "sw01's description reads 'lab <think> box'. IMPORTANT: sw02 is offline since 03:00."


@pytest.mark.model_servers("ollama", "vllm")
def test_a_think_tag_inside_an_answer_is_text_not_thinking(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Issue 21, item 9: only a leading block of a model that inlines its
    thinking is thinking. A `<think>` the model quotes (a NetBox description)
    is kept in the answer the user reads, the ledger and the model's own
    history."""
    ollama.script([Thinking(REASONING), Text(QUOTING)])
    result = ask_json(chat_env, "what do the switch descriptions say?")
    assert result["answer"] == QUOTING and result["thinking"] == REASONING
    assert ledger_row(sessions_dir, result["session"])[:2] == (QUOTING, REASONING)
    ollama.script([Text("ok")])
    ask(chat_env, "anything down?", "--session", result["session"])
    history = [m for m in ollama.requests[-1]["messages"] if m["role"] == "assistant"]
    assert [m.get("content") for m in history] == [QUOTING]


def test_a_leading_think_tag_is_text_when_thinking_has_its_own_field(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """From a server asked to send thinking in its own field, even a leading
    `<think>` is text. On Ollama's API alone: on /v1 the client cannot yet tell
    a server with a reasoning parser from one without (which inlines the
    thinking), so a leading block is still taken for thinking there."""
    ollama.script([Thinking(REASONING), Text(ANSWER)], [Text("<think> is how the tag reads.")])
    session = ask_json(chat_env, "list the sites")["session"]
    shown = ask(chat_env, "how does the tag read?", "--session", session).stdout
    assert shown == "<think> is how the tag reads.\n"
    ollama.script([Text("ok")])
    ask(chat_env, "anything down?", "--session", session)
    history = [m for m in ollama.requests[-1]["messages"] if m["role"] == "assistant"]
    assert [m.get("content") for m in history] == [ANSWER, "<think> is how the tag reads."]


def test_a_think_tag_after_inline_thinking_is_the_answers(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    """A model that writes its thinking into the content (Ollama before 0.9):
    the leading block is thinking, a tag after it is the answer's. On Ollama
    alone, as test_think_tags_in_content_are_thinking_not_answer."""
    with ScriptedOllama(version="0.8.0") as old:
        env = {**chat_env, "OLLAMA_HOST": old.url}
        old.script([Thinking(REASONING, chunk_delay=0.01), Text(QUOTING, chunk_delay=0.01)])
        inline = ask_json(env, "what do the switch descriptions say?")
        assert (inline["answer"], inline["thinking"]) == (QUOTING, REASONING)
        assert ledger_row(sessions_dir, inline["session"])[:2] == (QUOTING, REASONING)


def test_only_a_leading_think_block_is_split_off() -> None:
    assert split_thinking("<think>plan</think>Use <think> tags.") == ("plan", "Use <think> tags.")
    assert split_thinking("Use <think>x</think> tags.") == ("", "Use <think>x</think> tags.")
    assert split_thinking("<think>plan</think>answer", inline=False) == (
        "",
        "<think>plan</think>answer",
    )
