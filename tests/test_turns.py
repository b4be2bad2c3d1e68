"""Cancel and rollback on the real deepagents graph, with the real chat model
(ChatOllama, or ours over /v1) talking to the scripted server, in either store.
Invariants I1-I6 of the Ctrl-C issue are checked from a fresh process, the way
the next `resume` sees the session.

Each test runs on Ollama's API and on one OpenAI-compatible dialect (vLLM), as
on both stores; where tool calls reach the client differently (whole in one
chunk or in argument pieces), once per way (wire.TOOL_CALL_SHAPES). When each
server notices a closed stream differs too: tests/test_openai.py cancels on all
five dialects."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation, ToolFinished, TurnEvent
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.checkpoints.sqlite import BRIDGED_METHODS, BridgedSqliteSaver, WritesStillRunning
from netbox_chat.config import resolve_settings
from netbox_chat.store.sessions import SessionFile, SessionStore, connect
from tests.doubles.inspect_session import read_from_fresh_process
from tests.doubles.ollama_server import Delay, ScriptedOllama, Text, ToolCall
from tests.doubles.openai_server import chat_model_for, server_settings
from tests.doubles.stores import StoreUnderTest
from tests.doubles.wire import TOOL_CALL_SHAPES

pytestmark = pytest.mark.model_servers("ollama", "vllm")

SLOW_SECONDS = 1.5


@tool
async def fast_lookup(query: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Look something up quickly; also leaves a note in the agent's files."""
    return Command(
        update={
            "files": {"/notes.md": {"content": f"note about {query}", "encoding": "utf-8"}},
            "messages": [ToolMessage(f"fast result for {query}", tool_call_id=tool_call_id)],
        }
    )


@tool
async def slow_lookup(query: str) -> str:
    """Look something up slowly."""
    await asyncio.sleep(SLOW_SECONDS)
    return f"slow result for {query}"


@tool
def blocking_lookup(query: str) -> str:
    """A sync tool: runs on a worker thread that no cancel can stop."""
    time.sleep(SLOW_SECONDS)
    return f"late result for {query}"


TOOLS = [fast_lookup, slow_lookup, blocking_lookup]


