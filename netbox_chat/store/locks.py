"""The one-writer lock of a session file: an OS `flock`, and who holds it.

A database session's lock is the server's advisory lock (`postgres.py`).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from netbox_chat.store.database import read_only_connection
from netbox_chat.store.errors import NoSuchSession, SessionBusy, StoreError


def lock_holder(path: Path) -> int | None:
    """Return the holder's pid (0 if unknown) when a live process holds `path`.

    Uses a shared `flock` probe, which never writes. A lock left by a dead
    process is released by the kernel, so it never blocks anyone.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _recorded_pid(path) or 0
    except OSError:  # no locks here at all (some network file systems)
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _recorded_pid(path: Path) -> int | None:
    try:
        with read_only_connection(path) as conn:
            row = conn.execute("SELECT value FROM session_meta WHERE key = 'holder_pid'").fetchone()
    except sqlite3.DatabaseError:
        return None
    return int(row[0]) if row and str(row[0]).isdigit() else None


class SessionLock:
    """An exclusive OS file lock (`flock`) on the session file itself.

    Held for as long as a process has the session open. `flock` is per open
    file description, so even a second open in the same process is refused,
    and the kernel drops it when the holder dies. The descriptor must outlive
    every SQLite connection to the file: closing any descriptor of a file
    drops the process's POSIX locks, which SQLite relies on.
    """

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._fd: int | None = None

    def acquire(self, *, create: bool = False) -> None:
        # Opened for writing: NFS (v4, and v3 through its lock manager) answers
        # an exclusive lock on a read-only descriptor with EBADF (flock(2)).
        flags = os.O_RDWR | os.O_NOFOLLOW | (os.O_CREAT | os.O_EXCL if create else 0)
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError as exc:
            raise NoSuchSession(f"no session {self.session_id!r}") from exc
        except OSError as exc:
            raise StoreError(f"cannot write session {self.session_id}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionBusy(self.session_id, _recorded_pid(self.path)) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(
                f"cannot lock session {self.session_id}: {exc.strerror}; "
                "keep the sessions folder on a local disk"
            ) from exc
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
