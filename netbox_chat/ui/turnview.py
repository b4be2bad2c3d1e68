"""The turn view: a turn's streamed answer, tool lines, status line, and a session's first lines.

Render only; every decision is made elsewhere (`agent/turns.py`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from netbox_chat.config import ModelServer, Settings, without_userinfo
from netbox_chat.errors import UserFacingError
from netbox_chat.models.thinking import thought_for
from netbox_chat.store.ledger import Recap, Turn
from netbox_chat.ui.console import (
    DIM,
    context_meter,
    format_args,
    human_size,
    markdown,
    short_tokens,
    shorten,
)
from netbox_chat.ui.mdstream import Finished, MarkdownBlocks, tail_preview
from netbox_chat.visible import visible, visible_line
from netbox_chat.words import count, number

if TYPE_CHECKING:
    from rich.align import AlignMethod
    from rich.live import Live
    from rich.spinner import Spinner

    from netbox_chat.agent.turns import RollbackReport, TurnEvent, TurnOutcome


def compaction_meter(before: int, after: int, window: int) -> Text:
    """What `/compact` did to the next request: the meter before → after."""
    return Text.assemble(context_meter(before, window), " → ", context_meter(after, window))


def truncation_line(window: int) -> Text:
    return Text(
        f"Ollama cut this request to fit its {short_tokens(window)} window: the model did "
        "not see all of the conversation. /compact, or raise NETBOX_CHAT_NUM_CTX",
        style="bold red",
    )


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


class _Restrike:
    """`lines` printed just above, drawn again in their place, struck through."""

    def __init__(self, lines: list[list[Segment]]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.control import Control

        yield Control.move(0, -len(self.lines))
        for line in self.lines:
            yield from Segment.apply_style(line, post_style=DISCARDED)
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
        # The lines of the answer's finished blocks printed since any other
        # line: right above the live area, struck through if it is discarded.
        self.answer_lines: list[list[Segment]] = []
        # Marks the claims of each answer block NetBox's replies do not hold
        # (claims.present.Marker), set by the REPL and `ask` in a terminal.
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
        if self.discarded:
            self._strike_printed()
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
            self._print_above(block, answer=not self.discarded)
            self.printed = self.shown = True

    def _print_block(self, text: str) -> None:
        if self.marker is not None and not self.discarded:
            text = self.marker(text)
        block = answer_block(
            self.console, text, gap=self.printed, style=DISCARDED if self.discarded else None
        )
        if block.lines:
            self._print_above(block, answer=not self.discarded)
            self.printed = self.shown = True

    def _strike_printed(self) -> None:
        """Draw the discarded answer's finished blocks again over themselves,
        struck through: they were printed as a valid answer before the cancel
        or the error came. The lines scrolled above the screen's top cannot
        be reached; the ones below it can."""
        lines, self.answer_lines = self.answer_lines, []
        if self.live is None or not lines:
            return
        # The live area's height as last drawn (rich's private `_shape`, in 14 and 15).
        shape = getattr(self.live._live_render, "_shape", None)
        below = shape[1] if shape else preview_lines(self.console) + THINKING_LINES + 1
        room = self.console.size.height - below - 1
        if room > 0:
            self._print_above(_Restrike(lines[-room:]))

    def _print_above(self, renderable: RenderableType, *, answer: bool = False) -> None:
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
        if answer and isinstance(renderable, AnswerBlock):
            self.answer_lines.extend(renderable.lines)
        elif not isinstance(renderable, _Restrike):
            self.answer_lines = []  # a line between: what was above is out of reach

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
    hold (each marked in the answer), how many could not be checked, or
    saying it was answered without NetBox or that the check failed; None
    when every claim was verified."""
    from netbox_chat.claims.present import summary_line

    if outcome.status != "done" or outcome.grounding is None:
        return None
    grounding = outcome.grounding
    return _grounding_text(
        summary_line(grounding), bool(grounding.ungrounded) and not grounding.without_netbox
    )


def stored_grounding_line(grounding: dict[str, Any] | None) -> Text | None:
    """`grounding_line` of a grounding as the ledger keeps it (a recap, `/history`)."""
    from netbox_chat.claims.present import summary_of

    if grounding is None:
        return None
    marked = bool(grounding["ungrounded"]) and not grounding["without_netbox"]
    return _grounding_text(summary_of(grounding), marked)


def _grounding_text(line: str, marked: bool) -> Text | None:
    """The line, with a † when the answer carries marks (an answer made
    without NetBox carries none: the line says so, once)."""
    from netbox_chat.claims.present import MARK

    if not line:
        return None
    return Text(f"{MARK + ' ' if marked else ''}{visible_line(line)}", style="yellow")


def marked_answer(turn: Turn) -> str:
    """A recorded answer with its † marks, as it streamed (`present.marked_again`)."""
    from netbox_chat.claims.present import marked_again

    answer = turn.answer or ""
    return answer if turn.grounding is None else marked_again(answer, turn.grounding)


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
        question = visible_line(shorten(recap.last.question, 200))
        console.print(Text.assemble((f"turn {recap.last.number}: ", "dim"), question))

    def rest() -> None:
        shown: list[RenderableType] = []
        answer = marked_answer(recap.last) if recap.last is not None else ""
        if answer:
            lines = answer.rstrip("\n").split("\n")
            shown.append(answer_block(console, "\n".join(lines[:RECAP_LINES])))
            if len(lines) > RECAP_LINES:
                more = count(len(lines) - RECAP_LINES, "more line")
                shown.append(
                    Text(f"… {more}: `netbox-chat export {session_id}` to see all", style="dim")
                )
        if recap.last is not None and (grounded := stored_grounding_line(recap.last.grounding)):
            shown.append(grounded)
        for turn in recap.unfinished:
            question = visible_line(shorten(turn.question, 80))
            shown.append(Text(f"turn {turn.number} was {turn.status}: {question}", style="dim"))
        shown.append(Text(LEAVE_HINT, style="dim"))
        console.print(Group(*shown))  # one write: it lands above the prompt at once

    return rest