@pytest.fixture
async def conversation(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> AsyncIterator[Conversation]:
    settings = store.settings(**server_settings(ollama))
    session = store.create(model=settings.model)
    saver = open_saver(session)
    graph = build_agent(settings, TOOLS, saver, model=chat_model_for(settings))
    yield Conversation(session, graph, saver, find_end_node(graph))
    session.close()
    store.assert_ledger_agrees(session.id)


def inspect(conversation: Conversation, store: StoreUnderTest) -> dict[str, Any]:
    """The session's committed state as a fresh process reads it."""
    conversation.session.close()
    return read_from_fresh_process(store.value, conversation.session.id)


def reopen(conversation: Conversation, store: StoreUnderTest) -> Conversation:
    session = store.open(conversation.session.id)
    saver = open_saver(session)
    return Conversation(
        session,
        conversation.graph.copy(update={"checkpointer": saver}),
        saver,
        conversation.end_node,
    )


async def cancel_when(
    conversation: Conversation, question: str, ready: Callable[[TurnEvent], bool]
) -> Any:
    seen = asyncio.Event()

    def sink(event: TurnEvent) -> None:
        if ready(event):
            seen.set()

    task = asyncio.create_task(conversation.run_turn(question, sink))
    await asyncio.wait_for(seen.wait(), 10)
    task.cancel()
    return await task


@pytest.mark.model_servers(*TOOL_CALL_SHAPES)  # the parallel calls whole or in pieces
async def test_cancel_between_parallel_tools_restores_everything(
    conversation: Conversation, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    ollama.script([Text("Akron has three devices.")])
    first = await conversation.run_turn("how many devices at Akron?")
    assert first.status == "done"
    before = [m.id for m in conversation.messages()]

    ollama.script(
        [ToolCall("fast_lookup", {"query": "a"}), ToolCall("slow_lookup", {"query": "b"})]
    )
    outcome = await cancel_when(
        conversation, "cancelled question", lambda e: isinstance(e, ToolFinished)
    )
    assert outcome.status == "cancelled"
    assert outcome.rollback is not None and outcome.rollback.verified

    state = inspect(conversation, store)
    assert [m["id"] for m in state["messages"]] == before  # I1
    assert state["next"] == [] and state["pending_writes"] == 0  # I2
    assert state["files"] == []  # I5: the note written by the cancelled turn is gone
    cancelled = state["turns"][1]  # I6
    assert cancelled["status"] == "cancelled"
    assert cancelled["question"] == "cancelled question"
    assert cancelled["rolled_back"] >= 2

    time.sleep(SLOW_SECONDS + 0.5)
    assert inspect(conversation, store)["messages"] == state["messages"]  # I3

    resumed = reopen(conversation, store)
    ollama.script([Text("Columbus has one.")])
    third = await resumed.run_turn("and Columbus?")
    assert third.status == "done"
    sent = json.dumps(ollama.requests[-1]["messages"])  # I4
    assert "how many devices at Akron?" in sent and "Akron has three devices." in sent
    assert "and Columbus?" in sent
    assert "cancelled question" not in sent and "fast result" not in sent
    resumed.session.close()


async def test_a_cancelled_turn_leaves_the_thread_row_for_row_as_it_was(
    conversation: Conversation, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """A rollback writes nothing: no restore checkpoint, no fork, no growth;
    the turn's checkpoint, its tool result and its note in `files` are gone."""
    ollama.script([Text("first answer")])
    await conversation.run_turn("first question")
    first = store.thread_rows(conversation.session.id)
    ollama.script([ToolCall("fast_lookup", {"query": "z"})], [Text("second answer")])
    await conversation.run_turn("second question")
    before = store.thread_rows(conversation.session.id)
    # a finished turn is stored once, at its end: one checkpoint, whatever its steps
    assert len(before["checkpoints"]) == len(first["checkpoints"]) + 1

    ollama.script(
        [ToolCall("fast_lookup", {"query": "a"}), ToolCall("slow_lookup", {"query": "b"})]
    )
    outcome = await cancel_when(
        conversation, "cancelled question", lambda e: isinstance(e, ToolFinished)
    )
    assert outcome.rollback is not None and outcome.rollback.verified
    # the question, the model's tool calls and the fast tool's result
    assert outcome.rollback.removed_messages == 3
    assert store.thread_rows(conversation.session.id) == before


async def test_each_turn_adds_about_the_same_bytes_however_long_the_session(
    conversation: Conversation, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """The message list is never stored again as a whole (deepagents would
    snapshot it every 50 updates: the file would grow with the square of the
    conversation). Turns 31-40 must cost what turns 1-10 did."""
    conversation.saver.setup()  # a new session file has no tables until the first write
    windows = []
    for _ in range(4):
        start = store.stored_bytes(conversation.session.id)
        for turn in range(10):
            ollama.script([Text(f"answer number {turn:02d}, always the same length")])
            assert (await conversation.run_turn(f"question {turn:02d}?")).status == "done"
        windows.append(store.stored_bytes(conversation.session.id) - start)
    assert len(conversation.messages()) == 80
    assert max(windows) <= 1.2 * windows[0], windows


@pytest.mark.model_servers("ollama")
async def test_sessions_written_without_compression_still_read(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Blobs are stored compressed now; a file from the release before, written
    with SqliteSaver's plain serializer, opens and goes on, and its new rows
    are compressed. Session files only: no release before wrote a database.
    On Ollama's API only: no release before spoke to another server."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    settings = resolve_settings(sessions_dir=sessions_dir, ollama_url=ollama.url, env={})
    session = SessionFile.create(SessionStore(sessions_dir), model=settings.model)
    plain = BridgedSqliteSaver(session.db, session.id)
    plain.serde = JsonPlusSerializer()  # what the release before stored
    graph = build_agent(settings, TOOLS, plain)
    old = Conversation(session, graph, plain, find_end_node(graph))
    ollama.script([Text("an old answer")])
    assert (await old.run_turn("an old question")).status == "done"

    saver = BridgedSqliteSaver(session.db, session.id)
    graph = build_agent(settings, TOOLS, saver)
    conversation = Conversation(session, graph, saver, find_end_node(graph))
    ollama.script([Text("a new answer")])
    assert (await conversation.run_turn("a new question")).status == "done"
    assert [m.content for m in conversation.messages()] == [
        "an old question",
        "an old answer",
        "a new question",
        "a new answer",
    ]
    kinds = {row[0] for row in saver.conn.execute("SELECT type FROM checkpoints")}
    assert kinds == {"msgpack", "msgpack+zlib"}
    saver.conn.close()
    session.close()


async def test_a_result_that_lands_after_the_rollback_never_appears(
    conversation: Conversation, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    ollama.script([Text("first answer")])
    await conversation.run_turn("first question")
    ollama.script([ToolCall("blocking_lookup", {"query": "late"})])
    outcome = await cancel_when(
        conversation, "question with a late tool", lambda e: type(e).__name__ == "ToolStarted"
    )
    assert outcome.rollback is not None and outcome.rollback.verified
    time.sleep(SLOW_SECONDS + 1.0)  # the worker thread finishes after the rollback
    state = inspect(conversation, store)
    assert [m["content"] for m in state["messages"]] == ["first question", "first answer"]
    assert state["pending_writes"] == 0 and state["head_problems"] == []
    assert "late result" not in json.dumps(state)


async def test_cancel_mid_answer_closes_the_servers_stream(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    ollama.script([Text("one two three four five six seven eight nine ten", chunk_delay=0.3)])
    outcome = await cancel_when(
        conversation, "stream me", lambda e: type(e).__name__ == "TextDelta"
    )
    assert outcome.status == "cancelled"
    ollama.wait_for_disconnects(1, timeout=2.0)
    assert conversation.messages() == []
    assert conversation.head_problems() == []


async def test_a_failed_turn_is_rolled_back_and_explained(
    conversation: Conversation, ollama: ScriptedOllama
) -> None:
    from tests.doubles.ollama_server import StreamError

    ollama.script([Text("partial answer"), StreamError("model crashed")])
    outcome = await conversation.run_turn("doomed question")
    assert outcome.status == "failed"
    assert outcome.error and "model crashed" in outcome.error
    assert outcome.rollback is not None and outcome.rollback.verified
    assert conversation.messages() == []
    assert conversation.session.turns()[0].status == "failed"


def test_the_bridge_overrides_every_async_method_the_base_class_has() -> None:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    base_async = {
        name
        for name in dir(BaseCheckpointSaver)
        if (
            name.startswith("a") and asyncio.iscoroutinefunction(getattr(BaseCheckpointSaver, name))
        )
        or name == "alist"
    }
    must_bridge = base_async - {"aget", "adelete_for_runs", "acopy_thread", "aprune"}
    assert must_bridge == set(BRIDGED_METHODS)
    for name in BRIDGED_METHODS:
        assert getattr(BridgedSqliteSaver, name) is not getattr(BaseCheckpointSaver, name)


async def test_drain_counts_calls_made_through_a_copy_of_the_saver(sessions_dir: Path) -> None:
    """With strict msgpack on, LangGraph hands the graph a shallow copy of the
    saver (`with_allowlist`), while the rollback drains the original: both
    must count the same calls, or a write could commit after the rollback.
    One store is enough: both savers get the count from `SyncSaverBridge`."""
    from tests.doubles.savers import stuck_write

    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / "copy.sqlite").touch()  # connect() opens, never creates
    saver = BridgedSqliteSaver(connect(sessions_dir / "copy.sqlite"), "copy")
    clone = copy.copy(saver)  # what `BaseCheckpointSaver.with_allowlist` returns
    call, release = await stuck_write(clone)
    with pytest.raises(WritesStillRunning):  # the clone's call is still running
        saver.drain(timeout=0.05)
    release.set()
    await call
    saver.drain(timeout=5)
    saver.conn.close()


@tool
async def quick_lookup(query: str) -> str:
    """Look something up quickly."""
    return f"quick result for {query}"


@pytest.mark.parametrize("delta", [True, False], ids=["delta-channel", "add_messages"])
async def test_parallel_tool_cancel_on_a_minimal_graph(
    delta: bool, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """The same regression without deepagents: messages as a delta channel and
    as plain add_messages, read back through a fresh connection to the store."""
    from tests.doubles.graphs import build_graph

    settings = store.settings(**server_settings(ollama))
    session = store.create(model=settings.model)
    model = chat_model_for(settings)
    saver = open_saver(session)
    graph = build_graph(model, [quick_lookup, slow_lookup], saver, delta=delta)
    conversation = Conversation(session, graph, saver, find_end_node(graph))

    ollama.script([Text("first answer")])
    assert (await conversation.run_turn("first question")).status == "done"
    ollama.script(
        [ToolCall("quick_lookup", {"query": "a"}), ToolCall("slow_lookup", {"query": "b"})]
    )
    outcome = await cancel_when(
        conversation, "cancelled question", lambda e: type(e).__name__ == "ToolStarted"
    )
    assert outcome.status == "cancelled"
    assert outcome.rollback is not None and outcome.rollback.verified, outcome.rollback
    session.close()
    time.sleep(SLOW_SECONDS + 0.5)

    session = store.open(session.id)
    fresh_saver = open_saver(session)
    fresh = Conversation(
        session,
        graph.copy(update={"checkpointer": fresh_saver}),
        fresh_saver,
        conversation.end_node,
    )
    assert [(m.type, m.content) for m in fresh.messages()] == [
        ("human", "first question"),
        ("ai", "first answer"),
    ]
    assert fresh.head_problems() == []
    ollama.script([Text("second answer")])
    assert (await fresh.run_turn("second question")).status == "done"
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "first answer" in sent and "second question" in sent
    assert "cancelled question" not in sent and "quick result" not in sent
    session.close()
    store.assert_ledger_agrees(session.id)


async def test_a_cancel_as_the_answer_is_being_stored_leaves_nothing_after_the_rollback(
    conversation: Conversation,
    ollama: ScriptedOllama,
    store: StoreUnderTest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32, item 13 (randomized-fault case 104): a Ctrl-C landing as the
    run ends. LangGraph submits the turn's writes, then its checkpoint as a
    task that waits for them; the cancel lands while the writes run. The
    rollback waits for those, but the checkpoint's task had not started: it
    used to write the turn's checkpoint (parent: the pre-turn head) after the
    rollback had verified. The cancel is landed exactly there: once the first
    of the run's exit writes has started (with durability "exit" there is no
    other write before it)."""
    ollama.script([Text("first answer")])
    await conversation.run_turn("first question")
    before = store.thread_rows(conversation.session.id)

    turn: list[asyncio.Task[Any]] = []
    saver_class = type(conversation.saver)
    original = saver_class.aput_writes

    async def cancelled_as_stored(self: Any, *args: Any, **kwargs: Any) -> None:
        write = asyncio.ensure_future(original(self, *args, **kwargs))
        await asyncio.sleep(0)  # the write has started: it runs on its worker thread
        if turn and not turn[0].done():
            turn[0].cancel()  # the signal, between the writes and the checkpoint
        await write

    monkeypatch.setattr(saver_class, "aput_writes", cancelled_as_stored)
    ollama.script([Text("the answer that is being stored")])
    turn.append(asyncio.create_task(conversation.run_turn("question cancelled as stored")))
    outcome = await turn[0]
    assert outcome.status == "cancelled"
    assert outcome.rollback is not None and outcome.rollback.verified
    await asyncio.sleep(0.5)  # whatever the run's exit still had queued runs now
    assert store.thread_rows(conversation.session.id) == before
    state = inspect(conversation, store)
    assert [m["content"] for m in state["messages"]] == ["first question", "first answer"]
    assert state["head_problems"] == [] and state["turns"][1]["status"] == "cancelled"


def committed_at(statements: list[str]) -> list[tuple[str, str]]:
    """(the `synchronous` level each commit ran at, that transaction's SQL)
    from a session file's statement trace; the connection starts at FULL."""
    level, current, commits = "FULL", "", []
    for sql in statements:
        words = " ".join(sql.split()).upper()
        if words.startswith("PRAGMA SYNCHRONOUS ="):
            value = words.rsplit("=", 1)[1].strip()
            level = {"1": "NORMAL", "2": "FULL"}.get(value, value)
        elif words == "COMMIT":
            commits.append((level, current))
            current = ""
        else:
            current += sql + "\n"
    return commits


async def test_a_turns_start_and_its_rollback_do_not_wait_for_the_disk_its_answer_does(
    conversation: Conversation, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """Issue 32, item 14: a Ctrl-C in a turn's first moments waited for two
    commits synced to the disk (the turn's `running` row, then its rollback),
    5-20 ms each on a quiet disk and hundreds while it is busy. Neither needs
    the disk: nothing of a turn is stored before its end, whose commits are
    synced and take the earlier ones with them, and a rollback lost to a power
    cut is made again by the next open. The answer's commits still wait."""
    if store.kind != "folder":
        pytest.skip("the statement trace is SQLite's (on PostgreSQL: synchronous_commit)")
    statements: list[str] = []
    conversation.session.db.set_trace_callback(statements.append)
    ollama.script([Text("first answer")])
    assert (await conversation.run_turn("first question")).status == "done"
    ollama.script([Delay(5.0), Text("never")])
    # Cancelled once the request has reached the model, not at TurnStarted: a
    # trace callback needs the GIL while SQLite holds the connection's mutex, so
    # with the history read a Ctrl-C abandons still running on a worker thread,
    # the rollback's statements on this thread deadlock (in C, where
    # pytest-timeout's signal never arrives: a CI run hung on it). The product
    # sets no Python callback on a connection; the commits traced are the same.
    task = asyncio.create_task(conversation.run_turn("oops, wrong question"))
    await asyncio.to_thread(ollama.wait_for_requests, 2, timeout=10)
    task.cancel()
    outcome = await task
    assert outcome.status == "cancelled"
    assert outcome.rollback is not None and outcome.rollback.verified
    conversation.session.db.set_trace_callback(None)

    commits = committed_at(statements)
    began = [level for level, sql in commits if "INSERT INTO turns" in sql]
    stored = [level for level, sql in commits if re.search(r"INTO (checkpoints|writes)", sql)]
    answered = [level for level, sql in commits if "SET status = 'done'" in sql]
    rolled_back = [level for level, sql in commits if "SET status = 'cancelled'" in sql]
    assert began == ["NORMAL", "NORMAL"]
    assert rolled_back == ["NORMAL"]
    assert stored and set(stored) == {"FULL"} and answered == ["FULL"]
    # and the connection is back to its own setting for whatever comes next
    assert conversation.session.db.execute("PRAGMA synchronous").fetchone()[0] == 2
    state = inspect(conversation, store)
    assert [m["content"] for m in state["messages"]] == ["first question", "first answer"]
    assert [t["status"] for t in state["turns"]] == ["done", "cancelled"]
