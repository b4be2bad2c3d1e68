"""What Ollama says about a model: its capabilities and its trained context length.

Both come from one `POST /api/show` (Ollama's `server/routes.go`, `ShowHandler`):
`capabilities` lists `completion`, `tools`, `thinking`, `vision`, ... and
`model_info["<architecture>.context_length"]` is the length the model was
trained for. netbox-chat reads it once per session (off the prompt's critical
path: the agent is built on a background thread) to decide the session's
context window and whether the model can think, and `doctor` prints it.

Cheap to import (httpx only), so `doctor` can use it without LangChain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from netbox_chat import tls
from netbox_chat.config import without_userinfo
from netbox_chat.words import number


@dataclass(frozen=True)
class ModelInfo:
    """The facts about one model that change how a session talks to it.

    `capabilities` is None when the server does not report them (Ollama
    before 0.6.4): then nothing may be assumed either way.
    """

    name: str
    capabilities: frozenset[str] | None
    context_length: int | None
    family: str | None = None  # `details.family`: "qwen3", "gptoss", ...

    @property
    def can_think(self) -> bool:
        return self.capabilities is not None and "thinking" in self.capabilities

    @property
    def thinks_in_levels(self) -> bool:
        """gpt-oss: `think` takes low/medium/high and `false` does not stop it.

        Ollama runs these families through its harmony parser (server/routes.go,
        `shouldUseHarmony`); turning thinking off is ignored (ollama #11751)."""
        return self.can_think and self.family in HARMONY_FAMILIES

    @property
    def can_use_tools(self) -> bool | None:
        return None if self.capabilities is None else "tools" in self.capabilities

    def describe(self) -> str:
        """`qwen3:8b (tools, thinking; context 40,960)`, as `doctor` prints it."""
        parts = []
        if self.capabilities is not None:
            shown = sorted(self.capabilities - {"completion"}, key=_shown_order) or ["no tools"]
            parts.append(", ".join(shown))
        if self.context_length:
            parts.append(f"context {number(self.context_length)}")
        return f"{self.name} ({'; '.join(parts)})" if parts else self.name


HARMONY_FAMILIES = frozenset({"gptoss", "gpt-oss"})

# The capabilities netbox-chat cares about first, the rest alphabetically.
_FIRST = ("tools", "thinking")


def _shown_order(capability: str) -> tuple[int, str]:
    return (_FIRST.index(capability) if capability in _FIRST else len(_FIRST), capability)


class ModelInfoError(Exception):
    """`/api/show` could not be read: unreachable server, unknown model, bad answer."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def parse_show(name: str, payload: Mapping[str, Any]) -> ModelInfo:
    """A ModelInfo from the JSON body of `/api/show`."""
    raw_caps = payload.get("capabilities")
    capabilities = frozenset(str(c) for c in raw_caps) if isinstance(raw_caps, list) else None
    info = payload.get("model_info")
    context_length = None
    if isinstance(info, Mapping):
        # The key is prefixed by the architecture (`qwen3.context_length`,
        # `llama.context_length`); the architecture itself is
        # `general.architecture`, but matching the suffix also covers files
        # whose architecture key is missing.
        lengths = [
            int(value)
            for key, value in info.items()
            if str(key).endswith(".context_length") and isinstance(value, int | float)
        ]
        context_length = max(lengths) if lengths else None
    details = payload.get("details")
    family = details.get("family") if isinstance(details, Mapping) else None
    return ModelInfo(name, capabilities, context_length, str(family) if family else None)


def fetch_model_info(ollama_url: str, model: str, *, timeout: float) -> ModelInfo:
    """Ask Ollama about `model`; raises ModelInfoError with a one-line reason."""
    try:
        with httpx.Client(base_url=ollama_url, timeout=timeout, verify=tls.context()) as http:
            response = http.post("/api/show", json={"model": model})
    except httpx.HTTPError as exc:
        raise ModelInfoError(
            f"cannot reach Ollama at {without_userinfo(ollama_url, '***@')} ({exc})"
        ) from exc
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    if response.status_code != 200:
        message = payload.get("error") or response.reason_phrase
        raise ModelInfoError(
            f"Ollama answered {response.status_code}: {message}", status=response.status_code
        )
    return parse_show(model, payload)


def fetch_model_names(ollama_url: str, *, timeout: float) -> tuple[str, ...]:
    """The models Ollama has (`GET /api/tags`, `models[].name`, as `ollama list`
    shows them), sorted; raises ModelInfoError with a one-line reason. Names
    are the server's text: at most 200 of them, each cut to 200 characters."""
    try:
        with httpx.Client(base_url=ollama_url, timeout=timeout, verify=tls.context()) as http:
            response = http.get("/api/tags")
    except httpx.HTTPError as exc:
        raise ModelInfoError(f"cannot reach Ollama at {ollama_url} ({exc})") from exc
    if response.status_code != 200:
        raise ModelInfoError(
            f"Ollama answered {response.status_code} listing its models",
            status=response.status_code,
        )
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    models = payload.get("models") if isinstance(payload, dict) else None
    names = {
        str(entry["name"])[:200]
        for entry in (models if isinstance(models, list) else [])[:200]
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    }
    return tuple(sorted(names))
