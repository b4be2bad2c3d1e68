"""LangGraph's sync savers, usable from the async Pregel loop.

Turns run on the async path (`astream` in a task) because only task
cancellation really stops a turn: tool coroutines get `CancelledError` and
their HTTP requests are aborted. The sync savers raise NotImplementedError for
their async methods, so one bridge (`SyncSaverBridge`, used by the SQLite saver
here and the PostgreSQL one in `postgres.py`) runs each sync method on a worker
thread.
It also counts in-flight worker writes: a write still running on a thread
after a cancel would commit *after* the rollback, so rollback waits for
`drain()`; a write the run submitted that had not started is refused (`Run`).
Reads are not counted: they commit nothing.

Blobs are stored zlib-compressed: messages (NetBox JSON above all) and the
checkpoints' channel versions shrink two to four times, which keeps a session
file within twice the JSON of its conversation (bench 4). Files written before
compression was added still read: an unmarked blob is read as it is.

`truncate_after` is how a turn is undone: the thread's rows are immutable and
linear (one process per session), so deleting what a turn appended returns the
head to the checkpoint it started from, exactly and in one transaction.

The same fact lets the bridge keep the decoded message history between turns
(`HistoryCache`): the history of a checkpoint is the writes on its ancestors,
which never change while it exists, so a turn decodes only the writes of the
step before it instead of the whole conversation (issue 17; see
docs/design-notes.md for why sharing the decoded messages is safe, and
`NETBOX_CHAT_CHECK_HISTORY_CACHE` for the check that proves it on every reuse).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import os
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import langgraph.checkpoint.base.id as checkpoint_ids
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.binop import _get_overwrite
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
)
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver

from netbox_chat.checkpoints.serde import StoredValues
from netbox_chat.errors import UserFacingError
from netbox_chat.store.database import Connection
from netbox_chat.store.errors import StoreError

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


def blob_serializer(session_id: str) -> EncryptedSerializer:
    """The serializer every store writes its blobs with (zlib, marked in the
    type) and reads them back with: only the types `serde.ALLOWED` names, a
    refusal naming `session_id` for anything else."""
    return EncryptedSerializer(ZlibBlobs(), StoredValues(session_id))


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


class Run:
    """One turn's graph run, whose bridged writes are refused once it is over.

    `drain()` waits for writes already on a worker thread; a write the run
    submitted but that had not started yet is not counted. LangGraph stores
    a run with durability "exit" as writes, then the checkpoint in a task
    that waits for them: a cancel landing between the two left that task to
    write the turn's checkpoint after the rollback had verified (issue 32,
    item 13). So a write is refused once the turn's task is cancelled (what
    the run stores as it unwinds would only be deleted by its rollback: two
    commits saved on every Ctrl-C, item 14) or the turn has closed the run,
    which it does on the event loop before it rolls back. Writes start on
    the loop too, so each is either counted and drained or refused.

    `dropped` counts the messages refused writes held, which the rollback
    reports as removed, as if they had been stored and deleted; a run that
    ends normally with a write refused did not store all of itself, so the
    turn treats it as cancelled (it is: its task was)."""

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.closed = False
        self.refused = False
        self.dropped = 0

    def refuses(self, writes: Sequence[tuple[str, Any]] = ()) -> bool:
        """Whether a write of `writes` (channel, value) is refused now; counts it if so."""
        if not (self.closed or (self.task is not None and self.task.cancelling())):
            return False
        self.refused = True
        self.dropped += sum(len(_messages_in(v)) for channel, v in writes if channel == "messages")
        return True


CURRENT_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "netbox_chat_run", default=None
)
"""The run whose writes a task makes: set by the turn before the graph starts;
LangGraph's tasks copy the context, so its writes carry it."""


def _refused(writes: Sequence[tuple[str, Any]] = ()) -> bool:
    run = CURRENT_RUN.get()
    return run is not None and run.refuses(writes)


class WritesStillRunning(StoreError):
    """A bridged call is still running on a worker thread: it may yet write,
    so nothing that depends on the thread's rows being final may run."""


CHECK_HISTORY_ENV = "NETBOX_CHAT_CHECK_HISTORY_CACHE"
"""Set to 1 to compare the kept history with a fresh decode from the store on
every reuse and fail the read on any difference (the test suite sets it)."""

