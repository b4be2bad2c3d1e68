"""The grounding check: each claim of an answer traced to what NetBox returned.

A claim is *grounded* when the evidence (the tool results the model had) holds
it, *derived* when it is a number equal to a result's `count`, to the rows of a
result (or of its rows sharing one value: "3 of them are offline"), or to the
number of objects the answer itself lists, and *ungrounded* otherwise. The
forms real models were recorded inventing are what it looks for: a device name
beside real ones, a count taken from the page, a real device given another
device's site or status, a fact with no tool call at all
(docs/grounding.md). No model, no network: a pass over the evidence builds
an index, a pass over the answer reads it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from netbox_chat.claims.index import IDENTITY_FIELDS as _IDENTITY
from netbox_chat.claims.index import Index
from netbox_chat.claims.read import read
from netbox_chat.claims.reader import (
    ID_REF,
    OBJECT_NOUNS,
    TOKEN,
    Segment,
    Token,
    by_position,
    identifier_like,
    introduced,
    is_address,
    joins,
    key,
    negated,
    none_spans,
    noun_after,
    numbers,
    numbers_outside,
    plain_answer,
    shape,
    tokens,
)
from netbox_chat.claims.verify import Verdict, verify

KINDS = ("name", "number", "address", "value")

# NetBox's status choices (https://github.com/netbox-community/netbox/tree/main/netbox/*/choices.py):
# a device's and an IP address's, which eval's questions offer as the values a
# wrong answer would give, and the other models' (racks, circuits, power
# feeds, cables, clusters). "dhcp" and "slaac" are left out of the words read
# as a status claim: they name protocols ("the DHCP server") as often.
DEVICE_STATUSES = (
    "active",
    "offline",
    "planned",
    "staged",
    "failed",
    "inventory",
    "decommissioning",
)
IP_STATUSES = ("active", "reserved", "deprecated", "dhcp", "slaac")
STATUSES = (
    frozenset(DEVICE_STATUSES)
    | frozenset(IP_STATUSES) - {"dhcp", "slaac"}
    | frozenset(["available", "provisioning", "deprovisioning", "connected", "decommissioned"])
)
_EXISTENCE_CONTEXT = re.compile(
    r"\b(?:no|not|n't|never|none|couldn't|cannot|unable|nothing|doesn't|does not)\b", re.IGNORECASE
)


@dataclass
class Claim:
    """One claim of the answer as the screen and the JSON show it: `text` as
    written, its `kind`, its `status` (verified, ungrounded: not in NetBox or
    contradicted by the record, unchecked: not tied to a record), the index
    of the call `source` it rests on, where it stands in the answer (`start`,
    `end`) so the screen can mark it, the object it is about when known
    (`subject`) and one short line on why (`reason`, for /show).

    Not frozen: the check builds one per name, number and value (thousands
    an answer), and a frozen dataclass's build, a guarded set per field,
    costs four times a plain one's. Nothing changes a claim once built."""

    text: str
    kind: str
    status: str = "ungrounded"
    source: int | None = None
    start: int = 0
    end: int = 0
    subject: str | None = None
    reason: str = ""

    def as_json(self) -> dict[str, str]:
        return {"text": self.text, "kind": self.kind}


@dataclass(frozen=True)
class Grounding:
    """The check's verdict on one answer. `failed` is the one line saying the
    check itself failed (its claims are then all unchecked)."""

    claims: int
    ungrounded: list[Claim]
    unchecked: list[Claim]
    without_netbox: bool
    all: list[Claim] = field(default_factory=list)
    failed: str | None = None

    @property
    def quiet(self) -> bool:
        """Nothing the model must correct: no claim NetBox contradicts or
        lacks, and NetBox was asked (unchecked claims are not retried)."""
        return not self.ungrounded and not self.without_netbox

    def as_json(self) -> dict[str, Any]:
        return {
            "claims": self.claims,
            "ungrounded": [c.as_json() for c in self.ungrounded],
            "without_netbox": self.without_netbox,
            "unchecked": [c.as_json() for c in self.unchecked],
        }


