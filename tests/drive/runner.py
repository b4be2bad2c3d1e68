"""The CLI in this process through Typer's CliRunner: its exit status and output."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner, Result

from netbox_chat.cli.app import app


def invoke(args: list[str], **options: Any) -> Result:
    """`netbox-chat ARGS` in this process (Typer's runner): `env`, `input` and
    the runner's other options pass through; the result holds its exit code,
    stdout and stderr."""
    return CliRunner().invoke(app, args, **options)


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
