"""Session files: paths, the one-writer lock, listing, forgetting, and opening
a session file for writing (ids are `ids.py`'s, the ledger's SQL `ledger.py`'s).

Every session is one SQLite file, `<id>.sqlite`, shared with LangGraph's
checkpoint tables. This module never imports LangChain, so `ls` and
`forget` start as fast as Python does.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

from netbox_chat.config import (
    SESSIONS_MARK,
    ModelServer,
)
from netbox_chat.owned import NotOwned, check_folder, check_parents, make_folder
from netbox_chat.store import migrations
from netbox_chat.store.database import Connection, read_only_connection
from netbox_chat.store.errors import (
    AmbiguousSession,
    NoSuchSession,
    StoreError,
    UnreadableSession,
)
from netbox_chat.store.ids import (
    is_session_id,
    new_session_id,
    normalize_session_id,
)
from netbox_chat.store.ledger import (
    ANSWERED,
    TURN_FIELDS,
    Ledger,
    SessionStart,
    Turn,
    asked_by,
    stored_server,
    turn_from_row,
)
from netbox_chat.store.locks import SessionLock, lock_holder
from netbox_chat.store.lsindex import (
    FORGET_WAIT,
    LOCK_WAIT,
    IndexBusy,
    Row,
    SummaryIndex,
    file_key,
    locked,
    plain_row,
)
from netbox_chat.store.migrations import schema_version
from netbox_chat.store.summary import SessionSummary, matching_line, summary_fields

SUFFIX = ".sqlite"
COMPANIONS = ("-wal", "-shm")
_FORGETTING_PREFIX = ".forgetting-"


# --- the session's own tables -------------------------------------------------

SCHEMA_VERSION = schema_version()


def _read_schema_version(conn: sqlite3.Connection) -> int:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "session_meta" not in tables:
        if tables - {"checkpoints", "writes"}:
            raise UnreadableSession("not a netbox-chat session (unknown tables)")
        return 0
    row = conn.execute("SELECT value FROM session_meta WHERE key = 'schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit():
        raise UnreadableSession("damaged session: no schema version")
    return int(row[0])


def check_schema(conn: sqlite3.Connection) -> int:
    """Return the file's schema version; refuse files we must not touch."""
    try:
        version = _read_schema_version(conn)
    except sqlite3.DatabaseError as exc:
        raise UnreadableSession(f"not a readable SQLite file ({exc})") from exc
    if version > SCHEMA_VERSION:
        raise UnreadableSession(
            f"made by a newer netbox-chat (schema {version}, this one knows {SCHEMA_VERSION})"
        )
    return version


def check_session(conn: sqlite3.Connection) -> int:
    """`check_schema` for a file that must already be a session: `create()`
    writes our tables before anyone can see the file, so a file without them
    was not made by us."""
    version = check_schema(conn)
    if version == 0:
        raise UnreadableSession("not a netbox-chat session (no session tables)")
    return version


def migrate(conn: Connection) -> None:
    """Bring our tables up to SCHEMA_VERSION, one recorded step at a time."""
    migrations.migrate(conn, check_schema(conn))


# --- records --------------------------------------------------------------------


def turn_columns(conn: sqlite3.Connection) -> set[str]:
    """The ledger's columns in this file: fewer in a file of an older schema."""
    return {row[1] for row in conn.execute("PRAGMA table_info(turns)")}


def read_turns(conn: sqlite3.Connection, where: str = "", params: Sequence[Any] = ()) -> list[Turn]:
    """Ledger rows as `Turn`s (`where` is the rest of the query), whatever the
    file's schema: a column an older schema lacks reads as NULL, so `export`
    works on a file no current netbox-chat has opened for writing yet."""
    present = turn_columns(conn)
    columns = ", ".join(name if name in present else f"NULL AS {name}" for name in TURN_FIELDS)
    rows = conn.execute(f"SELECT {columns} FROM turns {where}", params).fetchall()
    return [turn_from_row(row) for row in rows]


def _askers(conn: sqlite3.Connection, present: set[str]) -> tuple[str, ...]:
    """Everyone who asked a turn of the file (none before the ledger kept it)."""
    if "asked_by" not in present:
        return ()
    rows = conn.execute(
        "SELECT DISTINCT asked_by FROM turns WHERE asked_by IS NOT NULL ORDER BY 1"
    ).fetchall()
    return tuple(row[0] for row in rows)


