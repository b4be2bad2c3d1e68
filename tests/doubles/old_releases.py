"""Session files written by earlier releases, made by their own code.

Each release's `netbox_chat/` is taken from git (`git archive`, as bench 3
does for its "before" figures) into a temporary folder and run as its own CLI
in a subprocess, with this tree's scripted Ollama server and NetBox double:
a turn with a tool call by its `ask`, then in its REPL on a pty three more
turns, a rewind (`/rewind`) and a compaction (`/compact`).
The files are what that release wrote, for `test_store_trust.py` to open
with today's code.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

from tests.doubles import ROOT

# The last commit of ledger schema 7: `session_meta` with a key index of its
# own, the migration records in `session_migrations`, an empty `history_edits`
# (m008 folds them; issue 32, item 15).
BEFORE_SMALL_TABLES = "61885ba"


# Merges on main (first parent) where what a session holds changed: the
# first with rewind and compaction (the commit before it could not run on its
# own), compression, the ledger's schema, the database store, and the last.
# LangGraph's pins never changed, so their values are encoded alike.
RELEASES = {
    "9022a98": "rewind and compaction, blobs stored as they are",
    "833d5a5": "habits: blobs compressed",
    "a048088": "integrity-store: ledger schema 2, recorded migrations",
    "6e4b0c3": "postgres: the team store",
    "80cc957": "the last merge before issue 21",
    BEFORE_SMALL_TABLES: "ledger schema 7, the last with one-page tables of its own",
}

# The last commit before the ledger kept each turn's model (m005, PG schema 3).
BEFORE_TURN_MODEL = "278211b"


def file_at_schema(path: Path, version: int, *, recorded: bool = True) -> None:
    """A session file's own tables as the release of schema `version` (7 at
    most) made them: the migrations up to it (earlier migrations are never
    edited, so they are that release's), each recorded in `session_migrations`
    as its `migrate()` did (none with `recorded=False`, as before schema 2's
    release). No turn, no meta but the version: the test writes those."""
    from netbox_chat.store.migrations import MIGRATIONS

    assert version <= 7, "schema 8 (m008) folded session_migrations into session_meta"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for step in MIGRATIONS[:version]:
            step(conn)
            if recorded:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS session_migrations "
                    "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
                conn.execute(
                    "INSERT INTO session_migrations(name, applied_at) VALUES (?, ?)",
                    (step.__name__, "2026-11-01T00:00:00+00:00"),
                )
        conn.execute(
            "INSERT INTO session_meta(key, value) VALUES ('schema_version', ?)", (str(version),)
        )


def answered_file_at_schema(
    path: Path, version: int, *, recorded: bool = True, answer: str = "Three sites."
) -> None:
    """A session file of schema `version` (file_at_schema) holding what a
    user's would: its meta and one answered turn, owner-only."""
    file_at_schema(path, version, recorded=recorded)
    path.chmod(0o600)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO session_meta(key, value) VALUES (?, ?)",
            [
                ("created_at", "2026-11-01T00:00:00+00:00"),
                ("model", "m"),
                ("title", "which sites?"),
            ],
        )
        conn.execute(
            "INSERT INTO turns(number, question, status, started_at, ended_at, answer, "
            "message_count) VALUES (1, 'which sites?', 'done', '2026-11-01T00:00:00+00:00', "
            "'2026-11-01T00:00:05+00:00', ?, 2)",
            (answer,),
        )


def release_code(commit: str, into: Path) -> Path | None:
    """`netbox_chat/` as committed at `commit`, under `into` (None: no git history here)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "netbox_chat"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def release_argv(code: Path, *args: str) -> list[str]:
    """That release's CLI, in this venv (every release pinned the same
    LangGraph), with this tree's editable install out of the way, so no
    module of today's code is imported beside the release's."""
    # The entry point moved with issue 30's layout (`cli.py` became `cli/main.py`).
    entry = "cli.main" if (code / "netbox_chat" / "cli" / "main.py").exists() else "cli"
    program = (
        "import sys; "
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in f.__module__]; "
        f"sys.path.insert(0, {str(code)!r}); "
        f"from netbox_chat.{entry} import main; main()"
    )
    return [sys.executable, "-c", program, *args]


@contextlib.contextmanager
def release(commit: str) -> Iterator[Path | None]:
    with tempfile.TemporaryDirectory(prefix=f"nbc-release-{commit}-") as folder:
        yield release_code(commit, Path(folder))


def has_postgres(code: Path) -> bool:
    return (code / "netbox_chat" / "pgstore.py").exists()
