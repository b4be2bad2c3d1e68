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
from dataclasses import asdict, dataclass, replace
from typing import Any

from netbox_chat.claims.grounding import claims_of
from netbox_chat.claims.read import STATUS_WORDS, read, subject_of
from netbox_chat.claims.reader import (
    ID_REF,
    NEGATOR,
    OBJECT_NOUNS,
    Number,
    clause_start,
    declined,
    identifier_like,
    introduced,
    is_address,
    joins,
    key,
    negated,
    none_spans,
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
    credit: str = ""
    """For a right answer, the words of it that earned the credit (the sentence
    stating the count, the value, the names, the verdict), so that a reader can
    find credit that looks undeserved (`--show right`)."""

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
        written = text[start:end]
        if (
            _ordinary(name)
            and key(written) == key(name)  # a slug ("ncsu-065" for MDF) is no ordinary word
            and written != name
            and not _set_apart(text, start, end)
        ):
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


_TOTAL_AFTER = re.compile(r"\s*(?:in\s+all|altogether|overall|in\s+total)\b", re.I)


def _aside(text: str, number: Number) -> bool:
    """The number stands in parentheses: a note on the answer, not the answer."""
    return text.rfind("(", 0, number.start) > text.rfind(")", 0, number.start)


def _none_of(text: str, noun: str) -> bool:
    """The answer says there is none of the asked noun ("not a single cable",
    "no cables", "zero interfaces"): a count of 0 stated of the asked set."""
    last = re.escape(noun.split()[-1])
    words = r"(?:[\w\-]+\s+){0,2}"
    return bool(
        re.search(
            rf"\b(?:not\s+(?:a\s+single|one|any)|no|zero|none\s+of\s+the)\s+{words}{last}(?:e?s)?\b",
            text,
            re.I,
        )
    )


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
    # "14 devices (of 72 in total)": a total in parentheses is context; "52 in all:" a total
    totals = [
        n for n in prose if (n.total or _TOTAL_AFTER.match(text, n.end)) and not _aside(text, n)
    ]
    if totals:
        return sorted({int(n.value) for n in totals})
    wanted = _qualifiers(question, noun)
    bound = [n for n in prose if noun and n.noun == noun]
    if not bound and noun and _none_of(text, noun):
        return [0]  # "4 VLANs but not a single cable"
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
    wrong += invented(
        answer, [*every, *(a for n in every for a in (aliases or {}).get(n, ()))], question
    )
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
    noun: str = "",
) -> Score:
    """Right when the value is asserted (not negated) of the asked object and no
    other value it could have been is ("PP:B117 runs Cisco IOS." does not say
    which platform dmi01-albany-rtr01 runs)."""
    every = [expected, *universe]
    asked = _given(question, every, aliases) if question else set()
    found = [m for m in mentions(answer, every, aliases) if m.name not in asked]
    found += _in_lower_case(answer, expected, noun, found)
    said = {m.name for m in found if not m.negated}
    others = sorted(s for s in said if key(s) != key(expected))
    if others:
        return Score(False, f"says {', '.join(others)}, the truth is {expected}")
    if not said:
        if any(key(m.name) == key(expected) for m in found):
            return Score(False, f"denies {expected}")
        return Score(False, f"does not say {expected}")
    values = frozenset(key(v) for v in every) | {
        key(a) for v in every for a in (aliases or {}).get(v, ())
    }
    right = [m for m in found if not m.negated]
    subjects = [subject_of(answer, m.start, m.end, question, values) for m in right]
    if all(subjects):
        return Score(False, f"says {expected} of {subjects[0]}, not of what was asked")
    return Score(True, f"says {expected}")


def _in_lower_case(
    answer: str, expected: str, noun: str, found: Sequence[Mention]
) -> list[Mention]:
    """A value that is an ordinary word written in another case beside the
    asked noun ("the charlie VRF" for Charlie): the noun says it is the name."""
    if not noun or not _ordinary(expected) or any(key(m.name) == key(expected) for m in found):
        return []
    last = re.escape(noun.split()[-1])
    name = re.escape(expected)
    pattern = rf"\b{last}\s+({name})\b|\b({name})\s+{last}\b"
    return [
        Mention(
            expected, m.start(m.lastindex or 1), m.end(m.lastindex or 1), _denied(answer, m.start())
        )
        for m in re.finditer(pattern, answer, re.I)
    ]


