"""`/copy`: text to the clipboard of the terminal the user sits at, by OSC 52.

OSC 52 (xterm's "Manipulate Selection Data", `ESC ] 52 ; c ; BASE64 BEL`)
asks the terminal itself to set its clipboard, so it works over ssh and
needs no clipboard program on the machine the chat runs on. Terminals bound
what they take (hterm and others near 100,000 base64 characters), so the
text is cut, at a line, to `LIMIT` bytes. A multiplexer in between must pass
the sequence on: tmux does with `set-clipboard on`, GNU screen does not; and a
terminal whose TERM is unknown may not take it: said in one line, since
nothing comes back to say whether it worked.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

LIMIT = 75_000
"""Bytes of UTF-8 sent at most: 100,000 characters of base64."""


@dataclass(frozen=True)
class Copied:
    chars: int  # characters sent
    cut: bool  # the text was longer than LIMIT
    doubt: str | None  # why the terminal may not take it, or None


def copy(text: str, stream: TextIO, env: Mapping[str, str] = os.environ) -> Copied:
    """Send `text` to the terminal's clipboard through `stream`. Its control
    characters (other than newlines and tabs) are left out: the text is
    meant to be pasted, into a shell maybe."""
    clean = "".join(c for c in text if c.isprintable() or c in "\n\t")
    data = clean.encode()
    cut = len(data) > LIMIT
    if cut:
        data = data[:LIMIT]
        data = data[: data.rfind(b"\n") + 1] or data  # at a line, when there is one
    sent = data.decode(errors="ignore")  # a character cut in two is left out
    payload = base64.b64encode(sent.encode()).decode("ascii")
    stream.write(f"\x1b]52;c;{payload}\x07")
    stream.flush()
    return Copied(len(sent), cut, doubt(env))


def doubt(env: Mapping[str, str]) -> str | None:
    """Why the terminal may not take OSC 52 here, in one line; None when
    nothing says so."""
    term = env.get("TERM", "")
    if env.get("TMUX"):
        return "inside tmux it reaches the clipboard only with `set -g set-clipboard on`"
    if env.get("STY") or term.startswith("screen"):
        return "GNU screen does not pass OSC 52 on to the terminal: copy outside screen"
    if term in ("", "dumb", "unknown"):
        return f"TERM is {term or 'not set'}: the terminal may not take OSC 52 (the clipboard)"
    return None
