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

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from netbox_chat.claims.reader import (
    ID_REF,
    OBJECT_NOUNS,
    TOKEN,
    Segment,
    Token,
    identifier_like,
    introduced,
    is_address,
    joins,
    key,
    negated,
    none_spans,
    noun_after,
    numbers,
    plain,
    shape,
    tokens,
)

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
_IDENTITY = ("name", "display", "slug", "cid", "address", "prefix", "model", "label", "vid")
_MAX_WORDS = 8
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_EXISTENCE_CONTEXT = re.compile(
    r"\b(?:no|not|n't|never|none|couldn't|cannot|unable|nothing|doesn't|does not)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Claim:
    """One claim of the answer: `text` as written, its `kind` (name, number,
    address, value) and, once checked, its `status` (grounded, derived,
    ungrounded), the index of the evidence `source` it rests on, and where it
    stands in the answer (`start`, `end`) so the screen can mark it."""

    text: str
    kind: str
    status: str = "ungrounded"
    source: int | None = None
    start: int = 0
    end: int = 0

    def as_json(self) -> dict[str, str]:
        return {"text": self.text, "kind": self.kind}


@dataclass(frozen=True)
class Grounding:
    """The check's verdict on one answer."""

    claims: int
    ungrounded: list[Claim]
    without_netbox: bool
    all: list[Claim] = field(default_factory=list)

    @property
    def quiet(self) -> bool:
        """Nothing to show the operator: every claim rests on NetBox."""
        return not self.ungrounded and not self.without_netbox

    def as_json(self) -> dict[str, Any]:
        return {
            "claims": self.claims,
            "ungrounded": [c.as_json() for c in self.ungrounded],
            "without_netbox": self.without_netbox,
        }


# ------------------------------------------------------------------ evidence


@dataclass
class _Record:
    names: set[str]
    attrs: dict[str, set[str]]
    group: int
    source: int


@dataclass
class Evidence:
    """What the tool results hold, indexed for the answer's lookups."""

    names: dict[str, int] = field(default_factory=dict)  # whole string values -> source
    words: dict[str, int] = field(default_factory=dict)  # tokens inside string values
    refs: set[str] = field(default_factory=set)  # names of objects (identity or reference)
    records: dict[str, list[_Record]] = field(default_factory=dict)
    attr_fields: dict[str, set[str]] = field(default_factory=dict)  # value -> fields holding it
    counts: dict[int, int] = field(default_factory=dict)
    numbers: dict[float, int] = field(default_factory=dict)
    ids: dict[int, int] = field(default_factory=dict)
    vids: dict[int, int] = field(default_factory=dict)
    addresses: dict[str, int] = field(default_factory=dict)
    statuses: set[str] = field(default_factory=set)
    max_words: int = 1
    payloads: int = 0
    _groups: int = 0
    _seen: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)  # starts of names of several words

    @classmethod
    def of(cls, payloads: Sequence[Any]) -> Evidence:
        evidence = cls(payloads=len(payloads))
        for source, payload in enumerate(payloads):
            evidence._walk(payload, "", source, None)
        return evidence

    def _string(self, text: str, where: str, source: int) -> None:
        if where == "status":
            self.statuses.add(key(text))
        if text in self._seen:  # a site or a role repeats on every row of a page
            return
        self._seen.add(text)
        whole = key(text)
        if not whole:
            return
        self.names.setdefault(whole, source)
        at = whole.find("-")
        while at > 0:  # "jbb", "jbb-branch": a longer name may follow
            self.prefixes.add(whole[:at])
            at = whole.find("-", at + 1)
        parts = text.split()
        if len(parts) <= _MAX_WORDS:
            self.max_words = max(self.max_words, len(parts))
        address = False
        for match in TOKEN.finditer(text):
            token = match.group()
            self.words.setdefault(key(token), source)
            if (token[0].isdigit() or ":" in token) and is_address(token):
                address = True
                self.addresses.setdefault(token.lower(), source)
                self.addresses.setdefault(token.split("/")[0].lower(), source)
        if not address:
            for m in _NUMBER_IN_TEXT.finditer(text):
                self.numbers.setdefault(float(m.group()), source)

    def _walk(self, value: Any, where: str, source: int, record: _Record | None) -> None:
        if isinstance(value, str):
            self._string(value, where, source)
            if record is not None and where:
                record.attrs.setdefault(where, set()).add(key(value))
                self.attr_fields.setdefault(key(value), set()).add(where)
            return
        if value is None:
            if record is not None and where:
                record.attrs.setdefault(where, set())  # the field is there, empty
            return
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            if where != "id":  # an id is a name, not a value
                self.numbers.setdefault(float(value), source)
            if isinstance(value, int):
                if where == "count" or where.endswith("_count") or where in ("returned", "size"):
                    self.counts.setdefault(value, source)
                if where == "id":
                    self.ids.setdefault(value, source)
                if where == "vid":
                    self.vids.setdefault(value, source)
            if record is not None and where:
                record.attrs.setdefault(where, set()).add(key(str(value)))
            return
        if isinstance(value, list):
            rows = [v for v in value if isinstance(v, dict)]
            if rows:
                self.counts.setdefault(len(value), source)
                self._groups += 1
                group = self._groups
                for row in rows:
                    self._row(row, group, source)
                self._group_counts(rows, source)
            for item in value:
                if not isinstance(item, dict):
                    self._walk(item, where, source, record)
            return
        if isinstance(value, dict):
            if record is not None and where:
                # a reference inside a record ({id, display, slug}): a value of it
                for field_name in ("display", "name", "slug", "value", "label", "address"):
                    text = value.get(field_name)
                    if isinstance(text, str):
                        record.attrs.setdefault(where, set()).add(key(text))
                        self.attr_fields.setdefault(key(text), set()).add(where)
                        if field_name != "value":
                            self.refs.add(key(text))
            count, returned = value.get("count"), value.get("returned")
            if isinstance(count, int) and isinstance(returned, int):
                self.counts.setdefault(count - returned, source)  # "49 more"
            if "results" in value or (record is None and "id" not in value):
                for k, v in value.items():
                    self._walk(v, k, source, None)
                if isinstance(value.get("results"), list) and not value["results"]:
                    self.counts.setdefault(0, source)
                return
            if record is None:
                self._row(value, 0, source)
                return
            for k, v in value.items():  # a reference's fields are its field's values
                if k == "id" and isinstance(v, int):
                    self.ids.setdefault(v, source)
                elif k not in ("display", "name", "slug", "value", "label", "address"):
                    self._walk(v, where if isinstance(v, (str, int, float)) else k, source, record)
                elif isinstance(v, str):
                    self._string(v, k, source)

    def _row(self, row: dict[str, Any], group: int, source: int) -> None:
        names = {key(str(row[k])) for k in _IDENTITY if isinstance(row.get(k), (str, int))}
        names.discard("")
        record = _Record(names, {}, group, source)
        for name in names:
            self.records.setdefault(name, []).append(record)
            self.refs.add(name)
        for k, v in row.items():
            self._walk(v, k, source, record)

    def _group_counts(self, rows: list[dict[str, Any]], source: int) -> None:
        """How many rows share each value of each field: "3 of them are offline"
        is derived from a page whose rows say so."""
        fields = {k for row in rows for k in row}
        for name in fields:
            tally: Counter[str] = Counter()
            for row in rows:
                value = row.get(name)
                if isinstance(value, dict):
                    value = value.get("display") or value.get("name") or value.get("id")
                tally[key(str(value)) if value not in (None, "", [], {}) else ""] += 1
            for n in tally.values():
                self.counts.setdefault(n, source)
            if "" not in tally:
                self.counts.setdefault(0, source)


