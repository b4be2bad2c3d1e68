"""A turn's life: snapshot, stream, cancel, two-pass rollback, verification,
crash recovery. (Rewind and compaction, which edit the past, are history.py.)

The invariant this module keeps: the thread the model sees is always a thread
of finished turns. Every turn is recorded as `running` with its rollback point
before it starts; whatever ends it other than success (Ctrl-C, an error, a
crash found on the next open) restores that point the same way, and no turn
starts while an earlier one is still `running` in the ledger.

A turn runs with `durability="exit"`: the graph keeps its steps in memory and
writes one checkpoint when the run ends (or is cancelled), so a turn appends
one checkpoint and its writes to the file, a crash mid-turn leaves nothing of
the turn on disk, and a rollback only has to delete that tail.

Nothing here prints: progress is reported as events to a sink, and the REPL
or the one-shot `ask` renders them.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel._algo import prepare_next_tasks
from langgraph.pregel._checkpoint import channels_from_checkpoint
from langgraph.types import Overwrite, StateSnapshot

from netbox_chat.agent.evidence import ToolResult, calls_of, tool_results
from netbox_chat.agent.replies import JSON_STARTS, READ_AS_CALL
from netbox_chat.checkpoints.sqlite import CURRENT_RUN, Run, SyncSaverBridge, WritesStillRunning
from netbox_chat.claims import Call, Grounding, check
from netbox_chat.config import ModelServer, source_of
from netbox_chat.errors import UserFacingError, pick_model
from netbox_chat.models.liveness import Waiting, broke_off
from netbox_chat.models.thinking import ThinkSplitter, inlines_thinking, split_thinking
from netbox_chat.store.choose import OpenSession
from netbox_chat.store.errors import OutcomeUnknown, StoreError
from netbox_chat.store.ledger import ToolCallRecord, TurnStatus
from netbox_chat.store.postgres import database_errors
from netbox_chat.words import count


# What a session store that cannot be written raises (disk full, I/O error,
# read-only file system; a database connection lost or refused). Only the
# stores' own errors: an OSError in a turn is far more likely a connection to
# Ollama or NetBox going away.
def _store_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    return (sqlite3.Error, *database_errors(), *more)


# --- events -----------------------------------------------------------------------


@dataclass(frozen=True)
class TurnStarted:
    session: str
    turn: int


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of the model's thinking (never part of the answer)."""

    text: str


@dataclass(frozen=True)
class ThinkingFinished:
    """The model stopped thinking and began its answer or a tool call."""

    seconds: float


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


@dataclass(frozen=True)
class ContextMeasured:
    """Ollama's count of one request (`prompt_eval_count`) against the window;
    `truncated` when the count shows Ollama cut the request to fit."""

    prompt_tokens: int
    window: int
    truncated: bool


@dataclass(frozen=True)
class ContextCompacted:
    """Before a model call, the older part of the conversation was summarized."""

    summarized: int
    tokens_before: int
    tokens_after: int
    window: int
    summary_tokens_in: int = 0
    summary_tokens_out: int = 0


@dataclass(frozen=True)
class ContextSummaryFailed:
    """A compaction was due but did not happen: the call goes on uncompacted."""

    tokens: int
    window: int
    reason: str


@dataclass(frozen=True)
class GroundingRetry:
    """The answer stated claims NetBox's replies do not hold; the model is
    asked once, within the same turn, to correct or drop them."""

    claims: tuple[str, ...]


ContextEvent = ContextMeasured | ContextCompacted | ContextSummaryFailed
TurnEvent = (
    TurnStarted
    | GroundingRetry
    | TextDelta
    | ThinkingDelta
    | ThinkingFinished
    | ToolStarted
    | ToolFinished
    | ModelCallFinished
    | RollingBack
    | Waiting
    | ContextEvent
)
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
class ContextUse:
    """What a turn's requests took of the window, from Ollama's own counts."""

    window: int | None = None
    prompt_tokens_max: int | None = None
    prompt_tokens_last: int | None = None
    truncated: bool = False
    compactions: list[ContextCompacted] = field(default_factory=list)

    def record(self, event: ContextEvent) -> None:
        if isinstance(event, ContextMeasured):
            self.window = event.window
            self.prompt_tokens_last = event.prompt_tokens
            self.prompt_tokens_max = max(self.prompt_tokens_max or 0, event.prompt_tokens)
            self.truncated = self.truncated or event.truncated
        elif isinstance(event, ContextCompacted):
            self.compactions.append(event)

    def ledger(self) -> dict[str, Any]:
        """The `finish_turn` fields."""
        return {
            "prompt_tokens_max": self.prompt_tokens_max,
            "prompt_tokens_last": self.prompt_tokens_last,
            "context_window": self.window,
            "truncated": self.truncated,
        }


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
    thinking: str = ""
    thinking_seconds: float | None = None
    context: ContextUse = field(default_factory=lambda: ContextUse())
    grounding: Grounding | None = None  # the answer's claims against NetBox's replies


