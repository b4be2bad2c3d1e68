"""The REPL's keys: Enter sends, Alt-Enter and Ctrl-J insert a newline, and
Esc cancels a line's work as Ctrl-C does.

At the prompt, prompt_toolkit reads the keys. An Esc and an Alt-prefixed key
arrive as the same byte (ESC), so prompt_toolkit waits `ttimeoutlen` after
a lone ESC before it takes it as Esc, and its key processor then waits
`timeoutlen` more, as Esc begins Emacs's Meta keys. A terminal sends an
Alt-key or an arrow as one write, so `ESCAPE_WAIT` (vim users' usual 50 ms
`ttimeoutlen`) is enough to tell them apart; and on an empty line Esc does
nothing at once: there is nothing for a Meta key to edit.

While a line's work runs (a turn, `/compact`), nobody reads the terminal:
keys wait for the next prompt (repl.KeysWait). `TurnKeys` reads them instead,
for the Esc among them: a lone Esc raises SIGINT, so that the turn is
cancelled by the one path Ctrl-C takes (CancelOnSignals); every other key,
a paste included, is handed to the next prompt as typeahead, in order.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
from types import TracebackType

from prompt_toolkit.filters import Condition
from prompt_toolkit.input import Input
from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys

ESCAPE_WAIT = 0.05
"""Seconds after a lone ESC byte before it is taken as Esc, not the start of
an Alt-key or an arrow (a terminal sends those in one write)."""


def prompt_keys() -> KeyBindings:
    """The prompt's own keys, over prompt_toolkit's Emacs ones: Alt-Enter and
    Ctrl-J insert a newline (prompt_toolkit sends on both by default), and
    Esc on an empty line is taken at once and does nothing."""
    keys = KeyBindings()

    @keys.add("escape", "enter")
    @keys.add("c-j")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @Condition
    def empty() -> bool:
        from prompt_toolkit.application import get_app

        return not get_app().current_buffer.text

    @keys.add("escape", filter=empty, eager=True)
    def _nothing(event: KeyPressEvent) -> None:
        del event

    return keys


def typed_ahead(prompt_input: Input) -> bool:
    """Whether keys read during the line's work wait for the next prompt
    (they stay waiting: this only looks)."""
    keys = get_typeahead(prompt_input)
    store_typeahead(prompt_input, keys)
    return bool(keys)


class TurnKeys:
    """While entered, read the terminal `fd` on the running loop: a lone Esc
    raises SIGINT (the turn is cancelled as by Ctrl-C), the other keys wait
    as typeahead for `prompt_input`, the next prompt's input."""

    def __init__(self, fd: int, prompt_input: Input) -> None:
        self.fd = fd
        self.prompt_input = prompt_input
        self.keys: list[KeyPress] = []
        self.parser = Vt100Parser(self.keys.append)
        self.decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.flush: asyncio.TimerHandle | None = None

    def __enter__(self) -> TurnKeys:
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.fd, self._read)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.loop is not None:
            self.loop.remove_reader(self.fd)
        if self.flush is not None:
            self.flush.cancel()
        self._lone_escape()  # one pressed as the work ended has nothing left to cancel
        store_typeahead(self.prompt_input, self.keys)

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:  # the terminal is gone: the prompt will say so
            assert self.loop is not None
            self.loop.remove_reader(self.fd)
            return
        if self.flush is not None:
            self.flush.cancel()
        # An ESC followed by more in the same write is an Alt-key or an arrow:
        # the parser passes it on with what follows. A lone one it holds.
        self.parser.feed(self.decoder.decode(data))
        assert self.loop is not None
        self.flush = self.loop.call_later(ESCAPE_WAIT, self._flush)

    def _flush(self) -> None:
        self.flush = None
        if self._lone_escape():
            signal.raise_signal(signal.SIGINT)

    def _lone_escape(self) -> bool:
        """Whether the parser held a lone ESC, now taken out of the keys."""
        before = len(self.keys)
        self.parser.flush()
        flushed = self.keys[before:]
        del self.keys[before:]
        self.keys.extend(key for key in flushed if key.key != Keys.Escape)
        return len(self.keys) < before + len(flushed)
