"""Deterministic scoring by contradiction, on the claims reader: one pure
function per answer type.

A right answer in any shape is right (prose, a table, a numbered list, ids,
slugs, another case, words for numbers); a wrong number, a second candidate
answer, a name of the asked kind that is not in the truth, or a negated value
makes an answer wrong however much else in it is right (a judge that scored
completeness certified an invented "7.7 %" against a true 0 %: docs/grounding.md,
"How real models invent"). A non-answer ("I don't know", a refusal, a
question back) is wrong in every kind and marked `declined`, so the report
counts it apart. Only explanation questions go to an LLM judge, and only when
one is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from netbox_chat.claims.grounding import claims_of
from netbox_chat.claims.reader import (
    ID_REF,
    NEGATOR,
    OBJECT_NOUNS,
    Number,
    clause_start,
    declined,
    introduced,
    joins,
    key,
    negated,
    numbers,
    plain,
    question_noun,
    says_none,
    shape,
    singular,
    tokens,
)
from netbox_chat.eval.questions import Question


@dataclass(frozen=True)
class Score:
    """`correct` is None when the answer was not scored (an explanation
    without a judge); `declined` marks a non-answer (wrong, counted apart)."""

    correct: bool | None
    why: str
    precision: float | None = None
    recall: float | None = None
    declined: bool = False

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------ mentions


@dataclass(frozen=True)
class Mention:
    name: str  # as the truth or universe spells it
    start: int
    end: int
    negated: bool


Aliases = Mapping[str, Sequence[str]]
"""A name's other names: {"Dell R640 (17)": ["#17", "dell-r640-17"]}."""

_AN_ID = re.compile(r"#\d+")
_KINDS = "|".join(sorted((re.escape(n) for n in OBJECT_NOUNS), key=len, reverse=True))
_A_KINDS_ID = re.compile(rf"({_KINDS}) #(\d+)")
"""An id alias of one kind, "device #42": a wrong extra of a built question."""
_KIND_BEFORE = re.compile(
    rf"\b({_KINDS}"
    r"|ticket|issue|step|line|row|page|unit|position|slot|bay|vid|version|number|no\.)"
    r"(?:e?s)?(?:\s+(?:with|of|having|numbered))?[\s:(]*$",
    re.I,
)
_DISPLAY_ID = re.compile(r"\s*\(\d+\)$")
_ANY_KIND = frozenset(
    {"object", "entry", "record", "item", "result", "one", "member", "host"}
    | {"switch", "router", "server", "firewall"}
)
"""Words that can stand for an object of any kind ("the unnamed one, #42")."""
_COMPANY = re.compile(r"-(?:inc|llc|ltd|corp|gmbh|co|plc|ag|sa)$")
_EXCEPT = re.compile(r"\b(?:except|excluding|other\s+than|besides|apart\s+from)\s*$", re.I)