Histories = dict[str, DeltaChannelHistory]
HistoryKey = tuple[str, str, str, tuple[str, ...]]
"""(thread, namespace, checkpoint id, channels): what a history is the history of."""


class HistoryCacheMismatch(UserFacingError):
    """The kept history is not what the store holds: something changed a
    decoded message in place. Raised only under NETBOX_CHAT_CHECK_HISTORY_CACHE,
    and the kept history is dropped, so the next read decodes afresh."""


def history_key(config: RunnableConfig, channels: Sequence[str]) -> HistoryKey:
    conf = config["configurable"]
    return (
        str(conf["thread_id"]),
        str(conf.get("checkpoint_ns", "")),
        str(conf["checkpoint_id"]),
        tuple(channels),
    )


class HistoryCache:
    """The decoded delta-channel history of the last checkpoint the saver read.

    One entry: a turn needs only the history of the head it starts from, which
    is the previous turn's end, the child of the checkpoint read before it.
    A separate object, like `InFlightCalls`, so the shallow copy `with_allowlist`
    makes of the saver keeps into the same entry; locked, because a load a
    Ctrl-C abandoned may still finish on a worker thread while the next runs.
    `enabled=False` is LangGraph's own walk on every read (bench 6's "before").
    `walks` and `reuses` count the reads each way (bench 6 prints them).
    """

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.check = os.environ.get(CHECK_HISTORY_ENV) == "1"
        self.walks = 0
        self.reuses = 0
        self._lock = threading.Lock()
        self._key: HistoryKey | None = None
        self._histories: Histories = {}

    def kept(self) -> tuple[HistoryKey | None, Histories]:
        with self._lock:
            return self._key, self._histories

    def remember(self, key: HistoryKey | None, histories: Histories, *, reused: bool) -> None:
        """Keep `histories` as the history of `key` (None: keep nothing)."""
        with self._lock:
            self._key, self._histories = (key, histories) if key is not None else (None, {})
            self.reuses += reused
            self.walks += not reused

    def drop(self) -> None:
        with self._lock:
            self._key, self._histories = None, {}


def _messages_in(value: Any) -> list[BaseMessage]:
    """The messages one write or seed carries (a message, a list, an Overwrite of a list)."""
    is_overwrite, inner = _get_overwrite(value)
    if is_overwrite:
        value = inner
    if isinstance(value, _DeltaSnapshot):
        value = value.value
    items = value if isinstance(value, list | tuple) else [value]
    return [item for item in items if isinstance(item, BaseMessage)]


def _all_have_ids(values: Iterable[Any]) -> bool:
    """Whether every message in `values` has its id. LangGraph stamps an id in
    place on a message without one when it is written again (a rewind's
    `Overwrite` of it: `ensure_message_ids`), which would change a shared
    message; files from before LangGraph stamped ids are never kept."""
    return all(message.id for value in values for message in _messages_in(value))


def _history_ids_stamped(history: DeltaChannelHistory) -> bool:
    seeds = [history["seed"]] if "seed" in history else []
    return _all_have_ids([*seeds, *(value for _, _, value in history["writes"])])


def _extended(histories: Histories, writes: Sequence[PendingWrite]) -> Histories:
    """The histories of a child, from its parent's and the writes stored on the
    parent (in `writes_sort_key` order, as `get_tuple` returns them and the walk
    replays them)."""
    return {
        ch: {**history, "writes": [*history["writes"], *(w for w in writes if w[1] == ch)]}
        for ch, history in histories.items()
    }


def _handed_out(history: DeltaChannelHistory) -> DeltaChannelHistory:
    """The history as LangGraph may keep it: new containers for what its replay
    can make the channel's value (the list of writes, a seed's list or dict),
    the decoded messages shared (docs/design-notes.md: why that is safe)."""
    out: DeltaChannelHistory = {"writes": list(history["writes"])}
    if "seed" in history:
        seed = history["seed"]
        is_snapshot = isinstance(seed, _DeltaSnapshot)
        out["seed"] = _DeltaSnapshot(copy.copy(seed.value)) if is_snapshot else copy.copy(seed)
    return out


def _same_history(kept: DeltaChannelHistory, fresh: DeltaChannelHistory) -> bool:
    missing = object()
    return kept["writes"] == fresh["writes"] and kept.get("seed", missing) == fresh.get(
        "seed", missing
    )


