"""`netbox-chat copy ID --to STORE`: hand a session from one store to another
(a folder to the team's database, or back), with its memory and its ledger.

The copy keeps the session's id, every checkpoint (through LangGraph's own
`list` and `put`, so each saver lays the values out its own way: one blob per
checkpoint in SQLite, one row per channel version in Postgres), every write
(row for row: both savers store the same serialized bytes, and the writes'
task paths and indexes decide the order a delta channel replays them in), and
the ledger with its times and who asked. The source is held (its lock) for
the duration, so nothing is written to it meanwhile; a copy that fails half
way is removed from the target.
"""

from __future__ import annotations

import contextlib
from typing import Any

from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver, SyncSaverBridge
from netbox_chat.errors import UserFacingError
from netbox_chat.store.choose import Store
from netbox_chat.store.errors import NoSuchSession

_WRITE_COLUMNS = "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type"


def copy_session(source: Store, session_id: str, target: Store) -> int:
    """Copy `session_id` from `source` to `target`; returns the checkpoints copied."""
    with contextlib.suppress(NoSuchSession):
        if target.resolve(session_id) == session_id:
            raise UserFacingError(
                f"session {session_id} is already in {target.root}: forget it there first"
            )
    with source.open(session_id) as original:
        running = original.running_turns()
        if running:
            raise UserFacingError(
                f"cannot copy session {session_id}: turn {running[0].number} is still marked "
                "running; open it once (netbox-chat resume) to roll it back, then copy"
            )
        meta = original.meta()
        copied = target.create(model=meta.get("model", ""), session_id=session_id)
        done = False
        try:
            source_saver, target_saver = open_saver(original), open_saver(copied)
            count = _copy_checkpoints(source_saver, target_saver, session_id)
            _add_writes(target_saver, session_id, _writes(source_saver, session_id))
            copied.load_ledger(meta, original.turns(), original.edits())
            done = True
        finally:
            copied.close()
            if not done:
                with contextlib.suppress(Exception):
                    target.forget(session_id)
    return count


def _copy_checkpoints(source: SyncSaverBridge, target: SyncSaverBridge, thread_id: str) -> int:
    """Oldest first, each on its parent, through the savers' own API."""
    tuples = sorted(
        source.list({"configurable": {"thread_id": thread_id}}),
        key=lambda t: (t.config["configurable"]["checkpoint_ns"], t.checkpoint["id"]),
    )
    for item in tuples:
        parent = item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None
        config: Any = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": item.config["configurable"]["checkpoint_ns"],
                "checkpoint_id": parent,
            }
        }
        target.put(config, item.checkpoint, item.metadata, item.checkpoint["channel_versions"])
    return len(tuples)


def _writes(saver: SyncSaverBridge, thread_id: str) -> list[tuple[Any, ...]]:
    """The thread's writes as stored, each first decoded by the saver's own
    serializer, so a value it would refuse (`serde.ALLOWED`) is refused here
    too, before anything reaches the target."""
    if isinstance(saver, BridgedSqliteSaver):
        query = f"SELECT {_WRITE_COLUMNS}, value FROM writes WHERE thread_id = ?"
        rows = [tuple(row) for row in saver.conn.execute(query, (thread_id,)).fetchall()]
    else:
        query = f"SELECT {_WRITE_COLUMNS}, blob FROM checkpoint_writes WHERE thread_id = %s"
        rows = [tuple(row) for row in _pg(saver).execute(query, (thread_id,)).fetchall()]
    for *_, kind, blob in rows:
        saver.serde.loads_typed((kind, blob))
    return rows


def _add_writes(saver: SyncSaverBridge, thread_id: str, rows: list[tuple[Any, ...]]) -> None:
    if isinstance(saver, BridgedSqliteSaver):
        with saver.conn.atomic():
            saver.conn.executemany(
                f"INSERT INTO writes (thread_id, {_WRITE_COLUMNS}, value) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(thread_id, *row) for row in rows],
            )
        return
    conn = _pg(saver)
    with conn.atomic(), conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO checkpoint_writes (thread_id, {_WRITE_COLUMNS}, blob) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(thread_id, *row) for row in rows],
        )


def _pg(saver: SyncSaverBridge) -> Any:
    """The database saver's connection (the session's own)."""
    return saver.conn  # type: ignore[attr-defined]