def mentions(text: str, names: Sequence[str], aliases: Aliases | None = None) -> list[Mention]:
    """Where `names` are written in `text` as whole names, the longest first
    (sw01 does not match sw010; "PP:MDF" is not the site "MDF"); a slug, a
    display name with other spaces, or another case match. A name that is an
    ordinary word ("Shared", "Admin", "active") must be written as NetBox
    spells it, or set apart (bold, code, a list item, a table cell).
    `aliases` gives a name's other names (its slug, display form, `#<id>`):
    any of them written counts as the name. An id ("#17") is read only as an
    id is written ("id 17", "ID: 17", "#17", a table's "ID" column), never as
    a bare number; an id of one kind ("device #42") only where it refers to
    that kind (_refers_to)."""
    aliases = aliases or {}
    lookup: dict[str, str] = {}
    ids: dict[str, tuple[str, str]] = {}  # id -> its owner, and its kind ("": any reference)
    longest = 1
    for name in names:
        for form in (name, *aliases.get(name, ())):
            typed = _A_KINDS_ID.fullmatch(form)
            if _AN_ID.fullmatch(form):
                ids.setdefault(form[1:], (name, ""))
            elif typed:
                ids.setdefault(typed.group(2), (name, typed.group(1)))
            elif form and key(form):
                lookup.setdefault(key(form), name)
                # a slug drops the company form ("Dunder-Mifflin, Inc." is dunder-mifflin)
                lookup.setdefault(_COMPANY.sub("", key(form)) or key(form), name)
                longest = max(longest, len(tokens(form)) or 1)
    toks = tokens(text)
    found: list[Mention] = []
    i = 0
    while i < len(toks):
        hit = None
        for joined, last in joins(text, toks, i, longest):
            if joined in lookup:
                hit = (lookup[joined], last)
        if hit is None:
            i += 1
            continue
        name, last = hit
        start, end = toks[i].start, toks[last].end
        i = last + 1
        if _ordinary(name) and text[start:end] != name and not _set_apart(text, start, end):
            continue
        found.append(Mention(name, start, end, _denied(text, start)))
    taken = [(m.start, m.end) for m in found]
    for ref in ID_REF.finditer(text) if ids else ():
        owner, kind = ids.get(ref.group(1), ("", ""))
        if not owner or any(s <= ref.start(1) < e for s, e in taken):
            continue
        if kind and not _refers_to(text, ref.start(), kind, owner):
            continue
        found.append(Mention(owner, ref.start(), ref.end(), _denied(text, ref.start())))
    if ids:
        found += _id_column(text, ids, found)
    return sorted(found, key=lambda m: m.start)


def _id_column(
    text: str, ids: Mapping[str, tuple[str, str]], found: Sequence[Mention]
) -> list[Mention]:
    """The objects a table gives only in its "ID" column ("| 42 | (no name) |"):
    a row that names no object is the object its id is. A row that names
    one (`| 42 | vm-db01 |`) gives that object's own id, which may be another
    kind's; an id of one kind is read only in a table of that kind's objects
    or of names."""
    given = []
    for row in shape(text).rows:
        if any(row.start <= m.start < row.end for m in found):
            continue
        headers = {singular(plain(h).strip()) for h, _ in row.cells}
        for header, cell in row.cells:
            owner, kind = ids.get(plain(cell).strip(), ("", ""))
            of_kind = not kind or bool({kind, "name"} & headers)  # not "| ID | VLAN |"
            if owner and of_kind and plain(header).strip().lower() in ("id", "#"):
                given.append(Mention(owner, row.start, row.end, False))
    return given


def _refers_to(text: str, start: int, kind: str, owner: str) -> bool:
    """The id written at `start` is one of `kind`'s: it stands alone ("- #42",
    "and id 42") or after that kind's noun ("device id 42", "the unnamed
    device (ID 42)") or the owner's display without its id ("Dell R640 (ID
    42)" of "Dell R640 (42)"), not after another kind's or another thing's
    ("site id 3", "VLAN ID 42", "port #42") nor as a note on another name
    ("DM-Akron (id 3)", "sw01 (#3)"). Only a wrong extra is read so strictly: a false
    extra would mark a right answer wrong."""
    head = text[max(0, start - 60) : start]
    said = _KIND_BEFORE.search(head)
    if said:
        noun = " ".join(said.group(1).lower().split())
        return noun == kind or noun in _ANY_KIND
    head = head.rstrip()
    word = re.search(r"(\S*)\s*\($", head)
    if word is None or (word.group(1).isalpha() and word.group(1).islower()):
        return True  # not in parentheses, or after a plain word ("without a name (#7)")
    stem, before = key(_DISPLAY_ID.sub("", owner)), key(head[:-1])
    return stem != key(owner) and (before == stem or before.endswith("-" + stem))


def _denied(text: str, start: int) -> bool:
    head = text[clause_start(text, start) : start]
    return negated(text, start) or bool(_EXCEPT.search(head))


def _ordinary(name: str) -> bool:
    """A NetBox name that is also an English word ("Shared", "Admin"); a
    lowercase choice value ("active") is matched in any case."""
    return name.isalpha() and not name.islower()


