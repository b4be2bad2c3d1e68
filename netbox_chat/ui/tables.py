"""Tables: `ls`, `/history`, `/tokens`, `config`, and NetBox's results as `/show` draws them.

Render only. Importing this module must stay cheap (rich only): `ls` uses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from netbox_chat.config import SETTINGS, Settings, without_userinfo
from netbox_chat.store.ledger import Turn
from netbox_chat.store.sessions import SessionSummary, epoch
from netbox_chat.ui.console import (
    context_meter,
    format_args,
    human_size,
    short_tokens,
    shorten,
)
from netbox_chat.visible import visible, visible_line
from netbox_chat.words import count, number

if TYPE_CHECKING:
    from rich.align import AlignMethod
    from rich.console import OverflowMethod

    from netbox_chat.claims import Grounding


class Columns:
    """Rows of cells in aligned columns, two spaces apart.

    Used instead of rich's Table, whose layout engine measures and wraps every
    cell: for `ls`'s twenty rows that cost 10 ms, and importing it 3 ms more,
    on a command whose whole budget is twice Python's start-up.

    In a terminal too narrow for every column whole, the table gives way in
    this order, so that what is left stays readable: the `flexible` column is
    shortened (down to `FLEXIBLE_MIN` cells, its cells ending in "…"); with
    `wrap`, each cell wraps inside its column at spaces, the widest columns
    narrowing first, none below its longest word; then the columns in `drop`
    are left out, one at a time, and a dim line under the table names them;
    only past all of that are words folded (with `wrap`) or lines cut at the
    terminal's edge. On a console that is not a terminal (a pipe, a file)
    nothing is cut, wrapped or left out: a `grep` must see every cell whole.
    """

    FLEXIBLE_MIN = 20
    # A wrapped column is never narrower than its longest word, up to this:
    # a longer word (a URL) is folded rather than take the whole line.
    WORD_MAX = 24

    def __init__(
        self,
        rows: Iterable[Sequence[Text]],
        *,
        header: Sequence[str] = (),
        right: Collection[int] = (),
        flexible: int | None = None,
        flexible_max: int | None = None,
        wrap: bool = False,
        drop: Sequence[int] = (),
    ) -> None:
        self.header = list(header)
        self.rows = [[Text(name, style="bold") for name in header]] if header else []
        self.rows.extend(list(row) for row in rows)
        self.right = right
        self.flexible = flexible
        self.flexible_max = flexible_max
        self.wrap = wrap
        self.drop = drop

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            return
        fit = console.is_terminal
        overflow: OverflowMethod = "ellipsis" if fit else "ignore"
        natural = [max(cell.cell_len for cell in column) for column in zip(*self.rows, strict=True)]
        if fit:
            kept, widths = self.layout(natural, options.max_width)
        else:
            kept, widths = list(range(len(natural))), natural
        lines: list[Text] = []
        for row in self.rows:
            cells = [
                self._cell(console, row[index], index, width)
                for index, width in zip(kept, widths, strict=True)
            ]
            for at in range(max(len(cell) for cell in cells)):
                line = Text()
                for index, (cell, width) in enumerate(zip(cells, widths, strict=True)):
                    if index:
                        line.append("  ")
                    line.append_text(cell[at] if at < len(cell) else Text(" " * width))
                line.rstrip()
                lines.append(line)
        yield Text("\n", no_wrap=True, overflow=overflow).join(lines)
        if self.header and (dropped := [self.header[i] for i in self.drop if i not in kept]):
            yield Text(f"not shown at this width: {', '.join(dropped)}", style="dim")

    def _cell(self, console: Console, cell: Text, index: int, width: int) -> list[Text]:
        """A cell as the lines it takes in a column `width` cells wide (new
        Texts: the row's own are left as they are)."""
        justify: AlignMethod = "right" if index in self.right else "left"
        if self.wrap and cell.cell_len > width:
            lines = list(cell.wrap(console, width, justify=justify, overflow="fold"))
        else:
            lines = [cell.copy()]
            lines[0].overflow = "ellipsis"
        for line in lines:
            line.align(justify, width)
        return lines

    def layout(self, natural: Sequence[int], max_width: int) -> tuple[list[int], list[int]]:
        """The columns shown and their widths, in a terminal `max_width` wide."""
        kept = list(range(len(natural)))
        floors = self._floors() if self.wrap else natural
        for left_out in [None, *self.drop]:
            if left_out is not None:
                kept.remove(left_out)
            widths = self._squeeze(kept, natural, floors, max_width)
            if sum(widths) + 2 * (len(kept) - 1) <= max_width:
                return kept, widths
        return kept, self._squeeze(kept, natural, [1] * len(natural), max_width)

    def _floors(self) -> list[int]:
        """How narrow each wrapped column may get: its longest word."""
        return [
            min(
                self.WORD_MAX,
                max(cell_len(word) for cell in column for word in [*cell.plain.split(), ""]),
            )
            for column in zip(*self.rows, strict=True)
        ]

    def _squeeze(
        self, kept: Sequence[int], natural: Sequence[int], floors: Sequence[int], max_width: int
    ) -> list[int]:
        """The `kept` columns' widths: the flexible one shortened, then (with
        `wrap`) the widest narrowed, a cell at a time, down to their floors."""
        room = max_width - 2 * (len(kept) - 1)
        widths = {index: natural[index] for index in kept}
        if self.flexible in widths:
            flexible = self.flexible
            others = sum(widths.values()) - widths[flexible]
            space = max(self.FLEXIBLE_MIN, room - others)
            widths[flexible] = min(widths[flexible], space, self.flexible_max or space)
        if self.wrap:
            while sum(widths.values()) > room:
                widest = max(kept, key=lambda index: (widths[index] > floors[index], widths[index]))
                if widths[widest] <= floors[widest]:
                    break
                widths[widest] -= 1
        return [widths[index] for index in kept]


def sessions_table(
    summaries: Sequence[SessionSummary], matches: Mapping[str, str] | None = None
) -> Columns:
    """`ls`: one row per session; user text is shown as typed, never as markup.

    The netbox column (profile or host) appears when the sessions listed are
    on more than one NetBox: otherwise it would say one thing on every row and
    take the room the titles need (`ls` names that one NetBox below). An
    "asked by" column appears when more than one user@host asked the listed
    turns (a team's store); alone, it would only repeat your name. With
    `matches` (`ls --grep`), the title gives way to the line that matched."""
    with_netbox = len({netbox_label(s) for s in summaries}) > 1
    team = len({who for s in summaries for who in s.asked_by}) > 1
    rows = []
    for s in summaries:
        ident = Text(s.id)
        if s.is_open:
            ident.append(" (open)", style="green")
        # A database session has no file of its own to measure.
        size = Text(human_size(s.size_bytes) if s.size_bytes else "-")
        netbox = [Text(netbox_label(s))] if with_netbox else []
        if s.unreadable:
            unreadable = Text(f"unreadable: {s.unreadable}", style="red")
            rows.append(
                [ident, unreadable, Text(), Text(), Text(), *netbox, size, *[Text()] * team]
            )
            continue
        shown = (s.title or "(no question yet)") if matches is None else matches.get(s.id, "")
        title = Text(visible_line(" ".join(shown.split())))
        if s.unanswered and s.title and not s.is_open:
            title = Text.assemble(("(never answered) ", "yellow"), title)
        rows.append(
            [
                ident,
                title,
                Text(number(s.turns)),
                Text(ago(s.last_active)),
                Text(visible_line(s.model)),
                *netbox,
                size,
                *[Text(shorten(", ".join(s.asked_by), 30))] * team,
            ]
        )
    header = (
        "id",
        "title" if matches is None else "match",
        "turns",
        "last active",
        "model",
        *(("netbox",) if with_netbox else ()),
        "size",
        *(("asked by",) if team else ()),
    )
    # Narrow, the least telling columns give way first; the title only shortens.
    drop = [
        header.index(name)
        for name in ("size", "turns", "asked by", "last active")
        if name in header
    ]
    return Columns(
        rows,
        header=header,
        right={2, header.index("size")},
        flexible=1,
        flexible_max=50,
        drop=drop,
    )


def ago(stamp: str, now: float | None = None) -> str:
    """An ISO time as `ls` shows it: how long ago, in plain words ("5 min
    ago", "3 days ago"), then the date once it is a month old; the stamp as it
    is if it cannot be read (a session file is not trusted)."""
    if (then := epoch(stamp)) is None:
        return stamp
    seconds = (time.time() if now is None else now) - then
    if seconds >= 30 * 86400:
        return datetime.fromtimestamp(then, UTC).date().isoformat()
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if (n := int(seconds // size)) >= 1:
            return f"{n} {unit}{'s' if unit == 'day' and n > 1 else ''} ago"
    return "just now"


def netbox_label(summary: SessionSummary) -> str:
    """The profile a session was started with, else its NetBox's host."""
    if summary.profile:
        return shorten(summary.profile, 20)
    return shorten(urlsplit(summary.netbox_url).netloc, 30) if summary.netbox_url else ""


def one_netbox(summaries: Sequence[SessionSummary]) -> str | None:
    """The line under `ls` when every session listed is on the same NetBox."""
    labels = {netbox_label(s) for s in summaries}
    if len(labels) != 1 or not (label := labels.pop()):
        return None
    return f"all on NetBox {label}"


SHOWN_ROWS = 50
"""Rows of a list result that `/show` draws as a table; the rest are counted."""


def tool_call_view(
    name: str, args: dict[str, Any], result: str, error: bool, answer: str = ""
) -> RenderableType:
    """One tool call for `/show`: its line, then what it returned, readable: a
    NetBox list as a table of its rows' fields (those the call filtered on and
    the `answer` cites first), other JSON indented, text as it came.
    Everything from NetBox is shown through `visible()`."""
    head = Text("  ")
    head.append("✗ " if error else "→ ", style="red" if error else "cyan")
    head.append(visible_line(name), style="bold")
    head.append(visible_line(f"({format_args(args)})"), style="dim")
    return Group(head, _result_view(result, args, answer))


def _result_view(result: str, args: dict[str, Any], answer: str) -> RenderableType:
    from netbox_chat.agent.evidence import (
        table_of,  # for /show only: not loaded before every prompt
    )

    try:
        data = json.loads(result)
    except ValueError:
        return Text(visible(result))
    table = table_of(data, max_rows=SHOWN_ROWS, args=args, answer=answer)
    if table is None:
        return Text(visible(json.dumps(data, indent=2, ensure_ascii=False)))
    parts: list[RenderableType] = [
        Columns(
            ([Text(visible_line(value)) for value in row] for row in table.rows),
            header=[visible_line(key) for key in table.keys],
            wrap=True,
            # NetBox lists an object's fields most telling first (id, name, ...)
            drop=range(len(table.keys) - 1, 0, -1),
        )
    ]
    if table.total > len(table.rows):
        parts.append(Text(f"… {count(table.total - len(table.rows), 'more row')}", style="dim"))
    if table.other_keys:
        left_out = visible_line(", ".join(table.other_keys))
        parts.append(Text(f"other fields (in export --format json): {left_out}", style="dim"))
    return Group(*parts)


def claims_view(grounding: Grounding, sources: Sequence[tuple[str, dict[str, Any]]]) -> Text:
    """`/show`'s claims: each claim of the answer with its verdict. A verified
    one names the record it rests on and the call that returned it (by its
    number and tool, `sources[i]` being the conversation's i-th call: the
    calls are printed above, not repeated here); an ungrounded one is marked;
    an unchecked one says it was not tied to a record, never with a ✓."""
    from netbox_chat.claims.present import MARK

    if grounding.failed:
        return Text(f"{grounding.failed}: the answer's claims are unchecked", style="yellow")
    if not grounding.all:
        return Text("the answer states no NetBox facts", style="dim")
    out = Text()
    seen: set[tuple[str, str]] = set()
    for claim in grounding.all:
        if (claim.text, claim.kind) in seen:
            continue
        seen.add((claim.text, claim.kind))
        if out:
            out.append("\n")
        sign, style, why = {
            "ungrounded": (MARK, "yellow", "not in NetBox's replies"),
            "unchecked": ("?", "dim", "unchecked: not tied to a NetBox record"),
        }.get(claim.status, ("✓", "green", "verified"))
        out.append(f"  {sign} ", style=style)
        out.append(visible_line(claim.text), style="" if sign == "✓" else style)
        where = f"{why} ({claim.reason})" if claim.reason else why
        if claim.status == "verified" and claim.source is not None:
            call = f"call {claim.source + 1}"
            if claim.source < len(sources):
                call += f" ({sources[claim.source][0]})"
            where = f"{claim.reason}, {call}" if claim.reason else f"in {call}"
        out.append(f" ({claim.kind}): {visible_line(where)}", style="dim")
    return out


def history_table(turns: Iterable[Turn]) -> Columns:
    """Numbered turns; cancelled, failed and rewound ones dimmed and labelled;
    an answer with its † marks and the line naming what they mark, as it was
    shown when it streamed."""
    from netbox_chat.ui import turnview  # the chat's, which `ls` does not import

    rows = []
    for turn in turns:
        if turn.status == "done":
            rows.append([Text(f"{turn.number}"), Text(shorten(turn.question, 90))])
            if turn.answer:
                answer = turnview.marked_answer(turn)
                rows.append([Text(), Text(shorten(answer, 90), style="dim")])
            if (grounded := turnview.stored_grounding_line(turn.grounding)) is not None:
                rows.append([Text(), grounded])
        else:
            rows.append(
                [
                    Text(f"{turn.number}", style="dim"),
                    Text(
                        f"{shorten(turn.question, 80)}  ({turn.status})",
                        style="dim strike" if turn.status == "rewound" else "dim",
                    ),
                ]
            )
    return Columns(rows, right={0}, flexible=1)


def tokens_table(turns: Sequence[Turn]) -> Columns:
    """Per turn: tokens in and out, tool calls, and the context it took (the
    largest request, the last, of which window; "cut" when Ollama truncated)."""
    rows = []
    total_in = total_out = 0
    for turn in turns:
        total_in += turn.tokens_in
        total_out += turn.tokens_out
        values = (turn.number, turn.status, turn.tokens_in, turn.tokens_out, len(turn.tool_calls))
        row = [Text(number(value)) for value in values]
        if turn.context_window and turn.prompt_tokens_last is not None:
            row.append(Text(short_tokens(turn.prompt_tokens_max or 0)))
            row.append(context_meter(turn.prompt_tokens_last, turn.context_window))
        else:
            row.extend([Text(), Text()])
        row.append(Text("cut", style="bold red") if turn.truncated else Text())
        rows.append(row)
    totals = ("total", "", number(total_in), number(total_out), "", "", "", "")
    rows.append([Text(value, style="bold") for value in totals])
    header = ("turn", "status", "in", "out", "tools", "largest", "last request", "")
    # Narrow, the meter and its `cut` stay whole; the counts it sums up give way.
    drop = [header.index(name) for name in ("tools", "largest", "out")]
    return Columns(rows, header=header, right={0, 2, 3, 4, 5}, flexible=1, drop=drop)


def _key_state(settings: Settings) -> str:
    """Whether the model server's key is set, never the key."""
    if settings.api_key:
        return f"set (from {settings.api_key_env})"
    if settings.provider != "openai":
        return "not used (provider ollama)"
    return f"not sent ({settings.api_key_env} is not set, or not configured with base_url)"


def settings_table(settings: Settings, *, token_failed: bool = False) -> Text:
    """`netbox-chat config`: each setting, its value, where it came from, one
    line each and never cut short (a path or URL is no use with an "…").

    The token is never shown: only whether it is set and from where, or that
    its token_command failed (the error follows on stderr)."""
    source = settings.token_source
    if token_failed:
        token = "failed (token_command; see below)"
    elif settings.netbox_token and source is not None:
        token = f"set (from {'token_command' if source.command else source.env})"
    else:
        token = "missing" + (f" ({source.env} is not set)" if source and source.env else "")
    rows = [("config file", str(settings.config_file or "(none)"), "")]
    if settings.profile is not None:
        rows.append(("profile", settings.profile, f"from {settings.origins.get('profile', '')}"))
    for setting in SETTINGS:
        value = getattr(settings, setting.name)
        shown = "(not set)" if value is None else str(value)
        if setting.name == "store" and value is not None:
            from netbox_chat.store.postgres import shown_url

            shown = shown_url(value)  # a database URL may carry a password
        elif setting.name in ("netbox_url", "base_url", "ollama_url") and value is not None:
            shown = without_userinfo(value, "***@")  # a proxy's user:password@
        rows.append((setting.name, shown, settings.origins.get(setting.name, "")))
        if setting.name == "api_key_env" and value is not None:
            rows.append(("api_key", _key_state(settings), ""))
    rows.append(("netbox_token", token, source.origin if source else ""))
    names = max(len(name) for name, _, _ in rows)
    values = max(len(value) for _, value, _ in rows)
    lines = [
        Text.assemble((name.ljust(names + 2), "bold"), value.ljust(values + 2), (origin, "dim"))
        for name, value, origin in rows
    ]
    for line in lines:
        line.rstrip()
    return Text("\n", no_wrap=True).join(lines)
