"""Present (stage 4 of the pipeline): what the operator reads of a check. The
answer with a mark after each ungrounded claim, and the one line after it
that names them, says how many claims could not be checked, or that the
check itself failed. Unchecked claims are never marked as NetBox's (no ✓ on
the screen, their count on the line, each listed in /show)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from netbox_chat.claims.grounding import Grounding, check
from netbox_chat.claims.index import Index
from netbox_chat.words import count

MARK = "\u2020"  # a dagger after the claim: readable in prose, tables and lists alike
SHOWN = 5  # claims the line names before it says how many more


def marked(answer: str, grounding: Grounding, mark: str = MARK, offset: int = 0) -> str:
    """`answer` with `mark` after each ungrounded claim (offsets are the
    answer's own: the reader keeps them). `offset`: where `answer` starts in
    the text `grounding` was checked on."""
    ends = sorted(
        {
            c.end - offset
            for c in grounding.all
            if c.status == "ungrounded" and 0 < c.end - offset <= len(answer)
        },
        reverse=True,
    )
    pieces = []
    last = len(answer)
    for end in ends:
        pieces.append(answer[end:last])
        pieces.append(mark)
        last = end
    pieces.append(answer[:last])
    return "".join(reversed(pieces))


STORED_MAX = 100
"""Claims of a stored grounding marked at most (the store is anyone's data)."""


def marked_again(answer: str, grounding: Mapping[str, Any]) -> str:
    """`answer` with `MARK` after each place it writes a claim that
    `grounding` (as the ledger keeps it: the claims' texts, not where they
    stand) names as not in NetBox's replies: how a recap or `/history` shows
    a recorded answer as it was marked when it streamed. A claim written in
    other words than its text (`VLAN 100` for a VLAN named 100) is named by
    the line after it only. An answer made without NetBox is not marked
    (`Marker`): the line after it says so, once."""
    if grounding["without_netbox"]:
        return answer
    texts = {str(c["text"]) for c in grounding["ungrounded"][:STORED_MAX] if c["text"]}
    if not texts:
        return answer
    pattern = re.compile(
        "|".join(rf"(?<!\w){re.escape(t)}(?!\w)" for t in sorted(texts, key=len, reverse=True))
    )
    return pattern.sub(lambda found: found.group() + MARK, answer)


class Marker:
    """Marks an answer block by block as it streams. Each block is checked on
    its own against the turn's calls (indexed once per new tool result), so a
    block costs work on that block only; the line after the answer comes from
    the whole answer's check at the turn's end."""

    def __init__(self, calls: Callable[[], Sequence[Any]], given: str = "") -> None:
        self.calls = calls
        self.given = given
        self._index: Index | None = None
        self._indexed = -1

    def __call__(self, block: str) -> str:
        calls = self.calls()
        if not calls:
            return block  # nothing looked up: the line after says so, once
        if self._index is None or self._indexed != len(calls):
            self._index, self._indexed = Index.of(calls), len(calls)
        return marked(block, check(block, self._index, given=self.given))


def summary_line(grounding: Grounding) -> str:
    """The line after the answer, or "" when every claim was verified:
    `2 not in NetBox's replies: dmi01-akron-sw03, 17 devices · 1 unchecked`,
    that the answer states NetBox facts with no tool call, or that the check
    itself failed."""
    if grounding.failed:
        return f"{grounding.failed}: the answer's claims are unchecked"
    return summary_of(grounding.as_json())


def summary_of(data: Mapping[str, Any]) -> str:
    """`summary_line` of a grounding as `ask --json` and the ledger give it."""
    if data["without_netbox"]:
        return f"answered without NetBox: {count(data['claims'], 'fact')} and no tool call"
    texts = [str(c["text"]) for c in data["ungrounded"]]
    unchecked = len(data.get("unchecked", []))
    parts = []
    if texts:
        named = ", ".join(texts[:SHOWN])
        if len(texts) > SHOWN:
            named += f" and {len(texts) - SHOWN} more"
        parts.append(f"{len(texts)} not in NetBox's replies: {named}")
    if unchecked:
        parts.append(f"{unchecked} unchecked (not tied to a NetBox record)")
    return " · ".join(parts)
