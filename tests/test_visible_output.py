"""Issue 21, item 13 and its cross-cutting test: a session whose title,
answers, thinking, tool arguments, NetBox data and errors hold terminal
control sequences, Rich markup and shell metacharacters, walked through every
output path of the real CLI (`ask` plain, on a terminal, `--json`,
`--stream-json`; `ls`, `ls --json`; the resume recap, the REPL's own turn,
`/history` and `/thinking` in a pty; `export md|json` to stdout and to a file;
a failed turn's error; `forget`'s question). Nothing reaches the terminal raw,
no markup is interpreted, and what is shown still says what was recorded."""

from __future__ import annotations

import io
import json
import re
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, StreamError, Text, Thinking, ToolCall
from tests.drive.process import cli
from tests.drive.pty import on_a_terminal

# A window title, a screen clear, an 8-bit CSI, a bidi override, BEL, DEL;
# Rich markup; what a shell would run.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\x7f [bold]B[/bold] $(touch x) `id`"
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil\\x7f [bold]B[/bold] $(touch x) `id`"
SITE = {"id": 66, "name": f"DM-{HOSTILE}", "slug": "dm-evil", "status": {"value": "active"}}

# What no output may hold raw: C0 but newline (and tab), DEL, C1, bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# On a terminal the program's own escapes are there too: a style (CSI ... m),
# a cursor move or erase, a private mode, a window title prompt_toolkit sets.
OWN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][0-9];[^\x07\x1b]*\x07|\x1b[()][A-Z0-9]|\r")


def run(
    env: dict[str, str], *args: str, check: bool = True, typed: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI piped, `typed` its stdin (an answer to a question it asks); what
    it wrote, on either stream, holds nothing raw (every output path here is
    fed hostile text, so every run checks it)."""
    ran = cli(env, *args, stdin=typed)
    if check:
        assert ran.returncode == 0, ran.stderr
    assert_nothing_raw(ran.stdout + ran.stderr, ascii(args))
    return ran


def assert_nothing_raw(text: str, where: str) -> None:
    assert RAW.findall(text) == [], where


def assert_shown_on_terminal(screen: str, where: str) -> None:
    """A pty's output: every escape left is one the program made, and the
    hostile sequences are shown as text."""
    assert "owned\x07" not in screen and "\x1b[2J" not in screen, where
    assert RAW.findall(OWN.sub("", screen)) == [], where


@pytest.fixture
def hostile(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """One turn through `ask --stream-json`: the question, the model's tool
    arguments and thinking and answer, and NetBox's site all hostile."""
    netbox.data["dcim/sites"].append(SITE)
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site", "filters": {"q": HOSTILE}})],
        [Thinking(f"thinking {HOSTILE}"), Text(f"The site is **DM-{HOSTILE}**.")],
    )
    ran = run(chat_env, "ask", f"which site is {HOSTILE}?", "--stream-json")
    session = json.loads(ran.stdout.splitlines()[-1])["session"]
    assert "dm-evil" in str(ollama.requests[-1])  # NetBox's site reached the model
    return session, ran


