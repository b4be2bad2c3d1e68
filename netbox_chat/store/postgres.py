"""Sessions on a PostgreSQL server: the team's store (`--store postgresql://...`).

The same sessions as the folder store (`sessions.py`), for a team: every
session lives in one database, in one schema (`netbox_chat`) that holds
LangGraph's checkpoint tables (written by its `PostgresSaver`, see
`checkpoints/postgres.py`) and our own small tables, keyed by session id. The schema is
created and migrated only by `netbox-chat doctor --init-store`; a store without
it is refused (exit 3), so a typo in a URL never starts an empty store.

One writer per session, across machines: the writer holds a session-level
advisory lock on its one connection, and LangGraph's saver writes through that
same connection. If the connection goes (kill -9, a network cut), the server
drops the lock with it, and no write of that process can land afterwards.

Like `sessions.py`, this module never imports LangChain, and it imports
psycopg (and logging, socket) only when a database URL is used, so `ls` of a
folder stays fast and the extra stays optional.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import unquote

from netbox_chat.errors import UserFacingError, add_driver_errors
from netbox_chat.store.errors import (
    AmbiguousSession,
    NoSuchSession,
    SessionBusy,
    StoreError,
    UnreadableSession,
)
from netbox_chat.store.ids import ID_ALPHABET, ID_LENGTH, new_session_id, normalize_session_id
from netbox_chat.store.ledger import (
    ANSWERED,
    TURN_COLUMNS,
    Ledger,
    SessionStart,
    Turn,
    asked_by,
    stored_server,
    turn_from_row,
)
from netbox_chat.store.summary import SessionSummary, matching_line, summary_fields

if TYPE_CHECKING:
    import psycopg

    from netbox_chat.store.pgdatabase import PgConnection

SCHEMA = "netbox_chat"
PG_SCHEMA_VERSION = 5
INSTALL_HINT = "pip install 'netbox-chat[postgres]'"

# pg_try_advisory_lock(key): one 64-bit key per session, exact. An id is 8
# characters of a 32-letter alphabet, 40 bits; the bits above carry "nbc" in
# ASCII, marking the lock as netbox-chat's. The key is computed by the server
# from the id (one definition, used to lock and to find holders), so `ls` can
# find every holder in the same query that lists the sessions. pg_locks shows
# a bigint key as classid (high 32 bits) and objid (low 32 bits), objsubid 1,
# and lists every database of the server: only ours counts.
LOCK_CLASS = 0x6E6263
LOCK_KEY = (
    f"(CASE WHEN {{sid}} ~ '^[{ID_ALPHABET}]{{{{{ID_LENGTH}}}}}$' THEN "
    f"({LOCK_CLASS}::bigint << {5 * ID_LENGTH}) | (SELECT bit_or("
    f"(strpos('{ID_ALPHABET}', substr({{sid}}, i, 1)) - 1)::bigint << (5 * ({ID_LENGTH} - i))) "
    f"FROM generate_series(1, {ID_LENGTH}) i) END)"
)
_HELD_KEY = "((l.classid::bigint << 32) | l.objid::bigint)"
_OUR_LOCKS = (
    "l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)

# Our tables. LangGraph's (checkpoints, checkpoint_blobs, checkpoint_writes,
# checkpoint_migrations) are created beside them by its own `setup()`.
_SCHEMA_V1 = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA}.store_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.session_meta (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.turns (
    session_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    question TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    base_checkpoint_id TEXT,
    base_message_count INTEGER,
    end_checkpoint_id TEXT,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    tool_calls TEXT NOT NULL DEFAULT '[]',
    rolled_back INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    answer TEXT,
    message_count INTEGER,
    asked_by TEXT,
    PRIMARY KEY (session_id, number)
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.history_edits (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{{}}'
);
CREATE INDEX IF NOT EXISTS history_edits_session_idx ON {SCHEMA}.history_edits (session_id);
"""

