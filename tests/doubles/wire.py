"""What a scripted model server was sent, read the same way on every server.

The suites that run once per model server (the `model_servers` marker,
tests/conftest.py) script Ollama's own API and each OpenAI-compatible dialect
alike; only a few request fields are named differently on the wire. Each such
field is read here, once per kind of server, so a test asserts what it means
("the reasoning sent back", "thinking asked off") and never which server
it ran on:

- the model's own reasoning in an assistant message: `thinking` on Ollama's
  /api/chat (langchain-ollama's `_convert_messages_to_ollama_messages`), the
  field that server reads on /v1 (tests/doubles/openai_server.py REASONING_FIELD:
  `reasoning` or `reasoning_content`);
- how the request asked the model to think: Ollama's `think` (true, false or
  a level), /v1's `reasoning_effort` ("none" is off; absent leaves the model's
  default, which for a thinking model is to think; facts 2.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.doubles.ollama_server import ScriptedOllama
from tests.doubles.openai_server import ScriptedOpenAI

OLLAMA_V1 = "ollama-v1"
"""The model_servers marker's name for Ollama's /v1 dialect: "ollama" alone is
Ollama's own API (tests/conftest.py)."""

TOOL_CALL_SHAPES = ("ollama", OLLAMA_V1, "vllm")
"""One model server per way tool calls reach the client: Ollama's API, /v1 with
each call whole in one chunk (Ollama's /v1), /v1 with the arguments in pieces
(vLLM, standing for llama-server, SGLang and LM Studio; openai_server.WHOLE_TOOL_CALLS)."""


def reasoning_field(server: ScriptedOllama) -> str:
    """The message field `server` reads the model's reasoning back from."""
    return server.reasoning_field if isinstance(server, ScriptedOpenAI) else "thinking"


def reasoning_sent_back(server: ScriptedOllama, request: Mapping[str, Any]) -> list[str]:
    """The reasoning of each assistant message of `request` that carried any,
    read from the field `server` reads; anything under another reasoning field
    is left out (the server would not see it)."""
    field = reasoning_field(server)
    return [
        str(m[field])
        for m in request.get("messages") or []
        if m.get("role") == "assistant" and m.get(field)
    ]


def thinking_asked(server: ScriptedOllama, request: Mapping[str, Any]) -> bool | str | None:
    """What `request` asked of the model's thinking: False (off), a level, True
    (on, which only Ollama's API says outright), or None (nothing sent: the
    model's own default)."""
    if isinstance(server, ScriptedOpenAI):
        effort = request.get("reasoning_effort")
        return False if effort == "none" else effort
    think = request.get("think")
    return think if isinstance(think, bool | str) else None
