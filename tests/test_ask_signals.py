"""`ask` under SIGINT and SIGTERM at the edges of a turn, in a real process:
before the turn starts, twice in a row while it is cancelled, and after it is
recorded. Whatever the moment, the process prints its output and its exit
status says what the ledger says (issue 11, defects 8, 10 and 11).

The moments are set by the servers and the pipes, not by sleeps: the session
file appears seconds before the agent is built; a scripted reply that never
comes holds the turn open; a stdout pipe nobody reads yet holds the process
after the ledger's commit."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.inspect_session import turn_rows
from tests.doubles.ollama_server import ScriptedOllama, Stall, Text
from tests.drive.process import ask


def wait_for(condition: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def signal_until_exit(proc: subprocess.Popen[str], sig: signal.Signals, every: float) -> int:
    """Send `sig` every `every` seconds until the process ends; how many went out."""
    sent = 0
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(sig)
        sent += 1
        time.sleep(every)
    return sent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_before_the_turn_starts_exits_130_with_output_and_nothing_recorded(
    sig: signal.Signals, chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    proc = ask(chat_env, "how many sites?", "--json")
    # `ask` creates the session file first, then builds the agent (seconds of
    # imports): a signal now lands before the turn starts.
    wait_for(lambda: any(sessions_dir.glob("*.sqlite")), "the session file")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    result = json.loads(out)
    assert (result["status"], result["turn"]) == ("cancelled", None)
    assert "before the turn started" in result["error"]
    assert ollama.requests == []
    # A new session that never answered is not kept (nothing was recorded in it).
    assert result["kept"] is False
    assert [p.name for p in sessions_dir.iterdir()] == [".netbox-chat"]  # only its mark


def _imported(pid: int, library: str) -> bool:
    """Whether the process has loaded a C extension (it shows in its memory map)."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:  # it has ended
        return True


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_program_is_still_importing_exits_130_and_nothing_is_recorded(
    sig: signal.Signals, chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Issue 21, item 10: the signal lands in the start-up imports, long before
    Typer reaches `ask` (sqlite3's C extension is loaded with the first of
    netbox-chat's own modules, the CLI and Typer come after). It used to kill
    the process (143); the turn must simply not start: exit 130, the JSON
    printed, nothing recorded."""
    proc = ask(chat_env, "how many sites?", "--json")
    wait_for(lambda: _imported(proc.pid, "_sqlite3"), "netbox-chat's first imports")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    result = json.loads(out)
    assert (result["status"], result["turn"], result["kept"]) == ("cancelled", None, False)
    assert "before the turn started" in result["error"]
    assert ollama.requests == []
    assert not sessions_dir.exists() or [p.name for p in sessions_dir.iterdir()] in (
        [],
        [".netbox-chat"],
    )


def test_sigints_in_a_row_during_a_cancel_still_print_the_output_and_exit_130(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    # On a session that already has an answer: a new one whose first turn is
    # cancelled is not kept, and there would be nothing left to look at.
    ollama.script([Text("Three sites.")], [Stall()])
    first = ask(chat_env, "how many sites?", "--json")
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    session_id = json.loads(out)["session"]
    proc = ask(chat_env, "a question to cancel", "--json", "--session", session_id)
    ollama.wait_for_requests(2, timeout=60)  # the turn is waiting for the model
    # The first SIGINT cancels the turn; the next ones, 5 ms apart, land
    # during the rollback and after it, until the process has ended.
    assert signal_until_exit(proc, signal.SIGINT, every=0.005) > 1
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    result = json.loads(out)
    assert (result["status"], result["turn"]) == ("cancelled", 2)
    (path,) = sessions_dir.glob("*.sqlite")
    assert turn_rows(path) == [(1, "done"), (2, "cancelled")]
    # Cancelled once: a second cancel would end the turn early and let a
    # write land after the rollback.
    state = inspect(sessions_dir, path.stem)
    assert len(state["messages"]) == 2 and state["pending_writes"] == 0 and state["next"] == []


def test_signals_after_the_turn_is_recorded_do_not_change_the_exit_status(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    # An answer bigger than a pipe's buffer: until the test reads stdout, the
    # process is held in its last write, after the ledger says `done`.
    answer = "x" * 200_000
    ollama.script([Text(answer, chunks=[answer])])
    proc = ask(chat_env, "a long answer", "--json")
    wait_for(lambda: any(sessions_dir.glob("*.sqlite")), "the session file")
    (path,) = sessions_dir.glob("*.sqlite")
    wait_for(lambda: turn_rows(path) == [(1, "done")], "the turn to be recorded", timeout=60)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        proc.send_signal(sig)
        time.sleep(0.01)
    assert proc.poll() is None  # still held by the pipe: the signals landed
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert (result["status"], result["answer"]) == ("done", answer)
    assert turn_rows(path) == [(1, "done")]
