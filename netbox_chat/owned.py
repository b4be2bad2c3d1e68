"""Owner-only folders and files: made 0700 / 0600, never written through a
symlink, and a folder someone else owns or can write refused in one line.

Sessions, eval runs, state files and exports hold conversations about the
network. A folder another user owns or may write lets that user read what is
kept in it (a `-wal` file planted before SQLite makes its own) or swap it,
so such a folder is refused with the reason and the fix, as ssh's StrictModes
refuses a `~/.ssh` others can write (sshd_config(5), StrictModes;
https://man.openbsd.org/sshd_config#StrictModes). A folder that is ours but
readable by others is made 0700; failing to make it so is an error, never
passed over.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from netbox_chat.errors import UserFacingError

FOLDER_MODE = 0o700
FILE_MODE = 0o600
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class NotOwned(UserFacingError):
    """A folder or file that is not the user's alone, or cannot be made so."""


def user_name(uid: int) -> str:
    """The login name of `uid`, or the number when it has none (a container)."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check_folder(path: Path, what: str, *, follow: bool = True, tighten: bool = True) -> None:
    """Refuse `path` unless it is a folder of the user's that nobody else may
    write, and make it 0700 when others may read it.

    `follow=False` refuses a symlink too: for a folder inside one we made,
    where a link could only have been planted. A folder the user names (a
    `--sessions-dir` that is a link to a bigger disk) is followed and its
    target checked. `tighten=False` for a reader that must write nothing
    (`ls`): a folder only readable by others is then left as it is."""
    try:
        info = path.stat() if follow else path.lstat()
    except OSError as exc:
        raise NotOwned(f"cannot check {what} {path}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise NotOwned(
            f"refusing {what} {path}: it is a symbolic link, which netbox-chat never "
            f"makes there; remove it (rm {path}) or name the folder it points to"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise NotOwned(f"refusing {what} {path}: it is not a folder")
    uid = os.getuid()
    if info.st_uid != uid:
        raise NotOwned(
            f"refusing {what} {path}: it is owned by another user ({user_name(info.st_uid)}), "
            f"who could read and replace what is kept there; use a folder of your own, "
            f"or chown {user_name(uid)} {path} if it is yours"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise NotOwned(
            f"refusing {what} {path}: others can write to it (permissions {mode:04o}) and "
            f"could have replaced what is kept there; check its files, then chmod 700 {path}"
        )
    if mode & 0o077 and tighten:
        try:
            os.chmod(path, FOLDER_MODE)
        except OSError as exc:
            raise NotOwned(
                f"cannot make {what} {path} private (chmod 700): {exc.strerror}"
            ) from None


def check_parents(path: Path, what: str) -> None:
    """Refuse `path` when a folder above it (as named and with symlinks
    resolved) lets another user move it or put another in its place, as the
    config file's parents are checked (config._check_owner_and_modes): each
    must be owned by the user or root and not writable by others, except a
    sticky one (/tmp), where nobody else can rename what is ours; but never
    as the store's own parent, where anyone may have made the name first and
    the next user to look finds someone else's folder. Folders not made yet
    are skipped: netbox-chat makes them 0700."""
    uid = os.getuid()
    for start in dict.fromkeys((path.absolute(), path.resolve())):
        for place in start.parents:
            try:
                info = place.stat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise NotOwned(
                    f"cannot check the folder {place} above {what} {path}: {exc.strerror}"
                ) from None
            mode = stat.S_IMODE(info.st_mode)
            shared = mode & 0o022
            why = ""
            if info.st_uid not in (uid, 0):
                why = (
                    f"it is owned by another user ({user_name(info.st_uid)}), who could "
                    f"move {path} away or put another folder in its place; use a folder "
                    f"of your own, or chown {user_name(uid)} {place} if it is yours"
                )
            elif shared and not mode & stat.S_ISVTX:
                why = (
                    f"others can write to it (permissions {mode:04o}) and could move "
                    f"{path} away or put another in its place; chmod go-w {place}"
                )
            elif shared and place == start.parent:
                why = (
                    f"it is a shared folder (permissions {mode:04o}, like /tmp) where "
                    f"anyone could have made {path.name} first; make a folder of your "
                    f"own there (mkdir -m 700 {place}/NAME) and keep {what} inside it"
                )
            if why:
                raise NotOwned(f"refusing {what} {path}: its folder {place}: {why}")


def make_folder(path: Path, what: str) -> None:
    """`path` as a 0700 folder of the user's: made if missing (its missing
    parents too, 0700 as well), checked by `check_folder` if it exists."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    for place in reversed(missing):
        try:
            os.mkdir(place, FOLDER_MODE)
        except FileExistsError:
            continue  # made by a process beside us: checked below like any folder
        except OSError as exc:
            raise NotOwned(f"cannot create {what} {place}: {exc.strerror}") from None
        try:
            os.chmod(place, FOLDER_MODE)  # the umask may have taken bits off
        except OSError as exc:
            raise NotOwned(f"cannot make {what} {place} private: {exc.strerror}") from None
    check_folder(path, what)


def create_file(path: Path, text: str) -> None:
    """Write `text` as the new file `path`, 0600; anything already there (a
    file, a symlink) is refused, never written through."""
    try:
        fd = os.open(path, _NEW, FILE_MODE)
    except OSError as exc:
        raise NotOwned(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(fd, FILE_MODE)
        handle.write(text)


def open_append(path: Path) -> int:
    """A descriptor appending to `path`, a regular file of the user's (made
    0600 when missing, made 0600 when others may read it). A symlink there is
    refused (O_NOFOLLOW), never appended through."""
    try:
        fd = os.open(path, _APPEND, FILE_MODE)
    except OSError as exc:
        raise NotOwned(f"cannot write {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise NotOwned(f"refusing to write {path}: not a regular file of yours")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
    except OSError as exc:
        os.close(fd)
        raise NotOwned(f"cannot make {path} private (chmod 600): {exc.strerror}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` as a new 0600 file made beside it and renamed
    into place: an existing file or symlink at `path` is replaced, never
    written through (O_TRUNC would keep a 0644 file's mode and follow a
    link). Anything else already there (a folder, a device, a pipe) is refused."""
    import tempfile  # here: config imports this module, and every start imports config

    try:
        with contextlib.suppress(FileNotFoundError):
            mode = path.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise NotOwned(f"cannot write {path}: not a regular file")
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp: 0600
                handle.write(text)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError as exc:
        raise NotOwned(f"cannot write {path}: {exc.strerror}") from None
