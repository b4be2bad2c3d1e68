"""Rewind: linear, never a fork, failing closed.

Real parts throughout: sessions in either store (a session file, or the
PostgreSQL database; the one `store` fixture), the real deepagents graph (or
the minimal delta-mode graph from tests/doubles/graphs.py), the real ChatOllama
talking HTTP to the scripted server, and a fresh process that reopens the
session the way the next `resume` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from netbox_chat.agent import history
from netbox_chat.agent.turns import TurnEvent, TurnOutcome
from netbox_chat.errors import UserFacingError
from tests.doubles.chats import (
    Chat,
    contents,
    fresh_process,
    new_chat,
    open_chat,
    turn,
)
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest

# Compaction and rewind behave alike on every server: Ollama's API and one
# OpenAI-compatible dialect (vLLM) stand for all (tests/test_openai.py runs the
# five where they differ).
pytestmark = pytest.mark.model_servers("ollama", "vllm")


# --- tools the tests inject instead of NetBox's ------------------------------------------


# --- building and reopening conversations -----------------------------------------------


def reopen(chat: Chat, ollama: ScriptedOllama) -> Chat:
    chat.close()
    return open_chat(chat.store.open(chat.session.id), chat.kind, ollama, chat.store)


async def cancel_when(chat: Chat, question: str, ready: Callable[[TurnEvent], bool]) -> TurnOutcome:
    seen = asyncio.Event()

    def sink(event: TurnEvent) -> None:
        if ready(event):
            seen.set()

    task = asyncio.create_task(chat.conversation.run_turn(question, sink))
    await asyncio.wait_for(seen.wait(), 5)
    task.cancel()
    return await task


# --- the "old answer reappears" scenario ---------------------------------------------------


@pytest.mark.parametrize("kind", ["deepagents", "delta", "plain"])
async def test_the_abandoned_answer_never_reappears(
    kind: str, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat(kind, ollama, store) as chat:
        await turn(
            chat,
            ollama,
            "which sites exist?",
            [ToolCall("lookup", {"query": "sites"})],
            [Text("Akron and Columbus.")],
        )
        after_one = chat.conversation.messages()
        await turn(chat, ollama, "ABANDONED QUESTION", [Text("ABANDONED ANSWER")])

        result = history.rewind(chat.conversation, 1)
        assert str(result).startswith("rewound to turn 1: 1 later turn set aside")
        assert [m.id for m in chat.conversation.messages()] == [m.id for m in after_one]
        assert chat.conversation.head_problems() == []
        assert chat.conversation.head().next == ()

        await turn(chat, ollama, "and Dayton?", [Text("Dayton is planned.")])
        sent = json.dumps(ollama.requests[-1]["messages"])
        assert "ABANDONED" not in sent and "Akron and Columbus." in sent

        fresh = fresh_process(chat, "anything else?", "No.")

    assert contents(fresh["state"]["messages"])[-2:] == ["and Dayton?", "Dayton is planned."]
    assert "ABANDONED" not in json.dumps(fresh["state"])
    assert fresh["state"]["problems"] == [] and fresh["state"]["next"] == []
    assert fresh["status"] == "done"
    request = json.dumps(fresh["request"])
    assert "ABANDONED" not in request
    for expected in ("which sites exist?", "Akron and Columbus.", "and Dayton?", "anything else?"):
        assert expected in request
    assert [status for _, status, _ in fresh["turns"]] == ["done", "rewound", "done"]
    assert fresh["edits"][0][0] == "rewind" and fresh["edits"][0][1]["set_aside"] == [2]


async def test_rewind_restores_every_channel_not_only_messages(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await turn(chat, ollama, "first", [Text("first answer")])
        await turn(
            chat,
            ollama,
            "take a note",
            [ToolCall("take_note", {"query": "akron"})],
            [Text("noted.")],
        )
        head = chat.conversation.committed_values(chat.conversation.head_checkpoint_id())
        assert list(head["files"]) == ["/notes.md"]

        history.rewind(chat.conversation, 1)
        fresh = fresh_process(chat)

    assert fresh["state"]["files"] == []
    assert contents(fresh["state"]["messages"]) == ["first", "first answer"]


# --- the rollback point after a rewind --------------------------------------------------------


async def test_cancelling_the_next_turn_restores_the_rewound_state(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await turn(chat, ollama, "first", [Text("first answer")])
        rewound_ids = [m.id for m in chat.conversation.messages()]
        await turn(
            chat,
            ollama,
            "second",
            [ToolCall("take_note", {"query": "x"})],
            [Text("second answer")],
        )
        history.rewind(chat.conversation, 1)

        ollama.script([ToolCall("slow_lookup", {"query": "slow"})])
        outcome = await cancel_when(
            chat, "cancelled third", lambda e: type(e).__name__ == "ToolStarted"
        )
        assert outcome.status == "cancelled"
        assert outcome.rollback is not None and outcome.rollback.verified
        # The turn's rollback point was the rewound head, not the pre-rewind one.
        ledger = chat.session.turns()
        assert ledger[-1].base_checkpoint_id == chat.session.edits()[-1][2]["head_after"]
        fresh = fresh_process(chat)

    assert [m["id"] for m in fresh["state"]["messages"]] == rewound_ids
    assert fresh["state"]["files"] == []
    assert fresh["state"]["problems"] == [] and fresh["state"]["next"] == []
    assert [status for _, status, _ in fresh["turns"]] == ["done", "rewound", "cancelled"]


# --- which turn --------------------------------------------------------------------------------


async def test_default_rewind_drops_the_last_finished_turn_then_goes_to_the_start(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("delta", ollama, store) as chat:
        await turn(chat, ollama, "one", [Text("answer one")])
        await turn(chat, ollama, "two", [Text("answer two")])
        ollama.script([Text("never finished", chunk_delay=0.5)])
        cancelled = await cancel_when(chat, "three", lambda e: type(e).__name__ == "TextDelta")
        assert cancelled.status == "cancelled"

        first = history.rewind(chat.conversation, None)
        assert first.to_turn == 1 and first.set_aside == [2]
        assert [m.content for m in chat.conversation.messages()] == ["one", "answer one"]

        second = history.rewind(chat.conversation, None)
        assert str(second) == (
            "rewound to the start: 1 later turn set aside "
            "(they stay in the ledger as rewound); 2 → 0 messages"
        )
        assert chat.conversation.messages() == []
        assert chat.conversation.head().next == ()

        with pytest.raises(UserFacingError, match="nothing to rewind"):
            history.rewind(chat.conversation, None)
        await turn(chat, ollama, "four", [Text("answer four")])
        assert [m["content"] for m in ollama.requests[-1]["messages"]] == ["four"]


async def test_rewind_cleans_a_head_a_crash_left_half_done(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    """The DirtyHead error tells the user to /rewind; that must work."""
    async with new_chat("deepagents", ollama, store) as chat:
        await turn(chat, ollama, "first", [Text("first answer")])
        expected = [m.id for m in chat.conversation.messages()]
        # A run outside run_turn stopped mid-tool, as a crash leaves it.
        ollama.script([ToolCall("lookup", {"query": "a"}), ToolCall("slow_lookup", {"query": "b"})])
        conversation = chat.conversation

        async def drive() -> None:
            inputs = {"messages": [("user", "crashed question")]}
            async for _ in conversation.graph.astream(inputs, conversation.config):
                pass

        task = asyncio.create_task(drive())
        await asyncio.sleep(0.5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        conversation.saver.drain()
        assert conversation.head_problems() != []

        result = history.rewind(conversation, 1)
        assert result.set_aside == []
        assert conversation.head_problems() == []
        assert [m.id for m in conversation.messages()] == expected


# --- failing closed ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (7, "cannot rewind to turn 7: there is no such turn (this session has turns 1 to 3"),
        (3, "cannot rewind to turn 3: it was cancelled, not finished"),
        (2, "nothing to rewind: the conversation is already at turn 2"),
        (-1, "cannot rewind to turn -1: there is no such turn"),
    ],
)
async def test_a_rewind_that_cannot_happen_writes_nothing(
    target: int, message: str, ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        await turn(chat, ollama, "one", [Text("answer one")])
        await turn(chat, ollama, "two", [Text("answer two")])
        ollama.script([ToolCall("slow_lookup", {"query": "x"})])
        await cancel_when(chat, "three", lambda e: type(e).__name__ == "ToolStarted")
        head = chat.conversation.head_checkpoint_id()
        before = chat.snapshot()

        with pytest.raises(UserFacingError) as caught:
            history.rewind(chat.conversation, target)

        assert str(caught.value).startswith(message)
        assert "\n" not in str(caught.value)
        assert chat.snapshot() == before
        assert chat.conversation.head_checkpoint_id() == head


async def test_a_rewind_with_nothing_to_rewind_writes_nothing(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store) as chat:
        before = chat.snapshot()
        with pytest.raises(history.NothingToRewind, match="nothing to rewind: this session has no"):
            history.rewind(chat.conversation, None)
        with pytest.raises(
            history.NothingToRewind, match=r"nothing to rewind: .* already at the start"
        ):
            history.rewind(chat.conversation, 0)
        assert chat.snapshot() == before


async def test_a_turn_whose_state_cannot_be_materialized_is_refused(
    ollama: ScriptedOllama, store: StoreUnderTest
) -> None:
    async with new_chat("deepagents", ollama, store, check_ledger=False) as chat:
        await turn(chat, ollama, "one", [Text("answer one")])
        await turn(chat, ollama, "two", [Text("answer two")])
        # A damaged ledger: turn 1 points at a checkpoint the store does not hold.
        # (A database keeps every session's turns in one table.)
        of_session = "" if store.kind == "folder" else f" AND session_id = '{chat.session.id}'"
        with chat.session.db.atomic():
            chat.session.db.execute(
                "UPDATE turns SET end_checkpoint_id = '1f000000-0000-6000-8000-000000000000' "
                f"WHERE number = 1{of_session}"
            )
        before = chat.snapshot()
        with pytest.raises(
            UserFacingError, match=r"cannot rewind to turn 1: its checkpoint .* not"
        ):
            history.rewind(chat.conversation, 1)
        assert chat.snapshot() == before
        assert store.ledger_problems(chat.session.id) == [
            "done turn 1 ended on 1f000000-0000-6000-8000-000000000000, which is not stored"
        ]


def store_failure(store: StoreUnderTest) -> Exception:
    """What each store's driver raises when the disk fails under it."""
    if store.kind == "folder":
        return sqlite3.OperationalError("disk I/O error")
    import psycopg

    return psycopg.errors.DiskFull('could not extend file "base/16384/2619": disk I/O error')


