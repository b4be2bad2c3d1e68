"""`ask` shaped like the tools operators already use: the question from stdin,
an empty one refused, `netbox-chat "question"`, `--continue`, `--ephemeral`,
`--version`, and in a terminal the answer and tool lines streamed as in the
REPL, with the session id and how to go on."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.doubles.network import closed_port_number as closed_port
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.process import cli, run, words
from tests.drive.pty import ended, in_a_shell, leave, plain, run_in_pty, spawn
from tests.drive.runner import invoke


def test_the_question_comes_from_stdin_and_an_empty_one_is_refused(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("Three sites.")], [Text("Still three.")])
    piped = run(chat_env, "ask", "-", "--json", stdin="how many\nsites are there?\n")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["answer"] == "Three sites."
    assert "how many\\nsites are there?" in json.dumps(ollama.requests[0]["messages"])

    absent = run(chat_env, "ask", stdin="and now?")  # no argument, stdin a pipe
    assert (absent.returncode, absent.stdout) == (0, "Still three.\n"), absent.stderr
    assert absent.stderr == ""  # not a terminal: nothing but the answer

    for args, stdin in ((["ask", ""], ""), (["ask", "-"], " \n"), (["ask"], "")):
        empty = run(chat_env, *args, stdin=stdin)
        assert (empty.returncode, empty.stderr) == (2, "netbox-chat: the question is empty\n")
    assert len(ollama.requests) == 2 and len(list(sessions_dir.glob("*.sqlite"))) == 2


def test_a_question_without_a_command_is_asked_and_continue_takes_the_latest(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Three sites.")], [Text("Akron, Berlin, Cairo.")])
    first = run(chat_env, "which sites are there?", "--json")
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session"]
    again = run(chat_env, "ask", "--continue", "name them", "--json")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["session"], json.loads(again.stdout)["turn"]) == (session, 2)
    assert "which sites are there?" in json.dumps(ollama.requests[-1]["messages"])

    typo = run(chat_env, "lss")  # one word that is no command: a usage error, not a question
    assert typo.returncode == 2 and "No such command 'lss'" in typo.stderr
    version = run(chat_env, "--version")
    assert version.returncode == 0 and re.fullmatch(r"netbox-chat \d+\.\d+\.\d+\n", version.stdout)


def test_ephemeral_keeps_nothing(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("Three sites.")])
    result = invoke(["ask", "how many sites?", "--ephemeral", "--json"], env=chat_env)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert (answer["answer"], answer["session"], answer["kept"]) == ("Three sites.", None, False)
    assert not any(sessions_dir.glob("*.sqlite*"))
    both = invoke(["ask", "x y", "--ephemeral", "-c"], env=chat_env)
    assert both.exit_code == 2


def test_ask_in_a_terminal_streams_like_the_repl_and_says_how_to_go_on(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Text("# Sites\n\nThere are **three** sites.")],
    )
    status, screen = run_in_pty(chat_env, "ask", "how many sites?")
    assert status == 0, screen
    (path,) = sessions_dir.glob("*.sqlite")
    assert '→ netbox_get_objects(object_type="dcim.site")' in screen
    assert "There are three sites." in screen and "**" not in screen  # rendered Markdown
    # a heading drawn from the left edge: padded after, to the 100 columns, not centred
    assert "Sites" + " " * 95 in screen and "# Sites" not in screen
    assert "turn 1 · tokens" in screen
    assert (
        f'session {path.stem}: `netbox-chat ask -c "…"` goes on, '
        f"`netbox-chat resume {path.stem}` opens it"
    ) in screen


def test_ask_piped_from_a_terminal_prints_the_answer_alone_and_errors_after_it(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """`netbox-chat ask "q" | cat` in a terminal: stdout is a pipe, so the
    answer is all there is, as `llm "q" | cat` prints it; the session hint,
    which only stderr (the terminal) would show, used to land above the
    answer, written while the answer still sat in stdout's buffer. A line that
    must be said (NetBox was down) comes after the answer, also when both
    streams go to one file."""
    import pexpect

    ollama.script([Text("There are three sites.")])
    ask = words("ask", "how many sites?")
    child = in_a_shell(chat_env, f"{ask} | cat", columns=80, lines=24, timeout=30)
    child.expect(pexpect.EOF, timeout=60)
    screen = (child.before or "").replace("\r\n", "\n")
    assert ended(child) == 0, screen
    assert screen == "There are three sites.\n"  # no hint, no figures: stdout is not a terminal

    down = {**chat_env, "NETBOX_URL": f"http://127.0.0.1:{closed_port()}", "NETBOX_TIMEOUT": "1"}
    down.pop("PYTHONUNBUFFERED", None)  # stdout buffered, as a user's Python has it
    ollama.script([ToolCall("netbox_get_objects", {"object_type": "dcim.site"})], [Text("Three.")])
    both = cli(down, "ask", "how many sites?", stderr=subprocess.STDOUT, timeout=60)  # `> log 2>&1`
    assert both.returncode == 5
    answer, outage = both.stdout.splitlines()
    assert answer == "Three." and outage.startswith("netbox-chat: answered without NetBox:")


def test_a_window_too_small_for_one_turn_refuses_before_asking_with_the_numbers(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    small = {**chat_env, "NETBOX_CHAT_NUM_CTX": "2048"}
    result = invoke(["ask", "how many sites?"], env=small)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        "netbox-chat: the context window (2,048 tokens) cannot hold one turn: the system "
        "prompt and tools 2,240, the question 6, one NetBox result 800, the answer 1,024, "
        "4,070 in all; raise NETBOX_CHAT_NUM_CTX to 4,096 (`netbox-chat doctor` checks it); "
        "nothing was kept"
    ]
    assert ollama.requests == []  # the model never saw a question it would lose
    assert not any(sessions_dir.glob("*.sqlite"))


def test_dash_c_with_a_question_continues_the_latest_session_as_llm_c_does(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Issue 32, item 12: `netbox-chat -c "…"` is `ask --continue "…"`, with
    the chat's options before or after it, and one word is a question too."""
    ollama.script([Text("Three sites.")], [Text("Akron, Berlin, Cairo.")], [Text("Yes.")])
    first = run(chat_env, "which sites are there?", "--json")
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session"]
    again = run(chat_env, "-c", "name them", "--json")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["session"], json.loads(again.stdout)["turn"]) == (session, 2)
    assert "which sites are there?" in json.dumps(ollama.requests[-1]["messages"])
    model = chat_env.get("NETBOX_CHAT_MODEL", "qwen3:8b")
    third = run(chat_env, "-m", model, "--continue", "sure?")
    assert (third.returncode, third.stdout) == (0, "Yes.\n"), third.stderr
    assert "name them" in json.dumps(ollama.requests[-1]["messages"])
    assert len(list(sessions_dir.glob("*.sqlite"))) == 1
    chat = spawn(chat_env, "-c")  # alone: the chat, on that session (as `claude -c`)
    assert f"resumed session {session}" in plain(chat.before or "")
    leave(chat)
