"""`ask --stream-json`: a turn's events as JSON lines, one object per line,
flushed per line so `| jq` sees each as it happens.

Events are serialized generically, from the event dataclass's fields plus a
`type` made from its class name (`ToolStarted` → `tool_started`), so an
event type added to turns.py streams without a change here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netbox_chat.agent.turns import TurnOutcome

from netbox_chat.visible import visible_json


def event_object(event: object) -> dict[str, Any]:
    """`{"type": "text_delta", "text": ...}` for `TextDelta(text=...)`."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        raise TypeError(f"not an event: {event!r}")
    kind = re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()
    return {"type": kind, **dataclasses.asdict(event)}


class JsonLines:
    """Writes objects to `out`, one compact JSON document per line, no
    control character raw (a model's or NetBox's text may hold some)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, obj: dict[str, Any]) -> None:
        self.out.write(visible_json(json.dumps(obj, ensure_ascii=False, default=str)) + "\n")
        self.out.flush()

    def event(self, event: object) -> None:
        self.write(event_object(event))


def turn_result(
    session: str, outcome: TurnOutcome, *, started: bool = True, outage: str | None = None
) -> dict[str, Any]:
    """A turn's outcome as `ask --json` prints it (and `--stream-json`'s last
    line, and each answer of `netbox-chat eval`): answer, thinking, tool calls,
    tokens, the window it used, error. `started` is False for a turn a signal
    stopped before it began (no number was given); `outage` is why NetBox could
    not serve the turn, if it could not (the answer was made without it)."""
    context = outcome.context
    return {
        "session": session,
        "turn": outcome.number if started else None,
        "status": outcome.status,
        "answer": outcome.answer,
        "thinking": outcome.thinking or None,
        "thinking_seconds": outcome.thinking_seconds,
        "tool_calls": [dataclasses.asdict(call) for call in outcome.tool_calls],
        "tokens": {"in": outcome.tokens_in, "out": outcome.tokens_out},
        "context": {
            "window": context.window,
            "prompt_tokens_max": context.prompt_tokens_max,
            "prompt_tokens_last": context.prompt_tokens_last,
            "truncated": context.truncated,
            "compactions": len(context.compactions),
        },
        "error": outcome.error,
        "netbox_error": outage,
        "grounding": outcome.grounding.as_json() if outcome.grounding is not None else None,
    }
