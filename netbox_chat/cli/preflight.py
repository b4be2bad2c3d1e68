"""The chat's check of NetBox at start: does it answer, does it take the
token? Asked on a daemon thread once the prompt is up, as the agent build
asks the model server (both are background.Once), so it costs the start-up
and the keys nothing; a problem is said in one line above the prompt, and
the first question waits for the check, so that the line always comes
before the first answer (netbox.client.access_problem words it, with its
fix).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rich.text import Text

from netbox_chat.background import Once
from netbox_chat.config import Settings
from netbox_chat.visible import visible_line


class NetBoxCheck(Once[str | None]):
    """One check of the settings' NetBox, started once (`start`), its
    problem handed to `on_problem` (called from the check's thread, as the
    agent build's is) before any waiter has it (`get`: None when NetBox
    answered, or when no NetBox URL is set)."""

    def __init__(self, settings: Settings, on_problem: Callable[[Text], None]) -> None:
        super().__init__(self._check, name="netbox-check")
        self.settings = settings
        self.on_problem = on_problem

    def _check(self) -> str | None:
        if self.settings.netbox_url is None:
            return None
        from netbox_chat.netbox.client import access_problem

        try:
            problem = asyncio.run(access_problem(self.settings))
        except Exception as exc:  # an aid that fails says so, the chat goes on
            problem = f"NetBox could not be checked: {type(exc).__name__}: {exc}"
        if problem is not None:
            self.on_problem(Text(visible_line(problem), style="bold red"))
        return problem