class _Thinking:
    """Tells a turn's thinking from its answer as the model streams, and times it.

    Each model call gets its own `<think>` splitter (a call is one message id);
    thinking ends when the call's answer text or a tool call begins, or when the
    call ends. The text and the seconds add up on the outcome.
    """

    def __init__(self, sink: EventSink, outcome: TurnOutcome, inline: bool) -> None:
        self.sink = sink
        self.outcome = outcome
        self.inline = inline  # see thinking.inlines_thinking
        self.call: str | None = None
        self.splitter = ThinkSplitter(inline)
        self.started: float | None = None
        self.held = ""  # answer text that may be a tool call written as text
        self.streaming = False  # this call's answer is known to be words

    def chunk(self, message: AIMessageChunk) -> None:
        if message.id != self.call:
            self.end_call()
            self.call = message.id
        inline, answer = self.splitter.feed(text_of(message))
        self._think(str(message.additional_kwargs.get("reasoning_content") or "") + inline)
        if answer or message.tool_call_chunks:
            self._stop()
        self._answer(answer)

    def _answer(self, text: str) -> None:
        """Stream the answer, except while it could still be a tool call written
        as text (replies.py): held while it is blank or begins like JSON."""
        if not text:
            return
        if not self.streaming:
            self.held += text
            if not self.held.lstrip() or self.held.lstrip().startswith(JSON_STARTS):
                return
            text, self.held, self.streaming = self.held, "", True
        self.sink(TextDelta(text))

    def end_call(self, *, read_as_call: bool = False) -> None:
        """The call is over; `read_as_call`: its text was a tool call, never shown."""
        inline, answer = self.splitter.finish()
        self._think(inline)
        self._stop()
        self._answer(answer)
        if self.held.strip() and not read_as_call:
            self.sink(TextDelta(self.held))
        self.held, self.streaming = "", False
        self.splitter = ThinkSplitter(self.inline)

    def _think(self, text: str) -> None:
        if not text:
            return
        if self.started is None:
            self.started = time.monotonic()
            if self.outcome.thinking:
                self.outcome.thinking += "\n\n"
        self.outcome.thinking += text
        self.sink(ThinkingDelta(text))

    def _stop(self) -> None:
        seconds = self.settle()
        if seconds is not None:
            self.sink(ThinkingFinished(seconds))

    def settle(self) -> float | None:
        """Count the thinking under way, if any (also when the turn ends
        mid-thought: a cancelled turn's ledger row says how long it thought)."""
        if self.started is None:
            return None
        seconds = round(time.monotonic() - self.started, 3)
        self.started = None
        self.outcome.thinking = self.outcome.thinking.rstrip()
        total = (self.outcome.thinking_seconds or 0.0) + seconds
        self.outcome.thinking_seconds = round(total, 3)
        return seconds


class HeadDidNotMove(Exception):
    """A finished turn's checkpoint is not the session's head."""


class DirtyHead(UserFacingError):
    """The head is not a clean end of a turn; taking a turn on it would let the
    model see a half-finished one."""


# --- helpers on message lists ----------------------------------------------------------


def message_ids(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.id) for m in messages]


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


