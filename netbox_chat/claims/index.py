"""Index: what the turn's tool calls returned, indexed for the answer's
lookups (stage 2 of the pipeline: read -> index -> verify -> present).

Each `Call` is one tool call with its arguments and decoded reply. The index
holds every string and number the replies hold (names, words, addresses,
ids, VIDs), each object's record (its fields' values), and each list a call
fetched as a *set*: its object type, the filters of the call that fetched
it, NetBox's `count` and the rows returned. Replies are untrusted: any shape
is read, nothing in them is executed, and every walk is bounded.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from netbox_chat.claims.reader import TOKEN, is_address, key

_MAX_WORDS = 8
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_IDENTITY = ("name", "display", "slug", "cid", "address", "prefix", "model", "label", "vid")
# The largest number read as a number: a longer one is a serial or an id
# string, and floats past it lose the digits that tell two apart.
BIGGEST = 10**15
DEPTH = 40  # a reply nested deeper is read down to here only


def _sized(number: float) -> bool:
    return abs(number) < BIGGEST


def _text(value: Any) -> str:
    """A scalar as text; an integer too long to be a quantity (Python will
    not even print one past 4,300 digits) as no text."""
    if isinstance(value, int) and not _sized(value):
        return ""
    return str(value)


@dataclass(frozen=True)
class Call:
    """One tool call of the turn and its decoded reply: the tool's `name`
    ("" when unknown), its `args` (object type, filters, limit...), and the
    JSON-decoded `payload` (or its text)."""

    name: str
    args: Mapping[str, Any]
    payload: Any


def calls_of(items: Sequence[Any]) -> list[Call]:
    """`Call`s as given, bare payloads wrapped as calls with no name or args
    (the check's older callers pass the replies alone)."""
    return [item if isinstance(item, Call) else Call("", {}, item) for item in items]


# Fields that name the record itself: a value said of an object is never one.
IDENTITY_FIELDS = frozenset(["name", "display", "slug", "label", "model", "cid", "address"])

# The fields a row of a set is named by when a fact lists or names it.
_ROW_NAMES = ("name", "display", "address", "prefix", "cid", "model", "slug", "vid")


def row_names(row: Mapping[str, Any]) -> set[str]:
    """The keys of the names a row goes by."""
    return {key(str(row[k])) for k in _ROW_NAMES if isinstance(row.get(k), (str, int))} - {""}


def row_values(row: Mapping[str, Any]) -> set[str]:
    """The keys of a row's text values (a reference or a choice by its name)."""
    out = set()
    for value in row.values():
        if isinstance(value, Mapping):  # a reference, or a choice ({"value": "active"})
            value = (
                value.get("display") or value.get("name") or value.get("slug") or value.get("value")
            )
        if isinstance(value, str):
            out.add(key(value))
    return out


def row_status(row: Mapping[str, Any]) -> str | None:
    """The key of a row's status (a choice by its value, slug, name or
    display), or None when the row holds no status as text."""
    held = row.get("status")
    if isinstance(held, Mapping):
        held = held.get("value") or held.get("slug") or held.get("name") or held.get("display")
    return key(held) if isinstance(held, str) else None


@dataclass(frozen=True)
class Set:
    """A list one call fetched: its object type ("dcim.device"), the filters
    it was fetched with, NetBox's `count` of the whole set, and the rows the
    reply holds (a page of it when `count` is larger)."""

    source: int
    object_type: str
    filters: Mapping[str, Any]
    count: int
    rows: tuple[Mapping[str, Any], ...]

    @property
    def complete(self) -> bool:
        """The reply holds every row of the set."""
        return self.count == len(self.rows)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        """The names of the set's rows, found once: each fact said of the set
        (a table's every count) reads them."""
        return frozenset(name for row in self.rows for name in row_names(row))

    @functools.cached_property
    def values(self) -> tuple[frozenset[str], ...]:
        """Each row's values (`row_values`), found once for every fact said of the set."""
        return tuple(frozenset(row_values(row)) for row in self.rows)

    @functools.cached_property
    def statuses(self) -> Counter[str | None]:
        """How many rows hold each status (`row_status`): found once, as
        each count narrowed by a status ("4 active devices") is checked
        against the rows of a set fetched whole."""
        return Counter(map(row_status, self.rows))

    @functools.cached_property
    def flags(self) -> Counter[bool]:
        """How many rows are enabled (True) and disabled (False) by their
        `enabled` flag itself (a bool, never a value like one)."""
        return Counter(row["enabled"] for row in self.rows if type(row.get("enabled")) is bool)

    @functools.cached_property
    def filtered(self) -> frozenset[str]:
        """The keys of the values the call filtered on ("dm-akron", "active")."""
        return frozenset(key(str(v)) for v in self.filters.values())

    @functools.cached_property
    def covers(self) -> frozenset[str]:
        """The keys a sentence may name and still speak of this set: its rows'
        names, the values its call filtered on, the values every row holds.
        Found once: each count's sentence is then one subset test a set."""
        common = frozenset.intersection(*self.values) if self.rows else frozenset()
        return self.names | self.filtered | common


def set_of(source: int, call: Call) -> Set | None:
    """The set a call's reply is, or None when it is not a list of records."""
    payload = call.payload
    rows = payload.get("results") if isinstance(payload, Mapping) else payload
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        return None
    count = payload.get("count") if isinstance(payload, Mapping) else None
    if type(count) is not int or count < len(rows):
        count = len(rows)
    kind = payload.get("object_type") if isinstance(payload, Mapping) else None
    if not isinstance(kind, str):
        kind = call.args.get("object_type") if isinstance(call.args, Mapping) else None
    if not isinstance(kind, str) and "changelog" in call.name:
        kind = "core.objectchange"  # the change log's tool names no object type
    filters = call.args.get("filters") if isinstance(call.args, Mapping) else None
    return Set(
        source,
        kind.lower() if isinstance(kind, str) else "",
        filters if isinstance(filters, Mapping) else {},
        count,
        tuple(rows),
    )


@dataclass
class _Record:
    names: set[str]
    attrs: dict[str, set[str]]
    group: int
    source: int


@dataclass
class Index:
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
    calls: list[Call] = field(default_factory=list)
    sets: list[Set] = field(default_factory=list)
    # each object's record as the reply gave it (its flags, its empty fields), by name
    rows: dict[str, list[tuple[int, Mapping[str, Any]]]] = field(default_factory=dict)
    _groups: int = 0
    _seen: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)  # starts of names of several words
    count_fields: set[str] = field(default_factory=set)  # "device_count": a record counts its own

    @functools.cached_property
    def starting(self) -> frozenset[str]:
        """Every key a name of the evidence can start with (a name, the start
        of a longer one, a word of one): one set test passes by a token of
        no name. Read once the index is built; nothing is added after."""
        return frozenset(self.names.keys() | self.prefixes | self.words.keys())

    @functools.cached_property
    def objects(self) -> frozenset[str]:
        """The keys a sentence names an object or a value by: a record's name,
        or a value some field other than an identity one holds (a site, a
        role, a platform). Found once: every count's sentence is read for them."""
        valued = (k for k, fields in self.attr_fields.items() if not fields <= IDENTITY_FIELDS)
        return frozenset(self.records.keys()).union(valued)

    @functools.cached_property
    def object_starts(self) -> frozenset[str]:
        """Each of `objects` and each start of one at a dash ("dunder",
        "dunder-mifflin" of dunder-mifflin-inc): a token no key here is, no
        name of `objects` starts at."""
        starts = set(self.objects)
        for name in self.objects:
            at = name.find("-")
            while at > 0:
                starts.add(name[:at])
                at = name.find("-", at + 1)
        return frozenset(starts)

    @functools.cached_property
    def typed(self) -> dict[str, list[Set]]:
        """The sets of each model (the object type after its app label,
        "device"), in call order: a fact's noun finds its sets with one
        lookup, however many calls the turn made."""
        out: dict[str, list[Set]] = {}
        for found in self.sets:
            out.setdefault(found.object_type.rpartition(".")[2], []).append(found)
        return out

    @functools.cached_property
    def set_rows(self) -> dict[str, list[tuple[int, int]]]:
        """For each name a row of a set goes by (`row_names`), where the rows
        so named stand: the set's place in `sets` and the row's in it. Found
        once: a list's members find their rows by lookup, not by reading
        every row of every set per list."""
        out: dict[str, list[tuple[int, int]]] = {}
        for at, found in enumerate(self.sets):
            for row_at, row in enumerate(found.rows):
                for name in row_names(row):
                    out.setdefault(name, []).append((at, row_at))
        return out

    @classmethod
    def of(cls, calls: Sequence[Any]) -> Index:
        """The index of `calls` (`Call`s, or bare payloads)."""
        given = calls_of(calls)
        index = cls(payloads=len(given), calls=given)
        for source, call in enumerate(given):
            index._walk(call.payload, "", source, None)
            found = set_of(source, call)
            if found is not None:
                index.sets.append(found)
        return index

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
        # A tool's refusal ("Error: ... after 3 attempts") may name objects (its
        # suggestions), but its numbers are the tool's, never NetBox's facts.
        if not address and not (where == "" and text.startswith("Error")):
            for m in _NUMBER_IN_TEXT.finditer(text):
                self.numbers.setdefault(float(m.group()), source)

    def _walk(
        self, value: Any, where: str, source: int, record: _Record | None, depth: int = 0
    ) -> None:
        if depth > DEPTH:
            return
        depth += 1
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not _sized(value):
            return  # inf, nan, or past what a float tells apart: no quantity anyone states
        if isinstance(value, str):
            self._string(value, where, source)
            if record is not None and where:
                held = key(value)
                record.attrs.setdefault(where, set()).add(held)
                self.attr_fields.setdefault(held, set()).add(where)
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
                    if where.endswith("_count"):
                        self.count_fields.add(where)
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
                    self._row(row, group, source, depth)
                self._group_counts(rows, source)
            for item in value:
                if not isinstance(item, dict):
                    self._walk(item, where, source, record, depth)
            return
        if isinstance(value, dict):
            if record is not None and where:
                # a reference inside a record ({id, display, slug}): a value of it
                for field_name in ("display", "name", "slug", "value", "label", "address"):
                    text = value.get(field_name)
                    if isinstance(text, str):
                        held = key(text)
                        record.attrs.setdefault(where, set()).add(held)
                        self.attr_fields.setdefault(held, set()).add(where)
                        if field_name != "value":
                            self.refs.add(held)
            count, returned = value.get("count"), value.get("returned")
            if isinstance(count, int) and isinstance(returned, int):
                self.counts.setdefault(count - returned, source)  # "49 more"
            if "results" in value or (record is None and "id" not in value):
                for k, v in value.items():
                    self._walk(v, k, source, None, depth)
                if isinstance(value.get("results"), list) and not value["results"]:
                    self.counts.setdefault(0, source)
                return
            if record is None:
                self._row(value, 0, source, depth)
                return
            for k, v in value.items():  # a reference's fields are its field's values
                if k == "id" and isinstance(v, int):
                    self.ids.setdefault(v, source)
                elif k not in ("display", "name", "slug", "value", "label", "address"):
                    self._walk(
                        v, where if isinstance(v, (str, int, float)) else k, source, record, depth
                    )
                elif isinstance(v, str):
                    self._string(v, k, source)

    def _row(self, row: dict[str, Any], group: int, source: int, depth: int) -> None:
        names = {key(_text(row[k])) for k in _IDENTITY if isinstance(row.get(k), (str, int))}
        names.discard("")
        record = _Record(names, {}, group, source)
        for name in names:
            self.records.setdefault(name, []).append(record)
            self.rows.setdefault(name, []).append((source, row))
            self.refs.add(name)
        for k, v in row.items():
            self._walk(v, k, source, record, depth)

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
                tally[key(_text(value)) if value not in (None, "", [], {}) else ""] += 1
            for n in tally.values():
                self.counts.setdefault(n, source)
            if "" not in tally:
                self.counts.setdefault(0, source)
