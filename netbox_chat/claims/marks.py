"""What the operator reads of a check: the answer with its ungrounded claims
marked, and the one line after it that names them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netbox_chat.claims.grounding import Grounding
from netbox_chat.words import count

MARK = "\u2020"  # a dagger after the claim: readable in prose, tables and lists alike
SHOWN = 5  # claims the line names before it says how many more


def marked(answer: str, grounding: Grounding, mark: str = MARK) -> str:
    """`answer` with `mark` after each ungrounded claim (offsets are the
    answer's own: the reader keeps them)."""
    ends = sorted(
        {c.end for c in grounding.all if c.status == "ungrounded" and 0 < c.end <= len(answer)},
        reverse=True,
    )
    for end in ends:
        answer = answer[:end] + mark + answer[end:]
    return answer


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
