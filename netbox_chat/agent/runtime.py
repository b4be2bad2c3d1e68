"""Assembling one open session's moving parts: saver, NetBox client, tools,
agent graph, conversation. Also the bits of asyncio wiring (the cancel-once
signal guard) that both the REPL and the one-shot `ask` need.

Importing this module is cheap; `build_runtime` pays for LangChain's imports,
so the REPL calls it on a background thread while the user types.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from netbox_chat import process
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.config import ModelServer, Settings, not_configured
from netbox_chat.errors import UserFacingError, pick_model
from netbox_chat.models.thinking import ThinkPlan, plan_thinking
from netbox_chat.models.window import too_small_for
from netbox_chat.store.choose import OpenSession

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from netbox_chat.agent.context import ContextGuard
    from netbox_chat.agent.turns import Conversation
    from netbox_chat.models.model_info import ModelInfo
    from netbox_chat.netbox.client import NetBoxClient

T = TypeVar("T")


# /api/show (or an OpenAI-compatible server's /v1/models) is a local lookup; a
# server that takes longer is not worth waiting for, the session then runs
# without knowing the model's capabilities or length.
MODEL_INFO_TIMEOUT = 10.0


@dataclass
class Runtime:
    """An open session's built agent and what was learnt building it (the
    model's window and thinking), for the REPL and `ask` to run turns on."""

    conversation: Conversation
    netbox: NetBoxClient | None
    model_info: ModelInfo | None
    """What the server said about the model (None: it could not be read);
    fetched once per session, in build_runtime, for the window and the
    capabilities."""
    thinking: ThinkPlan
    context: ContextGuard | None = None
    """The session's window and the compaction that keeps requests inside it."""
    problem: str | None = None
    """Why Ollama could not tell about the model, if it could not, or that it
    says the model cannot use tools: said at the prompt as soon as the build
    ends, not after the first question; `/model` refuses such a model."""

    @property
    def window(self) -> int | None:
        return None if self.context is None else self.context.window

    def set_thinking(self, setting: str | None) -> ThinkPlan:
        """Ask the model to think (or not) from the next request on (`/think`)."""
        from netbox_chat.models import set_thinking

        self.thinking = plan_thinking(setting, self.model_info)
        set_thinking(self.conversation.model, self.thinking.reasoning)
        return self.thinking

    def check_room(self, question: str) -> None:
        """Refuse a question the session's window cannot hold with the system
        prompt, the tools, one result and the answer: before anything is sent,
        with the numbers, rather than let Ollama cut the question away."""
        if self.window is not None and (why := too_small_for(self.window, question)):
            raise UserFacingError(why)

    def take_outage(self) -> str | None:
        """What kept NetBox from answering in the turn just run (unreachable,
        or the token refused), as one line; None when it answered."""
        outage = None if self.netbox is None else self.netbox.take_outage()
        return None if outage is None else str(outage)

    async def aclose(self) -> None:
        if self.netbox is not None:
            await self.netbox.aclose()
        # The saver writes through the session's connection: the session closes it.


def build_runtime(
    session: OpenSession,
    settings: Settings,
    *,
    tools: Sequence[BaseTool] | None = None,
) -> Runtime:
    """Build the agent for `session` (slow: imports deepagents)."""
    from netbox_chat.agent.context import ContextGuard
    from netbox_chat.agent.graph import build_agent, find_end_node
    from netbox_chat.agent.turns import Conversation
    from netbox_chat.models import provider_for
    from netbox_chat.netbox.client import NetBoxClient
    from netbox_chat.netbox.tools import build_netbox_tools

    provider = provider_for(settings)
    served = provider.served(settings, timeout=MODEL_INFO_TIMEOUT)
    model_info, window, problem = served.info, served.window, served.problem
    if problem is None and model_info is not None and model_info.can_use_tools is False:
        # Said before the first question, which would fail on it (Ollama's 400).
        problem = (
            f"{settings.model} cannot use tools (the model server says so), and reading "
            f"NetBox takes them: pick another with {pick_model()}"
        )
    guard = ContextGuard(window, settings.compact_at)
    netbox = None
    if tools is None:
        if settings.netbox_url is None:
            raise UserFacingError(not_configured())
        netbox = NetBoxClient.of(settings)
        tools = build_netbox_tools(netbox, window_tokens=window)
    thinking = plan_thinking(settings.think, model_info)
    saver = open_saver(session)
    model = provider.chat_model(settings, served, reasoning=thinking.reasoning)
    graph = build_agent(settings, tools, saver, model=model, context_guard=guard)
    conversation = Conversation(
        session,
        graph,
        saver,
        find_end_node(graph),
        model=model,
        asks=(settings.model, ModelServer.of(settings)),
        grounding=settings.grounding,
    )
    runtime = Runtime(conversation, netbox, model_info, thinking, guard, problem)
    # LangChain's imports and the compiled graph are about 120,000 objects that
    # live as long as the process. Left in the collector, every full garbage
    # collection walks them (60 ms here), and one lands in most turns of a long
    # session: a Ctrl-C or a keystroke waits for it. Frozen, they are skipped.
    gc.freeze()
    return runtime


