"""A model's reply that streams faster than it is read is read in fewer pieces.

Ollama sends one NDJSON line per token (about 14,500 for a 100 kB answer), an
OpenAI-compatible server one server-sent event,
and each line costs the same long road whatever its size: ChatOllama's chunk,
LangChain's callbacks, LangGraph's "messages" stream (a wake-up of the event
loop from another context), the turn's events, the view. Measured on a slow
two-core machine that road is about 0.4 ms of CPU per token: an answer that
arrives in one second took six to read (bench/README.md, §11), and Ctrl-C
waited behind it.

So when lines are already waiting, read but not yet handed on, consecutive
lines that only add text to the answer (or only to the thinking) are joined
into one line (or event) before the model client parses them. The text, its order,
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
from dataclasses import dataclass
from typing import Any

import httpx

Merge = Callable[[bytes], bytes]
"""Whole lines in, the same lines (some of them joined) out."""


@dataclass(frozen=True)
class _Piece:
    """One unit of a reply as it came (`raw`, with its line ends), and, if it
    only adds text, the parsed unit, which text field and the text."""

    raw: bytes
    part: dict[str, Any] | None = None
    field: str = ""
    text: str = ""


def _joined_runs(pieces: list[_Piece], join: Callable[[list[_Piece]], bytes]) -> bytes:
    """The pieces as they came, each run of text-only ones of the same field
    (and the same envelope apart from the text) joined into one by `join`."""
    out: list[bytes] = []
    run: list[_Piece] = []
    for piece in pieces:
        if run and (piece.part is None or _key(piece) != _key(run[0])):
            out.append(run[0].raw if len(run) == 1 else join(run))
            run = []
        if piece.part is None:
            out.append(piece.raw)
        else:
            run.append(piece)
    if run:
        out.append(run[0].raw if len(run) == 1 else join(run))
    return b"".join(out)


def _key(piece: _Piece) -> tuple[str, Any, Any]:
    """What must be the same for two pieces to be joined."""
    assert piece.part is not None
    return piece.field, piece.part.get("model"), piece.part.get("id")


def _only_text(fields: dict[str, Any], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(field, text) when exactly one of `names` holds text and the others are
    empty or absent; None otherwise (both, neither, or not a string)."""
    texts = [(name, fields.get(name) or "") for name in names]
    if not all(isinstance(text, str) for _, text in texts):
        return None
    written = [(name, text) for name, text in texts if text]
    return written[0] if len(written) == 1 else None


# --- Ollama's /api/chat: one NDJSON line per token ---------------------------------------

_OLLAMA_TEXT = ("content", "thinking")


def _ollama_piece(line: bytes) -> _Piece:
    """An Ollama chat line; its text if it only adds text (never a tool call,
    the last line with its counts, an error or a field not known here)."""
    raw = line + b"\n"
    try:
        part = json.loads(line)
    except ValueError:
        return _Piece(raw)
    if not isinstance(part, dict) or part.get("done") is not False:
        return _Piece(raw)
    message = part.get("message")
    if set(part) - {"model", "created_at", "done", "message"} or not isinstance(message, dict):
        return _Piece(raw)
    if set(message) - {"role", *_OLLAMA_TEXT} or message.get("role") != "assistant":
        return _Piece(raw)
    text = _only_text(message, _OLLAMA_TEXT)
    return _Piece(raw) if text is None else _Piece(raw, part, *text)


def _ollama_join(run: list[_Piece]) -> bytes:
    """One line for a run: its text in order, the first line's envelope, the
    last one's `created_at`."""
    first = run[0].part
    assert first is not None and run[-1].part is not None
    message = {**first["message"], run[0].field: "".join(piece.text for piece in run)}
    joined = {**first, "message": message}
    if "created_at" in run[-1].part:
        joined["created_at"] = run[-1].part["created_at"]
    return json.dumps(joined).encode() + b"\n"


def merge_ollama_lines(data: bytes) -> bytes:
    """Ollama's chat lines (`data` ends with a newline), with each run of
    consecutive text-only lines of the same field (`content` or `thinking`)
    joined into one."""
    lines = data.split(b"\n")[:-1]
    if len(lines) < 2:
        return data
    return _joined_runs([_ollama_piece(line) for line in lines], _ollama_join)


# --- /v1/chat/completions: one server-sent event per token --------------------------------

# The answer, and the reasoning in the field each server sends it in
# (models/dialects.py: `reasoning_content` on llama-server, SGLang and LM
# Studio; `reasoning` on vLLM and Ollama's /v1).
_SSE_TEXT = ("content", "reasoning_content", "reasoning")
_SSE_ENVELOPE = {"id", "object", "created", "model", "system_fingerprint", "choices", "usage"}
_SSE_CHOICE = {"index", "delta", "finish_reason", "logprobs"}


def _sse_piece(line: bytes, ends_event: bool) -> _Piece:
    """A line of an event stream; its text if it is a whole event (`data:`
    and the blank line after it) that only adds text to the one choice:
    never a tool call, the finish, the usage, an error or `[DONE]`, nor an
    event with a field not known here (it goes on as it came)."""
    raw = line + (b"\n\n" if ends_event else b"\n")
    if not ends_event or not line.startswith(b"data: "):
        return _Piece(raw)
    try:
        part = json.loads(line[len(b"data: ") :])
    except ValueError:
        return _Piece(raw)
    if not isinstance(part, dict) or set(part) - _SSE_ENVELOPE or part.get("usage") is not None:
        return _Piece(raw)
    choices = part.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return _Piece(raw)
    (choice,) = choices
    if set(choice) - _SSE_CHOICE or choice.get("finish_reason") is not None:
        return _Piece(raw)
    delta = choice.get("delta")
    if choice.get("logprobs") is not None or not isinstance(delta, dict):
        return _Piece(raw)
    if set(delta) - {"role", *_SSE_TEXT} or delta.get("role") not in (None, "assistant"):
        return _Piece(raw)
    text = _only_text(delta, _SSE_TEXT)
    return _Piece(raw) if text is None else _Piece(raw, part, *text)


def _sse_join(run: list[_Piece]) -> bytes:
    """One event for a run: its text in order, in the first event's envelope."""
    first = run[0].part
    assert first is not None
    (choice,) = first["choices"]
    delta = {**choice["delta"], run[0].field: "".join(piece.text for piece in run)}
    joined = {**first, "choices": [{**choice, "delta": delta}]}
    return b"data: " + json.dumps(joined).encode() + b"\n\n"


def merge_sse_events(data: bytes) -> bytes:
    """An event stream's whole lines (`data` ends with a newline), with each
    run of consecutive whole events that only add text to the same field
    joined into one event. A `data:` line whose blank line has not come yet
    goes on alone: the client dispatches it when that line comes."""
    lines = data.split(b"\n")[:-1]
    if len(lines) < 4:  # two events at least
        return data
    pieces: list[_Piece] = []
    at = 0
    while at < len(lines):
        ends_event = at + 1 < len(lines) and lines[at + 1] == b"" and lines[at] != b""
        pieces.append(_sse_piece(lines[at], ends_event))
        at += 2 if ends_event else 1
    return _joined_runs(pieces, _sse_join)


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
