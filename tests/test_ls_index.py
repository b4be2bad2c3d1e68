"""`ls --json` through the folder's summary index (netbox_chat/store/lsindex.py):
what it prints is what the session files hold, whatever the index says. Real
session files in a temp folder, the real CLI (Typer's runner, and a subprocess
where another process must have written)."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.store.lsindex import INDEX_NAME, SummaryIndex
from netbox_chat.store.sessions import SCHEMA_VERSION, SUFFIX, SessionStore
from tests.doubles.stores import make_session
from tests.drive.process import cli
from tests.drive.runner import invoke

QUESTIONS = ("which sites?", "which devices at DM-Akron?", "offline devices?")


def aged(store: SessionStore) -> None:
    """Every session file last written a minute ago: old enough for the index
    to keep (a file changed in the last 2 s is read again every time)."""
    then = time.time() - 60
    for sid in store.session_ids():
        os.utime(store.path_for(sid), (then, then))


def listing(env: dict[str, str]) -> list[dict[str, Any]]:
    result = invoke(["ls", "--json"], env=env)
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout))


@pytest.fixture
def folder(tmp_path: Path) -> tuple[SessionStore, dict[str, str]]:
    store = SessionStore(tmp_path / "sessions")
    for question in QUESTIONS:
        make_session(store, question)
    aged(store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETBOX", "OLLAMA"))}
    env.update(NETBOX_CHAT_SESSIONS=str(store.root), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return store, env


def test_ls_shows_a_session_another_process_changed_after_the_index_was_written(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    store, env = folder
    first = listing(env)
    index = store.root / INDEX_NAME
    assert len(json.loads(index.read_text())["entries"]) == 3  # the next ls reads no file
    # What ls shows, not each migration's record (m008 keeps those in session_meta).
    assert "m001_initial" not in index.read_text()
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    target = next(s for s in first if s["title"] == "which sites?")
    path = store.path_for(target["id"])
    before = path.stat()
    # Another writer changes the title in place to one of the same length and
    # puts the file's times back: same size, same mtime. Only its ctime, which
    # no one can set, tells the index that its entry is stale.
    conn = sqlite3.connect(path)
    conn.execute("UPDATE session_meta SET value = 'WHICH SITES?' WHERE key = 'title'")
    conn.commit()
    conn.close()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    # ... and another process adds a turn to a second session.
    other = next(s for s in first if s["title"] == "offline devices?")
    with store.open(other["id"]) as session:
        number = session.begin_turn("and now?", base_checkpoint_id=None, base_message_count=2)
        session.finish_turn(number, "done", answer="two", message_count=4)

    after = {s["id"]: s for s in json.loads(cli(env, "ls", "--json", check=True).stdout)}
    assert after[target["id"]]["title"] == "WHICH SITES?"
    assert after[other["id"]]["turns"] == 2
    assert {s["id"]: s for s in listing(env)} == after  # and again, from the index or not


def forged_index(store: SessionStore) -> str:
    """The index `ls --json` wrote, with every title changed: what a planted
    index that matched the files would make `ls` print."""
    document = json.loads((store.root / INDEX_NAME).read_text())
    for _key, row in document["entries"].values():
        row[0]["title"] = "\x1b[2J planted"
    return json.dumps(document)


def plant_link(store: SessionStore, text: str) -> None:
    elsewhere = store.root.parent / "elsewhere.json"
    elsewhere.write_text(text)
    os.chmod(elsewhere, 0o600)
    (store.root / INDEX_NAME).symlink_to(elsewhere)


def plant_hard_link(store: SessionStore, text: str) -> None:
    elsewhere = store.root.parent / "elsewhere.json"
    elsewhere.write_text(text)
    os.chmod(elsewhere, 0o600)
    os.link(elsewhere, store.root / INDEX_NAME)


def plant_group_writable(store: SessionStore, text: str) -> None:
    (store.root / INDEX_NAME).write_text(text)
    os.chmod(store.root / INDEX_NAME, 0o620)


def plant_foreign_owner(store: SessionStore, text: str) -> None:
    if os.getuid() != 0:
        pytest.skip("making a file another user's needs root")
    (store.root / INDEX_NAME).write_text(text)
    os.chmod(store.root / INDEX_NAME, 0o600)
    os.chown(store.root / INDEX_NAME, 4242, 4242)


def plant_for_another_folder(store: SessionStore, text: str) -> None:
    document = json.loads(text)
    document["folder"][1] += 1
    (store.root / INDEX_NAME).write_text(json.dumps(document))
    os.chmod(store.root / INDEX_NAME, 0o600)


def plant_other_keys(store: SessionStore, text: str) -> None:
    """Entries for the same ids, of files as they are not (an index from
    before a change, or copied from another machine)."""
    document = json.loads(text)
    for entry in document["entries"].values():
        entry[0][2] -= 10**9
    (store.root / INDEX_NAME).write_text(json.dumps(document))
    os.chmod(store.root / INDEX_NAME, 0o600)


def plant_corrupt(store: SessionStore, text: str) -> None:
    (store.root / INDEX_NAME).write_text(text[: len(text) // 2])
    os.chmod(store.root / INDEX_NAME, 0o600)


def plant_bad_entries(store: SessionStore, text: str) -> None:
    """Entries of the right keys whose rows are not rows a session file gives."""
    document = json.loads(text)
    bad: list[Any] = [None, [1, 2], ["x"] * 13, [{"title": ["nested"]}] + [0] * 12]
    for entry, row in zip(document["entries"].values(), bad, strict=False):
        entry[1] = row
    (store.root / INDEX_NAME).write_text(json.dumps(document))
    os.chmod(store.root / INDEX_NAME, 0o600)


@pytest.mark.parametrize(
    "plant",
    [
        plant_link,
        plant_hard_link,
        plant_group_writable,
        plant_foreign_owner,
        plant_for_another_folder,
        plant_other_keys,
        plant_corrupt,
        plant_bad_entries,
    ],
)
def test_a_planted_corrupt_or_foreign_index_changes_nothing_ls_prints(
    folder: tuple[SessionStore, dict[str, str]], plant: Callable[[SessionStore, str], None]
) -> None:
    store, env = folder
    truth = listing(env)
    forged = forged_index(store)
    (store.root / INDEX_NAME).unlink()
    plant(store, forged)
    assert listing(env) == truth
    index = store.root / INDEX_NAME
    info = index.lstat()  # rebuilt: the user's own regular file, 0600, one link
    assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert "planted" not in index.read_text()
    assert listing(env) == truth  # and read from the rebuilt index


def test_the_index_is_trusted_as_far_as_the_session_files_are(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    """The control for the test above: an index of the user's own, 0600, for
    this folder and these files as they are, is used as it is. Whoever can
    write it can write the session files too (the folder is the user's
    alone, `owned.check_folder`); its rows get the files' checks, so a
    planted title is still printed escaped in the table."""
    store, env = folder
    listing(env)
    forged = forged_index(store)
    (store.root / INDEX_NAME).write_text(forged)
    assert {s["title"] for s in listing(env)} == {"\x1b[2J planted"}
    table = invoke(["ls", "--all"], env=env)
    assert "\x1b[2J" not in table.stdout and "planted" in table.stdout
    (store.root / INDEX_NAME).unlink()  # deleting it changes nothing but speed
    assert {s["title"] for s in listing(env)} == set(QUESTIONS)


def test_forget_leaves_nothing_of_the_session_in_the_index(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    store, env = folder
    listed = listing(env)
    gone = next(s["id"] for s in listed if s["title"] == "which sites?")
    assert invoke(["forget", gone, "--yes"], env=env).exit_code == 0
    assert "which sites?" not in (store.root / INDEX_NAME).read_text()
    assert len(listing(env)) == 2


def test_forget_waits_for_the_index_and_deletes_nothing_while_another_holds_it(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    """n05: a forget while another process held the index lock for over
    0.5 s (an `ls --json` of a big folder) left the question in the index.
    It waits for the lock; held too long, it deletes nothing and says so."""
    store, env = folder
    by_title = {s["title"]: s["id"] for s in listing(env)}
    index = store.root / INDEX_NAME
    lock = os.open(store.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # what a concurrent `ls --json` holds while it saves
        held = cli(env, "forget", by_title["which sites?"], "--yes")
        assert held.returncode == 3
        assert held.stderr.strip() == (
            "netbox-chat: nothing forgotten: another netbox-chat process (an `ls` over a big "
            "folder?) held the sessions folder's index for 10s; try again"
        )
        assert store.path_for(by_title["which sites?"]).exists()

        threading.Timer(1.0, fcntl.flock, (lock, fcntl.LOCK_UN)).start()
        waited = cli(env, "forget", by_title["which sites?"], "--yes")
    finally:
        os.close(lock)
    assert waited.returncode == 0, waited.stderr
    assert not store.path_for(by_title["which sites?"]).exists()
    assert "which sites?" not in index.read_text()


def test_an_ls_that_read_a_session_before_it_was_forgotten_does_not_write_it_back(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    store, _env = folder
    ids = store.session_ids()
    reader = SummaryIndex(store.root, SCHEMA_VERSION, suffix=SUFFIX)
    titles = {store.summarize(sid, reader).title: sid for sid in ids}
    store.forget(titles["which sites?"])  # between the reader's reads and its save
    reader.save(ids)
    entries = json.loads((store.root / INDEX_NAME).read_text())["entries"]
    assert set(entries) == set(ids) - {titles["which sites?"]}
    assert "which sites?" not in (store.root / INDEX_NAME).read_text()


def test_two_writers_of_the_index_lose_no_entry(
    folder: tuple[SessionStore, dict[str, str]],
) -> None:
    """Each process merges what another wrote since it read the index."""
    store, _env = folder
    ids = store.session_ids()
    one, two = (
        SummaryIndex(store.root, SCHEMA_VERSION, suffix=SUFFIX),
        SummaryIndex(store.root, SCHEMA_VERSION, suffix=SUFFIX),
    )
    store.summarize(ids[0], one)
    store.summarize(ids[1], two)
    one.save(ids)
    two.save(ids)
    entries = json.loads((store.root / INDEX_NAME).read_text())["entries"]
    assert set(entries) == {ids[0], ids[1]}


def test_a_fresh_file_is_read_again_until_it_is_old_enough(tmp_path: Path) -> None:
    """A file changed in the last 2 s is never kept: a second change in the
    same timestamp tick could leave it the same size and times."""
    store = SessionStore(tmp_path / "sessions")
    sid = make_session(store)
    index = SummaryIndex(store.root, SCHEMA_VERSION, suffix=SUFFIX)
    store.summarize(sid, index)
    assert index.fresh == {}
