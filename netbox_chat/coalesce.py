"""A model's reply that streams faster than it is read is read in fewer pieces.

Ollama sends one NDJSON line per token (about 14,500 for a 100 kB answer),
and each line costs the same long road whatever its size: ChatOllama's chunk,
LangChain's callbacks, LangGraph's "messages" stream (a wake-up of the event
loop from another context), the turn's events, the view. Measured on a slow
two-core machine that road is about 0.4 ms of CPU per token: an answer that
arrives in one second took six to read (bench/README.md, §11), and Ctrl-C
waited behind it.

So when lines are already waiting, read but not yet handed on, consecutive
lines that only add text to the answer (or only to the thinking) are joined
into one line before the model client parses them. The text, its order,
and where the thinking ends and the answer begins are exactly as the server
sent them; only the number of pieces changes, and only when the reader is
behind: a reply read as fast as it streams goes through line by line, as
before. Anything else (a tool call, the last line with its counts, an error,
a field this does not know) is handed on as it came, in its place.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

Merge = Callable[[bytes], bytes]
"""Whole lines in, the same lines (some of them joined) out."""

_TEXT_FIELDS = ("content", "thinking")


def _text_only(line: bytes) -> tuple[dict[str, Any], str, str] | None:
    """An Ollama chat line that only adds text: (the line, which field, the
    text); None for any other line, which is never joined."""
    try:
        part = json.loads(line)
    except ValueError:
        return None
    if not isinstance(part, dict) or part.get("done") is not False:
        return None
    message = part.get("message")
    if set(part) - {"model", "created_at", "done", "message"} or not isinstance(message, dict):
        return None
    if set(message) - {"role", *_TEXT_FIELDS} or message.get("role") != "assistant":
        return None
    texts = [(name, message.get(name, "")) for name in _TEXT_FIELDS]
    if not all(isinstance(text, str) for _, text in texts):
        return None
    written = [(name, text) for name, text in texts if text]
    if len(written) != 1:  # both, or neither: keep it as it is
        return None
    return part, *written[0]


def merge_ollama_lines(data: bytes) -> bytes:
    """Ollama's chat lines (`data` ends with a newline), with each run of
    consecutive text-only lines of the same field (`content` or `thinking`)
    joined into one."""
    lines = data.split(b"\n")[:-1]
    if len(lines) < 2:
        return data
    out: list[bytes] = []
    run: list[tuple[bytes, dict[str, Any], str, str]] = []
    for line in lines:
        text = _text_only(line)
        if run and (
            text is None or text[1] != run[0][2] or text[0].get("model") != run[0][1].get("model")
        ):
            out.append(_joined(run))
            run = []
        if text is None:
            out.append(line)
        else:
            run.append((line, *text))
    if run:
        out.append(_joined(run))
    return b"\n".join(out) + b"\n"


def _joined(run: list[tuple[bytes, dict[str, Any], str, str]]) -> bytes:
    """One line for a run of text-only lines: their text in order, the first
    line's envelope, the last one's `created_at`. A run of one goes on as it came."""
    if len(run) == 1:
        return run[0][0]
    _, part, name, _ = run[0]
    joined = {**part, "message": {**part["message"], name: "".join(t for *_, t in run)}}
    if "created_at" in run[-1][1]:
        joined["created_at"] = run[-1][1]["created_at"]
    return json.dumps(joined).encode()


class Coalesced(httpx.AsyncByteStream):
    """A response body read ahead by a task of its own: what has arrived
    while the last piece was being handled is handed on at once, its whole
    lines joined by `merge`; a line cut between pieces waits for its end.

    The first piece is awaited in the caller's task (the wait for the model's
    first byte, its probes and their `Waiting` events, stay the caller's); the
    read-ahead starts after it. Cancelling the caller cancels the read-ahead,
    and `aclose` waits for it to end before closing the body under it."""

    def __init__(self, inner: httpx.AsyncByteStream, merge: Merge) -> None:
        self.inner = inner
        self.merge = merge
        self.reader: asyncio.Task[None] | None = None
        self.waiting: list[bytes] = []
        self.ended = False
        self.error: BaseException | None = None
        self.wake: asyncio.Future[None] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = self.inner.__aiter__()
        try:
            first = await pieces.__anext__()
        except StopAsyncIteration:
            return
        self.waiting.append(first)
        self.reader = asyncio.create_task(self._read(pieces))
        carry = b""
        try:
            while True:
                if not self.waiting and not self.ended:
                    self.wake = asyncio.get_running_loop().create_future()
                    await self.wake
                batch, self.waiting = self.waiting, []
                if not batch:  # ended, and everything handed on
                    break
                data = carry + b"".join(batch)
                cut = data.rfind(b"\n") + 1
                carry = data[cut:]
                if cut:
                    yield self.merge(data[:cut])
            if carry:
                yield carry  # no newline at the end: as it came
            if self.error is not None:
                raise self.error
        finally:
            self.reader.cancel()

    async def _read(self, pieces: AsyncIterator[bytes]) -> None:
        try:
            async for piece in pieces:
                self.waiting.append(piece)
                self._wake()
        except Exception as exc:  # handed to the reader after what came before it
            self.error = exc
        finally:
            self.ended = True
            self._wake()

    def _wake(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    async def aclose(self) -> None:
        if self.reader is not None and not self.reader.done():
            self.reader.cancel()
            await asyncio.wait([self.reader])
        await self.inner.aclose()


class CoalescingTransport(httpx.AsyncBaseTransport):
    """Sends requests through `inner`; the body of a POST to one of `paths`
    is read ahead and its waiting lines joined (`Coalesced`)."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        merge: Merge = merge_ollama_lines,
        *,
        paths: tuple[str, ...] = ("/api/chat",),
    ) -> None:
        self.inner = inner
        self.merge = merge
        self.paths = paths

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "POST" or request.url.path not in self.paths:
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=Coalesced(response.stream, self.merge),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
