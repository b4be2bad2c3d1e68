"""What a user waits for before the first prompt (issue 7): what `ls` and the
REPL load, the recap `resume` prints, and the agent build that starts only
once the prompt is on the screen. Real SQLite files, the real build against
the scripted Ollama server and the NetBox double; speed itself is left to
bench/."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session, get_app
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from netbox_chat.background import Once
from netbox_chat.cli.repl import BackgroundRuntime, Repl
from netbox_chat.config import resolve_settings
from netbox_chat.store.sessions import SessionFile, SessionStore
from netbox_chat.ui import turnview
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.stores import make_session
from tests.drive.process import cli, python
from tests.drive.pty import PROMPT, leave, on_a_terminal

# Modules `ls` has no use for: the event loop, Markdown and its parser,
# rich's Table layout engine, the prompt, the agent, the MCP server's SDK.
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
    "mcp",
    "netbox_chat.mcp",
    "uvicorn",
)


@pytest.mark.parametrize("command", [["ls"], ["ls", "--grep", "SITES"]], ids=["ls", "grep"])
def test_ls_loads_nothing_it_does_not_show(sessions_dir: Path, command: list[str]) -> None:
    make_session(SessionStore(sessions_dir), "which sites?")
    probe = (
        "import contextlib, sys\n"
        f"sys.argv = ['netbox-chat', *{command!r}]\n"
        "from netbox_chat.cli.app import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main()\n"
        f"print(sorted(m for m in {NOT_FOR_LS!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = {"NETBOX_CHAT_SESSIONS": str(sessions_dir), "PATH": "/usr/bin:/bin"}
    out = cli(env, program=python(probe), check=True)
    assert "which sites?" in out.stdout
    assert out.stderr.strip().splitlines()[-1] == "[]"


# Modules the first prompt has no use for: the agent, its model client and
# their validation (built on a thread once the prompt is up), Markdown (a
# resumed answer is rendered above the prompt once it is up), the database
# store, a tool result's table (/show), the MCP server's SDK (`netbox-chat mcp` only).
NOT_BEFORE_THE_PROMPT = (
    "langchain_core",
    "langgraph",
    "deepagents",
    "httpx",
    "pydantic",
    "rich.markdown",
    "markdown_it",
    "netbox_chat.agent.graph",
    "netbox_chat.agent.turns",
    "netbox_chat.store.postgres",
    "netbox_chat.agent.evidence",
    "mcp",
    "netbox_chat.mcp",
)

# The `netbox-chat` entry point, with prompt-toolkit's prompt_async noting
# what is loaded each time a prompt is about to be drawn.
PROMPT_PROBE = f"""\
import gc, json, os, sys
from prompt_toolkit import PromptSession

asked = PromptSession.prompt_async
seen = []

async def prompt_async(self, *args, **kwargs):
    loaded = sorted(m for m in {NOT_BEFORE_THE_PROMPT!r} if m in sys.modules)
    seen.append({{
        "loaded": loaded,
        "collecting": gc.isenabled(),
        "frozen": gc.get_freeze_count(),
        "tracked": len(gc.get_objects()),
    }})
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(seen, out)
    return await asked(self, *args, **kwargs)

