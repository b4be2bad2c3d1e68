"""Reading an answer's text: its shape (tables, lists, prose), its tokens,
numbers and number words, names introduced by an object noun, negation and
non-answers. Pure string work: no model, no network, no NetBox.

Everything here reads what a careful human would: "Of the 72 devices, 14 have
no tenant" states 14 (72 is context), "Thirty." is a number, "PP:MDF" is one
name (not the site "MDF"), "D. S. Weaver Labs" is not cut at its initials, and
"It was not hard to find" says nothing is absent.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

# --------------------------------------------------------------------- tokens

# A word or a name: letters and digits, with inner dots, dashes, slashes,
# colons and underscores (dmi01-akron-sw01, Gi1/0/24, PP:MDF, 10.0.0.1/24).
TOKEN = re.compile(r"[^\W_](?:[\w.\-/:@]*[^\W_])?")
_ALNUM = re.compile(r"[^\W_]+")


class AnyCase:
    """A pattern of lower-case words, found in any case; read its matches'
    offsets (their text is in lower case). re's case-insensitive search tries
    such a pattern at every character (2 ms per 50 kB); in an ASCII text's
    lower case (the same offsets, the same letters matched) a case-sensitive
    one jumps to its first letters (0.4 ms). A text beyond ASCII, whose lower
    case can differ in length, is searched case-insensitively."""

    def __init__(self, source: str) -> None:
        self.lower = re.compile(source)
        self.any_case = re.compile(source, re.IGNORECASE)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        if text.isascii():
            return self.lower.finditer(text.lower())
        return self.any_case.finditer(text)


class AnyCaseWords(AnyCase):
    """Words (in lower case) found in any case, like `AnyCase`, that can also
    say whether a text holds one at all: in an ASCII text's lower case each
    is looked for by `in` (0.02 ms per 50 kB), where re stops at every
    character that could open one (0.4 ms for "interface|port", most letters
    opening some word of a longer list)."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words = tuple(words)
        super().__init__("|".join(map(re.escape, self.words)))

    def said_in(self, text: str) -> bool:
        if text.isascii():
            low = text.lower()
            return any(word in low for word in self.words)
        return self.any_case.search(text) is not None


def opened_by(
    pattern: re.Pattern[str], openers: re.Pattern[str], text: str
) -> Iterator[re.Match[str]]:
    """`pattern.finditer(text)`, for a pattern whose every match opens at a
    word boundary with one of the words `openers` finds (runs of letters, in
    lower case; the pattern reads them in any case). In an ASCII text the
    pattern is tried only where `openers` finds one in its lower case (a
    case-sensitive search jumps to their first letters), not at every
    character as re tries it (3-5 ms per 50 kB). No start is passed over: no
    word boundary falls inside a run of letters."""
    if not text.isascii():  # its lower case can differ in length: searched as it is
        yield from pattern.finditer(text)
        return
    done = 0  # the end of the last match: matches never overlap
    for word in openers.finditer(text.lower()):
        if word.start() >= done and (m := pattern.match(text, word.start())):
            done = m.end()
            yield m


def any_word(words: Iterable[str]) -> re.Pattern[str]:
    """Any of `words` (in lower case, for `opened_by`), grouped by first
    letter: re then compares a character once per letter, not once per word
    (a third of the search, for the object nouns)."""
    rests: dict[str, set[str]] = {}
    for word in words:
        rests.setdefault(word[0], set()).add(re.escape(word[1:]))
    return re.compile(
        "|".join(f"{re.escape(first)}(?:{'|'.join(sorted(rest))})" for first, rest in rests.items())
    )


def key(text: str) -> str:
    """The form two spellings of one name share: case, spaces, dashes,
    underscores and punctuation do not matter ("DM Akron" = "dm-akron").
    A plain ASCII word (most of an answer's tokens) is its own lower case:
    no pattern run and no cache entry for it."""
    if text.isascii() and text.isalnum():
        return text.lower()
    return _key(text)


@lru_cache(maxsize=8192)
def _key(text: str) -> str:
    return "-".join(_ALNUM.findall(text.lower()))


_IPV4 = r"(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?"
_IPV6 = r"(?=[0-9a-fA-F:]*:[0-9a-fA-F]*:)[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?:/\d{1,3})?"
ADDRESS = re.compile(rf"^(?:{_IPV4}|{_IPV6})$")

# Tokens with digits that are units, ordinals, versions or protocol words, not names.
_NOT_A_NAME = re.compile(
    r"^(?:\d+(?:\.\d+)?(?:k|m|g|t)?(?:b|bps|ib|hz|e|u|x|s|ms|h|min|d|w|y)"
    r"|\d+(?:st|nd|rd|th)|ipv[46]|l[1-7]|802\.\w+|utf-?\d+|x86(?:_64)?|arm64|sha\d+|md5"
    r"|rfc\d+|q[1-4]|http/?\d|tls\d?\.?\d*|v?\d+(?:\.\d+)+\w*|[a-z]\d|\d[a-z]|2fa|p2p|b2b"
    r"|ntp|dns\d*|e\.g|i\.e|etc"
    # the tools' own words: a tool name, an object type, a field name
    r"|netbox_\w+|(?:dcim|ipam|tenancy|circuits|virtualization|extras|core|users|wireless|vpn)\.\w+"
    r"|[a-z]+(?:_[a-z]+)+(?:__[a-z]+)?)$",
    re.IGNORECASE,
)


