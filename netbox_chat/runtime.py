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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netbox_chat.config import Settings
from netbox_chat.errors import UserFacingError
from netbox_chat.pgstore import PgSession
from netbox_chat.sessions import connect
from netbox_chat.stores import OpenSession

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from netbox_chat.checkpointer import SyncSaverBridge
    from netbox_chat.netbox.client import NetBoxClient
    from netbox_chat.turns import Conversation


@dataclass
class Runtime:
    conversation: Conversation
    netbox: NetBoxClient | None

    async def aclose(self) -> None:
        if self.netbox is not None:
            await self.netbox.aclose()
        self.conversation.saver.close()


def open_saver(session: OpenSession) -> SyncSaverBridge:
    """The session's LangGraph saver, behind the async bridge (slow imports)."""
    if isinstance(session, PgSession):
        from netbox_chat.pgsaver import BridgedPostgresSaver

        return BridgedPostgresSaver(session.db, session.store.url)
    from netbox_chat.checkpointer import BridgedSqliteSaver

    return BridgedSqliteSaver(connect(session.path))


def build_runtime(
    session: OpenSession,
    settings: Settings,
    *,
    tools: Sequence[BaseTool] | None = None,
    on_auth_failure: Callable[[str], None] | None = None,
) -> Runtime:
    """Build the agent for `session` (slow: imports deepagents)."""
    from netbox_chat.agent import build_agent, build_model, find_end_node
    from netbox_chat.netbox.client import NetBoxClient
    from netbox_chat.netbox.tools import build_netbox_tools
    from netbox_chat.turns import Conversation

    netbox = None
    if tools is None:
        if settings.netbox_url is None:
            raise UserFacingError("NetBox is not configured: set NETBOX_URL and NETBOX_TOKEN")
        netbox = NetBoxClient(
            settings.netbox_url,
            settings.netbox_token,
            timeout=settings.netbox_timeout,
            on_auth_failure=on_auth_failure,
        )
        tools = build_netbox_tools(netbox)
    saver = open_saver(session)
    model = build_model(settings)
    graph = build_agent(settings, tools, saver, model=model)
    runtime = Runtime(
        Conversation(session, graph, saver, find_end_node(graph), model=model), netbox
    )
    # LangChain's imports and the compiled graph are about 120,000 objects that
    # live as long as the process. Left in the collector, every full garbage
    # collection walks them (60 ms here), and one lands in most turns of a long
    # session: a Ctrl-C or a keystroke waits for it. Frozen, they are skipped.
    gc.freeze()
    return runtime


class CancelOnSignals:
    """While armed, the first SIGINT/SIGTERM cancels the task exactly once;
    later ones are ignored until the task is over (a second cancel would end
    the turn early and let a bridged write commit after the rollback).

    Arm it right after the prompt returns and disarm it right before the next
    prompt: prompt_toolkit installs and restores its own SIGINT handling.
    """

    def __init__(
        self,
        task: asyncio.Task[Any],
        *,
        on_first: Callable[[int], None] | None = None,
        signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
    ) -> None:
        self.task = task
        self.on_first = on_first
        self.signals = signals
        self.received: int | None = None

    def _handle(self, signum: int) -> None:
        if self.received is not None or self.task.done():
            return
        self.received = signum
        if self.on_first is not None:
            self.on_first(signum)
        self.task.cancel()

    def __enter__(self) -> CancelOnSignals:
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            loop.add_signal_handler(sig, self._handle, int(sig))
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.signals:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
