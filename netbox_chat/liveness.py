"""A silent model server is not a dead one: wait while it says it is working."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx

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


Probe = Callable[[httpx.Request], Awaitable[str | None]]
"""Asks the server about a request that has had no byte yet: what it is doing
(shown to the user), or None when it did not answer. An activity that starts
with `LOADING` names the model being loaded: when such a wait ends, the load
took that long (see `PatientTransport`'s `loaded`)."""

LOADING = "loading "


def gave_up(now: float, last_answer: float, timeout: float) -> bool:
    """The rule: a silent server is given up on only once it has not answered
    anything (the request or a probe) for `timeout` seconds."""
    return now - last_answer > timeout


def short_tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def ollama_probe(base_url: str, timeout: float) -> Probe:
    """Ollama's `/api/ps`: the model listed means it is loaded and reading the
    prompt (its size estimated at 4 characters a token), not listed that it is
    loading; no answer is None."""
    limit = min(PROBE_TIMEOUT, timeout)

    async def probe(request: httpx.Request) -> str | None:
        try:
            body = json.loads(request.content or b"{}")
        except ValueError:
            body = {}
        model = str(body.get("model") or "the model")
        try:
            async with httpx.AsyncClient(timeout=limit) as client:
                answer = await client.get(f"{base_url}/api/ps")
            listed = answer.json().get("models") or []
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        names = {str(m.get("name")) for m in listed if isinstance(m, dict)}
        names |= {str(m.get("model")) for m in listed if isinstance(m, dict)}
        if model not in names:
            return f"{LOADING}{model}"
        prompt = json.dumps(body.get("messages") or []) + json.dumps(body.get("tools") or [])
        return f"reading {short_tokens(len(prompt) // 4)} tokens"

    return probe


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
    prefill of about 167 s were recorded (../shared/facts/real-models.md), which
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
        self.inner = inner or httpx.AsyncHTTPTransport()
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
        sent = asyncio.ensure_future(self.inner.handle_async_request(request))
        try:
            response = await self._first(sent, request, started)
        except BaseException:
            sent.cancel()
            raise
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Bounded(response, self.timeout, request),
            extensions=response.extensions,
        )

    async def _first(
        self, sent: asyncio.Future[httpx.Response], request: httpx.Request, started: float
    ) -> httpx.Response:
        last_answer = started
        loading: str | None = None  # the model a probe said was loading
        while True:
            done, _ = await asyncio.wait({sent}, timeout=self.poll)
            if done:
                self._load_ended(loading, time.monotonic() - started)
                return sent.result()
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
                    f"no answer from the model server for {self.timeout:.0f}s", request=request
                )

    def _load_ended(self, model: str | None, seconds: float) -> None:
        if model is not None and self.loaded is not None:
            self.loaded(model, seconds)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Bounded(httpx.AsyncByteStream):
    """A response body whose every next piece must come within `timeout`."""

    def __init__(self, response: httpx.Response, timeout: float, request: httpx.Request) -> None:
        self.response = response
        self.timeout = timeout
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = self.response.aiter_raw().__aiter__()
        while True:
            try:
                piece = await asyncio.wait_for(pieces.__anext__(), self.timeout)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx.ReadTimeout(
                    f"the model server stopped mid-answer for {self.timeout:.0f}s",
                    request=self.request,
                ) from None
            yield piece

    async def aclose(self) -> None:
        await self.response.aclose()
