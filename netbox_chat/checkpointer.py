"""LangGraph's sync savers, usable from the async Pregel loop.

Turns run on the async path (`astream` in a task) because only task
cancellation really stops a turn: tool coroutines get `CancelledError` and
their HTTP requests are aborted. The sync savers raise NotImplementedError for
their async methods, so one bridge (`SyncSaverBridge`, used by the SQLite saver
here and the PostgreSQL one in `pgsaver.py`) runs each sync method on a worker
thread.
It also counts in-flight worker writes: a write still running on a thread
after a cancel would commit *after* the rollback, so rollback waits for
`drain()`. Reads are not counted: they commit nothing.

Blobs are stored zlib-compressed: messages (NetBox JSON above all) and the
checkpoints' channel versions shrink two to four times, which keeps a session
file within twice the JSON of its conversation (bench 4). Files written before
compression was added still read: an unmarked blob is read as it is.

`truncate_after` is how a turn is undone: the thread's rows are immutable and
linear (one process per session), so deleting what a turn appended returns the
head to the checkpoint it started from, exactly and in one transaction.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import langgraph.checkpoint.base.id as checkpoint_ids
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from netbox_chat.database import Connection
from netbox_chat.sessions import StoreError

T = TypeVar("T")

# The async methods the Pregel loop (and our own code) may call. A test
# compares this with the base class so an upgrade that adds one cannot
# silently reach a NotImplementedError.
BRIDGED_METHODS = (
    "aget_tuple",
    "alist",
    "aput",
    "aput_writes",
    "aget_delta_channel_history",
    "adelete_thread",
)


class ZlibBlobs:
    """A "cipher" for LangGraph's `EncryptedSerializer` that compresses.

    Using LangGraph's own wrapper (it marks the blob type, e.g. `msgpack+zlib`)
    rather than a serializer of our own keeps its msgpack allowlist support.
    Blobs that zlib cannot shrink are stored as they are, marked `raw`.
    """

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        packed = zlib.compress(plaintext)
        return ("zlib", packed) if len(packed) < len(plaintext) else ("raw", plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername == "zlib":
            return zlib.decompress(ciphertext)
        if ciphername == "raw":
            return ciphertext
        raise ValueError(f"unknown blob encoding {ciphername!r}")


def blob_serializer() -> EncryptedSerializer:
    """The serializer every store writes its blobs with (zlib, marked in the type)."""
    return EncryptedSerializer(ZlibBlobs(), JsonPlusSerializer())


class InFlightCalls:
    """How many bridged calls are running on worker threads.

    A separate object, not a counter on the saver: LangGraph's `with_allowlist`
    hands the graph a shallow copy of the saver when strict msgpack is on, and
    both copies must count into the one `drain()` waits on.
    """

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def enter(self) -> None:
        with self.changed:
            self.count += 1

    def leave(self) -> None:
        with self.changed:
            self.count -= 1
            self.changed.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.count == 0, timeout=timeout)


class WritesStillRunning(StoreError):
    """A bridged call is still running on a worker thread: it may yet write,
    so nothing that depends on the thread's rows being final may run."""


