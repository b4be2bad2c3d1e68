"""Rich output: the streamed answer, tool lines, the status line, tables.

Render only; every decision is made elsewhere. Importing this module must stay
cheap (rich only), because `ls` uses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from netbox_chat.sessions import Recap, SessionSummary, Turn

if TYPE_CHECKING:
    from rich.live import Live

    from netbox_chat.turns import RollbackReport, TurnEvent, TurnOutcome


def markdown(text: str) -> RenderableType:
    """Rich's Markdown, imported on first use: it costs tens of milliseconds,
    which `ls` should not pay."""
    from rich.markdown import Markdown

    return Markdown(text)


def human_size(size: int | float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def format_args(args: dict[str, Any], limit: int = 120) -> str:
    text = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items()
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_line(
    name: str, args: dict[str, Any], result_chars: int, seconds: float, error: bool
) -> Text:
    line = Text("  ")
    line.append("✗ " if error else "→ ", style="red" if error else "cyan")
    line.append(name, style="bold")
    line.append(f"({format_args(args)})", style="dim")
    line.append(f"  {human_size(result_chars)}  {seconds:.2f}s", style="dim")
    return line


class _Status:
    """The line under the answer while a turn runs; rich re-renders it on its
    own refresh thread, so the elapsed time keeps moving while we wait."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.activity = "thinking"

    def __rich__(self) -> Text:
        return Text(f"⠿ {self.activity}… {time.monotonic() - self.started:.1f}s", style="dim")


