"""The CLI on a real pty (pexpect), as a user's terminal runs it: prompt, leaving, plain output."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pexpect

from tests.doubles import ROOT
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.drive.process import MODULE

PROMPT = re.compile(r"netbox\S*>")


ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x07|\r")


def on_a_terminal(
    env: dict[str, str],
    *args: str,
    program: Sequence[str] = MODULE,
    columns: int = 160,
    lines: int = 40,
    timeout: float = 60,
    cwd: Path | str = ROOT,
) -> pexpect.spawn:
    """`program ARGS` (the CLI unless told: a shell line around it, a probe,
    an older release, an interactive shell) on a pty of `lines` by
    `columns`, as a user's terminal runs it. Every pty of the tests starts
    here (tests/test_layout.py checks)."""
    command, *rest = [*program, *args]
    child = pexpect.spawn(
        command,
        rest,
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=timeout,
        dimensions=(lines, columns),
    )
    # `sendline` presses Enter as a terminal does: CR. LF is Ctrl-J, which
    # the REPL takes as a newline in the question.
    child.linesep = "\r"
    return child


def in_a_shell(env: dict[str, str], line: str, **options: Any) -> pexpect.spawn:
    """A shell line (`sh -c`) on a terminal, such as the CLI piped into
    `cat` (process.words writes the CLI's part); on_a_terminal's options."""
    return on_a_terminal(env, "-c", line, program=("sh",), **options)


def spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    """The REPL on a terminal, at its first prompt."""
    child = on_a_terminal(env, *args, timeout=30)
    child.expect(PROMPT)
    return child


def answered(child: pexpect.spawn, ollama: ScriptedOllama, question: str, answer: str) -> None:
    """`question` asked at the prompt, the model scripted to answer `answer`:
    back at the prompt once the answer is drawn (`answer` is a pattern)."""
    ollama.script([Text(answer)])
    child.sendline(question)
    child.expect(answer)
    child.expect(PROMPT)


def streaming(child: pexpect.spawn, ollama: ScriptedOllama, question: str) -> None:
    """`question` sent and its answer streaming slowly ("Streaming word0
    word1 … word59 end.", a word each 0.1 s), drawn as far as "word3": a
    turn to cancel, or to type during."""
    words = " ".join(f"word{i}" for i in range(60))
    ollama.script([Text(f"Streaming {words} end.", chunk_delay=0.1)])
    child.sendline(question)
    child.expect("word3")


def sent_again(
    child: pexpect.spawn, ollama: ScriptedOllama, given_back: str, answer: str, keys: str = "\r"
) -> None:
    """After a turn that did not end (cancelled, failed) or keys typed during
    it: the prompt comes back with `given_back` on the input line, then
    `keys` (Enter: the line as it came back) send it and the model's
    `answer` is drawn, back at the prompt."""
    child.expect(PROMPT)
    child.expect_exact(given_back)
    ollama.script([Text(answer)])
    time.sleep(0.3)  # let the prompt finish redrawing before typing at it
    child.send(keys)
    child.expect(answer)
    child.expect(PROMPT)


def run_in_pty(
    env: dict[str, str], *args: str, timeout: float = 60, columns: int = 160
) -> tuple[int, str]:
    """A command that ends by itself, run in a terminal of `columns`: its exit
    status and what it drew, without the escape codes."""
    child = on_a_terminal(env, *args, timeout=timeout, columns=columns)
    child.expect(pexpect.EOF)
    return ended(child), plain(child.before or "")


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
    assert ended(child) == 0
    return plain(child.before or "")


def ended(child: pexpect.spawn) -> int:
    """The exit status of a command whose output has ended (EOF), once it has
    exited: pexpect's close() hangs it up when it is still alive 0.1 s after
    the terminal closed, which a loaded machine's exit can take."""
    status = child.wait()
    child.close()
    return int(status if status is not None else -1)


def plain(text: str) -> str:
    return ANSI.sub("", text)


def only_session(sessions_dir: Path) -> str:
    (path,) = sessions_dir.glob("*.sqlite")
    return path.stem


DIM = r"\x1b\[2;3m"  # rich's dim italic, the thinking's style