class Token(NamedTuple):
    """A token of the answer and its `key` (a tuple: built once per token, as
    every stage reads it)."""

    text: str
    start: int
    end: int
    key: str


def tokens(text: str) -> list[Token]:
    out = []
    for m in TOKEN.finditer(text):
        word = m.group()
        out.append(by_position(Token, (word, m.start(), m.end(), key(word))))
    return out


# A tuple built as its class without the named-argument constructor: the
# passes build one per token and per number (thousands an answer), and that
# constructor costs a Python call each (read's facts are built by it too).
by_position = tuple.__new__


# What may stand between the words of one name: "JBB Branch 104",
# "Dunder-Mifflin, Inc.", "D. S. Weaver Labs", "Dell R640 (17)".
_NAME_GAP = re.compile(r"[\s,.&'()]{0,3}")

ID_REF = re.compile(r"(?=[iI#])(?:\b(?:id|ID|Id)\s*[:=#]?\s*|(?<![\w&])#)(\d+)\b")
"""An object named by its NetBox id: "id 17", "ID: 17", "#17" (group 1 is the id)."""


def joins(
    text: str, toks: Sequence[Token], i: int, most: int, longer: Container[str] | None = None
) -> list[tuple[str, int]]:
    """The keys of the names that can start at `toks[i]`, shortest first, each
    with the index of its last token: up to `most` tokens joined as `key`
    joins them when only a short gap stands between two ("Dunder-Mifflin,
    Inc." is dunder-mifflin-inc). With `longer` (the keys a longer name starts
    with), a join stops as soon as no longer name can follow. The grounding
    check and eval's scorer both read names through it."""
    found: list[tuple[str, int]] = []
    joined = ""
    for n in range(min(most, len(toks) - i)):
        token = toks[i + n]
        if n and not _NAME_GAP.fullmatch(text[toks[i + n - 1].end : token.start]):
            break
        joined = token.key if not n else f"{joined}-{token.key}"
        found.append((joined, i + n))
        if longer is not None and joined not in longer:
            break
    return found


def is_address(text: str) -> bool:
    # an IPv4 address has three dots, an IPv6 one a colon: most tokens have
    # neither, and are refused before the pattern runs
    if ":" not in text and text.count(".") < 3:
        return False
    return bool(ADDRESS.match(text)) and (":" in text or _valid_v4(text))


def _valid_v4(text: str) -> bool:
    head, _, length = text.partition("/")
    parts = head.split(".")
    return all(int(p) <= 255 for p in parts) and (not length or int(length) <= 32)


@lru_cache(maxsize=8192)
def identifier_like(text: str) -> bool:
    """A token that can only be a name: letters and digits mixed
    (dmi01-akron-sw03, R04), or an inner dash with a capital (DM-Columbus).
    Units, ordinals, versions, tool names, object types and field names
    (primary_ip) are not names."""
    if _NOT_A_NAME.match(text) or is_address(text):
        return False
    letters = any(c.isalpha() for c in text)
    digits = any(c.isdigit() for c in text)
    if letters and digits:
        return True
    inner = any(c in "-_" for c in text.strip("-_"))
    return letters and inner and any(c.isupper() for c in text)


# ------------------------------------------------------------------ markdown

_BULLET = re.compile(r"^(\s*)(?:[-*+•]|(\d{1,3})[.)])\s+")
_RUN_IN = re.compile(r"(?<=\s)(\d{1,3})\.\s")


def _run_in(line: str, start: int, at: int) -> list[tuple[int, int]]:
    """The numbers 2., 3., ... of a numbered list written on one line, in
    their order (a "5." out of order is a number, not the list's)."""
    spans = []
    want = 2
    for m in _RUN_IN.finditer(line, at):
        if int(m.group(1)) == want:
            spans.append((start + m.start(1), start + m.end(1)))
            want += 1
    return spans


_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
# Each alternative opens with its mark (an underscore after no word character
# is looked for behind it), so re jumps from mark to mark; a look-behind or a
# class opening one is tried at every character (1.6 ms per 50 kB, not 0.2).
_MARKUP = re.compile(r"\*|`|#|>|~|_(?<!\w_)|_(?!\w)|\[|\]\([^)]*\)|\]")


def plain(text: str) -> str:
    """`text` without Markdown marks, each replaced by a space so every
    offset still points at the same character."""
    return _MARKUP.sub(lambda m: " " * len(m.group()), text)


@lru_cache(maxsize=2)
def plain_answer(answer: str) -> str:
    """`plain(answer)` kept for the answer just read: the grounding check's
    passes and its fact reader read the same answer (read it, never change it)."""
    return plain(answer)


