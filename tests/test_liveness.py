"""Item 1 of issue 24: a silent server is not a dead server. Through the real CLI
and the REPL in a pty, against the scripted Ollama playing a server that sends
nothing while `/api/ps` says it is loading the model or reading the prompt (a cold
first call of 82-108 s and a 167 s prefill were recorded; docs/facts/
real-models.md), scaled down against a scaled-down NETBOX_CHAT_TIMEOUT; then the
same rule on every OpenAI-compatible dialect (tests/doubles/openai_server.py), each asked
where it says it is alive (models/dialects.py, `Dialect.busy`)."""

from __future__ import annotations

import json
import stat
import time
from datetime import date
from pathlib import Path
from typing import Any

import pexpect
import pytest

from netbox_chat.models.dialects import DIALECTS
from netbox_chat.models.liveness import DataLines
from tests.doubles.inspect_session import turn_row
from tests.doubles.ollama_server import (
    Delay,
    KeepAlive,
    Responder,
    ScriptedOllama,
    Stall,
    Step,
    Text,
)
from tests.doubles.openai_server import ScriptedOpenAI
from tests.drive.pty import PROMPT, leave, only_session, spawn
from tests.drive.runner import ask, ask_json, doctor, line

TIMEOUT = "2"  # seconds; every silence below is longer


