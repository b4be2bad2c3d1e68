"""The decoded history kept between turns (checkpoints.sqlite.HistoryCache, issue 17).

A turn starts by loading the conversation; the bridge keeps the decoded
history of the last checkpoint read and extends it by the writes of the step
after it, so a turn decodes a few rows instead of the whole conversation. The
promise it must keep: what the model is sent is what the store holds. So every
test here compares the model's request (the scripted Ollama's record of it)
with the store's conversation as LangGraph's own walk reads it, after each
thing that moves the head: a Ctrl-C, a failed turn, a rewind, /compact, an
automatic compaction, a crash and the next process.

The suite runs with NETBOX_CHAT_CHECK_HISTORY_CACHE=1 (tests/conftest.py), so
every reuse anywhere in it is also compared with a fresh decode; the tests
that count decodes turn it off, since the check decodes everything again.

Real parts: sessions in either store, `build_runtime`'s deepagents agent and
ChatOllama over HTTP to the scripted server, the CLI in a subprocess for the
kill -9.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, tool

from netbox_chat.agent import history
from netbox_chat.agent.context import ContextGuard
from netbox_chat.agent.runtime import Runtime
from netbox_chat.agent.turns import Conversation, TurnOutcome, text_of
from netbox_chat.checkpoints.sqlite import CHECK_HISTORY_ENV, HistoryCache, SyncSaverBridge
from netbox_chat.config import resolve_settings
from tests.doubles.chats import open_session_runtime
from tests.doubles.context import agent_responder
from tests.doubles.context import lookup as big_lookup
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import HTTPError, ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import first_turn, hold_in_a_tool

tool_started = threading.Event()  # the slow tool runs on each test's own loop


@tool
async def lookup(query: str) -> str:
    """Look devices up in NetBox."""
    return f'{{"count": 1, "results": [{{"name": "{query}-sw01", "status": "active"}}]}}'


@tool
async def slow_lookup(query: str) -> str:
    """Look devices up slowly."""
    tool_started.set()
    await asyncio.sleep(10)
    return f"slow result for {query}"


TOOLS: list[BaseTool] = [lookup, slow_lookup]

ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


@contextlib.asynccontextmanager
async def open_runtime(
    store: StoreUnderTest,
    ollama: ScriptedOllama,
    session_id: str | None = None,
    tools: list[BaseTool] = TOOLS,
    **env: str,
) -> AsyncIterator[Runtime]:
    """A session of `store` opened the way the REPL opens one."""
    settings = resolve_settings(store=store.value, ollama_url=ollama.url, env=env)
    async with open_session_runtime(settings, tools, session_id) as runtime:
        yield runtime


def kept(conversation: Conversation) -> HistoryCache:
    saver = conversation.saver
    assert isinstance(saver, SyncSaverBridge)
    return saver.histories


def in_the_store(conversation: Conversation) -> list[tuple[str, str]]:
    """The head's conversation as the model is to see it, read by LangGraph's
    own walk over the store's rows (the kept history set aside)."""
    histories = kept(conversation)
    enabled, histories.enabled = histories.enabled, False
    try:
        values = conversation.committed_values(conversation.head_checkpoint_id())
    finally:
        histories.enabled = enabled
    messages: list[BaseMessage] = list(values.get("messages", []))
    seen = history.effective_messages(messages, values.get(history.SUMMARIZATION_EVENT))
    return [(ROLES[m.type], text_of(m)) for m in seen]