# ------------------------------------------------------------------ the check


@dataclass
class _Reading:
    """The answer being read: its claims so far and the spans they took (a
    number inside a name or an address is not read again)."""

    text: str
    claims: list[Claim] = field(default_factory=list)
    mask: bytearray = field(default_factory=bytearray)

    def __post_init__(self) -> None:
        self.mask = bytearray(len(self.text) + 1)

    def free(self, start: int, end: int) -> bool:
        return self.mask.find(1, start, end) < 0  # no copy of the span

    def take(self, start: int, end: int) -> None:
        self.mask[start:end] = b"\x01" * (end - start)

    def add(self, claim: Claim) -> None:
        self.claims.append(claim)
        self.mask[claim.start : claim.end] = b"\x01" * (claim.end - claim.start)


def check(answer: str, calls: Sequence[Any] | Index, *, given: str = "") -> Grounding:
    """The claims of `answer` against `calls` (the turn's tool calls as `Call`s,
    or bare JSON-decoded payloads; or their index, `Index.of`, when one
    answer is checked piece by piece as it streams). `given` is what the
    operator wrote this turn: a name or number the operator gave is not a
    claim about NetBox (unless nothing was looked up at all).

    Never raises: the check is advice about an answer already given, so any
    error inside it becomes a verdict whose claims are all unchecked and
    whose `failed` line says so (the turn stays answered and kept)."""
    try:
        return _check(answer, calls, given)
    except Exception as exc:  # whatever broke, the answer stands
        return _failed(answer, exc)


def _failed(answer: str, exc: Exception) -> Grounding:
    """The verdict when the check itself failed: what looks like a name or an
    address in the answer is listed unchecked (bounded, and itself guarded)."""
    line = f"the grounding check failed ({type(exc).__name__}: {str(exc)[:120]})"
    claims: list[Claim] = []
    try:
        for m in TOKEN.finditer(answer[:200_000]):
            if len(claims) >= 200:
                break
            if identifier_like(m.group()) or is_address(m.group()):
                claims.append(Claim(m.group(), "name", "unchecked", None, m.start(), m.end()))
    except Exception:  # the line alone then
        claims = []
    unique = list({c.text: c for c in claims}.values())
    return Grounding(len(unique), [], unique, False, claims, line)


def _check(answer: str, calls: Sequence[Any] | Index, given: str) -> Grounding:
    index = calls if isinstance(calls, Index) else Index.of(calls)
    question = given
    if not index.payloads:
        given = ""  # with no tool call, the question's names are stated facts too
    text = plain_answer(answer)
    reading = _Reading(text)
    blocks = shape(text)
    segments = blocks.segments or [Segment(0, len(text), "sentence")]
    given_keys = {t.key for t in tokens(given)} | {key(given)} if given else set()
    given_numbers = {n.value for n in numbers(given)} if given else set()
    absent = none_spans(text)
    toks = tokens(text)

    objects = _addresses(reading, toks, index, given_keys)
    matched = _evidence_names(reading, toks, index)
    _ids(reading, index, given_keys)
    _unknown_names(reading, toks, index, given_keys, _Absence(absent, segments))
    _numbers(reading, blocks, matched, index, given_numbers, absent)
    _values(reading, segments, matched + objects, index)

    claims = _with_facts(reading.claims, verify(read(answer, question), index, question))
    without = index.payloads == 0 and bool(claims)
    if without:
        claims = [Claim(c.text, c.kind, "ungrounded", None, c.start, c.end) for c in claims]
    distinct = {(c.text.lower(), c.kind) for c in claims}
    return Grounding(
        len(distinct), _first(claims, "ungrounded"), _first(claims, "unchecked"), without, claims
    )


