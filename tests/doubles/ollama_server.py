"""A scripted Ollama server on loopback, for driving the real ChatOllama client in tests.

Mocking ChatOllama would test our assumptions about it, not the client we ship: the HTTP
path, NDJSON streaming, tool-call parsing, token counts and what happens when a stream is
cancelled halfway all live below the mock.  This server speaks the slice of Ollama's HTTP
API that langchain-ollama 1.1.0 (through ollama-python 0.6.3) uses, and plays back replies
a test has scripted, step by step, so every edge case is deterministic and fast.

    with ScriptedOllama() as ollama:
        ollama.script([Text("Hello **world**")], [ToolCall("lookup", {"q": "x"})])
        llm = ChatOllama(base_url=ollama.url, model="qwen3:8b")

It also runs as a process for manual trials and benchmarks:

    python -m tests.doubles.ollama_server --script replies.json [--port N] [--loop]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import re
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_CONTEXT_LENGTHS",
    "DEFAULT_MODELS",
    "DEFAULT_NUM_CTX",
    "GFK_LIST",
    "HARMONY_SUFFIX",
    "RACK_BY_NAME",
    "STATUS_IN_DISPLAY_CASE",
    "TENANT_AS_PROVIDER",
    "TENANT_BY_DISPLAY_NAME",
    "CutOff",
    "Delay",
    "HTTPError",
    "HangUp",
    "KeepAlive",
    "ScriptedOllama",
    "SeenPrompt",
    "Stall",
    "Step",
    "StreamError",
    "Text",
    "Thinking",
    "ToolCall",
    "by_question",
    "fit_prompt",
    "last_user_text",
    "render_prompt",
    "repeated",
    "steps_from_json",
    "tokenize",
    "tool_call_as_text",
]

DEFAULT_MODELS: Mapping[str, Sequence[str]] = {
    "qwen3:8b": ["completion", "tools", "thinking"],
    "gemma:2b": ["completion"],
    "qwen2.5:7b": ["completion", "tools"],
    "gpt-oss:20b": ["completion", "tools", "thinking"],
}
"""Capabilities as `ollama show` lists them: qwen3:8b thinks and calls tools (our default
model), gemma:2b cannot call tools, qwen2.5:7b calls tools but cannot think, and
gpt-oss:20b thinks in levels and cannot stop (see `_Thinking`)."""

DEFAULT_CONTEXT_LENGTHS: Mapping[str, int] = {
    "qwen3:8b": 40_960,
    "gemma:2b": 8_192,
    "qwen2.5:7b": 32_768,
    "gpt-oss:20b": 131_072,
}
"""Trained context lengths, as `ollama show` reports them for these models (the model
cards: qwen3:8b 40,960; gemma:2b 8,192; qwen2.5:7b 32,768; gpt-oss:20b 131,072). A model
missing here reports none."""

VERSION = "0.12.0"
"""The version the server reports unless told otherwise; it decides how thinking is sent
(see `_thinking_mode`)."""

_HARMONY_FAMILIES = frozenset({"gptoss", "gpt-oss"})
"""Model families Ollama runs through its harmony parser (server/routes.go,
`shouldUseHarmony`): gpt-oss, which thinks in levels and cannot stop thinking."""

_FAMILIES = {"gpt-oss": "gptoss"}
"""`details.family` where it is not the name before the tag (`ollama show gpt-oss:20b`)."""

_POLL = 0.02
"""How often a paused reply looks at its socket and at the stop flag, in seconds."""


# --- Script steps ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """Assistant text, streamed as several content lines the way a model emits tokens.

    By default the text is cut at word boundaries (whitespace stays with the word before
    it, so the chunks join back to the exact text); `chunks` sets the cut explicitly and
    must join to `text`, so a script still reads as the full answer.  `chunk_delay` pauses
    between chunks, which is what makes "cancel mid-stream" testable.
    """

    text: str
    chunk_delay: float = 0.0
    chunks: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.chunks is not None and "".join(self.chunks) != self.text:
            raise ValueError(f"Text chunks {list(self.chunks)!r} do not join to {self.text!r}")

    def pieces(self) -> list[str]:
        """The content of each NDJSON line this step sends."""
        if self.chunks is not None:
            return list(self.chunks)
        return [piece for piece in re.split(r"(?<=\s)(?=\S)", self.text) if piece]


@dataclass(frozen=True)
class Thinking(Text):
    """The model's reasoning, streamed before its answer the way the server delivers it for
    this request (`_thinking_mode`): as `message.thinking` chunks with empty content, as
    `<think>...</think>` inside `content`, or not at all (the model did not think)."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call; consecutive ToolCall steps go out together in ONE message line.

    Ollama sends a model's parallel tool calls as a single `message.tool_calls` list with
    `arguments` as a JSON object (not a string, unlike OpenAI), and that is what we mimic.
    """

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


HARMONY_SUFFIX = "<|channel|>commentary"
"""What gpt-oss:20b through Ollama appended to a tool's name (harmony format leaking):
`ToolCall("netbox_get_objects" + HARMONY_SUFFIX, ...)` plays the call the agent
recorded rejecting as unknown (docs/facts/real-models.md, "Models and servers")."""


def tool_call_as_text(name: str, args: Mapping[str, Any], *, fenced: bool = False) -> Text:
    """A final answer that is the JSON of a tool call instead of the call: gpt-oss-120b's
    final answer was the JSON of a `netbox_get_objects` call (docs/facts/
    real-models.md, "Tool-call habits"). `name=""` leaves the name out (only the
    arguments), `fenced` wraps it in a Markdown code fence."""
    payload: Any = {"name": name, "arguments": dict(args)} if name else dict(args)
    text = json.dumps(payload)
    return Text(f"```json\n{text}\n```" if fenced else text)


# Tool calls real models were recorded making (docs/facts/real-models.md, "Tool-call
# habits"), for scripts that play them: each is what a model sent, not what it should.
TENANT_BY_DISPLAY_NAME = ToolCall(
    "netbox_get_objects",
    {"object_type": "dcim.device", "filters": {"tenant": "Dunder-Mifflin, Inc."}},
)
"""`tenant=Dunder-Mifflin, Inc.`: a display name where NetBox wants a slug (400; the run
crashed)."""
RACK_BY_NAME = ToolCall(
    "netbox_get_objects", {"object_type": "dcim.device", "filters": {"rack_id": "DC1-R04"}}
)
"""A rack's name where NetBox wants its id (`rack_id=46` was right; `rack=DC1-R04` was
ignored and all 141 devices came back)."""
STATUS_IN_DISPLAY_CASE = ToolCall(
    "netbox_get_objects", {"object_type": "dcim.device", "filters": {"status": "Active"}}
)
"""`"Active"` for `active` (400)."""
GFK_LIST = ToolCall(
    "netbox_get_objects",
    {
        "object_type": "ipam.ipaddress",
        "filters": {"assigned_object_type": "dcim.interface", "assigned_object_id": [66, 67]},
    },
)
"""`assigned_object_id: [66, 67]` with `assigned_object_type` on IP addresses (400)."""
TENANT_AS_PROVIDER = ToolCall(
    "netbox_search_objects", {"query": "Dunder", "object_types": ["circuits.provider"]}
)
"""A tenant's name searched as a circuit provider, then "not found in NetBox" (3 of one
local model's 7 failures on 90 questions)."""


