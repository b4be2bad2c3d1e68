"""The NetBox token from a profile's `token_command`, run at most once per
process, for the commands that talk to NetBox (chat, resume, ask, doctor,
config). Kept out of `config.py`, which only reads the environment and files.

The command's output is the secret: it is never logged, printed or stored.
A failure names the profile, the exit status and the last line the command
wrote on its stderr (`pass: x is not in the password store.`), made visible
(no terminal controls) and with whatever it wrote on stdout masked.
"""

from __future__ import annotations

import dataclasses
import subprocess

from netbox_chat.config import TOKEN_ENV, ConfigError, Settings, mask_token, source_of
from netbox_chat.visible import visible_line

TOKEN_COMMAND_TIMEOUT = 30.0

_ran: dict[tuple[str, ...], str] = {}


def run_token_command(
    command: tuple[str, ...], profile: str | None, *, named: str | None = None
) -> str:
    """The first line of the command's output (like `pass show`, whose first
    line is the secret), cached for the life of the process. `named`: what the
    errors call the command when it is not a profile's (the MCP bearer's)."""
    if command in _ran:
        return _ran[command]
    named = named or (
        f"token_command of profile {profile}"
        if profile
        else "token_command (top level of the config file)"
    )
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TOKEN_COMMAND_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise ConfigError(f"{named} failed: {command[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"{named} failed: no answer in {TOKEN_COMMAND_TIMEOUT:.0f}s (is it asking for input?)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{named} failed: {exc.strerror}") from None
    lines = done.stdout.decode("utf-8", errors="replace").splitlines()
    if done.returncode != 0:
        said = _last_line(done.stderr, secret=lines[0].strip() if lines else None)
        raise ConfigError(
            f"{named} failed: {command[0]} exited {done.returncode}" + (f": {said}" if said else "")
        )
    if not lines or not lines[0].strip():
        raise ConfigError(f"{named} printed no token")
    _ran[command] = lines[0].strip()
    return _ran[command]


STDERR_SHOWN = 300
"""Characters of the command's own error shown at most: one line, not a dump."""


def _last_line(stderr: bytes, *, secret: str | None) -> str:
    """The last non-empty line of a failed command's stderr, fit for one line
    on a terminal, with what it printed on stdout (maybe the token) masked."""
    text = stderr.decode("utf-8", errors="replace")
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    last = mask_token(last, secret)
    return visible_line(last[:STDERR_SHOWN] + ("…" if len(last) > STDERR_SHOWN else ""))


def with_token(settings: Settings) -> Settings:
    """`settings` with the token filled in from its token_command, if it has
    one; refused (one line) when the token belongs to another NetBox than the
    one configured, before any command runs."""
    if settings.token_refused is not None:
        raise ConfigError(settings.token_refused)
    source = settings.token_source
    if settings.netbox_token is not None or source is None or source.command is None:
        return settings
    token = run_token_command(source.command, source.profile)
    return dataclasses.replace(settings, netbox_token=token)


def missing_token(settings: Settings) -> str | None:
    """Why no token will be sent, in one line; None when one will be. A
    token_command that fails has already raised."""
    if settings.netbox_token is not None:
        return None
    source = settings.token_source
    if source is not None and source.env is not None:
        return f"no NetBox token: {source_of(settings, 'token')} is not set"
    return f"no NetBox token: {TOKEN_ENV} is not set and no profile names a token"
