"""Deterministic scoring by contradiction: pure functions, one per answer type.

A right answer phrased differently is right; a wrong number, or a name that is
not in the truth, makes an answer wrong however much else in it is right (a
judge that scored completeness certified an invented "7.7 %" against a true
0 %: docs/facts/real-models.md, "Evaluation lessons"). Only explanation
questions go to an LLM judge, and only when one is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {word: n for n, word in enumerate(_WORDS.split())}
# A number standing on its own: not part of a name (sw01), an address (10.0.0.1/24),
# a date or a time. Thousands separators are read through.
_NUMBER = re.compile(r"(?<![\w.\-/:])(\d{1,3}(?:,\d{3})+|\d+)(?![\w\-/]|\.\d|:\d)")
_WORD_NUMBER = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
_NONE = re.compile(
    r"\b(no|none|not|nothing|zero|neither|nor|cannot|can't|couldn't|doesn't|don't|"
    r"isn't|aren't|hasn't|haven't|without|absent|empty)\b|n't\b",
    re.IGNORECASE,
)
_YES = re.compile(r"\b(yes|(all|every|each)\b[^.:;]*?\b(are|is|have|has|do|does))\b", re.IGNORECASE)
_NO = re.compile(r"\b(no|not)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"[*_`|#>]")


@dataclass(frozen=True)
class Score:
    """`correct` is None when the answer was not scored (an explanation without a judge)."""

    correct: bool | None
    why: str
    precision: float | None = None
    recall: float | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def plain(answer: str) -> str:
    """The answer without Markdown emphasis, code and table marks."""
    return _MARKUP.sub(" ", answer)


def numbers(answer: str) -> list[int]:
    """The standalone numbers in `answer`, in order, digits and words alike."""
    found: list[tuple[int, int]] = [
        (m.start(), int(m.group(1).replace(",", ""))) for m in _NUMBER.finditer(answer)
    ]
    found += [(m.start(), NUMBER_WORDS[m.group(1).lower()]) for m in _WORD_NUMBER.finditer(answer)]
    return [value for _, value in sorted(found)]


def mentioned(answer: str, candidates: Sequence[str]) -> list[str]:
    """The candidates named in `answer` as whole names (sw01 does not match sw010),
    the longest first so a name inside a longer one is not counted twice."""
    text = answer.lower()
    taken = [False] * len(text)
    hits: list[str] = []
    for name in sorted({c for c in candidates if c}, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w.\-/])" + re.escape(name.lower()) + r"(?![\w\-/]|\.\w)")
        for match in pattern.finditer(text):
            if not any(taken[match.start() : match.end()]):
                taken[match.start() : match.end()] = [True] * (match.end() - match.start())
                hits.append(name)
                break
    return sorted(hits)


def first_sentence(answer: str) -> str:
    parts = [p for p in _SENTENCE.split(plain(answer).strip()) if p.strip()]
    return parts[0] if parts else ""


def says_none(answer: str) -> bool:
    """The answer's first sentence says there is none (or that the premise is false)."""
    head = first_sentence(answer)
    return bool(_NONE.search(head)) or numbers(head)[:1] == [0]


def score_count(answer: str, expected: int, question: str = "") -> Score:
    """Right when the first number the answer states is the count ("none" is 0).
    Numbers the question itself holds (VLAN 100, site 5) are not a count."""
    text = plain(answer)
    asked = set(numbers(question))
    stated = [n for n in numbers(text) if n not in asked or n == expected]
    if not stated:
        if says_none(text):
            stated = [0]
        else:
            return Score(False, "no number in the answer")
    if stated[0] != expected:
        return Score(False, f"says {stated[0]}, the truth is {expected}")
    return Score(True, f"says {expected}")


def score_list(answer: str, expected: Sequence[str], universe: Sequence[str]) -> Score:
    """Right when every name in the truth is given and no other known name is."""
    text = plain(answer)
    truth = set(expected)
    given = set(mentioned(text, [*truth, *universe]))
    right = given & truth
    wrong = sorted(given - truth)
    missing = sorted(truth - given)
    precision = len(right) / len(given) if given else 0.0
    recall = len(right) / len(truth) if truth else 1.0
    if wrong:
        return Score(False, f"names {', '.join(wrong)}, not in the truth", precision, recall)
    if missing:
        return Score(False, f"misses {', '.join(missing)}", precision, recall)
    return Score(True, f"all {len(truth)} named", precision, recall)


def score_value(answer: str, expected: str, universe: Sequence[str]) -> Score:
    """Right when the value is given and no other value it could have been is."""
    text = plain(answer)
    given = mentioned(text, [expected, *universe])
    others = [g for g in given if g.lower() != expected.lower()]
    if others:
        return Score(False, f"says {', '.join(others)}, the truth is {expected}")
    if not given:
        return Score(False, f"does not say {expected}")
    return Score(True, f"says {expected}")


def score_boolean(answer: str, expected: dict[str, Any], universe: Sequence[str]) -> Score:
    """Yes or no as the first verdict, and when no, every exception named."""
    text = plain(answer)
    head = first_sentence(text)
    yes_at = _YES.search(head)
    no_at = _NO.search(head)
    if yes_at is None and no_at is None:
        return Score(False, "neither yes nor no")
    said_yes = no_at is None or (yes_at is not None and yes_at.start() < no_at.start())
    if said_yes != bool(expected["yes"]):
        return Score(False, f"says {'yes' if said_yes else 'no'}, the truth is the other")
    exceptions = list(expected.get("exceptions") or [])
    missing = sorted(set(exceptions) - set(mentioned(text, [*exceptions, *universe])))
    if missing:
        return Score(False, f"does not name {', '.join(missing)}")
    return Score(True, "right verdict" + (", exceptions named" if exceptions else ""))


def score_absence(answer: str) -> Score:
    """Right when the answer says there is none, up front."""
    if says_none(answer):
        return Score(True, "says there is none")
    return Score(False, "answers as if there were one")


def score(
    kind: str, answer: str, expected: Any, universe: Sequence[str] = (), question: str = ""
) -> Score:
    """The score of `answer` to a question of answer type `kind`."""
    if not answer.strip():
        return Score(False, "no answer")
    if kind == "count":
        return score_count(answer, int(expected), question)
    if kind == "list":
        return score_list(answer, list(expected), universe)
    if kind == "value":
        return score_value(answer, str(expected), universe)
    if kind == "boolean":
        return score_boolean(answer, dict(expected), universe)
    if kind == "absence":
        return score_absence(answer)
    return Score(None, "explanations are scored only by a judge (--judge MODEL)")


def judge_prompt(question: str, reference: str, answer: str) -> str:
    """What an LLM judge is asked about an explanation: contradiction, not completeness."""
    return (
        "You grade an answer against a reference that is true. Reply with one word: "
        "CORRECT if the answer states nothing that contradicts the reference and answers "
        "the question, WRONG if it contradicts the reference anywhere (a wrong number, "
        "name or state) or does not answer.\n\n"
        f"Question: {question}\nReference: {reference}\nAnswer: {answer}\n\nGrade:"
    )


def judge_verdict(reply: str) -> Score:
    words = reply.strip().upper()
    if words.startswith("CORRECT"):
        return Score(True, "judge: correct")
    if words.startswith("WRONG"):
        return Score(False, "judge: wrong")
    return Score(None, "judge gave no verdict")
