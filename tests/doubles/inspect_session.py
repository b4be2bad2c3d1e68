"""Print a session's committed state as JSON, from a fresh process.

Tests run this in a subprocess so the invariants after a cancel or a crash are
checked the way the next `resume` would see them, not through the objects of
the process that did the writing. `assert_ledger_agrees(store, session_id)`
checks, from a fresh connection to either store, that the turn ledger and
LangGraph's checkpoint tables tell the same story (docs/design-notes.md, "The ledger and the checkpoints agree"); the
fresh-process read checks it too, and adds the message count.

    python -m tests.doubles.inspect_session STORE SESSION_ID

STORE is a sessions folder or a postgresql:// URL.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.config import DATABASE_SCHEMES, resolve_settings
from netbox_chat.store.choose import open_store
from netbox_chat.store.database import read_only_connection
from netbox_chat.store.ledger import Turn
from netbox_chat.store.sessions import read_turns
from tests.doubles import ROOT


def is_database(store: Path | str) -> bool:
    return str(store).startswith(DATABASE_SCHEMES)


@contextlib.contextmanager
def fresh_connection(store: Path | str, session_id: str) -> Iterator[Any]:
    """A new read-only connection to the session's store, as another process
    would open it: the session file (leaving no -wal/-shm behind, as `ls` does
    not), or the database (autocommit, so every read sees what is committed)."""
    if not is_database(store):
        with read_only_connection(Path(store, f"{session_id}.sqlite")) as conn:
            yield conn
        return
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(str(store), read_only=True)) as conn:
        yield conn


@dataclass(frozen=True)
class StoredSession:
    """What the ledger/checkpoint agreement is judged on, read from a store."""

    turns: list[Turn]
    parents: dict[str, str | None]  # checkpoint id -> its parent's
    pending_on_head: int
    edits: list[dict[str, Any]]
    orphaned_blobs: int = 0  # Postgres only: blob versions no checkpoint refers to

    @property
    def head(self) -> str | None:
        # uuid6 ids sort by time as strings: the saver's "latest" is the greatest
        return max(self.parents, default=None)

    def off_the_line(self) -> set[str]:
        """Checkpoints the head does not descend from: a fork, which a
        rollback or a history edit (written onto the head) never leaves."""
        line, at = set(), self.head
        while at is not None and at not in line:
            line.add(at)
            at = self.parents.get(at)
        return set(self.parents) - line


def _read_file(conn: Any) -> StoredSession:
    turns = read_turns(conn, "ORDER BY number")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    parents: dict[str, str | None] = {}
    pending = 0
    if "checkpoints" in tables:
        parents = dict(
            conn.execute("SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints").fetchall()
        )
        (pending,) = conn.execute(
            "SELECT count(*) FROM writes WHERE checkpoint_id = ?", (max(parents, default=None),)
        ).fetchone()
    edits = []
    if "history_edits" in tables:  # a file gets it at its first edit (m008)
        edits = [json.loads(row[0]) for row in conn.execute("SELECT detail FROM history_edits")]
    return StoredSession(turns, parents, pending, edits)


# A blob is written with the checkpoint that first has its version
# (PostgresSaver.put stores `new_versions` only), so one that no checkpoint
# refers to is what a rollback should have deleted and did not.
_ORPHANED_BLOBS = """
SELECT count(*) FROM checkpoint_blobs b WHERE b.thread_id = %(sid)s AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
      AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version
)
"""


def _read_database(conn: Any, session_id: str) -> StoredSession:
    from netbox_chat.store.ledger import TURN_COLUMNS, turn_from_row

    sid = {"sid": session_id}
    rows = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = %(sid)s ORDER BY number", sid
    ).fetchall()
    parents = {
        cid: parent
        for cid, parent in conn.execute(
            "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = %(sid)s",
            sid,
        ).fetchall()
    }
    (pending,) = conn.execute(
        "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %(sid)s "
        "AND checkpoint_id = %(head)s",
        {**sid, "head": max(parents, default=None)},
    ).fetchone()
    edits = [
        json.loads(row[0])
        for row in conn.execute(
            "SELECT detail FROM history_edits WHERE session_id = %(sid)s ORDER BY id", sid
        ).fetchall()
    ]
    (orphaned,) = conn.execute(_ORPHANED_BLOBS, sid).fetchone()
    return StoredSession(
        [turn_from_row(tuple(row)) for row in rows], parents, pending, edits, orphaned
    )


def read_stored(store: Path | str, session_id: str) -> StoredSession:
    with fresh_connection(store, session_id) as conn:
        return _read_database(conn, session_id) if is_database(store) else _read_file(conn)


def ledger_problems(store: Path | str, session_id: str, *, after_crash: bool = False) -> list[str]:
    """Where the ledger and LangGraph's checkpoint tables of a session disagree,
    once no process is in the middle of a turn (empty when they agree), read
    from a fresh connection to the store (a sessions folder or a database URL):

    - no turn is still `running` (`after_crash`: only the last one may be, as a
      kill -9 leaves it for the next open to roll back);
    - every `done` turn's end checkpoint is stored;
    - the head (the greatest checkpoint id) is the latest finished state: the
      end of the last `done` turn, or the head a rewind or compaction after it
      wrote; no checkpoint at all when there is neither;
    - nothing is pending on the head;
    - every checkpoint is on the head's line (no fork);
    - on Postgres, no channel value is left that no checkpoint refers to.
    """
    stored = read_stored(store, session_id)
    turns = stored.turns
    allowed = {turns[-1].number} if after_crash and turns else set()
    problems = [
        f"turn {t.number} is still running"
        for t in turns
        if t.status == "running" and t.number not in allowed
    ]
    done = [t for t in turns if t.status == "done"]
    problems += [
        f"done turn {t.number} ended on {t.end_checkpoint_id}, which is not stored"
        for t in done
        if t.end_checkpoint_id not in stored.parents
    ]
    last = done[-1] if done else None
    expected = last.end_checkpoint_id if last else None
    for edit in stored.edits:
        if edit.get("after_turn", 0) >= (last.number if last else 0):
            expected = edit.get("head_after")
    if stored.head != expected:
        problems.append(f"the head is {stored.head}, but the last finished state is {expected}")
    if stored.pending_on_head:
        problems.append(f"{stored.pending_on_head} write(s) pending on the head")
    if forked := stored.off_the_line():
        problems.append(f"{len(forked)} checkpoint(s) off the head's line: {sorted(forked)}")
    if stored.orphaned_blobs:
        problems.append(f"{stored.orphaned_blobs} blob(s) that no checkpoint refers to")
    return problems


def assert_ledger_agrees(store: Path | str, session_id: str, *, after_crash: bool = False) -> None:
    problems = ledger_problems(store, session_id, after_crash=after_crash)
    assert not problems, f"session {session_id}: " + "; ".join(problems)


def describe(conversation: Conversation) -> dict[str, Any]:
    head_id = conversation.head_checkpoint_id()
    values = conversation.committed_values(head_id)
    snapshot = conversation.graph.get_state(conversation.pinned(head_id)) if head_id else None
    head_tuple = conversation.saver.get_tuple(conversation.config)
    return {
        "messages": [
            {"id": m.id, "type": m.type, "content": m.content} for m in values.get("messages", [])
        ],
        "files": sorted(values.get("files", {}) or {}),
        "next": list(snapshot.next) if snapshot else [],
        "pending_writes": len(head_tuple.pending_writes or []) if head_tuple else 0,
        "head_problems": conversation.head_problems(),
        "ledger_messages": conversation.session.recap().messages,
        "turns": [
            {
                "number": t.number,
                "question": t.question,
                "status": t.status,
                "rolled_back": t.rolled_back,
                "error": t.error,
            }
            for t in conversation.session.turns()
        ],
    }


def read_from_fresh_process(
    store: Path | str, session_id: str, *, after_crash: bool = False
) -> dict[str, Any]:
    """What a brand-new process (the next `resume`) reads from the session
    store (a folder or a postgresql:// URL)."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.doubles.inspect_session", str(store), session_id],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    state = dict(json.loads(out.stdout))
    assert_ledger_agrees(store, session_id, after_crash=after_crash)
    assert state["ledger_messages"] == len(state["messages"]), state
    return state


def main() -> None:
    settings = resolve_settings(store=sys.argv[1], env={})
    with open_store(settings).open(sys.argv[2]) as session:
        saver = open_saver(session)
        graph = build_agent(settings, [], saver)
        print(json.dumps(describe(Conversation(session, graph, saver, find_end_node(graph)))))


if __name__ == "__main__":
    main()


def turn_rows(path: Path) -> list[tuple[int, str]]:
    """A session file's ledger rows as they are, even mid-turn (not checked: a
    process may be writing it); `StoreUnderTest.statuses` reads either store."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        return conn.execute("SELECT number, status FROM turns ORDER BY number").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def turn_row(sessions_dir: Path, session: str, number: int) -> dict[str, Any]:
    conn = sqlite3.connect(sessions_dir / f"{session}.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM turns WHERE number = ?", (number,)).fetchone()
    finally:
        conn.close()
    return dict(row)
