"""Rewind and compaction: the two edits of a conversation's past, and neither forks.

On this stack an update or input aimed at an older checkpoint is accepted
silently and starts a branch, while upstream still has open reports of
abandoned-branch writes leaking into forks (langgraph #8443, #8551: "the old
answer reappears after reload"). So both edits are *linear*: they compute the
state they want, then write it onto the current head as one `update_state`,
with `Overwrite` for every reducer channel and plain values for `LastValue`
channels, attributed to the node that routes to `__end__` so that nothing is
left to run (`next == ()`). The abandoned turns stay in the checkpoint history
as ancestry of the new head, but their writes are never replayed: an
`Overwrite` stores a snapshot, and delta channels replay only from the latest
snapshot on.

- `rewind(conversation, N)` materializes the committed state at the end of
  turn N (the ledger keeps each finished turn's end checkpoint; it is read
  pinned to that id, never from the live view) and writes it onto the head.
  Later finished turns are marked `rewound` in the ledger. Because every turn
  snapshots the head when it begins, the next turn's rollback point is the
  rewound state.
- `compact(conversation)` asks the model for a summary of all but the last
  few exchanges and writes [summary, *kept exchanges] onto the head. Earlier
  turns' end checkpoints are untouched, so a rewind past a compaction still
  materializes the full, uncompacted state of that turn.

Both fail closed: the write and its verification run in one SQLite
transaction on the saver's connection, so a failure or a state that does not
match what was intended rolls everything back and nothing is written.
Nothing here prints; results carry a one-line `__str__` for the REPL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.channels import BinaryOperatorAggregate, LastValue
from langgraph.channels.delta import DeltaChannel
from langgraph.types import Overwrite

from netbox_chat.checkpointer import BridgedSqliteSaver, SyncSaverBridge
from netbox_chat.errors import UserFacingError
from netbox_chat.pgstore import database_errors
from netbox_chat.sessions import Turn
from netbox_chat.turns import Conversation, describe_error, message_ids

if TYPE_CHECKING:
    from netbox_chat.pgsaver import BridgedPostgresSaver

# deepagents' own summarization middleware keeps its summary out of the message
# list: `_summarization_event` holds the summary message and a cutoff index into
# `messages`, and the model sees [summary, *messages[cutoff:]]. A compaction that
# rewrites the list must fold that view in and clear the event, or the stale
# cutoff would cut into the new, shorter list.
SUMMARIZATION_EVENT = "_summarization_event"

# The marker deepagents and LangChain put on a summary message; deepagents'
# summarizer recognizes (and does not re-offload) messages that carry it.
SUMMARY_SOURCE = {"lc_source": "summarization"}
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"

SUMMARY_INSTRUCTIONS = """\
You compact a conversation between a network operator and netbox-chat, an \
assistant that answers questions from NetBox through read-only API tools. \
Write a summary that lets the conversation continue without the transcript:
- the operator's questions and what they are trying to find out;
- the facts found, with exact object names, ids, sites, statuses and counts, \
and the filters or queries that produced them;
- the answers given, and anything still open or uncertain.
Keep names and numbers exactly as they appear. Do not add facts that are not in \
the transcript. Write concise Markdown, no preamble.\
"""

# Bounds on the summary request, so compacting a long conversation does not
# itself overflow the model's context: each tool result is clipped, and the
# transcript keeps its beginning and (mostly) its end.
TOOL_RESULT_CHARS = 1_500
TRANSCRIPT_CHARS = 40_000

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)


class HistoryEditError(UserFacingError):
    """A rewind or compaction that was refused or failed; nothing was written."""


class NothingToRewind(HistoryEditError):
    """The conversation is already where the rewind would take it (`resume
    --at N` may treat this as done rather than as an error)."""


# --- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RewindResult:
    to_turn: int
    set_aside: list[int]
    messages_before: int
    messages_after: int
    head_checkpoint_id: str | None
    undid_compaction: bool = False

    def __str__(self) -> str:
        where = f"turn {self.to_turn}" if self.to_turn else "the start"
        changes = []
        if self.set_aside:
            changes.append(
                f"{len(self.set_aside)} later turn(s) set aside "
                "(they stay in the ledger as rewound)"
            )
        if self.undid_compaction:
            changes.append("the compaction since then is undone")
        changes.append(f"{self.messages_before} → {self.messages_after} messages")
        return f"rewound to {where}: " + "; ".join(changes)


@dataclass(frozen=True)
class CompactResult:
    summarized: int = 0
    kept_exchanges: int = 0
    messages_before: int = 0
    messages_after: int = 0
    chars_before: int = 0
    chars_after: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    head_checkpoint_id: str | None = None
    cancelled: bool = False

    def __str__(self) -> str:
        if self.cancelled:
            return "compaction cancelled: the conversation is unchanged"
        return (
            f"compacted {self.summarized} messages into a summary + last "
            f"{self.kept_exchanges} exchange(s): history sent with each request "
            f"~{self.chars_before:,} → ~{self.chars_after:,} characters"
        )


# --- rewind ------------------------------------------------------------------------------


def rewind(conversation: Conversation, to_turn: int | None = None) -> RewindResult:
    """Return the conversation to just after finished turn `to_turn` (0: the
    start; None: drop the last finished turn), linearly, failing closed."""
    session = conversation.session
    turns = session.turns()
    _refuse_running(turns, "rewind")
    done = [t for t in turns if t.status == "done"]
    if to_turn is None:
        if not done:
            raise NothingToRewind("nothing to rewind: this session has no finished turn")
        target = done[-2].number if len(done) > 1 else 0
    else:
        target = to_turn
    target_checkpoint = _target_checkpoint(turns, target)
    target_values = _materialize(conversation, target, target_checkpoint)
    later = [t.number for t in done if t.number > target]

    conversation.saver.drain()
    head_id = conversation.head_checkpoint_id()
    head_values = conversation.committed_values(head_id)
    update = _linear_update(conversation, target_values, head_values)
    if not update and not later and not conversation.head_problems():
        raise NothingToRewind(f"nothing to rewind: the conversation is already at {_where(target)}")
    target_messages = list(target_values.get("messages", []))
    new_head = _write_verified(
        conversation,
        update,
        target_values,
        f"rewind to {_where(target)}",
    )
    before = len(head_values.get("messages", []))
    with _ledger_after_write(f"rewound to {_where(target)}"):
        session.mark_rewound(target)
        session.record_edit(
            "rewind",
            after_turn=target,
            message_count=len(target_messages),
            messages_before=before,
            set_aside=later,
            target_checkpoint_id=target_checkpoint,
            head_before=head_id,
            head_after=new_head,
        )
    return RewindResult(
        to_turn=target,
        set_aside=later,
        messages_before=before,
        messages_after=len(target_messages),
        head_checkpoint_id=new_head,
        undid_compaction=any(is_summary(m) for m in head_values.get("messages", []))
        and not any(is_summary(m) for m in target_messages),
    )


def _where(turn: int) -> str:
    return f"turn {turn}" if turn else "the start"


def _refuse_running(turns: Sequence[Turn], action: str) -> None:
    running = [t.number for t in turns if t.status == "running"]
    if running:
        raise HistoryEditError(
            f"cannot {action}: turn {running[0]} is still marked running; "
            "reopen the session to recover it first"
        )


def _target_checkpoint(turns: Sequence[Turn], target: int) -> str | None:
    """The checkpoint whose committed state is the end of turn `target`."""
    if target == 0:
        return None  # the start: the empty state
    numbers = [t.number for t in turns]
    turn = next((t for t in turns if t.number == target), None)
    if turn is None:
        known = f"turns 1 to {max(numbers)}" if numbers else "no turns yet"
        raise HistoryEditError(
            f"cannot rewind to turn {target}: there is no such turn "
            f"(this session has {known}; /history lists them)"
        )
    if turn.status != "done":
        raise HistoryEditError(
            f"cannot rewind to turn {target}: it was {turn.status}, not finished; "
            "pick a finished turn from /history"
        )
    if not turn.end_checkpoint_id:
        raise HistoryEditError(
            f"cannot rewind to turn {target}: the ledger has no checkpoint for its end"
        )
    return turn.end_checkpoint_id


def _materialize(
    conversation: Conversation, target: int, checkpoint_id: str | None
) -> dict[str, Any]:
    """The committed state at `checkpoint_id`, read pinned (never the live view).

    A pinned read of an id that is not stored returns an empty state without
    complaint, so the checkpoint's existence is checked first.
    """
    if checkpoint_id is None:
        return {}
    pinned = conversation.pinned(checkpoint_id)
    try:
        if conversation.saver.get_tuple(pinned) is None:
            raise HistoryEditError(
                f"cannot rewind to turn {target}: its checkpoint {checkpoint_id} is not "
                "in this session file"
            )
        snapshot = conversation.graph.get_state(pinned)
    except HistoryEditError:
        raise
    except Exception as exc:
        raise HistoryEditError(
            f"cannot rewind to turn {target}: its state cannot be read "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    values = dict(snapshot.values)
    problems = _unanswered_calls(values.get("messages", []))
    if snapshot.next or problems:
        raise HistoryEditError(
            f"cannot rewind to turn {target}: its stored state is not the end of a turn"
        )
    return values


def _linear_update(
    conversation: Conversation, target: dict[str, Any], head: dict[str, Any]
) -> dict[str, Any]:
    """The one update that turns `head` into `target`: Overwrite for reducer
    channels, plain values for LastValue channels, only where they differ.

    Channels that are not part of the checkpointed state (ephemeral routing
    values, untracked payloads) are never written.
    """
    update = conversation.restore_update(target, head)
    kept = (LastValue, BinaryOperatorAggregate, DeltaChannel)
    return {
        channel: value
        for channel, value in update.items()
        if isinstance(conversation.graph.channels.get(channel), kept)
    }


# --- compaction ---------------------------------------------------------------------------


@dataclass
class _Plan:
    older: list[BaseMessage]
    tail: list[BaseMessage]
    exchanges_kept: int
    event_cleared: bool = False
    effective: list[BaseMessage] = field(default_factory=list)


async def compact(
    conversation: Conversation,
    *,
    keep_exchanges: int = 2,
    model: BaseChatModel | None = None,
) -> CompactResult:
    """Replace the message list with a model-written summary plus the last
    `keep_exchanges` exchanges, written onto the head with `Overwrite`.

    Cancel this coroutine's task (once) to stop it: the only await is the
    model call, before anything is written, so a cancel leaves the thread
    exactly as it was and returns a result marked cancelled (like `run_turn`,
    so the REPL's Ctrl-C wiring is the same for both).
    """
    if keep_exchanges < 0:
        raise ValueError("keep_exchanges must be >= 0")
    chat_model = model if model is not None else getattr(conversation, "model", None)
    if chat_model is None:
        raise HistoryEditError("cannot compact: this conversation has no model to summarize with")
    session = conversation.session
    _refuse_running(session.turns(), "compact")
    problems = conversation.head_problems()
    if problems:
        raise HistoryEditError(
            "cannot compact: the last turn did not end cleanly ("
            + "; ".join(problems)
            + "); /rewind to a finished turn first"
        )
    head_id = conversation.head_checkpoint_id()
    values = conversation.committed_values(head_id)
    plan = _plan(values, keep_exchanges)

    try:
        reply = await chat_model.ainvoke(_summary_request(plan.older))
    except asyncio.CancelledError:
        return CompactResult(cancelled=True)
    except Exception as exc:
        raise HistoryEditError(
            f"compaction failed, nothing changed: {describe_error(exc)}"
        ) from exc
    summary_text = _THINKING.sub("", _text(reply)).strip()
    if not summary_text:
        raise HistoryEditError("compaction failed, nothing changed: the model's summary was empty")

    # No await from here on: a cancel can no longer land half-way.
    if conversation.head_checkpoint_id() != head_id:
        raise HistoryEditError("the conversation changed while it was being summarized; try again")
    summary = HumanMessage(
        content=SUMMARY_PREFIX + summary_text,
        additional_kwargs=dict(SUMMARY_SOURCE),
        id=str(uuid.uuid4()),
    )
    new_messages = [summary, *plan.tail]
    update: dict[str, Any] = {"messages": Overwrite(new_messages)}
    target = {**values, "messages": new_messages}
    if plan.event_cleared:
        update[SUMMARIZATION_EVENT] = None
        target[SUMMARIZATION_EVENT] = None
    new_head = _write_verified(conversation, update, target, "compaction")

    usage: dict[str, Any] = dict(getattr(reply, "usage_metadata", None) or {})
    turns = [t for t in session.turns() if t.status == "done"]
    result = CompactResult(
        summarized=len(plan.older),
        kept_exchanges=plan.exchanges_kept,
        messages_before=len(values.get("messages", [])),
        messages_after=len(new_messages),
        chars_before=request_chars(plan.effective),
        chars_after=request_chars(new_messages),
        tokens_in=int(usage.get("input_tokens", 0)),
        tokens_out=int(usage.get("output_tokens", 0)),
        head_checkpoint_id=new_head,
    )
    with _ledger_after_write("compacted"):
        session.record_edit(
            "compact",
            after_turn=turns[-1].number if turns else 0,
            message_count=result.messages_after,
            messages_before=result.messages_before,
            summarized=result.summarized,
            kept_exchanges=result.kept_exchanges,
            chars_before=result.chars_before,
            chars_after=result.chars_after,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            head_before=head_id,
            head_after=new_head,
        )
    return result


def is_summary(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and (
        message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE["lc_source"]
    )


def _plan(values: dict[str, Any], keep_exchanges: int) -> _Plan:
    """Split what the model sees into the part to summarize and the kept tail.

    The cut is always at a question (a HumanMessage that is not a summary), so
    every tool call in the tail keeps its result and no result loses its call.
    """
    messages: list[BaseMessage] = list(values.get("messages", []))
    event = values.get(SUMMARIZATION_EVENT)
    effective = _effective(messages, event)
    starts = [
        i for i, m in enumerate(effective) if isinstance(m, HumanMessage) and not is_summary(m)
    ]
    kept = min(keep_exchanges, len(starts))
    cut = starts[-kept] if kept else len(effective)
    older, tail = effective[:cut], effective[cut:]
    if not [m for m in older if not is_summary(m)]:
        raise HistoryEditError(
            f"nothing to compact: the conversation has {len(starts)} exchange(s) "
            f"and the last {keep_exchanges} are kept as they are"
        )
    if _unanswered_calls(tail):
        raise HistoryEditError("cannot compact: a tool call in the kept exchanges has no result")
    return _Plan(older, tail, kept, event is not None, effective)


def _effective(messages: list[BaseMessage], event: Any) -> list[BaseMessage]:
    """What the model sees, given deepagents' own summarization event (if any)."""
    if not isinstance(event, dict):
        return messages
    summary, cutoff = event.get("summary_message"), event.get("cutoff_index")
    if not isinstance(summary, BaseMessage) or not isinstance(cutoff, int):
        return messages
    return [summary, *messages[cutoff:]]


def _unanswered_calls(messages: Sequence[BaseMessage]) -> list[str]:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    asked = {str(call["id"]) for m in messages if isinstance(m, AIMessage) for call in m.tool_calls}
    problems = [f"call {c} has no result" for c in sorted(asked - answered)]
    problems += [f"result {r} has no call" for r in sorted(answered - asked)]
    return problems


def _summary_request(older: Sequence[BaseMessage]) -> list[BaseMessage]:
    transcript = _clip_middle(_transcript(older), TRANSCRIPT_CHARS)
    return [
        SystemMessage(SUMMARY_INSTRUCTIONS),
        HumanMessage(
            "Summarize this conversation.\n\n<transcript>\n" + transcript + "\n</transcript>"
        ),
    ]


def _transcript(messages: Sequence[BaseMessage]) -> str:
    lines: list[str] = []
    for message in messages:
        text = _text(message).strip()
        if is_summary(message):
            lines.append(f"[summary of the earlier conversation]\n{text}")
        elif isinstance(message, HumanMessage):
            lines.append(f"Operator: {text}")
        elif isinstance(message, AIMessage):
            if text:
                lines.append(f"Assistant: {_THINKING.sub('', text).strip()}")
            for call in message.tool_calls:
                args = json.dumps(call["args"], ensure_ascii=False, sort_keys=True)
                lines.append(f"Assistant called {call['name']}({args})")
        elif isinstance(message, ToolMessage):
            name = message.name or "tool"
            lines.append(f"Result of {name}: {_clip_end(text, TOOL_RESULT_CHARS)}")
    return "\n\n".join(lines)


def _clip_end(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" […{len(text) - limit:,} more characters]"


def _clip_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return text[:head] + f"\n\n[…{len(text) - limit:,} characters omitted…]\n\n" + text[-tail:]


def request_chars(messages: Sequence[BaseMessage]) -> int:
    """About how many characters these messages add to each model request:
    their text plus the tool calls' names and arguments."""
    total = 0
    for message in messages:
        total += len(_text(message))
        if isinstance(message, AIMessage):
            total += sum(
                len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False))
                for call in message.tool_calls
            )
    return total


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