def stream(env: dict[str, str], *args: str, code: int = 0) -> list[dict[str, Any]]:
    result = ask(env, *args, "--stream-json", code=code)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_a_silent_server_that_is_loading_the_model_is_waited_for(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.running = []  # /api/ps answers, the model not yet loaded
    ollama.script([Delay(5.0), Text("Hello.")])
    lines = stream({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello")
    assert lines[-1]["status"] == "done" and lines[-1]["answer"] == "Hello."
    waits = [line for line in lines if line["type"] == "waiting"]
    assert waits and all(w["activity"] == "loading qwen3:8b" for w in waits)
    assert waits[-1]["seconds"] > float(TIMEOUT)  # waited past the timeout
    assert ollama.ps_requests >= 2
    assert turn_row(sessions_dir, lines[-1]["session"], 1)["answer"] == "Hello."


def test_a_server_that_answers_nothing_at_all_times_out(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Delay(6.0), Text("Hello.")])  # no /api/ps either
    started = time.monotonic()
    result = ask_json({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello", code=1)
    assert time.monotonic() - started < 5.5
    assert result["status"] == "failed" and result["answer"] == ""
    assert result["error"].startswith("Ollama did not answer in time: it stopped answering")


def test_a_stall_after_the_answer_began_times_out_though_ps_answers(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.running = ["qwen3:8b"]
    ollama.script([Text("Two devices "), Stall()])
    result = ask_json({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "how many?", code=1)
    assert "stalled mid-answer" in result["error"]
    ollama.wait_for_disconnects(1)


def ask_what_stalls(server: ScriptedOllama | ScriptedOpenAI, env: dict[str, str]) -> pexpect.spawn:
    """A REPL, under the short timeout, whose first question ("hello") is
    answered and whose second ("the question to cancel") meets a server that
    has no model loaded and never answers: what `cancel_the_wait` then cancels."""
    server.script([Text("Hello.")])
    child = spawn({**env, "NETBOX_CHAT_TIMEOUT": TIMEOUT})
    child.sendline("hello")
    child.expect("Hello.")
    child.expect(PROMPT)
    server.running = []
    server.script([Stall()])
    child.sendline("the question to cancel")
    return child


def cancel_the_wait(
    child: pexpect.spawn,
    server: ScriptedOllama | ScriptedOpenAI,
    env: dict[str, str],
    sessions_dir: Path,
) -> None:
    """Past the timeout the REPL still waits on a server that says it is
    working; Ctrl-C cancels at once, closes the stream, and the next request
    carries nothing of the cancelled turn."""
    time.sleep(float(TIMEOUT) + 1)  # past the timeout: still waiting, still cancellable
    assert child.isalive()
    started = time.monotonic()
    child.sendintr()
    child.expect("cancelled")
    child.expect("rolled back")
    child.expect(PROMPT)
    assert time.monotonic() - started < 3.0
    server.wait_for_disconnects(1)
    child.sendcontrol("u")
    leave(child)

    session = only_session(sessions_dir)
    assert turn_row(sessions_dir, session, 2)["status"] == "cancelled"
    server.script([Text("Sure.")])
    ask_json(env, "next question", "--session", session)
    sent = json.dumps(server.requests[-1]["messages"])
    assert "hello" in sent and "the question to cancel" not in sent


def test_the_repl_says_what_the_server_is_doing_and_ctrl_c_cancels_the_wait(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = ask_what_stalls(ollama, chat_env)
    child.expect("loading qwen3:8b…", timeout=10)
    ollama.running = ["qwen3:8b"]
    child.expect(r"reading [0-9.]+k? tokens…", timeout=10)
    cancel_the_wait(child, ollama, chat_env, sessions_dir)


PROBED = {
    "llama.cpp": "/health",
    "vllm": "/health",
    "sglang": "/v1/models",
    "lmstudio": "/api/v1/models",
    "ollama": "/api/ps",
}
"""Where each dialect is asked whether it is alive (models/dialects.py)."""
LOADS = {"llama.cpp", "lmstudio", "ollama"}
"""The servers that load a model on request and say so; vLLM and SGLang serve only
once their model is loaded."""


def hang(server: ScriptedOpenAI) -> Responder:
    """A responder: from this request on the server answers nothing at all."""

    def respond(body: dict[str, Any]) -> list[Step]:
        server.hung = True
        return [Stall()]

    return respond


def test_a_silent_openai_server_that_says_it_is_alive_is_waited_for(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, sessions_dir: Path
) -> None:
    openai_server.running = []  # the model not loaded yet, where the server can say so
    openai_server.script([Delay(5.0), Text("Hello.")])
    lines = stream({**openai_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello")
    assert lines[-1]["status"] == "done" and lines[-1]["answer"] == "Hello."
    activities = {w["activity"] for w in lines if w["type"] == "waiting"}
    if openai_server.dialect in LOADS:
        assert activities == {"loading qwen3:8b"}
    else:
        assert len(activities) == 1 and activities.pop().startswith("reading ")
    waits = [line for line in lines if line["type"] == "waiting"]
    assert waits[-1]["seconds"] > float(TIMEOUT)  # waited past the timeout
    assert openai_server.gets.count(PROBED[openai_server.dialect]) >= 2
    assert turn_row(sessions_dir, lines[-1]["session"], 1)["answer"] == "Hello."


def test_an_openai_server_that_answers_nothing_at_all_times_out(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, sessions_dir: Path
) -> None:
    openai_server.responder = hang(openai_server)
    started = time.monotonic()
    result = ask_json({**openai_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello", code=1)
    assert time.monotonic() - started < 20
    assert result["status"] == "failed" and result["answer"] == ""
    name = DIALECTS[openai_server.dialect].name
    assert result["error"].startswith(f"{name} did not answer in time: it stopped answering")
    openai_server.wait_for_disconnects(1)


@pytest.mark.parametrize("openai_server", ["llama.cpp", "vllm"], indirect=True)
def test_an_openai_server_that_stalls_mid_answer_times_out_though_it_says_it_is_alive(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    openai_server.script([Text("Two devices "), Stall()])
    result = ask_json({**openai_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "how many?", code=1)
    assert "stalled mid-answer" in result["error"]
    assert result["error"].startswith(DIALECTS[openai_server.dialect].name)
    openai_server.wait_for_disconnects(1)


@pytest.mark.parametrize("openai_server", ["llama.cpp", "vllm"], indirect=True)
def test_the_repl_says_what_an_openai_server_is_doing_and_ctrl_c_cancels_the_wait(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, sessions_dir: Path
) -> None:
    """llama-server sends nothing before its first token; vLLM sends its headers at
    once, then nothing while it reads the prompt: either way the REPL waits, says
    so, and Ctrl-C cancels, closing the stream."""
    child = ask_what_stalls(openai_server, openai_env)
    if openai_server.dialect in LOADS:
        child.expect("loading qwen3:8b…", timeout=10)
        openai_server.running = None
    child.expect(r"reading [0-9.]+k? tokens…", timeout=10)
    cancel_the_wait(child, openai_server, openai_env, sessions_dir)


def cold_starts(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "netbox-chat" / "cold-starts.json"


def test_a_cold_start_is_measured_in_a_turn_and_doctor_states_it(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    assert "never measured here for qwen3:8b" in line(doctor(chat_env)[1], "cold start")
    ollama.running = []
    ollama.load_seconds = 3.0  # listed by /api/ps after 3 s, then reads the prompt
    ollama.script([Delay(6.0), Text("Hello.")])
    lines = stream({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello")
    activities = [line["activity"] for line in lines if line["type"] == "waiting"]
    assert activities[0] == "loading qwen3:8b" and activities[-1].startswith("reading ")
    assert lines[-1]["answer"] == "Hello."

    record = cold_starts(chat_env)
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    seconds = json.loads(record.read_text())["qwen3:8b"]["seconds"]
    assert 3.0 <= seconds < 6.0  # the load, to within a poll: not the whole silence
    assert line(doctor(chat_env)[1], "cold start") == (
        f"· cold start: {seconds:.0f} s for qwen3:8b, measured {date.today().isoformat()}"
    )


def test_a_turn_with_the_model_in_memory_measures_no_cold_start(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.running = ["qwen3:8b"]
    ollama.script([Delay(3.0), Text("Hello.")])  # a silence, but reading, not loading
    stream({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hello")
    assert not cold_starts(chat_env).exists()


@pytest.mark.parametrize(
    "stored",
    [
        '{"qwen3:8b": {"seconds": "14\\u001b[2J", "measured": "2026-12-02"}}',
        '{"qwen3:8b": {"seconds": 1e999, "measured": "2026-12-02"}}',
        '{"qwen3:8b": {"seconds": true, "measured": "2026-12-02"}}',
        '{"qwen3:8b": {"seconds": 14, "measured": "2026-12-02\\u001b[2J"}}',
        '{"qwen3:8b": {"seconds": 14, "measured": "yesterday!"}}',
        '{"llama3:8b": {"seconds": 14, "measured": "2026-12-02"}}',
        '["qwen3:8b", 14]',
        "not json",
    ],
    ids=["control-in-seconds", "infinite", "bool", "control-in-date", "no-date", "other-model",
         "a-list", "not-json"],
)  # fmt: skip
def test_a_cold_start_record_that_is_not_ours_is_never_shown(
    chat_env: dict[str, str], stored: str
) -> None:
    record = cold_starts(chat_env)
    record.parent.mkdir(parents=True)
    record.write_text(stored)
    shown = line(doctor(chat_env)[1], "cold start")
    assert "never measured here for qwen3:8b" in shown and "\x1b" not in shown


@pytest.mark.parametrize("openai_server", ["llama.cpp", "vllm"], indirect=True)
def test_an_answer_stalled_behind_keep_alives_times_out_in_ask_and_doctor(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    """Issue 32, item 3: a proxy's `: keep-alive` comments are not the answer's
    progress; after the first data only data extends NETBOX_CHAT_TIMEOUT."""
    env = {**openai_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}
    openai_server.script([Text("Two devices "), KeepAlive(0.3)])
    started = time.monotonic()
    result = ask_json(env, "how many?", code=1)
    assert time.monotonic() - started < 15
    assert result["error"].startswith(DIALECTS[openai_server.dialect].name)
    assert "stalled mid-answer" in result["error"] and result["kept"] is False
    openai_server.wait_for_disconnects(1)
    # doctor's one short request reads the same stream, and gives up the same way.
    openai_server.script([Text("OK "), KeepAlive(0.3)])
    started = time.monotonic()
    code, lines = doctor(env)
    assert code == 1 and time.monotonic() - started < 15
    assert line(lines, "model").startswith(
        f"✗ model: qwen3:8b: no answer (no data for {TIMEOUT}s, only keep-alives) → "
        "check the server (or the proxy in front of it), or raise --deadline / "
        "NETBOX_CHAT_DEADLINE"
    )


def test_ask_past_its_deadline_fails_with_the_setting_and_keeps_nothing(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """A server that says it is loading for ever is waited for by the liveness
    rule; `ask` still ends at its deadline (issue 32, item 3)."""
    ollama.running = []  # /api/ps answers: loading, for ever
    ollama.script([Stall()])
    started = time.monotonic()
    result = ask_json({**chat_env, "NETBOX_CHAT_TIMEOUT": TIMEOUT}, "hi", "--deadline", "4", code=1)
    assert 4 <= time.monotonic() - started < 15
    assert result["status"] == "failed" and result["kept"] is False
    assert result["error"] == (
        "the turn did not finish within its deadline of 4 s (--deadline): the "
        "model server kept the answer waiting; check the server, or raise it"
    )
    ollama.wait_for_disconnects(1)
    # The same from the environment, without --json: one red line, exit 1.
    ollama.script([Stall()])
    plain = ask({**chat_env, "NETBOX_CHAT_DEADLINE": "3"}, "hi", code=1)
    assert "netbox-chat: turn 1 failed: the turn did not finish within its deadline of 3 s" in (
        plain.stderr
    )


@pytest.mark.parametrize("openai_server", ["vllm"], indirect=True)
def test_doctor_ends_at_its_deadline_on_an_answer_that_never_ends(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    """The trial asks for 16 tokens; a server that sends them slowly (data, so
    no stall) still ends at doctor's deadline."""
    openai_server.script([Text("OK " * 16, chunk_delay=1.0)])  # 15 s of data
    started = time.monotonic()
    code, lines = doctor({**openai_env, "NETBOX_CHAT_DEADLINE": "2"})
    assert code == 1 and time.monotonic() - started < 10
    assert line(lines, "model").startswith(
        "✗ model: qwen3:8b: no answer (not done by the deadline)"
    )


def test_only_data_lines_are_progress_however_the_pieces_are_cut() -> None:
    """DataLines alone (one room): a comment split across pieces is still a
    comment, and a data line cut anywhere is still data."""
    sse = DataLines(sse=True)
    assert not sse.progress(b": keep-")
    assert not sse.progress(b"alive\n\n")  # the rest of the comment, then a blank line
    assert not sse.progress(b"\r\n")
    assert sse.progress(b"da")  # a new line that is not a comment
    assert sse.progress(b'ta: {"choices": []}\n\n: ping\n')
    assert not sse.progress(b": OPENROUTER PROCESSING\n\n")
    assert DataLines(sse=False).progress(b": not SSE, so data\n")  # Ollama's NDJSON