def repeated(call: ToolCall, times: int = 2) -> list[list[Step]]:
    """The same call as `times` replies of one turn: an identical `ipam.prefix` call was
    repeated within a turn (about 40 s wasted), and hedge searches (`dunder`, `mifflin`,
    `DM-`) recur even when the model is told not to."""
    return [[call] for _ in range(times)]


@dataclass(frozen=True)
class Delay:
    """Pause before the next step; before the first line it delays the response headers."""

    seconds: float


@dataclass(frozen=True)
class StreamError:
    """Send `{"error": message}` as a stream line and end the reply, as Ollama does when
    generation fails after the 200 status has gone out.  Nothing may follow it."""

    message: str


@dataclass(frozen=True)
class HTTPError:
    """Answer the whole request with this status and `{"error": message}`.

    Only Delay steps may precede it (a status cannot follow streamed lines) and nothing
    may follow it.
    """

    status: int
    message: str


@dataclass(frozen=True)
class Stall:
    """Stop sending and hold the connection open until the client hangs up or the server
    stops: the hung model that client timeouts and Ctrl-C handling must cope with.
    Nothing may follow it."""


@dataclass(frozen=True)
class CutOff:
    """End the reply at the output limit: the final line says `done_reason: "length"`,
    as Ollama's does when `num_predict` is reached. Real models were recorded spending the
    whole budget on thinking: 3 of 56 generations stopped at the cap with no visible text
    (docs/facts/real-models.md, "Thinking counts against the output budget"), so
    `[Thinking(...), CutOff()]` plays that. Nothing may follow it."""


@dataclass(frozen=True)
class KeepAlive:
    """Stop the answer and hold the connection open, sending a server-sent events
    comment (`: keep-alive`) every `every` seconds until the client hangs up or the
    server stops: a proxy in front of a stuck server. OpenRouter "occasionally sends
    comments to prevent connection timeouts" (`: OPENROUTER PROCESSING`,
    https://openrouter.ai/docs/api-reference/streaming); clients ignore comment lines
    (WHATWG HTML, "Server-sent events": a line that starts with ":" is ignored). Only
    an SSE stream (/v1) carries comments: Ollama's NDJSON has none. Nothing may follow it."""

    every: float = 0.5


@dataclass(frozen=True)
class HangUp:
    """The server dies mid-answer: the connection is closed with the reply half sent
    and no end of the chunked body (a process that exits has its sockets closed by
    the kernel). httpx then reads "peer closed connection without sending complete
    message body". Nothing may follow it."""


Step = (
    Text
    | Thinking
    | ToolCall
    | Delay
    | StreamError
    | HTTPError
    | Stall
    | CutOff
    | KeepAlive
    | HangUp
)
Reply = Sequence[Step]
Responder = Callable[[dict[str, Any]], Reply]


