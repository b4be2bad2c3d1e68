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
from typing import IO, Any

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