# ------------------------------------------------------------------ the check


@dataclass
class _Reading:
    """The answer being read: its claims so far and the spans they took (a
    number inside a name or an address is not read again)."""

    text: str
    claims: list[Claim] = field(default_factory=list)
    taken: list[tuple[int, int]] = field(default_factory=list)
    mask: bytearray = field(default_factory=bytearray)

    def __post_init__(self) -> None:
        self.mask = bytearray(len(self.text) + 1)

    def free(self, start: int, end: int) -> bool:
        return 1 not in self.mask[start:end]

    def take(self, start: int, end: int) -> None:
        self.taken.append((start, end))
        self.mask[start:end] = b"\x01" * (end - start)

    def add(self, claim: Claim) -> None:
        self.claims.append(claim)
        self.take(claim.start, claim.end)


def check(answer: str, evidence: Sequence[Any] | Evidence, *, given: str = "") -> Grounding:
    """The claims of `answer` against `evidence` (the tool results the model had,
    as JSON-decoded payloads; text payloads are read as text; or their index,
    `Evidence.of`, when one answer is checked piece by piece as it streams).
    `given` is what the operator wrote this turn: a name or number the
    operator gave is not a claim about NetBox."""
    index = evidence if isinstance(evidence, Evidence) else Evidence.of(evidence)
    text = plain(answer)
    reading = _Reading(text)
    blocks = shape(text)
    segments = blocks.segments or [Segment(0, len(text), "sentence")]
    given_keys = {t.key for t in tokens(given)} | {key(given)} if given else set()
    given_numbers = {n.value for n in numbers(given)} if given else set()
    absent = none_spans(text)
    toks = tokens(text)

    _addresses(reading, toks, index, given_keys)
    matched = _evidence_names(reading, toks, index)
    _ids(reading, index, given_keys)
    _unknown_names(reading, toks, index, given_keys, segments, absent)
    _numbers(reading, blocks, matched, index, given_numbers, absent)
    _values(reading, segments, matched, index)

    claims = sorted(reading.claims, key=lambda c: c.start)
    without = index.payloads == 0 and bool(claims)
    if without:
        claims = [Claim(c.text, c.kind, "ungrounded", None, c.start, c.end) for c in claims]
    ungrounded: list[Claim] = []
    seen: set[str] = set()
    for claim in claims:
        if claim.status == "ungrounded" and claim.text not in seen:
            seen.add(claim.text)
            ungrounded.append(claim)
    distinct = {(c.text.lower(), c.kind) for c in claims}
    return Grounding(len(distinct), ungrounded, without, claims)


