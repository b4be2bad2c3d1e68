"""Which OpenAI-compatible server is behind a base URL, and what it says of the
model: its real window and its version. Cheap to import (httpx only), so
`doctor` uses it without LangChain.

Each server says it differently (docs/facts/model-servers.md,
sections 3.1 and 9; the sources are cited there):

- llama-server: `/v1/models` `owned_by: "llamacpp"`; the window is `GET /props`
  `default_generation_settings.n_ctx`, per slot (what one request gets), and
  `build_info` is its version;
- vLLM: `owned_by: "vllm"`, `max_model_len` on the model; `GET /version`;
- SGLang: `owned_by: "sglang"`, `max_model_len` on the model; `GET /server_info`
  (before, `/get_server_info`) `version`;
- LM Studio: `GET /api/v1/models` `models[].loaded_instances[].config.context_length`
  (its `/v1/models` has no window, lmstudio-bug-tracker #2139);
- Ollama's `/v1`: `GET /api/ps` `models[].context_length` of the loaded model,
  `GET /api/version`.

Everything read here comes from a server: numbers are checked, text is kept
short, and none of it chooses where a request or a key goes (the probes go to
the configured base URL's own host, with the key configured with it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from netbox_chat import tls
from netbox_chat.config import without_userinfo
from netbox_chat.models.liveness import (
    LOADING,
    DataLines,
    Probe,
    Reading,
    answer_probe,
    read_ollama_ps,
    reading,
)


def _read_llama_health(answer: httpx.Response, model: str, body: dict[str, Any]) -> str | None:
    """llama-server's `/health`: 503 `Loading model` while it loads the model,
    200 `{"status": "ok"}` once it serves (tools/server/README.md, "GET
    /health"); it answers from the HTTP thread while a slot reads a prompt."""
    if answer.status_code == 503:
        return f"{LOADING}{model}"
    return reading(body) if answer.status_code == 200 else None


def _read_ok(answer: httpx.Response, model: str, body: dict[str, Any]) -> str | None:
    """Any 200: the server is up, so it is reading the prompt. vLLM's `/health`
    is 200 while the engine lives, 503 once it is dead
    (vllm/entrypoints/serve/instrumentator/health.py); it starts serving only
    once the model is loaded, so it is never "loading"."""
    return reading(body) if answer.status_code == 200 else None


def _read_lmstudio(answer: httpx.Response, model: str, body: dict[str, Any]) -> str | None:
    """LM Studio's `/api/v1/models`: a model with a loaded instance is reading
    the prompt; one without is being loaded (LM Studio loads a model on its
    first request; 2_rest/list.md `loaded_instances`)."""
    if answer.status_code != 200:
        return None
    for entry in _list(json_object(answer).get("models")):
        instances = _list(entry.get("loaded_instances"))
        if instances and (
            entry.get("key") == model or any(i.get("id") == model for i in instances)
        ):
            return reading(body)
    return f"{LOADING}{model}"


@dataclass(frozen=True)
class Dialect:
    """How one server kind speaks, where it differs from the others."""

    name: str  # as `doctor` and errors name the server
    reasoning_field: str
    """The field it reads a turn's reasoning back from on assistant messages:
    `reasoning` on vLLM (reasoning_content was removed, vLLM PR #33402) and
    Ollama (openai/openai.go), `reasoning_content` on llama.cpp
    (common/chat.cpp) and SGLang (protocol.py)."""
    tools_fix: str | None = None
    """The flags that turn tool calling on, where it is off by default
    (vLLM cli_args.py:123,129; SGLang serving.py:227)."""
    busy: tuple[str, Reading] = ("{base}/models", _read_ok)
    """Where it says it is alive while a request gets no byte (`{root}` is the
    base URL without `/v1`), and how its answer reads (liveness.py's rule).
    SGLang's `/health` generates a token and may take 20 s to answer
    (http_server.py health_generate): its `/v1/models`, answered by the HTTP
    process, is the probe."""


DIALECTS: Mapping[str, Dialect] = {
    "llama.cpp": Dialect(
        "llama-server", "reasoning_content", busy=("{root}/health", _read_llama_health)
    ),
    "vllm": Dialect(
        "vLLM",
        "reasoning",
        "--enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen)",
        busy=("{root}/health", _read_ok),
    ),
    "sglang": Dialect(
        "SGLang",
        "reasoning_content",
        "--tool-call-parser NAME (qwen for Qwen)",
    ),
    "lmstudio": Dialect(
        "LM Studio", "reasoning_content", busy=("{root}/api/v1/models", _read_lmstudio)
    ),
    "ollama": Dialect("Ollama /v1", "reasoning", busy=("{root}/api/ps", read_ollama_ps)),
    "unknown": Dialect("OpenAI-compatible server", "reasoning_content"),
}


def busy_probe(base_url: str, dialect: str, api_key: str | None, timeout: float) -> Probe:
    """The liveness Probe of the server at `base_url`: to the configured
    server's own host, with the key configured with it."""
    template, read = DIALECTS.get(dialect, DIALECTS["unknown"]).busy
    url = template.format(root=base_url.removesuffix("/v1"), base=base_url)
    return answer_probe(url, read, timeout, auth_headers(api_key))


_OWNERS = {"llamacpp": "llama.cpp", "vllm": "vllm", "sglang": "sglang"}


@dataclass(frozen=True)
class ServerFacts:
    """What the server behind `base_url` said about itself and `model`."""

    base_url: str
    dialect: str  # a key of DIALECTS
    model: str
    served: tuple[str, ...]  # the model ids `/v1/models` lists
    window: int | None  # the tokens one request may hold, as the server says
    version: str | None = None

    @property
    def speaks(self) -> Dialect:
        return DIALECTS[self.dialect]

    @property
    def serves_model(self) -> bool:
        """llama-server answers with its one model whatever the name; the others
        refuse a name they do not list."""
        return self.model in self.served or self.dialect == "llama.cpp"


def model_family(model: str) -> str | None:
    """The thinking family of a model, from its id (`openai/gpt-oss-20b`,
    `Qwen/Qwen3-8B`, `qwen3:8b`): `gpt-oss` thinks in levels and cannot stop
    (model_info.HARMONY_FAMILIES), `qwen3` thinks or not on a switch
    (`enable_thinking`; not its Coder and Instruct-2507 models, which never
    think); None for any other, whose thinking no server reports."""
    name = model.lower()
    if "gpt-oss" in name:
        return "gpt-oss"
    if "qwen3" in name and not any(word in name for word in ("coder", "instruct")):
        return "qwen3"
    return None


class ServerError(Exception):
    """The server could not be asked: one line naming it and the reason."""


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _client(api_key: str | None, timeout: float) -> httpx.Client:
    """A client for the server's own endpoints, with its key."""
    return httpx.Client(timeout=timeout, headers=auth_headers(api_key), verify=tls.context())


def probe(base_url: str, model: str, api_key: str | None, *, timeout: float) -> ServerFacts:
    """Ask the server at `base_url` which it is and what window `model` has."""
    root = base_url.removesuffix("/v1")
    shown = without_userinfo(base_url, "***@")  # a proxy's password is sent, never shown
    with _client(api_key, timeout) as http:
        try:
            listed = http.get(f"{base_url}/models")
        except httpx.HTTPError as exc:
            raise ServerError(f"cannot reach {shown} ({_reason(exc)})") from exc
        if listed.status_code in (401, 403):
            raise ServerError(
                f"{shown} refused the key ({listed.status_code}): "
                "check api_key_env and the variable it names"
            )
        if listed.status_code != 200:
            raise ServerError(f"{shown}/models answered {listed.status_code}")
        entries = _model_entries(listed)
        served = tuple(str(e["id"])[:200] for e in entries)
        entry = next((e for e in entries if e["id"] == model), entries[0] if entries else {})
        dialect = _OWNERS.get(str(entry.get("owned_by")), "")
        if dialect == "llama.cpp":
            props = _get(http, f"{root}/props")
            settings = props.get("default_generation_settings")
            window = _count(settings.get("n_ctx") if isinstance(settings, dict) else None)
            meta = entry.get("meta")
            if window is None and isinstance(meta, dict):
                window = _count(meta.get("n_ctx"))
            return ServerFacts(
                base_url, dialect, model, served, window, _short(props.get("build_info"))
            )
        if dialect in ("vllm", "sglang"):
            version = (
                _get(http, f"{root}/version").get("version")
                if dialect == "vllm"
                else _sglang_version(http, root)
            )
            return ServerFacts(
                base_url,
                dialect,
                model,
                served,
                _count(entry.get("max_model_len")),
                _short(version),
            )
        lmstudio = _get(http, f"{root}/api/v1/models")
        if isinstance(lmstudio.get("models"), list):
            return ServerFacts(
                base_url, "lmstudio", model, served, _lmstudio_window(lmstudio, model)
            )
        ps = _get(http, f"{root}/api/ps")
        if isinstance(ps.get("models"), list):
            window = next(
                (
                    _count(m.get("context_length"))
                    for m in _list(ps["models"])
                    if model in (m.get("name"), m.get("model"))
                ),
                None,
            )
            version = _get(http, f"{root}/api/version").get("version")
            return ServerFacts(base_url, "ollama", model, served, window, _short(version))
    return ServerFacts(base_url, "unknown", model, served, None)


def served_models(base_url: str, api_key: str | None, *, timeout: float) -> tuple[str, ...]:
    """The model ids the server's `/v1/models` lists, sorted (at most 200,
    each cut to 200 characters); ServerError with a one-line reason."""
    shown = without_userinfo(base_url, "***@")
    try:
        with _client(api_key, timeout) as http:
            listed = http.get(f"{base_url}/models")
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach {shown} ({_reason(exc)})") from exc
    if listed.status_code != 200:
        raise ServerError(f"{shown}/models answered {listed.status_code}")
    return tuple(sorted({str(e["id"])[:200] for e in _model_entries(listed)[:200]}))


def _model_entries(listed: httpx.Response) -> list[dict[str, Any]]:
    """The entries of a `/v1/models` answer that have an id."""
    return [e for e in _list(json_object(listed).get("data")) if isinstance(e.get("id"), str)]


def _sglang_version(http: httpx.Client, root: str) -> object:
    """SGLang's version: `version` of `GET /server_info`, or of
    `/get_server_info`, its name before it was renamed and kept as a deprecated
    alias (sglang srt/entrypoints/http_server.py: both return `"version":
    __version__` beside the server's arguments). SGLang has no `/version`."""
    for path in ("/server_info", "/get_server_info"):
        if version := _get(http, f"{root}{path}").get("version"):
            return version
    return None


def _lmstudio_window(payload: Mapping[str, Any], model: str) -> int | None:
    for entry in _list(payload.get("models")):
        instances = _list(entry.get("loaded_instances"))
        if entry.get("key") == model or any(i.get("id") == model for i in instances):
            for instance in instances:
                config = instance.get("config")
                if isinstance(config, dict) and (length := _count(config.get("context_length"))):
                    return length
    return None


def _get(http: httpx.Client, url: str) -> dict[str, Any]:
    """A JSON object from `url`, or {} (the endpoint is another server's)."""
    try:
        response = http.get(url)
    except httpx.HTTPError:
        return {}
    return json_object(response) if response.status_code == 200 else {}


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object, or {} for anything else: a server's answer is
    untrusted, and a field read from {} is simply missing."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _list(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _count(value: object) -> int | None:
    """A token count a server reported, if it is one (0 means "unknown" on
    llama-server's router, `server-models.cpp`)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 31:
        return None
    return value


def _short(value: object) -> str | None:
    return value[:60] if isinstance(value, str) and value else None


def _reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    return str(exc) or type(exc).__name__


@dataclass(frozen=True)
class Trial:
    """What one short request with a tool showed (`doctor` only: it generates)."""

    refused: str | None  # the server's words when it refused the request
    reasoning_field: str | None  # where reasoning came, if any did


TRIAL_TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer ping.",
        "parameters": {"type": "object", "properties": {}},
    },
}


class Unfinished(httpx.TimeoutException):
    """The trial's answer did not finish in time; the words say how."""


def trial(
    base_url: str,
    model: str,
    api_key: str | None,
    *,
    timeout: float,
    stall: float | None = None,
    until: float | None = None,
) -> Trial:
    """Send "Say OK" with one tool, streamed, at most 16 tokens: vLLM without
    its tool flags refuses it (400), a reasoning model starts with reasoning.

    Each wait is bounded by `timeout`; once the answer began, its progress by
    `stall` (default `timeout`): lines that carry no data (`: keep-alive`
    comments, liveness.DataLines) do not count, so an answer stalled behind
    them ends as a silent one does. `until`
    (time.monotonic()) is the caller's overall deadline. Either is Unfinished."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say OK."}],
        "tools": [TRIAL_TOOL],
        "max_tokens": 16,
        "stream": True,
    }
    with (
        _client(api_key, timeout) as http,
        http.stream("POST", f"{base_url}/chat/completions", json=body) as response,
    ):
        if response.status_code != 200:
            response.read()
            error = json_object(response).get("error")
            words = error.get("message") if isinstance(error, dict) else error
            return Trial(_short(words) or f"HTTP {response.status_code}", None)
        lines = DataLines(sse=True)
        bound = timeout  # until the first data, then `stall`
        progressed = time.monotonic()
        for line in response.iter_lines():
            now = time.monotonic()
            if lines.progress(line.encode() + b"\n"):
                progressed = now
                bound = timeout if stall is None else stall
            elif now - progressed > bound:
                raise Unfinished(f"no data for {bound:g}s, only keep-alives")
            if until is not None and now > until:
                raise Unfinished("not done by the deadline")
            field = _reasoning_in(line)
            if field:
                return Trial(None, field)
    return Trial(None, None)


def _reasoning_in(line: str) -> str | None:
    if not line.startswith("data: {"):
        return None
    try:
        chunk = json.loads(line[6:])
    except ValueError:
        return None
    choices = _list(chunk.get("choices")) if isinstance(chunk, dict) else []
    delta = choices[0].get("delta") if choices else None
    if isinstance(delta, dict):
        for field in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(field), str) and delta[field]:
                return field
    return None
