"""`netbox-chat doctor` against the scripted Ollama server and the NetBox double:
one line per check, ✓ or ✗ with the fix, non-zero exit when anything is wrong,
and no session touched."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port
from tests.doubles.ollama_server import ScriptedOllama
from tests.drive.pty import run_in_pty
from tests.drive.runner import doctor, line


def test_all_good(chat_env: dict[str, str], sessions_dir: Path) -> None:
    started = time.monotonic()
    code, lines = doctor(chat_env)
    assert code == 0, lines
    # whether the model is loaded and the cold start are information, not checks
    assert [text[0] for text in lines] == ["✓"] * 3 + ["·"] * 2 + ["✓"] * 4
    assert "(version 0.12.0)" in line(lines, "Ollama")
    assert "qwen3:8b (tools, thinking; context 40,960)" in line(lines, "model")
    assert line(lines, "context window").endswith(
        "16,384 tokens of 40,960 (NETBOX_CHAT_NUM_CTX; compacts at 80%)"
    )
    assert line(lines, "NetBox version").endswith("4.7.3")
    assert "unknown (this Ollama does not answer /api/ps)" in line(lines, "loaded")
    assert "will be created" in line(lines, "sessions folder")
    assert not sessions_dir.exists()  # doctor creates nothing
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("env", "check", "words"),
    [
        ({"OLLAMA_HOST": "CLOSED"}, "Ollama", "start it with `ollama serve`"),
        ({"NETBOX_CHAT_MODEL": "llama9:70b"}, "model", "`ollama pull llama9:70b`"),
        ({"NETBOX_CHAT_MODEL": "gemma:2b"}, "model", "does not support tool calling"),
        ({"NETBOX_URL": "CLOSED"}, "NetBox", "refused after 1 attempt). "),
        ({"NETBOX_URL": ""}, "NetBox", "set NETBOX_URL"),
        (
            {"NETBOX_TOKEN": "nbt_nope0000000.wrongwrongwrongwrong"},
            "token",
            "put it in NETBOX_TOKEN",
        ),
        ({"NETBOX_TOKEN": ""}, "token", "set NETBOX_TOKEN"),
        ({"NETBOX_CHAT_NUM_CTX": "65536"}, "context window", "to 40960 or less"),
        ({"NETBOX_CHAT_NUM_CTX": "2048"}, "context window", "at least 4096"),
    ],
    ids=[
        "ollama-down",
        "model-missing",
        "model-no-tools",
        "netbox-down",
        "netbox-unset",
        "token-wrong",
        "token-unset",
        "window-over-the-model",
        "window-below-one-turn",
    ],
)
def test_each_failure_is_one_line_with_its_fix(
    chat_env: dict[str, str], env: dict[str, str], check: str, words: str
) -> None:
    env = {k: closed_port() if v == "CLOSED" else v for k, v in env.items()}
    code, lines = doctor({**chat_env, **env})
    assert code == 1
    failed = line(lines, check)
    assert failed.startswith("✗") and words in failed
    assert "→" in failed  # the fix is on the same line
    model_unchecked = check == "Ollama" or "ollama pull" in words
    assert len(lines) == (6 if model_unchecked else 9)  # the window needs the model's facts
    for text in lines:
        assert TEST_TOKEN not in text and TEST_TOKEN.split(".")[1] not in text


def test_doctor_says_whether_the_model_is_loaded_and_what_a_cold_start_costs(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.running = []
    _, lines = doctor(chat_env)
    loaded = line(lines, "loaded")
    assert "qwen3:8b is not in memory: the first question waits while Ollama loads it" in loaded
    assert "waits as long as Ollama answers /api/ps" in loaded
    assert line(lines, "cold start") == (
        "· cold start: never measured here for qwen3:8b: the next question that waits for "
        "Ollama to load it measures it (`ollama stop qwen3:8b`, then ask); a 125B MoE took "
        "82-108 s"
    )
    ollama.running = ["qwen3:8b"]
    assert "qwen3:8b is in memory" in line(doctor(chat_env)[1], "loaded")


def test_sessions_folder_checks_touch_no_session(
    chat_env: dict[str, str], sessions_dir: Path, tmp_path: Path
) -> None:
    sessions_dir.mkdir(mode=0o700)
    session = sessions_dir / "abcd1234.sqlite"
    session.write_bytes(b"pretend session")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in sessions_dir.iterdir())
    code, lines = doctor(chat_env)
    assert code == 0 and "(writable; env NETBOX_CHAT_SESSIONS)" in line(lines, "sessions folder")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in sessions_dir.iterdir()) == before

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, lines = doctor({**chat_env, "NETBOX_CHAT_SESSIONS": str(blocker)})
    assert code == 1 and "Not a directory" in line(lines, "sessions folder")


def test_a_netbox_that_is_not_4x_is_flagged(chat_env: dict[str, str]) -> None:
    with NetBoxDouble(token=TEST_TOKEN) as old:
        old.status = {"netbox-version": "3.7.8"}
        code, lines = doctor({**chat_env, "NETBOX_URL": old.url})
    assert code == 1
    assert "3.7.8" in line(lines, "NetBox version") and line(lines, "NetBox version")[0] == "✗"


def test_on_a_narrow_terminal_a_line_wraps_at_spaces_under_its_first(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """doctor's long lines broke inside words (`netbox-chat waits` split as
    `netbox-c` / `hat`): wrapped for a width the terminal did not have (a
    COLUMNS exported before a resize). On a 70-column terminal each line
    fits (bar a word longer than a row), breaks at a space, and goes on indented under its first; joined
    again they are the lines a pipe gets."""
    ollama.running = []
    piped = doctor(chat_env)[1]
    code, drawn = run_in_pty({**chat_env, "COLUMNS": "100"}, "doctor", columns=70)
    assert code == 0
    rows = drawn.splitlines()
    # a row fits, unless it is one word longer than a row (the test's long path)
    assert all(len(row) <= 70 or " " not in row.strip() for row in rows), rows
    joined: list[str] = []
    for row in rows:
        if row.startswith("  "):
            joined[-1] += " " + row[2:]
        else:
            joined.append(row)
    assert joined == piped
    assert len(rows) > len(piped)  # some did wrap
