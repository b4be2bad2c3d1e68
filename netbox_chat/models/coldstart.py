"""The user's own cold start: how long this machine's model server took to load a
model, measured in a real turn (the liveness transport sees `loading …` end) and
kept per user, so `doctor` can say what to expect before the first question.

The record is the user's state, not a session's: `$XDG_STATE_HOME/netbox-chat/
cold-starts.json` (beside the REPL's input history), owner-only. It is read as
untrusted: anything that is not a model's seconds and date is ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from netbox_chat.config import state_dir
from netbox_chat.owned import NotOwned, make_folder, replace_file

FILE_NAME = "cold-starts.json"
KEEP = 20
"""Models remembered: the latest measured."""
MAX_BYTES = 64 * 1024
"""A larger file is no record of ours."""
MAX_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class ColdStart:
    model: str
    seconds: float
    measured: date


def record_path(env: Mapping[str, str]) -> Path | None:
    state = state_dir(env)
    return state / FILE_NAME if state else None


def _entries(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return {}
    if len(raw) > MAX_BYTES:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def last_cold_start(path: Path | None, model: str) -> ColdStart | None:
    """The last cold start measured for `model`, if the record holds a valid one."""
    entry = _entries(path).get(model) if path else None
    if not isinstance(entry, dict):
        return None
    seconds, measured = entry.get("seconds"), entry.get("measured")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
        return None
    if not isinstance(measured, str) or len(measured) != 10:
        return None
    try:
        day = date.fromisoformat(measured)
    except ValueError:
        return None
    return ColdStart(model, float(seconds), day)


def record_cold_start(path: Path, model: str, seconds: float, today: date) -> None:
    """Keeps `seconds` as `model`'s last cold start (0600 in a 0700 folder, written
    whole or not at all). A home that cannot be written keeps nothing: the figure
    is a help, never a reason to fail a turn."""
    entries = _entries(path)
    entries.pop(model, None)
    entries[model] = {"seconds": round(seconds, 1), "measured": today.isoformat()}
    kept = dict(list(entries.items())[-KEEP:])
    try:
        make_folder(path.parent, "state folder")
        replace_file(path, json.dumps(kept))
    except NotOwned:
        return


def recorder(env: Mapping[str, str]) -> Callable[[str, float], None] | None:
    """What the liveness transport calls when a load it waited for ends."""
    path = record_path(env)
    if path is None:
        return None

    def loaded(model: str, seconds: float) -> None:
        record_cold_start(path, model, seconds, date.today())

    return loaded


def cold_start_line(last: ColdStart | None, model: str) -> str:
    """What `doctor` says: the measured figure, or that there is none and how one
    gets measured."""
    if last is not None:
        return f"{last.seconds:.0f} s for {model}, measured {last.measured.isoformat()}"
    return (
        f"never measured here for {model}: the next question that waits for Ollama to load "
        f"it measures it (`ollama stop {model}`, then ask); a 125B MoE took 82-108 s"
    )