def _names_something(word: str) -> bool:
    return identifier_like(word) or is_address(word)


_PIECE = re.compile(r"[^,;\n]+")
_JOINER = re.compile(r"\s+(?:and|or|as\s+well\s+as|plus)\s+", re.I)


def invented(answer: str, known: Sequence[str], question: str = "") -> list[str]:
    """Names given as members of a list that NetBox does not hold: a list
    item, or one piece of a run of names beside a known one ("sw01, sw02
    and ncsu117-distswitch2"), that is a single name-like word (letters and
    digits, dmi01-x-sw9) and no known name or other name, nor a word of the
    question. A wrong extra whatever the universe: the universe holds only
    objects that exist."""
    text = plain(answer)
    for known_at in mentions(text, known):  # a known name with a comma in it is one name
        text = (
            text[: known_at.start]
            + "\u2063" * (known_at.end - known_at.start)
            + text[known_at.end :]
        )
    keys = {key(k) for k in known} | {t.key for t in tokens(question)}
    found: list[str] = []

    def check(piece: str) -> None:
        word = piece.strip().strip("`*_'\"").rstrip(".:!?").strip("`*_'\"")
        if (
            word
            and len(tokens(word)) == 1
            and tokens(word)[0].text == word
            and identifier_like(word)
            and key(word) not in keys
            and word not in found
        ):
            found.append(word)

    blocks = shape(text)
    for item in blocks.items:
        body = _BULLET_HEAD.sub("", text[item.start : item.end])
        check(re.split(r"\s[-\u2013\u2014(:]|\s\(|\s+\(|[,;(]", body, maxsplit=1)[0])
    for sentence in re.findall(r"[^.!?\n]+", text):
        if "\u2063" not in sentence:  # no known name: not a run of names
            continue
        tail = sentence.split(":", 1)[-1]
        for piece in _PIECE.findall(tail):
            for part in _JOINER.split(piece):
                check(re.sub(r"^\s*(?:they\s+are|these\s+are|and|or)\s+", "", part, flags=re.I))
    return found


_BULLET_HEAD = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")


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
        # "every VM in C lacks a tenant": all of them, without what was asked
        return not _PRIVATIVE.search(_clause(text, all_at.start(), all_at.end()))
    return None


def _quantified(answer: str, question: str) -> bool | None:
    """The yes or no a status said of the whole set gives to a question that
    asks one status of every object, read by the claims reader (claims.read's
    quantifier facts): to "Are all devices at MDF active?", "None of the
    devices are active" and "All devices are offline" say no, "No device is
    offline" says yes. None when the answer says no such thing, or a Yes or
    No leads it (verdict reads it then)."""
    asked = {t.text.lower() for t in tokens(question)} & STATUS_WORDS
    if len(asked) != 1:
        return None
    facts = read(answer, question)
    leads = [f.start for f in facts if f.kind == "yesno"]
    for fact in facts:
        if fact.kind != "quantifier" or fact.value not in STATUS_WORDS:
            continue
        # a Yes or No that leads the answer is its verdict ("No: all are active")
        if leads and leads[0] != fact.start:
            return None
        return fact.every == (fact.value in asked)
    return None


_PRIVATIVE = re.compile(
    r"\b(?:lacks?|lacking|without|missing|(?:has|have)\s+no|(?:is|are)\s+not|isn't|aren't"
    r"|un[a-z]+ed|(?:is|are)\s+empty)\b",
    re.I,
)
"""Words that deny the asked property of the whole set ("all untenanted")."""


