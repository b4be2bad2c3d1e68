"""Compaction: a model-written summary plus the last exchanges, written onto
the head with Overwrite; cancellable without a trace; never a fork, so a
rewind past it still finds every turn's full state."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from netbox_chat.agent import history
from netbox_chat.errors import UserFacingError
from tests.doubles.chats import Chat, contents, fresh_process, new_chat, turn
from tests.doubles.ollama_server import HTTPError, ScriptedOllama, Stall, Text, ToolCall
from tests.doubles.openai_server import ScriptedOpenAI
from tests.doubles.stores import StoreUnderTest

# Compaction and rewind behave alike on every server: Ollama's API and one
# OpenAI-compatible dialect (vLLM) stand for all (tests/test_openai.py runs the
# five where they differ).
pytestmark = pytest.mark.model_servers("ollama", "vllm")

SUMMARY = "SUMMARY: Akron has 3 devices (sw01, sw02 offline, rtr01); Columbus has 1."


async def exchanges(chat: Chat, ollama: ScriptedOllama, *names: str) -> None:
    """One finished turn per name, each with a tool call and its (large) result."""
    for name in names:
        await turn(
            chat,
            ollama,
            f"question {name}",
            [ToolCall("lookup", {"query": f"query-{name}"})],
            [Text(f"answer {name}")],
        )


def request_chars(request: dict[str, Any]) -> int:
    """Characters of a request's conversation (the system prompt excluded)."""
    return len(json.dumps([m for m in request["messages"] if m["role"] != "system"]))


