"""The README's and docs/'s examples, run through the real CLI and the REPL in
a pty (issue 25, "Done when": the documentation matches what the tool
prints), and the documentation's own shape (issue 30): the README short and
starting with the two commands, every relative link and anchor resolving.
Each example block is read from the pages themselves (README.md and
docs/**/*.md, wherever the example lives) and compared line by line with what
the command printed, after the parts that differ from run to run are named
alike on both sides: session ids, the NetBox's host, durations, how long ago.
A documented line of `…` stands for lines the example leaves out."""

from __future__ import annotations

import json
import re
import time
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

import pexpect
import pytest
from pytest import MonkeyPatch

from netbox_chat.cli.app import app
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import (
    CutOff,
    HTTPError,
    ScriptedOllama,
    Stall,
    Step,
    StreamError,
    Text,
    Thinking,
    ToolCall,
)
from tests.drive.install import as_installed_from_a_wheel
from tests.drive.process import cli
from tests.drive.pty import PROMPT
from tests.drive.runner import invoke
from tests.drive.screen import chat, on_screen

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
PAGES = {
    path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
}
# Every page, whole, one after another: a code block never spans two pages.
DOCS = "\n\n".join(PAGES.values())
QUESTION = "which devices at DM-Akron are offline?"
OFFLINE = ToolCall(
    "netbox_get_objects",
    {"object_type": "dcim.device", "filters": {"site": "dm-akron", "status": "offline"}},
)
ANSWER = "One device is offline at DM-Akron: `dmi01-akron-sw02`."
# The documentation's own example ids and hosts.
README_IDS = ("5k9dztr9", "5vyf4aa0", "5vyf", "p0nv2y4m", "p0nv", "7k2m9qpx")
README_HOSTS = ("netbox.example.com", "netbox.example:8000", "https://netbox.example")


def example(first_line: str) -> list[str]:
    """The lines of the documented code block whose first line is `first_line`."""
    lines = DOCS.splitlines()
    start = lines.index(first_line)
    assert lines[start - 1].startswith("```"), first_line
    return lines[start : start + lines[start:].index("```")]


def example_starting(prefix: str) -> list[str]:
    """The documented code block whose first line starts with `prefix`."""
    (first,) = [line for line in DOCS.splitlines() if line.startswith(prefix)]
    return example(first)


def normal(line: str, ids: list[str], netbox_url: str) -> str:
    """`line` with what varies from run to run named alike, spaces collapsed."""
    for sid in sorted({*ids, *(sid[:4] for sid in ids), *README_IDS}, key=len, reverse=True):
        line = line.replace(sid, "ID")
    for host in (netbox_url.rstrip("/"), urlsplit(netbox_url).netloc, *README_HOSTS):
        line = line.replace(host, "HOST")
    line = re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "UUID", line)  # tool call ids
    line = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", line)  # model servers
    line = re.sub(r"\d+\.\d+s\b", "Ns", line)
    line = re.sub(r"just now|\d+ min ago", "AGO", line)
    line = re.sub(r'"(thinking_seconds|seconds)": [\d.]+', r'"\1": N', line)
    return " ".join(line.split())


def assert_shown(
    readme: list[str], shown: list[str], ids: list[str], netbox_url: str, *, whole: bool = True
) -> None:
    """Every line of the documented example is printed, in order; with `whole`,
    nothing else is printed between two of them that the example does not
    skip with `…`."""
    wanted = [normal(line, ids, netbox_url) for line in readme]
    got = [normal(line, ids, netbox_url) for line in shown]
    at = 0
    skipping = not whole
    for line in wanted:
        if line == "…":
            skipping = True
            continue
        if skipping:
            assert line in got[at:], (line, got[at:])
            at = got.index(line, at) + 1
        else:
            assert got[at : at + 1] == [line], (line, got[at:])
            at += 1
        skipping = not whole
    assert not whole or at == len(got) or wanted[-1] == "…", got[at:]


def script_the_example(ollama: ScriptedOllama) -> None:
    ollama.script(
        [Thinking("The operator wants offline devices at DM-Akron."), OFFLINE],
        [Thinking("The tool says one device."), Text(ANSWER)],
    )