def _addresses(reading: _Reading, toks: list[Token], index: Evidence, given: set[str]) -> None:
    for token in toks:
        if not is_address(token.text):
            continue
        full = token.text.lower()
        source = index.addresses.get(full, index.addresses.get(full.split("/")[0]))
        if source is None and "/" not in full:
            source = next((s for a, s in index.addresses.items() if a.split("/")[0] == full), None)
        if source is None and token.key in given:
            continue
        status = "grounded" if source is not None else "ungrounded"
        reading.add(Claim(token.text, "address", status, source, token.start, token.end))


@dataclass(frozen=True)
class _Match:
    key: str
    start: int
    end: int
    source: int


def _evidence_names(reading: _Reading, toks: list[Token], index: Evidence) -> list[_Match]:
    """Names of the evidence written in the answer, the longest first: "JBB
    Branch 104" as one name, "Dunder-Mifflin, Inc." across its comma, a slug
    or another case as the name it spells."""
    matches: list[_Match] = []
    i = 0
    while i < len(toks):
        if not reading.free(toks[i].start, toks[i].end):
            i += 1
            continue
        found = None
        ends = [
            (joined, toks[last].end, last - i)
            for joined, last in joins(reading.text, toks, i, index.max_words, index.prefixes)
        ]
        for joined, end, n in reversed(ends):
            if joined.replace("-", "").isdigit():
                continue  # a number, read as one
            source = index.names.get(joined)
            if source is None and n == 0:
                source = index.words.get(joined) if identifier_like(toks[i].text) else None
            if source is not None:
                found = (joined, end, n, source)
                break
        if found is None:
            parts = toks[i].text.split("/")
            if len(parts) > 1 and all(key(p) in index.names for p in parts):
                at = toks[i].start
                for part in parts:
                    matches.append(_Match(key(part), at, at + len(part), index.names[key(part)]))
                    _name_claim(reading, part, key(part), at, index)
                    at += len(part) + 1
            i += 1
            continue
        joined, end, n, source = found
        start = toks[i].start
        matches.append(_Match(joined, start, end, source))
        _name_claim(reading, reading.text[start:end], joined, start, index, source)
        i += n + 1
    return matches


