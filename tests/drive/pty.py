"""The CLI on a real pty (pexpect), as a user's terminal runs it: prompt, leaving, plain output."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pexpect

from tests.doubles import ROOT

PROMPT = re.compile(r"netbox\S*>")


ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x07|\r")


def on_a_terminal(
    env: dict[str, str], *args: str, columns: int = 160, timeout: float = 60
) -> pexpect.spawn:
    """The CLI on a pty of 40 lines by `columns`, as a user's terminal runs it."""
    return pexpect.spawn(
        sys.executable,
        ["-m", "netbox_chat", *args],
        env=env,
        cwd=str(ROOT),
        encoding="utf-8",
        timeout=timeout,
        dimensions=(40, columns),
    )


def spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    """The REPL on a terminal, at its first prompt."""
    child = on_a_terminal(env, *args, timeout=30)
    child.expect(PROMPT)
    return child


def run_in_pty(env: dict[str, str], *args: str, timeout: float = 60) -> tuple[int, str]:
    """A command that ends by itself, run in a terminal: its exit status and
    what it drew, without the escape codes."""
    child = on_a_terminal(env, *args, timeout=timeout)
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus or 0), plain(child.before or "")


def resume(env: dict[str, str], *args: str) -> tuple[pexpect.spawn, str]:
    """`netbox-chat resume ARGS` and what it showed once its recap is drawn:
    the first lines come before the prompt, the rendered answer and the rest
    above it once it is up (turnview.print_recap)."""
    child = spawn(env, "resume", *args)
    shown = child.before or ""
    child.expect(r"exit or Ctrl-D to leave")
    shown += (child.before or "") + child.after
    child.expect(PROMPT)
    return child, plain(shown)


def leave(child: pexpect.spawn) -> str:
    time.sleep(0.3)  # let the prompt finish redrawing before typing at it
    child.sendcontrol("u")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return plain(child.before or "")


def plain(text: str) -> str:
    return ANSI.sub("", text)


def only_session(sessions_dir: Path) -> str:
    (path,) = sessions_dir.glob("*.sqlite")
    return path.stem


DIM = r"\x1b\[2;3m"  # rich's dim italic, the thinking's style
