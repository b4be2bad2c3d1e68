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
transaction (`Connection.atomic()`) on the connection every copy of the saver
writes through, so a failure or a state that does not match what was intended
rolls everything back and nothing is written.
Nothing here prints; results carry a one-line `__str__` for the REPL.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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

from netbox_chat.agent.turns import (
    Conversation,
    describe_error,
    message_ids,
    text_of,
    unpaired_tool_messages,
)
from netbox_chat.checkpoints.sqlite import WritesStillRunning
from netbox_chat.errors import UserFacingError
from netbox_chat.models.thinking import inlines_thinking, split_thinking
from netbox_chat.models.window import transcript_chars
from netbox_chat.store.ledger import Turn
from netbox_chat.store.postgres import database_errors
from netbox_chat.words import count, number

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
                f"{count(len(self.set_aside), 'later turn')} set aside "
                "(they stay in the ledger as rewound)"
            )
        if self.undid_compaction:
            changes.append("the compaction since then is undone")
        changes.append(f"{number(self.messages_before)} → {count(self.messages_after, 'message')}")
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
            f"compacted {count(self.summarized, 'message')} into a summary + last "
            f"{count(self.kept_exchanges, 'exchange')}: history sent with each request "
            f"~{number(self.chars_before)} → ~{number(self.chars_after)} characters"
        )


# --- rewind ------------------------------------------------------------------------------


def rewind(conversation: Conversation, to_turn: int | None = None) -> RewindResult:
    """Return the conversation to just after finished turn `to_turn` (0: the
    start; None: drop the last finished turn), linearly, failing closed."""
    session = conversation.session
    conversation.recover_interrupted()
    turns = session.turns()
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

    _drain(conversation, f"rewind to {_where(target)}")
    head_id = conversation.head_checkpoint_id()
    head_values = conversation.committed_values(head_id)
    update = _linear_update(conversation, target_values, head_values)
    if not update and not later and not conversation.head_problems():
        raise NothingToRewind(f"nothing to rewind: the conversation is already at {_where(target)}")
    target_messages = list(target_values.get("messages", []))
    before = len(head_values.get("messages", []))

    def record(new_head: str | None) -> None:
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

    new_head = _write_verified(
        conversation, update, target_values, f"rewind to {_where(target)}", record
    )
    return RewindResult(
        to_turn=target,
        set_aside=later,
        messages_before=before,
        messages_after=len(target_messages),
        head_checkpoint_id=new_head,
        undid_compaction=_summarized(head_values) and not _summarized(target_values),
    )


def _summarized(values: dict[str, Any]) -> bool:
    """Whether the model sees a summary here: one written by /compact into the
    messages, or an automatic one in the summarization event."""
    return values.get(SUMMARIZATION_EVENT) is not None or any(
        is_summary(m) for m in values.get("messages", [])
    )


def _where(turn: int) -> str:
    return f"turn {turn}" if turn else "the start"


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
    problems = unpaired_tool_messages(values.get("messages", []))
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
    update = restore_update(conversation, target, head)
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
    conversation.recover_interrupted()
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
        reply = await chat_model.ainvoke(
            summary_request(plan.older, _transcript_budget(chat_model))
        )
    except asyncio.CancelledError:
        return CompactResult(cancelled=True)
    except Exception as exc:
        raise HistoryEditError(
            f"compaction failed, nothing changed: {describe_error(exc)}"
        ) from exc
    inline = inlines_thinking(getattr(chat_model, "reasoning", None))
    summary_text = split_thinking(text_of(reply), inline)[1].strip()
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
    )

    def record(new_head: str | None) -> None:
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

    new_head = _write_verified(conversation, update, target, "compaction", record)
    return replace(result, head_checkpoint_id=new_head)


