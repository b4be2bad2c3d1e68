"""Verify (stage 3 of the pipeline): each fact against the records the
turn's calls returned, to a verdict and the call it rests on.

- a count against its set's `count` (NetBox's total, not the rows a page
  returned), a page's rows only where the answer says it counts a page; a
  count narrowed by a status against the rows holding it, when the reply
  holds the whole set (or the call filtered on that status);
- members against the whole set, only when the reply holds all of it;
- a quantifier against every record of the set;
- a Yes or No against what the question asks of the named object's record.

Whatever cannot be tied to a set or a record is *unchecked*, never verified.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from netbox_chat.claims.index import (
    IDENTITY_FIELDS,
    Index,
    Set,
    row_status,
    row_values,
)
from netbox_chat.claims.read import FIELD_WORDS, STATUS_WORDS, Fact
from netbox_chat.claims.reader import (
    OBJECT_NOUNS,
    Token,
    identifier_like,
    joins,
    key,
    noun_after,
    tokens,
)

# The object type (its model, after the app label) each object noun counts.
_TYPES = {
    "virtual machine": "virtualmachine", "vm": "virtualmachine", "device": "device",
    "site": "site", "rack": "rack", "tenant": "tenant", "vlan": "vlan", "vrf": "vrf",
    "prefix": "prefix", "cluster": "cluster", "circuit": "circuit", "provider": "provider",
    "platform": "platform", "role": "role", "region": "region", "location": "location",
    "interface": "interface", "power panel": "powerpanel", "power feed": "powerfeed",
    "manufacturer": "manufacturer", "device type": "devicetype", "user": "user",
    "aggregate": "aggregate", "ip address": "ipaddress", "address": "ipaddress",
    "ip": "ipaddress", "cable": "cable", "contact": "contact", "tag": "tag",
    "change": "objectchange", "switch": "device", "router": "device", "server": "device",
    "firewall": "device", "host": "device", "port": "interface", "module": "module",
    "range": "iprange", "asn": "asn", "termination": "circuittermination",
}  # fmt: skip


class Verdict(NamedTuple):
    """A fact's verdict: "verified", "ungrounded" or "unchecked", the index of
    the call it rests on, and one short line saying why (a tuple, like the
    `Fact` it judges: one a fact, thousands an answer)."""

    fact: Fact
    status: str
    source: int | None
    reason: str


def verify(facts: Sequence[Fact], index: Index, question: str = "") -> list[Verdict]:
    """The verdict on each fact that is about a set or answers a question; a
    fact with no set to check it against, and a value of a named object, are
    left out (the name, number and value passes of grounding.py read them)."""
    out = []
    for fact in facts:
        check = _VERIFY.get(fact.kind)
        verdict = None if check is None else check(fact, index, question)
        if verdict is not None:
            out.append(verdict)
    return out


def _sets(index: Index, noun: str) -> list[Set]:
    """The sets a noun counts, latest call first: by object type, or every
    set when the noun names none ("results", "them")."""
    model = _TYPES.get(noun, "")
    if model:
        found = list(index.typed.get(model, ()))
        if model == "role":
            found += [s for s in index.sets if s.object_type.endswith("role") and s not in found]
        return found[::-1]
    return index.sets[::-1] if not noun or noun in ("result", "object", "one", "entry") else []


def _named(fact: Fact, found: Set, index: Index) -> set[str]:
    """The objects the fact's sentence names besides the set's own rows."""
    return _sentence_names(fact, index) - found.names


def _sentence_names(fact: Fact, index: Index) -> set[str]:
    """The objects the fact's sentence names: a site, a tenant, a device
    whose interfaces are counted, or a name no reply holds. A token no
    object's key starts with (`Index.object_starts`: most of a sentence's
    words) is passed by without joining it to the next ones."""
    toks = tokens(fact.scope)
    objects, starts = index.objects, index.object_starts
    named = set()
    for i in range(len(toks)):
        if identifier_like(toks[i].text) and toks[i].key not in index.names:
            named.add(toks[i].key)
        if toks[i].key not in starts:
            continue
        for joined, _ in joins(fact.scope, toks, i, 4, starts):
            if joined in objects and joined not in STATUS_WORDS and _lettered(joined):
                named.add(joined)
    return named


def _in_scope(
    fact: Fact,
    sets: Sequence[Set],
    index: Index,
    question: str = "",
    named: set[str] | None = None,
) -> list[Set]:
    """The sets the fact's sentence speaks of: every object the sentence
    names is one the call filtered on or one every row holds ("No devices
    are offline at DM-Columbus" is not about DM-Akron's devices), and every
    filter the call fetched it with is said in the sentence or the question
    ("There are 3 devices in NetBox" is not about the 3 devices of a call
    filtered on DM-Akron). The sentence is read once for all the sets (a
    table's every count is tried against each page of its type), and each
    set's names are one subset test (`Set.covers`). `named`: the sentence's
    names, when the caller has read them."""
    if not sets:
        return []
    if named is None:
        named = _sentence_names(fact, index)
    return [
        found for found in sets if named <= found.covers and _filters_said(fact, found, question)
    ]


def _filters_said(fact: Fact, found: Set, question: str) -> bool:
    """Each filter of the set's call is said: its value (a slug, a status, a
    role) is written in the fact's sentence or the question, or is the
    status the fact narrows by. A filter by id is taken as said: the answer
    names the object, not its id."""
    if not found.filters:
        return True  # most calls filter on nothing: the sentence need not be read
    said = key(f"{fact.scope} {fact.text} {question}")
    for value in found.filters.values():
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, (int, float)) or str(v).isdigit():
                continue
            if key(str(v)) == fact.qualifier or key(str(v)) in said:
                continue
            return False
    return True


def _lettered(name: str) -> bool:
    return any(c.isalpha() for c in name)


def _holds(row: Mapping[str, Any], status: str) -> bool:
    """The row's status is `status`."""
    return row_status(row) == key(status)


def _filtered_on(found: Set, value: str) -> bool:
    """The call fetched only rows holding `value` (filters={"status": "active"})."""
    return any(
        key(str(v)) == key(value) or (isinstance(v, list) and [key(str(x)) for x in v] == [value])
        for v in found.filters.values()
    )


def _own_count(fact: Fact, index: Index) -> Verdict | None:
    """A count said of a named object that its own record counts: "Initech
    has 2 devices" against Initech's `device_count`, never another row's."""
    model = _TYPES.get(fact.noun, "")
    if not model or fact.qualifier or fact.page:
        return None
    fields = (f"{model}_count", f"{fact.noun.replace(' ', '_')}_count")
    if not index.count_fields.intersection(fields):
        return None  # no record counts this type
    cut = fact.scope.find(fact.text)
    head = fact.scope[:cut] if cut >= 0 else fact.scope  # the object is named before it
    toks = tokens(head)
    for i in range(len(toks)):
        if toks[i].key not in index.rows and toks[i].key not in index.prefixes:
            continue  # no record's name starts here
        for joined, _ in joins(head, toks, i, 4):
            for source, row in index.rows.get(joined, []):
                held = next((row[f] for f in fields if type(row.get(f)) is int), None)
                if held is None:
                    continue
                status = "verified" if held == fact.number else "ungrounded"
                return Verdict(fact, status, source, f"the record of {joined} counts {held}")
    return None


def _count(fact: Fact, index: Index, question: str) -> Verdict | None:
    if fact.number is None:
        return None
    own = _own_count(fact, index)
    if own is not None:
        return own
    if fact.narrowed:
        return None  # "3 have no tenant": the number check reads it
    sets = _in_scope(fact, _sets(index, fact.noun), index, question)
    if not sets:
        if not _sets(index, fact.noun):
            in_replies = fact.number in index.counts or float(fact.number) in index.numbers
            if _TYPES.get(fact.noun) and in_replies:
                # a number of the replies equals it, but none counts this set
                # (a number no reply holds is left to the number pass: not in NetBox)
                return Verdict(fact, "unchecked", None, f"no reply holds a set of {fact.noun}s")
            return None
        if fact.number in index.counts:  # a number of the replies, but of another set
            return Verdict(fact, "unchecked", None, "no reply holds the set it counts")
        return Verdict(fact, "ungrounded", None, "no reply holds the set it counts, nor the number")
    n = fact.number
    if fact.qualifier:
        for found in sets:
            if _filtered_on(found, fact.qualifier):
                if found.count == n:
                    return Verdict(fact, "verified", found.source, "the set's count")
                continue
            if found.complete:
                held = found.statuses[key(fact.qualifier)]
                if held == n:
                    return Verdict(fact, "verified", found.source, f"{held} rows {fact.qualifier}")
        complete = [s for s in sets if s.complete or _filtered_on(s, fact.qualifier)]
        if not complete:
            return Verdict(fact, "unchecked", None, "the replies hold only a page of the set")
        return Verdict(fact, "ungrounded", complete[0].source, "the rows say another number")
    for found in sets:
        if found.count == n:
            return Verdict(fact, "verified", found.source, f"NetBox counts {found.count}")
        if fact.page and len(found.rows) == n:
            return Verdict(fact, "verified", found.source, "the rows of the page shown")
    paged = next((s for s in sets if not s.complete and len(s.rows) == n), None)
    if paged is not None:
        return Verdict(
            fact, "ungrounded", paged.source, f"a page's {n} rows; NetBox counts {paged.count}"
        )
    if fact.noun in ("", "result", "object", "one", "entry"):
        return None  # a count of something no set is: the number check reads it
    return Verdict(fact, "ungrounded", sets[0].source, f"NetBox counts {sets[0].count}")


def _members(fact: Fact, index: Index, question: str) -> Verdict | None:
    listed = {key(m) for m in fact.members}
    # the rows the list names, by set: the set naming most is the one it lists
    # (of those naming as many, the latest call's)
    rows = {at for name in listed for at in index.set_rows.get(name, ())}
    hits = Counter(at for at, _ in rows)
    if not hits:
        return None  # none of them is a row: the name check marks them
    place = max(hits, key=lambda at: (hits[at], at))
    found = index.sets[place]
    if fact.narrowed and not fact.qualifier:
        return None  # "two devices belong to X: A and B": the names are checked one by one
    if not found.complete:
        return Verdict(fact, "unchecked", found.source, "the replies hold only a page of the set")
    filtered = found.filtered
    scope = _named(fact, found, index) - filtered  # "DM-Akron's racks are", of all racks
    word = _modifier(fact)
    flagged = word in _FLAGS and any("enabled" in row for row in found.rows)
    if (word and word not in scope | filtered and word != fact.qualifier and not flagged) or (
        fact.qualifier
        and not _filtered_on(found, fact.qualifier)
        and not any("status" in row for row in found.rows)
    ):
        # "the core prefixes are": no reply says which rows are core
        reason = f"the replies cannot narrow the set to {word or fact.qualifier}"
        return Verdict(fact, "unchecked", found.source, reason)
    every_status = not fact.qualifier or _filtered_on(found, fact.qualifier)
    wanted = [
        row
        for row, values in zip(found.rows, found.values, strict=True)
        if (every_status or _holds(row, fact.qualifier))
        and scope <= values
        and (word not in _FLAGS or _said_of(row, word))
    ]
    # the set's rows the list names, found above; those the set's narrowing leaves out
    named = [found.rows[row_at] for row_at in sorted(r for at, r in rows if at == place)]
    kept = {id(row) for row in wanted}
    extra = [row for row in named if id(row) not in kept]
    own = found.names
    if any(m not in own and m in index.records for m in listed):
        # a member the set does not hold, though another reply names it
        return Verdict(fact, "ungrounded", found.source, "a member is not in the set")
    if not extra and (fact.narrowed or len(named) == len(wanted)):
        return Verdict(fact, "verified", found.source, f"the set has {len(wanted)}")
    return Verdict(
        fact, "ungrounded", found.source, f"NetBox's set has {len(wanted)}, the list {len(listed)}"
    )


def _modifier(fact: Fact) -> str:
    """The word a list's lead narrows its noun by ("the container prefixes",
    "the core routers"): a lowercase word just before the noun that is no
    determiner ("the", "all", "only") nor a possessive."""
    stem = fact.noun.split()[-1][:4] if fact.noun else ""
    m = (
        re.search(rf"(?<![\w'\u2019])([a-z][\w-]*)\s+{re.escape(stem)}", fact.scope)
        if stem
        else None
    )
    if m is None or m.group(1) in _DETERMINERS:
        return ""
    return m.group(1)


_DETERMINERS = frozenset(
    ["the", "all", "every", "only", "these", "those", "its", "their", "other", "of", "and", "our",
     "your", "both", "any", "each", "remaining", "listed", "following", "named", "total"]
)  # fmt: skip


def _said_of(row: Mapping[str, Any], value: str) -> bool:
    """The row holds the value a quantifier says: a status, or a flag
    ("enabled", "disabled": the row's `enabled`)."""
    if value in _FLAGS:
        return row.get("enabled") is (value == "enabled")
    return _holds(row, value)


def _said_count(found: Set, value: str) -> int:
    """How many rows of the set hold what `_said_of` reads, from the set's
    tallies (found once, not a pass over the rows per quantifier)."""
    if value in _FLAGS:
        return found.flags[value == "enabled"]
    return found.statuses[key(value)]


_FLAGS = ("enabled", "disabled")


def _quantifier(fact: Fact, index: Index, question: str) -> Verdict | None:
    if fact.value is None:
        return None
    field = "enabled" if fact.value in _FLAGS else "status"
    sets = [s for s in _sets(index, fact.noun) if any(field in r for r in s.rows)]
    if not sets:
        return None
    sentence = _sentence_names(fact, index)  # read once for every set tried
    for found in sets:
        if not fact.every and found.complete and _filtered_on(found, fact.value):
            # "no device at DM-Columbus is offline", from the list of offline devices
            named = sentence - found.names
            if named:
                there = any(named <= values for values in found.values)
                status = "ungrounded" if there else "verified"
                return Verdict(fact, status, found.source, f"the {fact.value} set's rows")
    scoped = _in_scope(fact, sets, index, question, sentence)
    if not scoped:
        # a part of the set (a call filtered on what the sentence does not say)
        # cannot prove "no device is offline", but one row of it can refute it
        for found in sets:
            named = sentence - found.names - found.filtered
            for row, values in zip(found.rows, found.values, strict=True):
                if named <= values and _said_of(row, fact.value) != fact.every:
                    return Verdict(fact, "ungrounded", found.source, "a record says otherwise")
        return Verdict(fact, "unchecked", None, "no reply holds the set it is said of")
    found = scoped[0]
    if not found.complete:
        return Verdict(fact, "unchecked", found.source, "the replies hold only a page of the set")
    said = _said_count(found, fact.value)
    true = said == len(found.rows) if fact.every else said == 0
    if true:
        return Verdict(fact, "verified", found.source, "every record of the set")
    return Verdict(fact, "ungrounded", found.source, "a record of the set says otherwise")


def _yesno(fact: Fact, index: Index, question: str) -> Verdict | None:
    """Yes or No against the question's own statement: the one object it
    names and the status it asks about ("Is dmi01-akron-sw02 offline?")."""
    if (m := _ANY.match(question)) and (noun := noun_after(" " + m.group("rest"), 0, OBJECT_NOUNS)):
        return _any(fact, index, question, noun)
    words = [t.key for t in tokens(question)]
    statuses = [w for w in words if w in STATUS_WORDS]
    named = [w for w in words if w in index.records]
    if len(statuses) != 1 or len(set(named)) != 1:
        return None  # the sentence after the Yes or No says what it means: read there
    records = [r for r in index.records[named[0]] if "status" in r.attrs]
    if not records:
        return Verdict(fact, "unchecked", None, "the record holds no status")
    truth = any(statuses[0] in r.attrs["status"] for r in records)
    negative = any(w in ("not", "n-t") for w in words) or "n't" in question.lower()
    if negative:
        truth = not truth
    status = "verified" if truth == fact.answer else "ungrounded"
    return Verdict(fact, status, records[0].source, f"the record of {named[0]} says so")


# "Does any device run NX-OS?", "Is there a router at DM-Columbus?": a yes/no about a set
_ANY = re.compile(
    r"\s*(?:does|do|is|are|has|have)\s+(?:there\s+)?(?:any|a|an|some)\s+(?P<rest>.*)",
    re.IGNORECASE | re.DOTALL,
)


def _any(fact: Fact, index: Index, question: str, noun: str) -> Verdict:
    """A Yes or No to "is there any X that ...": the objects the question
    names (a platform, a site; the noun itself when it is a role, "router")
    are what a record of the set must hold. Verified against a named
    object's own count of the set ("NX-OS": device_count 0), or against
    the set's rows: one row holding them says yes, the whole set (fetched
    as the question says) holding none says no; else unchecked."""
    model = _TYPES.get(noun, "")
    words = {t.key for t in tokens(question)}
    # the names a reply holds, and a status asked of the set even when no row has it
    wanted = (_question_names(question, index) | (words & STATUS_WORDS)) - {noun}
    if model == "device" and noun != "device":
        if noun not in index.attr_fields:
            return Verdict(fact, "unchecked", None, f"no reply says which devices are {noun}s")
        wanted.add(noun)  # "a router": a device whose role is Router
    flags = words & set(_FLAGS)  # "Is any interface of sw01 disabled?"
    unknown = [t.text for t in tokens(question) if _unknown(t, index)]
    if unknown or len(flags) > 1 or not (wanted or flags):
        return Verdict(fact, "unchecked", None, "the question asks what no reply can tell")
    if len(wanted) == 1 and not flags:
        (only,) = wanted
        for source, row in index.rows.get(only, []):
            held = row.get(f"{model}_count")
            if type(held) is int:
                return _yes_if(fact, held > 0, source, f"the record of {only} counts {held}")
    for found in _sets(index, noun):
        filtered = found.filtered
        rest = wanted - filtered
        if flags and not all("enabled" in row for row in found.rows):
            continue
        if any(
            rest <= values and all(_said_of(row, f) for f in flags)
            for row, values in zip(found.rows, found.values, strict=True)
        ):
            return _yes_if(fact, True, found.source, "a record of the set holds it")
        # none holds it: "no" only of values a row shows as row_values reads them (an
        # object's name, a status, the role), never a nested field's (an address)
        sure = all(w in index.rows or w in STATUS_WORDS or w == noun for w in rest)
        if sure and found.complete and _filters_said(fact, found, question):
            return _yes_if(fact, False, found.source, "no record of the set holds it")
    return Verdict(fact, "unchecked", None, "no reply holds the whole set it asks about")


def _unknown(token: Token, index: Index) -> bool:
    """A name in the question no reply holds ("Initech", "sw99"): what the
    question asks cannot be looked for in the rows."""
    capital = token.start > 0 and token.text[:1].isupper()
    if not (capital or identifier_like(token.text)) or token.key in index.names:
        return False
    return token.key not in index.words and token.key.removesuffix("s") not in _NOT_NAMES


# capitalised words of a question that name no object: object types, and these
_NOT_NAMES = frozenset(_TYPES) | {"ip", "netbox", "id", "i"}


def _question_names(question: str, index: Index) -> set[str]:
    """The objects and values a question names that some reply holds as a
    record or in a record's field ("NX-OS", "DM-Columbus", "offline"), by
    their keys."""
    toks = tokens(question)
    named = set()
    for i in range(len(toks)):
        for joined, _ in joins(question, toks, i, 4):
            if _lettered(joined) and (
                joined in index.rows or index.attr_fields.get(joined, set()) - IDENTITY_FIELDS
            ):
                named.add(joined)
    return named


def _yes_if(fact: Fact, truth: bool, source: int | None, reason: str) -> Verdict:
    status = "verified" if truth == fact.answer else "ungrounded"
    return Verdict(fact, status, source, reason)


def _has(fact: Fact, index: Index, question: str) -> Verdict | None:
    """A field said set or empty, against the subject's own record(s) (those
    of the object it is said to be on, when named): no record holding the
    field -> no verdict (the reply did not fetch it)."""

    rows = index.rows.get(key(fact.subject or ""), [])
    if fact.on:
        on = key(fact.on)
        rows = [(s, r) for s, r in rows if on in row_values(r)] or rows
    fields = FIELD_WORDS.get(fact.field, ())
    seen = [(s, r, f) for s, r in rows for f in fields if f in r]
    if not seen:
        return None
    said = bool(fact.answer)
    held = [s for s, r, f in seen if _set(r[f]) == said]
    if held:
        return Verdict(fact, "verified", held[0], f"the record of {fact.subject} says so")
    return Verdict(fact, "ungrounded", seen[0][0], f"the record of {fact.subject} says otherwise")


# Field words an answer uses for a NetBox field of another name.
_FIELD_NAMES = {
    "primary ip": ("primary_ip", "primary_ip4", "primary_ip6"), "ip": ("primary_ip",),
    "facility code": ("facility",), "route distinguisher": ("rd",), "rd": ("rd",),
    "serial number": ("serial",), "type": ("type", "device_type"), "model": ("device_type",),
    "role": ("role",), "vid": ("vid",), "id": ("id",), "asset tag": ("asset_tag",),
}  # fmt: skip


def _field(fact: Fact, index: Index, question: str) -> Verdict | None:
    """A field's value said of an object, against that object's own record:
    no verdict unless the record has the field."""
    names = _FIELD_NAMES.get(fact.field, (fact.field.replace(" ", "_"),))
    rows = index.rows.get(key(fact.subject or ""), [])
    if not fact.value:
        return None
    prose = fact.text != fact.value  # a sentence, not a table's cell
    if not rows and prose and index.payloads:
        return Verdict(fact, "unchecked", None, f"no reply holds the record of {fact.subject}")
    seen = [(s, r[f]) for s, r in rows for f in names if f in r and r[f] not in (None, "")]
    empty = [s for s, r in rows for f in names if f in r and r[f] in (None, "")]
    if not seen:
        if empty and prose:
            return Verdict(fact, "ungrounded", empty[0], f"the record of {fact.subject} has none")
        return None
    said = key(fact.value)
    for source, held in seen:
        forms = [held.get(k) for k in _SHOWN] if isinstance(held, Mapping) else [held]
        for form in forms:
            if not isinstance(form, (str, int)) or isinstance(form, bool):
                continue
            text = key(str(form))
            day = str(form)[:10] if _TIMESTAMP.match(str(form)) else None  # a date of it
            if (
                text == said
                or text.startswith(said + "-")
                or said.startswith(text + "-")
                or (day == fact.value)
            ):
                return Verdict(fact, "verified", source, f"the record of {fact.subject} says so")
    return Verdict(fact, "ungrounded", seen[0][0], f"the record of {fact.subject} says otherwise")


def _measure(fact: Fact, index: Index, question: str) -> Verdict | None:
    """A number said to be a field of an object ("A C9300-48P is 7 U tall")
    against that field of the object's own record: another record's field
    or any other number in the replies never grounds it; no record of the
    object holding the field leaves it unchecked."""
    rows = index.rows.get(key(fact.subject or ""), [])
    said = float(fact.value or "nan")
    seen = [
        (source, row[fact.field])
        for source, row in rows
        if type(row.get(fact.field)) in (int, float)
    ]
    if not seen:
        reason = f"no reply holds the {fact.field} of {fact.subject}"
        return Verdict(fact, "unchecked", None, reason)
    for source, held in seen:
        if held == said:
            return Verdict(fact, "verified", source, f"the record of {fact.subject} says so")
    return Verdict(
        fact, "ungrounded", seen[0][0], f"the record of {fact.subject} says {seen[0][1]:g}"
    )


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT")
_SHOWN = ("address", "display", "name", "slug", "label", "value")


def _set(value: Any) -> bool:
    """A field is set: a flag that is true, or any value that is not empty."""
    if isinstance(value, bool):
        return value
    return value not in (None, "", [], {})


def _value(fact: Fact, index: Index, question: str) -> Verdict | None:
    """A status said of an object the question named but no reply holds
    ("What is DM-Cleveland's status?" -> "DM-Cleveland is decommissioning"
    when the sites fetched hold none) is not in NetBox: the name pass
    excuses the operator's names, so the value is what gets marked. Of an
    object a reply holds, the value pass of grounding.py reads it beside
    its name; a name neither holds is marked by the name pass."""
    name = key(fact.subject or "")
    if not index.payloads or not name or name in index.names or name in index.words:
        return None
    if name not in _keys_of(question):
        return None
    return Verdict(fact, "ungrounded", None, f"no reply holds {fact.subject}")


@functools.lru_cache(maxsize=4)
def _keys_of(question: str) -> frozenset[str]:
    """The keys of a question's words, read once for the question: each
    value fact of an answer (thousands in a long one) asks whether the
    question names its subject."""
    return frozenset(t.key for t in tokens(question))


def _actor(fact: Fact, index: Index, question: str) -> Verdict | None:
    """Who made a change: a user some reply names (the change log's
    `user_name`), or none."""
    if not index.payloads:
        return None
    source = index.names.get(key(fact.value or ""))
    if source is not None:
        return Verdict(fact, "verified", source, "a reply names this user")
    return Verdict(fact, "ungrounded", None, "no reply names this user")


_VERIFY = {
    "value": _value,
    "actor": _actor,
    "count": _count,
    "members": _members,
    "quantifier": _quantifier,
    "yesno": _yesno,
    "has": _has,
    "field": _field,
    "measure": _measure,
}  # a value of a named object: the grounding check's value pass reads it beside its name