def unpaired_tool_messages(messages: Sequence[BaseMessage]) -> list[str]:
    """Why `messages` cannot go to a model as they are: a tool call without a
    result, or a result without its call (empty when they can)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    asked = {str(call["id"]) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls}
    problems = [f"tool call {c} has no result" for c in sorted(asked - answered)]
    problems += [f"tool result {r} has no call" for r in sorted(answered - asked)]
    return problems


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
        asks: tuple[str, ModelServer] | None = None,
        grounding: str = "mark",
    ) -> None:
        if getattr(saver, "conn", session.db) is not session.db:
            # A rollback and its ledger record are one transaction: on two
            # connections the ledger's write would wait for the saver's lock.
            raise ValueError("the saver must write through the session's own connection")
        self.session = session
        self.graph = graph
        self.saver = saver
        self.end_node = end_node
        self.model = model  # the agent's chat model; /compact asks it for the summary
        # The model's name and its server (provider, where, profile), as each
        # turn's ledger row records them: `/model` builds a new Conversation.
        self.asks = asks
        # "mark": the answer's ungrounded claims are reported; "retry": the
        # model is also asked once, within the turn, to correct them.
        self.grounding = grounding
        # The tool results the answer under way may rest on (the conversation's
        # earlier ones and this turn's so far): the screen marks claims with it.
        self.evidence: list[Call] = []
        self.config: RunnableConfig = {"configurable": {"thread_id": session.id}}
        # Turns whose rollback or record could not be written yet, by number.
        self._unrecorded: dict[int, TurnOutcome] = {}

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
        a turn).

        From rows when the head is where the ledger last left the conversation
        (a few rows, however long the session): this runs on the event loop
        before every turn and in every rollback, where a Ctrl-C may be
        waiting. From a whole-state read otherwise, which decides whatever the
        rows cannot vouch for.
        """
        head_tuple = self.saver.get_tuple(self.config)
        if head_tuple is None:
            return None, 0, []
        from_rows = self._inspect_rows(head_tuple)
        return from_rows if from_rows is not None else self._inspect_state(head_tuple)

    def _inspect_rows(self, head: CheckpointTuple) -> tuple[str, int, list[str]] | None:
        """The head check from rows, or None when the rows cannot vouch for it.

        The head must be the ledger's clean point, made from the checkpoint
        the ledger says, by writes that add up to the ledger's message count.
        Every clean point was the head when the next turn started and passed
        this check (or the state read), and checkpoints never change; so only
        the last step can have left a tool call without its result, and only
        its writes need reading. Steps to run and pending results come from
        the head's own row, as LangGraph's state read computes them.
        """
        head_id = str(head.config["configurable"]["checkpoint_id"])
        point = self.session.clean_point()
        if point.checkpoint_id != head_id or point.message_count is None:
            return None
        parent = self.saver.get_tuple(head.parent_config) if head.parent_config else None
        if parent is None or parent.config["configurable"]["checkpoint_id"] != (
            point.parent_checkpoint_id
        ):
            return None
        # With durability="exit" the writes that made a checkpoint are stored
        # on its parent (a turn's messages, a rewind's Overwrite).
        writes = [
            value for _, channel, value in parent.pending_writes or [] if channel == "messages"
        ]
        step = _messages_step(writes)
        if step is None:
            return None
        replaced, written = step
        before = 0 if replaced else point.parent_message_count
        if before is None or before + len(written) != point.message_count:
            return None
        problems = _unfinished_step_problems(
            self._steps_to_run(head), len(head.pending_writes or [])
        )
        problems += unpaired_tool_messages(written)
        return head_id, point.message_count, problems

    def _steps_to_run(self, head: CheckpointTuple) -> tuple[str, ...]:
        """The nodes LangGraph would run next from this checkpoint, computed
        the way its state read does (`prepare_next_tasks`) but without
        replaying the delta channels. Which nodes run depends on the
        checkpoint's channel versions and on whether each trigger channel has
        a value; a delta channel always has one (empty or not), so an empty
        stand-in gives the same answer."""
        specs = self.graph.channels
        deltas = {k: v for k, v in specs.items() if isinstance(v, DeltaChannel)}
        plain = {k: v for k, v in specs.items() if k not in deltas}
        channels, managed = channels_from_checkpoint(plain, head.checkpoint)
        empty = {k: v.from_checkpoint(None) for k, v in deltas.items()}
        step = int(head.metadata.get("step", -1)) + 1 if head.metadata else 0
        tasks = prepare_next_tasks(
            head.checkpoint,
            head.pending_writes or [],
            self.graph.nodes,
            {**channels, **empty},
            managed,
            head.config,
            step,
            step + 2,
            for_execution=False,
        )
        return tuple(task.name for task in tasks.values())

    def _inspect_state(self, head: CheckpointTuple) -> tuple[str, int, list[str]]:
        """The head check from one read of the whole committed state."""
        head_id = str(head.config["configurable"]["checkpoint_id"])
        snapshot = self.graph.get_state(self.pinned(head_id))
        messages = snapshot.values.get("messages", [])
        problems = _unfinished_step_problems(snapshot.next, len(head.pending_writes or []))
        problems += unpaired_tool_messages(messages)
        return head_id, len(messages), problems

    # a turn

    async def run_turn(
        self, question: str, sink: EventSink = ignore_events, *, deadline: float | None = None
    ) -> TurnOutcome:
        """Run one turn; on cancel or error, roll it back before returning.

        `deadline`: the seconds the turn may take in all (`ask` and `eval` give
        NETBOX_CHAT_DEADLINE; the REPL has Ctrl-C). Past it the turn is cancelled
        as Ctrl-C would, and fails with a line that names the setting.

        Cancel this coroutine's task exactly once to stop the turn: the graph's
        own cleanup runs, then the rollback runs synchronously, which a second
        cancel cannot interrupt.

        A turn never starts while the ledger still says an earlier one is
        running (its rollback or its record could not be written): that one
        is finished first, and if it still cannot be, this turn is refused.
        Otherwise the next open's recovery would roll back to the old turn's
        base and take every turn answered since with it.
        """
        self.recover_interrupted()
        try:
            base, base_messages, problems = self._inspect_head()
            if problems:
                raise DirtyHead(
                    "this session's last turn did not end cleanly ("
                    + "; ".join(problems)
                    + "); rewind to the last clean turn with /rewind"
                )
            self.saver.ids_after(base)
            model, server = self.asks or (None, None)
            number = self.session.begin_turn(
                question,
                base_checkpoint_id=base,
                base_message_count=base_messages,
                model=model,
                server=server,
            )
        except _store_errors() as exc:  # no snapshot, no turn (and no model call)
            raise StoreError(
                f"session {self.session.id}: cannot start the turn: {describe_error(exc)}"
            ) from exc
        outcome = TurnOutcome(number, "running")
        sink(TurnStarted(self.session.id, number))
        store_failure: BaseException | None = None
        run = Run(asyncio.current_task())
        bound = asyncio.timeout(deadline)
        try:
            async with bound:
                message_count = await self._stream(question, sink, outcome, run)
            if run.refused:  # the cancel raced the run's end: not all of it was stored
                raise asyncio.CancelledError
        except asyncio.CancelledError:
            outcome.status = "cancelled"
        except Exception as exc:  # the turn failed: roll back and report
            outcome.status = "failed"
            outcome.error = past_deadline(deadline) if bound.expired() else describe_error(exc)
            store_failure = exc if isinstance(exc, _store_errors()) else None
        else:
            try:
                end = self._new_head(base)
                with self.session.db.atomic():  # the answer and its compactions, or neither
                    self.session.finish_turn(
                        number,
                        "done",
                        end_checkpoint_id=end,
                        tokens_in=outcome.tokens_in,
                        tokens_out=outcome.tokens_out,
                        tool_calls=outcome.tool_calls,
                        answer=outcome.answer,
                        message_count=message_count,
                        thinking=outcome.thinking or None,
                        thinking_seconds=outcome.thinking_seconds,
                        grounding=None
                        if outcome.grounding is None
                        else outcome.grounding.as_json(),
                        **outcome.context.ledger(),
                    )
                    self._record_compactions(number, outcome.context)
            except HeadDidNotMove as exc:
                outcome.status = "failed"
                outcome.error = str(exc)
            except _store_errors() as exc:
                # Nothing is said before the store says what it holds: on a
                # database the answer to COMMIT can be what was lost.
                recorded = self.session.recorded_status(number)
                if recorded == "done":
                    outcome.status = "done"
                    return outcome
                if recorded != "running":
                    raise OutcomeUnknown(
                        f"turn {number}: the session store failed while the answer was "
                        f"recorded ({describe_error(exc)}), and whether it was kept cannot "
                        f"be known now; the next time session {self.session.id} is opened "
                        "it is settled: kept, or rolled back and said so"
                    ) from exc
                outcome.status = "failed"  # not recorded: undo it
                outcome.error = describe_error(exc)
                store_failure = exc
            else:
                outcome.status = "done"
                return outcome
        finally:
            # Before the rollback drains: a write of this run not yet started
            # is refused from here on, or it would land after the rollback.
            run.closed = True
        sink(RollingBack(number, outcome.status))
        self._unrecorded[number] = outcome
        try:
            self.rollback(outcome, base, base_messages, dropped=run.dropped)
        except _store_errors(WritesStillRunning) as exc:
            # Neither the rollback nor its record was written (they are one
            # transaction): the ledger says the turn is `running` with its
            # rollback point, and the next turn, or the next open, finishes it
            # first.
            raise StoreError(
                f"turn {number} {outcome.status} and could not be rolled back now "
                f"({describe_error(exc)}); the session is kept and the turn will be "
                f"rolled back before the next turn, or the next time session "
                f"{self.session.id} is opened"
            ) from exc
        if store_failure is not None:
            raise StoreError(f"turn {number} failed and was rolled back: {outcome.error}")
        return outcome

    def _new_head(self, base: str | None) -> str:
        """The checkpoint a finished turn ended on, checked to be the head: a
        checkpoint id that sorts before the old head (a clock stepped back
        while LangGraph made it) would leave the answer invisible."""
        end = self.head_checkpoint_id()
        if end is None or end == base:
            raise HeadDidNotMove(
                "the turn's checkpoint did not become the session's head (was the clock "
                "set back?); it was rolled back"
            )
        return end

    def _on_context(self, event: ContextEvent, sink: EventSink, outcome: TurnOutcome) -> None:
        outcome.context.record(event)
        if isinstance(event, ContextCompacted):  # the summary is a model call of the turn
            outcome.tokens_in += event.summary_tokens_in
            outcome.tokens_out += event.summary_tokens_out
        sink(event)

    def _record_compactions(self, turn: int, context: ContextUse) -> None:
        """Automatic compactions go into the history-edit log (export notes them
        where they happened); they leave the message list as it was, so they
        carry no message count."""
        for compaction in context.compactions:
            self.session.record_edit(
                "auto-compact",
                after_turn=turn - 1,
                turn=turn,
                summarized=compaction.summarized,
                tokens_before=compaction.tokens_before,
                tokens_after=compaction.tokens_after,
                window=compaction.window,
            )

    async def _stream(self, question: str, sink: EventSink, outcome: TurnOutcome, run: Run) -> int:
        """Run the graph, report its events, check the answer's claims against
        the tool results the conversation holds (retrying once when asked to);
        return how many messages the conversation has at the end, as the run's
        own state says (counting them from the file would read the whole
        history again). The graph's writes carry `run` (checkpoints.sqlite.Run)."""
        message_count = await self._pass(HumanMessage(question), sink, outcome, run)
        outcome.grounding = check(outcome.answer, self.evidence, given=question)
        if self.grounding == "retry" and not outcome.grounding.quiet and outcome.answer:
            claims = tuple(c.text for c in outcome.grounding.ungrounded)
            sink(GroundingRetry(claims))
            message_count = await self._pass(
                HumanMessage(retry_prompt(outcome.grounding)), sink, outcome, run
            )
            outcome.grounding = check(outcome.answer, self.evidence, given=question)
        return message_count

    async def _pass(
        self, asked: HumanMessage, sink: EventSink, outcome: TurnOutcome, run: Run
    ) -> int:
        """One run of the graph from `asked`: its events reported, `evidence`
        kept up to date; how many messages the conversation has at its end."""
        started: dict[str, tuple[float, str, dict[str, Any]]] = {}
        thinking = _Thinking(
            sink, outcome, inline=inlines_thinking(getattr(self.model, "reasoning", None))
        )
        inputs = {"messages": [asked]}
        stream: Any = self.graph.astream(
            inputs,
            self.config,
            stream_mode=["messages", "updates", "values", "custom"],
            durability="exit",
        )
        message_count = 0
        run_token = CURRENT_RUN.set(run)  # the graph's tasks copy it as they start
        try:
            async for mode, chunk in stream:
                if mode == "values":
                    messages = chunk.get("messages", [])
                    if not message_count:  # the conversation as the run starts
                        self.evidence = tool_evidence(messages)
                    message_count = len(messages)
                    continue
                if mode == "custom":
                    if isinstance(chunk, ContextEvent):
                        self._on_context(chunk, sink, outcome)
                    elif isinstance(chunk, Waiting):
                        sink(chunk)
                    continue
                if mode == "messages":
                    message, metadata = chunk
                    if (
                        isinstance(message, AIMessageChunk)
                        and metadata.get("langgraph_node") == "model"
                    ):
                        thinking.chunk(message)
                    continue
                for update in (chunk or {}).values():
                    for message in _update_messages(update):
                        if isinstance(message, AIMessage):
                            read_as_call = bool(message.additional_kwargs.get(READ_AS_CALL))
                            thinking.end_call(read_as_call=read_as_call)
                        self._on_message(message, sink, outcome, started)
        finally:
            CURRENT_RUN.reset(run_token)
            thinking.settle()
        return message_count

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
                # The stored reply: ThinkingMiddleware already moved a leading
                # thinking block out of it; what is left is all answer.
                outcome.answer = split_thinking(text_of(message), inline=False)[1]
        elif isinstance(message, ToolMessage):
            began, name, args = started.pop(
                message.tool_call_id, (time.monotonic(), message.name or "?", {})
            )
            text = text_of(message)
            self.evidence.append(Call(name, args, ToolResult(name, args, text, False).data()))
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
        self,
        outcome: TurnOutcome,
        base_checkpoint_id: str | None,
        base_message_count: int | None,
        *,
        dropped: int = 0,
    ) -> None:
        """Snapshot-and-two-pass rollback, verification, and the ledger's record
        of it, in one transaction; sets `outcome.rollback`.

        The snapshot is the ledger's rollback point: the head the turn started
        from, an ancestor of everything the turn wrote. Pass 1 deletes the
        checkpoints the turn appended after it; pass 2 deletes the writes the
        turn left on it (its input, results of cancelled steps). What remains
        is the pre-turn thread, row for row: nothing is written, so nothing
        forks and the file does not grow. Verification reads the state at the
        head (the transaction's own, not yet committed) and checks it is that
        point, with nothing to run. The turn's row is closed in the same
        transaction, so the ledger never says `running` about a turn that is
        already rolled back, nor closes one that is not. `dropped`: messages
        the run's writes held that were refused, not stored (checkpoints.sqlite.Run),
        reported as removed with the rest.

        The transaction is committed without waiting for the disk
        (`atomic(synced=False)`; the Ctrl-C that asked for it is waiting): a
        power cut before the next synced commit may lose it, and then the
        ledger says `running` again with the turn's rows, and the next open
        rolls the turn back again (recover_interrupted), as `interrupted`.
        """
        # A bridged write still running on a worker thread would land after
        # the rollback; wait for it first (WritesStillRunning if it does not end).
        self.saver.drain()
        with self.session.db.atomic(synced=False):
            removed = self.saver.truncate_after(self.session.id, base_checkpoint_id, "messages")
            problems = self.verify_rolled_back(base_checkpoint_id, base_message_count)
            report = RollbackReport(
                outcome.number, _count_messages(removed) + dropped, not problems, problems
            )
            self._record(outcome, report)
        outcome.rollback = report
        self._unrecorded.pop(outcome.number, None)

    def _record(self, outcome: TurnOutcome, report: RollbackReport) -> None:
        self.session.finish_turn(
            outcome.number,
            outcome.status,
            tokens_in=outcome.tokens_in,
            tokens_out=outcome.tokens_out,
            tool_calls=outcome.tool_calls,
            rolled_back=report.removed_messages,
            error=_join(outcome.error, report.problems),
            thinking=outcome.thinking or None,
            thinking_seconds=outcome.thinking_seconds,
            **outcome.context.ledger(),
        )

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
                f"{count(messages, 'message')} where the pre-turn snapshot had {base_message_count}"
            )
        return problems

    def recover_interrupted(self) -> list[RollbackReport]:
        """Finish the turns the ledger still says are running: a crash (kill
        -9, power loss) left them, or their rollback or its record could not
        be written (disk full). Each is rolled back to its base and recorded,
        as what this process saw it end as, or else as interrupted.

        A running turn with a finished turn after it was already rolled back
        (the later turn began on a clean head) and only its record is
        missing: rolling back to its base now would delete the later turns.
        """
        reports = []
        try:
            for turn in self.session.running_turns():
                outcome = self._unrecorded.get(turn.number) or TurnOutcome(
                    turn.number, "interrupted", error="the process ended during this turn"
                )
                if self.session.finished_after(turn.number):
                    outcome.rollback = RollbackReport(turn.number, 0, True)
                    self._record(outcome, outcome.rollback)
                    self._unrecorded.pop(turn.number, None)
                else:
                    self.rollback(outcome, turn.base_checkpoint_id, turn.base_message_count)
                assert outcome.rollback is not None
                reports.append(outcome.rollback)
        except _store_errors(WritesStillRunning) as exc:
            raise StoreError(
                f"session {self.session.id}: cannot roll back an unfinished turn now: "
                f"{describe_error(exc)}"
            ) from exc
        return reports


