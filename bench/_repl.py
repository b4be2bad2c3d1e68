"""Run the real `netbox-chat` command with the agent's NetBox tools replaced.

The benchmarks that drive the REPL through a pty need turns with a slow tool
(and must not need a NetBox), so this launcher swaps `build_runtime` for one
that injects the bench tools, then hands over to the real entry point.
Everything else (Typer, the REPL, prompt-toolkit, the background agent build,
ChatOllama, the session file) is the shipped code.

    python bench/_repl.py [netbox-chat arguments...]

NETBOX_CHAT_BENCH_AGENT=tools (default) injects the bench tools;
NETBOX_CHAT_BENCH_AGENT=none makes the background build fail at once without
importing anything (a what-if: the prompt without the agent import competing).
NETBOX_CHAT_BENCH_SLOW_TOOL sets the slow tool's seconds (default 1.0).
NETBOX_CHAT_BENCH_VIEW=none draws no answer text at all (a what-if: the floor
of bench 10, what the stream costs before anything is drawn).
NETBOX_CHAT_BENCH_TIMELINE=FILE appends "mark wall-clock-time" lines for the
start-up steps (bench 2 turns them into a breakdown).
"""

import time

_STARTED = time.time()

import os  # noqa: E402
from typing import Any  # noqa: E402

_TIMELINE = os.environ.get("NETBOX_CHAT_BENCH_TIMELINE")


def mark(name: str, at: float | None = None) -> None:
    if _TIMELINE:
        with open(_TIMELINE, "a") as out:
            out.write(f"{name} {time.time() if at is None else at:.6f}\n")


mark("interpreter started, site imported", _STARTED)

from netbox_chat import process  # noqa: E402

process.pause_collector()  # as the entry point does before its first import

from netbox_chat.agent import runtime  # noqa: E402

_original = runtime.build_runtime


def _build_runtime(session: Any, settings: Any, *, tools: Any = None, **kwargs: Any) -> Any:
    if os.environ.get("NETBOX_CHAT_BENCH_AGENT") == "none":
        raise RuntimeError("bench: agent build disabled")
    from _common import bench_tools

    slow = float(os.environ.get("NETBOX_CHAT_BENCH_SLOW_TOOL", "1.0"))
    return _original(session, settings, tools=bench_tools(slow), **kwargs)


runtime.build_runtime = _build_runtime


def _draw_no_answer() -> None:
    from netbox_chat.agent.turns import TextDelta
    from netbox_chat.ui import turnview

    on_event = turnview.TurnView.on_event

    def on_event_without_text(self: Any, event: Any) -> None:
        if not isinstance(event, TextDelta):
            on_event(self, event)

    turnview.TurnView.on_event = on_event_without_text  # type: ignore[method-assign]


def _instrument() -> None:
    from netbox_chat.cli import app as cli

    mark("netbox_chat.cli.app imported")
    settings_from = cli.settings_from

    def timed_settings_from(*args: Any, **kwargs: Any) -> Any:
        mark("Typer parsed the command line")
        return settings_from(*args, **kwargs)

    cli.settings_from = timed_settings_from
    from netbox_chat.cli import repl

    mark("netbox_chat.cli.repl imported (prompt_toolkit)")
    run_chat = repl.run_chat

    async def timed_run_chat(*args: Any, **kwargs: Any) -> Any:
        mark("session file opened")
        return await run_chat(*args, **kwargs)

    repl.run_chat = timed_run_chat
    prompt_async = repl.PromptSession.prompt_async
    first = [True]

    async def timed_prompt_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        if first[0]:
            first[0] = False
            mark("banner or recap (first lines) printed, prompt_async called")
        return await prompt_async(self, *args, **kwargs)

    repl.PromptSession.prompt_async = timed_prompt_async


if __name__ == "__main__":
    if os.environ.get("NETBOX_CHAT_BENCH_VIEW") == "none":
        _draw_no_answer()
    if _TIMELINE:
        _instrument()
    from netbox_chat.cli.main import main

    main()
