"""WHAT-IF prototype of a fast `ls` (not the shipped command; bench 1 times it).

What it changes against the shipped `netbox-chat ls`: argparse instead of
Typer (Typer 0.29 builds pydantic TypeAdapters for every parameter), no
asyncio or rich.markdown import, sessions ordered by file mtime (the -wal's
when there is one) and only the 20 most recent read from SQLite unless --all.
It reuses the shipped SessionStore.summarize for the rows it shows.

    python bench/_ls_prototype.py ls [--all] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

parser = argparse.ArgumentParser(prog="netbox-chat")
commands = parser.add_subparsers(dest="command", required=True)
ls = commands.add_parser("ls")
ls.add_argument("--json", action="store_true")
ls.add_argument("--all", action="store_true")
args = parser.parse_args()

from netbox_chat.store.sessions import SessionStore  # noqa: E402

store = SessionStore(Path(os.environ.get("NETBOX_CHAT_SESSIONS", "sessions")))


def last_write(session_id: str) -> int:
    path = store.path_for(session_id)
    stamps = []
    for candidate in (path, Path(f"{path}-wal")):
        with contextlib.suppress(OSError):
            stamps.append(os.stat(candidate).st_mtime_ns)
    return max(stamps, default=0)


ids = sorted(store.session_ids(), key=last_write, reverse=True)
shown = ids if args.all else ids[:20]
rows = [store.summarize(session_id) for session_id in shown]
if args.json:
    import json

    print(json.dumps([row.as_json() for row in rows], indent=2))
    sys.exit(0)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

table = Table(box=None, pad_edge=False, header_style="bold")
for column in ("id", "title", "turns", "last active", "model", "size"):
    table.add_column(column, justify="right" if column in ("turns", "size") else "left")
for row in rows:
    title = row.unreadable or row.title or "(no question yet)"
    table.add_row(
        row.id, title[:50], str(row.turns), row.last_active, row.model, f"{row.size_bytes:,}"
    )
Console(highlight=False).print(table)
if len(ids) > len(shown):
    print(f"... and {len(ids) - len(shown)} older sessions (ls --all)")
