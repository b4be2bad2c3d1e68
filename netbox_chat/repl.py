"""The interactive loop: prompt-toolkit input, slash commands, Ctrl-C wiring.

The prompt appears before the agent exists: the agent (seconds of imports) is
built on a background thread that starts once the first prompt is on the
screen, and the first question waits for it only if it is not ready yet. This
module never touches checkpoints; it asks the conversation (turns.py) to act
and renders what it reports.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import History
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console

from netbox_chat import render
from netbox_chat.config import Settings
from netbox_chat.errors import UserFacingError
from netbox_chat.runtime import CancelOnSignals, Runtime, build_runtime
from netbox_chat.stores import OpenSession

HELP = """\
[bold]Ask a question about your network[/bold] and press Enter. Pasting several lines works.

  /history          the turns of this session, numbered (cancelled ones dimmed)
  /rewind [N]       go back to just after turn N (default: drop the last turn)
  /compact          summarize the conversation to make the next requests smaller
  /tokens           tokens in/out per turn
  /help             this text
  /exit, Ctrl-D     leave (the session is saved; `netbox-chat resume` reopens it)

Ctrl-C during an answer cancels the turn and rolls it back: the model never sees it,
and your question comes back to the input line to edit and resend.
"""


class LedgerHistory(History):
    """Input history from the session's turn ledger, so it is per session and
    survives restarts without a second file. Cancelled questions are in it too.
    Storing is a no-op: the ledger records a question when its turn begins."""

    def __init__(self, session: OpenSession) -> None:
        super().__init__()
        self.session = session

    def load_history_strings(self) -> Iterable[str]:
        seen: set[str] = set()
        for turn in reversed(self.session.turns()):
            if turn.question not in seen:
                seen.add(turn.question)
                yield turn.question

    def store_string(self, string: str) -> None:
        del string


class BackgroundRuntime:
    """The session's runtime, built once on a daemon thread started on demand.

    The REPL starts it once the first prompt has been drawn: deepagents'
    imports hold the GIL in long stretches, and a build started earlier made
    the prompt of a resumed session 60 ms later. Whoever needs the runtime
    before that (crash recovery, `resume --at`) starts it and waits. Being a
    daemon thread, it does not keep a Ctrl-D at the prompt waiting for the
    imports to finish either.
    """

    def __init__(
        self, session: OpenSession, settings: Settings, on_auth_failure: Callable[[str], None]
    ) -> None:
        self.session = session
        self.settings = settings
        self.on_auth_failure = on_auth_failure
        self.future: concurrent.futures.Future[Runtime] = concurrent.futures.Future()
        self.started = False

    def start(self) -> None:
        """Start the build unless it has started already."""
        if self.started:
            return
        self.started = True
        # Running from now on: a waiter cancelled by Ctrl-C cannot cancel the
        # build under the next one.
        self.future.set_running_or_notify_cancel()
        threading.Thread(target=self._build, name="agent-build", daemon=True).start()

    def _build(self) -> None:
        try:
            runtime = build_runtime(
                self.session, self.settings, on_auth_failure=self.on_auth_failure
            )
        except BaseException as exc:
            self.future.set_exception(exc)
        else:
            self.future.set_result(runtime)

    async def get(self) -> Runtime:
        self.start()
        return await asyncio.wrap_future(self.future)

    async def aclose(self) -> None:
        if self.future.done() and self.future.exception() is None:
            await self.future.result().aclose()


@dataclass
class Repl:
    session: OpenSession
    settings: Settings
    console: Console
    background: BackgroundRuntime
    pending_input: str = ""
    auth_warnings: list[str] = field(default_factory=list)

    async def runtime(self) -> Runtime:
        if not self.background.future.done():
            with self.console.status("[dim]loading the agent…[/dim]"):
                return await self.background.get()
        return self.background.future.result()

    def _prompt_drawn(self, app: Application[str]) -> None:
        del app
        self.background.start()

    async def run(self) -> None:
        prompt: PromptSession[str] = PromptSession(
            history=LedgerHistory(self.session), enable_history_search=True
        )
        # After every render, which makes the first one start the agent build.
        prompt.app.after_render += self._prompt_drawn
        while True:
            try:
                with patch_stdout(raw=True):
                    text = await prompt.prompt_async(
                        HTML("<b>netbox</b>&gt; "), default=self.pending_input
                    )
            except KeyboardInterrupt:
                self.pending_input = ""
                continue  # Ctrl-C at the prompt clears the line, nothing more
            except EOFError:
                return
            self.pending_input = ""
            line = text.strip()
            if not line:
                continue
            # Armed from right after the prompt returns until right before the
            # next one: a Ctrl-C anywhere in between cancels this line's work
            # (a turn, /compact, waiting for the agent) and nothing else.
            task = asyncio.create_task(self.handle(line))
            with CancelOnSignals(task, on_first=self._cancelling):
                try:
                    if await task == "exit":
                        return
                except asyncio.CancelledError:
                    self.console.print("[yellow]cancelled[/yellow]")
                    self.pending_input = "" if line.startswith("/") else line
                except UserFacingError as exc:
                    self.console.print(f"[red]{exc}[/red]")

    def _cancelling(self, signum: int) -> None:
        del signum
        self.console.print("[yellow]cancelling… rolling back[/yellow]")

    async def handle(self, line: str) -> str | None:
        if line.startswith("/"):
            return await self.slash_command(line)
        await self.ask(line)
        return None

    async def ask(self, question: str) -> None:
        runtime = await self.runtime()
        view = render.TurnView(self.console)
        started = time.monotonic()
        with view:
            # Cancelling the task that awaits this one cancels the turn itself;
            # the turn rolls back and returns its outcome normally.
            outcome = await asyncio.create_task(
                runtime.conversation.run_turn(question, view.on_event)
            )
        for warning in self.auth_warnings:
            self.console.print(f"[bold red]{warning}[/bold red]")
        self.auth_warnings.clear()
        render.print_outcome(self.console, outcome, time.monotonic() - started)
        if outcome.status == "cancelled":
            self.pending_input = question  # to edit and resend

    async def slash_command(self, line: str) -> str | None:
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        if command in ("/exit", "/quit"):
            return "exit"
        if command == "/help":
            self.console.print(HELP)
        elif command == "/history":
            self.console.print(render.history_table(self.session.turns()))
        elif command == "/tokens":
            self.console.print(render.tokens_table(self.session.turns()))
        elif command == "/rewind":
            await self.rewind(argument)
        elif command == "/compact":
            await self.compact()
        else:
            self.console.print(f"[red]unknown command {command}[/red]; /help lists them")
        return None

    async def rewind(self, argument: str) -> None:
        runtime = await self.runtime()
        try:
            target = int(argument) if argument else None
        except ValueError:
            self.console.print(f"[red]/rewind takes a turn number, got {argument!r}[/red]")
            return
        try:
            result = runtime.conversation.rewind(target)
        except UserFacingError as exc:
            self.console.print(f"[red]{exc}[/red]")
            return
        self.console.print(f"[green]{result}[/green]")

    async def compact(self) -> None:
        runtime = await self.runtime()
        with self.console.status("[dim]compacting…[/dim]"):
            result = await asyncio.create_task(runtime.conversation.compact())
        self.console.print(result)


async def run_chat(
    session: OpenSession,
    settings: Settings,
    console: Console,
    *,
    resumed: bool,
    rewind_to: int | None = None,
) -> None:
    """Open the REPL on `session`: recover a crashed turn, recap, then prompt."""
    auth_warnings: list[str] = []
    background = BackgroundRuntime(session, settings, auth_warnings.append)
    repl = Repl(session, settings, console, background, auth_warnings=auth_warnings)
    try:
        if session.running_turns():
            # A crash left a turn half-done: roll it back before anything else.
            runtime = await repl.runtime()
            for report in runtime.conversation.recover_interrupted():
                render.print_rollback(
                    console, report, reason=f"turn {report.turn} was interrupted and "
                )
        if rewind_to is not None:
            from netbox_chat.history import NothingToRewind

            runtime = await repl.runtime()
            try:
                console.print(f"[green]{runtime.conversation.rewind(rewind_to)}[/green]")
            except NothingToRewind as exc:
                console.print(f"[dim]{exc}[/dim]")
        if resumed:
            render.print_recap(console, session.id, session.recap())
        else:
            console.print(
                f"[bold]netbox-chat[/bold] session [bold]{session.id}[/bold] · model "
                f"{settings.model} · /help for commands, Ctrl-D to leave"
            )
        await repl.run()
    finally:
        await background.aclose()
    console.print(f"[dim]session {session.id} saved; `netbox-chat resume {session.id}`[/dim]")