# Version 2: what a turn measured of the model (the session file's m003).
_SCHEMA_V2 = f"""
ALTER TABLE {SCHEMA}.turns
    ADD COLUMN IF NOT EXISTS prompt_tokens_max INTEGER,
    ADD COLUMN IF NOT EXISTS prompt_tokens_last INTEGER,
    ADD COLUMN IF NOT EXISTS context_window INTEGER,
    ADD COLUMN IF NOT EXISTS truncated INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS thinking TEXT,
    ADD COLUMN IF NOT EXISTS thinking_seconds DOUBLE PRECISION,
    ADD COLUMN IF NOT EXISTS thinking_chars INTEGER NOT NULL DEFAULT 0
"""

# Version 3: which model, on which kind of server, each turn asked (the
# session file's m005); NULL in a row from before: the session's own model.
_SCHEMA_V3 = f"""
ALTER TABLE {SCHEMA}.turns
    ADD COLUMN IF NOT EXISTS model TEXT,
    ADD COLUMN IF NOT EXISTS provider TEXT
"""

# Version 4: where each turn's model server was and the profile that named it
# (the session file's m006).
_SCHEMA_V4 = f"""
ALTER TABLE {SCHEMA}.turns
    ADD COLUMN IF NOT EXISTS server_scheme TEXT,
    ADD COLUMN IF NOT EXISTS server_host TEXT,
    ADD COLUMN IF NOT EXISTS server_port INTEGER,
    ADD COLUMN IF NOT EXISTS profile TEXT
"""

# Version 5: what the grounding check found in each turn's answer (the
# session file's m007).
_SCHEMA_V5 = f"""
ALTER TABLE {SCHEMA}.turns
    ADD COLUMN IF NOT EXISTS grounding TEXT
"""

# MIGRATIONS[n] takes the schema from version n to n + 1 (0: no schema); its
# statements run one by one (a prepared statement holds only one).
MIGRATIONS = {0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: _SCHEMA_V3, 3: _SCHEMA_V4, 4: _SCHEMA_V5}
assert len(MIGRATIONS) == PG_SCHEMA_VERSION


# libpq takes a password in the URL's user info (user:password@) and as the
# `password` parameter; `sslpassword` unlocks the client key.
_SECRET_PARAMS = ("password", "sslpassword")


def _split_secrets(url: str) -> tuple[str, list[str]]:
    """The URL with every password taken out, and the passwords as written.

    String surgery, not `urlsplit`: the URL may be malformed (that is when it
    is printed in an error), and libpq's own URLs (several hosts) are not
    Python's."""
    base, question, query = url.partition("?")
    secrets = []
    scheme, sep, rest = base.partition("://")
    user, at, hosts = rest.rpartition("@")
    if sep and at and ":" in user:
        user, _, password = user.partition(":")
        secrets.append(password)
        base = f"{scheme}://{user}@{hosts}"
    kept = []
    for item in query.split("&") if question else []:
        key, _, value = item.partition("=")
        if unquote(key).strip().lower() in _SECRET_PARAMS:
            secrets.append(value)
        else:
            kept.append(item)
    return base + ("?" + "&".join(kept) if kept else ""), [s for s in secrets if s]


def shown_url(url: str) -> str:
    """The URL without its password, for messages, `ls` and `config`."""
    return _split_secrets(url)[0]


def has_password(url: str) -> bool:
    return bool(_split_secrets(url)[1])


def masked(text: str, url: str) -> str:
    """`text` (libpq's own words may quote the URL) with the URL's passwords,
    as written and as decoded, shown as `***`."""
    secrets = {form for secret in _split_secrets(url)[1] for form in (secret, unquote(secret))}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def check_url(url: str) -> None:
    """Refuse a store URL that libpq cannot use, with libpq's words (exit 3):
    its parser's, and the port check it would make only when connecting."""
    psycopg = _psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        problem = _first_line(exc)
    else:
        ports = str(params.get("port") or "").split(",")
        bad = [port for port in ports if port and not port.isdigit()]
        if not bad:
            return
        problem = f'invalid integer value "{bad[0]}" for connection option "port"'
    raise StoreError(f"the session store URL {shown_url(url)} is malformed: {masked(problem, url)}")