def _with_facts(claims: list[Claim], verdicts: Sequence[Verdict]) -> list[Claim]:
    """The claims the token passes found, with each verified fact's verdict: a
    count's replaces the number claim it was read from (the set's `count`
    decides it, not any number of the replies; a number inside a name, or
    the operator's own, is no count), and so does a measure's ("7 U tall":
    that field of that record decides it); the other facts' are added."""
    counted = {v.fact.start: v for v in verdicts if v.fact.kind in _REPLACING}
    replaced = set()
    out = []
    for claim in claims:
        verdict = counted.get(claim.start) if claim.kind == "number" else None
        if verdict is not None:
            replaced.add(claim.start)
            fact = verdict.fact
            if (
                fact.kind == "measure"
                and verdict.status == "unchecked"
                and claim.status == "ungrounded"
            ):
                # no record to tie it to, and no reply holds the number at all
                verdict = Verdict(fact, "ungrounded", None, "no reply holds this number")
            text, end = (claim.text, claim.end) if fact.kind == "count" else (fact.text, fact.end)
            claim = Claim(text, _REPLACING[fact.kind], verdict.status, verdict.source,
                          claim.start, end, fact.subject, verdict.reason)  # fmt: skip
        out.append(claim)
    for verdict in verdicts:
        fact = verdict.fact
        if fact.kind == "count" or fact.start in replaced:
            continue
        kind = "value" if fact.kind in ("has", "field") else _REPLACING.get(fact.kind, fact.kind)
        out.append(Claim(fact.text, kind, verdict.status, verdict.source, fact.start,
                         fact.end, fact.subject, verdict.reason))  # fmt: skip
    return sorted(out, key=lambda c: c.start)


# The facts whose verdict replaces the number claim read at their start, as this kind.
_REPLACING = {"count": "count", "measure": "number"}


def _first(claims: Sequence[Claim], status: str) -> list[Claim]:
    """The claims of one verdict, each text once (a name repeated is one claim)."""
    seen: set[str] = set()
    out = []
    for claim in claims:
        if claim.status == status and claim.text not in seen:
            seen.add(claim.text)
            out.append(claim)
    return out


def _addresses(reading: _Reading, toks: list[Token], index: Index, given: set[str]) -> list[_Match]:
    """Addresses and prefixes (the index holds each with and without its
    length); those that name a record are returned, so a status said of
    them is checked like any object's."""
    records = []
    for token in toks:
        if not is_address(token.text):
            continue
        full = token.text.lower()
        source = index.addresses.get(full, index.addresses.get(full.split("/")[0]))
        if source is None and token.key in given:
            continue
        status = "verified" if source is not None else "ungrounded"
        reading.add(Claim(token.text, "address", status, source, token.start, token.end))
        if source is not None and token.key in index.records:
            records.append(_Match(token.key, token.start, token.end, source))
    return records


class _Match(NamedTuple):
    """A name (or status word, `source` -1) of the answer tied to the call
    that holds it (a tuple: an answer names thousands)."""

    key: str
    start: int
    end: int
    source: int


def _evidence_names(reading: _Reading, toks: list[Token], index: Index) -> list[_Match]:
    """Names of the evidence written in the answer, the longest first: "JBB
    Branch 104" as one name, "Dunder-Mifflin, Inc." across its comma, a slug
    or another case as the name it spells. Most tokens are words of no name:
    one set test each (`Index.starting`) passes them by."""
    matches: list[_Match] = []
    names, prefixes, starting = index.names, index.prefixes, index.starting
    after = 0  # the tokens before it were read as part of a name
    for i, first in enumerate(toks):
        if i < after:
            continue
        if first.key not in starting or not (
            first.key in names or first.key in prefixes or identifier_like(first.text)
        ):
            # the common case, a word of no name: nothing longer can start here
            if "/" in first.text and reading.free(first.start, first.end):
                _slashed(reading, first, index, matches)  # "sw01/sw02": two names
            continue
        if not reading.free(first.start, first.end):
            continue
        found = _longest(reading.text, toks, i, index)
        if found is None:
            _slashed(reading, first, index, matches)
            continue
        joined, last, source = found
        start, end = first.start, toks[last].end
        matches.append(by_position(_Match, (joined, start, end, source)))
        _name_claim(reading, reading.text[start:end], joined, start, index, source)
        after = last + 1
    return matches


