"""A scripted OpenAI-compatible server on loopback, in any of five dialects, for
driving the real ChatOpenAICompatible (langchain-openai over the openai SDK) in tests.

It is ScriptedOllama with another handler: the same script steps (`Text`,
`Thinking`, `ToolCall`, `Delay`, `Stall`, `StreamError`, `HTTPError`), the same
queue, lifecycle and bookkeeping (`requests`, `seen`, `disconnects`), spoken as
`/v1/chat/completions` server-sent events the way each server speaks them:

    with ScriptedOpenAI("vllm") as server:
        server.script([Thinking("look it up"), ToolCall("lookup", {"q": "x"})])
        ChatOpenAICompatible(base_url=server.base_url, ...)

Each behaviour cites its source; the key is docs/facts/model-servers.md
(`facts` below), whose sections cite the servers' own files.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tests.doubles.ollama_server import (
    DEFAULT_MODELS,
    CutOff,
    Delay,
    HangUp,
    HTTPError,
    KeepAlive,
    ScriptedOllama,
    Stall,
    Step,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    _ClientGone,
    _Handler,
    _NoReply,
    _OutputLimit,
    _ServerStopping,
    fit_prompt,
    output_limit,
)

__all__ = ["DIALECTS", "ScriptedOpenAI", "chat_model_for", "server_env", "server_settings"]

DIALECTS = ("llama.cpp", "vllm", "sglang", "lmstudio", "ollama")

OWNED_BY = {
    # facts 3.1: llama-server `owned_by: "llamacpp"` (server-context.cpp), vLLM "vllm"
    # (serve/engine/protocol.py), SGLang "sglang" (http_server.py); Ollama's /v1/models
    # says "library" (openai/openai.go); LM Studio its organisation (UNVERIFIED value:
    # the client must not depend on it, and does not).
    "llama.cpp": "llamacpp",
    "vllm": "vllm",
    "sglang": "sglang",
    "lmstudio": "organization_owner",
    "ollama": "library",
}

REASONING_FIELD = {
    # facts 2.1: vLLM `reasoning` (protocol.py:86; reasoning_content removed, PR #33402),
    # Ollama /v1 `reasoning` (openai/openai.go:35), llama.cpp `reasoning_content`
    # (common/chat.cpp:233), SGLang `reasoning_content` (protocol.py:1293), LM Studio
    # either, per model (api-changelog 0.3.9 and 0.3.23).
    "llama.cpp": "reasoning_content",
    "vllm": "reasoning",
    "sglang": "reasoning_content",
    "lmstudio": "reasoning_content",
    "ollama": "reasoning",
}

STOPS_DURING_PREFILL = {
    # facts 4: closing the stream stops vLLM (AsyncLLM.generate aborts) and llama-server
    # (1 s poll of should_stop) at any moment, SGLang 2 s after (create_abort_task);
    # LM Studio ("If the model is busy processing the prompt, it will finish first",
    # lmstudio-ai/.github #10) and Ollama (ollama #11889) only notice once the prompt is
    # processed. A leading Delay is the prompt processing here.
    "llama.cpp": True,
    "vllm": True,
    "sglang": True,
    "lmstudio": False,
    "ollama": False,
}

HEADERS_BEFORE_PREFILL = {"vllm", "sglang"}
"""Servers that send their headers before they read the prompt: vLLM answers with
a StreamingResponse at once and its first (role) chunk comes only after queue and
prefill (facts 4: chat_completion/api_router.py:80-86, serving.py:520-600); SGLang
returns a StreamingResponse too (serving_chat.py:2425-2439), whose headers Starlette
sends before the body's first piece. llama-server sends its headers only with the
first result (server-context.cpp:4361-4395), LM Studio and Ollama with their first
chunk. A leading Delay or Stall is that silence."""

WHOLE_TOOL_CALLS = {"ollama"}
"""Ollama sends each tool call whole in one chunk (ollama #13581); llama-server
(common/chat.cpp compute_diffs), vLLM's incremental parsers, SGLang and LM Studio
(0.3.17) stream the arguments in pieces."""

ARGUMENT_PIECE = 7
"""Characters of arguments per streamed delta: small, so a call spans several chunks."""

VLLM_TOOLS_OFF = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)
"""vLLM's 400 for `tools` without the flags (renderers/online_renderer.py:262-290)."""


SESSION_WINDOW = 16_384
"""Each model's window unless a test says otherwise: the window a session gets on
Ollama's own API by default (NETBOX_CHAT_NUM_CTX), so a suite that runs on both
sees the same window."""


def server_settings(server: ScriptedOllama) -> dict[str, Any]:
    """The settings that point netbox-chat at `server`, for resolve_settings."""
    if isinstance(server, ScriptedOpenAI):
        return {"provider": "openai", "base_url": server.base_url}
    return {"ollama_url": server.url}


def chat_model_for(settings: Any) -> Any:
    """The chat model build_runtime would build for `settings`, on either provider."""
    from netbox_chat.models import provider_for

    provider = provider_for(settings)
    return provider.chat_model(settings, provider.served(settings, timeout=5), reasoning=None)


def server_env(server: ScriptedOllama) -> dict[str, str]:
    """The same, as a user's environment."""
    if isinstance(server, ScriptedOpenAI):
        return {"NETBOX_CHAT_PROVIDER": "openai", "NETBOX_CHAT_BASE_URL": server.base_url}
    return {"OLLAMA_HOST": server.url}


def thinking_read(dialect: str, body: Mapping[str, Any]) -> bool | str | None:
    """The thinking a request asks for, as `dialect` reads it (facts 2.1): False
    (off), True (on), a level, or None (the model's default).

    `reasoning_effort` is read by all five: "none" is off (llama.cpp
    server-common.cpp:1340-1380; vLLM protocol.py:645-666 and SGLang
    protocol.py:974-986 turn it into `enable_thinking: false`; Ollama
    openai/openai.go:523-546 into `think: false`; LM Studio UNVERIFIED, facts 10),
    another value is a level. llama-server, vLLM and SGLang also pass
    `chat_template_kwargs` to the template: `enable_thinking` switches Qwen3,
    `reasoning_effort` is gpt-oss's level on llama-server. Ollama and LM Studio
    have no `chat_template_kwargs`."""
    effort = body.get("reasoning_effort")
    template = body.get("chat_template_kwargs") if dialect in TEMPLATE_KWARGS else None
    template = template if isinstance(template, Mapping) else {}
    if effort == "none" or template.get("enable_thinking") is False:
        return False
    level = effort or template.get("reasoning_effort")
    if isinstance(level, str):
        return level
    return True if template.get("enable_thinking") is True else None


TEMPLATE_KWARGS = {"llama.cpp", "vllm", "sglang"}


class ScriptedOpenAI(ScriptedOllama):
    """One OpenAI-compatible server in `dialect` (one of DIALECTS).

    `context_lengths` is each model's window as the server is configured (what its
    window endpoint reports); a longer request gets that server's own answer
    (`_too_long`). `tool_parser=False` is vLLM or SGLang started without their tool
    flags. `include_usage` records, per request, whether usage was asked for.
    """

    def __init__(
        self,
        dialect: str,
        models: Mapping[str, Sequence[str]] | None = None,
        *,
        tool_parser: bool = True,
        reasoning_field: str | None = None,
        **kwargs: Any,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}")
        kwargs.setdefault(
            "context_lengths", {name: SESSION_WINDOW for name in models or DEFAULT_MODELS}
        )
        super().__init__(models, **kwargs)
        self.dialect = dialect
        self.tool_parser = tool_parser
        self.reasoning_field = reasoning_field or REASONING_FIELD[dialect]
        self.stops_during_prefill = STOPS_DURING_PREFILL[dialect]
        self.authorizations: list[str | None] = []
        """The Authorization header of every request, in arrival order: which key came."""
        self.thinking_asked: dict[int, bool | str | None] = {}
        """Per request (same index as `requests`): the thinking it asked for, as this
        server reads it (`thinking_read`): False, True, a level, or None (nothing)."""
        self.retired: set[str] = set()
        """Paths this release does not have (404): an older or newer server."""
        self.gets: list[str] = []
        """The path of every GET, in arrival order: which probes came."""
        self.hung = False
        """Opt in to play a server that answers nothing at all (a hung process, a
        dropped network): every GET from then on is held without an answer until
        the client gives up. `running` (ScriptedOllama's) is which models are
        loaded: None, every one (the default); a list, only those, and the others
        are loading (llama-server's `/health` 503, LM Studio's and Ollama's model
        lists). A leading `Delay` or `Stall` is the silence while it works."""

    def _handler(self) -> type[_Handler]:
        return _OpenAIHandler

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def window(self, model: str) -> int:
        return self.context_lengths.get(model, 4096)

    def loaded(self, model: str) -> bool:
        """Whether `model` is loaded (see `running`)."""
        return self.running is None or model in self.running


class _OpenAIHandler(_Handler):
    @property
    def openai(self) -> ScriptedOpenAI:
        server = self.server.ollama
        assert isinstance(server, ScriptedOpenAI)
        return server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        server = self.openai
        server.authorizations.append(self.headers.get("Authorization"))
        server.gets.append(path)
        if server.hung:
            with contextlib.suppress(_ClientGone, _ServerStopping):
                self.pause(None)
            self.close_connection = True
            return
        dialect = server.dialect
        if path in server.retired:
            self._send(404, b"404 page not found", "text/plain; charset=utf-8")
        elif path in ("/server_info", "/get_server_info") and dialect == "sglang":
            # srt/entrypoints/http_server.py: the server's arguments, its scheduler's
            # facts and `"version": __version__`; /get_server_info is the deprecated
            # name of /server_info. No /version (404).
            self._send_json(
                200,
                {"model_path": next(iter(server.models)), "tp_size": 1, "version": "0.5.23"},
            )
        elif path == "/health" and dialect == "llama.cpp":
            # tools/server/README.md "GET /health": 503 while the model loads, then 200.
            if server.running is not None and not server.running:
                self._error(503, "Loading model", type="unavailable_error")
            else:
                self._send_json(200, {"status": "ok"})
        elif path == "/health" and dialect == "vllm":
            # vllm/entrypoints/serve/instrumentator/health.py: 200, empty, while the
            # engine lives; the app serves only once the model is loaded.
            self._send(200, b"", "application/json")
        elif path == "/v1/models":
            self._send_json(
                200, {"object": "list", "data": [self._model(m) for m in server.models]}
            )
        elif path == "/props" and dialect == "llama.cpp":
            # facts 3.1: the window per slot is default_generation_settings.n_ctx.
            first = next(iter(server.models))
            settings = {"n_ctx": server.window(first), "temperature": 0.8}
            self._send_json(
                200,
                {
                    "default_generation_settings": settings,
                    "total_slots": 1,
                    "build_info": "b7000-0c1e57098",
                },
            )
        elif path == "/version" and dialect == "vllm":
            self._send_json(200, {"version": "0.33.0"})
        elif path == "/api/v1/models" and dialect == "lmstudio":
            # facts 3.1: models[].loaded_instances[].config.context_length (2_rest/list.md).
            models = [
                {
                    "type": "llm",
                    "key": name,
                    "loaded_instances": [
                        {"id": name, "config": {"context_length": server.window(name)}}
                    ]
                    if server.loaded(name)
                    else [],
                    "max_context_length": 131_072,
                }
                for name in server.models
            ]
            self._send_json(200, {"models": models})
        elif path == "/api/ps" and dialect == "ollama":
            # facts 3.1: `context_length` of each loaded model (api/types.go).
            models = [
                {"name": name, "model": name, "context_length": server.window(name)}
                for name in server.models
                if server.loaded(name)
            ]
            self._send_json(200, {"models": models})
        elif path == "/api/version" and dialect == "ollama":
            self._send_json(200, {"version": server.version})
        else:
            self._send(404, b"404 page not found", "text/plain; charset=utf-8")

    def _model(self, name: str) -> dict[str, Any]:
        server = self.openai
        entry: dict[str, Any] = {
            "id": name,
            "object": "model",
            "created": 1_764_000_000,
            "owned_by": OWNED_BY[server.dialect],
        }
        if server.dialect in ("vllm", "sglang"):
            entry["max_model_len"] = server.window(name)  # facts 3.1
        if server.dialect == "llama.cpp":
            entry["meta"] = {"n_ctx": server.window(name), "n_ctx_train": 40_960}
        return entry

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        self.openai.authorizations.append(self.headers.get("Authorization"))
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as err:
            self._error(400, f"invalid JSON body: {err}")
            return
        if path == "/v1/chat/completions":
            self._completions(body)
        else:
            self._send(404, b"404 page not found", "text/plain; charset=utf-8")

    def _error(self, status: int, message: str, **extra: Any) -> None:
        """OpenAI's error shape, which all five use for a refused request
        (llama-server adds `type` and counts, vLLM and SGLang `type: BadRequestError`)."""
        self._send_json(status, {"error": {"message": message, "code": status, **extra}})

    def _completions(self, body: dict[str, Any]) -> None:
        server = self.openai
        index = server._record(body)
        server.thinking_asked[index] = thinking_read(server.dialect, body)
        model = str(body.get("model", ""))
        dialect = server.dialect
        if model not in server.models and dialect != "llama.cpp":  # llama-server serves its one
            self._error(404, f"The model `{model}` does not exist.", type="NotFoundError")
            return
        if not body.get("stream"):
            self._error(400, "scripted server: only streamed completions are scripted")
            return
        if body.get("tools") and dialect == "vllm" and not server.tool_parser:
            self._error(400, VLLM_TOOLS_OFF, type="BadRequestError")
            return
        window = server.window(model)
        # Ollama's /v1 fits the request in silence, as /api/chat does (facts 3.2:
        # server/prompt.go); the others count it and refuse it when too long.
        seen = fit_prompt(
            body.get("messages") or [],
            body.get("tools") or [],
            window if dialect == "ollama" else 1 << 30,
        )
        with server._changed:
            server.seen[index] = seen
        if seen.requested_tokens > window and dialect != "ollama":
            self._too_long(seen.requested_tokens, window)
            return
        try:
            reply = server._next_reply(index, body)
        except _NoReply as err:
            self._error(500, str(err))
            return
        try:
            _EventStream(self, body, seen.evaluated).play(reply)
        except _ClientGone:
            server._record_disconnect(index)
            self.close_connection = True
        except _ServerStopping:
            self.close_connection = True

    def _too_long(self, tokens: int, window: int) -> None:
        """Each server's own answer to a request longer than its window (facts 3.2)."""
        dialect = self.openai.dialect
        if dialect == "llama.cpp":
            # server-common.cpp:68-70, server-context.cpp:3181-3192.
            self._error(
                400,
                f"request ({tokens} tokens) exceeds the available context size "
                f"({window} tokens), try increasing it",
                type="exceed_context_size_error",
                n_prompt_tokens=tokens,
                n_ctx=window,
            )
        elif dialect == "vllm":
            # renderers/params.py:531-548.
            self._error(
                400,
                f"This model's maximum context length is {window} tokens. However, your "
                f"prompt contains {tokens} input tokens. Please reduce the length of the "
                "input prompt.",
                type="BadRequestError",
            )
        elif dialect == "sglang":
            # srt/managers/tokenizer_manager.py:1338-1378.
            self._error(
                400,
                f"The input ({tokens} tokens) is longer than the model's context length "
                f"({window} tokens).",
                type="BadRequestError",
            )
        else:
            # LM Studio answers 200 with an error instead (lmstudio-bug-tracker #2322,
            # 0.4.21); sent here as one event of the stream, with the words LM Studio's
            # engine uses. The event's exact shape is UNVERIFIED (facts 10).
            stream = _EventStream(self, {}, 0)
            stream.event(
                {
                    "error": {
                        "message": f"Trying to keep the first {tokens} tokens when context "
                        f"the overflows. However, the model is loaded with context length of "
                        f"only {window} tokens, which is not enough. Try to load the model "
                        "with a larger context length, or provide a shorter input"
                    }
                }
            )
            stream.end()


class _EventStream:
    """Plays one reply as server-sent events: `data: {chunk}` lines, each a
    `chat.completion.chunk`, then the usage chunk when asked for, then `data: [DONE]`
    (llama-server server-task.cpp:480-512; the same on the others, facts 5).

    Headers go out with the first event: llama-server sends them only after the first
    result (server-context.cpp:4361-4395), so a leading Delay is a silent prefill; vLLM
    and SGLang send them before it (HEADERS_BEFORE_PREFILL).

    The request's `max_completion_tokens` or `max_tokens` is its output limit, with
    each delta one token, reasoning included: once the reply has that many, the server
    stops it and its last chunk says `finish_reason: "length"`, whatever the script had
    left (vLLM vllm/v1/core/sched/utils.py `check_stop`: `num_output_tokens >=
    max_tokens` is FINISHED_LENGTH_CAPPED, sent as "length"; llama-server reads
    `max_tokens` as `n_predict` and ends a slot that reaches it with STOP_TYPE_LIMIT,
    "length"; Ollama's /v1 passes it on as `num_predict`, openai/openai.go, and says
    the runner's `done_reason` "length" as `finish_reason`). A `CutOff` step is that
    limit reached where the script says.
    """

    def __init__(
        self, handler: _OpenAIHandler, body: Mapping[str, Any], prompt_tokens: int
    ) -> None:
        self.handler = handler
        self.server = handler.openai
        self.body = body
        self.model = str(body.get("model", ""))
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 0
        self.limit = output_limit(body.get("max_completion_tokens") or body.get("max_tokens"))
        self.headers_sent = False
        self.called = 0
        self.id = f"chatcmpl-{time.monotonic_ns()}"

    def play(self, reply: Sequence[Step]) -> None:
        try:
            finish = self._generate(reply)
        except _OutputLimit:
            finish = "length"
        if finish is None:
            return
        self._chunk({"index": 0, "delta": {}, "finish_reason": finish})
        if (self.body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            }
            self.event(self._envelope([]) | {"usage": usage})
        self._write(b"data: [DONE]\n\n")
        self.end()

    def _generate(self, reply: Sequence[Step]) -> str | None:
        """Sends the reply's deltas; its finish_reason, or None when it ended
        otherwise (an error event or status)."""
        thinking_off = thinking_read(self.server.dialect, self.body) is False
        parser = self.server.tool_parser
        pending: list[ToolCall] = []
        for position, step in enumerate(reply):
            if pending and not isinstance(step, ToolCall):
                self._tool_calls(pending)
                pending = []
            match step:
                case Thinking():
                    if not thinking_off:  # thinking_read
                        self._pieces(step, self.server.reasoning_field)
                case Text():
                    self._pieces(step, "content")
                case ToolCall() if parser:
                    pending.append(step)
                case ToolCall():
                    # SGLang without --tool-call-parser leaves the model's call in
                    # content (serving_chat.py:1079-1092), as Qwen's template writes it.
                    call = json.dumps({"name": step.name, "arguments": dict(step.args)})
                    self._delta({"content": f"<tool_call>\n{call}\n</tool_call>"})
                case Delay() | Stall() if position == 0 and self.server.dialect in (
                    HEADERS_BEFORE_PREFILL
                ):
                    self._headers()
                    self.handler.pause(step.seconds if isinstance(step, Delay) else None)
                case Delay():
                    if (
                        position == 0
                        and not self.headers_sent
                        and not self.server.stops_during_prefill
                    ):
                        time.sleep(step.seconds)  # busy with the prompt: the socket is not watched
                    else:
                        self.handler.pause(step.seconds)
                case StreamError():
                    self.event({"error": {"message": step.message, "code": 500}})
                    self.end()
                    return None
                case HTTPError():
                    self.handler._error(step.status, step.message)
                    return None
                case Stall():
                    self.handler.pause(None)
                case CutOff():
                    if pending:
                        self._tool_calls(pending)
                    return "length"
                case KeepAlive():
                    if pending:
                        self._tool_calls(pending)
                    while True:  # until the client hangs up (_ClientGone) or the server stops
                        self._write(b": keep-alive\n\n")
                        self.handler.pause(step.every)
                case HangUp():
                    if pending:
                        self._tool_calls(pending)
                    self._headers()
                    self.handler.hang_up()
                    return None
        if pending:
            self._tool_calls(pending)
        return "tool_calls" if self.called else "stop"

    def _pieces(self, step: Text, field: str) -> None:
        for position, piece in enumerate(step.pieces()):
            if position and step.chunk_delay:
                self.handler.pause(step.chunk_delay)
            self._delta({field: piece})

    def _tool_calls(self, calls: list[ToolCall]) -> None:
        if self.server.dialect in WHOLE_TOOL_CALLS:
            self._delta(
                {
                    "tool_calls": [
                        self._call_head(self.called + i, call, json.dumps(dict(call.args)))
                        for i, call in enumerate(calls)
                    ]
                }
            )
            self.called += len(calls)
            return
        for call in calls:
            arguments = json.dumps(dict(call.args))
            self._delta({"tool_calls": [self._call_head(self.called, call, "")]})
            for start in range(0, len(arguments), ARGUMENT_PIECE):
                piece = arguments[start : start + ARGUMENT_PIECE]
                self._delta(
                    {"tool_calls": [{"index": self.called, "function": {"arguments": piece}}]}
                )
            self.called += 1

    def _call_head(self, index: int, call: ToolCall, arguments: str) -> dict[str, Any]:
        return {
            "index": index,
            # Unique per call, as the servers make them (vLLM `chatcmpl-tool-<uuid>`,
            # llama-server a random string): ids repeated across turns would pair
            # a result with the wrong call.
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": call.name, "arguments": arguments},
        }

    def _delta(self, delta: dict[str, Any]) -> None:
        if self.limit is not None and self.completion_tokens >= self.limit:
            raise _OutputLimit
        self.completion_tokens += 1
        self._chunk({"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": None})

    def _chunk(self, choice: dict[str, Any]) -> None:
        self.event(self._envelope([choice]))

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
        }

    def event(self, payload: Mapping[str, Any]) -> None:
        self._write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _headers(self) -> None:
        if not self.headers_sent:
            headers = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}
            self.handler.start_response(200, headers)
            self.headers_sent = True

    def _write(self, data: bytes) -> None:
        self._headers()
        self.handler.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        if not self.headers_sent:
            self._write(b"")
            return
        self.handler.write(b"0\r\n\r\n")