PromptSession.prompt_async = prompt_async
sys.argv = ["netbox-chat", *sys.argv[1:]]
from netbox_chat.cli.main import main
main()
"""


def probed_prompts(
    env: dict[str, str], tmp_path: Path, lines: list[tuple[str, str]], *args: str
) -> list[dict[str, Any]]:
    """The chat on a terminal under PROMPT_PROBE: each (line, shown) typed and
    answered, then /help, then leave; what the probe recorded at each prompt."""
    probe_out = tmp_path / "probe.json"
    child = on_a_terminal(
        {**env, "PROBE_OUT": str(probe_out)},
        *args,
        program=python(PROMPT_PROBE),
        columns=100,
        timeout=30,
    )
    child.expect(PROMPT)
    for line, shown in [*lines, ("/help", "Ask a question about your network")]:
        child.sendline(line)
        child.expect(shown)
        child.expect(PROMPT)
    leave(child)
    return list(json.loads(probe_out.read_text()))


@pytest.mark.parametrize("resumed", [False, True], ids=["new", "resume"])
def test_the_first_prompt_loads_nothing_it_does_not_use(
    chat_env: dict[str, str], sessions_dir: Path, tmp_path: Path, resumed: bool
) -> None:
    args = ["resume", make_session(SessionStore(sessions_dir))] if resumed else []
    first, second = probed_prompts(chat_env, tmp_path, [], *args)[:2]
    assert first["loaded"] == []
    # The collector, paused while the start-up's imports ran, collects again
    # for the rest of the session (a long one would otherwise only grow).
    assert second["collecting"] is True


def test_what_a_turn_leaves_is_frozen_out_of_the_collector_at_the_next_prompt(
    chat_env: dict[str, str], tmp_path: Path, ollama: ScriptedOllama
) -> None:
    """Issue 32, item 14: what a turn leaves alive (its messages, the kept
    history) lives as long as the session. Left in the collector it piled up
    until a full collection walked it (50-110 ms on a 500-turn session), most
    often in the next turn's first moments, where a Ctrl-C then waited for
    it. Once the prompt is back, the turn's garbage is collected and what
    survives is frozen: the next prompt finds the turn's objects out of the
    collector, which holds only what came after."""
    ollama.script([Text("Three sites.")])
    probes = probed_prompts(chat_env, tmp_path, [("which sites?", "Three sites.")])
    after_turn, after_help = probes[1:3]
    assert after_help["frozen"] > after_turn["frozen"]
    assert after_help["tracked"] < after_turn["tracked"]


def finished(session: SessionFile, question: str, status: str, **outcome: object) -> int:
    number = session.begin_turn(question, base_checkpoint_id=None, base_message_count=0)
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
        items = "".join(f"\n- item {n}" for n in range(1, 13))
        answer = f"**/dev** [red]x\n{items}"  # 14 lines
        finished(session, "what is in [/dev]?", "done", answer=answer, message_count=4)
        finished(session, "this one failed", "failed", error="model went away")
        finished(session, "cancelled late", "cancelled")
        recap = session.recap()
        assert (recap.turns, recap.messages) == (2, 4)
        assert recap.last is not None and recap.last.number == 3
        assert [(t.number, t.status) for t in recap.unfinished] == [(4, "failed"), (5, "cancelled")]

    out = io.StringIO()
    settings = resolve_settings(
        sessions_dir=sessions_dir, netbox_url="https://netbox.example.com", env={}
    )
    rest = turnview.print_recap(Console(file=out, width=100), session.id, recap, settings)
    assert len(out.getvalue().splitlines()) == 3  # the rest waits for the prompt
    rest()
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        f"resumed session {session.id}: 2 turns, 4 messages · NetBox netbox.example.com "
        "· model qwen3:8b"
    )
    assert lines.pop(1) == "on ollama server http://127.0.0.1:11434"  # the model's server
    # Questions and answers appear as written, never read as rich markup; the
    # answer's first lines rendered, then how many more and where to see them.
    assert lines[1] == "turn 3: what is in [/dev]?"
    assert lines[2].rstrip() == "/dev [red]x"
    assert [line.rstrip() for line in lines[3:14]] == [""] + [f" • item {n}" for n in range(1, 11)]
    assert lines[14:] == [
        f"… 2 more lines: `netbox-chat export {session.id}` to see all",
        "turn 4 was failed: this one failed",
        "turn 5 was cancelled: cancelled late",
        "/help for commands; exit or Ctrl-D to leave",
    ]


async def test_the_agent_build_starts_once_the_prompt_is_drawn(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    settings = resolve_settings(env=chat_env)
    with (
        SessionFile.create(SessionStore(sessions_dir), model=settings.model) as session,
        create_pipe_input() as pipe,
    ):
        background = BackgroundRuntime(session, settings)
        renders_before_start: list[int] = []
        start = background.start

        def recording_start() -> None:
            renders_before_start.append(get_app().render_counter)
            start()

        background.start = recording_start  # type: ignore[method-assign]
        repl = Repl(session, settings, Console(file=io.StringIO()), background)
        assert not background.started
        pipe.send_text("/exit\r")
        with create_app_session(input=pipe, output=DummyOutput()):
            await repl.run()
        assert background.started and renders_before_start[0] >= 1
        runtime = await background.get()
        assert runtime.conversation.session is session
        await background.aclose()


async def test_ctrl_c_while_waiting_for_the_agent_does_not_cancel_its_build(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    settings = resolve_settings(env=chat_env)
    with SessionFile.create(SessionStore(sessions_dir), model=settings.model) as session:
        background = BackgroundRuntime(session, settings)
        waiter = asyncio.create_task(background.get())
        await asyncio.sleep(0)
        assert background.started
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        runtime = await background.get()  # the same build, finished
        assert runtime is background.future.result()
        await background.aclose()


async def test_background_work_runs_once_for_every_waiter_and_its_failure_reaches_each() -> None:
    """background.Once, under the agent build and the NetBox check: two
    waiters (the first question and crash recovery) share one run, and a
    failure is every waiter's error, never a result."""
    runs: list[int] = []
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def work() -> str:
        runs.append(1)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=30)
        return "built"

    once = Once(work, name="test-work")
    assert once.ready() is None and not once.started
    first, second = asyncio.create_task(once.get()), asyncio.create_task(once.get())
    await asyncio.sleep(0.05)
    assert once.ready() is None  # still running
    release.set()
    assert await first == await second == "built"
    assert runs == [1] and once.ready() == "built"

    def fails() -> str:
        raise RuntimeError("the server went away")

    broken = Once(fails, name="test-fails")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="the server went away"):
            await broken.get()
    assert broken.ready() is None
