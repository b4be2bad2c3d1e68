"""Rich output: the streamed answer, tool lines, the status line, tables.

Render only; every decision is made elsewhere. Importing this module must stay
cheap (rich only), because `ls` uses it.
"""

from __future__ import annotations

import functools
import json
import textwrap
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

from netbox_chat.config import SETTINGS, Settings, without_userinfo
from netbox_chat.errors import UserFacingError
from netbox_chat.sessions import Recap, SessionSummary, Turn, epoch
from netbox_chat.thinking import thought_for
from netbox_chat.visible import visible, visible_line

if TYPE_CHECKING:
    from rich.console import JustifyMethod, OverflowMethod
    from rich.live import Live
    from rich.markdown import Markdown

    from netbox_chat.turns import RollbackReport, TurnEvent, TurnOutcome


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
    name: str, args: dict[str, Any], result_chars: int, seconds: float, error: bool
) -> Text:
    line = Text("  ")
    line.append("✗ " if error else "→ ", style="red" if error else "cyan")
    line.append(name, style="bold")
    line.append(f"({format_args(args)})", style="dim")
    line.append(f"  {human_size(result_chars)}  {seconds:.2f}s", style="dim")
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
        f"{turn.thinking_chars:,} characters",
        style="dim",
    )
    return Group(header, Text(visible(turn.thinking or ""), style="dim italic"))


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
        self.thinking = ""  # of the model call under way, until it starts answering
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
        parts: list[RenderableType] = []
        if self.thinking:
            parts.append(thinking_tail(self.thinking, self.console.width))
        if self.answer:
            parts.append(markdown(self.answer))
        if not final:
            parts.append(self.status)
        return Group(*parts)

    def _print_above(self, renderable: RenderableType) -> None:
        if self.live is not None:
            self.live.console.print(renderable)
        else:
            self.console.print(renderable)

    def on_event(self, event: TurnEvent) -> None:
        from netbox_chat.liveness import Waiting
        from netbox_chat.turns import (
            ContextCompacted,
            ContextSummaryFailed,
            RollingBack,
            TextDelta,
            ThinkingDelta,
            ThinkingFinished,
            ToolFinished,
            ToolStarted,
        )

        if isinstance(event, ThinkingDelta):
            self.thinking += event.text
            self.status.activity = "thinking"
        elif isinstance(event, ThinkingFinished):
            # The live area collapses to one line; /thinking prints it all. The
            # area is redrawn without it first, or printing above would redraw it.
            self.thinking = ""
            if self.live is not None:
                self.live.update(self._renderable(), refresh=True)
            self._print_above(Text(f"  {thought_for(event.seconds)}", style="dim"))
        elif isinstance(event, TextDelta):
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
        elif isinstance(event, Waiting):
            self.status.activity = event.activity  # "loading qwen3:8b", before a first byte
        elif isinstance(event, ContextCompacted):
            self._print_above(
                Text(
                    f"context {short_tokens(event.tokens_before)}/{short_tokens(event.window)}: "
                    f"summarized {event.summarized} older messages",
                    style="cyan",
                )
            )
            self.status.activity = "thinking"
        elif isinstance(event, ContextSummaryFailed):
            self._print_above(
                Text(
                    f"context {short_tokens(event.tokens)}/{short_tokens(event.window)}: "
                    f"could not summarize ({event.reason}); this request goes on uncompacted",
                    style="yellow",
                )
            )
        if self.live is not None:
            self.live.update(self._renderable())


def print_outcome(console: Console, outcome: TurnOutcome, seconds: float) -> None:
    """The line after a turn: tokens, time and the context meter, or what went
    wrong; and the red line when Ollama cut one of the turn's requests."""
    if outcome.context.truncated and outcome.context.window:
        console.print(truncation_line(outcome.context.window))
    if outcome.status == "done":
        line = Text(
            f"turn {outcome.number} · tokens {outcome.tokens_in} in / "
            f"{outcome.tokens_out} out · {seconds:.1f}s",
            style="dim",
        )
        context = outcome.context
        if context.window and context.prompt_tokens_last is not None:
            line.append(" · ", style="dim")
            line.append_text(context_meter(context.prompt_tokens_last, context.window))
        console.print(line)
        return
    if outcome.status == "cancelled":
        console.print(Text(f"turn {outcome.number} cancelled", style="yellow"), end=" ")
    else:
        failed = f"turn {outcome.number} failed: {visible(str(outcome.error))}"
        console.print(Text(failed, style="red"), end=" ")
    if outcome.rollback is not None:
        print_rollback(console, outcome.rollback)


