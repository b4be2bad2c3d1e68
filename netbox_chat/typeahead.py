"""Keys typed while the chat starts wait, unechoed, for its first prompt.

The chat takes a second or more to put its prompt up (imports, the session,
a resume's rollback or rewind, which wait for the agent). In the terminal's
normal (canonical) mode the kernel echoes what is typed meanwhile where the
cursor is, above the banner, and the prompt then shows it again. So the REPL
path switches the terminal, as early as it can (`cli.main.main` for `netbox-chat`
and `netbox-chat resume`, `cli.app._chat` for every chat), to the mode the REPL
keeps between prompts (`repl.KeysWait`): no echo, no line editing by the
kernel, Ctrl-C still a signal. The keys wait, as typed, and the prompt reads
them as typeahead. The terminal is given back as it was when the chat ends,
however it ends: `held()`'s exit, an exit handler for a process that never got
that far (a refused setting), and `process.release` before it delivers a signal
that came during start-up.

Only termios, os and atexit: `cli.main.main` imports this before anything else.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import termios
from collections.abc import Iterator, Mapping, Sequence

# What the terminal stops doing while keys wait: prompt_toolkit's `raw_mode`
# (input/vt100.py) with ISIG kept, so that Ctrl-C still raises SIGINT.
LFLAG_OFF = termios.ECHO | termios.ICANON | termios.IEXTEN
IFLAG_OFF = termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR | termios.IGNCR

_before: list[list] = []  # the terminal's attributes when it was held; one at most


def waiting_mode(attrs: list) -> list:
    """`attrs` (termios.tcgetattr's list) with keys left waiting as typed."""
    quiet = [*attrs[:6], list(attrs[6])]
    quiet[0] &= ~IFLAG_OFF
    quiet[3] &= ~LFLAG_OFF
    quiet[6][termios.VMIN] = 1
    return quiet


def hold() -> None:
    """Leave typed keys waiting, unechoed, until `restore`; nothing unless
    stdin and stdout are both a terminal (the chat needs both), or when held."""
    if _before or not (os.isatty(0) and os.isatty(1)):
        return
    try:
        attrs = termios.tcgetattr(0)
        termios.tcsetattr(0, termios.TCSANOW, waiting_mode(attrs))
    except termios.error:
        return
    _before.append(attrs)
    atexit.register(restore)


def restore() -> None:
    """The terminal as it was before `hold`."""
    if _before:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(0, termios.TCSANOW, _before.pop())


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Keys wait from here (if they did not already) until the block ends."""
    hold()
    try:
        yield
    finally:
        restore()


def starts_a_chat(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether the command line surely starts the chat, read before the CLI is
    imported: `netbox-chat` alone or `netbox-chat resume …` (any other chat is
    held by `cli.app._chat`, a moment later). A Tab's completion request is not."""
    return not any(name.startswith("_NETBOX_CHAT_COMPLETE") for name in environ) and (
        len(argv) == 1 or argv[1] == "resume"
    )