def _check_reply(reply: Reply) -> list[Step]:
    """Reject replies the wire cannot carry, when they are scripted rather than mid-test."""
    steps = list(reply)
    for position, step in enumerate(steps):
        if not isinstance(step, Step):
            raise TypeError(f"not a script step: {step!r}")
        is_last = position == len(steps) - 1
        if isinstance(step, StreamError | HTTPError | Stall | CutOff | KeepAlive | HangUp) and (
            not is_last
        ):
            raise ValueError(f"{type(step).__name__} must be the last step of a reply")
        if isinstance(step, HTTPError) and not all(isinstance(s, Delay) for s in steps[:-1]):
            raise ValueError("HTTPError can only follow Delay steps: the status goes out first")
    return steps


def steps_from_json(reply: Sequence[Mapping[str, Any]]) -> list[Step]:
    """Build a reply from its JSON form (the `--script` file holds a list of these)."""
    steps: list[Step] = []
    for item in reply:
        if "text" in item:
            chunks = item.get("chunks")
            steps.append(Text(item["text"], float(item.get("chunk_delay", 0.0)), chunks))
        elif "thinking" in item:
            chunks = item.get("chunks")
            steps.append(Thinking(item["thinking"], float(item.get("chunk_delay", 0.0)), chunks))
        elif "tool_call" in item:
            steps.append(ToolCall(item["tool_call"]["name"], item["tool_call"].get("args", {})))
        elif "delay" in item:
            steps.append(Delay(float(item["delay"])))
        elif "stream_error" in item:
            steps.append(StreamError(str(item["stream_error"])))
        elif "http_error" in item:
            status, message = item["http_error"]
            steps.append(HTTPError(int(status), str(message)))
        elif item.get("stall"):
            steps.append(Stall())
        elif item.get("cut_off"):
            steps.append(CutOff())
        elif item.get("hang_up"):
            steps.append(HangUp())
        else:
            raise ValueError(f"unknown script step: {item!r}")
    return _check_reply(steps)


# --- The prompt as the model sees it -------------------------------------------------------
#
# Real Ollama renders the request with the model's chat template (tool definitions
# included), tokenizes it, and fits it into the window `options.num_ctx` without an error:
# server/prompt.go `chatPrompt` drops the oldest messages, keeping every system message
# and the latest message, until the rendered prompt fits; if it still does not, the
# runner keeps `num_keep` tokens and discards a middle block so about half the window
# remains (WARN "truncating input prompt"; ollama #4967, #3839, #7043; a user's log at
# num_ctx 40960 reads `limit=20482 prompt=45176 keep=4 new=20482`, which is what
# `fit_prompt` gives: 4 + (40960 - 4) // 2).  A num_ctx above the model's trained length
# is clamped to it first (llm/server.go, WARN "requested context size too large for
# model").  The final line's
# `prompt_eval_count` is what was actually evaluated, so never more than the window
# (a maintainer in #7987).  This double does the same, with a tokenizer of its own.

DEFAULT_NUM_CTX = 4096
"""The window when a request sets no `options.num_ctx`: Ollama's default
(envconfig `OLLAMA_CONTEXT_LENGTH`, 4096; docs/context-length.mdx)."""

DEFAULT_NUM_KEEP = 4
"""Tokens the runner's middle cut keeps at the front (api.DefaultOptions, NumKeep 4)."""

_TOKEN = re.compile(r" ?[A-Za-z]{1,8}| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]{1,4}|\s+")


def tokenize(text: str) -> list[str]:
    """A deterministic stand-in for a BPE tokenizer, with its proportions: a word of up
    to eight letters is one token (a leading space included), digits go in threes,
    punctuation in runs of up to four (`": "`, `"},`).  Prose comes out near 4.7
    characters a token and NetBox JSON near 2.7, the way real BPE vocabularies treat
    them (JSON nearer 3 than 4); the pieces join back to the text."""
    return _TOKEN.findall(text)


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else json.dumps(content)


def render_message(message: Mapping[str, Any], thinking: bool = False) -> str:
    """One message in a ChatML template like qwen3's (Ollama's template for it puts tool
    calls in <tool_call> and tool results in a user turn inside <tool_response>).

    With `thinking`, an assistant message's `thinking` is rendered before its content
    in <think> tags: Ollama's qwen3 template does so for the assistant messages after
    the last user message (ollama.com/library/qwen3 template: `.Thinking` rendered when
    `gt $i $lastUserIdx`; gpt-oss's likewise), so a turn's thinking between tool calls
    takes room in the window (issue 21, item 6; docs/design-notes.md, "Thinking")."""
    role = str(message.get("role", "user"))
    text = _content(message)
    if thinking and role == "assistant" and message.get("thinking"):
        text = f"<think>{message['thinking']}</think>\n{text}"
    if role == "tool":
        return f"<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        payload = {"name": function.get("name"), "arguments": function.get("arguments")}
        text += f"\n<tool_call>\n{json.dumps(payload)}\n</tool_call>"
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def _rendered(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each message as the template renders it: thinking after the last user message."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return [render_message(m, thinking=i > last_user) for i, m in enumerate(messages)]


def render_prompt(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any]) -> str:
    """The whole prompt: tool definitions go into the system turn, as qwen3's template
    does, then every message, then the open assistant turn."""
    parts = _rendered(messages)
    if tools:
        listing = "\n".join(json.dumps(tool) for tool in tools)
        tools_turn = f"<|im_start|>system\n# Tools\n<tools>\n{listing}\n</tools><|im_end|>\n"
        if messages and messages[0].get("role") == "system":
            parts.insert(1, tools_turn)
        else:
            parts.insert(0, tools_turn)
    return "".join(parts) + "<|im_start|>assistant\n"