def application_name(pid: int | None = None) -> str:
    """What the server shows for our connection (or process `pid`'s on this
    machine), and what a second writer is told: `netbox-chat <pid>@<host>`
    (the server keeps 63 bytes)."""
    import socket

    return f"netbox-chat {os.getpid() if pid is None else pid}@{socket.gethostname()}"[:63]


_HOLDER = re.compile(r"netbox-chat (\d+)@(.*)")


def database_errors() -> tuple[type[Exception], ...]:
    """The exception types a session database raises: none until psycopg is
    loaded, which only a database store does (importing it costs a folder
    user's every `ask` 100 ms or more, so nothing else may)."""
    psycopg = sys.modules.get("psycopg")
    return () if psycopg is None else (psycopg.Error,)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            f"a PostgreSQL session store needs the postgres extra: {INSTALL_HINT}"
        ) from None
    import logging

    # psycopg logs a warning when it tears down a pipeline on a lost
    # connection; with no logging set up, Python would print it to stderr
    # beside our own one-line error. The error itself reaches the user.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    logging.getLogger("psycopg").propagate = False
    add_driver_errors(psycopg.Error)
    return psycopg


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


END_BACKEND_WAIT_MS = 10_000  # how long to wait for a lost connection's server process to end


def connect(url: str, *, read_only: bool = False) -> PgConnection:
    """A connection to the store, in autocommit (what LangGraph's saver needs),
    with our schema first on the search path. One-line errors, exit 3."""
    psycopg = _psycopg()
    from netbox_chat.store.pgdatabase import PgConnection

    try:
        conn = PgConnection.connect(
            url,
            autocommit=True,
            prepare_threshold=0,
            connect_timeout=10,
            application_name=application_name(),
            options=f"-c search_path={SCHEMA}",
        )
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot open the session store {shown_url(url)}: {masked(_first_line(exc), url)}"
        ) from None
    if read_only:
        conn.read_only = True
    return conn


def scalar(conn: psycopg.Connection[Any], sql: str, params: Any = ()) -> Any:
    """The first column of the one row `sql` returns (an aggregate, a probe)."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None, sql
    return row[0]


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """Our schema's version in this database (0: none)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.store_meta",)).fetchone()
    if not row or not row[0]:
        return 0
    found = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    return int(found[0]) if found and str(found[0]).isdigit() else 0


def check_schema(conn: psycopg.Connection[Any], url: str) -> None:
    """Refuse a database without our schema, or with a newer one (exit 3)."""
    version = schema_version(conn)
    if version == 0:
        raise StoreError(
            f"the session store {shown_url(url)} has no netbox-chat schema: "
            "create it with `netbox-chat doctor --init-store`"
        )
    if version > PG_SCHEMA_VERSION:
        raise UnreadableSession(
            f"the session store {shown_url(url)} was made by a newer netbox-chat "
            f"(schema {version}, this one knows {PG_SCHEMA_VERSION})"
        )
    if version < PG_SCHEMA_VERSION:
        raise StoreError(
            f"the session store {shown_url(url)} has schema {version}: "
            "migrate it with `netbox-chat doctor --init-store`"
        )


def migrate(conn: PgConnection) -> int:
    """Create or bring our tables up to PG_SCHEMA_VERSION, each step in one
    transaction; returns the version found before."""
    found = schema_version(conn)
    version = found
    while version < PG_SCHEMA_VERSION:
        with conn.atomic():
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            version += 1
            conn.execute(
                "INSERT INTO store_meta(key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(version),),
            )
    return found


# A lock held by no listed process is one being freed: asked for again this often.
LOCK_RETRIES = 20
LOCK_RETRY_S = 0.05

_HOLDER_SQL = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    f"WHERE {_OUR_LOCKS} AND {_HELD_KEY} = " + LOCK_KEY.format(sid="%(sid)s")
)