def print_rollback(console: Console, report: RollbackReport, *, reason: str = "") -> None:
    if report.verified:
        console.print(
            Text(
                f"{reason}rolled back ({report.removed_messages} message(s) removed); "
                "the model will not see it",
                style="dim",
            )
        )
    else:
        console.print(
            Text(
                f"{reason}rollback of turn {report.turn} could not be verified: "
                f"{'; '.join(report.problems)}. Use /rewind to return to the last clean turn.",
                style="bold red",
            )
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
    """Rows of one-line cells in aligned columns, two spaces apart.

    Used instead of rich's Table, whose layout engine measures and wraps every
    cell: for `ls`'s twenty rows that cost 10 ms, and importing it 3 ms more,
    on a command whose whole budget is twice Python's start-up. When the
    console is too narrow the `flexible` column gives way first, down to
    `FLEXIBLE_MIN` cells; past that, lines end in "…" at the console's edge.
    On a console that is not a terminal (a pipe, a file) nothing is cut: a
    `grep` must see every cell whole.
    """

    FLEXIBLE_MIN = 20

    def __init__(
        self,
        rows: Iterable[Sequence[Text]],
        *,
        header: Sequence[str] = (),
        right: Collection[int] = (),
        flexible: int = 0,
        flexible_max: int | None = None,
    ) -> None:
        self.rows = [[Text(name, style="bold") for name in header]] if header else []
        self.rows.extend(list(row) for row in rows)
        self.right = right
        self.flexible = flexible
        self.flexible_max = flexible_max

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.rows:
            return
        fit = console.is_terminal
        overflow: OverflowMethod = "ellipsis" if fit else "ignore"
        widths = [max(cell.cell_len for cell in column) for column in zip(*self.rows, strict=True)]
        others = sum(widths) - widths[self.flexible] + 2 * (len(widths) - 1)
        if fit:
            room = max(self.FLEXIBLE_MIN, options.max_width - others)
            widths[self.flexible] = min(widths[self.flexible], room, self.flexible_max or room)
        lines = []
        for row in self.rows:
            line = Text()
            for index, (cell, width) in enumerate(zip(row, widths, strict=True)):
                fitted = cell.copy()
                fitted.overflow = overflow
                fitted.align("right" if index in self.right else "left", width)
                if index:
                    line.append("  ")
                line.append_text(fitted)
            line.rstrip()
            lines.append(line)
        yield Text("\n", no_wrap=True, overflow=overflow).join(lines)


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
                Text(str(s.turns)),
                Text(ago(s.last_active)),
                Text(s.model),
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
    return Columns(
        rows, header=header, right={2, header.index("size")}, flexible=1, flexible_max=50
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
        if (count := int(seconds // size)) >= 1:
            return f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''} ago"
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
            console.print(Text(visible(recap.last.answer)))
    for turn in recap.unfinished:
        question = _shorten(turn.question, 80)
        console.print(Text(f"turn {turn.number} was {turn.status}: {question}", style="dim"))


def tokens_table(turns: Sequence[Turn]) -> Columns:
    """Per turn: tokens in and out, tool calls, and the context it took (the
    largest request, the last, of which window; "cut" when Ollama truncated)."""
    rows = []
    total_in = total_out = 0
    for turn in turns:
        total_in += turn.tokens_in
        total_out += turn.tokens_out
        values = (turn.number, turn.status, turn.tokens_in, turn.tokens_out, len(turn.tool_calls))
        row = [Text(str(value)) for value in values]
        if turn.context_window and turn.prompt_tokens_last is not None:
            row.append(Text(short_tokens(turn.prompt_tokens_max or 0)))
            row.append(context_meter(turn.prompt_tokens_last, turn.context_window))
        else:
            row.extend([Text(), Text()])
        row.append(Text("cut", style="bold red") if turn.truncated else Text())
        rows.append(row)
    totals = ("total", "", str(total_in), str(total_out), "", "", "", "")
    rows.append([Text(value, style="bold") for value in totals])
    header = ("turn", "status", "in", "out", "tools", "largest", "last request", "")
    return Columns(rows, header=header, right={0, 2, 3, 4, 5}, flexible=1)


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
            from netbox_chat.pgstore import shown_url

            shown = shown_url(value)  # a database URL may carry a password
        elif setting.name == "netbox_url" and value is not None:
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
