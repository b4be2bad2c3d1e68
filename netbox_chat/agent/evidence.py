"""A turn's evidence: the tool calls it made, each with what it returned.

The ledger records only a call's name, arguments and size; what NetBox
returned is in the conversation's messages. `/show` prints it and `export
--tool-results` writes it, both from here: the messages of a turn are the
slice `[base_message_count:message_count]` of the conversation at the turn's
own end checkpoint (not the head: a later /compact or rewind rewrites the
head's list, never a turn's end), and a call's result is the ToolMessage that
answers its id.

What a result holds is untrusted NetBox data: callers show it through
`visible()`. No LangChain import at module level: the REPL's screen code
reads `table_of` on every start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netbox_chat.claims import Call
from netbox_chat.store.ledger import Turn

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

# Columns of a NetBox list shown as a table; a full NetBox object has dozens of
# fields, the rest are named under it.
TABLE_KEYS = 8
# What tells one row from another, kept in front: the id, then the first of these.
IDENTITY_KEYS = ("name", "display", "address", "prefix", "cid", "vid", "model")


@dataclass(frozen=True)
class ToolResult:
    """One tool call of a turn and what it returned (or the error it raised)."""

    name: str
    args: dict[str, Any]
    text: str
    error: bool

    def data(self) -> Any:
        """The result as JSON data when it is JSON (NetBox's answers are), else the text."""
        try:
            return json.loads(self.text)
        except ValueError:
            return self.text


def calls_of(results: Sequence[ToolResult]) -> list[Call]:
    """The calls as the grounding check reads them: each tool's name and
    arguments (the set a list is of) beside its decoded reply."""
    return [Call(r.name, r.args, r.data()) for r in results]


@dataclass(frozen=True)
class Table:
    """A NetBox list, as rows of cells under `keys` (the rest in `other_keys`)."""

    keys: list[str]
    rows: list[list[str]]
    total: int  # NetBox's `count` when it says, else the rows it returned
    other_keys: list[str]


def turn_messages(turn: Turn, messages_at_end: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages `turn` added, from the conversation at its end checkpoint."""
    return list(messages_at_end[turn.base_message_count or 0 : turn.message_count])


def tool_results(messages: Sequence[BaseMessage]) -> list[ToolResult]:
    """The tool calls among `messages`, in the order their results came, each
    paired with the call (name and arguments) its result answers."""
    from langchain_core.messages import AIMessage, ToolMessage

    calls = {
        str(call["id"]): (call["name"], call["args"])
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }
    results = []
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        name, args = calls.get(message.tool_call_id, (message.name or "?", {}))
        text = message.content if isinstance(message.content, str) else str(message.content)
        error = message.status == "error" or text.startswith("Error")
        results.append(ToolResult(name, dict(args), text, error))
    return results


def table_of(
    data: Any,
    *,
    max_rows: int | None = None,
    args: Mapping[str, Any] | None = None,
    answer: str = "",
) -> Table | None:
    """A NetBox list (`{"count": N, "results": [...]}` or a bare list of
    objects) as a table, or None for anything else. `max_rows` keeps the
    first rows only (the screen); an export keeps them all.

    Its columns lead with what the evidence is for (see `_leading`): the
    fields the call (`args`) filtered on and the ones the `answer` cites, after
    the id and name; the other fields follow in NetBox's order, those past
    `TABLE_KEYS` named in `other_keys`."""
    rows = data.get("results") if isinstance(data, dict) else data
    if not (isinstance(rows, list) and rows and all(isinstance(row, dict) for row in rows)):
        return None
    shown = rows[:max_rows]
    keys: list[str] = []
    for row in shown:
        keys.extend(key for key in row if key not in keys)
    first = _leading(keys, shown, args or {}, answer)
    keys = first + [key for key in keys if key not in first]
    total = data.get("count") if isinstance(data, dict) else None
    return Table(
        keys=keys[:TABLE_KEYS],
        rows=[[cell(row.get(key)) for key in keys[:TABLE_KEYS]] for row in shown],
        total=total if isinstance(total, int) else len(rows),
        other_keys=keys[TABLE_KEYS:],
    )


def _leading(
    keys: list[str], rows: list[dict[str, Any]], args: Mapping[str, Any], answer: str
) -> list[str]:
    """The columns a table of `rows` starts with: the id and a name, then each
    field a filter of the call names (`status`, `site_id` -> site,
    `name__ic` -> name), then each field the answer cites, by its name
    ("serial") or by a value of its ("offline"). A list of offline devices
    read in NetBox's order had no status column among its first eight."""
    lead = [key for key in ("id",) if key in keys]
    lead += [key for key in IDENTITY_KEYS if key in keys][:1]
    filters = args.get("filters")
    for name in filters if isinstance(filters, Mapping) else ():
        base = str(name).strip().lower().partition("__")[0]
        lead += [k for k in (base, base.removesuffix("_id")) if k in keys and k not in lead][:1]
    text = answer.lower()
    for key in keys:
        if key not in lead and (
            _cites(text, key.replace("_", " ")) or any(_cites(text, cell(r.get(key))) for r in rows)
        ):
            lead.append(key)
    return lead


def _cites(text: str, value: str) -> bool:
    """Whether `text` (lower case) holds `value` as a word or words of its own;
    values shorter than 3 characters (ids, flags) would be found everywhere."""
    value = value.strip().lower()
    return len(value) >= 3 and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


def cell(value: object) -> str:
    """A field of a NetBox object, in a table cell: a nested object by its
    name, a list joined, nothing for null."""
    if value is None:
        return ""
    if isinstance(value, dict):
        for key in ("display", "name", "slug", "label", "value"):
            if isinstance(value.get(key), str | int):
                return str(value[key])
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return ", ".join(cell(item) for item in value)
    return str(value)
