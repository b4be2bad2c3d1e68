"""The REPL's keys on a real pty (issue 40, item 4): Esc cancels a turn as
Ctrl-C does, a plain Esc at an empty prompt costs the next key nothing,
Alt-Enter and Ctrl-J insert a newline, Enter sends, and /help says so."""

from __future__ import annotations

import time
from pathlib import Path

from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.ollama_server import HTTPError, ScriptedOllama, Text
from tests.drive.pty import (
    PROMPT,
    answered,
    leave,
    only_session,
    plain,
    sent_again,
    spawn,
    streaming,
)


def test_esc_during_an_answer_cancels_rolls_back_and_gives_the_question_back(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    answered(child, ollama, "how many sites?", "Three sites.")
    streaming(child, ollama, "the question to cancel")
    child.send("\x1b")
    child.expect("partial answer discarded")
    child.expect("turn 2 cancelled")
    child.expect("rolled back")
    sent_again(child, ollama, "the question to cancel", "Two devices.")  # as it came back
    leave(child)
    assert ollama.requests[-1]["messages"][-1]["content"] == "the question to cancel"
    sent = " ".join(str(m["content"]) for m in ollama.requests[-1]["messages"])
    assert "word3" not in sent  # the discarded answer never reached the model
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns] == [
        ("how many sites?", "done"),
        ("the question to cancel", "cancelled"),
        ("the question to cancel", "done"),
    ]


def test_an_alt_key_typed_during_an_answer_does_not_cancel_it(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """An Alt-key and an arrow begin with the same byte as Esc; typed during
    an answer they wait for the prompt like any other key."""
    child = spawn(chat_env)
    ollama.script([Text("One two three four five six seven end.", chunk_delay=0.15)])
    child.sendline("count")
    child.expect("two")
    child.send("next one\x1b[D\x1bb")  # ←, then Alt-b: back a character, then a word
    child.expect("end.")
    # x typed where Alt-b left the cursor: before "one"
    sent_again(child, ollama, "next one", "Done.", keys="x\r")
    leave(child)
    assert ollama.requests[-1]["messages"][-1]["content"] == "next xone"
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [t["status"] for t in turns] == ["done", "done"]


def test_a_plain_esc_at_an_empty_prompt_does_not_eat_the_next_key(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Esc begins the Alt-keys; prompt_toolkit's default waits 1.5 s for one,
    so a `d` typed soon after a reflexive Esc was Alt-d (delete a word)."""
    child = spawn(chat_env)
    time.sleep(0.3)
    child.send("\x1b")
    time.sleep(0.2)
    ollama.script([Text("Two devices.")])
    child.send("devices?\r")
    child.expect("Two devices.")
    child.expect(PROMPT)
    leave(child)
    assert ollama.requests[-1]["messages"][-1]["content"] == "devices?"


def test_alt_enter_and_ctrl_j_insert_a_newline_and_enter_sends(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    child = spawn(chat_env)
    ollama.script([Text("Three lines read.")])
    time.sleep(0.3)
    child.send("first line\x1b\rsecond line\nthird line\r")
    child.expect("Three lines read.")
    child.expect(PROMPT)
    leave(child)
    asked = ollama.requests[-1]["messages"][-1]["content"]
    assert asked == "first line\nsecond line\nthird line"


def test_help_lists_the_keys_and_its_think_row_is_aligned(chat_env: dict[str, str]) -> None:
    child = spawn(chat_env)
    child.sendline("/help")
    child.expect("search what you typed")
    shown = plain(child.before or "")
    child.expect(PROMPT)
    leave(child)
    assert "Alt-Enter or Ctrl-J starts a new line" in " ".join(shown.split())
    assert "Esc or Ctrl-C during an answer cancels" in " ".join(shown.split())
    rows = {line.split()[0]: line for line in shown.splitlines() if line.startswith("  /")}
    think = rows["/think"]
    assert think.startswith("  /think [on|off]   let the model")
    assert think.index("let") == rows["/history"].index("the turns")


def test_after_a_failed_turn_the_question_comes_back_to_the_input_line(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    child = spawn(chat_env)
    ollama.script([HTTPError(500, "runner failed")])
    child.sendline("how many sites?")
    child.expect_exact("Ollama answered 500: runner failed")
    sent_again(child, ollama, "how many sites?", "Three sites.")  # back on the input line
    leave(child)
    turns = inspect(sessions_dir, only_session(sessions_dir))["turns"]
    assert [(t["question"], t["status"]) for t in turns] == [
        ("how many sites?", "failed"),
        ("how many sites?", "done"),
    ]
