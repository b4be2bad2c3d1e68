"""Folders as the tests read and constrain them: a fingerprint of every file, a small tmpfs, read-only."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file and folder under `folder`: content hash and mode.

    A `-shm` file counts by size and mode only: it is SQLite's shared-memory
    index of a live WAL database, every reader updates its read marks in it,
    it holds no session data and the last connection to close deletes it.
    """
    if not folder.exists():
        return {}
    prints = {".": oct(folder.stat().st_mode)}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        if path.name.endswith("-shm"):
            digest = f"shm of {info.st_size} bytes"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        prints[str(path.relative_to(folder))] = f"{digest} {oct(info.st_mode)}"
    return prints


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount_read_only(where: Path) -> None:
    """The tmpfs at `where` (tmpfs above), read-only from now on: a disk gone bad under a session."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
