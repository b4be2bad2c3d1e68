"""An operator's habits (issue 15, items 2-6), through the real CLI: a session
remembers its NetBox and model, `ask --stream-json` read line by line while the
turn runs, shell completion of session ids, `ls --grep`, and no session left
behind by a first turn that never got an answer."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from netbox_chat.cli.app import app
from netbox_chat.cli.completion import zsh_word
from netbox_chat.store.sessions import SessionFile, SessionStore
from tests.conftest import TEST_TOKEN
from tests.doubles.disks import fingerprint
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port
from tests.doubles.ollama_server import Delay, ScriptedOllama, Stall, Text, ToolCall
from tests.doubles.stores import make_session
from tests.drive.process import CONSOLE_SCRIPT, cli, python, start
from tests.drive.pty import on_a_terminal
from tests.drive.runner import invoke

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})


def ask_json(env: dict[str, str], *args: str) -> dict:
    ran = invoke(["ask", *args, "--json"], env=env)
    assert ran.exit_code == 0, ran.output
    return json.loads(ran.stdout)


def sessions_in(folder: Path) -> list[str]:
    """The folder's files but netbox-chat's mark (`.netbox-chat`)."""
    names = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    return [name for name in names if name != ".netbox-chat"]


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """The real program with its stdout a pipe, block-buffered as a script's
    `| jq` would have it (so only an explicit flush gets a line out early)."""
    return start({k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}, *args, bufsize=1)


# --- 2. a session remembers its NetBox ------------------------------------------------------


def test_a_session_goes_on_against_its_own_netbox_and_another_one_must_be_asked_for(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, sessions_dir: Path
) -> None:
    ollama.models["llama3.1:8b"] = ["completion", "tools"]
    ollama.script([SITES], [Text("Three sites.")])
    first = ask_json({**chat_env, "NETBOX_CHAT_MODEL": "llama3.1:8b"}, "how many sites?")
    session = first["session"]
    meta = dict(
        sqlite3.connect(sessions_dir / f"{session}.sqlite").execute(
            "SELECT key, value FROM session_meta"
        )
    )
    assert meta["netbox_url"] == netbox.url and meta["model"] == "llama3.1:8b"
    assert TEST_TOKEN not in json.dumps(meta)

    # No model in this shell: the session's own is used. (Its NetBox never is:
    # the user's own must be configured, tests/test_session_netbox.py.)
    bare = {k: v for k, v in chat_env.items() if k != "NETBOX_CHAT_MODEL"}
    ollama.script([Text("Still three.")])
    again = ask_json(bare, "and now?", "--session", session)
    assert again["status"] == "done" and ollama.requests[-1]["model"] == "llama3.1:8b"

    with NetBoxDouble(token=TEST_TOKEN) as other:
        before = fingerprint(sessions_dir)
        requests = len(ollama.requests)
        elsewhere = {**chat_env, "NETBOX_URL": other.url}
        for command in (["ask", "sites?", "--session", session], ["resume", session]):
            refused = invoke(command, env=elsewhere)
            assert refused.exit_code == 1, refused.output
            assert refused.stderr.count("\n") == 1
            assert f"session {session} was started against {netbox.url}" in refused.stderr
            assert f"this one talks to {other.url} (env NETBOX_URL)" in refused.stderr
            assert "--netbox-url or --profile" in refused.stderr
        assert fingerprint(sessions_dir) == before and len(ollama.requests) == requests

        ollama.script([SITES], [Text("Other sites.")])
        told = invoke(
            ["ask", "sites?", "--session", session, "--netbox-url", other.url], env=chat_env
        )
        assert told.exit_code == 0, told.output
        assert "its earlier answers describe the other NetBox" in told.stderr
        assert told.stderr.count("\n") == 1
        assert any("dcim/sites" in request for request in other.requests)


def test_ls_shows_the_profile_or_the_host(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    ollama.script([Text("Hi.")])
    session = ask_json(chat_env, "hello")["session"]
    listing = invoke(["ls"], env={**chat_env, "COLUMNS": "200"})
    header, row = listing.stdout.splitlines()
    assert row.startswith(session) and "netbox" not in header.split()
    host = netbox.url.split("//")[1]
    assert listing.stderr == f"all on NetBox {host}\n"
    with NetBoxDouble(token=TEST_TOKEN) as other:
        ollama.script([Text("Hi there.")])
        elsewhere = ask_json({**chat_env, "NETBOX_URL": other.url}, "hello there")["session"]
        listing = invoke(["ls"], env={**chat_env, "COLUMNS": "200"})
        header, *rows = listing.stdout.splitlines()
        assert "netbox" in header.split() and listing.stderr == ""
        by_id = {row.split()[0]: row for row in rows}
        assert f" {host} " in by_id[session] and host not in by_id[elsewhere]
        assert f" {other.url.split('//')[1]} " in by_id[elsewhere]


# --- 3. streaming JSON ------------------------------------------------------------------------


def read_line(proc: subprocess.Popen[str]) -> dict:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"stdout closed early; stderr: {proc.stderr.read() if proc.stderr else ''}"
    return json.loads(line)


def test_stream_json_writes_each_event_as_it_happens(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [SITES],
        [Text("There are three sites: Akron, Columbus and Dayton.", chunk_delay=0.4)],
    )
    proc = spawn(chat_env, "ask", "list the sites", "--stream-json")
    started = read_line(proc)
    assert started["type"] == "turn_started" and started["turn"] == 1
    seen = [started]
    while seen[-1]["type"] != "text_delta":
        seen.append(read_line(proc))
    first_piece = time.monotonic()
    while seen[-1]["type"] != "result":
        seen.append(read_line(proc))
    # The first piece of the answer was here while the model was still
    # writing the rest (eight more pieces, 0.4 s apart), not all at the end.
    assert time.monotonic() - first_piece > 2.0
    assert proc.wait(timeout=30) == 0
    kinds = [event["type"] for event in seen]
    assert kinds.index("tool_started") < kinds.index("tool_finished") < kinds.index("text_delta")
    finished = seen[kinds.index("tool_finished")]
    assert finished["name"] == "netbox_get_objects" and finished["error"] is False
    assert finished["result_chars"] > 0 and finished["seconds"] >= 0
    answer = "".join(e["text"] for e in seen if e["type"] == "text_delta")
    assert answer.endswith("Akron, Columbus and Dayton.")

    result = seen[-1]
    ollama.script([Text("Again.")])
    as_json = ask_json(chat_env, "again?", "--session", result["session"])
    assert set(result) - {"type"} == set(as_json)
    assert result["status"] == "done" and result["answer"] == answer


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stream_json_cancelled_rolls_back_and_says_so_last(
    sig: signal.Signals, chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("First answer.")])
    session = ask_json(chat_env, "first question")["session"]
    ollama.script([Text("This answer will never finish.", chunk_delay=1.0)])
    proc = spawn(chat_env, "ask", "slow one", "--session", session, "--stream-json")
    while read_line(proc)["type"] != "text_delta":
        pass
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    rest = [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 130
    assert rest[-1]["type"] == "result" and rest[-1]["status"] == "cancelled"
    assert rest[-1]["kept"] is True
    assert {"type": "rolling_back", "turn": 2, "reason": "cancelled"} in rest
    ledger = sqlite3.connect(sessions_dir / f"{session}.sqlite").execute(
        "SELECT status FROM turns ORDER BY number"
    )
    assert [status for (status,) in ledger] == ["done", "cancelled"]


# --- 4. completion ------------------------------------------------------------------------------


def complete(
    env: dict[str, str], shell: str, words: str, *, entry: str = "console script", **more: str
) -> subprocess.CompletedProcess[str]:
    """The program as the shell's completion function runs it (Typer's
    protocol): through the installed `netbox-chat` entry point, or, with
    `entry="typer"`, through the Typer app alone, which answers whatever the
    entry point hands on."""
    load = (
        "from importlib.metadata import entry_points\n"
        "main = entry_points(group='console_scripts')['netbox-chat'].load()\n"
        if entry == "console script"
        else "from netbox_chat.cli.app import main\n"
    )
    probe = (
        "import sys\n"
        "sys.argv = ['netbox-chat']  # the completion variable is named after it\n"
        f"{load}"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    heavy = [m for m in ('langchain_core', 'langgraph', 'deepagents', 'asyncio',\n"
        "             'prompt_toolkit') if m in sys.modules]\n"
        "    print('HEAVY', heavy, 'TYPER' if 'typer' in sys.modules else '', file=sys.stderr)\n"
    )
    extra = {"_NETBOX_CHAT_COMPLETE": f"complete_{shell}", **more}
    if shell == "bash":
        parts = words.split(" ")
        extra |= {"COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    else:
        extra |= {"_TYPER_COMPLETE_ARGS": words}
    return cli({**env, **extra}, program=python(probe), timeout=60)


def test_completion_offers_session_ids_with_titles_without_loading_langchain(
    sessions_dir: Path, chat_env: dict[str, str]
) -> None:
    store = SessionStore(sessions_dir)
    ids = [make_session(store, f"question number {n}") for n in range(3)]
    for command in ("resume", "forget", "export"):
        ran = complete(chat_env, "bash", f"netbox-chat {command} ")
        assert sorted(ran.stdout.split()) == sorted(ids), ran.stderr
        assert "HEAVY []" in ran.stderr
    target = ids[1]
    ran = complete(chat_env, "bash", f"netbox-chat ask q --session {target[:6]}")
    assert ran.stdout.split() == [target]
    zsh = complete(chat_env, "zsh", f"netbox-chat resume {target[:6]}")
    assert zsh_word(f"{target}  -- question number 1") in zsh.stdout
    commands = complete(chat_env, "bash", "netbox-chat ")
    assert {"ask", "ls", "resume", "forget", "export", "config", "doctor"} <= set(
        commands.stdout.split()
    )
    options = complete(chat_env, "bash", "netbox-chat ls --")
    assert {"--grep", "--json", "--profile"} <= set(options.stdout.split())

    elsewhere = sessions_dir.parent / "elsewhere"
    other = make_session(SessionStore(elsewhere), "somewhere else")
    typed = complete(chat_env, "bash", f"netbox-chat resume --sessions-dir {elsewhere} ")
    assert typed.stdout.split() == [other], typed.stderr


def test_a_tab_on_a_session_id_is_answered_before_typer_and_as_typer_would(
    sessions_dir: Path, chat_env: dict[str, str]
) -> None:
    """The entry point answers a session id itself (Typer is never imported:
    that is what keeps a Tab under 100 ms, bench 7), with exactly what the
    Typer app answers for the same line; a title's brackets, colons and quotes
    survive in zsh and fish, which Typer used to render as markup, and a tab
    shows as `\\t` (one line per choice)."""
    store = SessionStore(sessions_dir)
    ids = sorted(
        [
            make_session(store, "why is [eth0] down on dm-akron: it's 'odd'"),
            make_session(store, "list\tthe [bold]sites[/bold] $HOME `x`"),
            make_session(store, "VLANs at dm-nashua"),
        ]
    )
    elsewhere = sessions_dir.parent / "elsewhere"
    make_session(SessionStore(elsewhere), "somewhere else")
    lines = [
        ("bash", "netbox-chat resume "),
        ("bash", f"netbox-chat resume --store {elsewhere} "),
        ("bash", f"netbox-chat export --profile '' --format md {ids[0][:3]}"),
        ("bash", "netbox-chat ask 'a question' -s "),
        ("bash", "netbox-chat forget --yes zz"),
        ("zsh", "netbox-chat resume "),
        ("zsh", f"netbox-chat copy {ids[1][:4]}"),
        ("zsh", "netbox-chat resume zz"),
        ("fish", "netbox-chat export "),
    ]
    for shell, line in lines:
        fish = {"_TYPER_COMPLETE_FISH_ACTION": "get-args"} if shell == "fish" else {}
        fast = complete(chat_env, shell, line, **fish)
        typer_answer = complete(chat_env, shell, line, entry="typer", **fish)
        assert fast.returncode == typer_answer.returncode == 0, fast.stderr
        assert fast.stdout == typer_answer.stdout, (shell, line)
        assert "HEAVY [] \n" in fast.stderr, (shell, line, fast.stderr)  # no Typer either
    zsh = complete(chat_env, "zsh", "netbox-chat resume ").stdout
    # zsh_word's escapes, but the quotes around the whole word
    assert zsh_word("  -- why is [eth0] down on dm-akron: it's 'odd'")[2:-1] in zsh
    assert zsh_word("  -- list\\tthe [bold]sites[/bold] $HOME `x`")[2:-1] in zsh
    fish = complete(chat_env, "fish", "netbox-chat resume ", _TYPER_COMPLETE_FISH_ACTION="get-args")
    assert "\tlist\\tthe [bold]sites[/bold] $HOME `x`\n" in fish.stdout
    # fish first asks whether there is anything to offer, by exit status
    some = complete(chat_env, "fish", "netbox-chat resume ", _TYPER_COMPLETE_FISH_ACTION="is-args")
    none = complete(
        chat_env, "fish", "netbox-chat resume zz", _TYPER_COMPLETE_FISH_ACTION="is-args"
    )
    assert (some.returncode, none.returncode) == (0, 1)
    # whatever is not a session id is Typer's, through the same entry point
    for shell, line in [
        ("bash", "netbox-chat "),
        ("zsh", "netbox-chat resume --"),
        ("bash", "netbox-chat resume --unknown "),
    ]:
        ran = complete(chat_env, shell, line)
        assert "TYPER" in ran.stderr, line
    assert "--sessions-dir" in complete(chat_env, "zsh", "netbox-chat resume --").stdout


def test_completion_reads_the_chats_options_only_where_the_cli_does(
    sessions_dir: Path, chat_env: dict[str, str]
) -> None:
    """The CLI hands the chat's options typed before a command to the
    command, so a Tab there reads them as the command would: the folder an
    option names before the command is where the ids come from. An option
    the command does not take is refused by the CLI (exit 2): no id is
    offered there, and no command that would refuse it. Before a question it
    is `ask`'s, as the CLI reads it."""
    mine = make_session(SessionStore(sessions_dir), "in the default folder")
    elsewhere = sessions_dir.parent / "elsewhere"
    other = make_session(SessionStore(elsewhere), "somewhere else")
    refused = invoke(["-m", "qwen3:8b", "forget", "--yes", other])
    assert refused.exit_code == 2  # the rule completion follows
    fish = {"_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    for line, wanted in [
        (f"netbox-chat --sessions-dir {elsewhere} resume ", [other]),
        (f"netbox-chat --sessions-dir={elsewhere} export {other[:3]}", [other]),
        (f"netbox-chat -m qwen3:8b --sessions-dir {elsewhere} forget --yes ", []),
        ("netbox-chat --think resume ", [mine]),
        (f"netbox-chat --think --sessions-dir {elsewhere} resume ", [other]),
    ]:
        for shell, more in [("bash", {}), ("zsh", {}), ("fish", fish)]:
            for entry in ("console script", "typer"):
                ran = complete(chat_env, shell, line, entry=entry, **more)
                assert ran.returncode == 0, (line, shell, entry, ran.stderr)
                offered = [sid for sid in (mine, other) if sid in ran.stdout]
                assert offered == wanted, (line, shell, entry, ran.stdout)
    # after --netbox-url, only the commands that take it
    names = complete(chat_env, "bash", "netbox-chat --netbox-url http://nb ", entry="typer")
    assert {"ask", "resume", "doctor"} <= set(names.stdout.split())
    assert not {"ls", "forget", "export", "copy"} & set(names.stdout.split())
    for line, wanted in [
        (f"netbox-chat resume --sessions-dir {elsewhere} ", [other]),
        (f"netbox-chat --sessions-dir {elsewhere} 'which sites are there?' -s ", [other]),
        ("netbox-chat --think 'which sites are there?' --session ", [mine]),
    ]:
        for entry in ("console script", "typer"):
            ran = complete(chat_env, "bash", line, entry=entry)
            assert ran.stdout.split() == wanted, (line, entry, ran.stderr)
    commands = complete(chat_env, "bash", "netbox-chat --")
    assert "--sessions-dir" in commands.stdout.split()  # the options themselves still complete