def _longest(text: str, toks: list[Token], i: int, index: Index) -> tuple[str, int, int] | None:
    """The longest name of the evidence starting at `toks[i]`: its key, the
    index of its last token and the call holding it."""
    first = toks[i]
    if first.key in index.prefixes:
        ends = joins(text, toks, i, index.max_words, index.prefixes)
    else:
        ends = [(first.key, i)]  # no longer name starts so: the token alone, as joins gives it
    for joined, last in reversed(ends):
        if joined.replace("-", "").isdigit():
            continue  # a number, read as one
        source = index.names.get(joined)
        if source is None and last == i:
            source = index.words.get(joined) if identifier_like(first.text) else None
        if source is not None:
            return joined, last, source
    return None


def _slashed(reading: _Reading, token: Token, index: Index, matches: list[_Match]) -> None:
    """A token that is names of the evidence joined by slashes ("sw01/sw02")."""
    parts = token.text.split("/")
    if len(parts) > 1 and all(key(p) in index.names for p in parts):
        at = token.start
        for part in parts:
            matches.append(_Match(key(part), at, at + len(part), index.names[key(part)]))
            _name_claim(reading, part, key(part), at, index)
            at += len(part) + 1


def _name_claim(
    reading: _Reading, text: str, name: str, start: int, index: Index, source: int | None = None
) -> None:
    """A name found in the evidence is a claim when it names an object (not a
    word that happens to be in a description); either way its span is taken."""
    end = start + len(text)
    if name in index.refs or any(map(identifier_like, TOKEN.findall(text))):
        if source is None:
            source = index.names.get(name)
        reading.add(Claim(text, "name", "verified", source, start, end))
    else:
        reading.take(start, end)


def _ids(reading: _Reading, index: Index, given: set[str]) -> None:
    for m in ID_REF.finditer(reading.text):
        if not reading.free(m.start(), m.end()):
            continue
        value = int(m.group(1))
        source = index.ids.get(value)
        if source is None and m.group(1) in given:
            continue
        status = "verified" if source is not None else "ungrounded"
        reading.add(Claim(m.group().strip(), "name", status, source, m.start(), m.end()))


class _Absence:
    """Which segments say something does not exist ("there is no device named
    foo99"): a name there is not claimed to exist. Looked up by bisection,
    so each name costs a logarithm, not a pass over the answer."""

    def __init__(self, absent: Sequence[tuple[int, int]], segments: Sequence[Segment]) -> None:
        self.starts = [s.start for s in segments]
        self.segments = segments
        self.saying = bytearray(len(segments))
        self.any = bool(absent)
        for a, _ in absent:
            at = self._segment(a)
            if at is not None:
                self.saying[at] = 1

    def _segment(self, offset: int) -> int | None:
        at = bisect.bisect_right(self.starts, offset) - 1
        if at >= 0 and offset < self.segments[at].end:
            return at
        return None

    def __call__(self, start: int) -> bool:
        if not self.any:
            return False  # the common answer: nothing said absent, no lookup per name
        at = self._segment(start)
        return at is not None and bool(self.saying[at])


def _unknown_names(
    reading: _Reading,
    toks: list[Token],
    index: Index,
    given: set[str],
    in_absence: _Absence,
) -> None:
    """Names the evidence does not hold: tokens only a name looks like, and
    words introduced by an object noun ("tenant Initech", "VLAN 999")."""
    for item in introduced(reading.text):
        if not reading.free(item.start, item.end):
            continue
        name = item.name
        if item.noun == "vlan" and name.isdigit():
            source = index.vids.get(int(name))
            if source is None and (name in given or in_absence(item.start)):
                continue
            status = "verified" if source is not None else "ungrounded"
            reading.add(Claim(f"VLAN {name}", "name", status, source, item.start, item.end))
            continue
        if name.isdigit():
            continue  # "site 5": an id or a number, read as one below
        if key(name) in given or in_absence(item.start):
            reading.take(item.start, item.end)
            continue
        reading.add(Claim(name, "name", "ungrounded", None, item.start, item.end))
    for token in toks:
        if not identifier_like(token.text) or not reading.free(token.start, token.end):
            continue  # the cached test first: most words are no name
        if token.key in given or in_absence(token.start):
            continue
        reading.add(Claim(token.text, "name", "ungrounded", None, token.start, token.end))


