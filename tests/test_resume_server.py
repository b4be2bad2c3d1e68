"""A session resumes on its own server (issue 31, item 4), through the real
REPL on a terminal: the ledger records each turn's model server, the banner
names it, the exit hint is a command that reaches it as printed, `ls` prints
that command for a session on another server, and a resume under another
configuration goes on with that one and says in one line where it started."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.openai_server import ScriptedOpenAI
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import cli
from tests.drive.pty import leave, resume, spawn
from tests.drive.screen import answered


@pytest.fixture
def vllm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI("vllm", context_lengths={"qwen3:8b": 40_960}) as server:
        yield server


def hint(shown: str) -> list[str]:
    """The command the chat ended with (`session ID saved; `netbox-chat …``)."""
    joined = " ".join(shown.split())
    command = joined.split("saved; `", 1)[1].split("`", 1)[0]
    return shlex.split(command)


def test_a_session_on_an_openai_server_resumes_there_as_the_hint_says(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama, vllm: ScriptedOpenAI
) -> None:
    chat_env = store_env  # a folder, or the team store (its ledger keeps the server too)
    flags = ["--provider", "openai", "--base-url", vllm.base_url]
    vllm.script([Text("Three sites.")])
    child = spawn(chat_env, *flags)
    answered(child, "how many sites?", "Three sites.")
    ended = leave(child)
    command = hint(ended)
    session_id = command[2]
    assert command == ["netbox-chat", "resume", session_id, *flags]
    exported = json.loads(cli(chat_env, "export", session_id, "--format", "json").stdout)
    host, port = vllm.base_url.split("//")[1].split("/")[0].split(":")
    (turn,) = exported["turns"]
    assert turn["server"] == {
        "provider": "openai",
        "scheme": "http",
        "host": host,
        "port": int(port),
        "profile": None,
    }

    # As printed: the same server, its banner says so, no note.
    vllm.script([Text("Still three.")])
    child, recap = resume(chat_env, *command[2:])
    assert f"on openai server {vllm.base_url}" in recap
    assert "was started on" not in recap
    answered(child, "and now?", "Still three.")
    leave(child)
    assert len(vllm.requests) == 2 and ollama.requests == []

    # `ls` from a shell configured for Ollama: the command that reaches it.
    listed = cli(chat_env, "ls")
    assert f"{session_id} is on openai server {vllm.base_url}: `{shlex.join(command)}`" in (
        " ".join(listed.stderr.split())
    )
    (row,) = json.loads(cli(chat_env, "ls", "--json").stdout)
    assert row["resume"] == shlex.join(command) and row["server"]["port"] == int(port)

    # Resumed without the flags: it goes on with Ollama, and says where it started.
    ollama.script([Text("Three, says Ollama.")])
    child, recap = resume(chat_env, session_id)
    note = " ".join(recap.split())
    assert (
        f"netbox-chat: session {session_id} was started on openai server {vllm.base_url} "
        f"(model qwen3:8b); going on with qwen3:8b on ollama server {ollama.url}; "
        f"`{shlex.join(command)}` resumes it there"
    ) in note
    assert f"on ollama server {ollama.url}" in note  # the banner's server line
    answered(child, "and on Ollama?", "Three, says Ollama.")
    leave(child)
    assert len(ollama.requests) == 1 and len(vllm.requests) == 2


def test_a_profiles_session_ends_with_the_profile_in_its_resume_command(
    chat_env: dict[str, str], vllm: ScriptedOpenAI
) -> None:
    config = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[profiles.gpu]\nprovider = "openai"\nbase_url = "{vllm.base_url}"\n')
    config.chmod(0o600)
    vllm.script([Text("Three sites.")], [Text("Still three.")])
    child = spawn(chat_env, "--profile", "gpu")
    answered(child, "how many sites?", "Three sites.")
    command = hint(leave(child))
    assert command[3:] == ["--profile", "gpu"]
    child, recap = resume(chat_env, *command[2:])
    assert f"on openai server {vllm.base_url}" in recap and "was started on" not in recap
    answered(child, "and now?", "Still three.")
    leave(child)