class Segment(NamedTuple):
    """A stretch of the answer a claim belongs to: a table row, a list item or
    a sentence. `kind` says which; `cells` holds a table row's cells with
    their headers. (A tuple, like `Number`: an answer holds thousands, built
    by position as a bare tuple where a line's loop makes one.)"""

    start: int
    end: int
    kind: str  # "row", "item", "sentence", "header"
    cells: tuple[tuple[str, str], ...] = ()
    depth: int = 0


# Abbreviations and initials a sentence does not end at.
_ABBREVIATION = re.compile(
    r"(?:\b(?:inc|ltd|co|corp|llc|gmbh|e\.g|i\.e|etc|vs|mr|mrs|dr|st|no|approx|ca)|\b[A-Za-z])$",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")


def _sentences(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    at = start
    for m in _SENTENCE_END.finditer(text, start, end):
        before = text[at : m.start()].rstrip()
        # its matches end the text and are at most 6 long: searched from 8
        # before the end (a search over the sentence per dot costs a line's square)
        if m.group() == "." and _ABBREVIATION.search(before, max(0, len(before) - 8)):
            continue
        yield at, m.end()
        at = m.end()
    if text[at:end].strip():
        yield at, end


def _cells(line: str) -> list[str]:
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [c.strip() for c in inner.split("|")]


@dataclass
class Shape:
    """The answer as blocks: segments in order, list items, table rows."""

    segments: list[Segment] = field(default_factory=list)
    items: list[Segment] = field(default_factory=list)  # top-level list items
    rows: list[Segment] = field(default_factory=list)  # table body rows, totals apart
    totals: list[Segment] = field(default_factory=list)  # a table's or list's "Total" line
    numbering: list[tuple[int, int]] = field(default_factory=list)  # "1." of a numbered list


_TOTAL_WORDS = ("total", "sum", "all")
_TOTAL_WORD_IN = re.compile("|".join(_TOTAL_WORDS))  # one search of a cell for them all


@lru_cache(maxsize=2)
def shape(text: str) -> Shape:
    """The answer's blocks, kept for the text just read (the token passes and
    the fact reader read the same answer's shape; read it, never change it)."""
    out = Shape()
    lines = text.split("\n")
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    top_indent: int | None = None
    header: list[str] = []
    index = 0
    while index < len(lines):
        line, start = lines[index], offsets[index]
        end = start + len(line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if "|" in line and _TABLE_RULE.match(following):
            header = _cells(line)
            out.segments.append(Segment(start, end, "header"))
            index += 2
            while index < len(lines) and "|" in lines[index]:
                row_line, row_start = lines[index], offsets[index]
                cells = _cells(row_line)
                cells_under = tuple(zip(header + [""] * len(cells), cells, strict=False))
                row = by_position(
                    Segment, (row_start, row_start + len(row_line), "row", cells_under, 0)
                )
                out.segments.append(row)
                first = cells[0] or next((c for c in cells if c), "")
                # a total's word is in its cell as written (plain only blanks marks)
                total = bool(_TOTAL_WORD_IN.search(first.lower())) and (
                    plain(first).strip().lower().startswith(_TOTAL_WORDS)
                )
                (out.totals if total else out.rows).append(row)
                index += 1
            continue
        bullet = _BULLET.match(line)
        if bullet and line[bullet.end() :].strip():
            indent = len(bullet.group(1).expandtabs())
            if top_indent is None or indent < top_indent:
                top_indent = indent
            item = by_position(Segment, (start + bullet.end(), end, "item", (), indent))
            out.segments.append(item)
            if bullet.group(2):
                out.numbering.append((start + bullet.start(2), start + bullet.end(2)))
                if bullet.group(2) == "1":  # "1. VLAN 100 2. VLAN 200": a list run into one line
                    out.numbering.extend(_run_in(line, start, bullet.end()))
            body = line[bullet.end() :]
            if "total" in body.lower() and (  # its word as written: plain only blanks marks
                plain(body).strip().lower().startswith(("total", "in total"))
            ):
                out.totals.append(item)
            elif indent <= (top_indent or 0):
                out.items.append(item)
            index += 1
            continue
        if line.strip():
            for s, e in _sentences(text, start, end):
                out.segments.append(by_position(Segment, (s, e, "sentence", (), 0)))
        else:
            top_indent = None
        index += 1
    out.items = [i for i in out.items if i.depth <= (top_indent or 0)] if out.items else []
    return out


# ------------------------------------------------------------------- numbers

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS = {w: n for n, w in enumerate(_UNITS)} | {w: 20 + 10 * n for n, w in enumerate(_TENS)}


# A pattern of many words tried at every character costs a step per word per
# character; a look-ahead for the letters they begin with rejects most
# characters in one (the matches are the same: each word starts with one).
def _first_letters(words: Iterable[str]) -> str:
    return "(?=[" + re.escape("".join(sorted({w[0] for w in words}))) + "])"


_WORD_NUMBER = re.compile(
    r"\b"
    + _first_letters(_UNITS + _TENS)
    + r"(?:("
    + "|".join(_TENS)
    + r")(?:[-\s]("
    + "|".join(_UNITS[1:10])
    + r"))?"
    r"|(" + "|".join(_UNITS) + r"))\b",
    re.IGNORECASE,
)
_NUMBER_WORD = any_word(NUMBER_WORDS)  # where a number word's match can open
# Not after a name's or an address's character; the pattern opens with a
# digit, so re jumps from digit to digit (that character is looked for behind
# the first digit: a look-behind opening the pattern is tried at every character).
_DIGITS = re.compile(
    r"(\d(?<![\w.\-/:#]\d)(?:\d{0,2}(?:,\d{3})+|\d*(?:\.\d+)?))"
    r"(?![\w\-/]|\.\d|:\d|,\d{3})(\s*%)?"
)

# Nouns a count is a count of (singular forms; plurals are read too).
OBJECT_NOUNS = (
    "virtual machine", "vm", "device", "site", "rack", "tenant", "vlan", "vrf", "prefix",
    "cluster", "circuit", "provider", "platform", "role", "region", "location", "interface",
    "power panel", "power feed", "manufacturer", "device type", "user", "aggregate",
    "ip address", "address", "ip", "cable", "contact", "tag", "change", "result", "object",
    "entry", "record", "item", "switch", "router", "server", "firewall", "port", "host",
    "member", "module", "outlet", "range", "asn", "termination", "group", "one",
)  # fmt: skip
# What follows a number, in one match (three patterns matched one by one cost
# a match each per number); at most one part matches, each starting with its
# own words: a unit that makes it no count ("5 minutes", "3 tool calls"), "in
# total" as written, or a verb or "of them" that counts a part ("14 have no
# tenant", "3 of them"). The look-aheads: the words' first letters (all, then
# the units'), checked at once.
_FOLLOWS = re.compile(
    r"\s*(?=[%acdhilmoprstuwxy])(?:(?P<unit>(?:%\s*)?(?=[acdhlmopstwxy])(?:seconds?|secs?|s|ms"
    r"|minutes?|mins?|hours?|hrs?|h|days?|d|weeks?|months?|years?|yrs?|am|pm|o'clock|times|x"
    r"|characters?|chars|tokens?|calls?|tool calls?|steps?|turns?|lines?|columns?|percent)\b)"
    r"|(?P<total>(?-i:(?:in\s+)?total))"
    r"|(?P<subcount>of\s+(?:them|these|those|which|the\s+\w+)|(?:have|has|are|is|lack|were|was"
    r"|do|does|remain|match|use|carry|show|sit|run)\b))",
    re.IGNORECASE,
)
_TOTAL_NEAR = re.compile(r"\btotal\b", re.IGNORECASE)
_TOTAL_WORD = AnyCaseWords(["total"])  # an answer without it says no "Total: 14"
_YEAR = re.compile(r"(?:19|20)\d\d")
# The last word before a number that makes it no count ("turn 2", "page 3",
# "the last 24 hours"): only spaces may stand between ("page: 3" counts).
_NOT_A_COUNT_BEFORE = frozenset([
    "turn", "step", "page", "option", "line", "row", "column", "item", "part", "question",
    "phase", "version", "netbox", "python", "top", "first", "last", "next", "previous", "offset",
    "limit", "rfc", "port", "number", "no.", "level", "tier", "layer", "slot", "unit", "u",
    "position", "bay", "floor", "room", "building", "week", "day", "month", "year", "january",
    "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
])  # fmt: skip
# The last word before a number that makes it an identifier ("VLAN 100", "id: 7").
_IDENTIFIER_BEFORE = frozenset([
    "id", "ids", "vid", "vlan", "site", "rack", "tenant", "cluster", "region", "location",
    "prefix", "device", "circuit", "interface", "asn", "as", "ticket", "issue", "pr",
])  # fmt: skip
# What the text before a number can end with when its last word is one of
# them: their last letters, or a character no word holds ("VLAN (100)").
_MAY_END_IDENTIFIER = frozenset({w[-1] for w in _IDENTIFIER_BEFORE} | set("([{\"'*"))
_DETERMINERS = frozenset(["the", "all", "its", "their", "these", "those"])
_FROM = frozenset(["among", "from", "across"])
_WORD_BEFORE = re.compile(r"[^\s(\[{\"'*]+")


def _last_words(before: str) -> list[str]:
    """The last three words before a number, in lower case. Words, not a
    pattern searched backwards: a search ending at the number costs a pass
    per number over what stands before it."""
    low = before[-40:].lower()  # a case changes no word's bounds
    if _NOT_IN_WORD.search(low) is None:  # only spaces part them: split there, in C
        return low.rsplit(None, 3)[-3:]
    return _WORD_BEFORE.findall(low)[-3:]


_NOT_IN_WORD = re.compile(r"[(\[{\"'*]")  # what ends a word besides a space


def _identifier(before: str) -> bool:
    """An identifier's noun before the number: "VLAN 100", "id: 7", "vlan id 5"."""
    tail = before[-24:].rstrip().rstrip(":=#")
    last = tail[-1:]
    if not last or (last.lower() not in _MAY_END_IDENTIFIER and not last.isspace()):
        return False  # the last word ends as no noun does ("with 5", "Gi1/0/24: 1000")
    low = tail.lower()
    chunk = low.rsplit(None, 1)[-1:]  # after the last space: the last word, if all letters
    if chunk and chunk[0].isalpha():  # (no bracket, quote or star in it: "VLAN 100")
        return chunk[0] in _IDENTIFIER_BEFORE
    words = _WORD_BEFORE.findall(low)
    return bool(words) and words[-1] in _IDENTIFIER_BEFORE


def _context(words: list[str]) -> bool:
    """A whole the answer counts within: "out of 72", "of the 72", "of all
    devices 72", "among the 5", "3 of 24"."""
    w = ["", "", "", *words][-3:]
    return (
        (w[2] == "of" and (w[1] == "out" or w[1][-1:].isdigit()))
        or (w[2] in _DETERMINERS and w[1] == "of")
        or (w[1] in _DETERMINERS and w[0] == "of" and w[2].isalnum())
        or w[2] in _FROM
        or (w[2] == "the" and w[1] in _FROM)
    )


# The longest number read (15 digits, with thousands commas): a longer one is
# a serial or a stuck model's digits, never a count, and past what a float holds.
_LONGEST = 20


class Number(NamedTuple):
    """A number the answer states, with what it is bound to (a tuple: an
    answer can hold thousands, and a frozen dataclass is slow to build)."""

    value: float
    start: int
    end: int
    text: str
    noun: str = ""  # the object noun right after it ("devices"), "" when none
    context: bool = False  # "out of 72", "of the 72 devices": a whole, not the answer
    total: bool = False  # "in total", "Total: 14"
    subcount: bool = False  # "14 have no tenant", "3 of them"
    percent: bool = False
    word: bool = False

    @property
    def integer(self) -> int | None:
        return int(self.value) if self.value == int(self.value) else None


def noun_after(text: str, end: int, nouns: Sequence[str]) -> str:
    """The object noun within three words after `end` ("14 active devices"):
    the first of the first four words that is a noun's spelling, two words
    first ("power feeds"), none after a word such as "of" or "is"."""
    # the object nouns' spellings are built once: a tuple of 48 nouns hashed
    # per number to find its cache entry costs more than the lookup itself
    if nouns is OBJECT_NOUNS:
        forms, pattern = _OBJECT_FORMS, _OBJECT_NOUN
    else:
        forms, pattern = _forms(tuple(nouns)), _noun_pattern(tuple(nouns))
    m = pattern.match(text[end : end + 80].lower())
    if not m:
        return ""
    form = m.group("form")
    if (noun := forms.get(form)) is None:  # two words, as written: looked up one space apart
        noun = forms[" ".join(re.findall(_A_WORD, form))]
    return noun


_A_WORD = r"[a-z][\w\-]*"
_WHOLE = r"(?![\w\-])"  # a word ends where no word character follows
_GAP = r"[^a-z]*"  # what stands between two words


@lru_cache(maxsize=16)
def _forms(nouns: tuple[str, ...]) -> dict[str, str]:
    """Each noun's spellings (singular and plurals), mapped to the noun; the
    first noun listed wins a spelling two share."""
    forms: dict[str, str] = {}
    for noun in nouns:
        for form in (noun, noun + "s", noun + "es", noun[:-1] + "ies", noun[:-1] + "ves"):
            forms.setdefault(form, noun)
    return forms


@lru_cache(maxsize=16)
def _noun_pattern(nouns: tuple[str, ...]) -> re.Pattern[str]:
    """`noun_after`'s reading in one match: up to three words (none a word
    that ends the look, each taken whole), then a noun's spelling of two
    words or of one (its group "form"), the spellings grouped by first letter.
    Matching five words to look them up one by one in Python cost it twice
    the time."""
    seconds: dict[str, set[str]] = {}  # two-word spellings, by their first word
    ones = []
    for form in _forms(nouns):
        words = form.split(" ")
        if len(words) > 2 or not all(re.fullmatch(_A_WORD, word) for word in words):
            continue  # read word by word, no text spells it ("a.b", "front port template")
        if len(words) == 2:
            seconds.setdefault(words[0], set()).add(re.escape(words[1]))
        else:
            ones.append(form)
    spellings = [
        f"{re.escape(first)}{_WHOLE}{_GAP}(?:{'|'.join(sorted(rest))}){_WHOLE}"
        for first, rest in seconds.items()
    ]  # two words first: "device types" is a device type's, not a device's
    if ones:
        spellings.append(f"(?:{any_word(ones).pattern}){_WHOLE}")
    not_a_stop = rf"(?!(?:{any_word(_BREAK_WORDS).pattern}){_WHOLE})"
    before = rf"(?:{not_a_stop}(?>{_A_WORD}){_GAP}){{0,3}}?"  # the fewest: the first noun wins
    form = "|".join(spellings) or "(?!)"  # no nouns: no match
    return re.compile(rf"\s*(?=[a-z]){before}(?P<form>{form})")


_OBJECT_FORMS = _forms(OBJECT_NOUNS)
_BREAK_WORDS = frozenset(
    [
        "of",
        "in",
        "at",
        "on",
        "is",
        "are",
        "was",
        "were",
        "have",
        "has",
        "and",
        "or",
        "but",
        "with",
        "for",
        "to",
        "by",
        "from",
        "that",
        "which",
    ]
)
_OBJECT_NOUN = _noun_pattern(OBJECT_NOUNS)


def numbers(text: str, nouns: Sequence[str] = OBJECT_NOUNS, skip: Sequence[tuple[int, int]] = ()):
    """Every number `text` states, digits and words, in order, with its binding.
    Spans in `skip` (names, addresses, list numbering) hold no numbers."""
    found: list[Number] = []
    taken = bytearray(len(text) + 1)  # the skipped spans, one flag per character
    for a, b in skip:
        a, b = max(a, 0), min(b, len(text))
        if a < b:
            taken[a:b] = b"\x01" * (b - a)

    # (start, end, its digits ("" for a word), text, percent, a word's value): a value is
    # made only for the numbers kept
    candidates: list[tuple[int, int, str, str, bool, float]] = []
    for m in _DIGITS.finditer(text):
        raw = m.group(1)
        if len(raw) > _LONGEST:
            continue  # a serial or a stuck model's digits: no count, and past a float
        candidates.append((m.start(1), m.end(), raw, m.group(), bool(m.group(2)), 0.0))
    for m in opened_by(_WORD_NUMBER, _NUMBER_WORD, text):
        if m.group(3):
            value = NUMBER_WORDS[m.group(3).lower()]
        else:
            value = NUMBER_WORDS[m.group(1).lower()] + (
                NUMBER_WORDS[m.group(2).lower()] if m.group(2) else 0
            )
        candidates.append((m.start(), m.end(), "", m.group(), False, float(value)))
    totals = _TOTAL_WORD.said_in(text)  # looked for once
    # no digits and no number word start at one offset: the order is the offsets'
    for start, end, digits, raw, percent, word_value in sorted(candidates):
        word = not digits
        if skip and taken.find(1, start, end) >= 0:
            continue
        before = text[max(0, start - 40) : start]
        after = text[end : end + 40]
        # the tests that drop a number, the cheapest first ("VLAN 100": no count)
        if not word and _identifier(before):
            continue
        follows = _FOLLOWS.match(after)
        follower = follows.lastgroup if follows else None  # "unit", "total" or "subcount"
        if not percent and follower == "unit":
            continue
        words = _last_words(before) if before[-1:].isspace() or not before else []
        if not percent and words and words[-1] in _NOT_A_COUNT_BEFORE:
            continue
        noun = noun_after(text, end, nouns)
        if not word and not noun and _YEAR.fullmatch(raw):
            continue  # a year
        if word:
            # "one" and friends are ordinary words unless they count something
            # or end the answer's sentence ("Thirty.", "I found three."); "the
            # one" and "no one" never count.
            ordinary = raw.lower() == "one" and _ORDINARY_ONE.search(before)
            if ordinary or not (noun or follower == "subcount" or _ends_answer(after)):
                continue
            if raw.lower() == "one" and noun == "one":
                continue
        found.append(  # by position, as a bare tuple: by keyword costs twice the build
            by_position(
                Number,
                (
                    float(digits.replace(",", "")) if digits else word_value,
                    start,
                    end,
                    raw.strip(),
                    noun,
                    _context(words),  # context
                    # total
                    follower == "total" or (totals and bool(_TOTAL_NEAR.search(before[-16:]))),
                    follower == "subcount",  # subcount
                    percent,
                    word,
                ),
            )
        )
    return found


_ORDINARY_ONE = re.compile(
    r"\b(?:the|that|this|which|only|any|each|every|no|some|another)\s*$", re.IGNORECASE
)


@lru_cache(maxsize=2)
def numbers_outside(text: str, skip: tuple[tuple[int, int], ...]) -> tuple[Number, ...]:
    """`numbers(text, skip=skip)` kept for the text just read: the grounding
    check's number pass and its fact reader read the same answer's numbers
    (the fact reader's, outside list numbering; the number pass then drops
    those inside a name), and reading them is the check's dearest step."""
    return tuple(numbers(text, skip=skip))


def _ends_answer(after: str) -> bool:
    return bool(_ANSWER_END.match(after))


_ANSWER_END = re.compile(r"\s*(?:[.!:]|$|\n|\(|,)")


# ------------------------------------------------------------ negation, none

NEGATOR = re.compile(
    r"\b(?:not|never|no|none|neither|nor|without|cannot|no\s+longer)\b|n't\b", re.IGNORECASE
)
_CLAUSE_BREAK = re.compile(  # the look-ahead: the breaks' first characters, checked at once
    r"(?=[,;:()\sbwah])(?:[,;:()\n]|\s[-\u2013\u2014]\s|\b(?:but|while|whereas|although|however)\b)"
)


# After the last one-character break, a break is a dash between spaces or one
# of the words: either is looked for first (re jumps to the dashes, and to the
# words' first letters), and the breaks are read only where one may be (a
# clause of prose had every space and every "a", "b", "h" and "w" tried).
_SPACED_DASH = re.compile(r"[-\u2013\u2014](?<=\s.)(?=\s)")
_BREAK_WORD = re.compile("but|while|whereas|although|however")
_CLAUSE_REACH = 200
_BREAK_CHARACTERS = ",;:()\n"


def clause_start(text: str, at: int, floor: int = 0) -> int:
    """Where the clause holding offset `at` begins (after the last comma,
    semicolon, colon, dash or "but" before it), looking back at most
    `_CLAUSE_REACH` characters: a clause's last words are what binds, and a
    look back over a whole line per word would cost its square."""
    floor = max(floor, at - _CLAUSE_REACH)
    # The last break of one character, found from the end: the breaks are read
    # from just after it (the one-character breaks of a list of names made the
    # look back cost a match per name). A scan from further back ends a match
    # there too: a dash between spaces is the only longer break holding one,
    # a newline, as its last character.
    last = max(floor, 1 + max([text.rfind(c, floor, at) for c in _BREAK_CHARACTERS]))
    if _SPACED_DASH.search(text, last, at) is None and _BREAK_WORD.search(text, last, at) is None:
        return last
    for m in _CLAUSE_BREAK.finditer(text, last, at):
        last = m.end()
    return last


def negated(text: str, start: int, floor: int = 0) -> bool:
    """The word at `start` is denied in its clause: "is not active",
    "isn't offline", "no longer planned", "not dmi01-akron-sw03"."""
    head = text[clause_start(text, start, floor) : start]
    words = head.split()
    return bool(NEGATOR.search(" ".join(words[-4:])))


_EXISTENCE_NEGATED = AnyCase(
    r"\b"
    + _first_letters(
        ["there", "no", "does", "is", "are", "was", "has", "could", "unable", "found", "zero", "0"]
    )
    + r"(?:\bthere\s+(?:is|are|were|was)\s+(?:no|none|not\s+any|nothing)\b"
    r"|\bno\b(?!\s+(?:doubt|problem|worries|issue|way|longer|idea|more|question|need|sure)\b)"
    r"(?=\s+(?:[a-z][\w\-]*\s+){0,3}?\w)"
    r"|\b(?:none|nothing|nobody|neither)\b"
    r"|\b(?:does|do|did|is|are|was|were|has|have)\s*(?:not|n't)\s+(?:\w+\s+){0,2}?"
    r"(?:exist|have|own|hold|contain|belong|appear|match|host|use|run|assigned|deployed|present|"
    r"found|used|associated|configured|defined|registered|listed|connected|linked|owned|"
    r"allocated|recorded|any|in\s+netbox)\b"
    r"|\b(?:doesn't|don't|didn't|isn't|aren't|wasn't|weren't|hasn't|haven't)\s+(?:\w+\s+){0,2}?"
    r"(?:exist|have|own|hold|contain|belong|appear|match|host|use|run|assigned|deployed|present|"
    r"found|used|associated|configured|defined|registered|listed|connected|linked|owned|"
    r"allocated|recorded|any|in\s+netbox)\b"
    r"|\bnot\s+(?:found|present|assigned|exist|in\s+netbox|recorded|defined|configured|deployed)\b"
    r"|\b(?:could|can|did|was|were)\s*(?:not|n't)\s+(?:be\s+)?(?:find|found|locate|located)\s+"
    r"(?:any|a|an|such|the|it|them|this|that|vlan|device|tenant|site|\w+-?\w*\d)"
    r"|\bunable\s+to\s+(?:find|locate)\s+(?:any|a|an|such)\b|\bfound\s+no\b|\bno\s+such\b"
    r"|\bzero\s+\w+|\b0\s+(?:results|matches|objects|devices|entries|records)\b)"
)


def says_none(text: str) -> bool:
    """The text says something does not exist ("there are none", "no tenant
    has VLAN 999", "VLAN 999 isn't assigned to any tenant") — not merely a
    negation word ("It was not hard to find", "no doubt")."""
    return next(_EXISTENCE_NEGATED.finditer(plain(text)), None) is not None


def none_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _EXISTENCE_NEGATED.finditer(text)]


# ---------------------------------------------------------------- non-answers

_DECLINE = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|dont)\s+know|(?:i'?m|i\s+am)\s+not\s+sure|not\s+sure"
    r"|(?:cannot|can't|can\s+not|could\s+not|couldn't|unable\s+to|not\s+able\s+to|am\s+unable\s+to)"
    r"\s+(?:determine|tell|answer|say|help|find\s+out|retrieve|access|confirm|verify|provide|"
    r"look\s+(?:that|it|this)\s+up|assist|get)"
    r"|(?:do\s+not|don't|doesn't|does\s+not)\s+have\s+(?:access|enough|sufficient|the\s+information"
    r"|information|that\s+information|any\s+information)"
    r"|(?:could\s+not|couldn't|was\s+unable\s+to|were\s+unable\s+to)\s+(?:find|get|obtain)\s+"
    r"(?:out|that|this|the\s+(?:information|answer|data)|an?\s+answer|any\s+(?:information|data))"
    r"|insufficient\s+(?:information|data)|no\s+way\s+to\s+(?:tell|know)|as\s+an\s+ai"
    r"|i'?m\s+sorry|i\s+apologi[sz]e|unknown\b|no\s+idea|hard\s+to\s+say)",
    re.IGNORECASE,
)
_QUESTION_BACK = re.compile(
    r"^\s*(?:could|can|would|do|did|which|what|should|shall|are|is)\b[^.!]*\?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def declined(text: str, claims: int | None = None) -> bool:
    """A non-answer: "I don't know", "cannot determine", a refusal, or a
    question back — and nothing else said. `claims` is how many facts the
    rest of the answer states (a hedge followed by an answer is an answer)."""
    body = plain(text).strip()
    if not body:
        return True
    sentences = [body[s:e].strip() for s, e in _sentences(body, 0, len(body))]
    if all(_QUESTION_BACK.match(s) for s in sentences if s):
        return True
    if not _DECLINE.search(body):
        return False
    return not claims


# ------------------------------------------------------- names after a noun

_INTRODUCING = [n for n in OBJECT_NOUNS if n not in ("one", "item")]
_NOUN_NAMES = "|".join(
    sorted((re.escape(n).replace(r"\ ", r"\s+") for n in _INTRODUCING), key=len, reverse=True)
)
_INTRODUCED = re.compile(
    rf"\b(?i:{_first_letters(_INTRODUCING)}"
    rf"({_NOUN_NAMES})(?:e?s)?\s+(?:named\s+|called\s+|id\s+)?)[\"'`*]*"
    r"([^\W_](?:[\w.\-/:@]*[^\W_])?(?:,?\s+(?:[A-Z0-9][\w.\-/:@]*[^\W_]|[A-Z0-9]))*(?:,?\s+Inc)?)"
)
_NOT_NAMES = frozenset(
    [
        "id",
        "ids",
        "the",
        "a",
        "an",
        "in",
        "at",
        "on",
        "with",
        "has",
        "have",
        "is",
        "are",
        "was",
        "were",
        "and",
        "or",
        "of",
        "for",
        "to",
        "by",
        "from",
        "that",
        "which",
        "who",
        "this",
        "these",
        "those",
        "it",
        "its",
        "their",
        "there",
        "here",
        "type",
        "types",
        "count",
        "name",
        "names",
        "status",
        "role",
        "roles",
        "list",
        "lists",
        "table",
        "details",
        "information",
        "data",
    ]
)


class Introduced(NamedTuple):
    """A name the answer introduces with its object noun ("tenant Initech"; a
    tuple, like `Number`: a list can introduce thousands)."""

    noun: str
    name: str
    start: int
    end: int


_SPACES = re.compile(r"\s+")


def introduced(text: str) -> list[Introduced]:
    """Names written after an object noun: "tenant Initech", "site JBB Branch 104",
    "device dmi01-akron-sw03", "VLAN 999". A lowercase ordinary word is not a
    name ("the site has"), nor is a word the noun usually takes ("site ID")."""
    out = []
    for m in opened_by(_INTRODUCED, _NOUN_FIRST_WORDS, text):
        words = m.group(2).split()
        while words and words[-1].lower().strip(",") in _NOT_NAMES:
            words.pop()
        if not words:
            continue
        first = words[0].strip(",")
        if first.lower() in _NOT_NAMES:
            continue
        digits = first.isdigit()
        if digits:
            words = [first]  # a number is one word: "VLAN 100 2. VLAN 200" names VLAN 100
        if not (
            digits
            or first[0].isupper()
            or identifier_like(first)
            or ("-" in first.strip("-") and first.replace("-", "").isalnum())  # a slug
            or is_address(first)
        ):
            continue
        name = " ".join(words).rstrip(",")
        start = m.start(2)
        noun = m.group(1).lower()
        if not noun.isalpha():  # "ip  address": its spaces made one
            noun = _SPACES.sub(" ", noun)
        out.append(by_position(Introduced, (noun, name, start, start + len(name))))
    return out


# The nouns' first words: where an introduced name's match can start.
_NOUN_FIRST_WORDS = any_word(n.split()[0] for n in _INTRODUCING)


def singular(noun: str) -> str:
    noun = noun.strip().lower()
    for plural, single in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("s", "")):
        if noun.endswith(plural) and len(noun) > len(plural) + 1:
            return noun[: -len(plural)] + single
    return noun


def question_noun(question: str) -> str:
    """The noun a question asks about: "How many active devices ..." ->
    "device", "Which tenant has ..." -> "tenant"."""
    m = re.search(
        r"\b(?:how\s+many|which|what|list|name)\s+((?:[a-z][\w\-]*\s+){0,3}[a-z][\w\-]*)",
        question,
        re.IGNORECASE,
    )
    if not m:
        return ""
    words = m.group(1).lower().split()
    for index in range(len(words)):
        for length in (2, 1):
            if index + length <= len(words):
                phrase = " ".join(
                    [*words[index : index + length - 1], singular(words[index + length - 1])]
                )
                if phrase in OBJECT_NOUNS:
                    return phrase
    return ""