def _set_apart(text: str, start: int, end: int) -> bool:
    before, after = text[max(0, start - 2) : start], text[end : end + 2]
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start].strip()
    return (
        (any(c in before for c in "*`|") and any(c in after for c in "*`|"))
        or head in ("-", "*", "+", "")
        or bool(re.fullmatch(r"\d+[.)]", head))
    )


def _given(text: str, names: Sequence[str], aliases: Aliases | None = None) -> set[str]:
    return {m.name for m in mentions(text, names, aliases) if not m.negated}


# ------------------------------------------------------------------- counts

_STOP = frozenset(
    [
        "how",
        "many",
        "much",
        "which",
        "what",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "the",
        "a",
        "an",
        "of",
        "in",
        "at",
        "on",
        "to",
        "for",
        "by",
        "there",
        "their",
        "its",
        "it",
        "with",
        "from",
        "and",
        "or",
        "any",
        "all",
        "every",
        "each",
        "have",
        "has",
        "had",
        "be",
        "been",
        "this",
        "that",
        "those",
        "these",
        "give",
        "name",
        "list",
        "show",
        "me",
        "please",
        "currently",
        "total",
        "number",
        "count",
        "site",
        "sites",
        "made",
        "netbox",
    ]
)
_ALTERNATIVE = re.compile(
    r"(?<![\w.\-/])(\d+)\s*(?:or|to|and|-|\u2013)\s*(?:maybe\s+|perhaps\s+)?(\d+)(?![\w\-/.])"
)


def _qualifiers(question: str, noun: str) -> set[str]:
    """The words a question adds to its noun ("offline", "tenant"): an answer's
    number that carries one of them is the answer, a bare total is context."""
    words = set()
    noun_words = {singular(w) for w in noun.split()}
    for token in tokens(question):
        word = token.text.lower()
        if (
            word in _STOP
            or singular(word) in noun_words
            or singular(word) in OBJECT_NOUNS
            or not word.isalpha()
            or token.text[0].isupper()
        ):
            continue
        words.add(word)
    return words


def _clause_after(text: str, number: Number) -> str:
    tail = text[number.end : number.end + 120]
    return re.split(r"[,;.\n()]|\bbut\b|\bof\s+the\b", tail, maxsplit=1)[0].lower()


def count_given(
    answer: str, question: str = "", noun: str = "", skip_names: Sequence[str] = ()
) -> list[int] | None:
    """The counts the answer gives as its answer: the number bound to the
    question's noun (the one carrying the question's qualifier when the
    answer also gives a whole), a table's or list's total, a list's length,
    0 for "there are none"; None when it gives no count. More than one value
    means the answer hedges between candidates."""
    text = plain(answer)
    noun = singular(noun) if noun else question_noun(question)
    blocks = shape(text)
    skip = list(blocks.numbering)
    skip += [(m.start, m.end) for m in mentions(text, skip_names)]
    nouns = (noun, *OBJECT_NOUNS) if noun and noun not in OBJECT_NOUNS else OBJECT_NOUNS
    asked = {n.value for n in numbers(question)} if question else set()
    found = [
        n
        for n in numbers(text, nouns, skip)
        if not n.context and not n.percent and not (n.value in asked and n.noun != noun)
    ]
    in_rows = [n for n in found if any(r.start <= n.start < r.end for r in blocks.rows)]
    in_items = [n for n in found if any(i.start <= n.start < i.end for i in blocks.items)]
    found = [n for n in found if n not in in_rows]
    prose = [n for n in found if n not in in_items] or found
    totals = [n for n in prose if n.total]
    if totals:
        return sorted({int(n.value) for n in totals})
    wanted = _qualifiers(question, noun)
    bound = [n for n in prose if noun and n.noun == noun]
    subs = [n for n in prose if n.subcount and not n.noun]
    candidates = bound + subs
    if wanted and candidates:
        qualified = [
            n for n in candidates if wanted & set(re.findall(r"[a-z]+", _clause_after(text, n)))
        ]
        candidates = qualified or (bound or subs)
    elif bound:
        candidates = bound
    if not candidates:
        candidates = [n for n in prose if not n.noun or not noun or n.noun == noun]
    values = {int(n.value) for n in candidates if n.integer is not None}
    for m in _ALTERNATIVE.finditer(text):
        pair = {int(m.group(1)), int(m.group(2))}
        if pair & values:
            values |= pair
    if values:
        return sorted(values)
    if blocks.items or blocks.rows:
        return [len(blocks.items) or len(blocks.rows)]
    if says_none(text):
        return [0]
    return None