def _unfinished_step_problems(steps: Sequence[str], pending: int) -> list[str]:
    problems = []
    if steps:
        problems.append(f"the graph still has steps to run: {', '.join(steps)}")
    if pending:
        problems.append(f"{count(pending, 'task result')} pending on the head")
    return problems


def _messages_step(values: Sequence[Any]) -> tuple[bool, list[BaseMessage]] | None:
    """What one step's writes to `messages` did: (whether they replaced the
    list, the messages they put in it). None for anything else (a removal
    by id, a value that is not a message): only a whole read can tell its
    effect then."""
    replaced = False
    written: list[BaseMessage] = []
    for value in values:
        if isinstance(value, Overwrite):
            replaced, written, value = True, [], value.value
        for message in value if isinstance(value, list) else [value]:
            if isinstance(message, RemoveMessage) and message.id == REMOVE_ALL_MESSAGES:
                replaced, written = True, []
            elif isinstance(message, BaseMessage) and not isinstance(message, RemoveMessage):
                written.append(message)
            else:
                return None
    return replaced, written


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


def past_deadline(seconds: float | None) -> str:
    """The line for a turn that was still waiting on the model at its deadline."""
    return (
        f"the turn did not finish within its deadline of {seconds or 0:,.0f} s "
        f"({source_of(None, 'deadline')}): the model server kept the answer waiting; check "
        "the server, or raise it"
    )


