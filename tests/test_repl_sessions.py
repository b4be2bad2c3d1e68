"""The REPL's session commands through the real CLI (issue 40, items 5, 6):
`resume` with no id opens a picker on a terminal, `/rename` and `resume
TITLE`, `/clear`, `/copy`'s OSC 52 sequence as the terminal receives it, the
recap and `/history` keep the † marks, and `/think` lasts with the session."""

from __future__ import annotations

import base64
import io
import json
import re
import time

import pexpect
import pytest

from netbox_chat.cli import clipboard
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import cli
from tests.drive.pty import PROMPT, answered, ended, leave, on_a_terminal, plain, resume, spawn

LOOK = ToolCall(
    "netbox_get_objects", {"object_type": "dcim.device", "filters": {"site": "dm-akron"}}
)
MADE_UP = (
    "DM-Akron has 17 devices, among them dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-sw03."
)


def asked(env: dict[str, str], ollama: ScriptedOllama, question: str, answer: str) -> str:
    """A session of one answered turn, made by `ask`; its id."""
    ollama.script([Text(answer)])
    done = cli(env, "ask", question, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session"])


def test_the_recap_and_history_keep_the_marks_and_the_line_naming_them(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([LOOK], [Text(MADE_UP)])
    done = cli(chat_env, "ask", "how many devices at DM-Akron?", "--json")
    session = json.loads(done.stdout)["session"]
    child, recap = resume(chat_env, session)
    assert "17 devices\u2020" in recap and "dmi01-akron-sw03\u2020" in recap
    assert "dmi01-akron-sw01\u2020" not in recap  # a real name is not marked
    assert "\u2020 2 not in NetBox's replies: 17 devices, dmi01-akron-sw03" in recap
    time.sleep(0.3)
    child.sendline("/history")
    child.expect("not in NetBox's replies")
    shown = plain((child.before or "") + child.after)
    child.expect(PROMPT)
    leave(child)
    assert "17 devices\u2020" in shown
    assert "\u2020 2 not in NetBox's replies" in shown


def test_think_off_lasts_across_exit_and_resume(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    child = spawn(chat_env)
    answered(child, ollama, "how many sites?", "Three sites.")
    child.sendline("/think off")
    child.expect("thinking off for the rest of this session")
    child.expect(PROMPT)
    leave(child)
    session = json.loads(cli(chat_env, "ls", "--json").stdout)[0]["id"]
    child, _ = resume(chat_env, session)
    time.sleep(0.3)
    child.sendline("/think")
    child.expect("thinking off")
    child.expect(PROMPT)
    answered(child, ollama, "and racks?", "Two racks.")
    leave(child)
    assert ollama.requests[0]["think"] is True  # the model's own default before
    assert ollama.requests[-1]["think"] is False  # after the resume, still off
    # `ask --session` goes on with it too; the environment still says otherwise
    ollama.script([Text("One.")], [Text("Two.")])
    assert cli(chat_env, "ask", "--session", session, "one?").returncode == 0
    assert ollama.requests[-1]["think"] is False
    on = {**chat_env, "NETBOX_CHAT_THINK": "on"}
    assert cli(on, "ask", "--session", session, "two?").returncode == 0
    assert ollama.requests[-1]["think"] is True


def test_rename_names_the_session_and_resume_title_reopens_it(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    first = asked(store_env, ollama, "how many sites?", "Three sites.")
    asked(store_env, ollama, "how many racks?", "Two racks.")
    child, _ = resume(store_env, first)
    time.sleep(0.3)
    child.sendline("/rename  Lab audit   March")
    child.expect_exact(f"session {first} is now “Lab audit March”")
    child.expect(PROMPT)
    child.sendline("/rename")
    child.expect("/rename takes a title of one line")
    child.expect(PROMPT)
    leave(child)
    listing = cli(store_env, "ls", "--json").stdout
    assert {s["id"]: s["title"] for s in json.loads(listing)}[first] == "Lab audit March"
    child, recap = resume(store_env, "lab audit march")
    leave(child)
    assert f"resumed session {first}" in recap and "how many sites?" in recap
    missing = cli(store_env, "resume", "no such title")
    assert missing.returncode == 1
    assert "'no such title' is not a session id" in missing.stderr


def test_clear_leaves_the_session_for_a_fresh_one(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    child = spawn(chat_env)
    answered(child, ollama, "how many sites?", "Three sites.")
    child.sendline("/clear")
    child.expect(r"exit or Ctrl-D to leave")  # the fresh session's banner
    shown = plain(child.before or "")
    child.expect(PROMPT)
    first = re.search(r"session (\w+) saved", shown)
    fresh = re.search(r"netbox-chat session (\w+)", shown)
    assert first and fresh and first.group(1) != fresh.group(1)
    answered(child, ollama, "how many racks?", "Two racks.")
    leave(child)
    assert [m["content"] for m in ollama.requests[-1]["messages"] if m["role"] == "user"] == [
        "how many racks?"
    ]  # the fresh session's model saw nothing of the first


def osc52(text: str) -> str:
    return "\x1b]52;c;" + base64.b64encode(text.encode()).decode() + "\x07"


@pytest.mark.parametrize(
    ("env", "doubt"),
    [
        ({"TERM": "xterm-256color"}, None),
        ({"TERM": "tmux-256color", "TMUX": "/tmp/tmux-1000/default,1,0"}, "set-clipboard on"),
        ({"TERM": "dumb"}, "TERM is dumb"),
    ],
    ids=["xterm", "tmux", "dumb"],
)
def test_copy_sends_the_answers_markdown_by_osc_52(
    env: dict[str, str], doubt: str | None, chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    first = "Three sites: **DM-Akron**, `DM-Columbus` and DM-Dayton."
    second = "| rack | site |\n|---|---|\n| R1 | DM-Akron |"
    ollama.script([Text(first)], [Text(second)])
    child = spawn({**chat_env, **env})
    for question in ("which sites?", "which racks?"):
        child.sendline(question)
        child.expect("tokens")
        child.expect(PROMPT)
    time.sleep(0.3)
    child.sendline("/copy")
    child.expect_exact(osc52(second))  # the bytes the terminal receives
    child.expect(PROMPT)
    said = plain(child.before or "")
    assert f"copied turn 2's answer ({len(second)} characters of Markdown)" in said, said
    time.sleep(0.3)
    child.sendline("/copy 1")
    child.expect_exact(osc52(first))
    child.expect_exact("copied turn 1's answer")
    child.expect(PROMPT)
    child.sendline("/copy 7")
    child.expect_exact("/copy: turn 7 has no answer")
    child.expect(PROMPT)
    leave(child)
    if doubt is None:
        assert "OSC 52" not in said and "clipboard only" not in said
    else:
        assert doubt in said


def test_copy_is_bounded_and_cut_at_a_line() -> None:
    line = "x" * 99 + "\n"
    stream = io.StringIO()
    copied = clipboard.copy(line * 1000 + "\x1b]0;title\x07end", stream)
    assert copied.cut and copied.chars == clipboard.LIMIT
    sent = base64.b64decode(stream.getvalue().removeprefix("\x1b]52;c;").removesuffix("\x07"))
    assert sent.decode() == line * (clipboard.LIMIT // 100)
    small = io.StringIO()
    assert not clipboard.copy("a\x1b[31mb\tc\n", small).cut
    assert base64.b64decode(small.getvalue()[7:-1]) == b"a[31mb\tc\n"  # no ESC inside


def test_resume_without_an_id_picks_from_a_list_and_filters_by_title_or_text(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    sites = asked(store_env, ollama, "how many sites?", "Three sites.")
    racks = asked(store_env, ollama, "how many racks?", "Two racks in the cage.")
    cables = asked(store_env, ollama, "how many cables?", "Forty cables.")
    child = on_a_terminal(store_env, "resume", timeout=30)
    child.expect("resume which session")
    child.expect("how many sites")  # drawn last: the oldest
    listed = plain(child.before or "")
    assert listed.index(cables) < listed.index(racks)  # the most recent first
    child.send("cage")  # in an answer, not a title
    child.expect("Two racks in the cage")  # under its title, the line that matched
    time.sleep(0.3)
    child.send("\r")
    child.expect(f"resumed session {racks}")
    child.expect(PROMPT)
    leave(child)
    # Esc leaves the list: nothing opened
    child = on_a_terminal(store_env, "resume", timeout=30)
    child.expect("resume which session")
    time.sleep(0.3)
    child.send("\x1b")
    child.expect(pexpect.EOF)
    assert ended(child) == 0 and "resumed" not in (child.before or "")
    # piped, it is the most recent, as before (and the chat needs a terminal)
    piped = cli(store_env, "resume")
    assert piped.returncode == 2 and "the chat needs a terminal" in piped.stderr
    assert "resume which session" not in piped.stdout
    del sites
