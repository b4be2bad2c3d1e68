"""The chat's check of NetBox at start: does it answer, does it take the
token? Asked on a daemon thread once the prompt is up, as the agent build
asks the model server (repl.BackgroundRuntime), so it costs the start-up and
the keys nothing; a problem is said in one line above the prompt, and the
first question waits for the check, so that the line always comes before
the first answer (netbox.client.access_problem words it, with its fix).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable

from rich.text import Text

from netbox_chat.config import Settings
from netbox_chat.visible import visible_line


class NetBoxCheck:
    """One check of the settings' NetBox, started once (`start`), its
    problem handed to `on_problem` (called from the check's thread, as the
    agent build's is)."""

    def __init__(self, settings: Settings, on_problem: Callable[[Text], None]) -> None:
        self.settings = settings
        self.on_problem = on_problem
        self.future: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        self.started = False

    def start(self) -> None:
        """Start the check unless it has started already (none without a NetBox URL)."""
        if self.started:
            return
        self.started = True
        self.future.set_running_or_notify_cancel()
        if self.settings.netbox_url is None:
            self.future.set_result(None)
            return
        threading.Thread(target=self._check, name="netbox-check", daemon=True).start()

    def _check(self) -> None:
        from netbox_chat.netbox.client import access_problem

        problem = None
        try:
            problem = asyncio.run(access_problem(self.settings))
        except Exception as exc:  # an aid that fails says so, the chat goes on
            problem = f"NetBox could not be checked: {type(exc).__name__}: {exc}"
        finally:
            try:
                if problem is not None:
                    self.on_problem(Text(visible_line(problem), style="bold red"))
            finally:  # said first: whoever waits for the check sees the line above
                self.future.set_result(problem)

    async def wait(self) -> str | None:
        """The check's problem (None: NetBox answered), said by then."""
        self.start()
        return await asyncio.wrap_future(self.future)
