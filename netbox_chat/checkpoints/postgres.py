"""LangGraph's sync `PostgresSaver` behind the same async bridge as the SQLite saver.

It writes through the session's own connection (`store.postgres.PgSession`), the one
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

from netbox_chat.checkpoints.sqlite import SyncSaverBridge, blob_serializer
from netbox_chat.store.errors import StoreError
from netbox_chat.store.pgdatabase import PgConnection
from netbox_chat.store.postgres import shown_url

# The checkpoints a turn wrote after its base: those with greater ids (uuid6
# strings, time-ordered, compared byte by byte as PostgresSaver's
# `ORDER BY checkpoint_id DESC` does under the C locale) and the base's
# children, which only the turn can have written (one writer per session)
# even when a clock stepped back gave them smaller ids. The same rule as the
# SQLite saver's; it names checkpoint ids, so it also selects their writes.
_TURN = (
    'thread_id = %(thread)s AND (checkpoint_id COLLATE "C" > %(base)s '
    "OR checkpoint_id IN (SELECT checkpoint_id FROM checkpoints "
    "WHERE thread_id = %(thread)s AND parent_checkpoint_id = %(base)s))"
)
_ON_BASE = "thread_id = %(thread)s AND checkpoint_id = %(base)s"

# Blob versions that the turn's checkpoints refer to and no other checkpoint
# does: exactly the blobs the undone checkpoints brought in.
_ORPHANED_BLOBS = f"""
WITH turn AS (SELECT checkpoint_id FROM checkpoints WHERE {_TURN})
DELETE FROM checkpoint_blobs b USING (
    SELECT c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = %(thread)s AND c.checkpoint_id IN (SELECT checkpoint_id FROM turn)
    EXCEPT
    SELECT c.checkpoint_ns, v.key, v.value
    FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v
    WHERE c.thread_id = %(thread)s AND c.checkpoint_id NOT IN (SELECT checkpoint_id FROM turn)
) gone
WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = gone.checkpoint_ns
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

    def __init__(self, conn: PgConnection, url: str, session_id: str) -> None:
        PostgresSaver.__init__(self, conn, serde=blob_serializer(session_id))
        self._start_bridge(history_cache=True)
        if not langgraph_tables_current(conn):
            raise StoreError(
                f"the session store {shown_url(url)} lacks LangGraph's checkpoint tables "
                "or has an older version of them: run `netbox-chat doctor --init-store`"
            )

    def truncate_after(self, thread_id: str, checkpoint_id: str | None, channel: str) -> list[Any]:
        """Pass 1: the turn's checkpoints (`_TURN`), their writes, and the
        blobs only they refer to; pass 2: the writes left on `checkpoint_id`
        itself. One transaction; ancestors and their blobs are never touched.
        The writes go before the checkpoints: `_TURN` finds the base's
        children among the checkpoints."""
        keys = {"thread": thread_id, "base": checkpoint_id or "", "channel": channel}
        with self.conn.atomic(), self._cursor() as cur:
            cur.execute(
                "SELECT type, blob FROM checkpoint_writes WHERE channel = %(channel)s "
                f"AND (({_TURN}) OR ({_ON_BASE}))",
                keys,
            )
            rows = [(row["type"], row["blob"]) for row in cur.fetchall()]
            cur.execute(_ORPHANED_BLOBS, keys)
            cur.execute(f"DELETE FROM checkpoint_writes WHERE ({_TURN}) OR ({_ON_BASE})", keys)
            cur.execute(f"DELETE FROM checkpoints WHERE {_TURN}", keys)
        return [self.serde.loads_typed((kind, value)) for kind, value in rows]
