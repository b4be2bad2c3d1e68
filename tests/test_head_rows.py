"""The head check and the rollback's verification read rows, not the whole
conversation (issue 17). They must catch every dirty head the whole-state
read catches: each test below corrupts a real session file one way, shows
that the state read flags it (so the corruption is real), that the row check
flags it too or declines to vouch (and the state read then decides), and
that the user sees the refusal or the failed check."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import CheckpointTuple

from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation, DirtyHead, ToolStarted
from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver, WritesStillRunning
from netbox_chat.config import resolve_settings
from netbox_chat.store.sessions import SessionFile, SessionStore, connect
from tests.doubles.ollama_server import ScriptedOllama, StreamError, Text, ToolCall


@tool
async def lookup(query: str) -> str:
    """Look something up."""
    return f"result for {query}"


@tool
async def slow_lookup(query: str) -> str:
    """Look something up slowly."""
    await asyncio.sleep(5)
    return f"slow result for {query}"


@pytest.fixture
async def conversation(ollama: ScriptedOllama, sessions_dir: Path) -> AsyncIterator[Conversation]:
    """A session with three finished turns, the second with a tool call."""
    settings = resolve_settings(sessions_dir=sessions_dir, ollama_url=ollama.url, env={})
    session = SessionFile.create(SessionStore(sessions_dir), model=settings.model)
    saver = BridgedSqliteSaver(session.db, session.id)
    graph = build_agent(settings, [lookup, slow_lookup], saver)
    conversation = Conversation(session, graph, saver, find_end_node(graph))
    ollama.script([Text("first answer")])
    await conversation.run_turn("first question")
    ollama.script([ToolCall("lookup", {"query": "a"})], [Text("second answer")])
    await conversation.run_turn("second question")
    ollama.script([Text("third answer")])
    await conversation.run_turn("third question")
    yield conversation
    saver.conn.close()
    session.close()


def head_tuple(conversation: Conversation) -> CheckpointTuple:
    head = conversation.saver.get_tuple(conversation.config)
    assert head is not None
    return head


def claim_head_is_clean(conversation: Conversation) -> None:
    """Make the ledger record the current head as the last turn's end, as if
    the turn that wrote it had finished: the row check must then judge the
    head by its rows alone, without the state read to fall back on."""
    head = head_tuple(conversation)
    parent = conversation.saver.get_tuple(head.parent_config)
    assert parent is not None
    with conversation.session.db:
        conversation.session.db.execute(
            "UPDATE turns SET end_checkpoint_id = ?, base_checkpoint_id = ?, "
            "base_message_count = ?, message_count = ? WHERE number = 3",
            (
                head.config["configurable"]["checkpoint_id"],
                parent.config["configurable"]["checkpoint_id"],
                conversation._inspect_state(parent)[1],
                conversation._inspect_state(head)[1],
            ),
        )


def add_message(conversation: Conversation, message: AIMessage, as_node: str) -> None:
    conversation.graph.update_state(conversation.config, {"messages": [message]}, as_node=as_node)


def steps_to_run(conversation: Conversation) -> None:
    add_message(conversation, AIMessage("half an answer", id=str(uuid.uuid4())), "model")


def pending_writes(conversation: Conversation) -> None:
    head = head_tuple(conversation)
    late = ToolMessage("a late result", tool_call_id="call-late", id=str(uuid.uuid4()))
    conversation.saver.put_writes(head.config, [("messages", [late])], str(uuid.uuid4()))


def call_without_result(conversation: Conversation) -> None:
    call = {"name": "lookup", "args": {"query": "x"}, "id": "call-unanswered", "type": "tool_call"}
    message = AIMessage("", tool_calls=[call], id=str(uuid.uuid4()))
    add_message(conversation, message, conversation.end_node)


CORRUPTIONS: dict[str, tuple[Callable[[Conversation], None], str]] = {
    "steps still to run": (steps_to_run, "steps to run"),
    "pending writes": (pending_writes, "pending on the head"),
    "a tool call without its result": (
        call_without_result,
        "tool call call-unanswered has no result",
    ),
}


def test_the_row_check_vouches_for_a_clean_head(conversation: Conversation) -> None:
    """Without this the row check could decline every head and the tests
    below would pass on the state read alone."""
    head = head_tuple(conversation)
    from_rows = conversation._inspect_rows(head)
    assert from_rows is not None
    assert from_rows == conversation._inspect_state(head)
    assert from_rows[1:] == (8, [])


@pytest.mark.parametrize("name", list(CORRUPTIONS))
@pytest.mark.parametrize("ledger", ["ledger unaware", "ledger claims it clean"])
async def test_each_dirty_head_the_state_read_catches_the_rows_catch(
    name: str, ledger: str, conversation: Conversation, ollama: ScriptedOllama
) -> None:
    corrupt, problem = CORRUPTIONS[name]
    corrupt(conversation)
    if ledger == "ledger claims it clean":
        claim_head_is_clean(conversation)
    head = head_tuple(conversation)
    assert any(problem in p for p in conversation._inspect_state(head)[2])  # today's check

    from_rows = conversation._inspect_rows(head)
    if ledger == "ledger claims it clean":
        assert from_rows is not None, "the rows alone must judge this head"
        assert any(problem in p for p in from_rows[2]), from_rows
    else:
        assert from_rows is None or any(problem in p for p in from_rows[2])

    requests = len(ollama.requests)
    with pytest.raises(DirtyHead, match=problem):
        await conversation.run_turn("a question on a dirty head")
    assert len(ollama.requests) == requests  # refused before asking the model


async def test_a_wrong_message_count_on_the_head_is_not_vouched_for(
    conversation: Conversation,
) -> None:
    """The ledger's count must add up with the last turn's own writes, or the
    rows do not vouch and the whole state is read (its count is the truth)."""
    with conversation.session.db:
        conversation.session.db.execute(
            "UPDATE turns SET message_count = message_count + 1 WHERE number = 3"
        )
    head = head_tuple(conversation)
    assert conversation._inspect_rows(head) is None
    assert conversation._inspect_head()[1] == 8


async def cancel_mid_tool(conversation: Conversation, ollama: ScriptedOllama) -> object:
    ollama.script([ToolCall("slow_lookup", {"query": "b"})])
    started = asyncio.Event()
    task = asyncio.create_task(
        conversation.run_turn(
            "cancelled question", lambda e: isinstance(e, ToolStarted) and started.set()
        )
    )
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    return await task


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        ("pass 1 skipped", "the head is not the pre-turn checkpoint"),
        ("pass 2 skipped", "pending on the head"),
    ],
)
async def test_a_rollback_that_did_not_restore_the_head_is_reported(
    breakage: str,
    problem: str,
    conversation: Conversation,
    ollama: ScriptedOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saver = conversation.saver
    truncate = saver.truncate_after

    def broken_truncate(thread_id: str, checkpoint_id: str | None, channel: str) -> list[object]:
        conn = saver.conn
        if breakage == "pass 1 skipped":  # leave the turn's checkpoint, drop its writes
            with conn:
                conn.execute("DELETE FROM writes WHERE checkpoint_id = ?", (checkpoint_id,))
            return []
        if breakage == "pass 2 skipped":  # drop the turn's checkpoint, leave its writes
            with conn:
                conn.execute("DELETE FROM checkpoints WHERE checkpoint_id > ?", (checkpoint_id,))
            return []
        return truncate(thread_id, checkpoint_id, channel)

    monkeypatch.setattr(saver, "truncate_after", broken_truncate)
    # The turn fails after its tool call: a cancelled one stores nothing to
    # leave behind (its writes are refused from the cancel on, checkpoints.sqlite.Run).
    ollama.script(
        [ToolCall("lookup", {"query": "b"})],
        [Text("half an "), StreamError("llama runner process has terminated")],
    )
    outcome = await conversation.run_turn("failing question")
    rollback = outcome.rollback
    assert rollback is not None and not rollback.verified
    assert any(problem in p for p in rollback.problems), rollback.problems
    (error,) = [t.error for t in conversation.session.turns() if t.status == "failed"]
    assert error is not None and "rollback check failed" in error


async def test_a_rollback_to_a_head_with_another_message_count_is_reported(
    conversation: Conversation,
) -> None:
    """A crash left a turn running whose pre-turn count (7) is not what the
    head holds (8): the next open rolls it back and must not call it
    verified, as the state read would not."""
    head = head_tuple(conversation)
    assert conversation._inspect_state(head)[1] == 8
    conversation.session.begin_turn(
        "crashed question",
        base_checkpoint_id=head.config["configurable"]["checkpoint_id"],
        base_message_count=7,
    )
    (report,) = conversation.recover_interrupted()
    assert not report.verified
    assert report.problems == ["8 messages where the pre-turn snapshot had 7"]
    (turn,) = [t for t in conversation.session.turns() if t.status == "interrupted"]
    assert turn.error is not None and "rollback check failed" in turn.error


async def test_a_verified_rollback_is_checked_from_rows(
    conversation: Conversation, ollama: ScriptedOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback's verification of a clean cancel reads no state: the
    whole-state read is what made Ctrl-C wait on a long session."""
    reads: list[object] = []
    get_state = conversation.graph.get_state
    monkeypatch.setattr(
        conversation.graph, "get_state", lambda *a, **k: reads.append(a) or get_state(*a, **k)
    )
    outcome = await cancel_mid_tool(conversation, ollama)
    rollback = outcome.rollback  # type: ignore[attr-defined]
    assert rollback is not None and rollback.verified, rollback
    assert reads == []
    head = head_tuple(conversation)
    assert conversation._inspect_state(head)[1:] == (8, [])


async def test_a_rollback_waits_for_writes_in_flight_but_not_for_reads(sessions_dir: Path) -> None:
    """After a Ctrl-C in a turn's first moments LangGraph may still be
    decoding the history on a worker thread; a read commits nothing, so
    drain() (which the rollback waits on) must not wait for it. A write still
    running would commit after the rollback, so drain() waits for that."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / "drain.sqlite").touch()  # connect() opens, never creates
    saver = BridgedSqliteSaver(connect(sessions_dir / "drain.sqlite"), "drain")
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def blocked(*args: object, **kwargs: object) -> None:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)

    saver.get_tuple = blocked  # type: ignore[method-assign]
    saver.put_writes = blocked  # type: ignore[method-assign]
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}}
    read = asyncio.create_task(saver.aget_tuple(config))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    saver.drain(timeout=0.05)  # a read in flight: nothing to wait for
    write = asyncio.create_task(saver.aput_writes(config, [], "task"))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    with pytest.raises(WritesStillRunning):
        saver.drain(timeout=0.05)
    release.set()
    await asyncio.gather(read, write)
    saver.drain(timeout=5)  # and once it is done, nothing is left
    saver.conn.close()
