"""LangGraph's sync `PostgresSaver` behind the same async bridge as the SQLite saver.

It writes through the session's own connection (`pgstore.PgSession`), the one
that holds the session's advisory lock: if that connection is lost, so is the
lock, and nothing of this process can be written after another writer took it.

Rollback (`truncate_after`) works on LangGraph's Postgres layout, which differs
from SQLite's: a checkpoint row keeps only its channel *versions*, and each
channel value is a row of `checkpoint_blobs` keyed by (thread, namespace,
channel, version), shared by every checkpoint that has that version. So undoing
a turn deletes its checkpoints, its writes, and only the blobs whose versions
no remaining checkpoint refers to: the ones the turn created.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.base import MIGRATIONS
from psycopg import Connection

from netbox_chat.checkpointer import SyncSaverBridge, blob_serializer
from netbox_chat.pgdatabase import PgConnection
from netbox_chat.pgstore import shown_url
from netbox_chat.sessions import StoreError

# Checkpoint ids are time-ordered uuid6 strings; compare them byte by byte, the
# order PostgresSaver's `ORDER BY checkpoint_id DESC` gives under the C locale.
_AFTER = 'thread_id = %s AND checkpoint_id COLLATE "C" > %s'
_ON_BASE = "thread_id = %s AND checkpoint_id = %s"

# Blob versions that the checkpoints after the base refer to and none up to the
# base does: exactly the blobs the undone checkpoints brought in.
_ORPHANED_BLOBS = """
DELETE FROM checkpoint_blobs b USING (
    SELECT c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = %s AND c.checkpoint_id COLLATE "C" > %s
    EXCEPT
    SELECT c.checkpoint_ns, v.key, v.value
    FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = %s AND c.checkpoint_id COLLATE "C" <= %s
) gone
WHERE b.thread_id = %s AND b.checkpoint_ns = gone.checkpoint_ns
  AND b.channel = gone.channel AND b.version = gone.version
"""


def setup_tables(conn: Connection[Any]) -> None:
    """Create or migrate LangGraph's own tables (for `doctor --init-store`)."""
    PostgresSaver(conn).setup()


def langgraph_tables_current(conn: Connection[Any]) -> bool:
    try:
        row = conn.execute("SELECT max(v) FROM checkpoint_migrations").fetchone()
    except Exception:
        return False
    return row is not None and row[0] == len(MIGRATIONS) - 1


class BridgedPostgresSaver(SyncSaverBridge, PostgresSaver):
    """`PostgresSaver` whose async methods delegate to the sync ones on threads."""

    conn: PgConnection

    def __init__(self, conn: PgConnection, url: str) -> None:
        PostgresSaver.__init__(self, conn, serde=blob_serializer())
        self._start_bridge(history_cache=True)
        if not langgraph_tables_current(conn):
            raise StoreError(
                f"the session store {shown_url(url)} lacks LangGraph's checkpoint tables "
                "or has an older version of them: run `netbox-chat doctor --init-store`"
            )

    def truncate_after(self, thread_id: str, checkpoint_id: str | None, channel: str) -> list[Any]:
        """Pass 1: the checkpoints after `checkpoint_id`, their writes, and the
        blobs only they refer to; pass 2: the writes left on `checkpoint_id`
        itself. One transaction; ancestors and their blobs are never touched."""
        after = checkpoint_id or ""
        with self.conn.atomic(), self._cursor() as cur:
            cur.execute(
                "SELECT type, blob FROM checkpoint_writes WHERE channel = %s "
                f"AND (({_AFTER}) OR ({_ON_BASE}))",
                (channel, thread_id, after, thread_id, after),
            )
            rows = [(row["type"], row["blob"]) for row in cur.fetchall()]
            cur.execute(_ORPHANED_BLOBS, (thread_id, after, thread_id, after, thread_id))
            cur.execute(f"DELETE FROM checkpoints WHERE {_AFTER}", (thread_id, after))
            cur.execute(f"DELETE FROM checkpoint_writes WHERE {_AFTER}", (thread_id, after))
            cur.execute(f"DELETE FROM checkpoint_writes WHERE {_ON_BASE}", (thread_id, after))
        return [self.serde.loads_typed((kind, value)) for kind, value in rows]
