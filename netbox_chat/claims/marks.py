"""What the operator reads of a check: the answer with its ungrounded claims
marked, and the one line after it that names them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from netbox_chat.claims.grounding import Evidence, Grounding, check
from netbox_chat.words import count

MARK = "\u2020"  # a dagger after the claim: readable in prose, tables and lists alike
SHOWN = 5  # claims the line names before it says how many more


def marked(answer: str, grounding: Grounding, mark: str = MARK, offset: int = 0) -> str:
    """`answer` with `mark` after each ungrounded claim (offsets are the
    answer's own: the reader keeps them). `offset`: where `answer` starts in
    the text `grounding` was checked on (a block of an answer still streaming)."""
    ends = sorted(
        {
            c.end - offset
            for c in grounding.all
            if c.status == "ungrounded" and 0 < c.end - offset <= len(answer)
        },
        reverse=True,
    )
    for end in ends:
        answer = answer[:end] + mark + answer[end:]
    return answer


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
    """Marks an answer block by block as it streams: each block is checked
    with the answer before it (a count can rest on a list printed earlier)
    against the turn's evidence, indexed once per new tool result."""

    def __init__(self, evidence: Callable[[], Sequence[Any]], given: str = "") -> None:
        self.evidence = evidence
        self.given = given
        self.before = ""
        self._index: Evidence | None = None
        self._indexed = -1

    def restart(self) -> None:
        """A new model call answers (a retry): its text stands alone."""
        self.before = ""

    def __call__(self, block: str) -> str:
        payloads = self.evidence()
        if not payloads:
            return block  # nothing looked up: the line after says so, once
        if self._index is None or self._indexed != len(payloads):
            self._index, self._indexed = Evidence.of(payloads), len(payloads)
        text = self.before + block
        grounding = check(text, self._index, given=self.given)
        self.before = text + "\n\n"
        return marked(block, grounding, offset=len(text) - len(block))


def summary_line(grounding: Grounding) -> str:
    """The line after the answer, or "" when every claim rests on NetBox:
    `2 not in NetBox's replies: dmi01-akron-sw03, 17 devices`, or that the
    answer states NetBox facts with no tool call."""
    return summary_of(grounding.as_json())


def summary_of(data: Mapping[str, Any]) -> str:
    """`summary_line` of a grounding as `ask --json` and the ledger give it."""
    if data["without_netbox"]:
        return f"answered without NetBox: {count(data['claims'], 'fact')} and no tool call"
    texts = [str(c["text"]) for c in data["ungrounded"]]
    if not texts:
        return ""
    named = ", ".join(texts[:SHOWN])
    if len(texts) > SHOWN:
        named += f" and {len(texts) - SHOWN} more"
    return f"{len(texts)} not in NetBox's replies: {named}"
