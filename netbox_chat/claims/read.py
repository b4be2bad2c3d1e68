"""Read (stage 1 of the pipeline): an answer as typed facts, each with its
span. Pure string work on the answer and the question: no NetBox.

- *count*: a number of a set ("DM-Akron has 4 racks", "2 of them are
  offline"), with the status that narrows it and whether the answer says it
  counts a page ("the 5 most recent");
- *members*: the objects a list names, when it is said to be the set ("the
  routers are A and B", a list after "Devices at DM-Akron:");
- *quantifier*: a value said of every object of a set or of none ("no
  device is offline", "all are active");
- *yesno*: the Yes or No that answers a yes/no question;
- *value*: a status said of a named object ("sw02 is offline").

Names and numbers as tokens (reader.py) are read by the grounding check as
well; facts are what it verifies against the records beyond them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, NamedTuple

from netbox_chat.claims.reader import (
    OBJECT_NOUNS,
    TOKEN,
    AnyCase,
    AnyCaseWords,
    Shape,
    by_position,
    identifier_like,
    is_address,
    key,
    negated,
    noun_after,
    numbers_outside,
    opened_by,
    plain_answer,
    question_noun,
    shape,
    tokens,
)

# A name a verb, "on" or "'s" follows, as one atomic group: a shorter name
# than the longest one the token pattern reads ends before a character of the
# name itself (no space, no quote), so nothing could follow it; trying each
# shorter one at every word cost the patterns below half their time.
_NAME = rf"(?>{TOKEN.pattern})"

# NetBox's status choices a sentence says of an object or a set (grounding.STATUSES's words).
STATUS_WORDS = frozenset(
    ["active", "offline", "planned", "staged", "failed", "inventory", "decommissioning",
     "reserved", "deprecated", "available", "provisioning", "deprovisioning", "connected",
     "decommissioned"]
)  # fmt: skip


class Fact(NamedTuple):
    """One fact of an answer. `kind` says which of the fields below it uses.
    (A tuple, like the reader's `Number`: a list or a table states thousands,
    and a frozen dataclass of these fields costs several times the build.)"""

    kind: str  # "count" | "members" | "quantifier" | "yesno" | "value" | "measure" | ...
    text: str
    start: int
    end: int
    subject: str | None = None  # value: the object named
    value: str | None = None  # value, quantifier: the status said
    number: int | None = None  # count
    noun: str = ""  # count, members, quantifier: the object noun of the set ("device")
    qualifier: str = ""  # count, members: a status narrowing the set ("4 active devices")
    page: bool = False  # count: the answer says it counts a page, not the set
    narrowed: bool = False  # count, members: a verb narrows the set ("3 have no tenant")
    scope: str = ""  # the sentence the fact stands in: the objects it is said within
    members: tuple[str, ...] = ()
    answer: bool | None = None  # yesno
    every: bool | None = None  # quantifier: True for all/every, False for no/none
    field: str = ""  # has, field, measure: the field said ("has no cable", "7 U tall": u_height)
    on: str = ""  # has: the object the subject belongs to ("eth1 on dmi01-akron-sw01")


def _defaults(first: str, last: str) -> tuple[Any, ...]:
    """Fact's fields from `first` to `last`, at their defaults: a fact an
    answer holds thousands of (a table's cells, a list's counts) is built by
    position (`by_position`), the fields it leaves alone taken from here."""
    names = Fact._fields
    return tuple(Fact._field_defaults[f] for f in names[names.index(first) : names.index(last) + 1])


_AFTER_SCOPE = _defaults("members", "on")  # a count's fields end at its scope
_COUNT_TO_EVERY = _defaults("number", "every")  # a table cell's are a value's and a field
_AFTER_VALUE = _defaults("number", "on")  # a value's fields end at its value


_PAGE_WORDS = "first|last|top|latest|newest|oldest|showing|shows?|returned|listed|fetched"
_PAGE_BEFORE = re.compile(  # the look-ahead: the words' first letters, checked at once
    rf"\b(?=[flntors])(?:{_PAGE_WORDS})\s+(?:the\s+)?$", re.IGNORECASE
)
_PAGE_AFTER = re.compile(
    r"\s+(?:\w+\s+){0,2}?(?:most\s+recent|latest|newest|oldest|shown|listed|returned|here|below|"
    r"on\s+(?:this|the\s+first)\s+page)\b|\s+of\s+\d",
    re.IGNORECASE,
)
# A word either needs ("show" is in "shows", "showing", "shown"): an answer
# without one says no count is of a page.
_PAGE_WORD = AnyCaseWords(
    ["first", "last", "top", "latest", "newest", "oldest", "show", "returned", "listed",
     "fetched", "recent", "here", "below", "page", "of"]
)  # fmt: skip
_STATUS_AFTER = re.compile(
    r"\s*(?:[a-z]+\s+){0,3}?(?:of\s+them\s+|of\s+these\s+)?(?:are|is|were|was)\s+(\w+)"
)
_YES_NO = re.compile(r"\s*(yes|no)\b", re.IGNORECASE)
_YES_NO_QUESTION = re.compile(
    r"\s*(?:is|are|does|do|did|has|have|was|were|can|could|will)\b", re.IGNORECASE
)
_STATUS = "|".join(sorted(STATUS_WORDS))
_QUANTIFIED = re.compile(  # the look-ahead: the first letters, checked at once;
    # "No," is the answer to a yes/no question, not a quantifier ("No, r640-17 is offline")
    rf"\b(?=[aen])(?:\b(?P<q>all|every|each|none|no(?!\s*[,;!]))\b(?P<mid>[^.;:\n]{{0,48}}?)\b(?:is|are)\s+"
    rf"(?P<neg>not\s+)?(?P<v>{_STATUS}|enabled|disabled)\b"
    rf"|\b(?P<q2>no)\s+(?P<v2>{_STATUS})\s+(?P<mid2>[a-z]+))",
    re.IGNORECASE,
)
_QUANTIFIER_WORDS = re.compile("all|every|each|no")  # a quantifier's first word ("none": "no")
_EXCEPTION = re.compile(r"\b(?:but|except|besides|other\s+than|apart\s+from)\b", re.I)
_SUBSET = re.compile(
    r"\b(?:some|e\.g|including|such\s+as|among|example|examples|few|several|like|first|top|"
    r"last|latest|sample|other|others|also)\b",
    re.IGNORECASE,
)
_WHOLE = re.compile(r"(?:\b(?:are|is)\b|:)\s*$", re.IGNORECASE)
# a list runs to the sentence's end: a dot inside an address or a name ("10.10.0.0/16") is no end
# (runs of other characters taken at once: a step per character cost the
# pattern half its time)
_ITEMS = r"(?:[^.;\n]+|\.(?=\w))+"
_INLINE_LIST = re.compile(rf"\b(?:are|is)\s*:?\s+(?P<list>{_ITEMS})|:\s*(?P<list2>{_ITEMS})")


def read(answer: str, question: str = "") -> list[Fact]:
    """The facts `answer` states, in order, in answer to `question`."""
    text = plain_answer(answer)
    blocks = shape(text)
    facts = _counts(text, blocks) + _quantifiers(text) + _members(text, blocks, question)
    facts += _values(text) + _fields(text) + _field_values(text) + _cells(text, blocks)
    facts += _actors(text) + _measures(text)
    said_of_sets = [(f.start, f.end) for f in facts if f.kind == "quantifier"]
    facts = [  # "No device at DM-Columbus is offline" says nothing of DM-Columbus
        f for f in facts
        if not (f.kind == "value" and any(s <= f.start < e for s, e in said_of_sets))
    ]  # fmt: skip
    if question and _YES_NO_QUESTION.match(question) and (m := _YES_NO.match(text)):
        yes = m.group(1).lower() == "yes"
        facts.append(Fact("yesno", m.group(1), m.start(1), m.end(1), answer=yes))
    return sorted(facts, key=lambda f: f.start)


def _counts(text: str, blocks: Shape) -> list[Fact]:
    facts = []
    paging: bool | None = None  # looked for once, at the first count
    for n in numbers_outside(text, tuple(blocks.numbering)):
        integer = n.integer
        if integer is None or n.context or n.percent or not (n.noun or n.subcount):
            continue
        after = text[n.end : n.end + 60]
        qualifier = ""
        first = after.split(maxsplit=1)[:1]  # its first word
        if first and (word := first[0].lower()) in STATUS_WORDS:  # "4 active devices"
            qualifier = word
        elif (m := _STATUS_AFTER.match(after)) and m.group(1).lower() in STATUS_WORDS:
            qualifier = m.group(1).lower()  # "2 of them are offline"
        if n.subcount and not (n.noun or qualifier):
            continue  # "3 have no tenant": a count of rows, read by the number check
        if paging is None:
            paging = _PAGE_WORD.said_in(text)
        page = paging and bool(
            _PAGE_BEFORE.search(text[max(0, n.start - 30) : n.start]) or _PAGE_AFTER.match(after)
        )
        narrowed = not (qualifier or page) and (n.subcount or _narrowing(text, n))
        facts.append(  # by position: a list of thousands of counts built by keyword cost a tenth
            by_position(Fact, ("count", n.text, n.start, n.end, None, None, integer, n.noun,
                               qualifier, page, narrowed, _sentence(text, n.start), *_AFTER_SCOPE))
        )  # fmt: skip
    return facts


def _quantifiers(text: str) -> list[Fact]:
    facts = []
    for m in opened_by(_QUANTIFIED, _QUANTIFIER_WORDS, text):
        if _EXCEPTION.search(m.group()):
            continue  # "all devices but sw02 are active": the named one is read on its own
        if m.group("q"):
            q, value, mid = m.group("q").lower(), m.group("v").lower(), m.group("mid")
            every = q in ("all", "every", "each")
            if m.group("neg"):
                every = not every if every else every
                if q in ("none", "no"):
                    continue  # "none is not active": read no further
                every = False
        else:
            q, value, mid, every = "no", m.group("v2").lower(), m.group("mid2"), False
        noun = noun_after(" " + mid, 0, OBJECT_NOUNS) if mid else ""
        facts.append(
            Fact("quantifier", m.group(), m.start(), m.end(), value=value, noun=noun, every=every,
                 scope=_sentence(text, m.start()))
        )  # fmt: skip
    return facts


def _members(text: str, blocks: Shape, question: str = "") -> list[Fact]:
    """Lists said to be a set: list items under a lead line ending in a colon
    (or any list answering "Which VLANs ...?"), and "the routers are A and B"
    in a sentence. A list called a sample ("some of them", "e.g.", "the first
    5") is no claim about the set."""
    facts = []
    asked = _ASKS_LIST.match(question) and not _SUBSET.search(question)
    groups: list[list[tuple[int, int]]] = []
    for start, end in _split_run_in(blocks):
        if groups and text[groups[-1][-1][1] : start].count("\n") <= 1:
            groups[-1].append((start, end))
        else:
            groups.append([(start, end)])
    for group in groups:
        line_start = text.rfind("\n", 0, max(0, group[0][0] - 1))
        lead_end = max(0, line_start)
        lead = text[text.rfind("\n", 0, max(0, lead_end - 1)) + 1 : lead_end].strip()
        if not (lead.endswith(":") or (asked and not lead)) or _SUBSET.search(lead):
            continue
        names = tuple(n for s, e in group if (n := _first_name(text[s:e], bool(asked))))
        noun = _lead_noun(lead) or (question_noun(question) if asked else "")
        whole = _whole(lead, noun) or bool(asked and noun in _TYPE_NOUNS)
        if len(names) >= 2 and len(names) == len(group):
            facts.append(
                Fact("members", lead or question, group[0][0], group[-1][1], members=names,
                     qualifier=_status_in(lead), noun=noun, narrowed=not whole,
                     scope=lead)
            )  # fmt: skip
    if asked:
        facts += _table_members(text, blocks, question)
    for segment in blocks.segments:
        if segment.kind != "sentence":
            continue
        sentence = text[segment.start : segment.end]
        low = sentence.lower()
        if "only" in low:  # the patterns start with a name: tried only where their word is
            facts += _only(sentence, segment.start)
        if "holds" in low or "contains" in low or "hosts" in low:
            facts += _held(sentence, segment.start)
        # its words and a separator, as written, checked before it is searched (most
        # sentences of a long answer have none)
        listing = ("is" in sentence or "are" in sentence or ":" in sentence) and (
            "," in sentence or "and" in sentence
        )
        m = _INLINE_LIST.search(sentence) if listing else None
        if not m:
            continue
        listed = m.group("list") or m.group("list2") or ""
        parts = [p.strip().strip("*`").strip() for p in _LIST_SEPARATOR.split(listed)]
        if len(parts) < 2:
            continue  # one thing said: no list (its lead and noun are not read)
        lead = sentence[: m.start()]
        if _SUBSET.search(lead) or negated(sentence, m.start()):
            continue
        said = lead + (" are" if m.group("list") else "")  # "X are: A, B" or "X: A, B"
        noun = _lead_noun(said)
        whole = _whole(said, noun)  # "The platforms are IOS-XE and Junos": any names
        # every part a name, or no list (read up to the first that is not)
        if all(p and (_nameish(p.split()[0]) or (whole and p[0].isupper())) for p in parts):
            start = segment.start + m.start()
            facts.append(
                Fact("members", sentence.strip(), start, segment.end, members=tuple(parts),
                     qualifier=_status_in(lead), noun=noun, narrowed=not whole, scope=lead)
            )  # fmt: skip
    return facts


def _table_members(text: str, blocks: Shape, question: str) -> list[Fact]:
    """A table answering "Which sites ...?" / "List all sites." whose first
    column is headed by that object type: its first cells are the set."""
    facts = []
    groups: list[list[Any]] = []
    for row in blocks.rows:
        if groups and text[groups[-1][-1].end : row.start].count("\n") <= 1:
            groups[-1].append(row)
        else:
            groups.append([row])
    for group in groups:
        header = group[0].cells[0][0] if group[0].cells else ""
        noun = noun_after(" " + header, 0, OBJECT_NOUNS)
        names = tuple(n for row in group if row.cells and (n := row.cells[0][1].strip()))
        if noun in _TYPE_NOUNS and noun == question_noun(question) and len(names) >= 2:
            facts.append(
                Fact("members", question, group[0].start, group[-1].end, members=names, noun=noun,
                     scope=question)
            )  # fmt: skip
    return facts


_HELD = re.compile(
    rf"(?P<s>{_NAME})\s+(?:holds|contains|hosts)\s+(?P<list>[^;:\n]+?)(?=\.?\s*$|\.\s|[;:\n])",
    re.IGNORECASE,
)


def _held(sentence: str, at: int) -> list[Fact]:
    """What an object is said to hold, listed: "VRF Blue holds 10.0.0.0/24,
    10.1.0.0/24 and 192.168.0.0/24" says those are all it holds."""
    facts = []
    for m in _HELD.finditer(sentence):
        parts = [p.strip().strip("*`").strip() for p in _LIST_SEPARATOR.split(m.group("list"))]
        if len(parts) >= 2 and all(p and _nameish(p.split()[0]) for p in parts):
            facts.append(
                Fact("members", m.group(), at + m.start(), at + m.end(), members=tuple(parts),
                     scope=sentence[: m.end("s")])
            )  # fmt: skip
    return facts


def _nameish(token: str) -> bool:
    return identifier_like(token) or is_address(token)


_ONLY = re.compile(
    rf"\bthe\s+only\s+(?P<lead>[^.;:\n]{{1,60}}?)\s+(?:is|was)\s+(?P<m>{TOKEN.pattern}(?:,\s+Inc)?)"
    rf"|(?P<s>{_NAME})\s+[a-z]+s\s+only\s+(?P<m2>{TOKEN.pattern})",
    re.IGNORECASE,
)


def _only(sentence: str, at: int) -> list[Fact]:
    """A list of one: "The only tenant is Dunder-Mifflin", "PP-A feeds only
    PF-A1" say the set has that one member (no fact when it is negated)."""
    facts = []
    for m in _ONLY.finditer(sentence):
        if negated(sentence, m.start()):
            continue
        member = m.group("m") or m.group("m2")
        lead = m.group("lead") or m.group("s")
        noun = _lead_noun(m.group("lead") or "")
        facts.append(
            Fact("members", m.group(), at + m.start(), at + m.end(), members=(member,), noun=noun,
                 scope=lead)
        )  # fmt: skip
    return facts


def _split_run_in(blocks: Shape) -> list[tuple[int, int]]:
    """The list items, a numbered list run into one line ("1. VLAN 100 2.
    VLAN 200") split at its numbers."""
    inside = sorted(blocks.numbering)
    out = []
    at = 0
    for item in blocks.items:
        start = item.start
        while at < len(inside) and inside[at][0] < item.start:
            at += 1
        while at < len(inside) and inside[at][1] <= item.end:
            out.append((start, inside[at][0]))
            start = inside[at][1] + 1
            at += 1
        out.append((start, item.end))
    return out


_NARROWING = frozenset(
    ["have", "has", "belong", "belongs", "lack", "lacks", "use", "uses", "run", "runs", "carry",
     "are", "is", "were", "was", "do", "does", "sit", "show", "match", "remain", "need", "with",
     "without", "that", "which", "whose", "where", "in", "on", "behind", "connected", "assigned",
     "named", "called"]
)  # fmt: skip


def _narrowing(text: str, number: Any) -> bool:
    """Words after the counted noun narrow the set ("2 devices have no
    tenant", "4 devices with no rack"): the set's count is not its number.
    The noun is the first of the first five words or stops that starts with
    its stem; the two after it say whether it is narrowed."""
    m = _noun_and_two_after(number.noun.split()[-1][:4]).match(
        text[number.end : number.end + 80].lower()
    )
    if not m:
        return False
    if m.groups() in _WHOLE_SET_AFTER:
        return False  # "3 devices in NetBox": the whole set, no narrower
    return m.group(1) in _NARROWING


_WHOLE_SET_AFTER = (("in", "netbox"), ("in", "total"))


# A word (taken whole: no shorter word is tried) or a stop, after what is neither.
_GAP = r"[^a-z.,;:!?]*"
_WORD_OR_STOP = r"(?>[a-z][\w\-]*)|[.,;:!?]"


@lru_cache(maxsize=64)
def _noun_and_two_after(stem: str) -> re.Pattern[str]:
    """The words up to the first that starts with `stem` (at most four
    before it), then the two words or stops after it (groups 1 and 2), in
    one match: matching seven words to look them up one by one cost
    `_narrowing` twice the time."""
    return re.compile(
        rf"(?:{_GAP}(?:{_WORD_OR_STOP})){{0,4}}?{_GAP}{re.escape(stem)}[\w\-]*"
        rf"(?:{_GAP}({_WORD_OR_STOP}))?(?:{_GAP}({_WORD_OR_STOP}))?"
    )


def _sentence(text: str, at: int) -> str:
    """The part of the sentence (or line) around offset `at` that says which
    set a fact is about: from its start to the first comma, colon or
    semicolon after `at` ("DM-Akron has 17 devices, among them A and B":
    the names listed after the comma are members, not the set's scope)."""
    floor = max(0, at - 300)
    stop = at
    while (dot := text.rfind(". ", floor, stop)) >= 0 and _abbreviation(text, dot):
        stop = dot  # "Dunder-Mifflin, Inc. has 6 devices": an abbreviation, not a sentence's end
    # never further back than the 300 characters looked at: a long line with
    # no sentence's end taken from its start made each fact cost the line
    low = max(dot + 1, text.rfind("\n", floor, at) + 1, floor)
    end = _SCOPE_END.search(text, at, at + 300)  # the first of them: one search, not five
    return text[low : end.start() if end else at + 300]


_SCOPE_END = re.compile(r"\. |[\n,:;]")


_ABBREVIATION = re.compile(r"(?<![\w-])[A-Z][a-z]{1,3}$")


def _abbreviation(text: str, dot: int) -> bool:
    """The dot at `dot` ends a short capitalised word ("Inc", "Ltd", "Corp")
    and a lowercase word follows: no sentence ends there."""
    return text[dot + 2 : dot + 3].islower() and bool(
        _ABBREVIATION.search(text, max(0, dot - 5), dot)
    )


def _whole(lead: str, noun: str) -> bool:
    """The lead says the list is the set itself ("The devices at DM-Akron
    are", "All VLANs:"), of a noun that is an object type (not "routers", a
    role): a member more or less is then a wrong list."""
    return bool(_WHOLE_SET.search(lead)) and noun in _TYPE_NOUNS


_WHOLE_SET = re.compile(r"\b(?:are|all|every|only)\b", re.IGNORECASE)
_TYPE_NOUNS = frozenset(
    ["device", "site", "rack", "tenant", "vlan", "vrf", "prefix", "cluster", "circuit",
     "provider", "platform", "region", "location", "interface", "virtual machine", "vm",
     "ip address", "cable", "contact", "tag", "manufacturer", "power feed", "power panel",
     "device type", "aggregate", "asn", "module"]
)  # fmt: skip


_LIST_SEPARATOR = re.compile(r",\s*(?:and\s+|or\s+)?|\s+and\s+")


def _first_name(item: str, asked: bool = False) -> str:
    """The object a list item names: its first token, when only a name looks
    so (any first word, when the question asked for a list: "- mgmt (100)")."""
    m = TOKEN.search(item)
    if m and m.group().lower() == "vlan" and (n := TOKEN.match(item, m.end() + 1)):
        return n.group()  # "VLAN 100": the VLAN its id names
    return m.group() if m and (asked or identifier_like(m.group())) else ""


_ASKS_LIST = re.compile(r"\s*(?:which|list|what)\b", re.IGNORECASE)


def _lead_noun(lead: str) -> str:
    """The object noun a list's lead names ("The devices at DM-Akron are")."""
    for m in _LETTER_RUN.finditer(lead):
        noun = noun_after(" " + lead[m.start() :], 0, OBJECT_NOUNS)
        if noun:
            return noun
    return ""


def _status_in(text: str) -> str:
    return next((w for w in _LOWER_RUN.findall(text.lower()) if w in STATUS_WORDS), "")


_LETTER_RUN = re.compile(r"[A-Za-z]+")
_SPACES = re.compile(r"\s+")
_LOWER_RUN = re.compile(r"[a-z]+")


# A subject is tried only where a word starts (no letter or digit before): a
# name followed by a verb ends where its run of name characters ends, so any
# later start in the same word gives the same match or none, and trying each
# costs the square of the word per word (seconds for one long line of prose).
_WORD_START = r"(?<![^\W_])"

_VALUE = re.compile(
    rf"{_WORD_START}(?P<s>{_NAME})\s+(?:is|are|was|were)\s+(?:currently\s+|still\s+|now\s+)?"
    rf"(?P<neg>not\s+)?(?P<v>{_STATUS})\b",
    re.IGNORECASE,
)


def _values(text: str) -> list[Fact]:
    """A status said of a named object ("dmi01-akron-sw02 is offline")."""
    facts = []
    for m in _matches(_VALUE, text, ("is", "are", "was", "were")):
        subject = m.group("s")
        if m.group("neg") or not identifier_like(subject):
            continue
        facts.append(  # by position, as a count is: a list of names states thousands
            by_position(Fact, ("value", m.group(), m.start(), m.end(), subject,
                               m.group("v").lower(), *_AFTER_VALUE))
        )  # fmt: skip
    return facts


# What "has a X" / "is X" says of an object's field, and the fields that hold it.
FIELD_WORDS = {
    "cable": ("cable",), "cabled": ("cable",), "connected": ("cable",), "tenant": ("tenant",),
    "primary ip": ("primary_ip", "primary_ip4", "primary_ip6"), "rack": ("rack",),
    "platform": ("platform",), "route distinguisher": ("rd",), "rd": ("rd",),
    "description": ("description",), "serial": ("serial",), "enabled": ("enabled",),
    "disabled": ("enabled",), "in a rack": ("rack",), "assigned": ("assigned_object",),
}  # fmt: skip
_HAS = re.compile(
    rf"{_WORD_START}(?P<s>{_NAME})(?:\s+on\s+(?P<on>{_NAME}))?\s+"
    r"(?:(?:has|have)\s+(?P<a>no|a|an|one)\s+(?P<f>cable|tenant|primary\s+ip|rack|platform|"
    r"route\s+distinguisher|rd|description|serial)"
    r"|(?:is|are)\s+(?P<neg>not\s+)?(?P<g>cabled|enabled|disabled|connected|in\s+a\s+rack))\b",
    re.IGNORECASE,
)


def _fields(text: str) -> list[Fact]:
    """A field said set or empty: "Gi0/0/0 has no cable", "sw02 has a primary
    IP", "eth0 on sw01 is enabled", "sw02 is not in a rack". `answer` holds
    whether the field is said to be set (enabled: true)."""
    facts = []
    # the lines holding a word each match holds: "has"/"have", or the field's
    # own word after "is"/"are" (any line has an "is"; few say "enabled")
    for m in _matches(_HAS, text, ("has", "have", "abled", "connected", "rack")):
        if m.group("f"):
            word, present = re.sub(r"\s+", " ", m.group("f").lower()), m.group("a").lower() != "no"
        else:
            word = re.sub(r"\s+", " ", m.group("g").lower())
            present = (word != "disabled") != bool(m.group("neg"))
        facts.append(
            Fact("has", m.group(), m.start(), m.end(), subject=m.group("s"), field=word,
                 answer=present, on=m.group("on") or "")
        )  # fmt: skip
    return facts


# the value after "has the route distinguisher": a token with a digit, a colon, a slash
# or a capital, so the field's own next word ("distinguisher") is never read as it
_A_VALUE = r"(?=\S*(?:[\d:/]|(?-i:[A-Z])))"
_FIELD_VALUE = re.compile(
    rf"{_WORD_START}(?P<s>{_NAME})(?:'s|\u2019s)\s+(?P<f>[a-z][a-z ]{{0,28}}?)\s+"
    rf"(?:is|was|lands\s+on|terminates\s+(?:at|on)|ends\s+(?:at|on))\s+"
    rf"(?:set\s+to\s+)?(?P<v>{TOKEN.pattern})"
    rf"|{_WORD_START}(?P<s2>{_NAME})\s+has\s+(?:the|a|an)\s+"
    rf"(?P<f2>[a-z][a-z ]{{0,28}}?)\s+(?:of\s+)?"
    rf"(?P<v2>{_A_VALUE}(?:{TOKEN.pattern}))"
    rf"|{_WORD_START}(?P<s3>{_NAME})\s+(?:is|was)\s+(?P<f3>named|called)\s+(?P<v3>{TOKEN.pattern})"
    rf"|{_WORD_START}(?P<s4>{_NAME})\s+was\s+(?P<f4>created|last\s+updated)\s+on\s+"
    rf"(?P<v4>\d{{4}}-\d\d-\d\d)",
    re.IGNORECASE,
)


def _field_values(text: str) -> list[Fact]:
    """A field's value said of an object: "sw01's primary IP is 10.1.0.1/24",
    "VRF Red has the route distinguisher 65000:1", "DM-Butte has the ID 16"."""
    facts = []
    for m in _matches(_FIELD_VALUE, text, ("'s", "\u2019s", "has", "named", "called", " on ")):
        subject = m.group("s") or m.group("s2") or m.group("s3") or m.group("s4")
        field = m.group("f") or m.group("f2") or m.group("f4") or "name"
        field = re.sub(r"\s+", " ", field.lower())
        value = m.group("v") or m.group("v2") or m.group("v3") or m.group("v4")
        facts.append(
            Fact("field", m.group(), m.start(), m.end(), subject=subject, value=value,
                 field=field)
        )  # fmt: skip
    return facts


_BY = re.compile(
    r"\b(?:created|changed|modified|updated|deleted|made)\s+by\s+"
    r"(?P<v>[A-Za-z][\w.-]*(?:\s+[A-Z][\w.-]*)?)"
)


def _actors(text: str) -> list[Fact]:
    """Who made a change: "DM-Butte was created by dschrute". The change log
    names its users; a user no reply names is an invention."""
    return [
        Fact("actor", m.group("v"), m.start("v"), m.end("v"), value=m.group("v"))
        for m in _matches(_BY, text, (" by ",))
    ]


# A number said with a unit or a noun that names the field it is: "7 U tall" is
# a device type's (or a rack's) height, "8 vCPUs" a VM's, "interface 14" its id.
MEASURES = {
    "u": "u_height", "ru": "u_height", "rack units": "u_height", "rack unit": "u_height",
    "vcpus": "vcpus", "vcpu": "vcpus", "volts": "voltage", "v": "voltage",
    "amps": "amperage", "amperes": "amperage", "interface": "id", "port": "id",
}  # fmt: skip
# a unit after a number, or "interface 14": the lines a measure can be said in
_AFTER_NUMBER = r"\d\s*(?=[urva])(?:u|ru|rack\s+units?|vcpus?|volts|v|amps|amperes)\b"
_UNIT = AnyCase(  # the look-aheads: the first letters, checked at once
    rf"{_AFTER_NUMBER}|\b(?=[ip])(?:interface|port)\s+(?:number\s+|#)?\d"
)
# An answer that never says "interface" or "port" (most) has only the units to
# look for: a pattern opening with a digit is found by jumping from digit to
# digit, one that may open with a word boundary is tried at every character.
_UNIT_ONLY = AnyCase(_AFTER_NUMBER)
_ID_WORDS = AnyCaseWords(["interface", "port"])
_NUM = r"(?P<n>\d{1,9}(?:\.\d{1,3})?)"
_MEASURE = re.compile(
    rf"{_WORD_START}(?P<s>{TOKEN.pattern})\s+(?:(?:is|are|has|have|stands|measures)\s+"
    rf"(?:(?:a|an)\s+)?{_NUM}\s*(?P<u>u|ru|rack\s+units?|vcpus?|volts|v|amps|amperes)\b"
    r"(?:\s+(?:tall|high))?"
    # "X is interface 14" names X's id ("X has port 24" names another interface)
    r"|(?:is|was)\s+(?P<id>interface|port)\s+(?:number\s+|#)?(?P<i>\d{1,9})\b(?!\s*/|\.\d))",
    re.IGNORECASE,
)


def _measures(text: str) -> list[Fact]:
    """A number said to be a field of a named object: "A C9300-48P is 7 U tall"
    is that type's `u_height`, "Gi0/0/13 is interface 14" its id. The
    fact's span is the number's (and its unit's), so its verdict replaces the
    bare number's: 7 being some other field somewhere does not ground it."""
    facts = []
    said = _ID_WORDS.said_in(text)
    for m in _in_lines(_MEASURE, text, _UNIT if said else _UNIT_ONLY):
        if not identifier_like(m.group("s")):
            continue
        word = m.group("u") or m.group("id")
        number = "n" if m.group("n") else "i"
        unit = re.sub(r"\s+", " ", word.lower())
        facts.append(
            Fact("measure", text[m.start(number) : m.end()], m.start(number), m.end(),
                 subject=m.group("s"),
                 value=m.group(number), field=MEASURES[unit])
        )  # fmt: skip
    return facts


def _cells(text: str, blocks: Shape) -> list[Fact]:
    """A table row's cells as fields of the object its first cell names: the
    "Tenant" cell of a row is that object's tenant. (A row's cells and their
    headers are stripped already: `reader.shape` reads them so.)"""
    facts = []
    fields: dict[str, str] = {}  # each header's field name, made once per table, not per row
    for row in blocks.rows:
        if len(row.cells) < 2:
            continue
        subject = row.cells[0][1]
        at = text.find(subject, row.start, row.end) if subject else -1
        if at < 0:
            continue
        at += len(subject)
        for header, value in row.cells[1:]:  # each found after the one before
            found = text.find(value, at, row.end) if value else -1
            if found < 0:
                continue
            at = found + len(value)
            # a cell of letters or digits (TOKEN finds one where one is): its first
            # character says so for most cells, without a search
            if not header or not (value[0].isalnum() or TOKEN.search(value)):
                continue
            if (field := fields.get(header)) is None:
                field = fields[header] = _SPACES.sub(" ", header.lower())
            facts.append(  # by position, as a count is
                by_position(Fact, ("field", value, found, at, subject, value, *_COUNT_TO_EVERY,
                                   field, ""))
            )  # fmt: skip
    return facts


def _matches(pattern: re.Pattern[str], text: str, words: tuple[str, ...]) -> list[re.Match[str]]:
    """`pattern`'s matches in the lines of `text` holding one of `words`: a
    pattern that starts with a name is tried at every character, so lines
    without its verb (a list of interfaces and speeds) are not searched."""
    trigger = _any_of(words)
    if not trigger.said_in(text):
        return []  # most answers say few of the words: asked at once, not searched for
    return _in_lines(pattern, text, trigger)


def _in_lines(pattern: re.Pattern[str], text: str, trigger: AnyCase) -> list[re.Match[str]]:
    """`pattern`'s matches in the lines of `text` where `trigger` matches."""
    found: list[re.Match[str]] = []
    done = -1  # the end of the last line searched
    for word in trigger.finditer(text):
        if word.start() < done:
            continue  # in a line already searched
        start = text.rfind("\n", 0, word.start()) + 1
        done = text.find("\n", word.end())
        done = len(text) if done < 0 else done
        found.extend(pattern.finditer(text, start, done))
    return found


@lru_cache(maxsize=8)
def _any_of(words: tuple[str, ...]) -> AnyCaseWords:
    """Any of `words` (in lower case), in any case: the lines to search are
    found in one pass over the answer, not a Python step per line."""
    return AnyCaseWords(words)


# ------------------------------------------------ the subject of a value (eval)

_LINK = re.compile(
    r"\b(?:is|are|was|runs?|uses?|has|have|sits?|lives?|belongs?|lands?|terminates?"
    r"|connects?|goes|comes?)\b|'s\b|:",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"\b(?:to|on|onto|which|that|via|through|behind|towards?|where|with)\b", re.IGNORECASE
)
"""Words that lead from a name on to another object ("ge-0/0/0, which is on
dmi01-akron-rtr01", "ens3 belongs to vm-web01"): the value is not said of it."""


def subject_of(
    answer: str, start: int, end: int, question: str = "", skip: frozenset[str] = frozenset()
) -> str | None:
    """The named object, other than the question's, that the value at
    answer[start:end] is stated of; None when it is stated of the question's
    object or of nothing named ("It is active.", "Status: active"). `skip`
    holds the keys (reader.key) of names that are values, never subjects.

    eval binds a value answer to its subject with it. Read as a person reads
    "PP:B117 runs Cisco IOS.": a sentence that names the question's object
    binds the value to it; else the fact of `read` that holds the value names
    its subject ("PP:B117 is active"); else a name written before the value
    in its sentence, joined to it by a verb ("is", "runs", "'s", a colon)
    that read verifies nothing of. read's own facts are not changed by it."""
    low = max(answer.rfind(c, 0, start) for c in ".!?\n") + 1
    high = min((i for i in (answer.find(c, end) for c in ".!?\n") if i >= 0), default=len(answer))
    named = {t.key for t in tokens(question) if _names(t.text)}
    if any(t.key in named for t in tokens(answer[low:high])):
        return None
    for fact in read(answer, question):
        if fact.subject and fact.start <= start and end <= fact.end:
            return None if key(fact.subject) in named | skip else fact.subject
    for t in tokens(answer[low:start]):
        if not _names(t.text) or t.key in skip or t.key in named:
            continue
        between = answer[low + t.end : start]
        if _LINK.search(between) and len(between.split()) <= 5 and not _PATH.search(between):
            return t.text
    return None


def _names(word: str) -> bool:
    return identifier_like(word) or is_address(word)