def _latest_server(conn: sqlite3.Connection, present: set[str]) -> ModelServer | None:
    """The model server the file's newest turn asked (None before m006)."""
    if "server_host" not in present:
        return None
    row = conn.execute(
        "SELECT provider, server_scheme, server_host, server_port, profile "
        "FROM turns ORDER BY number DESC LIMIT 1"
    ).fetchone()
    return stored_server(*row) if row else None


def _latest_model(conn: sqlite3.Connection, present: set[str]) -> object:
    """The model the file's newest turn asked, as stored (None before m005)."""
    if "model" not in present:
        return None
    row = conn.execute("SELECT model FROM turns ORDER BY number DESC LIMIT 1").fetchone()
    return row[0] if row else None


def epoch(stamp: str) -> float | None:
    """An ISO time from a session (its ledger or meta) as seconds since the
    epoch, UTC if it names no zone; None when it cannot be read (a session
    file is not trusted)."""
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (then if then.tzinfo else then.replace(tzinfo=UTC)).timestamp()


# What `ls` reads of a file of this schema, in one query: each query on a
# new connection costs as much as the file's opening (bench 1), and `ls
# --json` reads every file. A file of another schema (older, newer, damaged)
# fails the query or names another version, and is read step by step.
_SUMMARY_SQL = f"""
SELECT m.meta, a.done, a.answered, a.last, c.prompt_tokens_last, c.context_window,
       k.askers, l.model, l.provider, l.server_scheme, l.server_host, l.server_port, l.profile
FROM (SELECT json_group_object(key, value) AS meta FROM session_meta
      WHERE key NOT LIKE '{migrations.RECORD_PREFIX}%') AS m
CROSS JOIN (
    SELECT count(*) FILTER (WHERE status = 'done') AS done,
           count(*) FILTER (WHERE status IN {ANSWERED}) AS answered,
           max(coalesce(ended_at, started_at)) AS last
    FROM turns) AS a
LEFT JOIN (SELECT prompt_tokens_last, context_window FROM turns
           WHERE status = 'done' ORDER BY number DESC LIMIT 1) AS c ON 1
CROSS JOIN (SELECT json_group_array(asked_by) AS askers
            FROM (SELECT DISTINCT asked_by FROM turns WHERE asked_by IS NOT NULL)) AS k
LEFT JOIN (SELECT model, provider, server_scheme, server_host, server_port, profile
           FROM turns ORDER BY number DESC LIMIT 1) AS l ON 1
"""


def _fast_row(conn: sqlite3.Connection) -> Row | None:
    """`_SUMMARY_SQL`'s row of a file of this schema, its JSON decoded (what
    the summary index keeps), or None for a file to read step by step."""
    with contextlib.suppress(sqlite3.DatabaseError, json.JSONDecodeError):
        row = conn.execute(_SUMMARY_SQL).fetchone()
        return [json.loads(row[0]), *row[1:6], json.loads(row[6]), *row[7:]]
    return None


def _row_fields(row: Row) -> dict[str, Any] | None:
    """The summary's fields from `_fast_row`'s row, read from the file or
    from the summary index, or None when it is not the row of a session of
    this schema (an index entry is checked as strictly as the file's row)."""
    meta, done, answered, askers = row[0], row[1], row[2], row[6]
    if not isinstance(meta, dict) or meta.get("schema_version") != str(SCHEMA_VERSION):
        return None
    if not isinstance(askers, list) or not all(type(n) is int and n >= 0 for n in (done, answered)):
        return None
    return summary_fields(meta, row[1:6], askers, row[7], stored_server(*row[8:13]))


_ROW_WIDTH = 13


