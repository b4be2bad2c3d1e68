"""The CLI's happy path through Typer's runner, then the database read back:
ask writes a ledger row, ls reads it without LangChain, resume picks the most
recent session, forget asks first."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netbox_chat.cli.app import app
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.process import ask, cli, python, start
from tests.drive.runner import invoke


def ask_json(runner: CliRunner, env: dict[str, str], *args: str) -> dict:
    result = runner.invoke(app, ["ask", *args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ask_writes_a_ledger_row_that_ls_reads_without_langchain(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    runner = CliRunner()
    ollama.script(
        [
            ToolCall(
                "netbox_get_objects",
                {"object_type": "dcim.device", "filters": {"status": "offline"}},
            )
        ],
        [Text("One offline device: dmi01-akron-sw02.")],
    )
    answer = ask_json(runner, chat_env, "which devices are offline?")
    assert answer["answer"] == "One offline device: dmi01-akron-sw02."
    assert answer["tool_calls"][0]["name"] == "netbox_get_objects"
    assert answer["tokens"]["in"] > 0 and answer["tokens"]["out"] > 0

    conn = sqlite3.connect(sessions_dir / f"{answer['session']}.sqlite")
    row = conn.execute(
        "SELECT number, question, status, tokens_in, tokens_out, tool_calls, answer, "
        "base_message_count, end_checkpoint_id, message_count FROM turns"
    ).fetchone()
    conn.close()
    number, question, status, tokens_in, tokens_out, tool_calls, text, before, end, after = row
    assert (number, question, status) == (1, "which devices are offline?", "done")
    assert (tokens_in, tokens_out) == (answer["tokens"]["in"], answer["tokens"]["out"])
    assert json.loads(tool_calls)[0]["args"]["filters"] == {"status": "offline"}
    assert text == answer["answer"] and end
    assert (before, after) == (0, 4)  # question, tool call, tool result, answer

    probe = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from netbox_chat.cli.app import app\n"
        "result = CliRunner().invoke(app, ['ls', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langgraph', 'deepagents', 'langchain_ollama', 'prompt_toolkit'))\n"
        "print(json.dumps({'ls': json.loads(result.stdout), 'heavy': heavy}))\n"
    )
    out = cli(chat_env, program=python(probe), check=True)
    report = json.loads(out.stdout)
    assert report["heavy"] == []
    (listed,) = report["ls"]
    assert listed["id"] == answer["session"] and listed["turns"] == 1
    assert listed["title"] == "which devices are offline?" and listed["model"] == "qwen3:8b"


def test_resume_without_an_id_takes_the_most_recent_and_ask_continues_a_session(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    runner = CliRunner()
    ollama.script([Text("first")], [Text("second")], [Text("third")])
    older = ask_json(runner, chat_env, "older question")["session"]
    newer = ask_json(runner, chat_env, "newer question")["session"]
    again = ask_json(runner, chat_env, "follow-up", "--session", older[:5])
    assert again["session"] == older and again["turn"] == 2
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "older question" in sent and "newer question" not in sent
    listing = json.loads(runner.invoke(app, ["ls", "--json"], env=chat_env).stdout)
    assert listing[0]["id"] == older  # most recently active first
    assert {s["id"] for s in listing} == {older, newer}


def test_unknown_session_is_one_line_and_exit_1(chat_env: dict[str, str]) -> None:
    result = invoke(["resume", "zzzz"], env=chat_env)
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and "no session 'zzzz'" in result.stderr


def test_forget_asks_first_and_deletes_with_yes(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    runner = CliRunner()
    ollama.script([Text("answer")])
    session = ask_json(runner, chat_env, "to be forgotten")["session"]
    kept = runner.invoke(app, ["forget", session], env=chat_env, input="n\n")
    assert kept.exit_code == 1 and (sessions_dir / f"{session}.sqlite").exists()
    gone = runner.invoke(app, ["forget", session, "--yes"], env=chat_env)
    assert gone.exit_code == 0 and f"forgot session {session}" in gone.stdout
    assert [p.name for p in sessions_dir.iterdir()] == [".netbox-chat"]  # only its mark


def test_every_command_explains_its_settings_in_help() -> None:
    runner = CliRunner()
    for command in (["--help"], ["resume", "--help"], ["ask", "--help"]):
        text = runner.invoke(app, command, env={"COLUMNS": "200"}).stdout
        for name in ("NETBOX_CHAT_SESSIONS", "OLLAMA_HOST", "NETBOX_CHAT_MODEL", "NETBOX_URL"):
            assert name in text, (command, name)
    assert (
        "NETBOX_CHAT_SESSIONS"
        in runner.invoke(app, ["ls", "--help"], env={"COLUMNS": "200"}).stdout
    )


def test_ls_shows_the_newest_sessions_and_all_on_request(sessions_dir: Path) -> None:
    from netbox_chat.cli.app import LS_ROWS
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    store = SessionStore(sessions_dir)
    ids = [make_session(store, f"question {n}") for n in range(LS_ROWS + 2)]
    for age, session_id in enumerate(reversed(ids)):  # the last made is the newest
        os.utime(store.path_for(session_id), (1_700_000_000 - age, 1_700_000_000 - age))
    runner = CliRunner()
    env = {"NETBOX_CHAT_SESSIONS": str(sessions_dir), "COLUMNS": "200"}
    table = runner.invoke(app, ["ls"], env=env)
    assert table.exit_code == 0
    assert ids[-1] in table.stdout and ids[0] not in table.stdout and ids[1] not in table.stdout
    assert "… 2 older sessions are not shown" in table.stderr
    everything = runner.invoke(app, ["ls", "--all"], env=env)
    assert all(session_id in everything.stdout for session_id in ids)
    assert len(json.loads(runner.invoke(app, ["ls", "--json"], env=env).stdout)) == len(ids)


def test_what_users_typed_is_printed_as_typed_never_as_markup(sessions_dir: Path) -> None:
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    session_id = make_session(SessionStore(sessions_dir), "what is in [/dev] and [bold]?")
    runner = CliRunner()
    env = {"NETBOX_CHAT_SESSIONS": str(sessions_dir), "COLUMNS": "200"}
    table = runner.invoke(app, ["ls"], env=env)
    assert table.exit_code == 0, table.output
    assert session_id in table.stdout and "what is in [/dev] and [bold]?" in table.stdout
    bad = runner.invoke(app, ["forget", "[/x]"], env=env)
    assert bad.exit_code == 1 and bad.stderr.count("\n") == 1
    assert "'[/x]' is not a session id" in bad.stderr


def test_ls_fits_a_narrow_terminal_by_shortening_titles(sessions_dir: Path) -> None:
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    title = "which devices at DM-Akron have been offline since the last maintenance window?"
    session_id = make_session(SessionStore(sessions_dir), title)
    # a terminal as rich recognises one (TTY_COMPATIBLE), without colour codes
    env = {
        "NETBOX_CHAT_SESSIONS": str(sessions_dir),
        "COLUMNS": "80",
        "TTY_COMPATIBLE": "1",
        "TERM": "dumb",
    }
    lines = invoke(["ls"], env=env).stdout.splitlines()
    assert lines[0].split() == ["id", "title", "turns", "last", "active", "model", "size"]
    assert lines[1].startswith(session_id) and "which devices at" in lines[1]
    assert title not in lines[1] and "…" in lines[1]
    assert all(len(line) <= 80 for line in lines)


@pytest.mark.parametrize("columns", [60, 45])
def test_ls_in_a_narrow_terminal_leaves_out_the_least_telling_columns_and_cuts_none(
    sessions_dir: Path, columns: int
) -> None:
    """In a real terminal 60 (or 45) columns wide, the title shortens and then
    size, turns and last active give way, named under the table; the model
    and every id stay whole."""
    import pexpect

    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session
    from tests.drive.screen import on_screen

    store = SessionStore(sessions_dir)
    title = "which devices at DM-Akron have been offline since the last maintenance window?"
    ids = [make_session(store, title), make_session(store, "list the sites")]
    env = {**os.environ, "NETBOX_CHAT_SESSIONS": str(sessions_dir), "TERM": "xterm"}
    child, terminal = on_screen(env, "ls", columns=columns, lines=24)
    child.expect(pexpect.EOF, timeout=60)
    lines = [line for line in terminal.lines() if line]
    left_out = {60: "size", 45: "size, turns, last active"}[columns]
    assert lines[0].split()[:2] == ["id", "title"] and lines[0].endswith("model")
    assert [line.split()[0] for line in lines[1:3]] == ids[::-1]
    assert all(line.endswith("  qwen3:8b") for line in lines[1:3])
    assert "which devices at DM" in lines[2] and "…" in lines[2]
    assert " ".join(lines[3:]) == f"not shown at this width: {left_out}"  # wrapped at 45


def test_ls_piped_is_never_cut_and_its_notes_come_after_the_table(sessions_dir: Path) -> None:
    from netbox_chat.cli.app import LS_ROWS
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    title = "which devices at DM-Akron have been offline since the last maintenance window?"
    store = SessionStore(sessions_dir)
    ids = [make_session(store, f"{title} ({n})") for n in range(LS_ROWS + 1)]
    env = {**os.environ, "NETBOX_CHAT_SESSIONS": str(sessions_dir), "COLUMNS": "60"}
    # both streams into one pipe, as `netbox-chat ls 2>&1 | less` does
    piped = cli(env, "ls", stderr=subprocess.STDOUT, check=True).stdout.splitlines()
    assert piped[0].split()[:2] == ["id", "title"]
    rows = piped[1 : LS_ROWS + 1]
    assert all(f"{title} (" in row and "…" not in row for row in rows)
    assert {row.split()[0] for row in rows} == set(ids[1:])
    assert piped[LS_ROWS + 1 :] == [
        "… 1 older session is not shown; `netbox-chat ls --all` lists them"
    ]


def test_a_reader_that_goes_away_ends_it_quietly_as_git_does(sessions_dir: Path) -> None:
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    session_id = make_session(SessionStore(sessions_dir), "which sites are there?")
    env = {**os.environ, "NETBOX_CHAT_SESSIONS": str(sessions_dir)}
    # `ls` writes through rich as it goes; `ls --json` and `export` leave their
    # output in Python's buffer until the exit flush; help is Typer's own
    for args in (
        ["ls"],
        ["ls", "--json"],
        ["export", session_id],
        ["--help"],
        ["ls", "-h"],
        ["--version"],
    ):
        proc = start(env, *args)
        assert proc.stdout is not None
        proc.stdout.close()  # `| head` that has read all it wanted
        _, stderr = proc.communicate(timeout=60)
        assert (proc.returncode, stderr) == (141, ""), args


def test_ask_into_a_reader_that_goes_away_keeps_the_answer_and_exits_141(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """`netbox-chat ask "…" | head -0`: the turn is answered and recorded, and
    the closed pipe is no bug report: nothing on stderr, exit 141."""
    ollama.script([Text("Three sites. " * 2000)])  # more than a pipe's buffer
    proc = ask(chat_env, "how many sites?")
    assert proc.stdout is not None
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert (proc.returncode, stderr) == (141, "")
    (path,) = sessions_dir.glob("*.sqlite")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT number, status FROM turns").fetchall() == [(1, "done")]


def age_session(path: Path, days: int) -> None:
    """Make a session look last active `days` ago, in its own ledger."""
    stamp = f"datetime('now', '-{days} days')"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"UPDATE turns SET started_at = {stamp}, ended_at = {stamp}")
        conn.execute(f"UPDATE session_meta SET value = {stamp} WHERE key = 'created_at'")
    conn.close()


def test_ls_says_how_long_ago_in_words_and_where_the_default_folder_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: `ls` shows last activity as `just now`, `3 days ago`, then
    the date once a month old; and, when no setting named the folder, says
    which one it read and by what rule (a named folder needs no note)."""
    from datetime import UTC, datetime, timedelta

    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session
    from tests.drive.install import as_installed_from_a_wheel

    for name in [k for k in os.environ if k.startswith(("NETBOX_CHAT_", "XDG_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    as_installed_from_a_wheel(monkeypatch)
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    home = tmp_path / "data" / "netbox-chat" / "sessions"
    store = SessionStore(home)
    now, days, month = (make_session(store, q) for q in ("now?", "days?", "month?"))
    age_session(home / f"{days}.sqlite", 3)
    age_session(home / f"{month}.sqlite", 40)
    listed = invoke(["ls"], env=env)
    assert listed.exit_code == 0, listed.output
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "just now" in rows[now] and "3 days ago" in rows[days]
    date = (datetime.now(UTC) - timedelta(days=40)).date().isoformat()
    assert date in rows[month]
    assert listed.stderr.splitlines()[0] == (
        f"sessions in {home} (default: $XDG_DATA_HOME/netbox-chat/sessions)"
    )
    named = invoke(["ls"], env={**env, "NETBOX_CHAT_SESSIONS": str(home)})
    assert named.exit_code == 0 and "sessions in" not in named.stderr


def test_forget_takes_several_ids_and_older_than_but_never_an_open_session(
    sessions_dir: Path,
) -> None:
    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    store = SessionStore(sessions_dir)
    old, older, busy, recent, a, b = (make_session(store, f"q{n}") for n in range(6))
    for session_id, days in ((old, 31), (older, 90), (busy, 45), (recent, 2)):
        age_session(store.path_for(session_id), days)
    env = {"NETBOX_CHAT_SESSIONS": str(sessions_dir), "COLUMNS": "200"}
    runner = CliRunner()
    with store.open(busy):  # open in a process: never forgotten
        swept = runner.invoke(app, ["forget", "--older-than", "30d", "--yes"], env=env)
    assert swept.exit_code == 0, swept.output
    assert swept.stdout == f"forgot 2 sessions last active over 30d ago: {older} {old}\n" or (
        swept.stdout == f"forgot 2 sessions last active over 30d ago: {old} {older}\n"
    )
    both = runner.invoke(app, ["forget", a, b[:6], "--yes"], env=env)
    assert both.stdout == f"forgot session {a}\nforgot session {b}\n"
    assert sorted(p.stem for p in sessions_dir.glob("*.sqlite")) == sorted([busy, recent])

    closed = runner.invoke(app, ["forget", "--older-than", "30d", "--yes"], env=env)
    assert closed.stdout == f"forgot 1 session last active over 30d ago: {busy}\n"
    nothing = runner.invoke(app, ["forget", "--older-than", "30d", "--yes"], env=env)
    assert nothing.stdout == "no session last active over 30d ago to forget\n"
    bad = runner.invoke(app, ["forget", "--older-than", "a month"], env=env)
    assert bad.exit_code == 2 and "'a month' is not an age" in bad.output