def _transcript_budget(chat_model: BaseChatModel) -> int:
    """The transcript that fits the model's window (ChatOllama's num_ctx is
    the session's), so the summary request is not itself cut by Ollama."""
    num_ctx = getattr(chat_model, "num_ctx", None)
    if not isinstance(num_ctx, int):
        return TRANSCRIPT_CHARS
    return min(TRANSCRIPT_CHARS, transcript_chars(num_ctx))


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
    effective = effective_messages(messages, event)
    starts = [
        i for i, m in enumerate(effective) if isinstance(m, HumanMessage) and not is_summary(m)
    ]
    kept = min(keep_exchanges, len(starts))
    cut = starts[-kept] if kept else len(effective)
    older, tail = effective[:cut], effective[cut:]
    if not [m for m in older if not is_summary(m)]:
        raise HistoryEditError(
            f"nothing to compact: the conversation has {count(len(starts), 'exchange')} "
            f"and the last {keep_exchanges} are kept as they are"
        )
    if unpaired_tool_messages(tail):
        raise HistoryEditError("cannot compact: a tool call in the kept exchanges has no result")
    return _Plan(older, tail, kept, event is not None, effective)


QUESTION_KEY = "question_message"
"""Our one addition to deepagents' summarization event: the question the turn
was answering when the context guard summarized inside it. It stays its own
message after the summary, as it was asked (issue 25, item 5)."""


def event_front(event: Any) -> list[BaseMessage] | None:
    """The messages a summarization event puts in front of the state's
    messages from its cutoff on: the summary, then the open question if any.
    None when there is no (well-formed) event."""
    if not isinstance(event, dict):
        return None
    summary, cutoff = event.get("summary_message"), event.get("cutoff_index")
    if not isinstance(summary, BaseMessage) or not isinstance(cutoff, int):
        return None
    question = event.get(QUESTION_KEY)
    return [summary, question] if isinstance(question, HumanMessage) else [summary]


def effective_messages(messages: list[BaseMessage], event: Any) -> list[BaseMessage]:
    """What the model sees, given deepagents' own summarization event (if any)."""
    front = event_front(event)
    if front is None:
        return messages
    return [*front, *messages[event["cutoff_index"] :]]


def summary_request(
    older: Sequence[BaseMessage], transcript_chars: int = TRANSCRIPT_CHARS
) -> list[BaseMessage]:
    """The request that asks the model for a summary of `older`, its transcript
    clipped to `transcript_chars` so the request fits the window."""
    transcript = _clip_middle(_transcript(older), transcript_chars)
    return [
        SystemMessage(SUMMARY_INSTRUCTIONS),
        HumanMessage(
            "Summarize this conversation.\n\n<transcript>\n" + transcript + "\n</transcript>"
        ),
    ]


def _transcript(messages: Sequence[BaseMessage]) -> str:
    lines: list[str] = []
    for message in messages:
        text = text_of(message).strip()
        if is_summary(message):
            lines.append(f"[summary of the earlier conversation]\n{text}")
        elif isinstance(message, HumanMessage):
            lines.append(f"Operator: {text}")
        elif isinstance(message, AIMessage):
            if text:
                lines.append(f"Assistant: {split_thinking(text)[1].strip()}")
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
    return text[:limit] + f" […{number(len(text) - limit)} more characters]"


def _clip_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    omitted = f"\n\n[…{number(len(text) - limit)} characters omitted…]\n\n"
    return text[:head] + omitted + text[-tail:]


def request_chars(messages: Sequence[BaseMessage]) -> int:
    """About how many characters these messages add to each model request:
    their text plus the tool calls' names and arguments."""
    total = 0
    for message in messages:
        total += len(text_of(message))
        if isinstance(message, AIMessage):
            total += sum(
                len(call["name"]) + len(json.dumps(call["args"], ensure_ascii=False))
                for call in message.tool_calls
            )
    return total


# --- the one write ----------------------------------------------------------------------


class _Mismatch(Exception):
    pass


def _store_errors() -> tuple[type[Exception], ...]:
    return (sqlite3.Error, OSError, *database_errors())