# Titles someone else could have written (a copied session, the team's store):
# every shell metacharacter, quotes, backslashes, substitutions of each shell,
# prompt escapes, and control characters. Each command would leave a file
# named ran-N in the shell's folder if any shell evaluated it.
HOSTILE_TITLES = [
    'x\\" <(touch ran-1) \\"',  # issue 21's r3: closed _arguments' quotes
    "$(touch ran-2) `touch ran-3` ${HOME}",
    "'; touch ran-4; ' \"; touch ran-5; \"",
    "a; touch ran-6 && touch ran-7 | cat > ran-8 < /dev/null &",
    ">(touch ran-9) (touch ran-10) {a,b} ~ * ? [x] # ! ^ %F{red}red%f",
    "\\\\$(touch ran-11)\\ \\`touch ran-12\\` \\\\\\",
    "\u00e9t\u00e9 \u2014 dm-akron: it's [eth0] \\x1b",
]
# Written into the ledger directly, as a row of the shared store could hold it.
RAW_TITLE = "line one\n$(touch ran-13)\r\x1b]0;owned\x07\x1b[2J\x9b31m\ttab"


def hostile_sessions(folder: Path) -> list[str]:
    store = SessionStore(folder)
    ids = [make_session(store, title) for title in HOSTILE_TITLES]
    raw = make_session(store, "to be overwritten")
    with sqlite3.connect(folder / f"{raw}.sqlite") as db:
        db.execute("UPDATE session_meta SET value = ? WHERE key = 'title'", (RAW_TITLE,))
    return [*ids, raw]


