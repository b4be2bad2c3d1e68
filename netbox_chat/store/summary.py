"""What `ls` shows of a session, made the same way from either store's rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from netbox_chat.config import ModelServer, resume_command, without_userinfo
from netbox_chat.store.ledger import session_model


@dataclass(frozen=True)
class SessionSummary:
    """What `ls` shows: read from small tables only, never from checkpoints."""

    id: str
    path: Path
    size_bytes: int
    title: str = ""
    model: str = ""
    netbox_url: str = ""
    profile: str = ""
    created_at: str = ""
    last_active: str = ""
    turns: int = 0
    open_by: int | None = None
    is_open: bool = False
    unreadable: str | None = None
    unanswered: bool = False  # no turn ever finished (a first turn cut short by a crash)
    context_tokens: int | None = None
    """Ollama's count of the last finished turn's last request (the meter)."""
    context_window: int | None = None
    asked_by: tuple[str, ...] = ()  # everyone who asked a turn, user@host
    server: ModelServer | None = None  # the newest turn's model server (None before m006)

    def __post_init__(self) -> None:
        # Sessions written before issue 21 (or by someone else) may hold a
        # NetBox URL with `user:password@`: no summary carries it to a screen.
        object.__setattr__(self, "netbox_url", without_userinfo(self.netbox_url))

    def as_json(self) -> dict[str, Any]:
        # A shallow copy: `asdict` deep-copies every field and, over 10,000
        # sessions, costs `ls --json` as much as reading them (bench 1).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["server"] = None if self.server is None else asdict(self.server)
        data["path"] = str(self.path)
        data["resume"] = resume_command(self.id, self.server)
        return data


def summary_fields(
    meta: Mapping[str, Any],
    counts: Sequence[Any],
    askers: Sequence[Any],
    latest_model: object,
    server: ModelServer | None,
) -> dict[str, Any]:
    """The summary's fields from a session's meta, its counts (finished
    turns, answered turns, last activity, the last finished turn's prompt
    size and context window), askers, newest model and server: one reading
    for a session file's rows and the database's, which a missing value
    (NULL) reads the same in."""
    turns, answered, last, context_tokens, context_window = counts
    created = meta.get("created_at") or ""
    return {
        "title": meta.get("title") or "",
        "model": session_model(latest_model, meta.get("model")),
        "netbox_url": meta.get("netbox_url") or "",
        "profile": meta.get("profile") or "",
        "created_at": created,
        "last_active": max(last or "", created),
        "turns": int(turns or 0),
        "unanswered": not answered,
        "context_tokens": context_tokens,
        "context_window": context_window,
        "asked_by": _sorted(askers or ()),
        "server": server,
    }


def _sorted(values: Sequence[Any]) -> tuple[Any, ...]:
    """`values` in SQL's ORDER BY order (numbers before text): a file's JSON
    and a database's array may hold either, as a forged row may."""
    return tuple(sorted(values, key=lambda v: (isinstance(v, str), v if isinstance(v, str) else 0)))


def matching_line(texts: Sequence[str | None], needle: str) -> str:
    """The first line of `texts` (a turn's question, then its answer) that
    holds `needle`, compared as the stores' LIKE does (ASCII letters
    case-insensitively), stripped: what `ls --grep` shows, as grep does."""
    folded = needle.translate(_ASCII_LOWER)
    for text in texts:
        for line in (text or "").splitlines():
            if folded in line.translate(_ASCII_LOWER):
                return line.strip()
    return ""


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