class SyncSaverBridge(BaseCheckpointSaver[str]):
    """Async methods that run a sync saver's own methods on worker threads.

    Mixed in before a sync saver (`SqliteSaver`, `PostgresSaver`), so both
    stores cross into the async Pregel loop the same way, a rollback drains
    both the same way, and both keep the decoded history between turns the
    same way (`get_delta_channel_history`). The saver's `__init__` calls
    `_start_bridge`.
    """

    in_flight: InFlightCalls
    drain_timeout: float
    histories: HistoryCache

    def _start_bridge(self, *, history_cache: bool) -> None:
        self.in_flight = InFlightCalls()
        self.drain_timeout = 30.0  # seconds `drain()` waits by default
        self.histories = HistoryCache(enabled=history_cache)

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
        if _refused():  # its turn has ended or is being undone (Run)
            return config
        return await self._on_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        # Keep `task_path`: the Pregel loop inspects this signature.
        if _refused(writes):  # its turn has ended or is being undone (Run)
            return
        await self._on_thread(self.put_writes, config, writes, task_id, task_path)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's history read (a turn's start, every state read), from
        the kept history when the store's rows say it is the same.

        The history of checkpoint C is the writes stored on C's ancestors.
        Rows are only ever appended to a thread, or deleted newer than a
        checkpoint (a rollback), so it cannot change while C exists: the
        history kept for C is reused as it is when C is read again (after a
        rollback, the head is C again), and extended by the writes stored on
        C for a child of C (a turn's end: the run's writes are stored on the
        checkpoint it started from). Anything else is the store's own walk,
        which is then kept: another checkpoint (a rewind's target, a new
        process), other channels, a parent that holds a snapshot of a channel
        (a rewind's or compaction's head), a message without an id.
        """
        target = self.get_tuple(config) if self.histories.enabled and channels else None
        if target is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        key = history_key(target.config, channels)
        histories = self._reused_history(target, key)
        reused = histories is not None
        kept: HistoryKey | None = key
        if histories is None:
            histories = dict(
                super().get_delta_channel_history(config=target.config, channels=channels)
            )
            if not all(_history_ids_stamped(history) for history in histories.values()):
                kept = None
        elif self.histories.check:
            self._check_history(target.config, channels, histories)
        self.histories.remember(kept, histories, reused=reused)
        return {channel: _handed_out(history) for channel, history in histories.items()}

    def _reused_history(self, target: CheckpointTuple, key: HistoryKey) -> Histories | None:
        kept_key, kept = self.histories.kept()
        if kept_key == key:
            return kept
        parent_config = target.parent_config
        if parent_config is None or kept_key != history_key(parent_config, key[3]):
            return None
        parent = self.get_tuple(parent_config)
        if parent is None or any(ch in parent.checkpoint["channel_values"] for ch in key[3]):
            return None  # the parent holds a snapshot: the walk stops there anyway
        writes = parent.pending_writes or []
        if not _all_have_ids(value for _, channel, value in writes if channel in key[3]):
            return None  # the walk decides, and keeps nothing
        return _extended(kept, writes)

    def _check_history(
        self, config: RunnableConfig, channels: Sequence[str], kept: Histories
    ) -> None:
        """NETBOX_CHAT_CHECK_HISTORY_CACHE: the kept history must equal a fresh
        decode of the store's rows, message for message."""
        fresh = super().get_delta_channel_history(config=config, channels=channels)
        differ = [ch for ch in channels if not _same_history(kept[ch], fresh[ch])]
        if differ:
            self.histories.drop()
            raise HistoryCacheMismatch(
                f"the conversation kept in memory differs from the session store "
                f"({', '.join(differ)} at checkpoint {config['configurable']['checkpoint_id']}): "
                f"a message was changed in place after it was read ({CHECK_HISTORY_ENV}=1)"
            )

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        # The base class's async fallback walks ancestors one thread hop at a
        # time; the sync one (above, then the store's) is a single query.
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

    def __init__(self, conn: Connection, session_id: str, *, history_cache: bool = True) -> None:
        SqliteSaver.__init__(self, conn, serde=blob_serializer(session_id))
        self._start_bridge(history_cache=history_cache)
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