@dataclass(frozen=True)
class SeenPrompt:
    """What the "model" of one request actually saw, after Ollama's truncation."""

    window: int
    requested_tokens: int
    """Tokens of the whole request, rendered, before any truncation."""
    evaluated: int
    """What the final line reports as `prompt_eval_count`: at most the window."""
    messages_dropped: int
    """Oldest non-system messages chatPrompt left out."""
    middle_cut: int
    """Tokens the runner's middle cut discarded."""
    text: str
    """The prompt the model evaluated."""

    @property
    def truncated(self) -> bool:
        return bool(self.messages_dropped or self.middle_cut)


def request_window(body: Mapping[str, Any], trained: int | None) -> int:
    """The request's window: `options.num_ctx`, else Ollama's default, capped at the
    model's trained length (llm/server.go, NewLlamaServer: "requested context size too
    large for model" sets num_ctx to n_ctx_train)."""
    options = body.get("options") or {}
    window = int(options.get("num_ctx") or DEFAULT_NUM_CTX)
    return min(window, trained) if trained else window


def fit_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Any],
    window: int,
    num_keep: int = DEFAULT_NUM_KEEP,
) -> SeenPrompt:
    """Fit a chat request into `window` tokens the way Ollama does (see above)."""
    # Every rendered message starts with "<" and ends with a newline, so token counts
    # add up message by message: count each once instead of re-tokenizing each try.
    sizes = [len(tokenize(text)) for text in _rendered(messages)]
    fixed = len(tokenize(render_prompt([], tools)))
    system = [m.get("role") == "system" for m in messages]
    requested = fixed + sum(sizes)
    last = len(messages) - 1
    start = 0
    if requested > window:
        # chatPrompt: walk back from the latest message (always kept) while the system
        # messages before the cut plus everything from it on still fit.
        start = max(last, 0)
        for i in range(last - 1, -1, -1):
            before = sum(
                size for size, is_system in zip(sizes[:i], system[:i], strict=True) if is_system
            )
            if fixed + before + sum(sizes[i:]) > window:
                break
            start = i
    kept = [
        *(m for m, is_system in zip(messages[:start], system[:start], strict=True) if is_system),
        *messages[start:],
    ]
    dropped = len(messages) - len(kept)
    text = render_prompt(kept, tools)
    tokens = tokenize(text)
    if len(tokens) <= window:
        return SeenPrompt(window, requested, len(tokens), dropped, 0, text)
    # The runner: keep num_keep tokens, discard a middle block, about half the window left.
    keep = min(num_keep, window - 1)
    tail = (window - keep) // 2
    cut = tokens[:keep] + tokens[len(tokens) - tail :]
    return SeenPrompt(window, requested, len(cut), dropped, len(tokens) - len(cut), "".join(cut))


# --- Server ----------------------------------------------------------------------------------


class _ClientGone(ConnectionError):
    """The client closed the connection before the reply was complete."""


class _ServerStopping(ConnectionError):
    """The server is shutting down; abandon the reply without blaming the client."""


class _OutputLimit(Exception):
    """The reply reached the request's output limit: the server stops generating
    and says so (`done_reason` / `finish_reason` "length")."""