@pytest.mark.parametrize("kind", ["deepagents", "delta"])
async def test_compaction_shrinks_the_next_request_and_keeps_tool_results(
    kind: str, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat(kind, ollama, store) as chat:
        await exchanges(chat, ollama, "one", "two", "three", "four")
        before_request = request_chars(ollama.requests[-2])  # turn 4 asking for its tool
        requests = len(ollama.requests)

        ollama.script([Text(SUMMARY)])
        result = await history.compact(chat.conversation, model=chat.model)

        assert str(result).startswith(
            "compacted 8 messages into a summary + last 2 exchanges: "
            "history sent with each request ~"
        )
        assert result.messages_before == 16 and result.messages_after == 9
        assert result.chars_after < result.chars_before
        # one summary request, without tools, about the older exchanges only
        assert len(ollama.requests) == requests + 1
        asked = ollama.requests[-1]
        assert not asked.get("tools")
        transcript = json.dumps(asked["messages"])
        assert "question one" in transcript and "query-two" in transcript
        assert "question three" not in transcript and "question four" not in transcript

        messages = chat.conversation.messages()
        assert history.is_summary(messages[0]) and SUMMARY in str(messages[0].content)
        assert [m.content for m in messages if isinstance(m, HumanMessage)][1:] == [
            "question three",
            "question four",
        ]
        calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        assert calls == results and len(calls) == 2
        assert chat.conversation.head_problems() == []
        assert chat.conversation.head().next == ()

        kind_, _, detail = chat.session.edits()[-1]
        assert kind_ == "compact"
        assert detail["after_turn"] == 4 and detail["message_count"] == 9
        assert detail["chars_before"] == result.chars_before > detail["chars_after"]

        await exchanges(chat, ollama, "five")
        after_request = request_chars(ollama.requests[-2])  # turn 5 asking for its tool
        # Turn 4's request carried three exchanges with tool results; turn 5's
        # carries the summary and two: measurably smaller.
        assert after_request < before_request - 1500
        sent = json.dumps(ollama.requests[-2]["messages"])
        assert SUMMARY in sent and "question four" in sent and "query-one" not in sent


async def test_cancelled_compaction_leaves_the_thread_exactly_as_it_was(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await exchanges(chat, ollama, "one", "two", "three")
        before = chat.snapshot()
        head = chat.conversation.head_checkpoint_id()
        requests = len(ollama.requests)

        ollama.script([Text("SUMMARY that starts"), Stall()])
        task = asyncio.create_task(history.compact(chat.conversation, model=chat.model))
        await asyncio.to_thread(ollama.wait_for_requests, requests + 1)
        await asyncio.sleep(0.05)
        task.cancel()
        result = await task

        assert result.cancelled
        assert str(result) == "compaction cancelled: the conversation is unchanged"
        await asyncio.to_thread(ollama.wait_for_disconnects, 1, 2.0)
        assert chat.snapshot() == before
        assert chat.conversation.head_checkpoint_id() == head
        assert chat.conversation.head_problems() == []

        await exchanges(chat, ollama, "four")
        sent = json.dumps(ollama.requests[-2]["messages"])
        assert "question one" in sent and "SUMMARY" not in sent


async def test_a_compacted_session_reopens_from_a_fresh_process(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await exchanges(chat, ollama, "one", "two", "three")
        ollama.script([Text(SUMMARY)])
        await history.compact(chat.conversation, keep_exchanges=1, model=chat.model)
        fresh = fresh_process(chat, "and Dayton?", "Dayton is planned.")

    state = fresh["state"]["messages"]
    assert state[0]["summary"] and SUMMARY in state[0]["content"]
    assert contents(state)[1] == "question three" and len(state) == 5
    assert fresh["state"]["problems"] == [] and fresh["state"]["next"] == []
    request = json.dumps(fresh["request"])
    assert SUMMARY in request and "question three" in request and "and Dayton?" in request
    assert "question one" not in request and "query-two" not in request
    # The ledger can tell a resume how many messages the conversation has now.
    edit_kind, detail = fresh["edits"][-1]
    assert edit_kind == "compact" and detail["message_count"] == len(state)
    assert detail["after_turn"] == fresh["turns"][-1][0] == 3
    assert fresh["status"] == "done"


async def test_rewind_past_a_compaction_restores_the_uncompacted_turns(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        conversation = chat.conversation
        await exchanges(chat, ollama, "one", "two")
        end_of_two = [(m.id, m.content) for m in conversation.messages()]
        await exchanges(chat, ollama, "three")
        end_of_three = [(m.id, m.content) for m in conversation.messages()]

        ollama.script([Text(SUMMARY)])
        await history.compact(conversation, keep_exchanges=1, model=chat.model)
        undone = history.rewind(conversation, 3)
        assert str(undone) == (
            "rewound to turn 3: the compaction since then is undone; 5 → 12 messages"
        )
        assert [(m.id, m.content) for m in conversation.messages()] == end_of_three

        ollama.script([Text(SUMMARY)])
        await history.compact(conversation, keep_exchanges=1, model=chat.model)
        await exchanges(chat, ollama, "four")
        result = history.rewind(conversation, 2)
        assert result.set_aside == [3, 4] and result.undid_compaction
        assert [(m.id, m.content) for m in conversation.messages()] == end_of_two
        assert conversation.head_problems() == []
        fresh = fresh_process(chat, "question five", "answer five")

    request = json.dumps(fresh["request"])
    assert "question one" in request and "answer two" in request
    for gone in ("SUMMARY", "question three", "question four", "query-three"):
        assert gone not in request
    assert [s for _, s, _ in fresh["turns"]] == ["done", "done", "rewound", "rewound"]
    assert fresh["edits"][-1][1]["message_count"] == len(end_of_two)


async def test_compaction_folds_in_deepagents_own_summary(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """deepagents summarizes on its own when a request nears the model's
    context: it keeps the summary and a cutoff index in `_summarization_event`
    and sends [summary, *messages[cutoff:]]. Our compaction must start from
    that view and clear the event, or the stale cutoff would cut into the
    new, shorter list and drop our summary and the kept exchanges."""

    def agent(body: dict[str, Any]) -> list[Any]:
        if not body.get("tools"):
            return [Text("DEEPAGENTS SUMMARY of the early questions")]
        last = body["messages"][-1]
        if last["role"] == "user":
            return [ToolCall("lookup", {"query": "q"})]
        return [Text("answered")]

    async with new_chat("deepagents", ollama, store) as chat:
        chat.model.profile = {"max_input_tokens": 4000}  # so deepagents summarizes early
        ollama.responder = agent
        for number in range(7):
            outcome = await chat.conversation.run_turn(f"question {number}")
            assert outcome.status == "done"
        values = chat.conversation.committed_values(chat.conversation.head_checkpoint_id())
        assert values.get("_summarization_event"), "deepagents did not summarize"
        ollama.responder = None

        ollama.script([Text(SUMMARY)])
        await history.compact(chat.conversation, model=chat.model)
        asked = json.dumps(ollama.requests[-1]["messages"])
        assert "DEEPAGENTS SUMMARY" in asked  # folded into ours

        await turn(chat, ollama, "question 7", [Text("answer 7")])
        sent = json.dumps(ollama.requests[-1]["messages"])
        assert SUMMARY in sent and "question 6" in sent and "question 7" in sent
        assert "DEEPAGENTS SUMMARY" not in sent
        values = chat.conversation.committed_values(chat.conversation.head_checkpoint_id())
        assert values.get("_summarization_event") is None


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ((), "nothing to compact: the conversation has 0 exchanges"),
        (("one", "two"), "nothing to compact: the conversation has 2 exchanges"),
    ],
)
async def test_nothing_to_compact_writes_nothing(
    setup: tuple[str, ...], message: str, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await exchanges(chat, ollama, *setup)
        requests = len(ollama.requests)
        before = chat.snapshot()
        with pytest.raises(UserFacingError, match=re.escape(message)):
            await history.compact(chat.conversation, model=chat.model)
        assert chat.snapshot() == before
        assert len(ollama.requests) == requests  # the model was not even asked


async def test_a_failed_summary_writes_nothing(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await exchanges(chat, ollama, "one", "two", "three")
        before = chat.snapshot()
        ollama.script([HTTPError(500, "out of memory")])
        with pytest.raises(UserFacingError) as caught:
            await history.compact(chat.conversation, model=chat.model)
        server = "vLLM" if isinstance(ollama, ScriptedOpenAI) else "Ollama"
        assert str(caught.value).startswith(f"compaction failed, nothing changed: {server}")
        assert "out of memory" in str(caught.value)
        assert chat.snapshot() == before