def _clause(text: str, start: int, end: int) -> str:
    """The clause around text[start:end], up to the next comma, colon or full stop."""
    high = re.search(r"[,;:.\n]|$", text[end:])
    return text[clause_start(text, start) : end + (high.start() if high else 0)]


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
    said = _quantified(answer, question)
    if said is None:
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
        known = [*exceptions, *universe, *(a for n in universe for a in (aliases or {}).get(n, ()))]
        extra += invented(answer, known, question)
    if extra:
        return Score(False, f"names {', '.join(extra)} as exceptions, which are not")
    return Score(True, "right verdict" + (", exceptions named" if exceptions else ""))


_SET_APART_BY = re.compile(
    r"\b(?:but|although|though|however|except|apart\s+from|other\s+than)\W*$", re.I
)


def _excepted(text: str, mention: Mention) -> bool:
    """The mention is set apart as an exception: "except sw03", "sw03 is
    not active", "but sw03 is offline"."""
    low = clause_start(text, mention.start)
    high = re.search(r"[,;.\n]|$", text[mention.end :])
    clause = text[low : mention.end + (high.start() if high else 0)]
    return (
        mention.negated
        or bool(NEGATOR.search(clause.replace(text[mention.start : mention.end], "")))
        or bool(_SET_APART_BY.search(text[max(0, low - 16) : low]))
    )


def _asked(question: str) -> set[str]:
    return {t.key for t in tokens(question)} | {key(question)}


# ------------------------------------------------------------------ absence


_ALL_WITHOUT = re.compile(
    r"\b(?:are|is)\s+all\s+(?:un[a-z]+ed|empty)\b|\b(?:all|every)\b[^.;\n]{0,60}?"
    r"\b(?:are|is)\s+(?:un[a-z]+ed|empty)\b",
    re.I,
)
"""An absence stated without a negation word: "the VMs in C1 are all untenanted"."""


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
    if not (says_none(text) or _ALL_WITHOUT.search(text)):
        return Score(False, "answers as if there were one")
    if named:
        return Score(False, f"names {', '.join(named)} as the answer")
    return Score(True, "says there is none")


# ---------------------------------------------------------------- non-answers

_GIVE_UP = re.compile(
    r"\b(?:could\s*not|couldn't|can\s*not|cannot|can't|(?:was|were)\s+unable\s+to|unable\s+to"
    r"|(?:was|were|am|is|are)\s*(?:not|n't)\s+able\s+to|failed\s+to)\s+(?:\w+\s+)?"
    r"(?:find|locate|retrieve|get|obtain|look|access|see|determine|answer|identify|confirm)\b"
    r"|\b(?:tools?|api|netbox|search(?:es)?|quer(?:y|ies)|lookups?|calls?)\b[^.!?\n]{0,40}?"
    r"\b(?:did|does|do)\s*(?:not|n't)\s+(?:return|show|give|provide|include|contain|have|list)\b"
    r"|\b(?:returned|found|got|yielded|gave|produced)\s+(?:me\s+)?nothing\b"
    r"|\bnothing\s+(?:useful\s+|relevant\s+)?(?:was\s+|came\s+)?(?:returned|found|back)\b"
    r"|\bno\s+(?:results?|matches|data|information|records?|entries|output)\b"
    r"|\bcame\s+back\s+empty\b|\bnot\s+available\s+to\s+me\b"
    r"|\b(?:do\s*not|don't|does\s*not|doesn't)\s+have\s+(?:access|that|this|the|enough|any)\b",
    re.I,
)
"""What a give-up says, in many words: the search failed, not that the asked
set is empty ("I could not find that", "the tools did not return it")."""


def gives_up(
    answer: str, question: str, noun: str, names: Sequence[str] = (), aliases: Aliases | None = None
) -> bool:
    """A non-answer in any wording: every sentence either says the search
    failed without saying it of the asked set (no noun of the question: "I
    could not find that in NetBox" is a give-up, "I could not find any
    circuits from Lumen for Initech" an answer), or says nothing (no number,
    no name, no yes or no). "None" and "0" are credited only when stated of
    the asked set."""
    text = plain(answer)
    nouns = {singular(w) for w in (noun or question_noun(question)).split()[-1:]} | {"such"}
    nouns |= {  # the question's own object nouns, names and numbers ("any VLAN 999")
        singular(t.text.lower())
        for t in tokens(question)
        if singular(t.text.lower()) in OBJECT_NOUNS or _names_something(t.text) or t.text.isdigit()
    }
    gave_up = False
    for m in re.finditer(r"[^.!?\n]+", text):
        sentence = m.group()
        said = {singular(t.text.lower()) for t in tokens(sentence)}
        if _GIVE_UP.search(sentence) and not nouns & said:
            gave_up = True
        elif _says_something(sentence, names, aliases):
            return False
    return gave_up


