"""What a new user met following the README from the top in a real terminal
(tmux, 100 and 60 columns): each defect found there, driven the way the user
drove it, through the real REPL in a pty or the real CLI."""

from __future__ import annotations

import time

from tests.ollama_server import ScriptedOllama
from tests.test_repl_pty import PROMPT, leave
from tests.test_repl_screen import chat


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