def output_limit(value: Any) -> int | None:
    """A request's output limit in tokens, None for none: only a positive number
    limits (Ollama's runner checks `seq.numPredict > 0`; -1 is "no limit")."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class _NoReply(Exception):
    """Nothing scripted and no responder: the test under-scripted."""


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _details(name: str) -> dict[str, Any]:
    base = name.split(":", 1)[0]
    family = _FAMILIES.get(base, base)
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": "8.2B",
        "quantization_level": "Q4_K_M",
    }


class ScriptedOllama:
    """An Ollama stand-in on 127.0.0.1 that answers /api/chat from a queue of scripted replies.

    Each /api/chat request that passes the model checks consumes the next scripted reply;
    when the queue is empty `responder` (if set) builds one from the request body, which is
    how benchmarks get endless turns.  With neither, the request fails with HTTP 500 so a
    test that under-scripts fails loudly instead of hanging.  A request rejected for its
    model (404 unknown, 400 no tool support) consumes nothing, like real Ollama, which
    checks before it generates.

    `requests` keeps every /api/chat body in arrival order and `disconnects` the indexes of
    those whose client hung up before its reply was complete; both are what tests assert
    on.  The server stops on `__exit__` (closing even stalled connections) or after
    `lifetime` seconds, whichever comes first, so a forgotten instance cannot linger.
    """

    def __init__(
        self,
        models: Mapping[str, Sequence[str]] | None = None,
        *,
        port: int = 0,
        lifetime: float = 900.0,
        context_lengths: Mapping[str, int] | None = None,
        version: str = VERSION,
    ) -> None:
        self.models: dict[str, list[str]] = {
            name: list(caps)
            for name, caps in (DEFAULT_MODELS if models is None else models).items()
        }
        self.context_lengths: dict[str, int] = dict(
            DEFAULT_CONTEXT_LENGTHS if context_lengths is None else context_lengths
        )
        self.version = version
        self.responder: Responder | None = None
        self.running: list[str] | None = None
        """What `/api/ps` lists as loaded (None: `/api/ps` answers 404, a server that
        says nothing about its work). Opt in to play a server that is working while
        it sends nothing: `[]` while a model loads, `["qwen3:8b"]` once it is reading
        the prompt. Real figures (docs/facts/real-models.md): a cold first call
        of 82-108 s, a 19,976-token prefill of about 167 s with no byte streamed;
        `[Delay(s), Text(...)]` plays such a silence, scaled down."""
        self.load_seconds: float | None = None
        """Opt in (with `running`): a chat request for a model `running` lacks lists
        it there this many seconds later, as a real Ollama lists a model in /api/ps
        once it has loaded it and goes on to read the prompt (the cold first call of
        82-108 s above, scaled down)."""
        self.ps_requests = 0
        self.requests: list[dict[str, Any]] = []
        self.seen: list[SeenPrompt | None] = []
        """Per request (same index as `requests`): what the model saw after Ollama's
        truncation, or None for a request refused before generation."""
        self.disconnects: list[int] = []
        self._port = port
        self._lifetime = lifetime
        self._replies: deque[list[Step]] = deque()
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._connections: dict[socket.socket, threading.Thread | None] = {}
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # Lifecycle

    def start(self) -> Self:
        """Bind a port and serve in a daemon thread; returns self for chaining."""
        if self._server is not None:
            raise RuntimeError("ScriptedOllama already started")
        self._server = _Server(("127.0.0.1", self._port), self._handler(), self)
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits one poll at most
            name="scripted-ollama",
            daemon=True,
        )
        self._serve_thread.start()
        self._timer = threading.Timer(self._lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _handler(self) -> type[_Handler]:
        """The request handler: Ollama's API here; tests.doubles.openai_server's speaks
        /v1 over the same scripting, lifecycle and bookkeeping."""
        return _Handler

    def stop(self) -> None:
        """Stop serving and close every connection, including ones held by a Stall."""
        with self._changed:
            already_stopping = self._stopping.is_set()
            self._stopping.set()
        if already_stopping:  # e.g. the lifetime timer got here first: let it finish
            self._stopped.wait(timeout=5.0)
            return
        if self._server is None:
            self._stopped.set()
            return
        if self._timer is not None:
            self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        with self._changed:
            connections = dict(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in connections.values():
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=2.0)
        self._stopped.set()

    @property
    def stopping(self) -> bool:
        """True as soon as stop() begins: replies in flight give up instead of blaming
        the client for the connection the server is about to close."""
        return self._stopping.is_set()

    @property
    def stopped(self) -> bool:
        """True once stop() has finished and the port is closed, whoever called it."""
        return self._stopped.is_set()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL to hand to ChatOllama(base_url=...)."""
        if self._server is None:
            raise RuntimeError("ScriptedOllama not started")
        return f"http://127.0.0.1:{self._server.server_port}"

    # Test-facing API

    def script(self, *replies: Reply) -> None:
        """Queue replies; each /api/chat request consumes the next one."""
        checked = [_check_reply(reply) for reply in replies]
        with self._changed:
            self._replies.extend(checked)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        """Block until at least n chat requests have arrived, else AssertionError."""
        self._wait(lambda: len(self.requests) >= n, timeout, f"{n} chat request(s)")

    def wait_for_disconnects(self, n: int, timeout: float = 5.0) -> None:
        """Block until at least n chat clients have hung up mid-reply, else AssertionError."""
        self._wait(lambda: len(self.disconnects) >= n, timeout, f"{n} disconnect(s)")

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(condition, timeout):
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}: "
                    f"{len(self.requests)} request(s), disconnects={self.disconnects}"
                )

    # Called from handler threads

    def _load(self, model: str) -> None:
        """Plays `load_seconds`: the model joins `running` once loaded."""
        running, seconds = self.running, self.load_seconds
        if running is None or seconds is None or model in running:
            return
        timer = threading.Timer(seconds, lambda: model in running or running.append(model))
        timer.daemon = True
        timer.start()

    def _record(self, body: dict[str, Any]) -> int:
        with self._changed:
            self.requests.append(body)
            self.seen.append(None)
            self._changed.notify_all()
            return len(self.requests) - 1

    def _record_disconnect(self, index: int) -> None:
        with self._changed:
            self.disconnects.append(index)
            self._changed.notify_all()

    def _next_reply(self, index: int, body: dict[str, Any]) -> list[Step]:
        """The scripted reply for request `index`; raises _NoReply when there is none."""
        with self._changed:
            if self._replies:
                return self._replies.popleft()
        if self.responder is None:
            raise _NoReply(f"scripted server: no reply left for request {index}")
        return _check_reply(self.responder(body))

    def _see(self, index: int, body: dict[str, Any], model: str) -> SeenPrompt:
        trained = self.context_lengths.get(model) or self.context_lengths.get(f"{model}:latest")
        seen = fit_prompt(
            body.get("messages") or [],
            body.get("tools") or [],
            request_window(body, trained),
            int((body.get("options") or {}).get("num_keep") or DEFAULT_NUM_KEEP),
        )
        with self._changed:
            self.seen[index] = seen
        return seen

    def _capabilities(self, name: str) -> list[str] | None:
        """Capabilities of a model, resolving a bare name to its ':latest' tag like Ollama.

        Servers before 0.9.0 know no `thinking` capability (it came with the `think`
        field), so they never list it."""
        for candidate in (name, f"{name}:latest"):
            if candidate in self.models:
                if self._version < (0, 9, 0):
                    return [c for c in self.models[candidate] if c != "thinking"]
                return self.models[candidate]
        return None

    @property
    def _version(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split("."))

    def _thinking_mode(self, model: str, capabilities: Sequence[str], think: Any) -> str:
        """How this request's Thinking steps go out: "field", "inline" or "none".

        As Ollama's ChatHandler decides it (server/routes.go): for a model with the
        `thinking` capability an unset `think` means true since 0.12.4, and the thinking
        parser then moves the trace into `message.thinking`; before 0.12.4 an unset
        `think` left the template's default, a model that thinks by default, with its
        `<think>` tags in `content`. `think: false` stops it, except on gpt-oss, whose
        harmony template thinks whatever it is told (ollama #11751). Servers before
        0.9.0 have no `think` field at all (Go's JSON decoder ignores unknown fields), and
        a model Ollama does not know to think keeps whatever tags it writes in content.
        A level ("low", "medium", "high") counts as true (api/types.go,
        `ThinkValue.Bool`).
        """
        if self._version < (0, 9, 0) or "thinking" not in capabilities:
            return "inline"
        if _details(model)["family"] in _HARMONY_FAMILIES:
            return "field"
        if think is None:
            return "field" if self._version >= (0, 12, 4) else "inline"
        return "field" if think else "none"

    def _track(self, conn: socket.socket, thread: threading.Thread | None) -> None:
        """Remember a connection from accept on, so stop() can close it even mid-Stall."""
        with self._changed:
            self._connections[conn] = thread

    def _untrack(self, conn: socket.socket) -> None:
        with self._changed:
            self._connections.pop(conn, None)


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that carries the ScriptedOllama its handlers report to."""

    daemon_threads = True
    block_on_close = False  # stop() joins the handler threads itself, with a bound

    def __init__(
        self, address: tuple[str, int], handler: type[_Handler], ollama: ScriptedOllama
    ) -> None:
        self.ollama = ollama
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.ollama._track(request, None)  # before the handler thread exists: no gap
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that vanish; report real bugs in the handler."""
        if self.ollama.stopping or isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One connection.  HTTP/1.1 so responses stream chunked and connections are reused,
    the way httpx talks to a real Ollama."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Tests and benchmarks read stderr; request logs would only be noise there."""

    def setup(self) -> None:
        super().setup()
        self.server.ollama._track(self.connection, threading.current_thread())

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError):
                super().finish()
        finally:
            self.server.ollama._untrack(self.connection)

    # Routing

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/api/tags":
            ollama = self.server.ollama
            self._send_json(200, {"models": [self._tag(name) for name in ollama.models]})
        elif path == "/api/ps" and self.server.ollama.running is not None:
            ollama = self.server.ollama
            ollama.ps_requests += 1
            models = [{**self._tag(name), "expires_at": _now()} for name in ollama.running]
            self._send_json(200, {"models": models})
        elif path == "/api/version":
            self._send_json(200, {"version": self.server.ollama.version})
        elif path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
        else:
            self._send(404, b"404 page not found", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as err:
            self._send_json(400, {"error": f"invalid JSON body: {err}"})
            return
        if path == "/api/chat":
            self._chat(body)
        elif path == "/api/show":
            self._show(body)
        else:
            self._send(404, b"404 page not found", "text/plain; charset=utf-8")

    # Endpoints

    @staticmethod
    def _tag(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "model": name,
            "modified_at": _now(),
            "size": 5_225_388_164,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": _details(name),
        }

    def _show(self, body: dict[str, Any]) -> None:
        name = str(body.get("model") or body.get("name") or "")
        capabilities = self.server.ollama._capabilities(name)
        if capabilities is None:
            self._send_json(404, {"error": f"model '{name}' not found"})
            return
        # Real Ollama keys the trained length by architecture, e.g.
        # "qwen3.context_length" next to "general.architecture": "qwen3"
        # (server/routes.go, ShowHandler -> model_info from the GGUF metadata).
        family = _details(name)["family"]
        model_info: dict[str, Any] = {"general.architecture": family}
        length = self.server.ollama.context_lengths.get(
            name
        ) or self.server.ollama.context_lengths.get(f"{name}:latest")
        if length:
            model_info[f"{family}.context_length"] = length
        self._send_json(
            200,
            {
                "modified_at": _now(),
                "details": _details(name),
                "model_info": model_info,
                "capabilities": capabilities,
            },
        )

    def _chat(self, body: dict[str, Any]) -> None:
        ollama = self.server.ollama
        index = ollama._record(body)
        model = str(body.get("model", ""))
        capabilities = ollama._capabilities(model)
        if capabilities is None:
            self._send_json(404, {"error": f"model '{model}' not found"})
            return
        # ollama-python always sends "tools": [] -- only a non-empty list asks for tools.
        if body.get("tools") and "tools" not in capabilities:
            self._send_json(
                400, {"error": f"registry.ollama.ai/library/{model} does not support tools"}
            )
            return
        think = body.get("think")
        # server/routes.go, ChatHandler: `think` true or a level for a model without the
        # capability is refused before anything is generated, with the name quoted (%q).
        if think and "thinking" not in capabilities and ollama._version >= (0, 9, 0):
            self._send_json(400, {"error": f'"{model}" does not support thinking'})
            return
        ollama._load(model)
        try:
            reply = ollama._next_reply(index, body)
        except _NoReply as err:
            self._send_json(500, {"error": str(err)})
            return
        except Exception as err:  # a broken responder must fail the test, not hang it
            self._send_json(500, {"error": f"scripted server: responder failed: {err!r}"})
            return
        try:
            seen = ollama._see(index, body, model)
            thinking = ollama._thinking_mode(model, capabilities, think)
            limit = output_limit((body.get("options") or {}).get("num_predict"))
            _ChatStream(self, model, seen.evaluated, thinking=thinking, limit=limit).play(reply)
        except _ClientGone:
            ollama._record_disconnect(index)
            self.close_connection = True
        except _ServerStopping:
            self.close_connection = True

    # Wire helpers

    def _send_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.start_response(status, {"Content-Type": content_type, "Content-Length": len(data)})
        self.write(data)

    def start_response(self, status: int, headers: Mapping[str, object]) -> None:
        """Send the status line and headers, with write() semantics on a dead socket."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        with self._client_guard():
            self.end_headers()

    def write(self, data: bytes) -> None:
        """Write to the client, turning a broken connection into _ClientGone."""
        with self._client_guard():
            self.wfile.write(data)

    @contextlib.contextmanager
    def _client_guard(self) -> Iterator[None]:
        try:
            yield
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as err:
            if self.server.ollama.stopping:
                raise _ServerStopping from err
            raise _ClientGone from err

    def hang_up(self) -> None:
        """Close the connection now, the reply unfinished (HangUp)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    def pause(self, seconds: float | None) -> None:
        """Wait `seconds` (None: forever) while watching the socket.

        A client that gives up while we are silent is only noticed by a failed write if
        we wait for the next write; peeking for end-of-file on the socket notices it at
        once, which is what lets tests assert that a cancelled stream hung up promptly.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            remaining = _POLL if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            readable, _, _ = select.select([self.connection], [], [], min(_POLL, remaining))
            if self.server.ollama.stopping:
                raise _ServerStopping
            if not readable:
                continue
            try:
                peeked = self.connection.recv(1, socket.MSG_PEEK)
            except OSError as err:
                raise _ClientGone from err
            if not peeked:
                raise _ClientGone
            time.sleep(min(_POLL, remaining))  # unexpected bytes: not our business, no spin


class _ChatStream:
    """Plays one reply onto a connection as Ollama's chunked NDJSON chat stream.

    Headers go out with the first line, as with a real Ollama that is still loading the
    model, so a leading Delay or Stall holds back the status too.

    `limit` is the request's `options.num_predict`, with each line one token: once
    the reply has that many, the runner stops it and the final line says
    `done_reason: "length"` (ollama/ollama runner/ollamarunner/runner.go: "if past
    the num predict limit", `removeSequence(seqIdx, llm.DoneReasonLength)`), whatever
    the script had left to say.
    """

    def __init__(
        self,
        handler: _Handler,
        model: str,
        prompt_tokens: int,
        *,
        thinking: str = "inline",
        limit: int | None = None,
    ) -> None:
        self.limit = limit
        self.handler = handler
        self.model = model
        self.thinking = thinking
        self.prompt_tokens = prompt_tokens
        self.started_ns = time.monotonic_ns()
        self.headers_sent = False
        self.eval_count = 0

    def play(self, reply: Sequence[Step]) -> None:
        try:
            done_reason = self._generate(reply)
        except _OutputLimit:
            done_reason = "length"
        if done_reason is None:
            return
        total_ns = time.monotonic_ns() - self.started_ns
        self._line(
            {
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": done_reason,
                "total_duration": total_ns,
                "load_duration": 1_000_000,
                "prompt_eval_count": self.prompt_tokens,
                "prompt_eval_duration": 2_000_000,
                "eval_count": self.eval_count,
                "eval_duration": max(total_ns - 3_000_000, 0),
            }
        )
        self._end()

    def _generate(self, reply: Sequence[Step]) -> str | None:
        """Sends the reply's lines; the done_reason, or None when the reply ended
        otherwise (an error line or status)."""
        pending_calls: list[ToolCall] = []
        done_reason = "stop"
        for step in reply:
            if pending_calls and not isinstance(step, ToolCall):
                self._send_tool_calls(pending_calls)
                pending_calls = []
            match step:
                case Thinking():
                    self._send_thinking(step)
                case Text():
                    self._send_pieces(step, "content")
                case ToolCall():
                    pending_calls.append(step)
                case Delay():
                    self.handler.pause(step.seconds)
                case StreamError():
                    self._line({"error": step.message}, envelope=False)
                    self._end()
                    return None
                case HTTPError():
                    self.handler._send_json(step.status, {"error": step.message})
                    return None
                case Stall():
                    self.handler.pause(None)
                case CutOff():
                    done_reason = "length"
                case HangUp():
                    if pending_calls:
                        self._send_tool_calls(pending_calls)
                    self._start()
                    self.handler.hang_up()
                    return None
                case KeepAlive():
                    raise ValueError("Ollama's NDJSON stream has no keep-alive comments")
        if pending_calls:
            self._send_tool_calls(pending_calls)
        return done_reason

    def _send_pieces(self, step: Text, field: str) -> None:
        for position, piece in enumerate(step.pieces()):
            if position and step.chunk_delay:
                self.handler.pause(step.chunk_delay)
            message = {"role": "assistant", "content": ""}
            message[field] = piece
            self._token()
            self._line({"message": message})

    def _send_thinking(self, step: Thinking) -> None:
        if self.thinking == "field":
            self._send_pieces(step, "thinking")
        elif self.thinking == "inline":
            # How qwen3 and deepseek-r1 write it when no parser takes it out.
            self._token()
            self._line({"message": {"role": "assistant", "content": "<think>\n"}})
            self._send_pieces(step, "content")
            self._token()
            self._line({"message": {"role": "assistant", "content": "\n</think>\n\n"}})

    def _send_tool_calls(self, calls: list[ToolCall]) -> None:
        tool_calls = [{"function": {"name": c.name, "arguments": dict(c.args)}} for c in calls]
        for _ in calls:
            self._token()
        self._line({"message": {"role": "assistant", "content": "", "tool_calls": tool_calls}})

    def _token(self) -> None:
        """One more token of the reply, or _OutputLimit when the limit is reached."""
        if self.limit is not None and self.eval_count >= self.limit:
            raise _OutputLimit
        self.eval_count += 1

    def _line(self, payload: dict[str, Any], *, envelope: bool = True) -> None:
        if envelope:
            payload = {"model": self.model, "created_at": _now(), "done": False, **payload}
        data = json.dumps(payload).encode() + b"\n"
        self._start()
        self.handler.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end(self) -> None:
        self._start()  # an empty reply still needs a well-formed response
        self.handler.write(b"0\r\n\r\n")

    def _start(self) -> None:
        if not self.headers_sent:
            headers = {"Content-Type": "application/x-ndjson", "Transfer-Encoding": "chunked"}
            self.handler.start_response(200, headers)
            self.headers_sent = True


# --- Standalone process ----------------------------------------------------------------------


def _cycle(replies: list[list[Step]]) -> Responder:
    """A responder that replays the script forever, for benchmarks that run many turns."""
    turns: Iterator[list[Step]] = itertools.cycle(replies)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            return next(turns)

    return respond


def last_user_text(body: Mapping[str, Any]) -> str:
    """The newest user message of a /api/chat request: the question being answered."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return _content(message)
    return ""


def by_question(reply_for: Callable[[str, str, bool], Reply]) -> Responder:
    """A responder that answers per model and per question: `reply_for(model,
    question, after_tool)` where `after_tool` says the request ends with a tool
    result. Opt-in scripting for many-question runs (the evaluation harness),
    where a queue cannot know which question comes when."""

    def respond(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        after_tool = bool(messages) and messages[-1].get("role") == "tool"
        return reply_for(str(body.get("model")), last_user_text(body), after_tool)

    return respond


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a JSON script until SIGTERM/SIGINT or the lifetime runs out."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.doubles.ollama_server",
        description="Scripted Ollama server for manual trials and benchmarks.",
    )
    parser.add_argument("--script", type=Path, required=True, help="JSON list of replies")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--lifetime", type=float, default=900.0, help="exit after N seconds")
    parser.add_argument("--loop", action="store_true", help="replay the script forever")
    args = parser.parse_args(argv)

    replies = [steps_from_json(reply) for reply in json.loads(args.script.read_text())]
    ollama = ScriptedOllama(port=args.port, lifetime=args.lifetime)
    if args.loop and replies:
        ollama.responder = _cycle(replies)
    else:
        ollama.script(*replies)

    asked_to_stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        asked_to_stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with ollama:
        print(f"listening on {ollama.url}", flush=True)
        while not asked_to_stop.wait(0.2) and not ollama.stopped:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
