"""What this server's tools returned, per MCP session, and the grounding check on it.

`check_answer` must judge an answer by the NetBox replies the asking agent had,
so each session's calls are kept here, bounded (the oldest go first), as the
chat keeps a turn's evidence. `verdicts` is the one place that speaks to
`netbox_chat.claims`: the same check `ask --json` runs, on the same calls.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netbox_chat import claims
from netbox_chat.claims import check

MAX_CALLS = 200  # calls kept per session: more than a long conversation makes
MAX_CHARS = 4_000_000  # characters of replies kept per session
MAX_SESSIONS = 64  # sessions kept at once; the least recently used is forgotten


@dataclass(frozen=True)
class Call:
    """One tool call of a session and its decoded reply (the claims contract's
    shape: name, arguments, payload)."""

    name: str
    args: Mapping[str, Any]
    payload: Any
    size: int = 0


def payload_of(text: str) -> Any:
    """A tool result as JSON data when it is JSON (NetBox's answers are), else its
    text: what the chat's grounding reads too (agent/turns.py)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class Replies:
    """Each session's calls, oldest first, within MAX_CALLS and MAX_CHARS, for at
    most MAX_SESSIONS sessions."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, deque[Call]] = OrderedDict()

    def add(self, session: str, call: Call) -> None:
        calls = self._sessions.pop(session, None) or deque()
        self._sessions[session] = calls
        calls.append(call)
        while len(calls) > MAX_CALLS or (len(calls) > 1 and sum(c.size for c in calls) > MAX_CHARS):
            calls.popleft()
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    def of(self, session: str) -> list[Call]:
        calls = self._sessions.get(session)
        if calls is None:
            return []
        self._sessions.move_to_end(session)
        return list(calls)


def verdicts(answer: str, calls: Sequence[Call], *, question: str = "") -> dict[str, Any]:
    """The grounding check's JSON (`ask --json`'s `grounding`) with each claim's
    verdict, the call it rests on (tool and arguments) and why. The check never
    raises: when it fails, its claims are unchecked and `failed` says so."""
    grounding = check(
        answer, [claims.Call(c.name, c.args, c.payload) for c in calls], given=question
    )
    out = grounding.as_json()
    out["verdicts"] = [
        {
            **claim.as_json(),
            "status": claim.status,
            "source": _source(calls, claim.source),
            "reason": claim.reason,
        }
        for claim in grounding.all
    ]
    out["calls"] = len(calls)
    if grounding.failed:
        out["failed"] = grounding.failed
    return out


def _source(calls: Sequence[Call], index: int | None) -> dict[str, Any] | None:
    if index is None or not 0 <= index < len(calls):
        return None
    return {"tool": calls[index].name, "arguments": dict(calls[index].args)}