def _numbers(
    reading: _Reading,
    blocks: Any,
    matched: list[_Match],
    index: Index,
    given: set[float],
    absent: list[tuple[int, int]],
) -> None:
    listed = {len(blocks.items), len(blocks.rows)}
    per_group: Counter[int] = Counter()
    seen: set[str] = set()
    for match in matched:
        if match.key in seen:
            continue
        seen.add(match.key)
        groups = {r.group for r in index.records.get(match.key, [])}
        for group in groups:
            per_group[group] += 1
    listed |= set(per_group.values())
    listed.discard(0)
    columns = _Columns(reading.text, blocks)
    for number in numbers_outside(reading.text, tuple(blocks.numbering)):
        if not reading.free(number.start, number.end):
            continue  # inside a name or an address
        if number.value in given:
            continue
        value = number.integer
        source = None
        status = "ungrounded"
        header = columns.header(number.start)
        counts = number.noun or number.subcount or number.total or _counted(header)
        if value is not None and header.strip().lower() == "id":
            # an ID column names objects by their id
            source = index.ids.get(value)
            status = "verified" if source is not None else "ungrounded"
        elif value is not None and value in index.counts:
            status, source = "verified", index.counts[value]
        elif (value is not None and value in listed) or (value == 0 and index.payloads):
            status = "verified"
        elif not counts and number.value in index.numbers:
            status, source = "verified", index.numbers[number.value]
        elif not counts and (scaled := _in_other_unit(reading.text, number, index)) is not None:
            status, source = "verified", scaled
        noun, end = _noun_text(reading.text, number) if number.noun else ("", number.end)
        text = f"{number.text} {noun}".strip()
        reading.add(Claim(text, "number", status, source, number.start, end))
    for start, end in absent:
        if reading.free(start, end):
            phrase = reading.text[start:end].strip()
            status = "verified" if index.payloads else "ungrounded"
            reading.claims.append(Claim(phrase, "number", status, None, start, end))


_SIZE_UNIT = re.compile(r"\s*(?:[KMGT]i?B|[kmgt]b)\b")


def _in_other_unit(text: str, number: Any, index: Index) -> int | None:
    """A size given in another unit than NetBox's ("32 GB" of a VM NetBox
    lists with 32768 MB): the source of the value it converts from."""
    if not _SIZE_UNIT.match(text, number.end):
        return None
    for factor in (1024, 1000, 1024 * 1024, 1000 * 1000):
        for value in (number.value * factor, number.value / factor):
            if value in index.numbers:
                return index.numbers[value]
    return None


class _Columns:
    """The header of the table column a number stands in, found by bisection
    over the rows (a pass over every row per number costs a table's square)."""

    def __init__(self, text: str, blocks: Any) -> None:
        self.text = text
        self.rows = sorted((*blocks.rows, *blocks.totals), key=lambda r: r.start)
        self.starts = [r.start for r in self.rows]

    def header(self, at: int) -> str:
        i = bisect.bisect_right(self.starts, at) - 1
        if i < 0 or at >= self.rows[i].end:
            return ""
        row = self.rows[i]
        column = self.text[row.start : at].lstrip().lstrip("|").count("|")
        return row.cells[column][0] if column < len(row.cells) else ""


def _counted(header: str) -> bool:
    """A column headed by an object noun ("| Site | Devices |") holds counts, not values."""
    return bool(header) and bool(noun_after(" " + header, 0, OBJECT_NOUNS))