def interactive_shell(shell: str, env: dict[str, str], home: Path) -> pexpect.spawn:
    """A real interactive shell with the completion script `--install-completion`
    installs (`_NETBOX_CHAT_COMPLETE=source_SHELL netbox-chat` prints it)."""
    printing = {**env, "_NETBOX_CHAT_COMPLETE": f"source_{shell}"}
    script = cli(printing, program=CONSOLE_SCRIPT, check=True).stdout
    (home / "completion").write_text(script)
    argv = {
        "bash": ["bash", "--norc", "--noprofile", "-i"],
        "zsh": ["zsh", "-f", "-i"],
        "fish": ["fish", "--no-config", "-i"],
    }[shell]
    setup = {
        "bash": "source completion; echo RE''ADY",
        # options a zsh user may have set, under which a substitution is globbed too
        "zsh": "setopt globsubst extendedglob && autoload -U compinit && compinit -u "
        "&& source completion && echo RE''ADY",
        "fish": "source completion; and echo RE''ADY",
    }[shell]
    child = on_a_terminal(env, program=argv, cwd=home, columns=200, lines=60, timeout=30)
    child.sendline(setup)
    child.expect("READY")
    return child


def settle(child: pexpect.spawn) -> None:
    """Drop the line being typed and wait until the shell reads lines again
    (zsh throws away what is typed just after a Ctrl-C, so ask again)."""
    for _ in range(20):
        child.sendcontrol("c")
        child.sendline("echo SET''TLED")
        if child.expect(["SETTLED", pexpect.TIMEOUT], timeout=1) == 0:
            return
    raise AssertionError("the shell does not answer")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_tab_in_a_real_shell_never_evaluates_a_title(
    shell: str, sessions_dir: Path, chat_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue 21, item 3: a title reaches the shell only as data. Real bash,
    zsh and fish, with the script the app installs, list every session
    (zsh and fish with its title, one line each, control characters shown as
    escapes) and complete a unique prefix to its id; no command of any title
    runs."""
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    ids = hostile_sessions(sessions_dir)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **chat_env,
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # netbox-chat
        "fish_greeting": "",
    }
    child = interactive_shell(shell, env, home)
    try:
        child.logfile_read = screen = io.StringIO()
        child.send("netbox-chat resume " + ("\t\t" if shell == "bash" else "\t"))
        child.expect(ids[-1])  # the listing is on the screen
        child.expect(pexpect.TIMEOUT, timeout=2)  # let the rest of it arrive
        listing = screen.getvalue()
        settle(child)
        for sid in ids:
            assert sid in listing
        assert "\x1b]0;owned" not in listing and "\x9b" not in listing
        if shell != "bash":  # bash shows no help beside a choice
            assert "line one\\n$(touch ran-13)\\x0d\\x1b]0;owned\\x07" in listing
            assert "\u00e9t\u00e9 \u2014 dm-akron: it's [eth0] \\x1b" in listing
            assert "%F{red}red%f" in listing
        target = ids[1]
        child.send(f"netbox-chat resume {target[:6]}\t")
        child.expect(f"resume {target}")
        settle(child)
        child.send("netbox-chat resume --sessions-d\t")  # Typer's answer, same format
        child.expect("--sessions-dir")
        settle(child)
        # the chat's options before a command are the command's: ids from that folder
        elsewhere = tmp_path / "elsewhere"
        other = make_session(SessionStore(elsewhere), "somewhere else")
        child.send(f"netbox-chat --sessions-dir {elsewhere} resume {other[:4]}\t")
        child.expect(f"resume {other}")
        settle(child)
        child.send(f"netbox-chat resume --sessions-dir {elsewhere} {other[:4]}\t")
        child.expect(f"{elsewhere} {other}")
        settle(child)
    finally:
        child.close(force=True)
    assert sorted(home.glob("ran-*")) == []  # nothing ran


def test_the_fast_path_knows_every_option_of_the_app() -> None:
    """completion.py's tables repeat the app's options; they must stay equal,
    or a line with a new option would be misread (a value taken for the id)."""
    import typer

    from netbox_chat.cli import completion

    command = typer.main.get_command(app)
    values: set[str] = set()
    flags: set[str] = set()
    id_commands: set[str] = set()
    id_options: set[str] = set()
    for name, sub in [("", command), *command.commands.items()]:  # type: ignore[attr-defined]
        for param in sub.params:
            names = [*param.opts, *param.secondary_opts]
            if isinstance(param, typer.core.TyperArgument):
                if param.name in ("thread", "threads"):
                    id_commands.add(name)
                continue
            (flags if param.is_flag else values).update(names)
            if param.name == "session":
                id_options.update(names)
    flags.update(command.context_settings["help_option_names"])
    assert values == completion.VALUE_OPTIONS
    assert flags == completion.FLAG_OPTIONS
    assert id_commands == completion.SESSION_ID_COMMANDS
    assert id_options == completion.SESSION_ID_OPTIONS


def test_no_help_text_of_the_app_holds_rich_markup() -> None:
    """The shells' completion shows help as written (cli.app.PlainHelpZsh): that
    is only the same as Typer's rendering while no help holds markup. It also
    keeps `--help` from eating a bracket, as it ate `[postgres]` once."""
    import typer

    command = typer.main.get_command(app)
    texts = [command.help or ""]
    for sub in [command, *command.commands.values()]:  # type: ignore[attr-defined]
        texts.append(sub.help or "")
        texts.extend(getattr(param, "help", None) or "" for param in sub.params)
    assert [text for text in texts if "[" in text] == []
    shown = invoke(["--help"], env={"COLUMNS": "200"}).output
    assert "postgres extra" in shown


# --- 5. ls --grep -------------------------------------------------------------------------------


def test_ls_grep_finds_questions_and_answers_and_writes_nothing(sessions_dir: Path) -> None:
    store = SessionStore(sessions_dir)
    by_question = make_session(store, "which VLANs are on DM-Akron?")
    with SessionFile.create(store, model="qwen3:8b") as session:
        number = session.begin_turn("list the sites", base_checkpoint_id=None, base_message_count=0)
        session.finish_turn(number, "done", answer="Sites: dm-akron, 100%_up", message_count=2)
        by_answer = session.id
    make_session(store, "unrelated question")
    env = {"NETBOX_CHAT_SESSIONS": str(sessions_dir), "COLUMNS": "200"}
    before = fingerprint(sessions_dir)
    runner = CliRunner()

    def found(*args: str) -> set[str]:
        ran = runner.invoke(app, ["ls", *args, "--json"], env=env)
        ids = {s["id"] for s in json.loads(ran.stdout)}
        assert ran.exit_code == (0 if ids else 1), ran.output  # as grep: 1 when none matched
        return ids

    assert found("--grep", "akron") == {by_question, by_answer}  # any case
    assert found("-q", "VLANs") == {by_question}
    assert found("--grep", "100%_") == {by_answer}
    assert found("--grep", "0%") == {by_answer}
    assert found("--grep", "_up") == {by_answer}
    assert found("--grep", "%x") == set()  # % and _ are literal
    table = runner.invoke(app, ["ls", "-q", "akron, 100"], env=env)
    assert by_answer in table.stdout and by_question not in table.stdout
    # the line that matched, as grep shows it, in place of the title
    header, row = runner.invoke(app, ["ls", "-q", "AKRON"], env=env).stdout.splitlines()[:2]
    assert header.split()[:2] == ["id", "match"]
    assert row.split(maxsplit=1)[1].startswith("Sites: dm-akron, 100%_up")
    nothing = runner.invoke(app, ["ls", "-q", "routers"], env=env)
    assert nothing.exit_code == 1 and "no session in" in nothing.stderr
    assert fingerprint(sessions_dir) == before


# --- 6. no clutter from turns that never happened ---------------------------------------------


def test_a_new_session_whose_first_turn_fails_is_not_kept(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    down = {**chat_env, "OLLAMA_HOST": closed_port()}
    for _ in range(5):
        ran = invoke(["ask", "which sites?"], env=down)
        assert ran.exit_code == 1
        assert ran.stderr.count("\n") == 1 and "cannot reach Ollama" in ran.stderr
        assert ran.stderr.rstrip().endswith("nothing was kept")
    assert sessions_in(sessions_dir) == []
    as_json = invoke(["ask", "which sites?", "--json"], env=down)
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["kept"] is False
    assert json.loads(as_json.stdout)["session"] is None  # nothing to point at
    assert sessions_in(sessions_dir) == []


def test_an_existing_session_whose_turn_fails_is_kept(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("Hi.")])
    session = ask_json(chat_env, "hello")["session"]
    ran = invoke(
        ["ask", "again", "--session", session], env={**chat_env, "OLLAMA_HOST": closed_port()}
    )
    assert ran.exit_code == 1 and "nothing was kept" not in ran.stderr
    assert sessions_in(sessions_dir) == [f"{session}.sqlite"]


def test_ctrl_c_in_a_new_sessions_first_turn_keeps_nothing(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Delay(30)])
    proc = spawn(chat_env, "ask", "slow first question")
    ollama.wait_for_requests(1, timeout=90)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in err and err.rstrip().endswith("nothing was kept")
    assert sessions_in(sessions_dir) == []


def test_a_first_turn_killed_is_marked_in_ls_and_swept_by_forget(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("Kept.")])
    kept = ask_json(chat_env, "a real question")["session"]
    ollama.script([Stall()])
    proc = spawn(chat_env, "ask", "killed question")
    ollama.wait_for_requests(2, timeout=30)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    (left,) = {p.name.split(".")[0] for p in sessions_dir.glob("*.sqlite")} - {kept}
    env = {**chat_env, "COLUMNS": "200"}
    listing = invoke(["ls"], env=env)
    row = next(line for line in listing.stdout.splitlines() if line.startswith(left))
    assert "(never answered) killed question" in row
    assert "forget --unanswered" in listing.stderr
    swept = invoke(["forget", "--unanswered"], env=env)
    assert swept.exit_code == 0 and left in swept.stdout and kept not in swept.stdout
    assert sessions_in(sessions_dir) == [f"{kept}.sqlite"]
    usage = invoke(["forget"], env=env)
    assert usage.exit_code == 2


def test_a_chat_left_before_any_answer_keeps_nothing(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    from tests.drive.pty import PROMPT, leave
    from tests.drive.pty import spawn as spawn_repl

    ollama.script([Delay(30)])
    child = spawn_repl(chat_env)
    child.sendline("a question that never gets its answer")
    ollama.wait_for_requests(1, timeout=90)
    child.sendintr()
    child.expect("cancelled")
    child.expect(PROMPT)
    said = leave(child)
    assert "nothing was kept" in said and "resume" not in said.split("cancelled")[-1]
    assert sessions_in(sessions_dir) == []

    ollama.script([Text("Kept.")])
    child = spawn_repl(chat_env)
    child.sendline("an answered question")
    child.expect("Kept.")
    child.expect(PROMPT)
    said = leave(child)
    (kept,) = sessions_in(sessions_dir)
    assert f"netbox-chat resume {kept.split('.')[0]}" in said
