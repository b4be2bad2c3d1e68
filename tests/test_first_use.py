"""What a new user met following the README from the top in a real terminal
(tmux, 100 and 60 columns): each defect found there, driven the way the user
drove it, through the real REPL in a pty or the real CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

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


def test_a_chat_option_before_a_command_means_what_it_means_after_it(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path, tmp_path: Path
) -> None:
    """`netbox-chat --profile lab ask "…"` was refused (exit 2) while
    `netbox-chat --profile lab` started a chat; before that, `--model
    qwen2.5:7b ask "…"` asked qwen3:8b, the option dropped. The chat's
    options before a command now go to the command, as `git -C DIR status`
    reads them."""
    config = tmp_path / "config" / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    netbox_url, token = chat_env["NETBOX_URL"], chat_env["NETBOX_TOKEN"]
    config.write_text(
        f'[profiles.lab]\nnetbox_url = "{netbox_url}"\ntoken_env = "LAB_TOKEN"\n'
        'model = "qwen2.5:7b"\n'
    )
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env.update(LAB_TOKEN=token, NETBOX_CHAT_MODEL="")
    ollama.script([Text("Three sites.")])
    asked = invoke(["--profile", "lab", "ask", "which sites?", "--json"], env=env)
    assert asked.exit_code == 0, asked.output
    assert [request["model"] for request in ollama.requests] == ["qwen2.5:7b"]  # the profile's
    session = json.loads(asked.stdout)["session"]

    elsewhere = tmp_path / "elsewhere"
    ollama.script([Text("Three sites.")])
    typed = invoke(
        ["--sessions-dir", str(elsewhere), "-m", "gpt-oss:20b", "ask", "sites?"], env=chat_env
    )
    assert typed.exit_code == 0, typed.output
    assert ollama.requests[-1]["model"] == "gpt-oss:20b"
    listed = invoke(["--sessions-dir", str(elsewhere), "ls", "--json"], env=chat_env)
    assert [s["model"] for s in json.loads(listed.stdout)] == ["gpt-oss:20b"]
    there = json.loads(listed.stdout)[0]["id"]
    # resume found it there, and went as far as wanting a terminal for the chat
    resumed = invoke(["--sessions-dir", str(elsewhere), "resume", there], env=chat_env)
    assert resumed.exit_code == 2 and "the chat needs a terminal" in resumed.stderr
    shown = invoke(["-p", "lab", "config"], env=env)
    assert "from --profile" in shown.stdout
    exported = invoke(["-p", "lab", "export", session], env=env)
    assert exported.exit_code == 0 and "which sites?" in exported.stdout


def test_an_option_before_a_command_that_does_not_take_it_is_refused_with_the_reason(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Refused as it is after the command (exit 2), never dropped; typed on
    both sides with two values, refused too."""
    before = invoke(["--netbox-url", "http://nb.example", "ls"], env=chat_env)
    after = invoke(["ls", "--netbox-url", "http://nb.example"], env=chat_env)
    assert before.exit_code == after.exit_code == 2
    assert before.stderr == (
        "netbox-chat: `netbox-chat ls` takes no --netbox-url; `netbox-chat ls --help` lists "
        "what it takes\n"
    )
    own = invoke(["-m", "qwen3:14b", "eval", "--list"], env=chat_env)
    assert own.exit_code == 2
    assert own.stderr.startswith(
        "netbox-chat: --model before `eval` is the chat's; eval's own goes after it "
        "(`netbox-chat eval --model …`)"
    )
    twice = invoke(["-m", "qwen3:14b", "ask", "sites?", "-m", "qwen2.5:7b"], env=chat_env)
    assert twice.exit_code == 2
    assert twice.stderr == (
        "netbox-chat: --model typed twice, qwen3:14b before the command and qwen2.5:7b after "
        "it: give it once\n"
    )
    assert ollama.requests == [] and not sessions_dir.exists()
    # typed alike on both sides, it is one choice
    ollama.script([Text("Three sites.")])
    same = invoke(["-m", "qwen2.5:7b", "ask", "sites?", "-m", "qwen2.5:7b"], env=chat_env)
    assert same.exit_code == 0 and ollama.requests[-1]["model"] == "qwen2.5:7b"


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
    # --no-think is a flag: it must not take the question as its value
    asked = invoke(["-m", "qwen2.5:7b", "--no-think", "which sites?"], env=chat_env)
    assert asked.exit_code == 0, asked.output
    assert asked.stdout == "Three sites.\n"
    assert [request["model"] for request in ollama.requests] == ["qwen2.5:7b"]
    ollama.script([Text("Two racks.")])
    joined = invoke(
        ["-mqwen2.5:7b", "--netbox-url=" + chat_env["NETBOX_URL"], "how many racks?"],
        env=chat_env,
    )
    assert joined.exit_code == 0 and joined.stdout == "Two racks.\n", joined.output
    typo = invoke(["-m", "qwen2.5:7b", "lss"], env=chat_env)
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