def _holder(conn: psycopg.Connection[Any], session_id: str) -> str | None:
    row = conn.execute(_HOLDER_SQL, {"sid": session_id}).fetchone()
    return None if row is None else str(row[0] or "")


def _being_freed(holder: str | None) -> bool:
    """The lock's holder is gone: no process is listed for it, or it names a
    netbox-chat of this machine that no longer runs."""
    if holder is None:
        return True
    found = _HOLDER.fullmatch(holder)
    if found is None or application_name(int(found.group(1))) != holder:
        return False  # not a netbox-chat, or another machine's
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # another user's process, or no pid at all
        return False
    return False


class HeldElsewhere(SessionBusy):
    """The session's advisory lock is held by another connection."""

    def __init__(self, session_id: str, holder: str) -> None:
        found = _HOLDER.fullmatch(holder)
        who = f"pid {found.group(1)} on {found.group(2)}" if found else holder or "unknown"
        UserFacingError.__init__(
            self, f"session {session_id} is open in another netbox-chat ({who})"
        )
        self.pid = int(found.group(1)) if found else None
        self.holder = holder


# One query for `ls`: the meta of every session, its ledger's counts, the
# model its newest turn asked, and who holds its lock (pg_locks is read once,
# not once per session).
_SUMMARY_SQL = f"""
WITH holders AS MATERIALIZED (
    SELECT {_HELD_KEY} AS key, a.application_name
    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE {_OUR_LOCKS}
), sessions AS (
    SELECT session_id,
           max(value) FILTER (WHERE key = 'created_at') AS created_at,
           max(value) FILTER (WHERE key = 'title') AS title,
           max(value) FILTER (WHERE key = 'model') AS model,
           max(value) FILTER (WHERE key = 'netbox_url') AS netbox_url,
           max(value) FILTER (WHERE key = 'profile') AS profile
    FROM session_meta WHERE %(sid)s::text IS NULL OR session_id = %(sid)s
    GROUP BY session_id
)
SELECT s.session_id, s.created_at, s.title, s.model, s.netbox_url, s.profile,
       t.turns, t.answered, t.last, t.askers, c.prompt_tokens_last, c.context_window,
       h.application_name, m.model AS latest_model, m.provider, m.server_scheme,
       m.server_host, m.server_port, m.profile AS turn_profile
FROM sessions s
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE status = 'done') AS turns,
           count(*) FILTER (WHERE status IN {ANSWERED}) AS answered,
           max(coalesce(ended_at, started_at)) AS last,
           array_agg(DISTINCT asked_by) FILTER (WHERE asked_by IS NOT NULL) AS askers
    FROM turns WHERE turns.session_id = s.session_id
) t ON true
LEFT JOIN LATERAL (
    SELECT prompt_tokens_last, context_window FROM turns
    WHERE turns.session_id = s.session_id AND status = 'done' ORDER BY number DESC LIMIT 1
) c ON true
LEFT JOIN LATERAL (
    SELECT model, provider, server_scheme, server_host, server_port, profile FROM turns
    WHERE turns.session_id = s.session_id ORDER BY number DESC LIMIT 1
) m ON true
LEFT JOIN holders h ON h.key = {LOCK_KEY.format(sid="s.session_id")}
WHERE s.created_at IS NOT NULL
ORDER BY greatest(t.last, s.created_at) DESC, s.session_id
"""


@dataclass(frozen=True)
class PgSessionSummary(SessionSummary):
    """`ls` for a database session: where it is and who has it open."""

    store: str = ""
    holder: str | None = None

    def as_json(self) -> dict[str, Any]:
        data = super().as_json()
        del data["path"]
        return data


# --- the store ------------------------------------------------------------------------


