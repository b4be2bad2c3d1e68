"""What a user waits for before the first prompt (issue 7): what `ls` loads.
Real SQLite files and the real entry point; speed itself is left to bench/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from netbox_chat.sessions import SessionStore
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
