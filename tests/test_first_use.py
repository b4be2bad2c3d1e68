"""What a new user met following the README from the top in a real terminal
(tmux, 100 and 60 columns): each defect found there, driven the way the user
drove it, through the real REPL in a pty or the real CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from netbox_chat.cli.app import app
from tests.doubles.ollama_server import HTTPError, ScriptedOllama, Text
from tests.drive.process import run
from tests.drive.pty import PROMPT, leave, resume
from tests.drive.runner import invoke
from tests.drive.screen import chat


def test_a_model_ollama_lacks_is_refused_in_one_line(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """`/model nosuch:1b` printed Ollama's 404 twice: once as the refusal and
    once more as the start-up's problem line with its `doctor` hint."""
    child, terminal = chat(chat_env)
    time.sleep(0.3)
    child.sendline("/model nosuch:1b")
    child.expect_exact("Ollama answered 404: model 'nosuch:1b' not found; still qwen3:8b")
    child.expect(PROMPT)
    time.sleep(0.5)  # the build's thread would print its line by now
    leave(child)
    said = [line for line in terminal.lines() if "nosuch:1b' not found" in line]
    assert said == ["Ollama answered 404: model 'nosuch:1b' not found; still qwen3:8b"]


def test_a_chat_option_before_a_command_is_refused_not_dropped(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """`netbox-chat --model qwen2.5:7b ask "…"` asked qwen3:8b, and
    `netbox-chat --sessions-dir DIR ls` listed the default folder: the chat's
    options before a command were dropped without a word."""
    runner = CliRunner()
    asked = runner.invoke(app, ["--model", "qwen2.5:7b", "ask", "which sites?"], env=chat_env)
    assert asked.exit_code == 2
    assert asked.stderr == (
        "netbox-chat: --model before a command would be ignored: put it after the command "
        "(`netbox-chat ask --model …`; `netbox-chat ask --help` lists what it takes)\n"
    )
    assert ollama.requests == [] and not sessions_dir.exists()
    listed = runner.invoke(app, ["--sessions-dir", str(sessions_dir), "ls"], env=chat_env)
    assert listed.exit_code == 2 and "--sessions-dir before a command" in listed.stderr
    # after the command, as `--help` shows them, they work
    ollama.script([Text("Three sites.")])
    asked = runner.invoke(app, ["ask", "which sites?", "--model", "qwen2.5:7b"], env=chat_env)
    assert asked.exit_code == 0 and asked.stdout == "Three sites.\n"
    assert [request["model"] for request in ollama.requests] == ["qwen2.5:7b"]


def test_forget_unanswered_says_what_it_did_in_plain_words(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    """It said `no session never answered to forget`."""
    swept = invoke(["forget", "--unanswered"], env=chat_env)
    assert swept.exit_code == 0
    assert swept.stdout == "no session left unanswered to forget\n"


def test_a_question_after_the_chat_options_is_asked_with_them(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """`netbox-chat -m qwen2.5:7b "which sites?"` (as `llm -m … "q"`) was
    `No such command 'which sites?'`: only a question first was asked."""
    ollama.script([Text("Three sites.")])
    runner = CliRunner()
    # --no-think is a flag: it must not take the question as its value
    asked = runner.invoke(app, ["-m", "qwen2.5:7b", "--no-think", "which sites?"], env=chat_env)
    assert asked.exit_code == 0, asked.output
    assert asked.stdout == "Three sites.\n"
    assert [request["model"] for request in ollama.requests] == ["qwen2.5:7b"]
    ollama.script([Text("Two racks.")])
    joined = runner.invoke(
        app,
        ["-mqwen2.5:7b", "--netbox-url=" + chat_env["NETBOX_URL"], "how many racks?"],
        env=chat_env,
    )
    assert joined.exit_code == 0 and joined.stdout == "Two racks.\n", joined.output
    typo = runner.invoke(app, ["-m", "qwen2.5:7b", "lss"], env=chat_env)
    assert typo.exit_code == 2 and "No such command 'lss'" in typo.output
    assert len(ollama.requests) == 2


def test_resume_at_recaps_the_turn_it_went_back_to_not_an_older_failure(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """`resume ID --at 1` on turns done, failed, done said `turn 2 was
    failed: …` under turn 1's answer, as if it had been the last thing asked:
    turn 3, answered after it, had only been set aside by the rewind."""
    ollama.script([Text("Three sites.")], [HTTPError(500, "boom")], [Text("Two racks.")])
    first = run(chat_env, "ask", "how many sites?", "--json")
    session = json.loads(first.stdout)["session"]
    assert run(chat_env, "ask", "how many cables?", "--session", session).returncode == 1
    assert run(chat_env, "ask", "how many racks?", "--session", session).returncode == 0
    child, shown = resume(chat_env, session, "--at", "1")  # the whole recap
    leave(child)
    assert "rewound to turn 1" in shown and "turn 1: how many sites?" in shown
    assert "how many cables?" not in shown