def sent(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A request's conversation, without the system prompt."""
    return [(m["role"], m.get("content") or "") for m in body["messages"] if m["role"] != "system"]


async def turn_sends_the_store(runtime: Runtime, ollama: ScriptedOllama, question: str) -> None:
    """Run a turn whose first request must be the store's conversation plus the question."""
    conversation = runtime.conversation
    expected = [*in_the_store(conversation), ("user", question)]
    first = len(ollama.requests)
    ollama.script([Text(f"answer to {question}")])
    outcome = await conversation.run_turn(question)
    assert outcome.status == "done", outcome.error
    assert sent(ollama.requests[first]) == expected


async def tool_turn(runtime: Runtime, ollama: ScriptedOllama, number: int) -> None:
    ollama.script([ToolCall("lookup", {"query": f"site-{number}"})], [Text(f"answer {number}")])
    outcome = await runtime.conversation.run_turn(f"which devices at site-{number}?")
    assert outcome.status == "done", outcome.error


@contextlib.contextmanager
def decodes(conversation: Conversation) -> Iterator[list[int]]:
    """Count the values the saver decodes from the store (checkpoints, writes)."""
    serde = conversation.saver.serde
    real = serde.loads_typed
    count = [0]

    def counted(data: Any) -> Any:
        count[0] += 1
        return real(data)

    serde.loads_typed = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        serde.loads_typed = real  # type: ignore[method-assign]


# --- the cache is used ---------------------------------------------------------------


async def test_a_turn_decodes_the_step_before_it_not_the_whole_conversation(
    store: StoreUnderTest, ollama: ScriptedOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cache, a turn decodes the same few rows at turn 3 and turn 10;
    with it off (the same harness), each turn decodes the turn before's
    messages more: the count sees LangGraph's own load."""
    monkeypatch.delenv(CHECK_HISTORY_ENV, raising=False)  # the check decodes everything again
    growth: dict[bool, list[int]] = {}
    for enabled in (True, False):
        async with open_runtime(store, ollama) as runtime:
            kept(runtime.conversation).enabled = enabled
            counts = []
            for number in range(1, 11):
                with decodes(runtime.conversation) as count:
                    await tool_turn(runtime, ollama, number)
                counts.append(count[0])
            growth[enabled] = counts
            if enabled:
                assert kept(runtime.conversation).walks == 1  # the one after the first turn
                assert kept(runtime.conversation).reuses >= 8
                await turn_sends_the_store(runtime, ollama, "and the cached one?")
                session_id = runtime.conversation.session.id

    with_cache, without = growth[True][2:], growth[False][2:]
    assert len(set(with_cache)) == 1, growth  # flat
    # four messages a turn: the question, the call, its result, the answer
    assert all(b - a >= 4 for a, b in itertools.pairwise(without)), growth
    assert with_cache[-1] < without[-1]

    # Per process: the next one walks the store once, then reuses.
    async with open_runtime(store, ollama, session_id) as resumed:
        await turn_sends_the_store(resumed, ollama, "after resume?")
        assert kept(resumed.conversation).walks == 1
        await turn_sends_the_store(resumed, ollama, "and again?")
        assert kept(resumed.conversation).walks == 1


# --- the check -----------------------------------------------------------------------------


async def changed_in_place(runtime: Runtime, ollama: ScriptedOllama) -> str:
    """Two turns, then turn 1's answer changed in place in the conversation's
    state (the objects a state read hands out are the kept ones)."""
    for number in (1, 2):
        ollama.script([Text(f"answer {number}")])
        assert (await runtime.conversation.run_turn(f"question {number}")).status == "done"
    messages = runtime.conversation.messages()
    assert text_of(messages[1]) == "answer 1"
    messages[1].content = "TAMPERED"
    return "answer 1"


async def test_the_check_fails_a_turn_whose_kept_history_was_changed_in_place(
    tmp_path: Any, ollama: ScriptedOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CHECK_HISTORY_ENV, "1")
    store = StoreUnderTest("folder", str(tmp_path / "sessions"))
    async with open_runtime(store, ollama) as runtime:
        original = await changed_in_place(runtime, ollama)
        requests = len(ollama.requests)
        ollama.script([Text("never sent")])
        outcome = await runtime.conversation.run_turn("question 3")
        assert outcome.status == "failed"
        assert outcome.error is not None
        assert "differs from the session store" in outcome.error
        assert CHECK_HISTORY_ENV in outcome.error
        assert outcome.rollback is not None and outcome.rollback.verified
        assert len(ollama.requests) == requests  # the model never saw it
        assert [t.status for t in runtime.conversation.session.turns()] == [
            "done",
            "done",
            "failed",
        ]

        # The kept history was dropped: the next turn decodes the store afresh.
        await turn_sends_the_store(runtime, ollama, "question 4")
        assert ("assistant", original) in sent(ollama.requests[-1])
        assert "TAMPERED" not in str(ollama.requests[-1])


async def test_without_the_check_a_change_in_place_would_reach_the_model(
    tmp_path: Any, ollama: ScriptedOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the check exists: the decoded messages are shared between turns (a
    deep copy on every turn costs about 22 ms at 500 turns, more than the
    budget), so code that changed one in place would change what the model is
    sent but not the store. docs/design-notes.md lists every reader and why
    none does."""
    monkeypatch.delenv(CHECK_HISTORY_ENV, raising=False)
    store = StoreUnderTest("folder", str(tmp_path / "sessions"))
    async with open_runtime(store, ollama) as runtime:
        original = await changed_in_place(runtime, ollama)
        ollama.script([Text("answer 3")])
        assert (await runtime.conversation.run_turn("question 3")).status == "done"
        assert ("assistant", "TAMPERED") in sent(ollama.requests[-1])
        assert ("assistant", original) in in_the_store(runtime.conversation)


# --- what moves the head ---------------------------------------------------------------------


async def cancelled_in_a_tool(runtime: Runtime, ollama: ScriptedOllama) -> TurnOutcome:
    tool_started.clear()
    ollama.script([ToolCall("slow_lookup", {"query": "all"})])
    task = asyncio.create_task(runtime.conversation.run_turn("the slow question"))
    assert await asyncio.to_thread(tool_started.wait, 20)
    task.cancel()
    return await task


async def failed_after_a_tool(runtime: Runtime, ollama: ScriptedOllama) -> TurnOutcome:
    ollama.script([ToolCall("lookup", {"query": "all"})], [HTTPError(500, "model crashed")])
    return await runtime.conversation.run_turn("the slow question")


@pytest.mark.parametrize(
    ("ending", "status"), [(cancelled_in_a_tool, "cancelled"), (failed_after_a_tool, "failed")]
)
async def test_after_a_rolled_back_turn_the_next_reuses_the_history_and_sends_the_store(
    store: StoreUnderTest,
    ollama: ScriptedOllama,
    ending: Callable[[Runtime, ScriptedOllama], Any],
    status: str,
) -> None:
    """The rollback returns the head to the checkpoint the kept history is of."""
    async with open_runtime(store, ollama) as runtime:
        for number in (1, 2, 3):
            await tool_turn(runtime, ollama, number)
        walks, reuses = kept(runtime.conversation).walks, kept(runtime.conversation).reuses
        outcome = await ending(runtime, ollama)
        assert outcome.status == status
        assert outcome.rollback is not None and outcome.rollback.verified
        await turn_sends_the_store(runtime, ollama, "after the rollback?")
        assert "the slow question" not in str(ollama.requests[-1])
        await turn_sends_the_store(runtime, ollama, "and after that?")
        assert kept(runtime.conversation).walks == walks
        assert kept(runtime.conversation).reuses >= reuses + 2


async def test_rewind_and_compact_then_each_turn_sends_the_store(
    store: StoreUnderTest, ollama: ScriptedOllama
) -> None:
    """A rewind or /compact writes an Overwrite onto the head: the kept
    history is extended by it or, past a stored snapshot, read afresh."""
    async with open_runtime(store, ollama) as runtime:
        conversation = runtime.conversation
        for number in (1, 2, 3):
            await tool_turn(runtime, ollama, number)
        history.rewind(conversation, 1)
        await turn_sends_the_store(runtime, ollama, "after the rewind?")
        await turn_sends_the_store(runtime, ollama, "and after that?")
        ollama.script([Text("Summary: sites 1 and the rewind were discussed.")])
        compacted = await history.compact(conversation, keep_exchanges=1)
        assert compacted.summarized
        await turn_sends_the_store(runtime, ollama, "after the compaction?")
        await turn_sends_the_store(runtime, ollama, "and after that one?")
        history.rewind(conversation, 5)  # back past the compaction
        await turn_sends_the_store(runtime, ollama, "back before it?")
        assert kept(conversation).reuses >= 5


async def test_automatic_compaction_keeps_what_the_model_sees_equal_to_the_store(
    tmp_path: Any, ollama: ScriptedOllama
) -> None:
    """ContextGuard's summary lives in `_summarization_event`, not in the
    messages; every reuse is compared with a fresh decode (the suite's check)
    and each turn's first request is the store's view of the conversation
    (or its compacted form, when the guard compacts before sending)."""
    store = StoreUnderTest("folder", str(tmp_path / "sessions"))
    ollama.responder = agent_responder
    async with open_runtime(store, ollama, tools=[big_lookup], NETBOX_CHAT_NUM_CTX="8192") as rt:
        guard = rt.context
        assert isinstance(guard, ContextGuard)
        compactions = 0
        for number in range(1, 7):
            expected = [*in_the_store(rt.conversation), ("user", f"devices of turn-{number}")]
            first = len(ollama.requests)
            outcome = await rt.conversation.run_turn(f"devices of turn-{number}")
            assert outcome.status == "done", outcome.error
            if outcome.context.compactions:
                compactions += 1
            else:
                assert sent(ollama.requests[first]) == expected
        assert compactions
        assert kept(rt.conversation).reuses >= 4
        assert in_the_store(rt.conversation)[-1] == (
            "assistant",
            text_of(rt.conversation.messages()[-1]),
        )


def test_after_a_kill_9_the_next_process_rolls_back_then_reuses(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    """The kept history is per process: the process after a crash rolls the
    turn back on open, walks the store once, then reuses."""
    session_id = first_turn(store_env, ollama)
    proc = hold_in_a_tool(store_env, ollama, netbox, session_id)
    proc.kill()
    proc.wait(timeout=10)
    assert store.statuses(session_id) == [(1, "done"), (2, "running")]

    async def next_process() -> None:
        async with open_runtime(store, ollama, session_id) as runtime:
            await turn_sends_the_store(runtime, ollama, "after the crash?")
            await turn_sends_the_store(runtime, ollama, "and after that?")
            assert "list the sites slowly" not in str(ollama.requests[-1])
            assert kept(runtime.conversation).walks == 1

    asyncio.run(next_process())
    assert store.statuses(session_id) == [(1, "done"), (2, "interrupted"), (3, "done"), (4, "done")]


async def test_a_history_with_a_message_without_an_id_is_never_kept(
    tmp_path: Any, ollama: ScriptedOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session file whose first question was stored without a message id,
    as LangGraph stored it before `ensure_message_ids` (emulated by turning
    that hook off for the first turn). Written again by a rewind's
    `Overwrite`, LangGraph stamps an id on it in place, which would change a
    kept message; so such a history is read afresh every time, and the check
    (the suite's) finds nothing to differ."""
    import langgraph.pregel._loop as pregel_loop

    store = StoreUnderTest("folder", str(tmp_path / "sessions"))
    async with open_runtime(store, ollama) as runtime:
        conversation = runtime.conversation
        with monkeypatch.context() as old_langgraph:
            old_langgraph.setattr(pregel_loop, "ensure_message_ids", lambda specs, writes: None)
            ollama.script([Text("answer 1")])
            assert (await conversation.run_turn("question 1")).status == "done"
        assert conversation.messages()[0].id is None
        for number in (2, 3):
            await tool_turn(runtime, ollama, number)
        history.rewind(conversation, 2)
        await turn_sends_the_store(runtime, ollama, "after the rewind?")
        await turn_sends_the_store(runtime, ollama, "and after that?")
        assert kept(conversation).reuses == 0