def describe_error(exc: BaseException) -> str:
    """One line that names the fix, for the errors users actually hit."""
    import httpx

    if isinstance(exc, UserFacingError):
        return str(exc)
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
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return broke_off("Ollama", text, "the Ollama server log")
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        return (
            f"cannot reach Ollama ({text}): is `ollama serve` running and "
            f"{source_of(None, 'ollama_url')} right?"
        )
    if isinstance(exc, httpx.TimeoutException):
        return (
            "Ollama did not answer in time: it stopped answering, or stalled mid-answer, "
            f"for {source_of(None, 'request_timeout')} seconds; check the Ollama server, or "
            f"raise it"
        )
    if status == 404 and "not found" in text:
        found = re.search(r"model ['\"]?([^'\"]+)['\"]? not found", text)
        model = found.group(1) if found else "<model>"
        return (
            f"Ollama: {text}: pull it with `ollama pull {model}` or pick another with "
            f"{pick_model()}"
        )
    if status == 400 and "does not support tools" in text:
        return (
            f"Ollama: {text}: choose a tool-capable model with {pick_model()} "
            "(`netbox-chat doctor`)"
        )
    if status == -1:
        return (
            f"Ollama reported an error mid-answer: {text}: try again; if it repeats, "
            "check the Ollama server log"
        )
    if status is not None:
        return f"Ollama answered {status}: {text}"
    return f"{name}: {text}"


def tool_evidence(messages: Sequence[BaseMessage]) -> list[Call]:
    """The tool calls the conversation holds (this turn's and the earlier
    ones still in it), each with its name, arguments and decoded reply: what
    the answer may rest on."""
    return calls_of(tool_results(messages))


def retry_prompt(grounding: Grounding) -> str:
    """What the model is told when its answer states what NetBox's replies do
    not hold: the claims, and to correct them from NetBox or drop them."""
    if grounding.without_netbox:
        return (
            "Your answer states NetBox facts without any NetBox tool call. Look them up "
            "with the tools, then answer again from what NetBox returns."
        )
    listed = "\n".join(f"- {c.text} ({c.kind})" for c in grounding.ungrounded)
    return (
        "These claims in your answer are not in NetBox's replies:\n"
        f"{listed}\n"
        "Check them with the tools and correct them, or drop them. Then give the whole "
        "answer again."
    )
