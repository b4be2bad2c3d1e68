"""What a user waits for before the first prompt (issue 7): what `ls` loads,
and the recap `resume` prints. Real SQLite files and the real entry point;
speed itself is left to bench/."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from netbox_chat import render
from netbox_chat.sessions import SessionFile, SessionStore
from tests.test_sessions import make_session

ROOT = Path(__file__).parent.parent

# Modules `ls` has no use for: the event loop, Markdown and its parser,
# rich's Table layout engine, the prompt, the agent.
NOT_FOR_LS = (
    "asyncio",
    "rich.markdown",
    "markdown_it",
    "rich.table",
    "rich.live",
    "prompt_toolkit",
    "langchain_core",
    "langgraph",
    "deepagents",
)


def test_ls_loads_nothing_it_does_not_show(sessions_dir: Path) -> None:
    make_session(SessionStore(sessions_dir), "which sites?")
    probe = (
        "import contextlib, sys\n"
        "sys.argv = ['netbox-chat', 'ls']\n"
        "from netbox_chat.cli import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main()\n"
        f"print(sorted(m for m in {NOT_FOR_LS!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={"NETBOX_CHAT_SESSIONS": str(sessions_dir), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "which sites?" in out.stdout
    assert out.stderr.strip().splitlines()[-1] == "[]"


def finished(session: SessionFile, question: str, status: str, **outcome: object) -> int:
    number = session.begin_turn(question, base_checkpoint_id=None, message_ids=[])
    session.finish_turn(number, status, **outcome)  # type: ignore[arg-type]
    return number


def test_the_recap_reads_the_counts_the_last_exchange_and_what_came_after(
    sessions_dir: Path,
) -> None:
    store = SessionStore(sessions_dir)
    with SessionFile.create(store, model="qwen3:8b") as session:
        assert session.recap().last is None and session.recap().turns == 0
        finished(session, "first question", "done", answer="first answer", message_count=2)
        finished(session, "cancelled early", "cancelled")
        finished(session, "what is in [/dev]?", "done", answer="**/dev** [red]x", message_count=4)
        finished(session, "this one failed", "failed", error="model went away")
        finished(session, "cancelled late", "cancelled")
        recap = session.recap()
        assert (recap.turns, recap.messages) == (2, 4)
        assert recap.last is not None and recap.last.number == 3
        assert [(t.number, t.status) for t in recap.unfinished] == [(4, "failed"), (5, "cancelled")]

    out = io.StringIO()
    render.print_recap(Console(file=out, width=100), session.id, recap)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"resumed session {session.id}: 2 turn(s), 4 message(s)"
    # Questions and answers appear as written, never read as rich markup.
    assert lines[1] == "last question (3): what is in [/dev]?"
    assert lines[2] == "**/dev** [red]x"
    assert lines[3:] == [
        "turn 4 was failed: this one failed",
        "turn 5 was cancelled: cancelled late",
    ]