def _summary_fields(conn: sqlite3.Connection) -> tuple[dict[str, Any], Row | None]:
    """The `SessionSummary` fields a session file's own tables give, and the
    row they came from when the index may keep it (raises `UnreadableSession`
    or `sqlite3.DatabaseError` for a file to refuse).

    A file of this schema is read with one query; any other file (an older
    release's, a newer one's, a damaged or foreign one) takes the step by
    step path, which checks it as every open does."""
    row = _fast_row(conn)
    if row is not None and (fields := _row_fields(row)) is not None:
        return fields, row
    check_session(conn)
    meta = dict(conn.execute("SELECT key, value FROM session_meta").fetchall())
    counts = conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'done'), "
        f"count(*) FILTER (WHERE status IN {ANSWERED}), "
        "max(coalesce(ended_at, started_at)) FROM turns"
    ).fetchone()
    present = turn_columns(conn)
    context = (
        conn.execute(
            "SELECT prompt_tokens_last, context_window FROM turns "
            "WHERE status = 'done' ORDER BY number DESC LIMIT 1"
        ).fetchone()
        if "prompt_tokens_last" in present  # m003's
        else None
    ) or (None, None)
    fields = summary_fields(
        meta,
        (*counts, *context),
        _askers(conn, present),
        _latest_model(conn, present),
        _latest_server(conn, present),
    )
    return fields, None


def _stats(path: Path, scanned: list[os.DirEntry[str]] | None) -> dict[str, os.stat_result]:
    """The stats of a session file and of its companions that exist, by
    suffix ("" for the file): from a folder scan's entries when given (its
    `-shm` only beside a `-wal`: SQLite makes and removes them together)."""
    if scanned is None:
        found = {}
        for companion in ("", *COMPANIONS):
            with contextlib.suppress(FileNotFoundError):
                found[companion] = os.stat(f"{path}{companion}")
        return found
    found = {}
    with contextlib.suppress(FileNotFoundError):
        found[""] = scanned[0].stat()
        if len(scanned) > 1:
            found["-wal"] = scanned[1].stat()
            found["-shm"] = os.stat(f"{path}-shm")
    return found


# --- the store (a folder of sessions) ----------------------------------------------


