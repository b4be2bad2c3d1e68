"""What the user sees of the REPL: a VT100 emulator (pyte) fed every byte the pty shows."""

from __future__ import annotations

import contextlib
import io
import time
from typing import Any

import pexpect
import pyte

from tests.drive.pty import PROMPT, on_a_terminal


class Terminal:
    """What the user sees: a VT100 emulator fed every byte the REPL writes
    (as pexpect's `logfile_read`), the lines that scrolled off the top
    included, with the terminal's own wrapping at its width."""

    def __init__(self, columns: int, lines: int) -> None:
        self.screen = pyte.HistoryScreen(columns, lines, history=10_000)
        self.stream = pyte.Stream(self.screen)
        self.written = io.StringIO()

    def write(self, data: str) -> None:
        self.stream.feed(data)
        self.written.write(data)

    def flush(self) -> None:
        pass

    def lines(self) -> list[str]:
        scrolled = [
            "".join(line[x].data for x in range(self.screen.columns)).rstrip()
            for line in self.screen.history.top
        ]
        return scrolled + [line.rstrip() for line in self.screen.display]

    def struck(self, text: str) -> bool:
        """Whether `text` is on the screen drawn struck through."""
        rows = [
            *self.screen.history.top,
            *(self.screen.buffer[y] for y in range(self.screen.lines)),
        ]
        for row in rows:
            chars = [row[x] for x in range(self.screen.columns)]
            line = "".join(c.data for c in chars)
            if (at := line.find(text)) != -1:
                return all(c.strikethrough for c in chars[at : at + len(text)])
        return False


def on_screen(
    env: dict[str, str], *args: str, columns: int, lines: int, **options: Any
) -> tuple[pexpect.spawn, Terminal]:
    """`netbox-chat ARGS` on a pty (pty.on_a_terminal and its options), and
    the screen of that size it draws on."""
    terminal = Terminal(columns, lines)
    child = on_a_terminal(env, *args, columns=columns, lines=lines, **options)
    child.logfile_read = terminal
    return child, terminal


def chat(env: dict[str, str], columns: int = 100) -> tuple[pexpect.spawn, Terminal]:
    child, terminal = on_screen(
        {**env, "COLUMNS": str(columns), "LINES": "30"},  # as the terminal says
        columns=columns,
        lines=30,
        timeout=30,
    )
    child.expect(PROMPT)
    return child, terminal


def until_shown(child: pexpect.spawn, terminal: Terminal, text: str, timeout: float = 30) -> None:
    """Read the REPL until `text` is on the screen as the user sees it.

    The raw byte stream is no guide when prompt-toolkit redraws: under load a
    completion menu may be drawn between the typed and the completed part of
    a word, so the screen, not the stream, is what a test should wait on."""
    deadline = time.monotonic() + timeout
    while not any(text in line for line in terminal.lines()):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{text!r} never shown; the screen:\n" + "\n".join(terminal.lines()[-30:])
            )
        with contextlib.suppress(pexpect.TIMEOUT):
            child.read_nonblocking(4096, timeout=0.1)


def answered(child: pexpect.spawn, line: str, shown: str) -> None:
    """`line` typed at the prompt, `shown` drawn in answer, and the prompt
    back and settled, ready for the next line."""
    child.sendline(line)
    child.expect_exact(shown)
    child.expect(PROMPT)
    time.sleep(0.3)  # let the prompt finish redrawing before typing at it
