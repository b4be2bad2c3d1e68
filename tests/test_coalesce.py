"""A reply that streams faster than the turn reads it is read in fewer pieces
(netbox_chat/models/coalesce.py, issue 25 item 1): through the real CLI (`ask
--stream-json`, Typer's runner), the real deepagents graph and ChatOllama
against the scripted Ollama streaming one token per line with no pause, as
fast as it can, and ChatOpenAI against each OpenAI-compatible server's double
streaming one event per token. What the user reads must not change: the same text, in the
same order, the thinking apart from the answer, the tool lines where the
model called its tools, and the answer kept as the model wrote it."""

from __future__ import annotations

import json
from itertools import groupby
from typing import Any

import pytest

from tests.doubles.ollama_server import ScriptedOllama, Text, Thinking, ToolCall
from tests.drive.runner import invoke

REASONING = " ".join(f"step {n}: the sites come from dcim.site." for n in range(400))
PREAMBLE = " ".join(f"I will look {n} up." for n in range(200))
SECOND_THOUGHT = " ".join(f"row {n} is DM-Akron." for n in range(400))
ROWS = "".join(f"| {n} | dm-akron-sw{n:03d} | offline |\n" for n in range(1, 401))
ANSWER = f"| # | name | status |\n|---|---|---|\n{ROWS}\nThat is all 400."


def streamed(env: dict[str, str], question: str) -> list[dict[str, Any]]:
    result = invoke(["ask", question, "--stream-json"], env=env)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.model_servers()  # Ollama's lines, and each server's events and reasoning field
def test_a_fast_reply_keeps_its_text_its_order_and_its_thinking_apart(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [
            Thinking(REASONING),
            Text(PREAMBLE),
            ToolCall("netbox_get_objects", {"object_type": "dcim.site"}),
        ],
        [Thinking(SECOND_THOUGHT), Text(ANSWER)],
    )
    events = streamed(chat_env, "list the offline switches")
    kinds = [kind for kind, _ in groupby(e["type"] for e in events)]
    assert [k for k in kinds if k not in ("model_call_finished", "context_measured")] == [
        "turn_started",
        "thinking_delta",
        "thinking_finished",
        "text_delta",  # the words before the tool call, before its line
        "tool_started",
        "tool_finished",
        "thinking_delta",
        "thinking_finished",
        "text_delta",
        "result",
    ]
    text = [e["text"] for e in events if e["type"] == "text_delta"]
    thinking = [e["text"] for e in events if e["type"] == "thinking_delta"]
    assert "".join(text) == PREAMBLE + ANSWER
    assert "".join(thinking) == REASONING + SECOND_THOUGHT
    result = events[-1]
    assert result["answer"] == ANSWER and result["thinking"] == f"{REASONING}\n\n{SECOND_THOUGHT}"
    # The model's own count of what it wrote (Ollama's last line, the usage
    # event), not the pieces it was read in; a tool call counts one or more.
    tokens = sum(len(Text(t).pieces()) for t in (REASONING, PREAMBLE, SECOND_THOUGHT, ANSWER))
    assert tokens < result["tokens"]["out"] < tokens + 10
    # What this test is about: the lines were read faster than one at a time.
    assert len(text) + len(thinking) < tokens / 4
    # And what the model gets back next turn is the answer as it was written.
    ollama.script([Text("Yes.")])
    session = result["session"]
    invoke(["ask", "and the next?", "--session", session], env=chat_env)
    assert ANSWER in [m.get("content") for m in ollama.requests[-1]["messages"]]
