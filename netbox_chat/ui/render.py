"""Rich output: the streamed answer, tool lines, the status line, tables.

Render only; every decision is made elsewhere. Importing this module must stay
cheap (rich only), because `ls` uses it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import textwrap
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from netbox_chat.config import SETTINGS, ModelServer, Settings, without_userinfo
from netbox_chat.errors import UserFacingError
from netbox_chat.models.thinking import thought_for
from netbox_chat.store.ledger import Recap, Turn
from netbox_chat.store.sessions import SessionSummary, epoch
from netbox_chat.ui.mdstream import Finished, MarkdownBlocks, tail_preview
from netbox_chat.visible import visible, visible_line
from netbox_chat.words import count, number

if TYPE_CHECKING:
    from rich.align import AlignMethod
    from rich.console import JustifyMethod, OverflowMethod
    from rich.live import Live
    from rich.markdown import Markdown
    from rich.spinner import Spinner

    from netbox_chat.agent.turns import RollbackReport, TurnEvent, TurnOutcome
    from netbox_chat.claims import Grounding


class VisibleConsole(Console):
    """A console that never sends what it prints as terminal control.

    Titles, questions, answers, tool results, servers' errors: nearly every
    line holds text someone else could have written (issue 21, item 13), and
    rich's Text strips only BEL, BS, VT, FF and CR, not ESC. So the one place
    every printed character passes, the rendering of segments to the stream,
    shows each control character of the content as an escape (`visible`).
    The functions here that print such text also pass it through `visible`
    first, so that what rich strips is shown as well.
    Rich's own control segments (the live area's cursor moves) and the styles'
    escape codes are made by rich, not from the text, and are left alone.
    `_render_buffer` is rich's (private) last step; tests/test_visible_output.py
    walks every output path through it."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else segment._replace(text=visible(segment.text))
            for segment in buffer
        )


def markdown(text: str) -> RenderableType:
    """Rich's Markdown, imported on first use: it costs tens of milliseconds,
    which `ls` should not pay. Headings stay at the left edge, as the lines
    around them and as other terminal tools draw them (rich centres `#`). A
    link shows where it goes: a terminal hyperlink would let an answer's words
    say one address and open another."""
    return _left_markdown()(visible(text), hyperlinks=False)


@functools.cache
def _left_markdown() -> type[Markdown]:
    from rich.markdown import Heading, Markdown, MarkdownElement

    class LeftHeading(Heading):
        LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(Heading.LEVEL_ALIGN, "left")

    class LeftMarkdown(Markdown):
        elements: ClassVar[dict[str, type[MarkdownElement]]] = {
            **Markdown.elements,
            "heading_open": LeftHeading,
        }

    return LeftMarkdown


