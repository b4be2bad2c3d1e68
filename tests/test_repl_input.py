"""What the REPL does with what is typed, through a real pty: text that looks
like markup is printed as typed, a line that hits a bug prints one red line
and the prompt comes back, and keys typed while a Ctrl-C is being handled
reach the next prompt (issue 11, defects 7 and 13, and the per-line guard)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pexpect

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.ollama_server import HTTPError, Reply, ScriptedOllama, Stall, Text
from tests.drive.pty import PROMPT, ended, leave, only_session, plain, spawn


def test_text_that_looks_like_markup_is_printed_as_typed_and_the_repl_goes_on(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    child.sendline("/x[/y]")
    child.expect_exact("unknown command /x[/y]")
    child.expect(PROMPT)
    child.sendline("/rewind [/b]")
    child.expect_exact("/rewind takes a turn number, got '[/b]'")
    child.expect(PROMPT)
    ollama.script([Text("Nothing is in [/dev] [bold]yet[/bold].")])
    child.sendline("what is in [/dev] and [bold]?")
    child.expect_exact("Nothing is in [/dev] [bold]yet[/bold].")
    child.expect(PROMPT)
    ollama.script([HTTPError(500, "runner [/x] failed")])
    child.sendline("and in [/x]?")
    child.expect_exact("Ollama answered 500: runner [/x] failed")
    child.expect(PROMPT)
    child.sendcontrol("u")  # the failed question came back to the line
    child.sendline("/history")
    child.expect_exact("what is in [/dev] and [bold]?")
    child.expect(PROMPT)
    leave(child)
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns] == [
        ("what is in [/dev] and [bold]?", "done"),
        ("and in [/x]?", "failed"),
    ]


def test_a_line_that_hits_a_bug_prints_one_red_line_and_the_prompt_comes_back(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    # Latin-1 bytes from a misconfigured terminal: prompt_toolkit passes them
    # on as surrogates, which SQLite cannot store. Nothing expects that.
    os.write(child.child_fd, b"caf\xe9?\r")
    child.expect("unexpected error \\(UnicodeEncodeError")
    child.expect(PROMPT)
    ollama.script([Text("Three sites.")])
    child.sendline("how many sites?")
    child.expect("Three sites.")
    child.expect(PROMPT)
    shown = leave(child)
    assert "Traceback" not in shown
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns] == [("how many sites?", "done")]


def cancel_with_typeahead(
    child: pexpect.spawn, ollama: ScriptedOllama, keys: str, *then: Reply
) -> None:
    """Ask a question the model never answers, then Ctrl-C followed by `keys`
    in one write: they reach the terminal before the REPL even sees the
    signal, so they are typed, without a doubt, before the prompt is back."""
    ollama.script([Text("Three sites.")])
    child.sendline("how many sites?")
    child.expect("Three sites.")
    child.expect(PROMPT)
    ollama.script([Stall()], *then)
    child.sendline("the question to cancel")
    ollama.wait_for_requests(2)
    child.expect("thinking")
    child.send("\x03" + keys)


def test_ctrl_d_typed_right_after_ctrl_c_leaves_the_repl(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    cancel_with_typeahead(child, ollama, "\x04")
    child.expect("rolled back")
    child.expect("saved; `netbox-chat resume")
    child.expect(pexpect.EOF)
    assert ended(child) == 0
    assert len(ollama.requests) == 2  # the cancelled question was not sent again
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [t["status"] for t in turns] == ["done", "cancelled"]


def test_a_question_typed_right_after_ctrl_c_is_sent_as_typed(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    cancel_with_typeahead(child, ollama, "how many devices?\r", [Text("Two devices.")])
    child.expect("Two devices.")
    child.expect(PROMPT)
    shown = plain(leave(child))
    assert "the question to cancelhow many devices?" not in shown
    assert ollama.requests[-1]["messages"][-1]["content"] == "how many devices?"
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "the question to cancel" not in sent
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns][1:] == [
        ("the question to cancel", "cancelled"),
        ("how many devices?", "done"),
    ]


def test_text_typed_and_pasted_while_an_answer_streams_survives_the_ctrl_c(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Issue 32, item 10: the kernel flushes a terminal's input queue when
    Ctrl-C raises SIGINT unless NOFLSH is set; the keys typed (and a paste
    made) while the answer streamed are written in the same write as the
    Ctrl-C, so they are surely in that queue when it comes."""
    child = spawn(chat_env)
    words = " ".join(f"word{i}" for i in range(60))
    ollama.script([Text(f"Streaming {words} end.", chunk_delay=0.1)])
    child.sendline("the question to cancel")
    child.expect("word3")  # the answer is streaming
    child.send("and the devices?\x1b[200~ pasted line one\npasted line two\x1b[201~\x03")
    child.expect("rolled back")
    child.expect(PROMPT)
    child.expect_exact("pasted line two")  # back on the input line, not lost
    ollama.script([Text("Two devices.")])
    child.send("\r")
    child.expect("Two devices.")
    child.expect(PROMPT)
    leave(child)
    asked = ollama.requests[-1]["messages"][-1]["content"]
    assert asked == "and the devices? pasted line one\npasted line two"
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns] == [
        ("the question to cancel", "cancelled"),
        ("and the devices? pasted line one\npasted line two", "done"),
    ]