def score_count(answer: str, expected: int, question: str = "", noun: str = "") -> Score:
    """Right when the one count the answer gives is the truth."""
    given = count_given(answer, question, noun)
    if given is None:
        return Score(False, "no count in the answer")
    if len(given) > 1:
        return Score(False, f"gives {' and '.join(map(str, given))}, not one count")
    if given[0] != expected:
        return Score(False, f"says {given[0]}, the truth is {expected}")
    return Score(True, f"says {expected}")


# ------------------------------------------------------- lists and values


def score_list(
    answer: str,
    expected: Sequence[str],
    universe: Sequence[str],
    question: str = "",
    aliases: Aliases | None = None,
) -> Score:
    """Right when every object of the truth is named and no other object of the
    asked kind is (the site in a device list is not an extra)."""
    truth = list(dict.fromkeys(expected))
    if not truth:
        return score_absence(answer, universe, question, aliases)
    every = [*truth, *universe]
    given = _given(answer, every, aliases) - _given(question, every, aliases)
    truth_keys = {key(t) for t in truth}
    right = {g for g in given if key(g) in truth_keys}
    wrong = sorted(g for g in given if key(g) not in truth_keys)
    missing = sorted(t for t in truth if t not in right and key(t) not in {key(r) for r in right})
    precision = len(right) / len(given) if given else 0.0
    recall = (len(truth) - len(missing)) / len(truth)
    if wrong:
        return Score(False, f"names {', '.join(wrong)}, not in the truth", precision, recall)
    if missing:
        return Score(False, f"misses {', '.join(missing)}", precision, recall)
    return Score(True, f"all {len(truth)} named", precision, recall)


def score_value(
    answer: str,
    expected: str,
    universe: Sequence[str],
    question: str = "",
    aliases: Aliases | None = None,
) -> Score:
    """Right when the value is asserted (not negated) and no other value it
    could have been is."""
    every = [expected, *universe]
    asked = _given(question, every, aliases) if question else set()
    found = [m for m in mentions(answer, every, aliases) if m.name not in asked]
    said = {m.name for m in found if not m.negated}
    others = sorted(s for s in said if key(s) != key(expected))
    if others:
        return Score(False, f"says {', '.join(others)}, the truth is {expected}")
    if not said:
        if any(key(m.name) == key(expected) for m in found):
            return Score(False, f"denies {expected}")
        return Score(False, f"does not say {expected}")
    return Score(True, f"says {expected}")


# ----------------------------------------------------------------- yes or no

_LEAD = re.compile(
    r"^\W*(yes|no|yep|nope|correct|true|false)\b(?!\s+[a-z]+\s+(?:are|is|have|has)\b)", re.I
)
_NOT_ALL = re.compile(
    r"\bnot\s+(?:all|every|everything|each)\b|\b(?:isn't|aren't|doesn't|don't)\s+all\b"
    r"|\bsome\s+(?:\w+\s+){0,3}?(?:are|is|do|does|have|has)\s*(?:not|n't)\b"
    r"|\b(?:one|two|three|\d+)\s+(?:\w+\s+){0,3}?(?:is|are|does|do|has|have)\s*(?:not|n't)\b",
    re.I,
)
_ALL = re.compile(r"\b(?:all|every|each|both)\b", re.I)
_NO_EXCEPTION = re.compile(
    r"\b(?:no|none\s+of\s+(?:them|the\s+\w+))\s+(?:\w+\s+){0,3}?(?:is|are|were|lack|lacks|has|have"
    r"|without|missing|exceptions?)\b|\bno\s+(?:exceptions?|inactive|offline)\b"
    r"|\bnone\s+(?:are|is|lack|of)\b",
    re.I,
)