class PgSessionStore:
    """Every session in one PostgreSQL database. Reading never writes: `ls`,
    `export` and the lock probe use a read-only connection."""

    def __init__(self, url: str) -> None:
        check_url(url)
        self.url = url
        self.root = shown_url(url)  # what messages call the store
        self._reader: psycopg.Connection[Any] | None = None
        # Every session's summary, read once per command: `ls` orders the ids
        # and then shows their summaries, one query on one login.
        self._listed: list[SessionSummary] | None = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[psycopg.Connection[Any]]:
        """The store's read-only connection, opened (and the schema checked)
        once per command: `ls` lists and counts on one login, not two."""
        if self._reader is None or self._reader.closed:
            conn = connect(self.url, read_only=True)
            try:
                check_schema(conn, self.url)
            except BaseException:
                conn.close()
                raise
            self._reader = conn
        yield self._reader

    def close(self) -> None:
        self._listed = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def session_ids(self) -> list[str]:
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT session_id FROM session_meta WHERE key = 'created_at' ORDER BY 1"
            ).fetchall()
        return [row[0] for row in rows]

    def resolve(self, text: str) -> str:
        """A full id or unique prefix → the full id (one-line errors otherwise)."""
        prefix = normalize_session_id(text)
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT session_id FROM session_meta WHERE key = 'created_at' "
                "AND starts_with(session_id, %s) ORDER BY 1",
                (prefix,),
            ).fetchall()
        matches = [row[0] for row in rows]
        if not matches:
            raise NoSuchSession(f"no session {prefix!r} in {self.root} (see `netbox-chat ls`)")
        if prefix in matches:
            return prefix
        if len(matches) > 1:
            raise AmbiguousSession(prefix, matches)
        return str(matches[0])

    def most_recent(self) -> str:
        summaries = self.list_sessions(1)
        if not summaries:
            raise NoSuchSession(f"no sessions to resume in {self.root}")
        return summaries[0].id

    def list_sessions(
        self, limit: int | None = None, ids: list[str] | None = None
    ) -> list[SessionSummary]:
        """Summaries of the first `limit` of `ids` (by default the most
        recently active sessions, from one query)."""
        if ids is None:
            return self._summaries(None, limit) if self._listed is None else self._listed[:limit]
        found = {s.id: s for s in self._every_summary()}
        return [found[sid] for sid in ids if sid in found][:limit]

    def _every_summary(self) -> list[SessionSummary]:
        if self._listed is None:
            self._listed = self._summaries(None, None)
        return self._listed

    def ids_by_recency(self) -> list[str]:
        return [s.id for s in self._every_summary()]

    def unanswered(self) -> list[str]:
        """Sessions no turn ever finished in and no process has open."""
        return [s.id for s in self._every_summary() if s.unanswered and not s.is_open]

    def search(self, text: str) -> dict[str, str]:
        """Sessions whose questions or answers contain `text` (case-insensitive
        for ASCII letters, as a session file's LIKE), newest first, each with
        the matching line of its latest matching turn."""
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"
        with self.reading() as conn:
            rows = conn.execute(
                "SELECT DISTINCT ON (session_id) session_id, question, answer FROM turns "
                "WHERE question ILIKE %(p)s OR answer ILIKE %(p)s "
                "ORDER BY session_id, number DESC",
                {"p": pattern},
            ).fetchall()
        matching = {row[0]: matching_line(row[1:], text) for row in rows}
        return {sid: matching[sid] for sid in self.ids_by_recency() if sid in matching}

    def summarize(self, session_id: str) -> SessionSummary:
        found = self._summaries(session_id, None)
        if not found:
            raise NoSuchSession(f"no session {session_id!r} in {self.root}")
        return found[0]

    def _summaries(self, session_id: str | None, limit: int | None) -> list[SessionSummary]:
        with self.reading() as conn:
            rows = conn.execute(
                _SUMMARY_SQL + (" LIMIT %(limit)s" if limit is not None else ""),
                {"sid": session_id, "limit": limit},
            ).fetchall()
        return [self._summary(row) for row in rows]

    def _summary(self, row: tuple[Any, ...]) -> SessionSummary:
        sid, created, title, model, netbox_url, profile = row[:6]
        turns, answered, last, askers, context_tokens, context_window = row[6:12]
        holder, latest_model = row[12:14]
        found = _HOLDER.fullmatch(holder or "")
        meta = {"created_at": created, "title": title, "model": model}
        return PgSessionSummary(
            sid,
            Path(),
            0,
            open_by=int(found.group(1)) if found else None,
            is_open=holder is not None,
            store=self.root,
            holder=holder,
            **summary_fields(
                {**meta, "netbox_url": netbox_url, "profile": profile},
                (turns, answered, last, context_tokens, context_window),
                askers,
                latest_model,
                stored_server(*row[14:19]),
            ),
        )

    def ledger(
        self, session_id: str
    ) -> tuple[dict[str, str], list[Turn], list[tuple[str, str, str]]]:
        """Meta, turns and history edits of one session, read-only (for export)."""
        with self.reading() as conn:
            meta = dict(
                conn.execute(
                    "SELECT key, value FROM session_meta WHERE session_id = %s", (session_id,)
                ).fetchall()
            )
            if not meta:
                raise NoSuchSession(f"no session {session_id!r} in {self.root}")
            rows = conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = %s ORDER BY number",
                (session_id,),
            ).fetchall()
            edits = conn.execute(
                "SELECT kind, at, detail FROM history_edits WHERE session_id = %s ORDER BY id",
                (session_id,),
            ).fetchall()
        meta["schema_version"] = str(PG_SCHEMA_VERSION)
        turns = [turn_from_row(tuple(row)) for row in rows]
        return meta, turns, [(kind, at, detail) for kind, at, detail in edits]

    # A process with a session open holds one connection, the writer's: the
    # read-only one that found the session is closed first.

    def open(self, session_id: str) -> PgSession:
        self.close()
        return PgSession.open(self, session_id)

    def create(self, **start: Unpack[SessionStart]) -> PgSession:
        self.close()
        return PgSession.create(self, **start)

    def forget(self, session_id: str) -> None:
        """Delete every row of the session, in one transaction, only if nobody
        has it open (the lock is taken for the duration)."""
        with self.open(session_id) as session:
            self.delete_rows(session)

    @staticmethod
    def delete_rows(session: PgSession) -> None:
        """Every row of an open session, in one transaction."""
        with session.db.atomic():
            for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
                session.db.execute(f"DELETE FROM {table} WHERE thread_id = %s", (session.id,))
            for table in ("history_edits", "turns", "session_meta"):
                session.db.execute(f"DELETE FROM {table} WHERE session_id = %s", (session.id,))