def _name_claim(
    reading: _Reading, text: str, name: str, start: int, index: Evidence, source: int | None = None
) -> None:
    """A name found in the evidence is a claim when it names an object (not a
    word that happens to be in a description); either way its span is taken."""
    end = start + len(text)
    if name in index.refs or any(identifier_like(t.text) for t in tokens(text)):
        if source is None:
            source = index.names.get(name)
        reading.add(Claim(text, "name", "grounded", source, start, end))
    else:
        reading.take(start, end)


def _ids(reading: _Reading, index: Evidence, given: set[str]) -> None:
    for m in ID_REF.finditer(reading.text):
        if not reading.free(m.start(), m.end()):
            continue
        value = int(m.group(1))
        source = index.ids.get(value)
        if source is None and m.group(1) in given:
            continue
        status = "grounded" if source is not None else "ungrounded"
        reading.add(Claim(m.group().strip(), "name", status, source, m.start(), m.end()))


def _in_absence(start: int, absent: list[tuple[int, int]], segments: Sequence[Segment]) -> bool:
    """The offset stands in a sentence that says something does not exist
    ("there is no device named foo99"): a name there is not claimed to exist."""
    for segment in segments:
        if segment.start <= start < segment.end:
            return any(segment.start <= a < segment.end for a, _ in absent)
    return False


def _unknown_names(
    reading: _Reading,
    toks: list[Token],
    index: Evidence,
    given: set[str],
    segments: Sequence[Segment],
    absent: list[tuple[int, int]],
) -> None:
    """Names the evidence does not hold: tokens only a name looks like, and
    words introduced by an object noun ("tenant Initech", "VLAN 999")."""
    for item in introduced(reading.text):
        if not reading.free(item.start, item.end):
            continue
        name = item.name
        if item.noun == "vlan" and name.isdigit():
            source = index.vids.get(int(name))
            if source is None and (name in given or _in_absence(item.start, absent, segments)):
                continue
            status = "grounded" if source is not None else "ungrounded"
            reading.add(Claim(f"VLAN {name}", "name", status, source, item.start, item.end))
            continue
        if name.isdigit():
            continue  # "site 5": an id or a number, read as one below
        if key(name) in given or _in_absence(item.start, absent, segments):
            reading.take(item.start, item.end)
            continue
        reading.add(Claim(name, "name", "ungrounded", None, item.start, item.end))
    for token in toks:
        if not reading.free(token.start, token.end) or not identifier_like(token.text):
            continue
        if token.key in given or _in_absence(token.start, absent, segments):
            continue
        reading.add(Claim(token.text, "name", "ungrounded", None, token.start, token.end))


