"""The CLI as a script runs it: a subprocess from the checkout; bounded waits on a busy machine."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.doubles import ROOT
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})

MODULE: tuple[str, ...] = (sys.executable, "-m", "netbox_chat")
"""How a test starts the CLI: this interpreter runs the checkout's package."""

CONSOLE_SCRIPT: tuple[str, ...] = (str(Path(sys.executable).parent / "netbox-chat"),)
"""The entry point pip installed beside this interpreter, as a user's shell runs it."""


def python(code: str) -> tuple[str, ...]:
    """A fresh interpreter running `code` (a probe around the CLI, or a few
    lines of the library); what follows it on the command line is its
    sys.argv[1:]."""
    return (sys.executable, "-c", code)


def words(*args: str, program: Sequence[str] = MODULE) -> str:
    """The command line as a shell reads it, for a test that runs the CLI
    inside a shell line (`netbox-chat ask "q" | cat`)."""
    return shlex.join([*program, *args])


def start(
    env: dict[str, str],
    *args: str,
    program: Sequence[str] = MODULE,
    cwd: Path | str = ROOT,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    **options: Any,
) -> subprocess.Popen[str]:
    """`program ARGS` (the CLI unless told) running, for a test that watches
    it live, signals it or reads its output as it comes: text pipes by
    default; Popen's other options (stdin, bufsize, preexec_fn) pass through."""
    return subprocess.Popen(
        [*program, *args],
        env=env,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        text=True,
        **options,
    )


def ask(env: dict[str, str], question: str, *args: str) -> subprocess.Popen[str]:
    return start(env, "ask", question, *args)


def wait_for_running(store: StoreUnderTest, session_id: str, number: int) -> None:
    """Until turn `number` is in the ledger (read as it is, even mid-turn).
    A bound, not a wait: a CLI process started beside others on two loaded
    cores took over 20 s to begin its turn (CI starts NetBox meanwhile).
    Each look reads the whole ledger (tens of ms late in test_crash's loop
    of thirty turns), so it looks every 0.1 s: at 0.02 s the looking took
    a quarter of that test's CPU."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        if any(n == number for n, _ in store.statuses(session_id)):
            return
        time.sleep(0.1)
    raise AssertionError(f"turn {number} never started")


def cli(
    env: dict[str, str],
    *args: str,
    program: Sequence[str] = MODULE,
    stdin: str | None = None,
    cwd: Path | str = ROOT,
    timeout: float | None = 120,
    check: bool = False,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """The CLI as a script runs it: a subprocess, its output captured, `stdin`
    piped to it (None: this process's own stdin); `check` raises on a failure
    exit, for a step that only sets up what the test looks at. `program` is
    what starts it (MODULE, CONSOLE_SCRIPT, a probe, an older release, or one
    of them behind a wrapper such as setpriv); `stderr=subprocess.STDOUT` is
    `2>&1`; run's other options (preexec_fn) pass through."""
    return subprocess.run(
        [*program, *args],
        env=env,
        cwd=cwd,
        input=stdin,
        stdout=stdout,
        stderr=stderr,
        text=True,
        timeout=timeout,
        check=check,
        **options,
    )


def first_turn(env: dict[str, str], ollama: ScriptedOllama) -> str:
    ollama.script([Text("Three sites.")])
    done = cli(env, "ask", "how many sites?", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session"])


def wait_until(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Until `condition()`; the timeout is a bound for a loaded machine, not a
    wait (see test_crash.wait_for_running)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def hold_in_a_tool(
    env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    session_id: str,
    seconds: float = 10.0,
) -> subprocess.Popen[str]:
    """An `ask` on the session that waits inside a NetBox request."""
    netbox.delays["dcim/sites"] = seconds
    ollama.script([SITES])
    seen = len(netbox.requests)
    proc = ask(env, "list the sites slowly", "--session", session_id)
    wait_until(
        lambda: any("dcim/sites" in r for r in netbox.requests[seen:]),
        "the tool never called NetBox",
    )
    return proc


def run(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The CLI with stdin a pipe (empty unless given), as in a script."""
    return cli(env, *args, stdin=stdin)