def verdict(answer: str) -> bool | None:
    """The answer's yes or no: a leading "Yes"/"No", else "not all"/"some are
    not" (no), "all ... are" or "there are no exceptions" (yes)."""
    text = plain(answer).strip()
    lead = _LEAD.match(text)
    if lead:
        return lead.group(1).lower() in ("yes", "yep", "correct", "true")
    if _NOT_ALL.search(text):
        return False
    if _NO_EXCEPTION.search(text):
        return True
    all_at = _ALL.search(text)
    if all_at and not NEGATOR.search(text[clause_start(text, all_at.start()) : all_at.start()]):
        return True
    return None


def score_boolean(
    answer: str,
    expected: dict[str, Any],
    universe: Sequence[str],
    question: str = "",
    aliases: Aliases | None = None,
) -> Score:
    """The yes/no and every exception, and no object named as an exception
    that is not one: an object named in a clause that affirms the asked
    property ("sw01 and rtr01 are active") is not named as an exception, and
    a "yes" that names one ("Yes, except sw03") contradicts itself. When the
    question's scope is empty (`"empty": true`, only from a user's questions
    file: the built ones avoid it), "there are none" is right too, naming no
    object of the asked kind; any other answer is read by its yes or no."""
    text = plain(answer)
    if expected.get("empty") and says_none(text):
        absent = score_absence(answer, universe, question, aliases)
        if not absent.correct:
            return absent
        return Score(True, "says there is none (nothing is in the question's scope)")
    said = verdict(text)
    if said is None:
        return Score(False, "neither yes nor no")
    if said != bool(expected["yes"]):
        return Score(False, f"says {'yes' if said else 'no'}, the truth is the other")
    exceptions = list(expected.get("exceptions") or [])
    keys = {key(e) for e in exceptions}
    wanted = _qualifiers(question, question_noun(question)) - {"not", "no", "any"}
    named = [
        m
        for m in mentions(answer, [*exceptions, *universe], aliases)
        if key(m.name) not in _asked(question)
    ]
    as_exception = set()
    for m in named:
        low = clause_start(text, m.start)
        high = re.search(r"[,;.\n]|\bbut\b|$", text[m.end :])
        clause = text[low : m.end + (high.start() if high else 0)]
        affirms = (
            wanted
            and any(re.search(rf"\b{re.escape(w)}\b", clause, re.I) for w in wanted)
            and not NEGATOR.search(clause.replace(m.name, ""))
        )
        if not affirms:
            as_exception.add(m.name)
    missing = sorted(e for e in exceptions if e not in {m.name for m in named})
    if missing:
        return Score(False, f"does not name {', '.join(missing)}")
    if said:  # "yes" with a name set apart as an exception says no
        extra = sorted({m.name for m in named if key(m.name) not in keys and _excepted(text, m)})
    else:
        extra = sorted(n for n in as_exception if key(n) not in keys)
    if extra:
        return Score(False, f"names {', '.join(extra)} as exceptions, which are not")
    return Score(True, "right verdict" + (", exceptions named" if exceptions else ""))


def _excepted(text: str, mention: Mention) -> bool:
    """The mention is set apart as an exception: "except sw03", "sw03 is
    not active", "but sw03 is offline"."""
    low = clause_start(text, mention.start)
    high = re.search(r"[,;.\n]|$", text[mention.end :])
    clause = text[low : mention.end + (high.start() if high else 0)]
    return (
        mention.negated
        or bool(NEGATOR.search(clause.replace(text[mention.start : mention.end], "")))
        or bool(re.search(r"\bbut\W*$", text[max(0, low - 8) : low]))
    )


def _asked(question: str) -> set[str]:
    return {t.key for t in tokens(question)} | {key(question)}


# ------------------------------------------------------------------ absence


