"""Print a session's committed state as JSON, from a fresh process.

Tests run this in a subprocess so the invariants after a cancel or a crash are
checked the way the next `resume` would see them, not through the objects of
the process that did the writing. `assert_ledger_agrees(path)` checks, from the
file alone, that the turn ledger and LangGraph's checkpoint tables tell the same
story (docs/design-notes.md, "The ledger and the checkpoints agree"); the
fresh-process read checks it too, and adds the message count.

    python -m tests.inspect_session STORE SESSION_ID

STORE is a sessions folder or a postgresql:// URL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from netbox_chat.agent import build_agent, find_end_node
from netbox_chat.config import DATABASE_SCHEMES, resolve_settings
from netbox_chat.runtime import open_saver
from netbox_chat.sessions import read_only_connection, read_turns
from netbox_chat.stores import open_store
from netbox_chat.turns import Conversation


def ledger_problems(path: Path, *, after_crash: bool = False) -> list[str]:
    """Where the ledger and the checkpoint tables of a session file disagree,
    once no process is in the middle of a turn (empty when they agree):

    - no turn is still `running` (`after_crash`: only the last one may be, as a
      kill -9 leaves it for the next open to roll back);
    - every `done` turn's end checkpoint is stored;
    - the head (the greatest checkpoint id) is the latest finished state: the
      end of the last `done` turn, or the head a rewind or compaction after it
      wrote; no checkpoint at all when there is neither;
    - nothing is pending on the head.
    """
    with read_only_connection(path) as conn:
        turns = read_turns(conn, "ORDER BY number")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        stored: set[str] = set()
        head: str | None = None
        pending = 0
        if "checkpoints" in tables:
            stored = {row[0] for row in conn.execute("SELECT checkpoint_id FROM checkpoints")}
            head = max(stored, default=None)
            (pending,) = conn.execute(
                "SELECT count(*) FROM writes WHERE checkpoint_id = ?", (head,)
            ).fetchone()
        edits = [json.loads(row[0]) for row in conn.execute("SELECT detail FROM history_edits")]
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
        if t.end_checkpoint_id not in stored
    ]
    last = done[-1] if done else None
    expected = last.end_checkpoint_id if last else None
    for edit in edits:
        if edit.get("after_turn", 0) >= (last.number if last else 0):
            expected = edit.get("head_after")
    if head != expected:
        problems.append(f"the head is {head}, but the last finished state is {expected}")
    if pending:
        problems.append(f"{pending} write(s) pending on the head")
    return problems


def assert_ledger_agrees(path: Path, *, after_crash: bool = False) -> None:
    problems = ledger_problems(path, after_crash=after_crash)
    assert not problems, f"{path.name}: " + "; ".join(problems)


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
        [sys.executable, "-m", "tests.inspect_session", str(store), session_id],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    state = dict(json.loads(out.stdout))
    if not str(store).startswith(DATABASE_SCHEMES):
        assert_ledger_agrees(Path(store, f"{session_id}.sqlite"), after_crash=after_crash)
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