async def run_to_its_end(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` (a turn, a compaction) as its own task and return what it
    returns: its own report of what it recorded. A cancel of the caller is
    handed to it, once, and it ends the way it does (a turn rolls back and
    returns "cancelled"); a cancel that reaches the caller after `work` has
    finished changes nothing, since what was recorded stands.

    Awaiting the task directly is not enough: when the cancel lands after the
    task's last step but before the caller resumes, asyncio raises
    CancelledError in the caller and the result (a committed answer) is lost,
    so the REPL said "cancelled" and offered the question again for a turn
    the ledger and the model kept (issue 21, item 4)."""
    task = asyncio.create_task(work)
    caller = asyncio.current_task()
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if caller is not None:
                caller.uncancel()  # handled here: the caller goes on to report
            if task.done():
                return task.result()  # what it recorded (or its own error)
            task.cancel()


class CancelOnSignals:
    """While entered, the first SIGINT/SIGTERM cancels the task `run` started,
    exactly once; later ones are ignored (a second cancel would end the turn
    early and let a bridged write commit after the rollback).

    The handlers are Python's own, not the event loop's: they are installed
    before a loop exists (a one-shot `ask` is guarded from its first line) and
    can give way to "ignore" without a gap, whereas `loop.remove_signal_handler`
    puts the default back and a SIGTERM in that instant kills the process. A
    handler runs between two bytecodes of the main thread, so it only records
    the signal and hands the cancel to the loop, as `asyncio.Runner` does: the
    cancel then lands at an `await`, never between a ledger commit and the
    code that reports it.

    The REPL enters one per line, right after the prompt returns, and leaves it
    right before the next prompt (prompt_toolkit installs and restores its own
    SIGINT handling); `ask` calls `settle` once its outcome is recorded.
    """

    def __init__(
        self,
        *,
        on_first: Callable[[int], None] | None = None,
        signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
    ) -> None:
        self.on_first = on_first
        self.signals = signals
        self.received: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> CancelOnSignals:
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        # A signal since the process started, before this guard was installed
        # (process.py): it counts as received here.
        if self.received is None and (early := process.pending()) in self.signals:
            self.received = early
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, handler in self._previous.items():
            if signal.getsignal(sig) == self._on_signal:  # not settled
                signal.signal(sig, handler)

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await `work` as a task that the first signal cancels. A signal that
        came before cancels it before its first step (CancelledError)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(work)
        if self.received is not None:
            self._loop.call_soon(self._cancel)
        return await self._task

    def settle(self) -> None:
        """Ignore SIGINT and SIGTERM from now to the end of the process: what
        happened is recorded, and the exit status must say so. SIG_IGN rather
        than a handler, because interpreter shutdown resets Python handlers
        to the default and would let a late signal kill the process."""
        for sig in self.signals:
            signal.signal(sig, signal.SIG_IGN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.received is not None:
            return
        self.received = signum
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._cancelled or self._task is None or self._task.done():
            return
        self._cancelled = True
        if self.on_first is not None and self.received is not None:
            self.on_first(self.received)
        self._task.cancel()
