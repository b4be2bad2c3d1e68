"""Print a session's committed state as JSON, from a fresh process.

Tests run this in a subprocess so the invariants after a cancel or a crash are
checked the way the next `resume` would see them, not through the objects of
the process that did the writing.

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
from netbox_chat.config import resolve_settings
from netbox_chat.runtime import open_saver
from netbox_chat.stores import open_store
from netbox_chat.turns import Conversation


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


def read_from_fresh_process(store: Path | str, session_id: str) -> dict[str, Any]:
    """What a brand-new process (the next `resume`) reads from the session store."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.inspect_session", str(store), session_id],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    return dict(json.loads(out.stdout))


def main() -> None:
    settings = resolve_settings(store=sys.argv[1], env={})
    with open_store(settings).open(sys.argv[2]) as session:
        saver = open_saver(session)
        graph = build_agent(settings, [], saver)
        print(json.dumps(describe(Conversation(session, graph, saver, find_end_node(graph)))))
        saver.close()


if __name__ == "__main__":
    main()
