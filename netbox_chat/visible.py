"""Text from stores, servers and NetBox made safe to put on a terminal.

Everything shown to the user that someone else could have written (a title, an
answer, a tool result, a server's error) may hold terminal control sequences:
an escape that retitles the window, moves the cursor over an earlier line, or
writes a hyperlink that lies. Every output path passes such text through
`visible()`, which shows each control character as an escape (`\\x1b`) instead
of sending it raw. Newline and tab stay: they are how text is laid out.
"""

from __future__ import annotations

# C0 controls (but newline and tab), DEL, C1 controls, and the Unicode bidi
# overrides and isolates that reorder what is shown without being seen.
_CONTROLS = (
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + list(range(0x7F, 0xA0))
    + [0x061C, 0x200E, 0x200F]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
)
_TABLE = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _CONTROLS}


def visible(text: str) -> str:
    """`text` with every control character but newline and tab written as an escape."""
    return text.translate(_TABLE)


def visible_line(text: str) -> str:
    """`visible(text)` on one line: newlines and tabs also shown as escapes, for
    places such as a table cell or a completion entry where a line break would
    forge another row."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


# What `json.dumps(..., ensure_ascii=False)` leaves raw (DEL, C1, bidi): it
# escapes only C0.
_JSON_TABLE = {c: f"\\u{c:04x}" for c in _CONTROLS}


def visible_json(document: str) -> str:
    """A JSON document with each control character written as a `\\u` escape:
    the same document to a parser, nothing raw to a terminal. Such characters
    can only stand inside the document's strings, where the escape means them."""
    return document.translate(_JSON_TABLE)
