"""A turn's life: snapshot, stream, cancel, two-pass rollback, verification,
crash recovery, rewind and compaction.

The invariant this module keeps: the thread the model sees is always a thread
of finished turns. Every turn is recorded as `running` with its rollback point
before it starts; whatever ends it other than success (Ctrl-C, an error, a
crash found on the next open) restores that point the same way.

A turn runs with `durability="exit"`: the graph keeps its steps in memory and
writes one checkpoint when the run ends (or is cancelled), so a turn appends
one checkpoint and its writes to the file, a crash mid-turn leaves nothing of
the turn on disk, and a rollback only has to delete that tail.

Nothing here prints: progress is reported as events to a sink, and the REPL
or the one-shot `ask` renders them.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.channels import LastValue
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite, StateSnapshot

from netbox_chat.checkpointer import SyncSaverBridge
from netbox_chat.errors import UserFacingError
from netbox_chat.pgstore import database_errors
from netbox_chat.sessions import StoreError, ToolCallRecord, TurnStatus
from netbox_chat.stores import OpenSession

if TYPE_CHECKING:
    from netbox_chat.history import CompactResult, RewindResult


# What a session store that cannot be written raises (disk full, I/O error,
# read-only file system; a database connection lost or refused). Only the
# stores' own errors: an OSError in a turn is far more likely a connection to
# Ollama or NetBox going away.
def _store_errors() -> tuple[type[Exception], ...]:
    return (sqlite3.Error, *database_errors())


# --- events -----------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolStarted:
    call_id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolFinished:
    call_id: str
    name: str
    args: dict[str, Any]
    result_chars: int
    seconds: float
    error: bool


@dataclass(frozen=True)
class ModelCallFinished:
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class RollingBack:
    turn: int
    reason: str


TurnEvent = TextDelta | ToolStarted | ToolFinished | ModelCallFinished | RollingBack
EventSink = Callable[[TurnEvent], None]


def ignore_events(event: TurnEvent) -> None:
    del event


@dataclass
class RollbackReport:
    turn: int
    removed_messages: int
    verified: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class TurnOutcome:
    number: int
    status: TurnStatus
    answer: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    error: str | None = None
    rollback: RollbackReport | None = None


class DirtyHead(UserFacingError):
    """The head is not a clean end of a turn; taking a turn on it would let the
    model see a half-finished one."""


# --- helpers on message lists ----------------------------------------------------------


def message_ids(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.id) for m in messages]


def _message_key(message: BaseMessage) -> tuple[str, str, str]:
    return (str(message.id), message.type, json.dumps(message.content, sort_keys=True))


def _text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


@dataclass(frozen=True)
class Exchange:
    """One finished question and its answer, for recaps and transcripts."""

    question: str
    answer: str


def exchanges(messages: Sequence[BaseMessage]) -> list[Exchange]:
    result: list[Exchange] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            result.append(Exchange(_text_of(message), ""))
        elif isinstance(message, AIMessage) and result and not message.tool_calls:
            result[-1] = Exchange(result[-1].question, _text_of(message))
    return result


# --- the conversation -----------------------------------------------------------------


class Conversation:
    """One open session bound to its compiled agent graph."""

    def __init__(
        self,
        session: OpenSession,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        saver: SyncSaverBridge,
        end_node: str,
        model: Any = None,
    ) -> None:
        self.session = session
        self.graph = graph
        self.saver = saver
        self.end_node = end_node
        self.model = model  # the agent's chat model; /compact asks it for the summary
        self.config: RunnableConfig = {"configurable": {"thread_id": session.id}}

    # history edits (history.py imports this module, hence the local imports)

    def rewind(self, to_turn: int | None = None) -> RewindResult:
        from netbox_chat.history import rewind

        return rewind(self, to_turn)

    async def compact(self, keep_exchanges: int = 2) -> CompactResult:
        from netbox_chat.history import compact

        return await compact(self, keep_exchanges=keep_exchanges, model=self.model)

    # reading committed state

    def head(self) -> StateSnapshot:
        return self.graph.get_state(self.config)

    def pinned(self, checkpoint_id: str | None) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": self.session.id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }

    def committed_values(self, checkpoint_id: str | None) -> dict[str, Any]:
        """Channel values as committed at a checkpoint (never the live view)."""
        if checkpoint_id is None:
            return {}
        return dict(self.graph.get_state(self.pinned(checkpoint_id)).values)

    def head_checkpoint_id(self) -> str | None:
        head = self.saver.get_tuple(self.config)
        return None if head is None else str(head.config["configurable"]["checkpoint_id"])

    def messages(self) -> list[BaseMessage]:
        return list(self.committed_values(self.head_checkpoint_id()).get("messages", []))

    def head_problems(self) -> list[str]:
        """Why the head is not a clean end of a turn (empty when it is)."""
        return self._inspect_head()[2]

    def _inspect_head(self) -> tuple[str | None, int, list[str]]:
        """(head checkpoint id, its message count, why it is not a clean end of
        a turn), from one read of the committed state."""
        head_tuple = self.saver.get_tuple(self.config)
        if head_tuple is None:
            return None, 0, []
        head_id = str(head_tuple.config["configurable"]["checkpoint_id"])
        problems = []
        snapshot = self.graph.get_state(self.pinned(head_id))
        if snapshot.next:
            problems.append(f"the graph still has steps to run: {', '.join(snapshot.next)}")
        if head_tuple.pending_writes:
            problems.append(f"{len(head_tuple.pending_writes)} task result(s) pending on the head")
        messages = snapshot.values.get("messages", [])
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        for message in messages:
            if isinstance(message, AIMessage):
                missing = [c["id"] for c in message.tool_calls if c["id"] not in answered]
                if missing:
                    problems.append(
                        f"tool call(s) without a result: {', '.join(map(str, missing))}"
                    )
        return head_id, len(messages), problems

    # a turn

    async def run_turn(self, question: str, sink: EventSink = ignore_events) -> TurnOutcome:
        """Run one turn; on cancel or error, roll it back before returning.

        Cancel this coroutine's task exactly once to stop the turn: the graph's
        own cleanup runs, then the rollback runs synchronously, which a second
        cancel cannot interrupt.
        """
        try:
            base, base_messages, problems = self._inspect_head()
            if problems:
                raise DirtyHead(
                    "this session's last turn did not end cleanly ("
                    + "; ".join(problems)
                    + "); rewind to the last clean turn with /rewind"
                )
            number = self.session.begin_turn(
                question, base_checkpoint_id=base, base_message_count=base_messages
            )
        except _store_errors() as exc:  # no snapshot, no turn (and no model call)
            raise StoreError(
                f"session {self.session.id}: cannot start the turn: {describe_error(exc)}"
            ) from exc
        outcome = TurnOutcome(number, "running")
        store_failure: BaseException | None = None
        try:
            await self._stream(question, sink, outcome)
        except asyncio.CancelledError:
            outcome.status = "cancelled"
        except Exception as exc:  # the turn failed: roll back and report
            outcome.status = "failed"
            outcome.error = describe_error(exc)
            store_failure = exc if isinstance(exc, _store_errors()) else None
        else:
            try:
                messages = self.messages()
                self.session.finish_turn(
                    number,
                    "done",
                    end_checkpoint_id=self.head_checkpoint_id(),
                    tokens_in=outcome.tokens_in,
                    tokens_out=outcome.tokens_out,
                    tool_calls=outcome.tool_calls,
                    answer=outcome.answer,
                    message_count=len(messages),
                )
            except _store_errors() as exc:  # the answer cannot be recorded: undo it
                outcome.status = "failed"
                outcome.error = describe_error(exc)
                store_failure = exc
            else:
                outcome.status = "done"
                return outcome
        sink(RollingBack(number, outcome.status))
        try:
            outcome.rollback = self.rollback(number, base, base_messages)
            self.session.finish_turn(
                number,
                outcome.status,
                tokens_in=outcome.tokens_in,
                tokens_out=outcome.tokens_out,
                tool_calls=outcome.tool_calls,
                rolled_back=outcome.rollback.removed_messages,
                error=_join(outcome.error, outcome.rollback.problems),
            )
        except _store_errors() as exc:
            # Neither the rollback nor the ledger could be written. What is on
            # disk is still consistent: the ledger says the turn is `running`
            # with its snapshot (or it was recorded as ended), so the next open
            # rolls it back the way it would after a crash.
            raise StoreError(
                f"turn {number} {outcome.status} and could not be rolled back now "
                f"({describe_error(exc)}); the session is kept and the turn will be "
                f"rolled back the next time session {self.session.id} is opened"
            ) from exc
        if store_failure is not None:
            raise StoreError(f"turn {number} failed and was rolled back: {outcome.error}")
        return outcome

    async def _stream(self, question: str, sink: EventSink, outcome: TurnOutcome) -> None:
        started: dict[str, tuple[float, str, dict[str, Any]]] = {}
        inputs = {"messages": [HumanMessage(question)]}
        stream: Any = self.graph.astream(
            inputs, self.config, stream_mode=["messages", "updates"], durability="exit"
        )
        async for mode, chunk in stream:
            if mode == "messages":
                message, metadata = chunk
                if (
                    isinstance(message, AIMessageChunk)
                    and metadata.get("langgraph_node") == "model"
                ):
                    text = _text_of(message)
                    if text:
                        sink(TextDelta(text))
                continue
            for update in (chunk or {}).values():
                for message in _update_messages(update):
                    self._on_message(message, sink, outcome, started)

    def _on_message(
        self,
        message: BaseMessage,
        sink: EventSink,
        outcome: TurnOutcome,
        started: dict[str, tuple[float, str, dict[str, Any]]],
    ) -> None:
        if isinstance(message, AIMessage):
            usage: dict[str, Any] = dict(message.usage_metadata or {})
            tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
            outcome.tokens_in += tokens_in
            outcome.tokens_out += tokens_out
            sink(ModelCallFinished(tokens_in, tokens_out))
            for call in message.tool_calls:
                started[str(call["id"])] = (time.monotonic(), call["name"], call["args"])
                sink(ToolStarted(str(call["id"]), call["name"], call["args"]))
            if not message.tool_calls:
                outcome.answer = _text_of(message)
        elif isinstance(message, ToolMessage):
            began, name, args = started.pop(
                message.tool_call_id, (time.monotonic(), message.name or "?", {})
            )
            text = _text_of(message)
            record = ToolCallRecord(
                name=name,
                args=args,
                result_chars=len(text),
                seconds=round(time.monotonic() - began, 3),
                error=message.status == "error" or text.startswith("Error"),
            )
            outcome.tool_calls.append(record)
            sink(
                ToolFinished(
                    message.tool_call_id,
                    name,
                    args,
                    record.result_chars,
                    record.seconds,
                    record.error,
                )
            )

    # rollback

    def rollback(
        self, turn: int, base_checkpoint_id: str | None, base_message_count: int | None
    ) -> RollbackReport:
        """Snapshot-and-two-pass rollback, then verification.

        The snapshot is the ledger's rollback point: the head the turn started
        from, an ancestor of everything the turn wrote. Pass 1 deletes the
        checkpoints the turn appended after it; pass 2 deletes the writes the
        turn left on it (its input, results of cancelled steps). What remains
        is the pre-turn thread, row for row: nothing is written, so nothing
        forks and the file does not grow. Verification reads the committed
        state at the head and checks it is that point, with nothing to run.
        """
        # A bridged write still running on a worker thread would commit after
        # the rollback; wait for it first.
        self.saver.drain()
        removed = self.saver.truncate_after(self.session.id, base_checkpoint_id, "messages")
        problems = self.verify_rolled_back(base_checkpoint_id, base_message_count)
        return RollbackReport(turn, _count_messages(removed), not problems, problems)

    def verify_rolled_back(
        self, base_checkpoint_id: str | None, base_message_count: int | None
    ) -> list[str]:
        """I1 (the messages are the pre-turn ones), I2 (nothing left to run or
        pending) and I5 (every channel as before: the head *is* the pre-turn
        checkpoint, and checkpoints never change)."""
        head_id, messages, problems = self._inspect_head()
        if head_id != base_checkpoint_id:
            problems.append("the head is not the pre-turn checkpoint")
        if base_message_count is not None and messages != base_message_count:
            problems.append(
                f"{messages} message(s) where the pre-turn snapshot had {base_message_count}"
            )
        return problems

    def _has_pending_writes(self) -> bool:
        head_tuple = self.saver.get_tuple(self.config)
        return bool(head_tuple and head_tuple.pending_writes)

    def restore_update(self, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        update: dict[str, Any] = {}
        for channel in set(before) | set(after):
            old = before.get(channel, self._empty_value(channel))
            if after.get(channel, self._empty_value(channel)) == old:
                continue
            update[channel] = old if self._is_plain_value(channel) else Overwrite(old)
        return update

    def _is_plain_value(self, channel: str) -> bool:
        return isinstance(self.graph.channels.get(channel), LastValue)

    def _empty_value(self, channel: str) -> Any:
        if self._is_plain_value(channel):
            return None
        return [] if channel == "messages" else {}

    def verify(self, before: dict[str, Any], snapshot_ids: list[str]) -> list[str]:
        """I1 (messages equal the snapshot), I2 (nothing left to run or pending),
        I5 (every other channel back to its pre-turn value)."""
        problems = []
        head_id = self.head_checkpoint_id()
        state = self.graph.get_state(self.pinned(head_id)) if head_id else None
        now = dict(state.values) if state else {}
        now_messages = now.get("messages", [])
        if message_ids(now_messages) != snapshot_ids:
            problems.append("messages differ from the pre-turn snapshot")
        elif [_message_key(m) for m in now_messages] != [
            _message_key(m) for m in before.get("messages", [])
        ]:
            problems.append("message contents differ from the pre-turn snapshot")
        if state is not None and state.next:
            problems.append(f"steps still scheduled: {', '.join(state.next)}")
        if self._has_pending_writes():
            problems.append("task results still pending on the head")
        for channel in set(before) | set(now):
            if channel == "messages":
                continue
            empty = self._empty_value(channel)
            if now.get(channel, empty) != before.get(channel, empty):
                problems.append(f"channel {channel!r} differs from its pre-turn value")
        return problems

    def recover_interrupted(self) -> list[RollbackReport]:
        """Roll back turns a crash left `running` (kill -9, power loss)."""
        reports = []
        try:
            for turn in self.session.running_turns():
                report = self.rollback(
                    turn.number, turn.base_checkpoint_id, turn.base_message_count
                )
                self.session.finish_turn(
                    turn.number,
                    "interrupted",
                    rolled_back=report.removed_messages,
                    error=_join("the process ended during this turn", report.problems),
                )
                reports.append(report)
        except _store_errors() as exc:
            raise StoreError(
                f"session {self.session.id}: cannot roll back an interrupted turn: "
                f"{describe_error(exc)}"
            ) from exc
        return reports


def _update_messages(update: Any) -> list[BaseMessage]:
    if not isinstance(update, dict):
        return []
    messages = update.get("messages", [])
    if isinstance(messages, Overwrite):
        messages = messages.value
    if isinstance(messages, BaseMessage):
        return [messages]
    return [m for m in messages if isinstance(m, BaseMessage)] if isinstance(messages, list) else []


def _count_messages(values: Sequence[Any]) -> int:
    """Messages in a channel's writes (each write is one message or a list)."""
    return sum(
        len(value) if isinstance(value, list) else int(isinstance(value, BaseMessage))
        for value in values
    )


