"""Named, recorded migrations of the session's own tables (simonw/llm's style).

Each migration is a function decorated with `@migration`; they run in the
order they are defined, each in one transaction with its record, so a
failure (or a crash) half-way leaves the file exactly at the version before.
`session_meta` records which ran and when (a `migration:<name>` row each;
before m008 a `session_migrations` table of their own), and its
`schema_version` is the number applied, which is what an older netbox-chat
reads to refuse a file made by a newer one. To change the tables, append a
function at the end.

Statements run one by one through `execute`: `executescript` would commit on
its own in the middle of the transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from netbox_chat.store.database import Connection

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS session_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )"""
    )
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS turns (
            number INTEGER PRIMARY KEY,
            question TEXT NOT NULL,
            status TEXT NOT NULL,
            started_at TEXT NOT NULL,
            ended_at TEXT,
            base_checkpoint_id TEXT,
            snapshot_message_ids TEXT,
            end_checkpoint_id TEXT,
            tokens_in INTEGER NOT NULL DEFAULT 0,
            tokens_out INTEGER NOT NULL DEFAULT 0,
            tool_calls TEXT NOT NULL DEFAULT '[]',
            rolled_back INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            answer TEXT,
            message_count INTEGER
        )"""
    )
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS history_edits (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        )"""
    )


@migration
def m002_base_message_count(db: sqlite3.Connection) -> None:
    """A rollback deletes the rows a turn wrote instead of restoring a list of
    message ids, so a turn keeps only the count of messages before it."""
    db.execute("ALTER TABLE turns DROP COLUMN snapshot_message_ids")
    db.execute("ALTER TABLE turns ADD COLUMN base_message_count INTEGER")


@migration
def m003_turn_measurements(db: sqlite3.Connection) -> None:
    """What a turn measured of the model: the prompt sizes Ollama counted (the
    context meter, truncation) and how long and how much it thought."""
    for column in TURN_MEASUREMENT_COLUMNS:
        db.execute(f"ALTER TABLE turns ADD COLUMN {column}")


TURN_MEASUREMENT_COLUMNS = (
    "prompt_tokens_max INTEGER",
    "prompt_tokens_last INTEGER",
    "context_window INTEGER",
    "truncated INTEGER NOT NULL DEFAULT 0",
    "thinking TEXT",
    "thinking_seconds REAL",
    "thinking_chars INTEGER NOT NULL DEFAULT 0",
)


@migration
def m004_asked_by(db: sqlite3.Connection) -> None:
    """Who asked each turn (OS user and host), for a team sharing sessions."""
    db.execute("ALTER TABLE turns ADD COLUMN asked_by TEXT")


@migration
def m005_turn_model(db: sqlite3.Connection) -> None:
    """Which model, on which kind of server, each turn asked: `/model` changes
    it within a session, so the session's first model no longer says it. A
    row from before reads NULL: it asked the session's (meta) model."""
    for column in TURN_MODEL_COLUMNS:
        db.execute(f"ALTER TABLE turns ADD COLUMN {column}")


TURN_MODEL_COLUMNS = ("model TEXT", "provider TEXT")


@migration
def m006_turn_server(db: sqlite3.Connection) -> None:
    """Where each turn's model server was (scheme, host, port: never a
    password or a key) and the profile that named it, so that a session
    says which server it was on and how to resume it there. NULL in a row
    from before: the server is not known."""
    for column in TURN_SERVER_COLUMNS:
        db.execute(f"ALTER TABLE turns ADD COLUMN {column}")


TURN_SERVER_COLUMNS = (
    "server_scheme TEXT",
    "server_host TEXT",
    "server_port INTEGER",
    "profile TEXT",
)


@migration
def m007_turn_grounding(db: sqlite3.Connection) -> None:
    """What the grounding check found in each turn's answer (claims, the
    ungrounded ones, whether it was answered without NetBox), as JSON; NULL in
    a row from before, or for a turn with no answer."""
    db.execute("ALTER TABLE turns ADD COLUMN grounding TEXT")


@migration
def m008_fold_small_tables(db: sqlite3.Connection) -> None:
    """A short session's file was mostly one-page b-trees (bench 4: 24 KB of
    a 50-turn file's 224 KB, the whole file 2.13x its turns' JSON). Each
    table and each index takes a page of its own however little it holds, so
    `session_meta` becomes a `WITHOUT ROWID` table (its key index is the
    table), the migration records become rows of it (the table and its
    index go), and `history_edits` is dropped while empty: the first rewind
    or compaction creates it (`create_history_edits`), and a reader takes a
    file without it as one with no edits."""
    db.execute(
        "CREATE TABLE session_meta_new (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
    )
    db.execute("INSERT INTO session_meta_new(key, value) SELECT key, value FROM session_meta")
    if has_table(db, "session_migrations"):
        db.execute(
            "INSERT INTO session_meta_new(key, value) "
            f"SELECT '{RECORD_PREFIX}' || name, applied_at FROM session_migrations"
        )
        db.execute("DROP TABLE session_migrations")
    db.execute("DROP TABLE session_meta")
    db.execute("ALTER TABLE session_meta_new RENAME TO session_meta")
    if db.execute("SELECT 1 FROM history_edits LIMIT 1").fetchone() is None:
        db.execute("DROP TABLE history_edits")


RECORD_PREFIX = "migration:"
"""A `session_meta` key that records a migration: the prefix, then its name."""


def has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (name,)).fetchone() is not None


def create_history_edits(db: sqlite3.Connection) -> None:
    """The table of history edits, as m001 made it, for a file's first edit
    (m008 leaves a file without one until then)."""
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS history_edits (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        )"""
    )


def schema_version() -> int:
    """The version this netbox-chat writes: how many migrations it knows."""
    return len(MIGRATIONS)


def migrate(db: Connection, version: int) -> None:
    """Apply the migrations after `version` (the file's), each atomically
    with its record and the new version number."""
    for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
        with db.atomic():
            step(db)
            applied_at = datetime.now(UTC).isoformat(timespec="seconds")
            db.executemany(
                "INSERT INTO session_meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(RECORD_PREFIX + step.__name__, applied_at), ("schema_version", str(number))],
            )