# --- the one write ----------------------------------------------------------------------


class _Mismatch(Exception):
    pass


def _write_verified(
    conversation: Conversation,
    update: dict[str, Any],
    target: dict[str, Any],
    what: str,
) -> str | None:
    """Write `update` onto the head, verify the head equals `target`, and
    commit both, or neither. Returns the new head's checkpoint id."""
    try:
        with _one_transaction(conversation.saver):
            conversation.graph.update_state(
                conversation.config, update, as_node=conversation.end_node
            )
            problems = conversation.verify(target, message_ids(target.get("messages", [])))
            if problems:
                raise _Mismatch("; ".join(problems))
            return conversation.head_checkpoint_id()
    except _Mismatch as exc:
        raise HistoryEditError(
            f"{what} not written: the result did not check out ({exc}); nothing changed"
        ) from exc
    except HistoryEditError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise HistoryEditError(
            f"{what} not written: the session file could not be written ({exc}); nothing changed"
        ) from exc
    except Exception as exc:
        raise HistoryEditError(
            f"{what} not written: {type(exc).__name__}: {exc}; nothing changed"
        ) from exc


def _ledger_errors() -> tuple[type[Exception], ...]:
    return (sqlite3.Error, OSError, *database_errors())


@contextlib.contextmanager
def _ledger_after_write(done: str) -> Iterator[None]:
    """The ledger lives on its own connection, so it is written after the
    checkpoint commit; if that fails the user must hear that the conversation
    did change."""
    try:
        yield
    except _ledger_errors() as exc:
        raise HistoryEditError(
            f"{done}, but the session's ledger could not be updated ({exc}); "
            "/history may be out of date"
        ) from exc


