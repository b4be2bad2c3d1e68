"""The CLI as a script runs it: a subprocess from the checkout; bounded waits on a busy machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from tests.doubles import ROOT
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})


def ask(env: dict[str, str], question: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "netbox_chat", "ask", question, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_running(store: StoreUnderTest, session_id: str, number: int) -> None:
    """Until turn `number` is in the ledger (read as it is, even mid-turn).
    A bound, not a wait: a CLI process started beside others on two loaded
    cores took over 20 s to begin its turn (CI starts NetBox meanwhile)."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        if any(n == number for n, _ in store.statuses(session_id)):
            return
        time.sleep(0.02)
    raise AssertionError(f"turn {number} never started")


def cli(
    env: dict[str, str],
    *args: str,
    stdin: str | None = None,
    timeout: float = 120,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """The CLI as a script runs it: a subprocess, its output captured, `stdin`
    piped to it (None: this process's own stdin); `check` raises on a failure
    exit, for a step that only sets up what the test looks at."""
    return subprocess.run(
        [sys.executable, "-m", "netbox_chat", *args],
        env=env,
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
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