def score_absence(
    answer: str,
    universe: Sequence[str] = (),
    question: str = "",
    aliases: Aliases | None = None,
) -> Score:
    """Right when the answer says there is none and names no object of the
    asked kind as the answer ("Tenant Initech has VLAN 999" is wrong even when
    the question's kind has no universe)."""
    text = plain(answer)
    asked_noun = question_noun(question)
    in_question = _asked(question)
    named = sorted(_given(answer, universe, aliases) - _given(question, universe, aliases))
    named += [
        i.name
        for i in introduced(text)
        if asked_noun
        and i.noun == asked_noun
        and key(i.name) not in in_question
        and not negated(text, i.start)
        and i.name not in named
    ]
    if not says_none(text):
        return Score(False, "answers as if there were one")
    if named:
        return Score(False, f"names {', '.join(named)} as the answer")
    return Score(True, "says there is none")


# -------------------------------------------------------------------- entry


def score(
    kind: str,
    answer: str,
    expected: Any,
    universe: Sequence[str] = (),
    question: str = "",
    noun: str = "",
    aliases: Aliases | None = None,
) -> Score:
    """The score of `answer` to a question of answer type `kind`; `aliases`
    gives the other names (slug, display form, `#<id>`) of the names in
    `expected` and `universe`."""
    if not answer.strip():
        return Score(False, "no answer", declined=True)
    names = [*universe, *(expected if isinstance(expected, list) else [])]
    if isinstance(expected, str):
        names.append(expected)
    substance = claims_of(answer, given=question) + len(_given(answer, names, aliases))
    if declined(answer, substance):
        return Score(False, "declined to answer", declined=True)
    if kind == "count":
        return score_count(answer, int(expected), question, noun)
    if kind == "list":
        return score_list(answer, list(expected or []), universe, question, aliases)
    if kind == "value":
        return score_value(answer, str(expected), universe, question, aliases)
    if kind == "boolean":
        return score_boolean(answer, dict(expected), universe, question, aliases)
    if kind == "absence":
        return score_absence(answer, universe, question, aliases)
    return Score(None, "explanations are scored only by a judge (--judge MODEL)")


def score_question(question: Question, answer: str) -> Score:
    """The score of `answer` to `question`, with everything the question knows."""
    return score(
        question.kind,
        answer,
        question.expected,
        question.universe,
        question.text,
        noun=question.noun,
        aliases=question.aliases,
    )


# -------------------------------------------------------------------- judge


def judge_prompt(question: str, reference: str, answer: str) -> str:
    """What an LLM judge is asked about an explanation: contradiction, not completeness."""
    return (
        "You grade an answer against a reference that is true. Reply with one word: "
        "CORRECT if the answer states nothing that contradicts the reference and answers "
        "the question, WRONG if it contradicts the reference anywhere (a wrong number, "
        "name or state) or does not answer.\n\n"
        f"Question: {question}\nReference: {reference}\nAnswer: {answer}\n\nGrade:"
    )


_VERDICT = re.compile(
    r"\b(not\s+(?:correct|right)|incorrect|correct|wrong|right|contradicts|false|true)\b", re.I
)
_VERDICT_LINE = re.compile(r"^\W*(?:final\s+)?(?:verdict|grade|answer|result)\W*[:\-]", re.I)


def judge_verdict(reply: str) -> Score:
    """A judge's reply read however it is dressed (INCORRECT, **CORRECT**,
    "Verdict: correct", a reasoning paragraph ending in WRONG). A reply with
    no verdict is a judge failure, scored wrong: it never leaves the
    denominator."""
    text = re.sub(r"<think>.*?</think>", " ", reply, flags=re.S | re.I)
    text = plain(text)
    lines = [line for line in text.splitlines() if line.strip()]
    labelled = [line for line in lines if _VERDICT_LINE.match(line)]
    pick = None
    for line in labelled or lines[:1]:
        found = _VERDICT.findall(line)
        if found:
            pick = found[0]
            break
    if pick is None:
        found = _VERDICT.findall(text)
        pick = found[-1] if found else None
    if pick is None:
        return Score(False, "judge gave no verdict (counted wrong)")
    word = " ".join(pick.lower().split())
    if word in ("correct", "right", "true"):
        return Score(True, "judge: correct")
    return Score(False, "judge: wrong")