class _HeldCommits:
    """The saver's connection with its commits held back (see `_one_transaction`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def commit(self) -> None:
        """Held: the enclosing `_one_transaction` commits or rolls back."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@contextlib.contextmanager
def _one_transaction(saver: SyncSaverBridge) -> Iterator[None]:
    """Make one `update_state` (and the reads that verify it) atomic.

    `update_state` saves the update's writes on the current head and then the
    new checkpoint, and the saver commits after each call; a failure between
    the two would leave writes pending on the head. While this is active the
    saver's commits are held, so everything lands in one SQLite transaction
    that commits at the end or rolls back on any error. The saver's reads in
    the meantime go through the same connection and see the uncommitted
    writes, which is what lets verification run before the commit.

    Only for code that owns the saver for the duration: no turn may be
    running (bridged calls are drained first). A database saver has real
    transactions on its connection and uses its own `atomic()`.
    """
    if not isinstance(saver, BridgedSqliteSaver):
        with cast("BridgedPostgresSaver", saver).atomic():
            yield
        return
    saver.drain()
    real = saver.conn
    saver.setup()  # its executescript would commit on its own
    if real.in_transaction:
        real.commit()
    saver.conn = cast(sqlite3.Connection, _HeldCommits(real))
    try:
        yield
    except BaseException:
        saver.conn = real
        real.rollback()
        raise
    else:
        saver.conn = real
        real.commit()