def _says_something(sentence: str, names: Sequence[str], aliases: Aliases | None) -> bool:
    return bool(
        numbers(sentence)
        or _given(sentence, names, aliases)
        or verdict(sentence) is not None
        or says_none(sentence)
        or any(identifier_like(t.text) or is_address(t.text) for t in tokens(sentence))
    )


def asks_back(answer: str, question: str) -> bool:
    """A question back: the answer repeats the question (or four words or more
    of it, an echo: a name the question holds is an answer, "DM-Akron" to
    "Which site is rack DM-Akron-R1 in?"), or every sentence of it is a question."""
    body = key(plain(answer))
    if len(tokens(answer)) >= 4 and f"-{body}-" in f"-{key(question)}-":
        return True
    sentences = [
        s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", plain(answer).strip()) if s.strip()
    ]
    return bool(sentences) and all(s.endswith("?") for s in sentences)


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
    unscored = kind == "explanation"  # a judge scores these; a non-answer is declined either way
    if not answer.strip():
        return Score(None if unscored else False, "no answer", declined=True)
    names = [*universe, *(expected if isinstance(expected, list) else [])]
    if isinstance(expected, str):
        names.append(expected)
    substance = claims_of(answer, given=question) + len(_given(answer, names, aliases))
    if declined(answer, substance) or gives_up(answer, question, noun, names, aliases):
        return Score(None if unscored else False, "declined to answer", declined=True)
    if asks_back(answer, question):
        return Score(None if unscored else False, "asks the question back", declined=True)
    if kind == "count":
        verdict = score_count(answer, int(expected), question, noun)
    elif kind == "list":
        verdict = score_list(answer, list(expected or []), universe, question, aliases)
    elif kind == "value":
        verdict = score_value(answer, str(expected), universe, question, aliases, noun)
    elif kind == "boolean":
        verdict = score_boolean(answer, dict(expected), universe, question, aliases)
    elif kind == "absence":
        verdict = score_absence(answer, universe, question, aliases)
    else:
        return Score(None, "explanations are scored only by a judge (--judge MODEL)")
    if verdict.correct:
        return replace(verdict, credit=earned(answer, kind, expected, aliases))
    return verdict


def earned(answer: str, kind: str, expected: Any, aliases: Aliases | None = None) -> str:
    """The sentences of a right answer that hold what earned it: the truth's
    names, the count, the "none", the verdict (the first sentence)."""
    text = plain(answer)
    truth = expected if isinstance(expected, list) else []
    if isinstance(expected, dict):
        truth = list(expected.get("exceptions") or [])
    if isinstance(expected, str):
        truth = [expected]
    spans = [(m.start, m.end) for m in mentions(text, truth, aliases) if not m.negated]
    if kind == "count":
        spans += [(n.start, n.end) for n in numbers(text) if n.value == expected]
    if kind in ("count", "absence") and not spans:
        spans += none_spans(text)
    if kind == "boolean" or not spans:
        spans.insert(0, (0, 0))
    found: list[str] = []
    for start, _ in spans:
        low = max(text.rfind(c, 0, start) for c in ".!?\n") + 1
        high = min((i for i in (text.find(c, start) for c in ".!?\n") if i >= 0), default=len(text))
        sentence = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text[low : high + 1].split()))
        if sentence and sentence not in found:
            found.append(sentence)
    line = " … ".join(found)
    return line if len(line) <= 160 else line[:159].rstrip() + "…"


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
        return Score(
            True, "judge: correct", credit="the judge found nothing that contradicts the reference"
        )
    return Score(False, "judge: wrong")