@functools.lru_cache(maxsize=64)
def _noun_words(stem: str) -> re.Pattern[str]:
    return re.compile(r"\s*((?:[\w\-]+\s+){0,3}?" + re.escape(stem) + r"\w*)", re.IGNORECASE)


def _noun_text(text: str, number: Any) -> tuple[str, int]:
    """The words from a number to its noun, as written ("17 active devices"),
    and where they end (the number's own end when the noun is not spelt as
    the reader's singular: "40 entries")."""
    m = _noun_words(number.noun.split()[-1].rstrip("y")).match(text, number.end, number.end + 60)
    if not m:
        return "", number.end
    return m.group(1), m.end(1)


_VALUE_CLAUSE = re.compile(  # the look-ahead: the first characters, checked at once
    r"(?=[;\n.bwahto])(?:[;\n]|\.\s|\b(?:but|while|whereas|although|however|the\s+others?|"
    r"the\s+rest|others|all\s+other)\b)",
    re.IGNORECASE,
)


def _clauses(text: str, segment: Segment) -> list[tuple[int, int]]:
    """A segment cut where a value stops describing the object before it
    ("sw01 is planned; the others are active")."""
    cuts = [segment.start]
    cuts += [m.start() for m in _VALUE_CLAUSE.finditer(text, segment.start, segment.end)]
    cuts.append(segment.end)
    return list(itertools.pairwise(cuts))


def _values(
    reading: _Reading, segments: Sequence[Segment], matched: list[_Match], index: Index
) -> None:
    """Values said of a named object: a status word or another object's name
    (a site, a tenant, a role) said of it must be what *its own* record
    says (never excused by another object in the same clause holding it).
    Each clause's names and words are found by bisection: linear overall."""
    if not any(m.key in index.records for m in matched):
        return  # no object of the replies named: no value is said of one
    text = reading.text
    statuses = STATUSES | index.statuses
    words = [
        by_position(_Match, (m.group().lower(), m.start(), m.end(), -1))
        for m in _words_of(frozenset(statuses)).finditer(text)
    ]
    names = sorted(matched, key=lambda m: m.start)
    name_starts = [m.start for m in names]
    word_starts = [w.start for w in words]
    for segment in segments:
        row = segment.kind == "row"
        in_segment = names[
            bisect.bisect_left(name_starts, segment.start) : bisect.bisect_left(
                name_starts, segment.end
            )
        ]
        if not any(m.key in index.records for m in in_segment):
            continue  # no object of the replies named: no clause of it says a value
        for low, high in [(segment.start, segment.end)] if row else _clauses(text, segment):
            first, last = (
                bisect.bisect_left(name_starts, low),
                bisect.bisect_left(name_starts, high),
            )
            inside, starts = names[first:last], name_starts[first:last]
            records = [m for m in inside if m.key in index.records]
            if not records:
                continue
            said = [m for m in inside if m.key not in statuses]
            said += words[
                bisect.bisect_left(word_starts, low) : bisect.bisect_left(word_starts, high)
            ]
            named = None if row else _Named(records)  # a row's values are its first cell's
            for value in sorted(said, key=lambda m: m.start):
                fields = _fields(text, index, value)
                if not fields:
                    continue  # no field holds it: whose value it is need not be found
                subjects = [records[0]] if named is None else _subjects(text, named, value)
                _check_value(reading, index, subjects, value, fields, low, inside, starts)


@functools.lru_cache(maxsize=8)
def _words_of(words: frozenset[str]) -> re.Pattern[str]:
    """The runs of ASCII letters that are one of `words` in any case, found
    in one pass (a Python step per word of the answer costs five times it):
    `\\b[A-Za-z]+\\b` whose lower case is in `words`. A word that is no
    lower-case run of ASCII letters could never be found so: left out. The
    words' first letters, looked ahead for first, let the scan skip every
    other character at once (half the time of trying each word at each
    word's start)."""
    runs = sorted(w for w in words if w.isascii() and w.isalpha() and w.islower())
    if not runs:
        return re.compile(r"(?!)")
    firsts = "".join(sorted({w[0] for w in runs} | {w[0].upper() for w in runs}))
    alternatives = "|".join(map(re.escape, runs))
    return re.compile(rf"(?=[{firsts}])\b(?a:(?i:{alternatives}))\b")


