"""Settings from flags, then environment, then defaults.

Kept free of I/O beyond reading the environment so every command (even `ls`)
can resolve settings without paying for imports or network calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen3:8b"
DEFAULT_NUM_CTX = 16384
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_NETBOX_TIMEOUT = 15.0


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to know about where things are.

    The token is excluded from `repr` so a settings object that ends up in a
    traceback or a log line cannot leak it.
    """

    sessions_dir: Path
    # A postgresql:// URL when the sessions live on a database server. It may
    # carry a password, so it stays out of `repr` like the token.
    store_url: str | None = field(default=None, repr=False)
    ollama_url: str = DEFAULT_OLLAMA_URL
    model: str = DEFAULT_MODEL
    netbox_url: str | None = None
    netbox_token: str | None = field(default=None, repr=False)
    num_ctx: int = DEFAULT_NUM_CTX
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    netbox_timeout: float = DEFAULT_NETBOX_TIMEOUT


def _positive_number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero, got {raw!r}")
    return value


DATABASE_SCHEMES = ("postgresql://", "postgres://")


def _store(
    store: str | None, sessions_dir: Path | None, env: Mapping[str, str]
) -> tuple[Path, str | None]:
    """(sessions folder, database URL or None): `--store` over `--sessions-dir`
    over NETBOX_CHAT_STORE over NETBOX_CHAT_SESSIONS over ./sessions."""
    value = store or (str(sessions_dir) if sessions_dir else None)
    value = value or env.get("NETBOX_CHAT_STORE") or env.get("NETBOX_CHAT_SESSIONS") or "sessions"
    if value.startswith(DATABASE_SCHEMES):
        return Path("sessions"), value
    if "://" in value:
        scheme = value.split("://", 1)[0]
        raise ValueError(
            f"unknown session store {scheme}://...: use a folder or a postgresql:// URL"
        )
    return Path(value), None


def resolve_settings(
    *,
    store: str | None = None,
    sessions_dir: Path | None = None,
    ollama_url: str | None = None,
    model: str | None = None,
    netbox_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Merge flags (arguments) over the environment over defaults.

    Raises ValueError with a one-line message for malformed environment values.
    """
    env = os.environ if env is None else env
    url = ollama_url or env.get("OLLAMA_HOST") or DEFAULT_OLLAMA_URL
    if "://" not in url:
        # Ollama's own CLI accepts OLLAMA_HOST=127.0.0.1:11434; so do we.
        url = f"http://{url}"
    folder, store_url = _store(store, sessions_dir, env)
    return Settings(
        sessions_dir=folder,
        store_url=store_url,
        ollama_url=url.rstrip("/"),
        model=model or env.get("NETBOX_CHAT_MODEL") or DEFAULT_MODEL,
        netbox_url=(netbox_url or env.get("NETBOX_URL") or "").rstrip("/") or None,
        netbox_token=env.get("NETBOX_TOKEN") or None,
        num_ctx=int(_positive_number(env, "NETBOX_CHAT_NUM_CTX", DEFAULT_NUM_CTX)),
        request_timeout=_positive_number(env, "NETBOX_CHAT_TIMEOUT", DEFAULT_REQUEST_TIMEOUT),
        netbox_timeout=_positive_number(env, "NETBOX_TIMEOUT", DEFAULT_NETBOX_TIMEOUT),
    )
