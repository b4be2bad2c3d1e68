"""A silent model server is not a dead one: wait while it says it is working."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from netbox_chat import tls

POLL_SECONDS = 2.0
"""How often a silent server is probed."""
PROBE_TIMEOUT = 5.0
"""The longest one probe may take (at most the timeout itself)."""


@dataclass(frozen=True)
class Waiting:
    """No byte of the model's reply yet; the server says what it is doing
    (`loading qwen3:8b`, `reading 12.3k tokens`), `seconds` into the wait."""

    activity: str
    seconds: float


_T = TypeVar("_T")

Probe = Callable[[httpx.Request], Awaitable[str | None]]
"""Asks the server about a request that has had no byte yet: what it is doing
(shown to the user), or None when it did not answer. An activity that starts
with `LOADING` names the model being loaded: when such a wait ends, the load
took that long (see `PatientTransport`'s `loaded`)."""

LOADING = "loading "


def broke_off(server: str, text: str, log: str) -> str:
    """The line for a server that closed the connection in the middle of its
    answer (httpx: "peer closed connection without sending complete message
    body", or a reset): it stopped or crashed; the turn is rolled back."""
    return (
        f"{server} closed the connection mid-answer ({text}): it stopped or crashed; "
        f"try again, and if it repeats, check {log}"
    )


def gave_up(now: float, last_answer: float, timeout: float) -> bool:
    """The rule: a silent server is given up on only once it has not answered
    anything (the request or a probe) for `timeout` seconds."""
    return now - last_answer > timeout


def short_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def model_of(request: httpx.Request) -> tuple[str, dict[str, Any]]:
    """The model a chat request asks for, and its body (`{}` when it is not JSON)."""
    try:
        body = json.loads(request.content or b"{}")
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return str(body.get("model") or "the model"), body


def reading(body: dict[str, Any]) -> str:
    """`reading 12.3k tokens`: the prompt's size, estimated at 4 characters a token."""
    prompt = json.dumps(body.get("messages") or []) + json.dumps(body.get("tools") or [])
    return f"reading {short_tokens(len(prompt) // 4)} tokens"


Reading = Callable[[httpx.Response, str, dict[str, Any]], str | None]
"""What one server's answer to its probe says the server is doing, given the
model and the body of the request waiting: the activity, or None when the
answer says it is not working on it (it is down, or not the server)."""


def answer_probe(
    url: str, read: Reading, timeout: float, headers: Mapping[str, str] | None = None
) -> Probe:
    """The Probe that GETs `url` and reads its answer with `read`; no answer in
    time (at most PROBE_TIMEOUT) is None."""
    limit = min(PROBE_TIMEOUT, timeout)

    async def probe(request: httpx.Request) -> str | None:
        model, body = model_of(request)
        try:
            async with httpx.AsyncClient(
                timeout=limit, headers=headers, verify=tls.context()
            ) as client:
                answer = await client.get(url)
            return read(answer, model, body)
        except (httpx.HTTPError, ValueError, AttributeError, TypeError):
            return None

    return probe


def read_ollama_ps(answer: httpx.Response, model: str, body: dict[str, Any]) -> str | None:
    """Ollama's `/api/ps`: the model listed means it is loaded and reading the
    prompt, not listed that it is loading."""
    listed = answer.json().get("models") or []
    names = {str(m.get("name")) for m in listed if isinstance(m, dict)}
    names |= {str(m.get("model")) for m in listed if isinstance(m, dict)}
    return reading(body) if model in names else f"{LOADING}{model}"


def ollama_probe(base_url: str, timeout: float) -> Probe:
    """Ollama's `/api/ps` (read_ollama_ps); no answer is None."""
    return answer_probe(f"{base_url}/api/ps", read_ollama_ps, timeout)


def report_to_graph(event: Waiting) -> None:
    """Sends the event to the LangGraph run this request belongs to, if any."""
    from langgraph.config import get_stream_writer

    try:
        write = get_stream_writer()
    except RuntimeError:  # not inside a run (doctor, /compact): nobody to tell
        return
    write(event)


class PatientTransport(httpx.AsyncBaseTransport):
    """Sends requests through `inner`; a model request (a POST to one of
    `paths`) waits for its first byte as long as `probe` gets answers, then
    bounds each wait for the next piece by `timeout`.

    A model that is loading, or a long prompt on a CPU or a big model, sends
    nothing for minutes: a cold first call of 82-108 s and a 19,976-token
    prefill of about 167 s were recorded (docs/facts/real-models.md), which
    a timeout on every read turns into a failed turn while the server works.
    Give it to the model client (`async_client_kwargs={"transport": ...}`) with
    the `Probe` of its server (`ollama_probe`; an OpenAI-compatible server needs
    only its own). While it waits it reports `Waiting` events to the LangGraph
    run it is part of (stream mode "custom"); the turn shows them on the status
    line. Cancelling the request (Ctrl-C) cancels the wait and the request.
    `loaded`, if given, is told the model and the seconds from the request to the
    end of a load it saw (the server reading the prompt, or answering): the
    user's own cold start, to within a poll.
    """

    def __init__(
        self,
        probe: Probe,
        timeout: float,
        *,
        paths: tuple[str, ...] = ("/api/chat",),
        inner: httpx.AsyncBaseTransport | None = None,
        report: Callable[[Waiting], None] = report_to_graph,
        poll: float = POLL_SECONDS,
        loaded: Callable[[str, float], None] | None = None,
    ) -> None:
        self.probe = probe
        self.timeout = timeout
        self.paths = paths
        self.inner = inner or httpx.AsyncHTTPTransport(verify=tls.context())
        self.report = report
        self.poll = poll
        self.loaded = loaded

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or request.url.path not in self.paths:
            return await self.inner.handle_async_request(request)
        # Reads unbounded here: this transport bounds them, by the rule above.
        request.extensions = {
            **request.extensions,
            "timeout": {**request.extensions.get("timeout", {}), "read": None},
        }
        started = time.monotonic()
        response = await self.patiently(self.inner.handle_async_request(request), request, started)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Bounded(response, self, request, started),
            extensions=response.extensions,
        )

    async def patiently(
        self,
        awaited: Awaitable[_T],
        request: httpx.Request,
        started: float,
        answered: float | None = None,
    ) -> _T:
        """`awaited`, as long as the server answers the request or a probe:
        the headers, then the first piece of the body (vLLM and SGLang send
        their headers before they read the prompt,
        docs/facts/model-servers.md section 4). `started` is
        when the request went out, `answered` when the server last answered it."""
        pending = asyncio.ensure_future(awaited)
        last_answer = answered or started
        loading: str | None = None  # the model a probe said was loading
        try:
            while True:
                done, _ = await asyncio.wait({pending}, timeout=self.poll)
                if done:
                    self._load_ended(loading, time.monotonic() - started)
                    return pending.result()
                activity = await self.probe(request)
                now = time.monotonic()
                if activity is not None:
                    last_answer = now
                    if activity.startswith(LOADING):
                        loading = activity.removeprefix(LOADING)
                    else:
                        self._load_ended(loading, now - started)
                        loading = None
                    self.report(Waiting(activity, round(now - started, 1)))
                elif gave_up(now, last_answer, self.timeout):
                    raise httpx.ReadTimeout(
                        f"no answer from the model server for {self.timeout:.0f}s",
                        request=request,
                    )
        except BaseException:
            pending.cancel()
            raise

    def _load_ended(self, model: str | None, seconds: float) -> None:
        if model is not None and self.loaded is not None:
            self.loaded(model, seconds)

    async def aclose(self) -> None:
        await self.inner.aclose()