class SessionStore:
    """The sessions folder. Creating it is the only write it does on its own."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, session_id: str) -> Path:
        return self.root / f"{session_id}{SUFFIX}"

    def ensure_root(self) -> None:
        """Create the folder (0700) or explain in one line why not.

        It holds conversations about the network: a folder another user owns
        or can write is refused (`owned.check_folder`), one others can read
        is made 0700, and failing to make it so is an error. It is marked
        (`SESSIONS_MARK`), which chooses nothing: `ls` names such a folder
        when it is not the store in use, so that no session is lost."""
        try:
            check_parents(self.root, "sessions folder")
            make_folder(self.root, "sessions folder")
        except NotOwned as exc:
            raise StoreError(str(exc)) from None
        refuse_network_filesystem(self.root)
        if not os.access(self.root, os.W_OK | os.X_OK):
            # os.access only says no; name the reason the way the OS would.
            read_only = os.statvfs(self.root).f_flag & os.ST_RDONLY
            reason = os.strerror(errno.EROFS if read_only else errno.EACCES)
            raise StoreError(f"sessions folder {self.root} is not writable: {reason}")
        mark = self.root / SESSIONS_MARK
        if not mark.exists():
            with contextlib.suppress(OSError):
                fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write("This folder holds netbox-chat's sessions.\n")

    def _scan(self) -> dict[str, list[os.DirEntry[str]]]:
        """Session id → the directory entries of its file and of its `-wal`
        (when there is one), from one pass over the folder. A stray `-wal`
        without its main file is not a session. A folder another user owns
        or can write is refused before anything in it is read: its sessions
        could have been planted."""
        if not self.root.is_dir():
            return {}
        try:
            check_parents(self.root, "sessions folder")
            check_folder(self.root, "sessions folder", tighten=False)  # reading writes nothing
        except NotOwned as exc:
            raise StoreError(str(exc)) from None
        files: dict[str, os.DirEntry[str]] = {}
        wals: dict[str, os.DirEntry[str]] = {}
        with os.scandir(self.root) as entries:
            for entry in entries:
                stem, dot, ext = entry.name.partition(".")
                if not dot or not is_session_id(stem):
                    continue
                if "." + ext == SUFFIX:
                    files[stem] = entry
                elif "." + ext == SUFFIX + "-wal":
                    wals[stem] = entry
        return {sid: [entry] + ([wals[sid]] if sid in wals else []) for sid, entry in files.items()}

    def session_ids(self) -> list[str]:
        return sorted(self._scan())

    def resolve(self, text: str) -> str:
        """A full id or unique prefix → the full id (one-line errors otherwise)."""
        prefix = normalize_session_id(text)
        matches = [sid for sid in self.session_ids() if sid.startswith(prefix)]
        if not matches:
            raise NoSuchSession(f"no session {prefix!r} in {self.root} (see `netbox-chat ls`)")
        if len(matches) > 1 and prefix not in matches:
            raise AmbiguousSession(prefix, matches)
        return prefix if prefix in matches else matches[0]

    def ids_by_recency(self) -> list[str]:
        """Newest first by the time a file (or its -wal) was last written.

        One stat per file on the entries of a single folder scan, so `ls` and
        `resume` can order a big store without opening every session (and
        without building a Path per file, which at a thousand sessions costs
        more than the stats)."""
        return list(self._by_recency(self._scan()))

    @staticmethod
    def _by_recency(
        scanned: dict[str, list[os.DirEntry[str]]],
    ) -> dict[str, list[os.DirEntry[str]]]:
        def last_written(entries: list[os.DirEntry[str]]) -> float:
            times = []
            for entry in entries:
                with contextlib.suppress(OSError):
                    times.append(entry.stat().st_mtime)
            return max(times, default=0.0)

        order = sorted(sorted(scanned), key=lambda sid: last_written(scanned[sid]), reverse=True)
        return {sid: scanned[sid] for sid in order}

    def open(self, session_id: str) -> SessionFile:
        return SessionFile.open(self, session_id)

    def create(self, **start: Unpack[SessionStart]) -> SessionFile:
        return SessionFile.create(self, **start)

    def most_recent(self) -> str:
        for session_id in self.ids_by_recency():
            if self.summarize(session_id).unreadable is None:
                return session_id
        raise NoSuchSession(f"no sessions to resume in {self.root}")

    def list_sessions(
        self, limit: int | None = None, ids: list[str] | None = None
    ) -> list[SessionSummary]:
        """Summaries of the first `limit` of `ids` (by default every session,
        most recently written first). Every session (`ls --json`, `--all`)
        is read through the folder's summary index (`lsindex.py`), which
        spares opening the files unchanged since it was written, and is then
        brought up to date; a few (the newest, for `ls`) are cheaper to open."""
        if limit is not None:
            chosen = (self.ids_by_recency() if ids is None else ids)[:limit]
            return [self.summarize(sid) for sid in chosen]
        began = time.time()  # before any stat: what the index's entries are as old as
        scanned = self._scan()
        index = SummaryIndex(self.root, SCHEMA_VERSION, began, suffix=SUFFIX)
        summaries = [
            self.summarize(sid, index, scanned.get(sid))
            for sid in (self._by_recency(scanned) if ids is None else ids)
        ]
        index.save(scanned)
        return summaries

    def summarize(
        self,
        session_id: str,
        index: SummaryIndex | None = None,
        scanned: list[os.DirEntry[str]] | None = None,
    ) -> SessionSummary:
        """Read one session's summary, from `index` when it holds the file
        as it is now and nobody writes it (no `-wal`), else from the file
        (whose row `index` then keeps). `scanned`: the file's and its
        `-wal`'s entries from a scan of the folder, whose stats are cached.
        Never writes to the session."""
        path = self.path_for(session_id)
        size, key, written = 0, None, False
        found = _stats(path, scanned)
        for companion, info in found.items():
            size += info.st_size
            key = file_key(info) if not companion else key
            written = written or companion == "-wal"
        held = lock_holder(path)
        live: dict[str, Any] = {"id": session_id, "path": path, "size_bytes": size}
        live.update(is_open=held is not None, open_by=held or None)
        cached = index if key is not None and not written else None
        if cached is not None and key is not None:
            row = plain_row(cached.get(session_id, key), _ROW_WIDTH)
            if row is not None and (fields := _row_fields(row)) is not None:
                return SessionSummary(**live, **fields)
        try:
            with read_only_connection(path) as conn:
                fields, row = _summary_fields(conn)
        except (UnreadableSession, sqlite3.DatabaseError) as exc:
            reason = str(exc) if isinstance(exc, UnreadableSession) else f"damaged ({exc})"
            return SessionSummary(**live, unreadable=reason)
        if cached is not None and key is not None and row is not None:
            cached.put(session_id, key, row)
        return SessionSummary(**live, **fields)

    def forget(self, session_id: str) -> None:
        """Delete a session for good, only if nobody has it open.

        The main file is first renamed out of the listing (atomic), so a crash
        half-way leaves no half-deleted session, only a hidden leftover that
        the next forget sweeps away.
        """
        lock = SessionLock(self.path_for(session_id), session_id)
        lock.acquire()
        try:
            with self._index_held(session_id):
                self._remove_files(session_id)
        finally:
            lock.release()
        self.sweep_leftovers()

    @contextlib.contextmanager
    def _index_held(self, session_id: str) -> Iterator[None]:
        """The summary index's lock around a session's deletion, its entry
        dropped with the file: `forget` leaves nothing of it, not even its
        title (the question) in `.ls-index.json`. Another process that holds
        the lock past `FORGET_WAIT` gets nothing deleted, and the user is
        told to try again; an index that can be neither rewritten nor deleted
        is named, with how to clear it."""
        index = SummaryIndex(self.root, SCHEMA_VERSION, suffix=SUFFIX)
        try:
            with locked(self.root, FORGET_WAIT):
                yield
                try:
                    index.drop(session_id)
                except OSError as exc:
                    raise StoreError(
                        f"session {session_id} is deleted, but the sessions folder's index "
                        f"{index.path} still holds its title and cannot be rewritten "
                        f"({exc.strerror}): delete it (rm {index.path}; it is only a cache)"
                    ) from None
        except IndexBusy:
            raise StoreError(
                f"nothing forgotten: another netbox-chat process (an `ls` over a big folder?) "
                f"held the sessions folder's index for {FORGET_WAIT:g}s; try again"
            ) from None

    def _remove_files(self, session_id: str) -> None:
        """Delete a session's file and companions; the caller holds its lock."""
        path = self.path_for(session_id)
        tomb = self.root / f"{_FORGETTING_PREFIX}{session_id}{SUFFIX}"
        try:
            os.rename(path, tomb)
            for companion in COMPANIONS:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{companion}")
            os.unlink(tomb)
        except OSError as exc:
            raise StoreError(f"cannot delete session {session_id}: {exc.strerror}") from exc

    def unanswered(self) -> list[str]:
        """Sessions no turn ever finished in and no process has open: what a
        crash during a new session's first turn leaves behind."""
        return [
            s.id
            for s in map(self.summarize, self.session_ids())
            if s.unanswered and not s.is_open and s.unreadable is None
        ]

    def search(self, text: str) -> dict[str, str]:
        """Sessions whose questions or answers contain `text` (case-insensitive
        for ASCII letters, SQLite's LIKE), newest first, each with the line of
        its latest matching turn that matches, from the ledger only,
        read-only. A LIKE scan of every ledger: 1,000 sessions take a fraction
        of a second (bench 7), so there is no full-text index to keep."""
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"
        found = {}
        for session_id in self.ids_by_recency():
            with (
                contextlib.suppress(sqlite3.DatabaseError, UnreadableSession),
                read_only_connection(self.path_for(session_id)) as conn,
            ):
                row = (
                    check_schema(conn)
                    and conn.execute(
                        "SELECT question, answer FROM turns WHERE question LIKE ?1 ESCAPE '\\' "
                        "OR answer LIKE ?1 ESCAPE '\\' ORDER BY number DESC LIMIT 1",
                        (pattern,),
                    ).fetchone()
                )
                if row:
                    found[session_id] = matching_line(row, text)
        return found

    def sweep_leftovers(self) -> None:
        for entry in os.scandir(self.root):
            if entry.name.startswith(_FORGETTING_PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


# --- where sessions may live ---------------------------------------------------------

# File systems SQLite's WAL mode does not work on: its shared-memory index and
# its locks need every process on one host, and network locks are unreliable
# (sqlite.org/wal.html, "WAL does not work over a network filesystem").
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "ceph", "glusterfs", "lustre"}
)
MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(path: Path) -> str | None:
    """The type of the file system `path` is on, from the kernel's mount table
    (None where there is none to read, e.g. not Linux)."""
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    best, kind = "", None
    for line in lines:
        mount_fields, _, rest = line.partition(" - ")
        parts = mount_fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, rest.split()[0]
    return kind