def _write_verified(
    conversation: Conversation,
    update: dict[str, Any],
    target: dict[str, Any],
    what: str,
    record: Callable[[str | None], None],
) -> str | None:
    """Write `update` onto the head, verify the head equals `target`, `record`
    the edit in the ledger (given the new head's id), and commit all of it, or
    nothing. Returns the new head's checkpoint id.

    `update_state` saves the update's writes on the head and then the new
    checkpoint, and the saver commits after each call; inside `atomic()`
    those commits are held (for every copy of the saver: they share the
    session's connection, which the ledger uses too), and the verifying reads
    see the uncommitted rows. No turn may be running: bridged calls are
    drained first.
    """
    saver = conversation.saver
    _drain(conversation, what)
    saver.ids_after(conversation.head_checkpoint_id())
    try:
        with conversation.session.db.atomic():
            conversation.graph.update_state(
                conversation.config, update, as_node=conversation.end_node
            )
            problems = verify(conversation, target)
            if problems:
                raise _Mismatch("; ".join(problems))
            new_head = conversation.head_checkpoint_id()
            record(new_head)
            return new_head
    except _Mismatch as exc:
        raise HistoryEditError(
            f"{what} not written: the result did not check out ({exc}); nothing changed"
        ) from exc
    except HistoryEditError:
        raise
    except _store_errors() as exc:
        where = "session database" if isinstance(exc, database_errors()) else "session file"
        # One line: a server's error adds CONTEXT lines.
        said = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise HistoryEditError(
            f"{what} not written: the {where} could not be written ({said}); nothing changed"
        ) from exc
    except Exception as exc:
        raise HistoryEditError(
            f"{what} not written: {type(exc).__name__}: {exc}; nothing changed"
        ) from exc


def _drain(conversation: Conversation, what: str) -> None:
    try:
        conversation.saver.drain()
    except WritesStillRunning as exc:
        raise HistoryEditError(f"{what} not written: {exc}; nothing changed") from exc


# --- writing a state onto the head, and checking it ------------------------------------


def restore_update(
    conversation: Conversation, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, Any]:
    """The update that turns channel values `after` back into `before`."""
    update: dict[str, Any] = {}
    for channel in set(before) | set(after):
        old = before.get(channel, _empty_value(conversation, channel))
        if after.get(channel, _empty_value(conversation, channel)) == old:
            continue
        update[channel] = old if _is_plain_value(conversation, channel) else Overwrite(old)
    return update


def _is_plain_value(conversation: Conversation, channel: str) -> bool:
    return isinstance(conversation.graph.channels.get(channel), LastValue)


def _empty_value(conversation: Conversation, channel: str) -> Any:
    if _is_plain_value(conversation, channel):
        return None
    return [] if channel == "messages" else {}


def _message_key(message: BaseMessage) -> tuple[str, str, str]:
    return (str(message.id), message.type, json.dumps(message.content, sort_keys=True))


def verify(conversation: Conversation, target: dict[str, Any]) -> list[str]:
    """Why the committed head is not `target` (empty when it is): the same
    messages (ids and contents), nothing scheduled or pending, every other
    channel equal."""
    problems = []
    head = conversation.saver.get_tuple(conversation.config)
    head_id = conversation.head_checkpoint_id()
    state = conversation.graph.get_state(conversation.pinned(head_id)) if head_id else None
    now = dict(state.values) if state else {}
    now_messages = now.get("messages", [])
    wanted = target.get("messages", [])
    if message_ids(now_messages) != message_ids(wanted):
        problems.append("messages differ from the intended ones")
    elif [_message_key(m) for m in now_messages] != [_message_key(m) for m in wanted]:
        problems.append("message contents differ from the intended ones")
    if state is not None and state.next:
        problems.append(f"steps still scheduled: {', '.join(state.next)}")
    if head is not None and head.pending_writes:
        problems.append("task results still pending on the head")
    for channel in set(target) | set(now):
        if channel == "messages":
            continue
        empty = _empty_value(conversation, channel)
        if now.get(channel, empty) != target.get(channel, empty):
            problems.append(f"channel {channel!r} differs from its intended value")
    return problems
