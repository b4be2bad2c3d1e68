"""What the CLI prints when something goes wrong: one line each, on stderr,
never wrapped when stderr is not a terminal, text that came from outside
(the user, Ollama) printed as it is and never read as markup, and a bug of
ours reported as one line with an exit status, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.doubles.inspect_session import turn_rows
from tests.doubles.ollama_server import Delay, HTTPError, ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import ask, cli, wait_for_running
from tests.drive.process import first_turn as first_session
from tests.drive.runner import invoke

ROOT = Path(__file__).parent.parent


def test_messages_are_not_wrapped_when_stderr_is_not_a_terminal(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    narrow = {**chat_env, "COLUMNS": "50"}
    session_id = first_session(chat_env, ollama)
    ollama.script([Delay(30.0), Text("never sent")])
    crashed = ask(chat_env, "the question that crashed", "--session", session_id)
    wait_for_running(StoreUnderTest("folder", str(sessions_dir)), session_id, 2)
    crashed.kill()
    crashed.wait(timeout=10)

    ollama.script([Text("Still three sites.")])
    resumed = cli(narrow, "ask", "and now?", "--session", session_id)
    assert resumed.returncode == 0, resumed.stderr
    (recovery,) = [line for line in resumed.stderr.splitlines() if "interrupted" in line]
    assert recovery.startswith("turn 2 was interrupted and rolled back (")
    assert recovery.endswith("removed); the model will not see it")

    empty = sessions_dir.parent / ("a-folder-with-a-long-name-" * 3)
    listing = cli({**narrow, "NETBOX_CHAT_SESSIONS": str(empty)}, "ls")
    assert listing.stderr.splitlines() == [f"no sessions in {empty}; start one with `netbox-chat`"]


def test_an_error_from_ollama_is_printed_as_it_came_never_as_markup(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([HTTPError(500, "runner [/x] failed [bold]")])
    result = invoke(["ask", "hello?"], env=chat_env)
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("netbox-chat: turn 1 failed: ")
    assert "runner [/x] failed [bold]" in line


def test_an_unexpected_error_is_one_line_with_exit_1_and_the_session_survives(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    # A script passing Latin-1 bytes: Python hands them over as surrogates,
    # which SQLite cannot store. No code path expects it: it is a bug, and a
    # bug gets one line and an exit status, not a traceback.
    latin1 = "caf\udce9?"
    failed = cli(chat_env, "ask", latin1, "--json")
    assert failed.returncode == 1
    (line,) = failed.stderr.splitlines()
    assert line.startswith("netbox-chat: unexpected error (UnicodeEncodeError")
    assert "this is a bug in netbox-chat" in line
    (path,) = sessions_dir.glob("*.sqlite")
    assert turn_rows(path) == []

    ollama.script([Text("Three sites.")])
    again = cli(chat_env, "ask", "how many sites?", "--session", path.stem, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["turn"] == 1

    traced = cli({**chat_env, "NETBOX_CHAT_TRACEBACK": "1"}, "ask", latin1)
    assert traced.returncode == 1 and "Traceback" in traced.stderr


def test_usage_errors_exit_2_and_the_same_value_from_the_environment_exits_1(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Issue 25's polish: a flag's value the command does not take, flags that
    exclude each other or do not apply, an empty question: exit 2, one line,
    nothing asked. The same wrong value in the environment is configuration
    (exit 1). A URL that is not http(s) is refused before anything is sent."""
    session_id = first_session(chat_env, ollama)
    runs = [
        (chat_env, ["export", session_id, "--format", "html"], "unknown format 'html'"),
        (chat_env, ["doctor", "--init-store"], "--init-store is for a postgresql:// store"),
        (chat_env, ["ask", "--provider", "nope", "hi"], "--provider must be one of"),
        (chat_env, ["ask", "--ollama-url", "ftp://x", "hi"], "--ollama-url must be an http://"),
        (chat_env, ["ask", "--netbox-url", "netbox.example", "hi"], "--netbox-url must be an"),
        (chat_env, ["ask", "-c", "--ephemeral", "hi"], "exclude each other"),
        (chat_env, ["ask", "  "], "the question is empty"),
        (chat_env, ["ls", "--store", "mysql://x"], "unknown session store"),
        ({**chat_env, "OLLAMA_HOST": "ftp://x"}, ["ask", "hi"], "OLLAMA_HOST must be an http://"),
        ({**chat_env, "NETBOX_CHAT_PROVIDER": "nope"}, ["ask", "hi"], "NETBOX_CHAT_PROVIDER must"),
    ]
    asked = len(ollama.requests)
    for env, args, said in runs:
        result = invoke(args, env=env)
        expected = 1 if env is not chat_env else 2
        assert result.exit_code == expected, (args, result.output)
        (line,) = result.stderr.splitlines()
        assert line.startswith("netbox-chat: ") and said in line, (args, line)
    assert len(ollama.requests) == asked  # nothing was sent to the model


def test_the_docs_and_the_help_list_every_exit_status_there_is() -> None:
    """The exit-code table (docs/troubleshooting.md) and `--help` name each
    status the CLI can end with, and nothing else: a new one cannot go
    undocumented."""
    import re

    from netbox_chat.errors import ExitStatus

    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    table = page[page.index("## Exit codes") : page.index("netbox-chat fails closed")]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.MULTILINE)}
    assert documented == {int(status) for status in ExitStatus}
    help_text = " ".join(invoke(["--help"]).stdout.split())
    listed = help_text[help_text.index("Exit codes:") : help_text.index("quietly.")]
    listed = listed.replace("│", " ")  # rich's help panel, where a line wraps
    for status in ExitStatus:
        assert re.search(rf"\b{int(status)} ", listed), status