def human_size(size: int | float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def short_tokens(tokens: int) -> str:
    """9.8k, 16k: in units of 1,024, as windows are sized."""
    if tokens < 1024:
        return str(tokens)
    return f"{tokens / 1024:.1f}".removesuffix(".0") + "k"


def context_meter(tokens: int, window: int) -> Text:
    """`context 9.8k / 16k (61%)`, green under 60%, yellow under 80%, red above."""
    fill = tokens / window if window else 0.0
    style = "green" if fill < 0.6 else "yellow" if fill < 0.8 else "bold red"
    return Text(
        f"context {short_tokens(tokens)} / {short_tokens(window)} ({round(fill * 100)}%)",
        style=style,
    )


def compaction_meter(before: int, after: int, window: int) -> Text:
    """What `/compact` did to the next request: the meter before → after."""
    return Text.assemble(context_meter(before, window), " → ", context_meter(after, window))


def truncation_line(window: int) -> Text:
    return Text(
        f"Ollama cut this request to fit its {short_tokens(window)} window: the model did "
        "not see all of the conversation. /compact, or raise NETBOX_CHAT_NUM_CTX",
        style="bold red",
    )


def format_args(args: dict[str, Any], limit: int = 120) -> str:
    text = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items()
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_line(
    name: str, args: dict[str, Any], result_chars: int, seconds: float, error: bool, width: int
) -> Text:
    """One line per call, within `width`: the arguments give way (`…`) so the
    size and time stay on the line they belong to, never wrapped to the next."""
    tail = f"  {human_size(result_chars)}  {seconds:.2f}s"
    room = width - len(f"  → {name}()") - len(tail) - 1
    line = Text("  ")
    line.append("✗ " if error else "→ ", style="red" if error else "cyan")
    line.append(name, style="bold")
    line.append(f"({format_args(args, max(20, min(120, room)))})", style="dim")
    line.append(tail, style="dim")
    return line


THINKING_LINES = 4
"""How much of the thinking the live area shows while the model thinks."""


def thinking_tail(text: str, width: int, lines: int = THINKING_LINES) -> Text:
    """The last few lines of the thinking, wrapped to `width`, dimmed: enough to
    follow the model, never a wall of text."""
    wrapped: list[str] = []
    for paragraph in visible(text).splitlines()[-lines:]:
        wrapped.extend(textwrap.wrap(paragraph, max(width - 2, 20)) or [""])
    return Text("\n".join("  " + line for line in wrapped[-lines:]), style="dim italic")


def thinking_text(turn: Turn) -> RenderableType:
    """A turn's full thinking, for `/thinking`: a dim header, then the text as written."""
    header = Text(
        f"turn {turn.number} · {thought_for(turn.thinking_seconds)} · "
        f"{number(turn.thinking_chars)} characters",
        style="dim",
    )
    return Group(header, Text(visible(turn.thinking or ""), style="dim italic"))


class _Status:
    """The line under the answer while a turn runs: a spinner, what the turn
    waits for (a running tool with its arguments) and the elapsed time. Rich
    draws it on its own refresh thread, so it keeps moving while we wait."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.activity = "thinking"
        self.spinner: Spinner | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.spinner import Spinner

        if self.spinner is None:
            self.spinner = Spinner("dots", style="cyan")
        elapsed = time.monotonic() - self.started
        self.spinner.update(text=Text(f"{self.activity}… {elapsed:.1f}s", style="dim"))
        yield self.spinner


DISCARDED = Style(dim=True, strike=True)
"""How an answer cut short by a cancel or an error stays on screen: still
readable, plainly not a valid answer."""


class AnswerBlock:
    """Finished Markdown, laid out once: printed above the live area and never
    rendered again, which keeps drawing an answer linear in its length."""

    def __init__(self, lines: list[list[Segment]], *, gap: bool = False) -> None:
        self.lines = [[], *lines] if gap and lines else lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


def answer_block(
    console: Console, text: str, *, gap: bool = False, style: Style | None = None
) -> AnswerBlock:
    """Markdown from the model, laid out for `console`: shown through
    `visible()`, and without the empty lines rich puts around some blocks, so
    blocks printed one by one are spaced as the whole answer would be (one
    empty line between two, `gap`)."""
    return AnswerBlock(_lines(console, markdown(visible(text)), style), gap=gap)


def _lines(
    console: Console, renderable: RenderableType, style: Style | None
) -> list[list[Segment]]:
    lines = console.render_lines(renderable, console.options, style=style, pad=False)
    start, end = 0, len(lines)
    while start < end and not any(segment.text for segment in lines[start]):
        start += 1
    while end > start and not any(segment.text for segment in lines[end - 1]):
        end -= 1
    return lines[start:end]


@dataclass
class TableLayout:
    """A streamed table's columns, fixed by its first rows: the rows after
    them are drawn under the same columns as they arrive (a cell wider than
    its column wraps inside it, as in rich's own tables)."""

    widths: list[int] | None = None
    """Each column's width with its padding, as rich's table chose them."""
    justify: list[AlignMethod] = field(default_factory=list)
    """Each column's alignment, from the delimiter row."""


@functools.cache
def _rows_markdown() -> Callable[[str, TableLayout], RenderableType]:
    """Rich's Markdown, whose tables are drawn under a `TableLayout`: the
    first rows by rich's own table, which fixes the layout's widths, the
    later ones by `_body_rows`. Made on first use, as `markdown()` is."""
    from rich.markdown import Markdown, MarkdownElement, TableElement
    from rich.markdown import Markdown as Base
    from rich.table import Table

    class RowsTable(TableElement):
        layout: TableLayout

        @classmethod
        def create(cls, markdown: Base, token: Any) -> MarkdownElement:
            del token
            element = cls()
            element.layout = markdown.layout  # type: ignore[attr-defined]
            return element

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            if self.layout.widths is not None:
                rows = self.body.rows if self.body is not None else []
                yield _BodyRows([[cell.content for cell in row.cells] for row in rows], self.layout)
                return
            for table in super().__rich_console__(console, options):
                assert isinstance(table, Table)
                # Rich's own width negotiation (a private method in rich 14
                # and 15), kept for the rows that follow.
                inner = options.update_width(options.max_width - table._extra_width)
                self.layout.widths = table._calculate_column_widths(console, inner)
                yield table

    class RowsMarkdown(Markdown):
        elements: ClassVar[dict[str, type[MarkdownElement]]] = {
            **Markdown.elements,
            "table_open": RowsTable,
        }

        def __init__(self, text: str, layout: TableLayout) -> None:
            super().__init__(text)
            self.layout = layout

    return RowsMarkdown


class _BodyRows:
    """Table rows under fixed columns, laid out as rich's Markdown tables lay
    them out (box SIMPLE, no padding at the edges, one space between columns,
    cells wrapped at words), at a fraction of the cost: rich's table measures
    and pads every cell through its generic machinery, about 6 ms a row here,
    which a table streaming hundreds of rows a second cannot afford.

    The columns were fixed by the first rows, but a later word may be wider
    (row 100 of a table whose first rows numbered to 10). While the table
    still fits the terminal, its column widens for it and the rows from there
    on sit further right; past the terminal's edge, the word folds inside its
    cell. Either way every character the model wrote is on the screen: rich's
    "1…" would show a different answer from the one the model gave."""

    def __init__(self, rows: list[list[Text]], layout: TableLayout) -> None:
        self.rows = rows
        self.widths = layout.widths or []  # the layout's own list: a widening lasts
        self.justify = layout.justify

    def _widen(self, room: int) -> None:
        """Each column as wide as the longest word its rows hold, as far as
        `room` (the terminal's width) allows."""
        last = len(self.widths) - 1
        for row in self.rows:
            for index, cell in enumerate(row[: last + 1]):
                pad = 0 if index == last else 1
                need = max((cell_len(word) for word in cell.plain.split()), default=0) + pad
                spare = room - (sum(self.widths) + len(self.widths) + 1)
                if need > self.widths[index] and spare > 0:
                    self.widths[index] = min(need, self.widths[index] + spare)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(console):
            yield from line
            yield Segment.line()

    def lines(self, console: Console) -> list[list[Segment]]:
        """The rows' lines, as segments: laid out here, not by rich's line
        splitting, which would cost as much again."""
        self._widen(console.width)
        lines: list[list[Segment]] = []
        last = len(self.widths) - 1
        space = Segment(" ")
        for row in self.rows:
            row = row + [Text()] * (len(self.widths) - len(row))
            columns: list[list[Text]] = []
            for index, (cell, width) in enumerate(zip(row, self.widths, strict=False)):
                inner = width if index == last else width - 1  # the padding on the right
                if cell.cell_len <= inner and "\n" not in cell.plain:
                    columns.append([cell])
                else:
                    columns.append(list(cell.wrap(console, inner, overflow="fold")))
            for at in range(max((len(wrapped) for wrapped in columns), default=0)):
                segments = [space]
                for index, (wrapped, width) in enumerate(zip(columns, self.widths, strict=False)):
                    line = wrapped[at] if at < len(wrapped) else Text()
                    justify = self.justify[index] if index < len(self.justify) else "left"
                    if not line.spans and justify == "left":
                        style = console.get_style(line.style) if line.style else None
                        segments.append(Segment(line.plain + " " * (width - line.cell_len), style))
                    else:
                        line = line.copy()
                        line.align(justify, width)
                        segments.extend(line.render(console, end=""))
                    segments.append(space)
                lines.append(segments)
        return lines


_MARKUP = re.compile(r"[*_`\\[\]<>&~!]")
"""Characters that may begin inline Markdown; a row without any is plain text."""


def _plain_rows(rows: str) -> list[list[Text]] | None:
    """The cells of table rows that hold no inline Markdown, split as GFM
    splits them; None when some cell needs the Markdown parser."""
    if _MARKUP.search(rows):
        return None
    cells = []
    for row in rows.splitlines():
        row = row.strip().removeprefix("|")
        row = row[:-1] if row.endswith("|") else row
        cells.append([Text(cell.strip()) for cell in row.split("|")])
    return cells


def _justify(delimiter_row: str) -> list[AlignMethod]:
    """Each column's alignment, from a table's delimiter row (`:--`, `:-:`, `--:`)."""
    row = delimiter_row.strip().removeprefix("|")
    row = row[:-1] if row.endswith("|") else row
    justify: list[AlignMethod] = []
    for cell in row.split("|"):
        cell = cell.strip()
        left, right = cell.startswith(":"), cell.endswith(":")
        justify.append("center" if left and right else "right" if right else "left")
    return justify


def table_rows(
    console: Console,
    piece: Finished,
    layout: TableLayout,
    *,
    gap: bool = False,
    style: Style | None = None,
) -> AnswerBlock:
    """Some of a streamed table's rows, under the columns `layout` fixes: the
    first ones by rich's own table, with the header (and the empty edge rich
    draws above it), the last ones with the edge below."""
    first = layout.widths is None
    if first:
        lines = _lines(console, _rows_markdown()(visible(piece.text), layout), style)
        layout.justify = _justify(piece.table.rstrip("\n").rsplit("\n", 1)[-1])
        if not piece.last:
            lines = lines[:-1]  # the edge under the table: it goes on
    else:
        plain = _plain_rows(visible(piece.text))
        if plain is not None:
            lines = _BodyRows(plain, layout).lines(console)
            if style is not None:
                lines = [list(Segment.apply_style(line, post_style=style)) for line in lines]
        else:
            text = visible(piece.table + piece.text)
            lines = _lines(console, _rows_markdown()(text, layout), style)
        if piece.last and layout.widths:
            lines.append([Segment(" " * (sum(layout.widths) + len(layout.widths) + 1))])
    return AnswerBlock(lines, gap=gap)


@dataclass(frozen=True)
class _Drawn:
    """The live area's last layout of the unfinished block, kept while its
    text and width stay the same."""

    text: str
    width: int
    gap: bool
    lines: list[list[Segment]]
    hidden: int = 0  # lines above the preview, left out (0 for a streamed table)
    markdown: bool = True  # laid out as a Markdown block, not as table rows


class _LiveArea:
    """What the live area shows, read when rich draws it (8 times a second
    and whenever a line is printed above): the thinking's last lines, the
    answer's unfinished block, the status line. Reading at draw time, not at
    every token, is what keeps a fast stream cheap."""

    def __init__(self, view: TurnView) -> None:
        self.view = view
        self.drawn: _Drawn | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        view = self.view
        if view.thinking:
            yield thinking_tail(view.thinking, options.max_width)
        yield AnswerBlock(self._tail(console, options))
        if not view.finished:
            yield view.status

    def _tail(self, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        """The unfinished block, cut to its last lines when it would not fit on
        the screen (a long table keeps its header row); a streamed table's
        next rows, under its columns."""
        blocks, gap = self.view.blocks, self.view.printed
        text = blocks.tail
        if not text.strip():
            return []
        drawn = self.drawn
        if drawn is None or (drawn.text, drawn.width, drawn.gap) != (text, options.max_width, gap):
            drawn = self.drawn = self._layout(console, text, options.max_width, gap)
        if not drawn.hidden:
            return drawn.lines
        more = f"… {number(drawn.hidden)} more lines, drawn when the block is complete"
        return [[Segment(more, DIM)], *drawn.lines]

    def _layout(self, console: Console, text: str, width: int, gap: bool) -> _Drawn:
        if self.view.blocks.table_started and self.view.table is not None:
            rows = table_rows(console, Finished(text, self.view.blocks.table), self.view.table)
            return _Drawn(text, width, gap, rows.lines, markdown=False)
        shown, hidden = tail_preview(text, preview_lines(console))
        return _Drawn(text, width, gap, answer_block(console, shown, gap=gap).lines, hidden)


def preview_lines(console: Console) -> int:
    """Lines of an unfinished block shown at once: half the screen."""
    return max(console.size.height // 2, 5)


DIM = Style(dim=True)


class TurnView:
    """Renders one turn's events: streamed Markdown, tool lines, status line.

    The answer is cut into blocks as it streams (`MarkdownBlocks`): a finished
    block is laid out once and printed above the live area; only the block
    still being written is drawn again, at rich's refresh rate, not per token.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.blocks = MarkdownBlocks()
        self.printed = False  # a block of the current model call's answer is on screen
        self.shown = False  # any of this turn's answer text was shown
        self.thinking = ""  # of the model call under way, until it starts answering
        self.status = _Status()
        self.live: Live | None = None
        self.area: _LiveArea | None = None  # the live area, in a terminal
        self.running_tools: dict[str, str] = {}
        self.table: TableLayout | None = None  # the columns of the table being streamed
        self.discarded = False
        self.finished = False
        # Marks the claims of each answer block NetBox's replies do not hold
        # (claims.marks.Marker), set by the REPL and `ask` in a terminal.
        self.marker: Callable[[str], str] | None = None

    def __enter__(self) -> TurnView:
        # The turn's clock starts here: `ask` makes its view before building
        # the agent, which took seconds the status line counted as thinking.
        self.status.started = time.monotonic()
        if self.console.is_terminal:
            from rich.live import Live

            self.area = _LiveArea(self)
            self.live = Live(self.area, console=self.console, refresh_per_second=8, transient=False)
            self.live.__enter__()
        return self

    def discard(self) -> None:
        """The turn was cancelled or failed: what is left of its answer is
        drawn dimmed and struck through, and marked as discarded."""
        self.discarded = True

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is not None:
            self.discarded = True
        self._flush()
        if self.discarded and self.shown:
            self._print_above(Text("✗ partial answer discarded", style="yellow"))
        self.finished = True
        self.thinking = ""
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None

    def _flush(self) -> None:
        """Print what is left of the current model call's answer, once. A
        discarded one is not worth laying out in full: its last lines do."""
        blocks, self.blocks = self.blocks, MarkdownBlocks()
        text = blocks.tail
        if blocks.table_started:
            self._print_piece(Finished(text, blocks.table, last=True))
        elif text.strip():
            if not self.discarded:
                self._print_block(text)
            else:
                self._print_discarded(text)
        self.printed = False

    def _print_discarded(self, text: str) -> None:
        """A discarded block is not worth laying out in full: its last lines
        are, struck through. They are what the live area last drew, when it
        did (its layout is reused: Ctrl-C does not wait for Markdown), else
        laid out now."""
        drawn = self.area.drawn if self.area is not None else None
        if drawn is None or not drawn.markdown or not text.startswith(drawn.text):
            shown, hidden = tail_preview(text, preview_lines(self.console))
            lines = answer_block(self.console, shown, gap=self.printed).lines
        else:
            lines, hidden = drawn.lines, drawn.hidden
        if hidden:
            self._print_above(Text(f"… {number(hidden)} more lines", style=DISCARDED))
        if lines:
            styled = [list(Segment.apply_style(line, post_style=DISCARDED)) for line in lines]
            self._print_above(AnswerBlock(styled))
            self.printed = self.shown = True

    def _print_piece(self, piece: Finished) -> None:
        if not piece.table:
            self._print_block(piece.text)
            return
        if self.marker is not None and not self.discarded and piece.text:
            piece = dataclasses.replace(piece, text=self.marker(piece.text))
        if piece.first or self.table is None:
            self.table = TableLayout()
        style = DISCARDED if self.discarded else None
        gap = self.printed and piece.first
        block = table_rows(self.console, piece, self.table, gap=gap, style=style)
        if piece.last:
            self.table = None
        if block.lines:
            self._print_above(block)
            self.printed = self.shown = True

    def _print_block(self, text: str) -> None:
        if self.marker is not None and not self.discarded:
            text = self.marker(text)
        block = answer_block(
            self.console, text, gap=self.printed, style=DISCARDED if self.discarded else None
        )
        if block.lines:
            self._print_above(block)
            self.printed = self.shown = True

    def _print_above(self, renderable: RenderableType) -> None:
        if self.live is not None:
            # Rich takes the live area's lock only to note how tall the area
            # last drawn is, then lays out and writes without it; a refresh
            # from its thread in between left the erase counting the wrong
            # height: a line of the area stayed on the screen twice, or lines
            # printed above were erased (a fast stream showed both). Held
            # for the whole print (`_lock` is rich's RLock, private in 14 and 15).
            with self.live._lock:
                self.live.console.print(renderable)
        else:
            self.console.print(renderable)

    def _waiting(self) -> str:
        if not self.running_tools:
            return "thinking"
        return "waiting for " + ", ".join(self.running_tools.values())

    def on_event(self, event: TurnEvent) -> None:
        from netbox_chat.agent.turns import (
            ContextCompacted,
            ContextSummaryFailed,
            GroundingRetry,
            RollingBack,
            TextDelta,
            ThinkingDelta,
            ThinkingFinished,
            ToolFinished,
            ToolStarted,
        )
        from netbox_chat.models.liveness import Waiting

        if isinstance(event, TextDelta):
            self.status.activity = "answering"
            if self.blocks.tail or event.text.strip():
                self.shown = True
            for piece in self.blocks.feed(event.text):
                self._print_piece(piece)
        elif isinstance(event, ThinkingDelta):
            self.thinking += event.text
            self.status.activity = "thinking"
        elif isinstance(event, ThinkingFinished):
            # The live area collapses to one line; /thinking prints it all.
            self.thinking = ""
            self._print_above(Text(f"  {thought_for(event.seconds)}", style="dim"))
        elif isinstance(event, ToolStarted):
            # Text before a tool call is the model thinking aloud; keep it.
            self._flush()
            self.running_tools[event.call_id] = visible_line(
                f"{event.name}({format_args(event.args, 60)})"
            )
            self.status.activity = self._waiting()
        elif isinstance(event, ToolFinished):
            self.running_tools.pop(event.call_id, None)
            self._print_above(
                tool_line(
                    event.name,
                    event.args,
                    event.result_chars,
                    event.seconds,
                    event.error,
                    # piped, a line is never cut to a width (issue 25 item 7)
                    self.console.width if self.console.is_terminal else 10_000,
                )
            )
            self.status.activity = self._waiting()
        elif isinstance(event, GroundingRetry):
            self._flush()
            self._print_above(
                Text(
                    f"not in NetBox's replies: {visible_line(', '.join(event.claims))}; "
                    "asking the model to correct them",
                    style="yellow",
                )
            )
            if self.marker is not None and hasattr(self.marker, "restart"):
                self.marker.restart()
            self.status.activity = "thinking"
        elif isinstance(event, RollingBack):
            self.status.activity = "cancelling, rolling back"
        elif isinstance(event, Waiting):
            self.status.activity = event.activity  # "loading qwen3:8b", before a first byte
        elif isinstance(event, ContextCompacted):
            self._print_above(
                Text(
                    f"context {short_tokens(event.tokens_before)}/{short_tokens(event.window)}: "
                    f"summarized {count(event.summarized, 'older message')}",
                    style="cyan",
                )
            )
            self.status.activity = "thinking"
        elif isinstance(event, ContextSummaryFailed):
            self._print_above(
                Text(
                    f"context {short_tokens(event.tokens)}/{short_tokens(event.window)}: "
                    f"could not summarize ({visible_line(event.reason)}); "
                    "this request goes on uncompacted",
                    style="yellow",
                )
            )


def grounding_line(outcome: TurnOutcome) -> Text | None:
    """The line after an answer naming the claims NetBox's replies do not
    hold (each marked in the answer), or saying it was answered without
    NetBox; None when every claim rests on NetBox."""
    from netbox_chat.claims.marks import MARK, summary_line

    if outcome.status != "done" or outcome.grounding is None:
        return None
    line = summary_line(outcome.grounding)
    if not line:
        return None
    mark = "" if outcome.grounding.without_netbox else f"{MARK} "
    return Text(f"{mark}{visible_line(line)}", style="yellow")


def print_outcome(console: Console, outcome: TurnOutcome, seconds: float) -> None:
    """The line after a turn: tokens, time and the context meter, or what went
    wrong and what was rolled back (one line, so it wraps only between words);
    and the red line when Ollama cut one of the turn's requests. Before it,
    the grounding line when an answer's claims are not all in NetBox's replies."""
    if (grounded := grounding_line(outcome)) is not None:
        console.print(grounded)
    if outcome.context.truncated and outcome.context.window:
        console.print(truncation_line(outcome.context.window))
    if outcome.status == "done":
        line = Text(
            f"turn {outcome.number} · tokens {number(outcome.tokens_in)} in / "
            f"{number(outcome.tokens_out)} out · {seconds:.1f}s",
            style="dim",
        )
        context = outcome.context
        if context.window and context.prompt_tokens_last is not None:
            line.append(" · ", style="dim")
            line.append_text(context_meter(context.prompt_tokens_last, context.window))
        console.print(line)
        return
    if outcome.status == "cancelled":
        line = Text(f"turn {outcome.number} cancelled", style="yellow")
    else:
        line = Text(f"turn {outcome.number} failed: {visible(outcome.error or '')}", style="red")
    if outcome.rollback is not None:
        line.append("; ")
        line.append_text(rollback_text(outcome.rollback))
    console.print(line)


def print_rollback(console: Console, report: RollbackReport, *, reason: str = "") -> None:
    console.print(rollback_text(report, reason=reason))


def rollback_text(report: RollbackReport, *, reason: str = "") -> Text:
    if report.verified:
        return Text(
            f"{reason}rolled back ({count(report.removed_messages, 'message')} removed); "
            "the model will not see it",
            style="dim",
        )
    return Text(
        f"{reason}rollback of turn {report.turn} could not be verified: "
        f"{'; '.join(report.problems)}. Use /rewind to return to the last clean turn.",
        style="bold red",
    )


def error_line(error: BaseException, *, prefix: str = "") -> Text:
    """One red line for an error. A `UserFacingError` says what to do; anything
    else is a bug of ours, named by its type and first line. Printed as text:
    messages quote what the user typed, which must never be read as markup."""
    if isinstance(error, UserFacingError):
        message = str(error)
    else:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        message = (
            f"unexpected error ({type(error).__name__}{': ' + first if first else ''}); "
            "this is a bug in netbox-chat, please report it"
        )
    return Text(prefix + visible(message), style="red")


def outage_line(outage: str, *, prefix: str = "") -> Text:
    """The red line after a turn NetBox could not serve (unreachable, or the
    token refused): the answer was made without NetBox, however sure it reads."""
    return Text(f"{prefix}answered without NetBox: {outage}", style="bold red")


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
                *[Text(_shorten(", ".join(s.asked_by), 30))] * team,
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
        return _shorten(summary.profile, 20)
    return _shorten(urlsplit(summary.netbox_url).netloc, 30) if summary.netbox_url else ""


def one_netbox(summaries: Sequence[SessionSummary]) -> str | None:
    """The line under `ls` when every session listed is on the same NetBox."""
    labels = {netbox_label(s) for s in summaries}
    if len(labels) != 1 or not (label := labels.pop()):
        return None
    return f"all on NetBox {label}"


def _shorten(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters, its control
    characters shown (before a split would take some for spaces)."""
    text = " ".join(visible(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


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
    """`/show`'s claims: each claim of the answer, what kind it is, and the
    tool result it rests on (`sources[i]`: the call of the conversation's
    i-th result), or that NetBox's replies do not hold it."""
    from netbox_chat.claims.marks import MARK

    out = Text()
    if not grounding.all:
        return Text("the answer states no NetBox facts", style="dim")
    seen: set[tuple[str, str]] = set()
    for claim in grounding.all:
        if (claim.text, claim.kind) in seen:
            continue
        seen.add((claim.text, claim.kind))
        if out:
            out.append("\n")
        if claim.status == "ungrounded":
            out.append(f"  {MARK} ", style="yellow")
            out.append(visible_line(claim.text), style="yellow")
            out.append(f" ({claim.kind}): not in NetBox's replies", style="dim")
            continue
        out.append("  ✓ ", style="green")
        out.append(visible_line(claim.text))
        how = "derived from" if claim.status == "derived" else "in"
        where = "the objects the answer lists"
        if claim.source is not None and claim.source < len(sources):
            name, args = sources[claim.source]
            where = f"{visible_line(name)}({format_args(args, 80)})"
        elif claim.status == "grounded":
            where = "NetBox's replies"
        out.append(f" ({claim.kind}): {how} {where}", style="dim")
    return out


def history_table(turns: Iterable[Turn]) -> Columns:
    """Numbered turns; cancelled, failed and rewound ones dimmed and labelled."""
    rows = []
    for turn in turns:
        if turn.status == "done":
            rows.append([Text(f"{turn.number}"), Text(_shorten(turn.question, 90))])
            if turn.answer:
                rows.append([Text(), Text(_shorten(turn.answer, 90), style="dim")])
        else:
            rows.append(
                [
                    Text(f"{turn.number}", style="dim"),
                    Text(
                        f"{_shorten(turn.question, 80)}  ({turn.status})",
                        style="dim strike" if turn.status == "rewound" else "dim",
                    ),
                ]
            )
    return Columns(rows, right={0}, flexible=1)


RECAP_LINES = 12
"""Lines of the last answer's Markdown that `resume` draws; the rest is one
line saying how many more there are and how to see them."""


def netbox_and_model(settings: Settings) -> str:
    """`NetBox lab (netbox.example.com) · model qwen3:8b`: which NetBox the
    session asks, and with which model, said on every start and resume (the
    NetBox's `user:password@` never)."""
    netbox = without_userinfo(settings.netbox_url) if settings.netbox_url else None
    host = urlsplit(netbox).netloc if netbox else "(no URL set)"
    where = f"{settings.profile} ({host})" if settings.profile else host
    return visible_line(f"NetBox {where} · model {settings.model}")


def server_line(settings: Settings) -> Text:
    """`on ollama server http://127.0.0.1:11434`: the model server the session
    asks, under the first line of every start and resume, so that the resume
    command a session ends with is seen to reach the same one."""
    return Text(visible_line(f"on {ModelServer.of(settings).shown()}"), style="dim")


def print_banner(console: Console, session_id: str, settings: Settings, thinking: str) -> None:
    """The first lines of a new session."""
    console.print(
        Text.assemble(
            ("netbox-chat", "bold"),
            " session ",
            (session_id, "bold"),
            f" · {netbox_and_model(settings)}",
        )
    )
    console.print(server_line(settings))
    console.print(Text(f"{thinking} · {LEAVE_HINT}", style="dim"))


LEAVE_HINT = "/help for commands; exit or Ctrl-D to leave"


def print_recap(
    console: Console, session_id: str, recap: Recap, settings: Settings
) -> Callable[[], None]:
    """What `resume` restored: the session's NetBox and model, how many turns
    were answered (the count `ls` shows), the last exchange with the first
    lines of its answer rendered, and the turns that did not finish after it.
    Questions and answers are shown as text, never read as markup.

    The first lines are printed now; the rest is returned, to be drawn once
    the prompt is up (above it): rendering Markdown, with its imports, would
    cost the resumed prompt about as much as the rest of its start-up."""
    line = Text.assemble(
        (f"resumed session {session_id}", "bold"),
        f": {count(recap.turns, 'turn')}, {count(recap.messages, 'message')}"
        f" · {netbox_and_model(settings)}",
    )
    console.print(line)
    console.print(server_line(settings))
    if recap.last is not None:
        question = visible_line(_shorten(recap.last.question, 200))
        console.print(Text.assemble((f"turn {recap.last.number}: ", "dim"), question))

    def rest() -> None:
        shown: list[RenderableType] = []
        answer = recap.last.answer if recap.last is not None else ""
        if answer:
            lines = answer.rstrip("\n").split("\n")
            shown.append(answer_block(console, "\n".join(lines[:RECAP_LINES])))
            if len(lines) > RECAP_LINES:
                more = count(len(lines) - RECAP_LINES, "more line")
                shown.append(
                    Text(f"… {more}: `netbox-chat export {session_id}` to see all", style="dim")
                )
        for turn in recap.unfinished:
            question = visible_line(_shorten(turn.question, 80))
            shown.append(Text(f"turn {turn.number} was {turn.status}: {question}", style="dim"))
        shown.append(Text(LEAVE_HINT, style="dim"))
        console.print(Group(*shown))  # one write: it lands above the prompt at once

    return rest


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
