"""Sessions that stay safe (issue 6), proven through the real CLI.

One table: each row is bad input or a bad environment → the exit code and the
one line the user sees → what happened to the session files (unchanged, byte
for byte and mode for mode, unless the row says how they may change). Rows
run `netbox-chat` in-process through Typer's CliRunner with the environment a
user would have (the scripted Ollama server and the NetBox double on
loopback); a second `netbox-chat` process, where a row needs one, is the real
console script.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.errors import ExitStatus
from tests.conftest import TEST_TOKEN
from tests.doubles.disks import fingerprint, remount_read_only, tmpfs
from tests.doubles.inspect_session import assert_ledger_agrees
from tests.doubles.network import closed_port
from tests.doubles.ollama_server import (
    HTTPError,
    ScriptedOllama,
    Stall,
    StreamError,
    Text,
    ToolCall,
)
from tests.drive import process
from tests.drive.runner import invoke

SECRET_PART = TEST_TOKEN.split(".", 1)[1]

# --- helpers ----------------------------------------------------------------------------------


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def line(self) -> str:
        """The one line of error the user sees (asserting there is exactly one)."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got: {self.err!r}"
        assert "Traceback" not in self.err
        return lines[0]


def cli(env: dict[str, str], *args: str) -> Ran:
    result = invoke(list(args), env=env, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"netbox-chat {args} crashed") from result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def cli_process(env: dict[str, str], *args: str, timeout: float = 60) -> Ran:
    done = process.cli(env, *args, program=process.CONSOLE_SCRIPT, timeout=timeout)
    return Ran(done.returncode, done.stdout, done.stderr)


def make_session(
    env: dict[str, str], ollama: ScriptedOllama, question: str = "which sites?"
) -> str:
    ollama.script([ToolCall("get_objects", {"object_type": "dcim.site"})], [Text("Three sites.")])
    ran = cli(env, "ask", question, "--json")
    assert ran.code == 0, ran.err
    return str(json.loads(ran.out)["session"])


def human_questions(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def ledger(path: Path) -> list[tuple[int, str, str]]:
    """The ledger's rows, once the ledger is checked to agree with the checkpoints."""
    assert_ledger_agrees(path.parent, path.stem)
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT number, question, status FROM turns ORDER BY number").fetchall()
    finally:
        conn.close()


class Holder:
    """A real second `netbox-chat ask --session` process, parked mid-turn on a
    stalled Ollama reply: it holds the session open (lock, -wal, -shm)."""

    def __init__(self, env: dict[str, str], ollama: ScriptedOllama, session: str) -> None:
        ollama.script([Stall()])
        seen = len(ollama.requests)
        self.proc = process.start(
            env,
            *("ask", "hold this session", "--session", session),
            program=process.CONSOLE_SCRIPT,
            stdout=subprocess.DEVNULL,
            preexec_fn=lambda: os.umask(0),  # modes must not depend on the umask
        )
        ollama.wait_for_requests(seen + 1, timeout=30)
        # The loop may still be saving the step's checkpoint on a worker thread
        # while the model is asked: wait until the files stop changing.
        folder = Path(env["NETBOX_CHAT_SESSIONS"])
        last, stable_since = fingerprint(folder), time.monotonic()
        while time.monotonic() - stable_since < 0.5:
            time.sleep(0.05)
            now = fingerprint(folder)
            if now != last:
                last, stable_since = now, time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


# --- the table -----------------------------------------------------------------------------


@dataclass
class World:
    env: dict[str, str]
    ollama: ScriptedOllama
    sessions: Path
    tmp: Path
    session: str = ""
    holder: Holder | None = None
    watch: Path | None = None  # what must stay unchanged (default: the sessions folder)
    cleanup: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)


@dataclass(frozen=True)
class Row:
    id: str
    setup: Callable[[World], list[str]]
    exit: int
    says: Callable[[World], str] | str
    unchanged: bool = True  # the watched folder is byte-for-byte and mode-for-mode the same
    model_called: bool = False
    check: Callable[[World, Ran], None] | None = None
    process: bool = False  # run the row's command as a real process


def with_session(world: World) -> None:
    world.session = make_session(world.env, world.ollama)