async def test_a_failed_write_leaves_nothing_behind(
    ollama: ScriptedOllama, store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update_state saves its writes on the head, then the new checkpoint; a
    failure in between must not leave those writes pending on the head."""
    async with new_chat("deepagents", ollama, store) as chat:
        await turn(chat, ollama, "one", [Text("answer one")])
        await turn(chat, ollama, "two", [Text("answer two")])
        saver = chat.conversation.saver
        head = chat.conversation.head_checkpoint_id()
        before = chat.snapshot()
        put_writes_calls = 0
        real_put_writes = saver.put_writes

        def counting_put_writes(*args: Any, **kwargs: Any) -> None:
            nonlocal put_writes_calls
            put_writes_calls += 1
            real_put_writes(*args, **kwargs)

        def failing_put(*args: Any, **kwargs: Any) -> Any:
            raise store_failure(store)

        monkeypatch.setattr(saver, "put_writes", counting_put_writes)
        monkeypatch.setattr(saver, "put", failing_put)
        with pytest.raises(UserFacingError, match=r"rewind to turn 1 not written: .*disk I/O"):
            history.rewind(chat.conversation, 1)
        monkeypatch.undo()

        assert put_writes_calls == 1  # the first half really was written, then undone
        assert chat.snapshot() == before
        assert chat.conversation.head_checkpoint_id() == head
        assert chat.conversation.head_problems() == []
        # and the session still works
        await turn(chat, ollama, "three", [Text("answer three")])
        assert "answer two" in json.dumps(ollama.requests[-1]["messages"])