def test_the_docs_chat_session(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    script_the_example(ollama)
    sites = ["There are three sites:\n\n", "- DM-Akron\n", "- DM-Columbus\n", "- DM-Dayton\n"]
    ollama.script([Text("".join(sites), chunks=sites, chunk_delay=2.0)])
    child, terminal = chat(chat_env, columns=130)
    child.sendline(QUESTION)
    child.expect("dmi01-akron-sw02")
    child.expect(PROMPT)
    time.sleep(0.5)
    child.sendline("/show")
    child.expect("R101")
    child.expect(PROMPT)
    time.sleep(0.5)
    child.sendline("list the sites")
    child.expect("There are three sites")
    time.sleep(0.3)
    child.sendcontrol("c")
    child.expect("rolled back")
    child.expect(PROMPT)
    time.sleep(0.5)
    child.sendcontrol("u")  # the cancelled question came back to the line
    child.sendline("exit")
    child.expect(pexpect.EOF)
    (path,) = sessions_dir.glob("*.sqlite")
    shown = ["$ netbox-chat", *(line for line in terminal.lines() if line)]
    assert_shown(example("$ netbox-chat"), shown, [path.stem], chat_env["NETBOX_URL"])

    listed = invoke(["ls"], env={**chat_env, "COLUMNS": "130"})
    readme = [line for line in example("$ netbox-chat ls") if not line.startswith("sessions in")]
    shown = ["$ netbox-chat ls", *listed.stdout.splitlines(), *listed.stderr.splitlines()]
    assert_shown(readme, shown, [path.stem], chat_env["NETBOX_URL"])


def test_the_docs_ask_examples(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    url = chat_env["NETBOX_URL"]
    script_the_example(ollama)
    asked = invoke(["ask", QUESTION, "--json"], env=chat_env)
    readme_json = example(f'$ netbox-chat ask "{QUESTION}" --json')
    sid = json.loads(asked.stdout)["session"]
    assert_shown(readme_json, [readme_json[0], *asked.stdout.splitlines()], [sid], url)

    script_the_example(ollama)
    child, terminal = on_screen({**chat_env, "COLUMNS": "130"}, QUESTION, columns=130, lines=30)
    child.expect(pexpect.EOF)
    ids = [path.stem for path in sessions_dir.glob("*.sqlite")]
    shown = [f'$ netbox-chat "{QUESTION}"', *(line for line in terminal.lines() if line)]
    assert_shown(example(f'$ netbox-chat "{QUESTION}"'), shown, ids, url)

    piped = cli(chat_env, stdin="how many sites?\n", timeout=60)
    assert piped.returncode == 2
    first = '$ echo "how many sites?" | netbox-chat'
    assert_shown(example(first), [first, *piped.stderr.splitlines()], [], url)

    exported = invoke(["export", sid, "--tool-results"], env=chat_env)
    first = "$ netbox-chat export 5vyf4aa0 --tool-results"
    shown = [first, *exported.stdout.splitlines()]
    assert_shown(example(first), shown, [sid], url)

    elsewhere = invoke(
        ["resume", sid[:4]], env={**chat_env, "NETBOX_URL": "https://staging.example"}
    )
    assert elsewhere.exit_code == 1
    first = "$ NETBOX_URL=https://staging.example netbox-chat resume 5vyf"
    readme = example(first)
    assert_shown(readme[:2], [first, *elsewhere.stderr.splitlines()], [sid], url)

    folder = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        '[profiles.staging]\nnetbox_url = "https://staging.example"\ntoken_env = "STAGING"\n'
    )
    (folder / "config.toml").chmod(0o600)
    staging = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    typed = invoke(["resume", sid[:4], "--profile", "staging"], env={**staging, "STAGING": "nbt_x"})
    assert typed.exit_code == 2  # then the chat needs a terminal, which the runner is not
    shown = [readme[2], typed.stderr.splitlines()[0]]
    assert_shown(readme[2:], shown, [sid], url)


def test_the_docs_resume_recap(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    rows = "".join(f"| {n} | dm-akron-sw{n:03d} | dm-akron | offline |\n" for n in range(1, 201))
    table = "| # | name | site | status |\n|---|---|---|---|\n" + rows
    ollama.script(
        [Text("Three sites.")], [Text(f"200 devices are offline, newest first:\n\n{table}")]
    )
    first = invoke(["ask", "how many sites?", "--json"], env=chat_env)
    sid = json.loads(first.stdout)["session"]
    second = invoke(["ask", "-c", "list every offline device"], env=chat_env)
    assert second.exit_code == 0, second.output
    env = {**chat_env, "COLUMNS": "130"}
    child, terminal = on_screen(env, "resume", sid[:4], columns=130, lines=40)
    child.expect("to see all")
    child.expect(PROMPT)
    time.sleep(0.5)
    shown = ["$ netbox-chat resume p0nv", *terminal.lines()]
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    shown = shown[: max(at for at, line in enumerate(shown) if PROMPT.search(line)) + 1]
    assert_shown(example("$ netbox-chat resume p0nv"), shown, [sid], chat_env["NETBOX_URL"])


def test_the_docs_config_example(chat_env: dict[str, str]) -> None:
    folder = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        "[profiles.prod]\n"
        'netbox_url = "https://netbox.example.com"\n'
        'token_command = ["sh", "-c", "echo nbt_prod"]\n'
        'model = "qwen3:14b"\n'
        'think = "off"\n'
    )
    (folder / "config.toml").chmod(0o600)
    # the environment would win over the profile (the documented example has OLLAMA_HOST only)
    mine = ("NETBOX_URL", "NETBOX_TOKEN", "NETBOX_CHAT_MODEL")
    env = {k: v for k, v in chat_env.items() if k not in mine} | {"COLUMNS": "200"}
    shown = invoke(["config", "--profile", "prod"], env=env)
    assert shown.exit_code == 0, shown.output
    first = "$ netbox-chat config --profile prod"
    lines = [
        line.replace(chat_env["XDG_CONFIG_HOME"], "/home/me/.config").replace(
            chat_env["OLLAMA_HOST"], "http://127.0.0.1:11434"
        )
        for line in shown.stdout.splitlines()
    ]
    assert_shown(example(first), [first, *lines], [], chat_env["NETBOX_URL"])


def test_the_docs_messages_for_ids_and_unreadable_files(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    import sqlite3

    from netbox_chat.store.sessions import SCHEMA_VERSION, SessionStore
    from tests.doubles.stores import make_session

    def said(*args: str) -> list[str]:
        return invoke(list(args), env=chat_env).stderr.splitlines()

    assert said("export", "../x") == example_starting("netbox-chat: '../x' is not a session id")

    sessions_dir.mkdir(parents=True, exist_ok=True)
    (sessions_dir / "zzzzzzzz.sqlite").write_bytes(b"\x00" * 10 + b"a spreadsheet, really")
    with sqlite3.connect(sessions_dir / "xxxxxxxx.sqlite") as foreign:
        foreign.execute("CREATE TABLE recipes (name TEXT)")
    newer = sessions_dir / f"{make_session(SessionStore(sessions_dir))}.sqlite"
    newer = newer.rename(sessions_dir / "wwwwwwww.sqlite")
    with sqlite3.connect(newer) as db:
        db.execute(
            "UPDATE session_meta SET value = ? WHERE key = 'schema_version'",
            (str(SCHEMA_VERSION + 1),),
        )
    shown = [line for sid in ("zzzzzzzz", "xxxxxxxx", "wwwwwwww") for line in said("export", sid)]
    assert shown == example_starting("netbox-chat: session zzzzzzzz is unreadable")


def test_the_docs_messages_for_the_configuration_file(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    folder = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat"
    folder.mkdir(parents=True)
    config = folder / "config.toml"
    config.write_text(
        'default_profile = "lab"\n[profiles.lab]\n'
        'netbox_url = "http://netbox-lab.example:8000"\ntoken_env = "NETBOX_TOKEN_LAB"\n'
    )
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_TOKEN"}
    env |= {"NETBOX_URL": "https://staging.example", "NETBOX_TOKEN_LAB": "nbt_lab"}
    elsewhere = invoke(["ask", "which sites?"], env=env)
    assert elsewhere.exit_code == 1 and ollama.requests == []
    readme = example_starting("netbox-chat: the NetBox token (profile lab, token_env")
    assert elsewhere.stderr.splitlines() == readme

    config.chmod(0o666)
    refused = invoke(["ls"], env=env)
    assert refused.exit_code == 1
    shown = refused.stderr.replace(chat_env["XDG_CONFIG_HOME"], "/home/me/.config")
    assert shown.splitlines() == example_starting("netbox-chat: refusing /home/me/.config/")


def test_the_docs_ls_in_the_default_folder(chat_env: dict[str, str], tmp_path: Path) -> None:
    """`ls` with no folder named: the line naming the default folder, and the
    one NetBox, under the table. Installed as the README's reader installs it
    (pipx: a wheel, no checkout), so the default is the per-user folder."""
    from netbox_chat.store.sessions import SessionStore
    from tests.drive.install import installation

    wheel = installation(tmp_path / "site-packages", checkout=False)

    data = Path(chat_env["XDG_DATA_HOME"])
    store = SessionStore(data / "netbox-chat" / "sessions")
    with store.create(model="qwen3:8b", netbox_url="http://netbox.example:8000") as session:
        number = session.begin_turn(QUESTION, base_checkpoint_id=None, base_message_count=0)
        session.finish_turn(number, "done", answer=ANSWER, message_count=2)
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_CHAT_SESSIONS"}
    elsewhere = tmp_path / "elsewhere"  # no sessions/ folder in or above it
    elsewhere.mkdir()
    listed = cli(
        {**env, "COLUMNS": "130", "PYTHONPATH": str(wheel)}, "ls", cwd=elsewhere, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    shown = (listed.stdout + listed.stderr).replace(str(data), "/home/ana/.local/share")
    shown = re.sub(r"\d+\.\d kB", "28.7 kB", shown)
    readme = example("$ netbox-chat ls")
    assert_shown(readme, ["$ netbox-chat ls", *shown.splitlines()], [session.id], "http://x")


def test_every_command_and_option_the_readme_lists_exists() -> None:
    """ "Using it": each line's command is one of the CLI's, and each option
    it names is in that command's `--help`."""
    block = example(README.split("## Using it\n\n```text\n", 1)[1].splitlines()[0])
    commands = set(typer_commands())
    for line in block:
        words = line.split("#", 1)[0].replace("[", " ").replace("]", " ").replace("|", " ")
        _, *rest = words.split()
        command = rest[0] if rest and rest[0] in commands else None
        options = [w for w in rest if re.fullmatch(r"--?[a-z][a-z-]*", w)]
        helped = invoke([*([command] if command else []), "--help"], env={"COLUMNS": "200"})
        assert helped.exit_code == 0, line
        for option in options:
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", helped.stdout), (
                line,
                option,
            )


def typer_commands() -> list[str]:
    import typer

    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_the_docs_doctor_example(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path, monkeypatch: MonkeyPatch
) -> None:
    """`doctor` with a refused token, the model not loaded, one cold start
    measured, and the sessions folder the default one that exists."""
    from netbox_chat.models.coldstart import record_cold_start, record_path

    ollama.running = []
    state = record_path(chat_env)
    assert state is not None
    record_cold_start(state, "qwen3:8b", 14.0, date(2026, 12, 2))
    data = tmp_path / "data"
    (data / "netbox-chat" / "sessions").mkdir(parents=True)
    as_installed_from_a_wheel(monkeypatch)
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_CHAT_SESSIONS"}
    env |= {"XDG_DATA_HOME": str(data), "NETBOX_TOKEN": "nbt_nope0000000.wrongwrongwrongwrong"}
    monkeypatch.chdir(tmp_path)  # no sessions/ folder in or above it
    shown = invoke(["doctor"], env={**env, "COLUMNS": "300"})
    assert shown.exit_code == 1
    lines = [
        line.replace(str(data), "/home/ana/.local/share")
        .replace(chat_env["OLLAMA_HOST"], "http://127.0.0.1:11434")
        .replace(chat_env["NETBOX_URL"], "http://netbox.example:8000")
        for line in shown.stdout.splitlines()
    ]
    readme = example_starting("✓ Ollama: http://127.0.0.1:11434 (version")
    assert_shown(readme, lines, [], chat_env["NETBOX_URL"])


def test_the_docs_stream_json_example(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    # the example's events, each delta one piece (how text is cut into deltas
    # depends on how fast it is read: paced here so each piece is read alone)
    thought, then = "The operator wants offline devices at DM-Akron.", "The tool says one device."
    pieces = ["One device is ", ANSWER.removeprefix("One device is ")]
    ollama.script(
        [Thinking(thought, chunks=[thought]), OFFLINE],
        [Thinking(then, chunks=[then]), Text(ANSWER, chunks=pieces, chunk_delay=0.5)],
    )
    first = f'$ netbox-chat ask "{QUESTION}" --stream-json'
    streamed = invoke(["ask", QUESTION, "--stream-json"], env=chat_env)
    assert streamed.exit_code == 0, streamed.output
    (path,) = sessions_dir.glob("*.sqlite")
    shown = [first, *streamed.stdout.splitlines()]
    assert_shown(example(first), shown, [path.stem], chat_env["NETBOX_URL"])


def test_the_docs_message_for_a_session_open_elsewhere(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    """Two terminals on one session: the second is refused, exit 4, with the
    holder's pid (this test's process holds the session's lock, as a chat would)."""
    import os

    from netbox_chat.store.sessions import SessionStore
    from tests.doubles.stores import make_session

    store = SessionStore(sessions_dir)
    sid = make_session(store)
    with store.open(sid):
        refused = invoke(["ask", "how many sites?", "--session", sid], env=chat_env)
    assert refused.exit_code == 4
    shown = refused.stderr.replace(f"pid {os.getpid()}", "pid 41235").splitlines()
    readme = example_starting("netbox-chat: session 7k2m9qpx is open in another netbox-chat")
    assert_shown(readme, shown, [sid], chat_env["NETBOX_URL"])


def test_the_docs_message_for_an_id_that_matches_no_session(
    chat_env: dict[str, str], tmp_path: Path, monkeypatch: MonkeyPatch
) -> None:
    """The inline ``no session 'abc' in …`` under "Not a session id", for the
    default sessions folder (the message names the folder it looked in)."""
    (inline,) = re.findall(r"``(no session 'abc' in [^`]*`[^`]*`\))``", DOCS)
    data = tmp_path / "data"
    as_installed_from_a_wheel(monkeypatch)
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_CHAT_SESSIONS"}
    monkeypatch.chdir(tmp_path)  # no sessions/ folder in or above it
    missing = invoke(["export", "abc"], env={**env, "XDG_DATA_HOME": str(data)})
    assert missing.exit_code == 1
    shown = missing.stderr.replace(str(data), "/home/ana/.local/share")
    assert shown.splitlines() == [f"netbox-chat: {inline}"]


def ollama_problems() -> list[str]:
    """The messages of the "Ollama problems" table (troubleshooting), in order."""
    table = DOCS.split("**Ollama problems**", 1)[1].split("\n\n")[1]
    return [
        re.sub(r"^``?(.*?)``?$", r"\1", row.split(" | ")[0][2:]) for row in table.splitlines()[2:]
    ]


CLOSED = "closed port"
SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})
OLLAMA_PROBLEMS = [
    ({"OLLAMA_HOST": CLOSED}, []),
    ({"NETBOX_CHAT_MODEL": "llama9:70b"}, []),
    ({"NETBOX_CHAT_MODEL": "gemma:2b"}, []),
    ({}, [[StreamError("llama runner process has terminated")]]),
    ({"NETBOX_CHAT_TIMEOUT": "1"}, [[Text("One device"), Stall()]]),
    ({}, [[HTTPError(500, "…")]]),  # the table elides Ollama's own words: "…" here too
    ({}, [[Thinking("The operator wants offline devices."), CutOff()]]),
    ({}, [*([SITES] for _ in range(9)), []]),
]


@pytest.mark.parametrize(
    ("row", "env", "replies"), [(n, *p) for n, p in enumerate(OLLAMA_PROBLEMS)]
)
def test_the_docs_ollama_problems(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    row: int,
    env: dict[str, str],
    replies: list[list[Step]],
) -> None:
    """Each row of the table, as `ask` prints it: `turn N failed: MESSAGE`, with
    `; nothing was kept` since a new session's failed first turn is not kept."""
    from tests.doubles.network import closed_port

    assert len(ollama_problems()) == len(OLLAMA_PROBLEMS)
    ollama.script(*replies)
    env = {k: closed_port() if v == CLOSED else v for k, v in env.items()}
    failed = invoke(["ask", QUESTION], env={**chat_env, **env})
    assert failed.exit_code == 1
    said = f"netbox-chat: turn 1 failed: {ollama_problems()[row]}; nothing was kept"
    assert failed.stderr.splitlines() == [said]


def test_the_docs_message_for_a_failed_token_command(
    chat_env: dict[str, str], tmp_path: Path
) -> None:
    """The documented profile prod with `pass show netbox/prod`, and a `pass`
    that does not have it: pass's own words on stderr, exit 1
    (password-store.sh: `die "Error: $path is not in the password store."`,
    and `die` exits 1)."""
    folder = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        '[profiles.prod]\nnetbox_url = "https://netbox.example.com"\n'
        'token_command = "pass show netbox/prod"\n'
    )
    (folder / "config.toml").chmod(0o600)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pass").write_text(
        '#!/bin/sh\necho "Error: $2 is not in the password store." >&2\nexit 1\n'
    )
    (bin_dir / "pass").chmod(0o700)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    shown = invoke(["config", "--profile", "prod"], env=env)
    assert shown.exit_code == 1
    rows = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    assert "netbox_token failed (token_command; see below) profile prod, token_command" in rows
    readme = example_starting("netbox-chat: token_command of profile prod failed:")
    assert shown.stderr.splitlines() == readme


def test_the_docs_doctor_example_on_vllm(chat_env: dict[str, str]) -> None:
    """The first lines of `doctor` on vLLM serving Qwen/Qwen3-8B with
    `--max-model-len 32768`, as the model servers page's vLLM section starts it."""
    from tests.doubles.openai_server import ScriptedOpenAI, server_env

    model = "Qwen/Qwen3-8B"
    vllm = ScriptedOpenAI("vllm", {model: ["completion", "tools"]}, context_lengths={model: 32768})
    vllm.script([Thinking("Say OK."), Text("OK")])  # doctor's probe of tools and reasoning
    with vllm:
        env = {k: v for k, v in chat_env.items() if not k.startswith("OLLAMA")}
        env |= {**server_env(vllm), "NETBOX_CHAT_MODEL": model}
        shown = invoke(["doctor"], env=env)
    lines = [
        line.replace(vllm.base_url, "http://127.0.0.1:8010/v1")
        for line in shown.stdout.splitlines()
    ]
    readme = example_starting("✓ model server: vLLM at")
    assert_shown(readme, lines[: len(readme)], [], chat_env["NETBOX_URL"])


def test_the_docs_netbox_problems(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """`ask` exits 5 with one line when its answer was made without NetBox:
    NetBox down, a wrong token, no token, a token that may not read sites."""
    from tests.doubles.network import closed_port

    down = closed_port()
    envs = [
        {**chat_env, "NETBOX_URL": down, "NETBOX_TIMEOUT": "1"},
        {**chat_env, "NETBOX_TOKEN": "nbt_nope0000000.wrongwrongwrongwrong"},
        {k: v for k, v in chat_env.items() if k != "NETBOX_TOKEN"},
        chat_env,
    ]
    shown = []
    for env in envs:
        netbox.forbidden = {"dcim/sites"} if env is chat_env else set()
        ollama.script([SITES], [Text("I could not read NetBox.")])
        answered = invoke(["ask", "how many sites?"], env=env)
        assert answered.exit_code == 5, answered.output
        shown.append(answered.stderr.splitlines()[-1].replace(down, "http://127.0.0.1:8000"))
    readme = example_starting("netbox-chat: answered without NetBox: Cannot reach NetBox")
    assert shown == readme


def test_the_docs_line_for_a_model_ollama_does_not_have(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """The chat says it above the prompt before any question is asked."""
    (line,) = example_starting("Ollama answered 404: model 'nosuch:1b' not found")
    child, terminal = chat({**chat_env, "NETBOX_CHAT_MODEL": "nosuch:1b"})
    child.expect_exact("checks the setup")
    time.sleep(0.3)
    shown = [text for text in terminal.lines() if text.startswith("Ollama")]
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    assert shown == [line] and ollama.requests == []


def test_the_docs_message_for_a_token_env_that_is_not_set(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Refused before any question is asked, exit 1, naming the variable."""
    (inline,) = re.findall(r"``(netbox-chat: no NetBox token: LAB_TOKEN[^`]*`[^`]*`[^`]*)``", DOCS)
    home = Path(chat_env["XDG_CONFIG_HOME"]).parent  # the file where the docs say: under ~
    chat_env = {**chat_env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    folder = home / ".config" / "netbox-chat"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        f'[profiles.lab]\nnetbox_url = "{chat_env["NETBOX_URL"]}"\ntoken_env = "LAB_TOKEN"\n'
    )
    (folder / "config.toml").chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    refused = invoke(["ask", "how many sites?", "--profile", "lab"], env=env)
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == [inline] and ollama.requests == []


def test_the_docs_inline_messages_for_the_configuration_file(
    chat_env: dict[str, str],
) -> None:
    """A variable that overrides an asked-for profile is a warning; an unknown
    key is one line naming the file's line, exit 1."""
    text = " ".join(DOCS.split())
    (warning,) = re.findall(r"\(`(warning: profile prod: [^`]*)`\)", text)
    (unknown,) = re.findall(r"\(`(config\.toml line 4: unknown key [^`]*)`\)", text)
    config = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[profiles.prod]\nnetbox_url = "https://netbox.example.com"\ntoken_env = "PROD"\n'
    )
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_TOKEN"} | {"PROD": "nbt_prod"}
    warned = invoke(["config", "--profile", "prod"], env=env)
    # then refused: NETBOX_URL with the profile's token is a pairing it never sends
    assert warned.exit_code == 1
    assert warned.stderr.splitlines()[0] == f"netbox-chat: {warning}"

    config.write_text(
        '[profiles.lab]\nnetbox_url = "http://netbox-lab.example:8000"\n'
        'token_env = "NETBOX_TOKEN_LAB"\nwindow = 8192\n'
    )
    refused = invoke(["ls"], env=chat_env)
    assert refused.exit_code == 1
    (line,) = refused.stderr.splitlines()
    start, end = unknown.split("…")  # the page leaves out the known keys
    assert line.startswith(f"netbox-chat: {config.parent}/{start}") and line.endswith(end)


def test_the_docs_note_when_resume_goes_on_with_another_model(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """A session whose last turn asked qwen2.5:7b, resumed with
    NETBOX_CHAT_MODEL=qwen3:8b: one note above the banner."""
    text = " ".join(DOCS.split())
    (note,) = re.findall(r"\(`(netbox-chat: session 5vyf4aa0 last asked [^`]*)`\)", text)
    ollama.script([Text("Three sites.")])
    env = {**chat_env, "NETBOX_CHAT_MODEL": "qwen2.5:7b"}
    first = invoke(["ask", "how many sites?", "--json"], env=env)
    sid = json.loads(first.stdout)["session"]
    child, terminal = on_screen(
        {**chat_env, "COLUMNS": "200"}, "resume", sid, columns=200, lines=30
    )
    child.expect(PROMPT)
    time.sleep(0.5)
    shown = [line for line in terminal.lines() if line]
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    assert normal(shown[0], [sid], "http://x") == normal(note, [sid], "http://x")
    assert shown[1].startswith(f"resumed session {sid}:")  # the note is above the banner


def test_the_docs_note_for_a_turn_whose_process_was_killed(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """The third turn's process is killed inside a NetBox request; the next
    `ask --session` rolls that turn back first and says so."""
    from tests.drive.process import hold_in_a_tool

    (note,) = re.findall(r"`(turn 3 was interrupted and rolled back \([^`]*)`", DOCS)
    ollama.script([Text("Three sites.")], [Text("Still three.")])
    first = invoke(["ask", "how many sites?", "--json"], env=chat_env)
    sid = json.loads(first.stdout)["session"]
    invoke(["ask", "and now?", "--session", sid], env=chat_env)
    holder = hold_in_a_tool(chat_env, ollama, netbox, sid)
    holder.kill()
    holder.wait()
    netbox.delays.clear()
    ollama.script([Text("Three.")])
    again = invoke(["ask", "how many now?", "--session", sid], env=chat_env)
    assert again.exit_code == 0, again.output
    assert again.stderr.splitlines() == [note]


@pytest.mark.long
def test_the_docs_eval_report(
    chat_env: dict[str, str], netbox: NetBoxDouble, ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """The top of the report from the suite's two scripted models, seed 0,
    `--per-template 1`: the eval page leaves out the three tables by tier, type
    and domain and the wrong answers, and says so."""
    from tests.doubles.eval_models import MODELS, built, personas

    ollama.models.update(MODELS)
    ollama.responder = personas(built(netbox, seed=0, per_template=1))
    env = {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs")}
    args = ["eval", "--per-template", "1", "-m", "oracle", "-m", "flawed"]
    result = invoke(args, env=env)
    assert result.exit_code == 0, result.output
    shown = result.stdout.splitlines()
    top = shown[: shown.index("## By tier") - 1]

    def timeless(line: str) -> str:
        line = re.sub(r"run \d{8}-\d{6}", "run RUN", line)
        return re.sub(r"\d+(\.\d+)? s\b", "N s", line)

    readme = example_starting("# netbox-chat eval, run ")
    assert [timeless(line) for line in top] == [timeless(line) for line in readme]


# The documentation's shape (issue 30).

CHAT_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/netbox-chat"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest"


def code_blocks(text: str) -> list[list[str]]:
    """The fenced code blocks of a Markdown page, each as its lines."""
    blocks: list[list[str]] = []
    block: list[str] | None = None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if block is None:
                block = []
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block.append(line.strip())
    return blocks


def prose(text: str) -> list[str]:
    """A page's lines outside code blocks, inline code spans taken out."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(re.sub(r"``.*?``|`[^`]*`", "", line))
    return lines


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation
    dropped, spaces as hyphens, a repeated one numbered (-1, -2)."""
    seen: dict[str, int] = {}
    for line in prose(text.replace("`", "")):
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            if seen[slug]:
                seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def test_the_docs_questions_files(
    chat_env: dict[str, str], netbox: NetBoxDouble, tmp_path: Path, monkeypatch: MonkeyPatch
) -> None:
    """Each documented questions file loads on the NetBox double (with the
    documented empty site added), its other names are listed as the page
    says, and the documented error is the one a bad id gives."""
    netbox.data["dcim/sites"].append({"id": 4, "name": "DM-Empty", "slug": "dm-empty"})
    page = PAGES[ROOT / "docs" / "eval.md"]
    files = [b for b in code_blocks(page) if b[:1] == ["[[question]]"]]
    assert len(files) == 2
    listed = {}
    for n, block in enumerate(files):
        path = tmp_path / f"q{n}.toml"
        path.write_text("\n".join(block) + "\n")
        args = ["eval", "--list", "--json", "--per-template", "0", "--questions", str(path)]
        result = invoke(args, env=chat_env)
        assert result.exit_code == 0, result.output
        listed.update({q["text"]: q for q in json.loads(result.stdout)["questions"]})
    rack = listed["Which devices are in rack R101?"]
    (aliases,) = re.findall(r"`aliases`\s*\(`(\{.*?\})`\)", page, re.S)
    assert rack["aliases"] == json.loads(aliases)
    assert rack["universe"] == ["dmi01-akron-sw02", "Dell R640 (18)"]
    empty = {"yes": True, "exceptions": [], "empty": True}
    assert listed["Are all devices at site DM-Empty active? Name any that are not."][
        "expected"
    ] == (empty)
    assert listed["Is any device at site DM-Empty offline?"]["expected"] == {**empty, "yes": False}
    (message,) = re.findall(r"\(`(mine\.toml: question 1: [^`]*)`\)", page)
    bad = tmp_path / "mine.toml"
    bad.write_text("\n".join(files[1]).replace("id = 17", 'id = "17"') + "\n")
    args = ["eval", "--list", "--per-template", "0", "--questions", "mine.toml"]
    monkeypatch.chdir(tmp_path)
    result = invoke(args, env=chat_env)
    assert result.exit_code == 1
    assert result.stderr.strip() == "netbox-chat: " + " ".join(message.split())


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    """A newcomer reads the README to its end: at most 250 lines, and the two
    commands (start a chat; run the tests) come first, neither with a token
    on the command line."""
    assert len(README.splitlines()) <= 250
    first, second, *_ = code_blocks(README)
    assert (first, second) == ([CHAT_COMMAND], [TEST_COMMAND])
    before = README[: README.index("```")]
    assert len(before.splitlines()) <= 15, "the chat command is not near the top"
    typed = [line for block in code_blocks(README) for line in block]
    assert not [line for line in typed if re.search(r"TOKEN\w*=", line)]


def test_every_relative_link_and_anchor_in_the_docs_resolves() -> None:
    """Each link in README.md and docs/ to a file of the repository names a
    file that is there (never one outside the repository), and each `#anchor`
    a heading of its page."""
    checked = 0
    for page, text in PAGES.items():
        for line in prose(text):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"[a-z]+:", target):
                    continue  # a web address
                path, _, anchor = target.partition("#")
                where = (page.parent / path).resolve() if path else page
                assert where.is_relative_to(ROOT), (page.name, target)
                assert where.exists(), (page.name, target)
                if anchor:
                    assert anchor in anchors(where.read_text()), (page.name, target)
                checked += 1
    assert checked > 30


def test_nothing_points_outside_the_repository() -> None:
    """The documents the code, tests and docs rely on are in docs/: no
    path into a `shared` folder beside the checkout, which a fresh clone lacks."""
    outside = []
    for folder in ("netbox_chat", "tests", "docs", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".md", ".sh", ".toml"):
                for number, line in enumerate(path.read_text().splitlines(), 1):
                    if "shared/" + "facts" in line or "../" + "shared/" in line:
                        outside.append(f"{path.relative_to(ROOT)}:{number}")
    assert "../" + "shared/" not in README
    assert outside == []


def test_the_quick_starts_profile_is_one_the_cli_takes(chat_env: dict[str, str]) -> None:
    """The README's quick start: its config file, written as it says
    (`chmod 600`), with the token in the variable it names, is read as the
    default profile and sends that token to that NetBox."""
    (toml,) = [block for block in code_blocks(README) if block[:1] == ['default_profile = "lab"']]
    config = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("\n".join(toml) + "\n")
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    shown = invoke(["config"], env={**env, "NETBOX_TOKEN_LAB": "nbt_x.y", "COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    rows = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    assert any(row.startswith("profile lab") for row in rows), rows
    assert any(row.startswith("netbox_url http://127.0.0.1:8000 profile lab") for row in rows)
    assert any(row.startswith("netbox_token set") for row in rows), rows


def test_the_layout_in_the_docs_is_the_packages_there_are() -> None:
    """docs/development.md's tree names each package of netbox_chat/, and only
    those, so a newcomer's map does not drift from the code."""
    page = (ROOT / "docs" / "development.md").read_text()
    (tree,) = [block for block in code_blocks(page) if block[:1] == ["netbox_chat/"]]
    listed = {line.split()[0].rstrip("/") for line in tree[1:] if line.split()[0].endswith("/")}
    packages = {p.parent.name for p in (ROOT / "netbox_chat").glob("*/__init__.py")}
    assert listed - {"tests"} == packages