def _numbers(
    reading: _Reading,
    blocks: Any,
    matched: list[_Match],
    index: Evidence,
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
    skip = [*reading.taken, *blocks.numbering]
    for number in numbers(reading.text, skip=skip):
        if number.value in given:
            continue
        value = number.integer
        source = None
        status = "ungrounded"
        counts = (
            number.noun
            or number.subcount
            or number.total
            or _counted_column(reading.text, number.start, blocks)
        )
        if value is not None and value in index.counts:
            status, source = "derived", index.counts[value]
        elif (value is not None and value in listed) or (value == 0 and index.payloads):
            status = "derived"
        elif not counts and number.value in index.numbers:
            status, source = "grounded", index.numbers[number.value]
        elif not counts and (scaled := _in_other_unit(reading.text, number, index)) is not None:
            status, source = "derived", scaled
        noun = _noun_text(reading.text, number) if number.noun else ""
        end = number.end
        if noun:
            end = reading.text.index(noun, number.end) + len(noun)
        text = f"{number.text} {noun}".strip()
        reading.add(Claim(text, "number", status, source, number.start, end))
    for start, end in absent:
        if reading.free(start, end):
            phrase = reading.text[start:end].strip()
            status = "derived" if index.payloads else "ungrounded"
            reading.claims.append(Claim(phrase, "number", status, None, start, end))


_SIZE_UNIT = re.compile(r"\s*(?:[KMGT]i?B|[kmgt]b)\b")


def _in_other_unit(text: str, number: Any, index: Evidence) -> int | None:
    """A size given in another unit than NetBox's ("32 GB" of a VM NetBox
    lists with 32768 MB): the source of the value it converts from."""
    if not _SIZE_UNIT.match(text, number.end):
        return None
    for factor in (1024, 1000, 1024 * 1024, 1000 * 1000):
        for value in (number.value * factor, number.value / factor):
            if value in index.numbers:
                return index.numbers[value]
    return None


def _counted_column(text: str, at: int, blocks: Any) -> bool:
    """The number stands in a table column headed by an object noun
    ("| Site | Devices |"): a count, not a value."""
    for row in (*blocks.rows, *blocks.totals):
        if row.start <= at < row.end:
            column = text[row.start : at].lstrip().lstrip("|").count("|")
            if column < len(row.cells):
                header = row.cells[column][0]
                return bool(noun_after(" " + header, 0, OBJECT_NOUNS))
    return False


def _noun_text(text: str, number: Any) -> str:
    """The words from a number to its noun, as written ("17 active devices")."""
    tail = text[number.end : number.end + 60]
    m = re.match(r"\s*((?:[\w\-]+\s+){0,3}?" + re.escape(number.noun.split()[-1]) + r"\w*)",
                 tail, re.IGNORECASE)  # fmt: skip
    return m.group(1) if m else number.noun


_VALUE_CLAUSE = re.compile(
    r"[;\n]|\.\s|\b(?:but|while|whereas|although|however|the\s+others?|the\s+rest|others|"
    r"all\s+other)\b",
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
    reading: _Reading, segments: Sequence[Segment], matched: list[_Match], index: Evidence
) -> None:
    """Values attached to a named object: a status word or another object's
    name (a site, a tenant, a role) beside it must be what its record says,
    unless another object in the same clause (or table row) holds it."""
    text = reading.text
    statuses = STATUSES | index.statuses
    words = [
        _Match(m.group().lower(), m.start(), m.end(), -1)
        for m in re.finditer(r"\b[A-Za-z]+\b", text)
        if m.group().lower() in statuses
    ]
    for segment in segments:
        clauses = (
            [(segment.start, segment.end)] if segment.kind == "row" else _clauses(text, segment)
        )
        for low, high in clauses:
            inside = [m for m in matched if low <= m.start < high]
            records = [m for m in inside if m.key in index.records]
            if records:
                values = [m for m in inside if m.key not in statuses] + [
                    w for w in words if low <= w.start < high
                ]
                _check_values(reading, index, records, values, low)


def _check_values(
    reading: _Reading, index: Evidence, records: list[_Match], values: list[_Match], low: int
) -> None:
    text = reading.text
    subject = index.records[records[0].key]
    near = [r for m in records for r in index.records[m.key]]
    for value in values:
        if value.key in subject[0].names or negated(text, value.start, low):
            continue
        others = [r for r in near if value.key not in r.names]
        if any(value.key in held for r in others for held in r.attrs.values()):
            if value.source < 0:
                reading.claims.append(
                    Claim(
                        text[value.start : value.end],
                        "value",
                        "grounded",
                        others[0].source,
                        value.start,
                        value.end,
                    )
                )
            continue
        if value.key in index.records and any(
            r.group == o.group or any(name in held for held in r.attrs.values() for name in o.names)
            for r in index.records[value.key]
            for o in others
        ):
            continue  # a sibling in the same list, or an object that holds the subject
        fields = {"status"} if value.source < 0 else index.attr_fields.get(value.key, set())
        if value.source < 0 and not _attached(text, value.start):
            continue
        if any(f in r.attrs and value.key not in r.attrs[f] for r in subject for f in fields):
            _value_claim(reading, text[value.start : value.end], value.start, value.end)


def _attached(text: str, start: int) -> bool:
    """A status word describes the object it follows, not the plural noun it
    qualifies ("3 active devices" says nothing of a device named before it)."""
    after = text[start : start + 24].lower()
    return not re.match(r"[a-z]+\s+(?:devices|vms|virtual|prefixes|ip|sites|circuits|vlans)", after)


def _value_claim(reading: _Reading, text: str, start: int, end: int) -> None:
    reading.claims.append(Claim(text, "value", "ungrounded", None, start, end))


def claims_of(answer: str, given: str = "") -> int:
    """How many NetBox facts an answer states, read without evidence (for the
    non-answer reading: a hedge followed by a fact is an answer)."""
    return check(answer, [{}], given=given).claims


__all__ = ["KINDS", "Claim", "Evidence", "Grounding", "check"]
