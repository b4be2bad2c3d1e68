"""`/model` and `/think` in the real REPL through a pty, on Ollama's API and on
an OpenAI-compatible server (vLLM): `/model` alone lists the server's models,
Tab completes them, a model the server lacks or says cannot use tools is
refused before any question goes to it, `/think` alone shows the setting, and
no line drawn in the chat tells the user to use `--model`, an option the chat
cannot take (issue 32, item 11)."""

from __future__ import annotations

import time

import pytest

from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.openai_server import ScriptedOpenAI
from tests.drive.pty import PROMPT, leave
from tests.drive.screen import answered, chat


@pytest.mark.model_servers("ollama", "vllm")
def test_model_lists_completes_and_refuses_and_think_shows_the_setting(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    on_v1 = isinstance(ollama, ScriptedOpenAI)
    ollama.script([Text("Still three.")])
    child, terminal = chat(chat_env)
    time.sleep(0.3)
    answered(child, "/think", "thinking on")  # shown, not switched
    answered(child, "/think off", "thinking off for the rest of this session")
    answered(child, "/think", "thinking off")

    child.sendline("/model")
    child.expect_exact("the server's models")
    child.expect(PROMPT)
    time.sleep(0.3)
    listed = terminal.lines()
    assert "* qwen3:8b" in listed  # the session's model, marked
    assert {"  gemma:2b", "  qwen2.5:7b", "  gpt-oss:20b"} <= set(listed)

    refused = (
        "gemma:2b cannot use tools (the model server says so), and reading NetBox "
        "takes them: pick another with /model NAME; still qwen3:8b"
    )
    if on_v1:  # no OpenAI-compatible server says which models use tools: one it lacks
        refused = "does not serve nosuch:1b"
        answered(child, "/model nosuch:1b", "still qwen3:8b")
        assert "pick one with /model NAME; still qwen3:8b" in " ".join(terminal.lines())
    else:
        answered(child, "/model gemma:2b", "still qwen3:8b")
    assert refused in " ".join(terminal.lines())  # rich wraps it at the terminal's width

    child.send("/model qwen2.")
    child.send("\t")  # one model starts so: Tab writes it out
    child.expect_exact("5:7b")  # drawn after what was typed
    time.sleep(0.3)
    assert any(line.endswith("> /model qwen2.5:7b") for line in terminal.lines())
    answered(child, "", "model qwen2.5:7b from the next question on")
    answered(child, "and now?", "Still three.")
    leave(child)
    assert [request["model"] for request in ollama.requests] == ["qwen2.5:7b"]
    assert "--model" not in "".join(terminal.lines())


def test_a_model_without_tools_says_to_switch_with_the_chats_own_command(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Started on a model Ollama says cannot use tools, the chat says so at its
    prompt, and the first question's error names the fix the chat takes
    (`/model NAME`), not `--model`."""
    child, terminal = chat({**chat_env, "NETBOX_CHAT_MODEL": "gemma:2b"})
    child.expect_exact("gemma:2b cannot use tools")  # at the prompt, before any question
    time.sleep(0.3)
    child.sendline("how many sites?")
    child.expect_exact("does not support tools")
    child.expect(PROMPT)
    time.sleep(0.3)
    leave(child)
    said = [line for line in terminal.lines() if "tool-capable model" in line]
    assert said and "/model NAME" in " ".join(said)
    assert "--model" not in "".join(terminal.lines())