def held(command: Callable[[World], list[str]]) -> Callable[[World], list[str]]:
    def setup(world: World) -> list[str]:
        with_session(world)
        world.holder = Holder(world.env, world.ollama, world.session)
        world.cleanup.callback(world.holder.kill)
        return command(world)

    return setup


def busy_message(world: World) -> str:
    assert world.holder is not None
    return f"session {world.session} is open in another netbox-chat (pid {world.holder.pid})"


def check_ls_marks_open(world: World, ran: Ran) -> None:
    assert world.holder is not None
    (entry,) = json.loads(ran.out)
    assert entry["is_open"] and entry["open_by"] == world.holder.pid
    assert entry["unreadable"] is None
    table = cli(world.env, "ls")
    assert table.code == 0 and f"{world.session} (open)" in table.out
    # item 6, on the files a live process has open: 0600 even with umask 0
    assert stat.S_IMODE(world.sessions.stat().st_mode) == 0o700
    names = sorted(p.name for p in world.sessions.iterdir())
    assert names == [".netbox-chat", *(f"{world.session}.sqlite{s}" for s in ("", "-shm", "-wal"))]
    for path in world.sessions.glob("*.sqlite*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def dead_holder(command: Callable[[World], list[str]]) -> Callable[[World], list[str]]:
    def setup(world: World) -> list[str]:
        args = held(command)(world)
        assert world.holder is not None
        world.holder.kill()  # kill -9 mid-turn: the kernel drops its flock
        world.ollama.script([Text("Still three sites.")])
        return args

    return setup


def check_recovered(world: World, ran: Ran) -> None:
    assert "Still three sites." in ran.out
    assert ledger(world.sessions / f"{world.session}.sqlite") == [
        (1, "which sites?", "done"),
        (2, "hold this session", "interrupted"),
        (3, "again?", "done"),
    ]
    # the model never saw the question the dead process was answering
    assert human_questions(world.ollama.requests[-1]) == ["which sites?", "again?"]


def folder_is_a_file(world: World) -> list[str]:
    blocker = world.tmp / "not-a-folder"
    blocker.write_text("x")
    world.env["NETBOX_CHAT_SESSIONS"] = str(blocker / "sessions")
    world.watch = world.tmp
    return ["ask", "which sites?"]


def read_only_folder(world: World) -> list[str]:
    mount = world.cleanup.enter_context(tmpfs(world.tmp / "ro", "size=1m,mode=0700"))
    remount_read_only(mount)
    world.env["NETBOX_CHAT_SESSIONS"] = str(mount)
    world.watch = mount
    return ["ask", "which sites?"]


def read_only_parent(world: World) -> list[str]:
    mount = world.cleanup.enter_context(tmpfs(world.tmp / "ro", "size=1m,mode=0700"))
    remount_read_only(mount)
    world.env["NETBOX_CHAT_SESSIONS"] = str(mount / "sessions")
    world.watch = mount
    return ["ask", "which sites?"]


def read_only_session(world: World) -> list[str]:
    mount = world.cleanup.enter_context(tmpfs(world.tmp / "ro", "size=4m,mode=0700"))
    world.env["NETBOX_CHAT_SESSIONS"] = str(mount / "sessions")
    world.sessions = mount / "sessions"
    with_session(world)
    remount_read_only(mount)
    return ["ask", "more?", "--session", world.session]


HOSTILE_IDS = {
    "dotdot-slash": "../x",
    "dotdot": "..",
    "absolute": "/etc/passwd",
    "empty": "",
    "very-long": "a" * 5000,
    "nul": "ab\x00cd",
    "newline": "ab\ncd",
    "escape": "ab\x1b[31mcd",
    "traversal": "sess/../../x",
    "outside-alphabet": "ilou",
}


def hostile(command: str, bad: str) -> Callable[[World], list[str]]:
    def setup(world: World) -> list[str]:
        with_session(world)
        (world.tmp / "x.sqlite").write_bytes(b"bait outside the folder")
        world.watch = world.tmp
        return {
            "ask": ["ask", "q", "--session", bad],
            "resume": ["resume", bad],
            "forget": ["forget", bad, "--yes"],
            "export": ["export", bad],
        }[command]

    return setup


def _foreign(kind: str, world: World) -> None:
    """Put a file that is not one of our sessions where a session would be."""
    world.session = {"not-sqlite": "zzzzzzzz", "truncated": "yyyyyyyy", "foreign": "xxxxxxxx"}.get(
        kind, "wwwwwwww"
    )
    path = world.sessions / f"{world.session}.sqlite"
    world.sessions.mkdir(mode=0o700)
    if kind == "not-sqlite":
        path.write_bytes(b"\x00" * 10 + b"hello, I am a spreadsheet")
    elif kind == "truncated":
        real = make_session(world.env, world.ollama)
        path.write_bytes((world.sessions / f"{real}.sqlite").read_bytes()[:1500])
    elif kind == "foreign":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.commit()
        conn.close()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "newer-schema":
        real = make_session(world.env, world.ollama)
        (world.sessions / f"{real}.sqlite").rename(path)
        conn = sqlite3.connect(path)
        conn.execute("UPDATE session_meta SET value = '99' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()


FOREIGN_WORDS = {
    "not-sqlite": "unreadable",
    "truncated": "unreadable",
    "foreign": "not a netbox-chat session",
    "empty": "not a netbox-chat session",
    "newer-schema": "made by a newer netbox-chat (schema 99",
}


def foreign(kind: str, *command: str) -> Callable[[World], list[str]]:
    def setup(world: World) -> list[str]:
        _foreign(kind, world)
        return [part.replace("ID", world.session) for part in command]

    return setup


def check_listed_unreadable(kind: str) -> Callable[[World, Ran], None]:
    def check(world: World, ran: Ran) -> None:
        entry = {e["id"]: e for e in json.loads(ran.out)}[world.session]
        assert entry["unreadable"], entry
        if kind in ("foreign", "newer-schema"):
            assert FOREIGN_WORDS[kind] in entry["unreadable"]
        table = cli(world.env, "ls")
        assert table.code == 0 and "unreadable" in table.out

    return check


def failing_turn(reply: list[Any] | None, **env: str) -> Callable[[World], list[str]]:
    """A turn on an existing session that Ollama makes fail (after a tool call)."""

    def setup(world: World) -> list[str]:
        with_session(world)
        if reply is not None:
            world.ollama.script([ToolCall("get_objects", {"object_type": "dcim.device"})], reply)
        world.env.update(env)
        return ["ask", "which devices are offline?", "--session", world.session]

    return setup


def check_intact(world: World, ran: Ran) -> None:
    """Rolled back: the ledger says so, and the next turn's request to the
    model carries only the finished turns."""
    path = world.sessions / f"{world.session}.sqlite"
    assert ledger(path)[1][1:] == ("which devices are offline?", "failed")
    listed = json.loads(cli(world.env, "ls", "--json").out)[0]
    assert listed["unreadable"] is None and listed["turns"] == 1
    world.env.update(
        OLLAMA_HOST=world.ollama.url, NETBOX_CHAT_MODEL="qwen3:8b", NETBOX_CHAT_TIMEOUT="60"
    )
    world.ollama.script([Text("Fine again.")])
    again = cli(world.env, "ask", "and now?", "--session", world.session)
    assert again.code == 0 and "Fine again." in again.out, again.err
    assert human_questions(world.ollama.requests[-1]) == ["which sites?", "and now?"]


ROWS = [
    # 1. one writer per session
    Row(
        "busy-ask",
        held(lambda w: ["ask", "q", "--session", w.session]),
        ExitStatus.SESSION_BUSY,
        busy_message,
    ),
    Row(
        "busy-resume", held(lambda w: ["resume", w.session]), ExitStatus.SESSION_BUSY, busy_message
    ),
    Row(
        "busy-resume-prefix",
        held(lambda w: ["resume", w.session[:3]]),
        ExitStatus.SESSION_BUSY,
        busy_message,
        process=True,
    ),
    Row(
        "busy-forget",
        held(lambda w: ["forget", w.session, "--yes"]),
        ExitStatus.SESSION_BUSY,
        busy_message,
    ),
    Row(
        "ls-marks-open",
        held(lambda w: ["ls", "--json"]),
        ExitStatus.OK,
        "",
        check=check_ls_marks_open,
    ),
    Row(
        "dead-holder-blocks-nobody",
        dead_holder(lambda w: ["ask", "again?", "--session", w.session]),
        ExitStatus.OK,
        "turn 2 was interrupted and rolled back",
        unchanged=False,
        model_called=True,
        check=check_recovered,
    ),
    Row(
        "dead-holder-forget",
        dead_holder(lambda w: ["forget", w.session, "--yes"]),
        ExitStatus.OK,
        "",
        unchanged=False,
        check=lambda w, r: (
            r.out.startswith(f"forgot session {w.session}") or pytest.fail(r.out),
            list(w.sessions.glob("*.sqlite*")) == []
            or pytest.fail(str(list(w.sessions.iterdir()))),
        ),
    ),
    # 2. fail closed, before any model call
    Row(
        "folder-is-a-file",
        folder_is_a_file,
        ExitStatus.STORE_ERROR,
        "cannot create sessions folder",
        check=lambda w, r: "Not a directory" in r.line or pytest.fail(r.line),
    ),
    Row(
        "read-only-folder",
        read_only_folder,
        ExitStatus.STORE_ERROR,
        "is not writable: Read-only file system",
    ),
    Row(
        "read-only-parent",
        read_only_parent,
        ExitStatus.STORE_ERROR,
        "cannot create sessions folder",
        check=lambda w, r: "Read-only file system" in r.line or pytest.fail(r.line),
    ),
    Row(
        "read-only-session-file",
        read_only_session,
        ExitStatus.STORE_ERROR,
        lambda w: f"cannot write session {w.session}",
        process=True,
    ),
    # 3. hostile thread ids
    *(
        Row(
            f"hostile-{command}-{name}",
            hostile(command, bad),
            ExitStatus.USER_ERROR,
            "is not a session id",
        )
        for command in ("ask", "resume", "forget", "export")
        for name, bad in HOSTILE_IDS.items()
    ),
    # 4./5. foreign, damaged and newer files
    *(
        row
        for kind in FOREIGN_WORDS
        for row in (
            Row(
                f"ls-{kind}",
                foreign(kind, "ls", "--json"),
                ExitStatus.OK,
                "",
                check=check_listed_unreadable(kind),
            ),
            Row(
                f"resume-{kind}",
                foreign(kind, "resume", "ID"),
                ExitStatus.STORE_ERROR,
                lambda w, kind=kind: FOREIGN_WORDS[kind],
            ),
            Row(
                f"ask-{kind}",
                foreign(kind, "ask", "q", "--session", "ID"),
                ExitStatus.STORE_ERROR,
                lambda w, kind=kind: FOREIGN_WORDS[kind],
            ),
            Row(
                f"export-{kind}",
                foreign(kind, "export", "ID"),
                ExitStatus.STORE_ERROR,
                lambda w, kind=kind: FOREIGN_WORDS[kind],
            ),
        )
    ),
    # 8. Ollama problems: a clear line naming the fix; rolled back; intact
    Row(
        "ollama-refused",
        failing_turn(None, OLLAMA_HOST=closed_port()),
        ExitStatus.USER_ERROR,
        "cannot reach Ollama",
        unchanged=False,
        check=lambda w, r: (
            "is `ollama serve` running and OLLAMA_HOST right?" in r.line or pytest.fail(r.line),
            check_intact(w, r),
        ),
    ),
    Row(
        "ollama-unknown-model",
        failing_turn(None, NETBOX_CHAT_MODEL="llama9:70b"),
        ExitStatus.USER_ERROR,
        "model 'llama9:70b' not found: pull it with `ollama pull llama9:70b`",
        unchanged=False,
        model_called=True,
        check=check_intact,
    ),
    Row(
        "ollama-model-without-tools",
        failing_turn(None, NETBOX_CHAT_MODEL="gemma:2b"),
        ExitStatus.USER_ERROR,
        "does not support tools: choose a tool-capable model with --model",
        unchanged=False,
        model_called=True,
        check=check_intact,
    ),
    Row(
        "ollama-error-mid-stream",
        failing_turn(
            [Text("Two devices are "), StreamError("llama runner process has terminated")]
        ),
        ExitStatus.USER_ERROR,
        "Ollama reported an error mid-answer: llama runner process has terminated: try again",
        unchanged=False,
        model_called=True,
        check=check_intact,
    ),
    Row(
        "ollama-500",
        failing_turn([HTTPError(500, "out of memory")]),
        ExitStatus.USER_ERROR,
        "Ollama answered 500: out of memory",
        unchanged=False,
        model_called=True,
        check=check_intact,
    ),
    Row(
        "ollama-stall-beyond-timeout",
        failing_turn([Text("Two devices "), Stall()], NETBOX_CHAT_TIMEOUT="0.5"),
        ExitStatus.USER_ERROR,
        "Ollama did not answer in time: it stopped answering, or stalled mid-answer, "
        "for NETBOX_CHAT_TIMEOUT seconds; check the Ollama server, or raise it",
        unchanged=False,
        model_called=True,
        check=check_intact,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_exit_code_message_and_files(
    row: Row,
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    sessions_dir: Path,
    tmp_path: Path,
) -> None:
    world = World(dict(chat_env), ollama, sessions_dir, tmp_path)
    with world.cleanup:
        args = row.setup(world)
        watched = world.watch or world.sessions
        before = fingerprint(watched)
        requests = len(ollama.requests)
        ran = cli_process(world.env, *args) if row.process else cli(world.env, *args)

        assert ran.code == row.exit, (ran.code, ran.out, ran.err)
        says = row.says(world) if callable(row.says) else row.says
        if row.exit != ExitStatus.OK:
            assert says in ran.line
        elif says:
            assert says in ran.err
        if row.unchanged:
            assert fingerprint(watched) == before
        if not row.model_called:
            assert len(ollama.requests) == requests, "the model was called"
        if row.check is not None:
            row.check(world, ran)
        for text in (ran.out, ran.err):
            assert TEST_TOKEN not in text and SECRET_PART not in text


# --- rows that need more than one command ----------------------------------------------------


def test_files_are_private_and_the_token_is_nowhere(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path, tmp_path: Path
) -> None:
    """Item 6: 0700 folder, 0600 files, whatever the umask; the token in no
    file under the sessions folder, in no output (ask, ls, export, doctor),
    also when NetBox refuses it (the 403 path builds error messages)."""
    env = dict(chat_env)
    outputs: list[str] = []
    old_umask = os.umask(0)
    try:
        sid = make_session(env, ollama)
    finally:
        os.umask(old_umask)
    ollama.script(
        [ToolCall("get_objects", {"object_type": "dcim.device", "filters": {"site": "dm-akron"}})],
        [Text("One is offline.")],
    )
    outputs.append(cli(env, "ask", "offline at Akron?", "--session", sid).out)
    wrong = "nbt_wrongkey0001.9876543210zyxwvutsrq9876543210ZYXWVUTSRQ"
    bad_env = dict(env, NETBOX_TOKEN=wrong)
    ollama.script(
        [ToolCall("get_objects", {"object_type": "dcim.site"})], [Text("NetBox said no.")]
    )
    refused = cli(bad_env, "ask", "sites?", "--session", sid)
    outputs += [refused.out, refused.err]
    for args in (["ls"], ["ls", "--json"], ["export", sid], ["export", sid, "--format", "json"]):
        ran = cli(env, *args)
        assert ran.code == 0, ran.err
        outputs += [ran.out, ran.err]
    doctor = cli(bad_env, "doctor")
    assert doctor.code == 1 and "token" in doctor.out
    outputs += [doctor.out, doctor.err]
    exported = tmp_path / "transcript.md"
    assert cli(env, "export", sid, "--output", str(exported)).code == 0
    assert stat.S_IMODE(exported.stat().st_mode) == 0o600

    assert stat.S_IMODE(sessions_dir.stat().st_mode) == 0o700
    files = sorted(sessions_dir.rglob("*"))
    assert files == [sessions_dir / ".netbox-chat", sessions_dir / f"{sid}.sqlite"]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secrets = [s.encode() for s in (TEST_TOKEN, SECRET_PART, wrong, wrong.split(".", 1)[1])]
    for path in [*files, exported]:
        data = path.read_bytes()
        assert not any(secret in data for secret in secrets), path
    for text in outputs:
        assert not any(secret.decode() in text for secret in secrets), text


def test_disk_full_mid_turn_on_a_real_small_filesystem(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """Item 7 with a real ENOSPC: the disk fills up while the model answers, so
    the turn's checkpoint writes fail AND the rollback cannot write either. The
    process must end with exit 3 and one line (no traceback), and the next open
    (after space is freed) rolls the turn back and carries on."""
    with tmpfs(tmp_path / "small", "size=2m,mode=0700") as mount:
        env = dict(chat_env, NETBOX_CHAT_SESSIONS=str(mount / "sessions"))
        sid = make_session(env, ollama)
        filler = mount / "filler"

        def fill_the_disk(body: dict[str, Any]) -> list[Any]:
            with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * 65536)
            ollama.responder = lambda body: [Text("Two devices.")]
            return [ToolCall("get_objects", {"object_type": "dcim.device"})]

        ollama.responder = fill_the_disk
        ran = cli_process(env, "ask", "offline devices?", "--session", sid)
        ollama.responder = None
        assert ran.code == ExitStatus.STORE_ERROR, ran.err
        assert "database or disk is full" in ran.line
        assert "could not be rolled back now" in ran.line
        assert f"rolled back before the next turn, or the next time session {sid} is opened" in (
            ran.line
        )

        filler.unlink()
        listed = json.loads(cli_process(env, "ls", "--json").out)
        assert listed[0]["unreadable"] is None
        ollama.script([Text("Back.")])
        again = cli_process(env, "ask", "still there?", "--session", sid)
        assert again.code == 0, again.err
        assert "turn 2 was interrupted and rolled back" in again.err
        assert human_questions(ollama.requests[-1]) == ["which sites?", "still there?"]
        assert [row[2] for row in ledger(mount / "sessions" / f"{sid}.sqlite")] == [
            "done",
            "interrupted",
            "done",
        ]


@pytest.mark.parametrize("rollback_can_write", [True, False], ids=["rolled-back", "deferred"])
def test_io_error_mid_turn_by_fault_injection(
    rollback_can_write: bool,
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    sessions_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Item 7 without a small filesystem: the saver's writes start failing at
    the SQLite layer in the middle of a turn (once, or for good)."""
    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

    sid = make_session(chat_env, ollama)
    real_put_writes = BridgedSqliteSaver.put_writes
    failing = [True]  # the turn's first write fails (a turn writes once, at its end)

    def flaky_put_writes(self: BridgedSqliteSaver, *args: Any, **kwargs: Any) -> None:
        if failing:
            failing.clear()
            raise sqlite3.OperationalError("disk I/O error")
        real_put_writes(self, *args, **kwargs)

    def failing_truncate(*args: Any, **kwargs: Any) -> list[Any]:
        raise sqlite3.OperationalError("disk I/O error")

    real_truncate = BridgedSqliteSaver.truncate_after
    monkeypatch.setattr(BridgedSqliteSaver, "put_writes", flaky_put_writes)
    if not rollback_can_write:  # the rollback's own deletes fail too
        monkeypatch.setattr(BridgedSqliteSaver, "truncate_after", failing_truncate)
    ollama.script([ToolCall("get_objects", {"object_type": "dcim.device"})], [Text("Two.")])
    ran = cli(chat_env, "ask", "devices?", "--session", sid)
    assert ran.code == ExitStatus.STORE_ERROR
    assert "the session file could not be written (disk I/O error)" in ran.line
    if rollback_can_write:
        assert "turn 2 failed and was rolled back" in ran.line
    else:
        assert "could not be rolled back now" in ran.line
    monkeypatch.setattr(BridgedSqliteSaver, "put_writes", real_put_writes)
    monkeypatch.setattr(BridgedSqliteSaver, "truncate_after", real_truncate)

    ollama.script([Text("Back.")])
    again = cli(chat_env, "ask", "still there?", "--session", sid)
    assert again.code == 0, again.err
    assert human_questions(ollama.requests[-1]) == ["which sites?", "still there?"]
    statuses = [row[2] for row in ledger(sessions_dir / f"{sid}.sqlite")]
    assert statuses == ["done", "failed" if rollback_can_write else "interrupted", "done"]


def test_rows_cover_every_command_that_takes_an_id() -> None:
    """A new command that takes a THREAD must get hostile-id rows too."""
    commands = {row.id.split("-")[1] for row in ROWS if row.id.startswith("hostile-")}
    assert commands == {"ask", "resume", "forget", "export"}
    assert len({row.id for row in ROWS}) == len(ROWS)