class SyncSaverBridge(BaseCheckpointSaver[str]):
    """Async methods that run a sync saver's own methods on worker threads.

    Mixed in before a sync saver (`SqliteSaver`, `PostgresSaver`), so both
    stores cross into the async Pregel loop the same way and a rollback drains
    both the same way. The saver's `__init__` sets `in_flight` and
    `drain_timeout`.
    """

    in_flight: InFlightCalls
    drain_timeout: float

    async def _on_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.in_flight.enter()
        context = contextvars.copy_context()
        call = functools.partial(context.run, self._tracked, fn, *args, **kwargs)
        # Shielded: a cancel must not un-submit a queued call, or the in-flight
        # count would never come back down; the call runs, and drain() waits.
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(None, call))

    async def _read_on_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A read on a worker thread, not counted in `in_flight`: it commits
        nothing, so a rollback need not wait for it. After a Ctrl-C in a
        turn's first moments LangGraph may still be decoding the whole
        history for the turn (tens of ms on a long session); the rollback
        goes ahead and the abandoned result is dropped."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, call)

    def _tracked(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # Decremented on the worker thread when the call really finishes, not
        # when the awaiting coroutine is cancelled.
        try:
            return fn(*args, **kwargs)
        finally:
            self.in_flight.leave()

    def drain(self, timeout: float | None = None) -> None:
        """Block until no bridged call is still running on a worker thread.

        Raises `WritesStillRunning` after `timeout` seconds (`drain_timeout` by
        default): a rollback or a history edit that ran then could be
        overtaken by that write, so the caller must not go on."""
        timeout = self.drain_timeout if timeout is None else timeout
        if not self.in_flight.wait_idle(timeout):
            raise WritesStillRunning(
                f"a write to the session file was still running after {timeout:g} s"
            )

    @staticmethod
    def ids_after(checkpoint_id: str | None) -> None:
        """Make the next checkpoint ids sort after `checkpoint_id`.

        Ids are uuid6 from the wall clock, kept increasing only within one
        process (`langgraph.checkpoint.base.id`); SqliteSaver takes the
        greatest id as the head. A clock stepped back since the head was
        written (NTP, a restored VM) would give the next checkpoint a smaller
        id, and the finished turn would vanish under the old head."""
        if checkpoint_id is None:
            return
        stamp = checkpoint_ids.UUID(checkpoint_id).time
        if stamp > (checkpoint_ids._last_v6_timestamp or 0):
            checkpoint_ids._last_v6_timestamp = stamp  # type: ignore[assignment]

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._read_on_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # list() holds the saver's lock while it yields, so it is drained in
        # one worker call; interleaving other saver calls would deadlock.
        items = await self._read_on_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._on_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        # Keep `task_path`: the Pregel loop inspects this signature.
        await self._on_thread(self.put_writes, config, writes, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # The base class's async fallback walks ancestors one thread hop at a
        # time; the sync override is a single recursive query.
        return await self._read_on_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self._on_thread(self.delete_thread, thread_id)

    def truncate_after(self, thread_id: str, checkpoint_id: str | None, channel: str) -> list[Any]:
        """Delete what was written on the thread after `checkpoint_id` (None:
        all of it), in one transaction; return the decoded values the deleted
        writes held for `channel`. Each store implements it on its own tables."""
        raise NotImplementedError


class BridgedSqliteSaver(SyncSaverBridge, SqliteSaver):
    """`SqliteSaver` whose async methods delegate to the sync ones on threads."""

    conn: Connection

    def __init__(self, conn: Connection) -> None:
        SqliteSaver.__init__(self, conn, serde=blob_serializer())
        self.in_flight = InFlightCalls()
        self.drain_timeout = 30.0  # seconds `drain()` waits by default
        # Now, not on first use: a copy made before (`with_allowlist`) would
        # run its own setup, whose executescript commits, inside an atomic().
        self.setup()

    def truncate_after(self, thread_id: str, checkpoint_id: str | None, channel: str) -> list[Any]:
        """Delete what was written on the thread after `checkpoint_id` (None: all of it).

        Pass 1 deletes the turn's checkpoints with their writes: those newer
        than it (ids are time-ordered, the order SqliteSaver itself uses to
        find the head) and its children, which only the turn can have written
        (one writer per session) even when a clock stepped back gave them
        smaller ids. Pass 2 deletes the writes left on `checkpoint_id` itself,
        where a run puts its input and a cancelled step its pending results.
        Ancestors are never touched, so every delta channel replays exactly as
        before. Both passes are one transaction: `atomic()` holds back the
        commit the saver's cursor makes even when a statement raised. Returns
        the decoded values the deleted writes held for `channel`, for the report.
        """
        with self.conn.atomic(), self.cursor() as cur:
            turn_ids = [
                row[0]
                for row in cur.execute(
                    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? "
                    "AND (checkpoint_id > ? OR parent_checkpoint_id = ?)",
                    (thread_id, checkpoint_id or "", checkpoint_id),
                )
            ]
            doomed = [(thread_id, cid) for cid in turn_ids]
            if checkpoint_id is not None:
                doomed.append((thread_id, checkpoint_id))
            rows = [
                row
                for key in doomed
                for row in cur.execute(
                    "SELECT type, value FROM writes WHERE thread_id = ? AND checkpoint_id = ? "
                    "AND channel = ? ORDER BY task_id, idx",
                    (*key, channel),
                )
            ]
            cur.executemany(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
                doomed[: len(turn_ids)],
            )
            cur.executemany("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?", doomed)
        return [self.serde.loads_typed((kind, value)) for kind, value in rows]