class DataLines:
    """Tells the pieces of a body that carry data from those that only say the
    server is alive.

    In a server-sent events body a line that begins with `:` is a comment
    (WHATWG HTML, "Server-sent events", event stream interpretation: "If the
    line starts with a U+003A COLON character (:) — Ignore the line"), which
    proxies and servers send as `: keep-alive` while an answer is stuck; blank
    lines only end events. Neither is progress of the answer. Any other body
    (Ollama's NDJSON) is data throughout. Lines may be split across pieces."""

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.line_start = True
        self.comment = False

    def progress(self, piece: bytes) -> bool:
        """Whether `piece` carries any of the answer's data."""
        if not self.sse:
            return bool(piece)
        found = False
        for i, part in enumerate(piece.split(b"\n")):
            if i:
                self.line_start = True
            if not part:
                continue
            if self.line_start:
                self.comment = part.startswith(b":")
                self.line_start = False
            found = found or (not self.comment and bool(part.strip(b"\r")))
        return found


class _Bounded(httpx.AsyncByteStream):
    """A response body waited for as the headers were
    (PatientTransport.patiently) until its first piece of data; from then on
    the answer must make progress, a piece of data, within the timeout. Pieces
    that carry no data (SSE comments such as `: keep-alive`, DataLines) are
    passed on but do not extend that bound: a stream stalled behind keep-alives
    times out like a silent one."""

    def __init__(
        self,
        response: httpx.Response,
        transport: PatientTransport,
        request: httpx.Request,
        started: float,
    ) -> None:
        self.response = response
        self.transport = transport
        self.request = request
        self.started = started
        self.answered = time.monotonic()  # the headers came
        content_type = response.headers.get("content-type", "")
        self.lines = DataLines(content_type.startswith("text/event-stream"))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = self.response.aiter_raw().__aiter__()
        timeout = self.transport.timeout
        loop = asyncio.get_running_loop()
        progressed: float | None = None  # when the last piece of data came (loop time)
        while True:
            try:
                if progressed is None:
                    piece = await self.transport.patiently(
                        pieces.__anext__(), self.request, self.started, self.answered
                    )
                    self.answered = time.monotonic()
                else:
                    # Not wait_for: it runs each read as a task of its own, a
                    # trip through the event loop for every token even when the
                    # next one is already here (coalesce.py reads ahead on that).
                    async with asyncio.timeout_at(progressed + timeout):
                        piece = await pieces.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"the model server stopped mid-answer for {timeout:.0f}s",
                    request=self.request,
                ) from None
            if self.lines.progress(piece):
                progressed = loop.time()
            yield piece

    async def aclose(self) -> None:
        await self.response.aclose()