# --- an open session (held for writing) --------------------------------------------------


class PgSession(Ledger):
    """A session opened for writing: the advisory lock and the ledger on one
    connection, the same connection LangGraph's saver writes through."""

    KEYED = True
    PYFORMAT = True

    def __init__(self, store: PgSessionStore, session_id: str) -> None:
        self.store = store
        self.id = session_id
        self.conn: PgConnection | None = None
        self.backend_pid: int | None = None  # the server process of `conn`
        self.asked_by = ""  # the server's word for it, once connected (`_connect`)

    @classmethod
    def create(cls, store: PgSessionStore, **start: Unpack[SessionStart]) -> PgSession:
        """A new session, remembering what it was started with (`SessionStart`)."""
        session = cls(store, start.get("session_id") or new_session_id())
        session._connect()
        try:
            session._lock()
            if session._exists():
                raise UserFacingError(f"session {session.id} is already in {store.root}")
            session._record_start(start)
        except BaseException:
            session.close()
            raise
        return session

    @classmethod
    def open(cls, store: PgSessionStore, session_id: str) -> PgSession:
        session = cls(store, session_id)
        session._connect()
        try:
            # Locked first: a forget that ran between a check and the lock
            # would leave this process writing turns under a deleted id.
            session._lock()
            if not session._exists():
                raise NoSuchSession(f"no session {session_id!r} in {store.root}")
        except BaseException:
            session.close()
            raise
        return session

    def _exists(self) -> bool:
        return bool(
            self.db.execute(
                "SELECT 1 FROM session_meta WHERE session_id = %s AND key = 'created_at'",
                (self.id,),
            ).fetchone()
        )

    def _connect(self) -> None:
        self.conn = connect(self.store.url)
        self.backend_pid = self.conn.info.backend_pid
        try:
            check_schema(self.conn, self.store.url)
            # Who asks, as the server knows it: the role this connection
            # logged in as (no SET ROLE changes it), then the OS user and
            # host, which are only what the environment claims ($LOGNAME).
            self.asked_by = f"{scalar(self.conn, 'SELECT session_user')} ({asked_by()})"
        except BaseException:
            self.close()
            raise

    def _lock(self) -> None:
        """Take the session's lock, or say who holds it. A netbox-chat that
        ended without closing (killed, or its terminal gone) leaves its lock
        to the server, which frees it only once it notices: a lock held by no
        listed process, or by one of this machine's that no longer runs, is
        asked for again, for at most a second, before it is refused."""
        locked = "SELECT pg_try_advisory_lock(" + LOCK_KEY.format(sid="%(sid)s") + ")"
        for attempt in range(LOCK_RETRIES + 1):
            if scalar(self.db, locked, {"sid": self.id}):
                return
            holder = _holder(self.db, self.id)
            if attempt == LOCK_RETRIES or not _being_freed(holder):
                raise HeldElsewhere(self.id, holder or "")
            time.sleep(LOCK_RETRY_S)

    def recorded_status(self, number: int) -> str | None:
        """What the database holds for turn `number` after a write of it failed
        (issue 21, item 5), or None when that cannot be known now.

        On a live connection the failed transaction was rolled back, and the
        connection says what is there. On a lost one the answer to COMMIT may
        be what was lost: the server may have committed, or may still be
        finishing. So the old server process is ended first (by its pid and
        our application_name, so no one else's; `pg_terminate_backend` waits
        for it: a transaction it had not committed is rolled back, one it had
        stays), and the turn is read on a new connection."""
        psycopg = _psycopg()
        conn = self.conn
        if conn is not None and not conn.broken and not conn.closed:
            try:
                return super().recorded_status(number)
            except psycopg.Error:
                pass
        try:
            with contextlib.closing(connect(self.store.url)) as fresh:
                ended = fresh.execute(
                    "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
                    "WHERE pid = %s AND application_name = %s",
                    (END_BACKEND_WAIT_MS, self.backend_pid, application_name()),
                ).fetchone()
                if ended is not None and not ended[0]:
                    return None  # still there: its transaction may yet commit
                row = fresh.execute(
                    "SELECT status FROM turns WHERE session_id = %s AND number = %s",
                    (self.id, number),
                ).fetchone()
        except (psycopg.Error, StoreError):
            return None
        return str(row[0]) if row else None

    def discard_if_unanswered(self) -> bool:
        """Delete this session if none of its turns ever finished (a session
        whose only question failed or was cancelled never happened), still
        holding the lock. True if deleted."""
        answered = scalar(
            self.db,
            f"SELECT count(*) FROM turns WHERE session_id = %s AND status IN {ANSWERED}",
            (self.id,),
        )
        if answered:
            return False
        self.store.delete_rows(self)
        self.close()
        return True

    def close(self) -> None:
        """Release the advisory lock, then close the connection.

        The server frees a closed connection's locks only once its process
        notices the client has gone, which under load is after the next
        netbox-chat asked for the lock (`forget` then `resume`, an exit then
        `-c`): that open was refused as held by "unknown". Unlocking first
        frees the session before close returns; a broken connection's lock
        is freed by the server as before."""
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.execute("SELECT pg_advisory_unlock_all()")
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None

    @property
    def db(self) -> PgConnection:
        if self.conn is None:
            raise StoreError(f"session {self.id} is closed")
        return self.conn

    def meta(self) -> dict[str, str]:
        # The database's schema version is the store's, not a row of the session.
        return {**super().meta(), "schema_version": str(PG_SCHEMA_VERSION)}