def refuse_network_filesystem(folder: Path) -> None:
    kind = filesystem_type(folder)
    if kind is not None and (kind in NETWORK_FILESYSTEMS or kind.startswith("fuse.sshfs")):
        raise StoreError(
            f"sessions folder {folder} is on a network file system ({kind}), where SQLite "
            "cannot keep a session safe: point NETBOX_CHAT_SESSIONS at a local disk"
        )


# --- an open session (held for writing) ------------------------------------------------


def connect(path: Path) -> Connection:
    """A connection to a session file that this process holds the lock on.

    `mode=rw`: it never creates the file, so a connection opened late (the
    agent build on its thread) cannot bring back a session just discarded."""
    uri = f"{path.resolve().as_uri()}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10.0, factory=Connection)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


class SessionFile(Ledger):
    """A session opened for writing: the lock, and the one connection.

    LangGraph's saver writes through the same connection (`runtime.py` builds
    it on `db`), so a rollback or a history edit and its ledger rows commit
    together in one `db.atomic()`.
    """

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.id = session_id
        self.path = store.path_for(session_id)
        self.lock = SessionLock(self.path, session_id)
        self.conn: Connection | None = None
        self.asked_by = asked_by()

    @classmethod
    def create(cls, store: SessionStore, **start: Unpack[SessionStart]) -> SessionFile:
        """A new session, remembering what it was started with (`SessionStart`)."""
        store.ensure_root()
        session = cls(store, start.get("session_id") or new_session_id())
        session.lock.acquire(create=True)
        try:
            session._connect()
            session._record_start(start)
        except BaseException:
            session.close()
            with contextlib.suppress(OSError):
                os.unlink(session.path)
            raise
        return session

    @classmethod
    def open(cls, store: SessionStore, session_id: str) -> SessionFile:
        session = cls(store, session_id)
        session._refuse_unreadable()
        refuse_network_filesystem(store.root)
        session.lock.acquire()
        try:
            session._connect()
        except BaseException:
            session.close()
            raise
        return session

    def _refuse_unreadable(self) -> None:
        if not self.path.exists():
            raise NoSuchSession(f"no session {self.id!r} in {self.store.root}")
        try:
            with read_only_connection(self.path) as conn:
                check_session(conn)
        except sqlite3.DatabaseError as exc:
            raise UnreadableSession(f"session {self.id} is unreadable: {exc}") from exc
        except UnreadableSession as exc:
            raise UnreadableSession(f"session {self.id} is unreadable: {exc}") from exc

    def _connect(self) -> None:
        try:
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                os.chmod(self.path, 0o600)
            self.conn = connect(self.path)
            self.conn.execute("PRAGMA journal_mode = WAL")
            migrate(self.conn)
            self._set_meta(holder_pid=str(os.getpid()))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot write session {self.id}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot open session {self.id}: {exc.strerror}") from exc

    def discard_if_unanswered(self) -> bool:
        """Delete this session if none of its turns ever finished: a session
        whose only question failed or was cancelled never happened. Still
        holding the lock, so nobody can open it in between. True if deleted."""
        (answered,) = self.db.execute(
            f"SELECT count(*) FROM turns WHERE status IN {ANSWERED}"
        ).fetchone()
        if answered:
            return False
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
        self.conn = None
        try:
            self.store._remove_files(self.id)
        finally:
            self.lock.release()
        # An entry is rare here (a question failing for 2 s before an `ls --json`).
        with contextlib.suppress(OSError), locked(self.store.root, LOCK_WAIT):
            SummaryIndex(self.store.root, SCHEMA_VERSION, suffix=SUFFIX).drop(self.id)
        return True

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
            self.conn = None
        self.lock.release()

    @property
    def db(self) -> Connection:
        if self.conn is None:
            raise StoreError(f"session {self.id} is closed")
        return self.conn

    def _has_edits(self) -> bool:
        return migrations.has_table(self.db, "history_edits")

    def _make_edits_table(self) -> None:
        migrations.create_history_edits(self.db)
