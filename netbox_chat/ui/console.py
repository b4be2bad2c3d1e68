"""The console and its styles: terminal-safe printing, Markdown, sizes and meters.

Every line printed by netbox-chat passes through `VisibleConsole`, so text
someone else wrote is never sent as terminal control. Importing this module
must stay cheap (rich only): `ls` uses it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from netbox_chat.visible import visible

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.markdown import Markdown


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


def format_args(args: dict[str, Any], limit: int = 120) -> str:
    text = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items()
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


DIM = Style(dim=True)


def shorten(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters, its control
    characters shown (before a split would take some for spaces)."""
    text = " ".join(visible(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