class TurnView:
    """Renders one turn's events: streamed Markdown, tool lines, status line."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.answer = ""
        self.status = _Status()
        self.live: Live | None = None
        self.running_tools: dict[str, str] = {}

    def __enter__(self) -> TurnView:
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(
                self._renderable(), console=self.console, refresh_per_second=8, transient=False
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.live is not None:
            self.status.activity = ""
            self.live.update(self._renderable(final=True), refresh=True)
            self.live.__exit__(None, None, None)
            self.live = None
        elif self.answer:
            self.console.print(markdown(self.answer))

    def _renderable(self, final: bool = False) -> RenderableType:
        parts: list[RenderableType] = [markdown(self.answer)] if self.answer else []
        if not final:
            parts.append(self.status)
        return Group(*parts)

    def _print_above(self, renderable: RenderableType) -> None:
        if self.live is not None:
            self.live.console.print(renderable)
        else:
            self.console.print(renderable)

    def on_event(self, event: TurnEvent) -> None:
        from netbox_chat.turns import RollingBack, TextDelta, ToolFinished, ToolStarted

        if isinstance(event, TextDelta):
            self.answer += event.text
            self.status.activity = "answering"
        elif isinstance(event, ToolStarted):
            if self.answer.strip():
                # Text before a tool call is the model thinking aloud; keep it.
                self._print_above(markdown(self.answer))
            self.answer = ""
            self.running_tools[event.call_id] = event.name
            self.status.activity = "waiting for " + ", ".join(self.running_tools.values())
        elif isinstance(event, ToolFinished):
            self.running_tools.pop(event.call_id, None)
            self._print_above(
                tool_line(event.name, event.args, event.result_chars, event.seconds, event.error)
            )
            self.status.activity = (
                "waiting for " + ", ".join(self.running_tools.values())
                if self.running_tools
                else "thinking"
            )
        elif isinstance(event, RollingBack):
            self.status.activity = "rolling back"
        if self.live is not None:
            self.live.update(self._renderable())


def print_outcome(console: Console, outcome: TurnOutcome, seconds: float) -> None:
    """The line after a turn: tokens and time, or what went wrong."""
    if outcome.status == "done":
        console.print(
            f"[dim]turn {outcome.number} · tokens {outcome.tokens_in} in / "
            f"{outcome.tokens_out} out · {seconds:.1f}s[/dim]"
        )
        return
    if outcome.status == "cancelled":
        console.print(f"[yellow]turn {outcome.number} cancelled[/yellow]", end=" ")
    else:
        console.print(f"[red]turn {outcome.number} failed: {outcome.error}[/red]", end=" ")
    if outcome.rollback is not None:
        print_rollback(console, outcome.rollback)


def print_rollback(console: Console, report: RollbackReport, *, reason: str = "") -> None:
    if report.verified:
        console.print(
            f"[dim]{reason}rolled back ({report.removed_messages} message(s) removed); "
            "the model will not see it[/dim]"
        )
    else:
        console.print(
            f"[bold red]{reason}rollback of turn {report.turn} could not be verified: "
            f"{'; '.join(report.problems)}. Use /rewind to return to the last clean turn."
            "[/bold red]"
        )


class Columns:
    """Rows of one-line cells in aligned columns, two spaces apart.

    Used instead of rich's Table, whose layout engine measures and wraps every
    cell: for `ls`'s twenty rows that cost 10 ms, and importing it 3 ms more,
    on a command whose whole budget is twice Python's start-up. When the
    console is too narrow the `flexible` column gives way first, down to
    `FLEXIBLE_MIN` cells; past that, lines end in "…" at the console's edge.
    """

    FLEXIBLE_MIN = 20

    def __init__(
        self,
        rows: Iterable[Sequence[Text]],
        *,
        header: Sequence[str] = (),
        right: Collection[int] = (),
        flexible: int = 0,
    ) -> None:
        self.rows = [[Text(name, style="bold") for name in header]] if header else []
        self.rows.extend(list(row) for row in rows)
        self.right = right
        self.flexible = flexible

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            return
        widths = [max(cell.cell_len for cell in column) for column in zip(*self.rows, strict=True)]
        others = sum(widths) - widths[self.flexible] + 2 * (len(widths) - 1)
        room = max(self.FLEXIBLE_MIN, options.max_width - others)
        widths[self.flexible] = min(widths[self.flexible], room)
        lines = []
        for row in self.rows:
            line = Text()
            for index, (cell, width) in enumerate(zip(row, widths, strict=True)):
                fitted = cell.copy()
                fitted.overflow = "ellipsis"
                fitted.align("right" if index in self.right else "left", width)
                if index:
                    line.append("  ")
                line.append_text(fitted)
            line.rstrip()
            lines.append(line)
        yield Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


def sessions_table(summaries: Sequence[SessionSummary]) -> Columns:
    """`ls`: one row per session; user text is shown as typed, never as markup.

    An "asked by" column appears when more than one user@host asked the
    listed turns (a team's store); alone, it would only repeat your name."""
    team = len({who for s in summaries for who in s.asked_by}) > 1
    rows = []
    for s in summaries:
        ident = Text(s.id)
        if s.is_open:
            ident.append(" (open)", style="green")
        # A database session has no file of its own to measure.
        size = Text(human_size(s.size_bytes) if s.size_bytes else "-")
        if s.unreadable:
            unreadable = Text(f"unreadable: {s.unreadable}", style="red")
            rows.append([ident, unreadable, Text(), Text(), Text(), size, *[Text()] * team])
            continue
        rows.append(
            [
                ident,
                Text(_shorten(s.title or "(no question yet)", 50)),
                Text(str(s.turns)),
                Text(s.last_active.replace("T", " ").replace("+00:00", "Z")),
                Text(s.model),
                size,
                *[Text(_shorten(", ".join(s.asked_by), 30))] * team,
            ]
        )
    header = ("id", "title", "turns", "last active", "model", "size", *["asked by"] * team)
    return Columns(rows, header=header, right={2, 5}, flexible=1)


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


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


def print_recap(console: Console, session_id: str, recap: Recap) -> None:
    """What `resume` restored: counts and the last exchange.

    The last answer is printed as the model wrote it (Markdown source), not
    rendered: rich's Markdown costs 20 ms to import, which before the first
    prompt is half of what start-up may add to Python's own. Answers in the
    REPL are rendered as usual. Questions and answers are never read as markup.
    """
    line = Text.assemble(
        (f"resumed session {session_id}", "bold"),
        f": {recap.turns} turn(s), {recap.messages} message(s)",
    )
    console.print(line)
    if recap.last is not None:
        question = _shorten(recap.last.question, 200)
        console.print(Text.assemble((f"last question ({recap.last.number}): ", "dim"), question))
        if recap.last.answer:
            console.print(Text(recap.last.answer))
    for turn in recap.unfinished:
        question = _shorten(turn.question, 80)
        console.print(Text(f"turn {turn.number} was {turn.status}: {question}", style="dim"))


def tokens_table(turns: Sequence[Turn]) -> Columns:
    rows = []
    total_in = total_out = 0
    for turn in turns:
        total_in += turn.tokens_in
        total_out += turn.tokens_out
        values = (turn.number, turn.status, turn.tokens_in, turn.tokens_out, len(turn.tool_calls))
        rows.append([Text(str(value)) for value in values])
    totals = ("total", "", str(total_in), str(total_out), "")
    rows.append([Text(value, style="bold") for value in totals])
    header = ("turn", "status", "in", "out", "tools")
    return Columns(rows, header=header, right={0, 2, 3, 4}, flexible=1)