def _join(first: str | None, problems: Sequence[str]) -> str | None:
    parts = ([first] if first else []) + [f"rollback check failed: {p}" for p in problems]
    return "; ".join(parts) or None


def describe_error(exc: BaseException) -> str:
    """One line that names the fix, for the errors users actually hit."""
    import httpx

    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    # ollama.ResponseError appends " (status code: N)"; the status is ours to word.
    text = re.sub(r"\s*\(status code: -?\d+\)$", "", text)
    status = getattr(exc, "status_code", None)
    if isinstance(exc, sqlite3.Error):
        return (
            f"the session file could not be written ({text}): free disk space or fix "
            "the sessions folder (NETBOX_CHAT_SESSIONS), then try again"
        )
    if isinstance(exc, database_errors()):
        return (
            f"the session database could not be written ({text}): check the database "
            "server and the connection to it (NETBOX_CHAT_STORE), then try again"
        )
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        return f"cannot reach Ollama ({text}): is `ollama serve` running and OLLAMA_HOST right?"
    if isinstance(exc, httpx.TimeoutException):
        return (
            "Ollama did not answer in time: the model may be loading or too slow; "
            "raise NETBOX_CHAT_TIMEOUT"
        )
    if status == 404 and "not found" in text:
        found = re.search(r"model ['\"]?([^'\"]+)['\"]? not found", text)
        model = found.group(1) if found else "<model>"
        return f"Ollama: {text}: pull it with `ollama pull {model}` or pick another with --model"
    if status == 400 and "does not support tools" in text:
        return f"Ollama: {text}: choose a tool-capable model with --model (`netbox-chat doctor`)"
    if status == -1:
        return (
            f"Ollama reported an error mid-answer: {text}: try again; if it repeats, "
            "check the Ollama server log"
        )
    if status is not None:
        return f"Ollama answered {status}: {text}"
    return f"{name}: {text}"