_COORDINATION = re.compile(r"\s*(?:,|and|or|&|,\s*and|,\s*or)\s*", re.IGNORECASE)


class _Named:
    """The objects of the replies one clause names, in order, for the values
    said in it: the ones before a value are walked back from it, found by
    bisection, and a run naming the value's own object is stepped over at
    once, so a clause naming thousands ("sw01, sw02 and ... are active" on
    one line) costs each value a logarithm, not a pass over the clause."""

    def __init__(self, records: list[_Match]) -> None:
        self.records = records
        self.starts = [m.start for m in records]
        n = len(records)
        # the nearest record before (after) each with another key, -1 (n) for none
        self.other_before = list(range(-1, n - 1))
        self.other_after = list(range(1, n + 1))
        for j in range(1, n):
            if records[j - 1].key == records[j].key:
                self.other_before[j] = self.other_before[j - 1]
        for j in range(n - 2, -1, -1):
            if records[j + 1].key == records[j].key:
                self.other_after[j] = self.other_after[j + 1]

    def before(self, value: _Match) -> Iterator[_Match]:
        """The records ending before `value`, of another key, nearest first."""
        j = bisect.bisect_left(self.starts, value.start) - 1
        while j >= 0:
            m = self.records[j]
            if m.key == value.key:
                j = self.other_before[j]
                continue
            if m.end <= value.start:
                yield m
            j -= 1

    def first_after(self, value: _Match) -> _Match | None:
        """The first record starting after `value`, of another key."""
        j = bisect.bisect_left(self.starts, value.end)
        if j < len(self.records) and self.records[j].key == value.key:
            j = self.other_after[j]
        return self.records[j] if j < len(self.records) else None


def _subjects(text: str, named: _Named, value: _Match) -> list[_Match]:
    """The object(s) a value is said of: the named object nearest before it
    with those named together with it ("sw01, sw02 and rtr01 are active");
    for a status word with none before, the first after it ("Active: sw01").
    An object named as the exception ("all but sw02 are active") is none."""
    before = named.before(value)
    last = next(before, None)
    if last is None:
        after = named.first_after(value) if value.source < 0 else None
        return [after] if after is not None else []
    if _EXCEPT.search(text, max(0, last.start - 12), last.start):
        return []
    if value.source >= 0 and value.start - last.end > _VALUE_GAP:
        return []  # a name far after the object is said of something else
    group = [last]
    for m in before:
        if not _COORDINATION.fullmatch(text[m.end : group[-1].start]):
            break
        group.append(m)
    return group


_EXCEPT = re.compile(r"\b(?:but|except|besides|other\s+than|apart\s+from)\s*$", re.IGNORECASE)
_VALUE_GAP = 32  # characters between an object and a name said of it ("sw01 is at DM-Akron")


def _fields(text: str, index: Index, value: _Match) -> set[str]:
    """The fields a value can be of: a status word's is the status (none when
    it qualifies a plural noun instead), a name's each field of the replies
    holding it other than a record's own name (none: no value of anything)."""
    if value.source < 0:
        return {"status"} if _attached(text, value.start) else set()
    return index.attr_fields.get(value.key, set()) - _IDENTITY


