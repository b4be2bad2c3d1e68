"""Rich output: the streamed answer, tool lines, the status line, tables.

Render only; every decision is made elsewhere. Importing this module must stay
cheap (rich only), because `ls` uses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from netbox_chat.sessions import SessionSummary, Turn

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


def sessions_table(summaries: Sequence[SessionSummary]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("id", "title", "turns", "last active", "model", "size"):
        table.add_column(column, justify="right" if column in ("turns", "size") else "left")
    for s in summaries:
        marker = " [green](open)[/green]" if s.is_open else ""
        if s.unreadable:
            table.add_row(
                s.id + marker,
                f"[red]unreadable: {s.unreadable}[/red]",
                "",
                "",
                "",
                human_size(s.size_bytes),
            )
            continue
        table.add_row(
            s.id + marker,
            _shorten(s.title or "(no question yet)", 50),
            str(s.turns),
            s.last_active.replace("T", " ").replace("+00:00", "Z"),
            s.model,
            human_size(s.size_bytes),
        )
    return table


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def history_table(turns: Iterable[Turn]) -> Table:
    """Numbered turns; cancelled, failed and rewound ones dimmed and labelled."""
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(justify="right")
    table.add_column()
    for turn in turns:
        if turn.status == "done":
            table.add_row(f"{turn.number}", Text(_shorten(turn.question, 90)))
            if turn.answer:
                table.add_row("", Text(_shorten(turn.answer, 90), style="dim"))
        else:
            label = {"running": "running", "rewound": "rewound"}.get(turn.status, turn.status)
            table.add_row(
                Text(f"{turn.number}", style="dim"),
                Text(
                    f"{_shorten(turn.question, 80)}  ({label})",
                    style="dim strike" if turn.status == "rewound" else "dim",
                ),
            )
    return table


def print_recap(console: Console, session_id: str, turns: Sequence[Turn], messages: int) -> None:
    """What `resume` restored: counts and the last exchange."""
    done = [t for t in turns if t.status == "done"]
    console.print(
        f"[bold]resumed session {session_id}[/bold]: {len(done)} turn(s), {messages} message(s)"
    )
    if done:
        last = done[-1]
        console.print(f"[dim]last question ({last.number}):[/dim] {_shorten(last.question, 200)}")
        if last.answer:
            console.print(markdown(last.answer))
    for turn in turns:
        if turn.status in ("cancelled", "failed", "interrupted") and (
            not done or turn.number > done[-1].number
        ):
            console.print(
                f"[dim]turn {turn.number} was {turn.status}: {_shorten(turn.question, 80)}[/dim]"
            )


def tokens_table(turns: Sequence[Turn]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("turn", "status", "in", "out", "tools"):
        table.add_column(column, justify="left" if column == "status" else "right")
    total_in = total_out = 0
    for turn in turns:
        total_in += turn.tokens_in
        total_out += turn.tokens_out
        table.add_row(
            str(turn.number),
            turn.status,
            str(turn.tokens_in),
            str(turn.tokens_out),
            str(len(turn.tool_calls)),
        )
    table.add_row("total", "", str(total_in), str(total_out), "", style="bold")
    return table