def test_ask_json_and_stream_json_escape_everything_and_lose_nothing(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    hostile: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    session, streamed = hostile
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == (
        f"The site is **DM-{HOSTILE}**."
    )
    assert events[-1]["tool_calls"][0]["args"]["filters"]["q"] == HOSTILE
    ollama.script([Text(f"again {HOSTILE}")])
    ran = run(chat_env, "ask", HOSTILE, "--session", session, "--json")
    assert json.loads(ran.stdout)["answer"] == f"again {HOSTILE}"


def test_ask_plain_and_on_a_terminal_show_controls_and_markup_as_text(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    hostile: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    session, _ = hostile
    ollama.script([Text(f"plain {HOSTILE}")])
    ran = run(chat_env, "ask", "again?", "--session", session)
    assert ran.stdout == f"plain {SHOWN}\n"
    ollama.script([Text(f"on a terminal [see](http://evil.example) {HOSTILE}")])
    child = on_a_terminal(chat_env, "ask", "and on a terminal?", "--session", session, columns=200)
    child.expect(pexpect.EOF)
    screen = child.before or ""
    assert_shown_on_terminal(screen, "ask on a terminal")
    assert "[bold]B[/bold]" in screen and "\\x1b]0;owned\\x07" in screen
    assert "see (http://evil.example)" in OWN.sub("", screen)  # a link says where it goes
    assert "\x1b]8;" not in screen


def test_ls_and_export_show_every_control_character_as_an_escape(
    chat_env: dict[str, str], hostile: tuple[str, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    session, _ = hostile
    ls = run(chat_env, "ls")
    # Piped, `ls` never cuts a title (issue 25, item 7): all of it, shown as escapes.
    assert (
        "which site is \\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil\\x7f [bold]B[/bold] "
        "$(touch x) `id`?"
    ) in ls.stdout
    listed = run(chat_env, "ls", "--json")
    assert json.loads(listed.stdout)[0]["title"] == f"which site is {HOSTILE}?"
    md = run(chat_env, "export", session, "--thinking")
    assert f"which site is {SHOWN}?" in md.stdout and f"thinking {SHOWN}" in md.stdout
    assert f"The site is **DM-{SHOWN}**." in md.stdout
    as_json = run(chat_env, "export", session, "--format", "json")
    (turn,) = json.loads(as_json.stdout)["turns"]
    assert turn["question"] == f"which site is {HOSTILE}?"
    assert turn["tool_calls"][0]["args"]["filters"]["q"] == HOSTILE
    target = tmp_path / "transcript.md"
    run(chat_env, "export", session, "-o", str(target))
    assert_nothing_raw(target.read_text(), "export -o")


def test_a_failed_turn_and_forget_show_the_servers_words_and_the_title_as_text(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    hostile: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    session, _ = hostile
    ollama.script([StreamError(f"model crashed {HOSTILE}")])
    failed = run(chat_env, "ask", "and now?", "--session", session, check=False)
    assert failed.returncode == 1
    assert "model crashed \\x1b]0;owned" in failed.stderr
    forget = run(chat_env, "forget", session, check=False, typed="n\n")
    assert forget.returncode == 1
    assert f"(which site is {SHOWN}?)" in forget.stdout


def test_resume_recap_repl_turn_history_and_thinking_in_a_pty(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    hostile: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    session, _ = hostile
    child = on_a_terminal(chat_env, "resume", session, columns=200)  # no hostile line wrapped
    child.logfile_read = shown = io.StringIO()
    child.expect(r"netbox\S*>")
    recap = child.before or ""
    child.expect("exit or Ctrl-D to leave")  # the rendered answer, drawn above the prompt
    recap += (child.before or "") + child.after
    child.expect(r"netbox\S*>")
    assert_shown_on_terminal(recap, "resume's recap")
    assert "which site is \\x1b]0;owned" in recap and "[bold]B[/bold]" in recap
    assert "The site is DM-\\x1b]0;owned" in re.sub(r"\x1b\[[0-9;]*m", "", recap)
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site", "filters": {"q": HOSTILE}})],
        [Thinking(f"mulling {HOSTILE}"), Text(f"In the REPL: {HOSTILE}")],
    )
    child.sendline("once more?")
    child.expect("turn 2 ·")
    child.expect(r"netbox\S*>")
    for command in ("/history", "/thinking"):
        child.sendline(command)
        child.expect(r"netbox\S*>")
    time.sleep(0.3)
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    screen = shown.getvalue()
    assert_shown_on_terminal(screen, "the REPL")
    assert "In the REPL: \\x1b]0;owned" in screen  # the answer, as the REPL rendered it
    assert "mulling \\x1b]0;owned" in screen  # /thinking
    assert '(object_type="dcim.site", filters={"q": "\\u001b]0;owned' in screen  # tool line
