"""The sessions folder's summary index: what `ls` last read of each unchanged
session file, so that listing every session need not open every file.

A cache, never the source of truth: deleting it changes nothing but speed.
An entry is used only while its session file has the inode, size, mtime and
ctime it was read at and has no `-wal` (no writer, no crash left behind);
otherwise the file is read again. An entry is kept only for a file last
changed at least `RACY_SECONDS` before it was read: a later write within the
same timestamp tick could leave the same size and times (git's "racy clean"
problem, https://git-scm.com/docs/racy-git), and timestamps are as coarse as
the kernel's tick or the file system's (two seconds on FAT).

The index is untrusted input like a session file: it is read only if it is a
regular file of the user's, not a link (`O_NOFOLLOW`, one hard link), that
nobody else may read or write (0600), for this folder and this schema, and
every entry is checked (`plain_row`) before the store reads it as a session
file's row; anything else is ignored and rebuilt. It is written whole, 0600,
as a new file renamed into place (`owned.replace_file`), merged under a
`flock` on the folder with what another process wrote meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from netbox_chat.owned import NotOwned, replace_file
from netbox_chat.store.ids import is_session_id

INDEX_NAME = ".ls-index.json"
FORMAT = 1
RACY_SECONDS = 2.0
MAX_BYTES = 64 << 20  # ~130,000 sessions' entries; a bigger file is not ours
LOCK_WAIT = 0.5  # seconds a writer waits for another to finish before giving up
FORGET_WAIT = 10.0
"""Seconds `forget` waits for the index lock (another process's `ls --json`
over a big folder) before it gives up and deletes nothing: a session's file
and its entry go together, or neither goes."""


class IndexBusy(OSError):
    """Another process held the index lock past the wait."""


Key = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns of the session file
Row = list[Any]


def file_key(info: os.stat_result) -> Key:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _scalar(value: object) -> bool:
    """A value SQLite can hand back that JSON keeps as it was (no BLOB, no
    infinity, no bool, which SQLite never gives)."""
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def plain_row(row: object, width: int) -> Row | None:
    """`row` if it is a list of `width` values, each a scalar (`_scalar`), or
    a dict or list of scalars with text keys: what a session file's summary
    query gives once its JSON is decoded. None otherwise."""
    if not isinstance(row, list) or len(row) != width:
        return None
    for value in row:
        if isinstance(value, dict):
            if not all(isinstance(k, str) and _scalar(v) for k, v in value.items()):
                return None
        elif isinstance(value, list):
            if not all(map(_scalar, value)):
                return None
        elif not _scalar(value):
            return None
    return row


def _key(value: object) -> Key | None:
    if not isinstance(value, list) or len(value) != 4:
        return None
    if not all(type(v) is int and v >= 0 for v in value):
        return None
    return (value[0], value[1], value[2], value[3])


class SummaryIndex:
    """The index of one sessions folder, as this process read it, and the
    entries it read again from their files (`put`), to be saved (`save`)."""

    def __init__(
        self, root: Path, schema: int, started: float | None = None, *, suffix: str
    ) -> None:
        self.root = root
        self.suffix = suffix  # of a session's file: `<id><suffix>`
        self.path = root / INDEX_NAME
        self.schema = schema
        # No later than the first stat of a session file whose row is `put`.
        self.started = time.time() if started is None else started
        self.entries = self._read()
        self.fresh: dict[str, tuple[Key, Row]] = {}

    def get(self, session_id: str, key: Key) -> object:
        """The stored row for the session file as it is now (`key`), unchecked
        (`plain_row` and the store's own checks come after), or None."""
        entry = self.entries.get(session_id)
        if not isinstance(entry, list) or len(entry) != 2 or _key(entry[0]) != key:
            return None
        return entry[1]

    def put(self, session_id: str, key: Key, row: Row) -> None:
        """Keep `row`, read from the session file whose state was `key` just
        before, unless the file changed too recently to tell a later change
        from this one by its times (module docstring)."""
        newest = min(key[2], key[3]) / 1e9
        if self.started - newest >= RACY_SECONDS and plain_row(row, len(row)) is not None:
            self.fresh[session_id] = (key, row)

    def save(self, present: Iterable[str]) -> None:
        """Write the index if it changed: the entries read again, and those of
        sessions gone dropped, merged with what another process may have
        written since this one read it. An entry read again is kept only if
        its file is still there under the lock: a `forget` in between took
        its file and entry away together (`drop`). Failing to write only
        costs speed."""
        present = set(present)
        gone = self.entries.keys() - present
        if not self.fresh and not gone:
            return
        try:
            with locked(self.root, LOCK_WAIT):
                # Another process's entries stay, but for sessions this one saw gone.
                merged = {sid: e for sid, e in self._read().items() if sid not in gone}
                merged.update(
                    {
                        sid: [list(key), row]
                        for sid, (key, row) in self.fresh.items()
                        if os.path.exists(self.root / f"{sid}{self.suffix}")
                    }
                )
                with contextlib.suppress(NotOwned, ValueError, TypeError):
                    self._write(merged)
        except OSError:
            return

    def drop(self, session_id: str) -> None:
        """Take a forgotten session's entry out (its title is the user's
        question: forgetting a session leaves nothing of it behind). The
        caller holds the lock (`locked`). An index that cannot be rewritten is
        deleted (it is only a cache); OSError when neither can be done."""
        entries = self._read()
        if session_id not in entries:
            return
        del entries[session_id]
        try:
            self._write(entries)
        except (NotOwned, ValueError, TypeError):
            os.unlink(self.path)

    def _write(self, entries: dict[str, Any]) -> None:
        document = {
            "format": FORMAT,
            "schema": self.schema,
            "folder": list(self._folder()),
            "entries": entries,
        }
        replace_file(self.path, json.dumps(document, separators=(",", ":")))

    def _folder(self) -> tuple[int, int]:
        info = os.stat(self.root)
        return (info.st_dev, info.st_ino)

    def _read(self) -> dict[str, Any]:
        """The index's entries, or none when it is missing or not one to
        trust (module docstring). Entries are checked one by one when used."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return {}
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or stat.S_IMODE(info.st_mode) & 0o077
                or info.st_nlink != 1
                or info.st_size > MAX_BYTES
            ):
                return {}
            with open(fd, "rb", closefd=False) as handle:
                data = handle.read(MAX_BYTES + 1)
            document = json.loads(data, parse_constant=_refuse)
        except (OSError, ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        if not isinstance(document, dict):
            return {}
        folder = document.get("folder")
        entries = document.get("entries")
        if (
            document.get("format") != FORMAT
            or document.get("schema") != self.schema
            or not isinstance(folder, list)
            or folder != list(self._folder())
            or not isinstance(entries, dict)
        ):
            return {}
        return {sid: entry for sid, entry in entries.items() if is_session_id(sid)}


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not in an index netbox-chat writes")


@contextlib.contextmanager
def locked(root: Path, wait: float) -> Iterator[None]:
    """The folder's index lock (a `flock` on the folder), held for the block;
    IndexBusy when another process holds it past `wait` seconds."""
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not _lock(folder, wait):
            raise IndexBusy(f"another process held the index lock of {root} for {wait:g}s")
        yield
    finally:
        os.close(folder)  # and with it the lock


def _lock(fd: int, wait: float) -> bool:
    """The folder's index lock, waiting at most `wait` seconds for another
    process's write to finish."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        except OSError:
            return False
