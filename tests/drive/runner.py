"""The CLI in this process through Typer's CliRunner: its exit status and output."""

from __future__ import annotations

import json
import os
from typing import Any

from typer.testing import CliRunner, Result

from netbox_chat.cli.app import app

SUITE_SETTINGS = ("NETBOX_CHAT_CHECK_HISTORY_CACHE",)
"""The suite's own settings in os.environ (conftest sets them for every run)."""


def invoke(args: list[str], **options: Any) -> Result:
    """`netbox-chat ARGS` in this process (Typer's runner): `env`, `input` and
    the runner's other options pass through; the result holds its exit code,
    stdout and stderr.

    The runner adds `env` to this process's environment, so a developer's own
    NETBOX_URL or OLLAMA_HOST (exported for the chat, as the README says)
    would reach the command: every NetBox, Ollama or netbox-chat setting not
    in `env` is unset for the run, as the subprocess drivers' whole
    environments already are."""
    env = dict(options.pop("env", None) or {})
    for key in os.environ:
        if key.startswith(("NETBOX", "OLLAMA")) and key not in (*env, *SUITE_SETTINGS):
            env[key] = None
    return CliRunner().invoke(app, args, env=env, **options)


def ask(env: dict[str, str], *args: str, code: int = 0) -> Any:
    result = invoke(["ask", *args], env=env)
    assert result.exit_code == code, result.output
    return result


def ask_json(env: dict[str, str], *args: str, code: int = 0) -> dict[str, Any]:
    return dict(json.loads(ask(env, *args, "--json", code=code).stdout))


def doctor(env: dict[str, str]) -> tuple[int, list[str]]:
    result = invoke(["doctor"], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout.splitlines()


def line(lines: list[str], name: str) -> str:
    (found,) = [text for text in lines if text[2:].startswith(f"{name}:")]
    return found