def _check_value(
    reading: _Reading,
    index: Index,
    subjects: list[_Match],
    value: _Match,
    fields: set[str],
    low: int,
    inside: Sequence[_Match],
    starts: Sequence[int],
) -> None:
    """One value, of `fields`, against each subject's own record(s): held ->
    verified (a status word is then a claim of its own); another value in
    that field -> ungrounded; a status said of a subject whose record has no
    status -> unchecked. A negated value ("is not offline") is contradicted
    only when the record holds it. A status is checked against the record
    the names between the subject and it place (`inside`: the clause's
    names, which start at `starts`; found by bisection, as a clause can name
    thousands)."""
    if not subjects:
        return  # said of no object: whether it is denied need not be read
    text = reading.text
    status_word = value.source < 0
    denied = negated(text, value.start, low)
    written = text[value.start : value.end]
    for subject in subjects:
        records = index.records[subject.key]
        if status_word and len(records) > 1:  # "MGMT (300) at DM-Columbus is active":
            # that MGMT's status (of a name one record has, there is no other)
            at = bisect.bisect_left(starts, subject.end)
            upto = min(bisect.bisect_left(starts, value.start), at + _RELATED)
            records = _placed(records, [m.key for m in inside[at:upto]])
        if value.key in records[0].names or _related(index, value.key, records):
            continue
        holder = _holder(records, fields, value.key)
        if denied:
            if holder is not None:
                _value_claim(reading, written, value, "ungrounded", subject, holder.source)
            continue
        if holder is not None:
            if status_word:
                _value_claim(reading, written, value, "verified", subject, holder.source)
        elif (
            having := next((r for r in records if not fields.isdisjoint(r.attrs)), None)
        ) is not None:
            _value_claim(reading, written, value, "ungrounded", subject, having.source)
        elif status_word:
            _value_claim(reading, written, value, "unchecked", subject, None)


def _holder(records: list[Any], fields: set[str], value: str) -> Any | None:
    """The first of `records` holding `value` in one of `fields`."""
    for record in records:
        for name in fields:
            if value in record.attrs.get(name, ()):
                return record
    return None


def _placed(records: list[Any], places: Sequence[str]) -> list[Any]:
    """Of the records one name has ("MGMT" at two sites), those the clause's
    other names place it by ("MGMT (300) at DM-Columbus"): a value is
    checked against that record only, never a namesake's elsewhere."""
    if len(records) < 2 or not places:
        return records
    kept = records
    for place in places[:_RELATED]:
        holding = [r for r in kept if any(place in held for held in r.attrs.values())]
        if holding and len(holding) < len(kept):
            kept = holding
    return kept


def _related(index: Index, value: str, records: list[Any]) -> bool:
    """The value names a sibling of the subject (a row of the same list) or
    an object that holds the subject (an interface of the device)."""
    if value not in index.records:
        return False  # the common value, a status word: no object of that name
    return any(
        r.group == o.group or any(name in held for held in r.attrs.values() for name in o.names)
        for r in index.records[value][:_RELATED]
        for o in records[:_RELATED]
    )


_RELATED = 20  # records of one name compared: a name on every row is no sibling test


def _attached(text: str, start: int) -> bool:
    """A status word describes the object it follows, not the plural noun it
    qualifies ("3 active devices" says nothing of a device named before it)."""
    after = text[start : start + 24].lower()
    return not _PLURAL_NOUN.match(after)


_PLURAL_NOUN = re.compile(r"[a-z]+\s+(?:devices|vms|virtual|prefixes|ip|sites|circuits|vlans)")


def _value_claim(
    reading: _Reading,
    text: str,
    value: _Match,
    status: str,
    subject: _Match,
    source: int | None,
) -> None:
    name = reading.text[subject.start : subject.end]
    reason = _REASONS[status].format(name)
    reading.claims.append(
        Claim(text, "value", status, source, value.start, value.end, name, reason)
    )


_REASONS = {
    "verified": "the record of {} says so",
    "ungrounded": "the record of {} says otherwise",
    "unchecked": "the replies hold no such field of {}",
}


def claims_of(answer: str, given: str = "") -> int:
    """How many NetBox facts an answer states, read without evidence (for the
    non-answer reading: a hedge followed by a fact is an answer)."""
    return check(answer, [{}], given=given).claims


__all__ = ["KINDS", "Claim", "Grounding", "check"]
