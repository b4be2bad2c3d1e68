"""The interactive loop: prompt-toolkit input, slash commands, Ctrl-C wiring.

The prompt appears before the agent exists: the agent (seconds of imports) is
built on a background thread that starts once the first prompt is on the
screen, and the first question waits for it only if it is not ready yet. This
module never touches checkpoints; it asks the conversation (turns.py) to act
and renders what it reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import sys
import termios
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, ThreadedCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.vt100 import raw_mode
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.text import Text

from netbox_chat import process
from netbox_chat.agent.runtime import CancelOnSignals, Runtime, build_runtime, run_to_its_end
from netbox_chat.background import Once
from netbox_chat.claims import check
from netbox_chat.claims.present import Marker
from netbox_chat.cli import clipboard, keys
from netbox_chat.cli.preflight import NetBoxCheck
from netbox_chat.config import ModelServer, Settings, resume_command, state_dir
from netbox_chat.errors import PICK_MODEL, ExitStatus, UserFacingError
from netbox_chat.models.thinking import check_setting, setting_label
from netbox_chat.owned import NotOwned, make_folder, open_append
from netbox_chat.store.choose import OpenSession
from netbox_chat.store.ledger import TITLE_MAX, Turn
from netbox_chat.typeahead import LFLAG_OFF
from netbox_chat.ui import tables, turnview
from netbox_chat.visible import visible_line
from netbox_chat.words import count, number

MODEL_LIST_TIMEOUT = 5.0
"""Seconds to wait for the server's list of models (a local lookup)."""

HELP = """\
[bold]Ask a question about your network[/bold] and press Enter. Pasting several lines works.

  /history          the turns of this session, numbered (cancelled ones dimmed)
  /rewind [N]       go back to just after turn N (default: drop the last turn)
  /compact          summarize the conversation to make the next requests smaller
  /tokens           tokens in/out per turn
  /think \\[on|off]   let the model think (or not) for the rest of the session, or
                    without a word, show the setting;
                    low|medium|high for models that take levels (gpt-oss)
  /thinking [N]     the full thinking of the last turn (or of turn N)
  /show [N]         the tool calls of the last turn (or of turn N), with what they returned
  /model [NAME]     the server's models (Tab completes one), or ask NAME from the
                    next question on
  /copy [N]         copy the last answer (or turn N's) as Markdown to the clipboard
  /rename TITLE     name this session (`netbox-chat resume TITLE` reopens it)
  /new, /clear      leave this session (saved) for a fresh one
  /help             this text
  exit, /exit, Ctrl-D  leave (the session is saved; `netbox-chat resume` reopens it)

Keys: Enter sends; Alt-Enter or Ctrl-J starts a new line. Esc or Ctrl-C during an
answer cancels the turn and rolls it back: the model never sees it, and your
question comes back to the input line to edit and resend. Tab completes a
/command; ↑ and Ctrl-R search what you typed, in this session and earlier ones.
"""


class KeysWait(raw_mode):
    """The terminal while a line's work runs: keys typed meanwhile wait, as
    typed, for the next prompt, which reads them as typeahead.

    In the terminal's normal (canonical) mode the kernel edits them as a
    line instead: a Ctrl-D becomes an end-of-file mark that reaches the next
    prompt as NUL, so it is lost; backspaces are applied before the prompt
    sees them; the echo lands in the middle of the answer. This is
    prompt_toolkit's own raw mode with ISIG kept, so Ctrl-C still raises
    SIGINT and cancels the turn, and with NOFLSH set: without it the kernel
    discards the input queue when it sends SIGINT (termios(3), NOFLSH), so a
    question typed or pasted while the answer streamed would be lost to the
    Ctrl-C that cancels it. raw_mode gives the terminal back as it was.
    """

    @classmethod
    def _patch_lflag(cls, attrs: int) -> int:
        return (attrs & ~LFLAG_OFF) | termios.NOFLSH


def _terminal(stream: TextIO) -> int | None:
    """The file descriptor of `stream` if it is a terminal."""
    try:
        fileno = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None
    return fileno if os.isatty(fileno) else None


def _bracketed_paste(*, on: bool) -> None:
    """Ask the terminal to mark pastes (or stop). On while a turn runs, not
    only at the prompt: a paste made meanwhile waits, marked, for the next
    prompt, which takes it as one paste. Unmarked, each line of it would end
    in an Enter and be sent as a question of its own."""
    sys.stdout.write("\x1b[?2004h" if on else "\x1b[?2004l")
    sys.stdout.flush()


def _typed_ahead(terminal: int | None) -> bool:
    """Whether keys are waiting on the terminal for the prompt."""
    return terminal is not None and bool(select.select([terminal], [], [], 0)[0])


def history_path() -> Path:
    """The user's one input history, where shells keep theirs (XDG state)."""
    state = state_dir(os.environ) or Path.home() / ".local" / "state" / "netbox-chat"
    return state / "history"


def user_history(path: Path) -> History:
    """Input history kept across sessions, as shells and `llm chat` keep it:
    ↑ and Ctrl-R reach what was typed in earlier sessions too. The file holds
    what was typed (questions and commands, nothing else), so it is made
    owner-only, 0600 in a 0700 folder. A home that cannot be written keeps
    the history for this session only."""
    try:
        make_folder(path.parent, "state folder")
        os.close(open_append(path))
    except NotOwned:  # not writable, or not the user's alone: nothing is kept there
        return InMemoryHistory()
    return FileHistory(path)


SLASH_COMMANDS = (
    "/help",
    "/history",
    "/rewind",
    "/compact",
    "/tokens",
    "/think",
    "/thinking",
    "/show",
    "/model",
    "/copy",
    "/rename",
    "/new",
    "/clear",
    "/exit",
    "/quit",
)


class SlashCompleter(Completer):
    """Tab completes a slash command's name, and after `/model ` the names of
    the server's models (`models`, asked on the first such Tab); a question
    is left alone. Run on prompt_toolkit's completion thread (ThreadedCompleter),
    so a slow server never holds the keys up."""

    def __init__(self, models: Callable[[], Sequence[str]]) -> None:
        self.models = models

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        del complete_event
        typed = document.text_before_cursor
        if typed.startswith("/") and " " not in typed:
            for name in SLASH_COMMANDS:
                if name.startswith(typed):
                    yield Completion(name, start_position=-len(typed))
        elif typed.startswith("/model ") and " " not in (part := typed[len("/model ") :]):
            for name in self.models():
                if name.startswith(part):
                    yield Completion(name, start_position=-len(part), display=visible_line(name))


class BackgroundRuntime(Once[Runtime]):
    """The session's runtime, built once on a daemon thread started on demand.

    The REPL starts it once the first prompt has been drawn: deepagents'
    imports hold the GIL in long stretches, and a build started earlier made
    the prompt of a resumed session 60 ms later. Whoever needs the runtime
    before that (crash recovery, `resume --at`) starts it and waits. Being a
    daemon thread (background.Once), it does not keep a Ctrl-D at the prompt
    waiting for the imports to finish either; it runs in the chat's context,
    so its errors word the fix as the chat takes it (PICK_MODEL).
    """

    def __init__(
        self,
        session: OpenSession,
        settings: Settings,
        on_problem: Callable[[Text], None] = lambda line: None,
    ) -> None:
        super().__init__(self._build, name="agent-build")
        self.session = session
        self.settings = settings
        self.on_problem = on_problem

    def _build(self) -> Runtime:
        """The runtime; its problem, or why it could not be built, said first
        (whoever waits for it sees the line above)."""
        try:
            runtime = build_runtime(self.session, self.settings)
        except BaseException as exc:
            self.on_problem(turnview.error_line(exc, prefix="the agent could not be built: "))
            raise
        if runtime.problem:
            self.on_problem(Text(visible_line(runtime.problem), style="bold red"))
        return runtime

    async def aclose(self) -> None:
        runtime = self.ready()
        if runtime is not None:
            await runtime.aclose()


@dataclass
class Repl:
    """One session's prompt loop and what it keeps between lines: the input a
    cancel gave back, the turn being drawn, how the loop ended."""

    session: OpenSession
    settings: Settings
    console: Console
    background: BackgroundRuntime
    pending_input: str = ""
    thinking_noted: bool = False
    view: turnview.TurnView | None = None  # the turn being drawn, if any
    above_prompt: Callable[[], None] | None = None  # drawn once the first prompt is up
    ending: str = "exit"  # or "new": /new asks for a fresh session
    switched_to: str | None = None  # the model `/model NAME` last switched to
    known_models: tuple[str, ...] | None = None  # the server's, once asked
    garbage_due: bool = False  # a line's work ran since the survivors were last frozen
    netbox_check: NetBoxCheck | None = None  # NetBox and the token, asked once the prompt is up

    def server_models(self) -> tuple[str, ...]:
        """The models the server has, asked once; none when it cannot be
        asked. Tab calls it on the completion thread."""
        if self.known_models is None:
            try:
                return self.ask_server_models()
            except UserFacingError:
                return ()
        return self.known_models

    def ask_server_models(self) -> tuple[str, ...]:
        """The models the server has now (UserFacingError: it cannot say)."""
        from netbox_chat.models import provider_for

        models = provider_for(self.settings).models(self.settings, timeout=MODEL_LIST_TIMEOUT)
        self.known_models = models
        return models

    async def runtime(self) -> Runtime:
        if not self.background.future.done():
            with self.console.status("[dim]loading the agent…[/dim]"):
                return await self.background.get()
        return self.background.future.result()

    def _prompt_drawn(self, app: Application[str]) -> None:
        """After every render. The first one ends the start-up (the collector
        runs again, process.py) and draws what waited for the prompt (the
        resumed session's recap) above it; the next starts the agent build,
        which would otherwise hold the GIL while the recap renders."""
        process.started()
        if self.above_prompt is not None:
            draw, self.above_prompt = self.above_prompt, None
            asyncio.get_running_loop().call_soon(draw)  # not inside the renderer
            return
        self.background.start()
        if self.netbox_check is not None:
            self.netbox_check.start()
        if self.garbage_due:
            # What the line's work left, collected and frozen now that the
            # prompt is up, so no full collection walks it in the next turn
            # (and a Ctrl-C in its first moments does not wait for one).
            self.garbage_due = False
            asyncio.get_running_loop().call_soon(process.freeze_survivors)

    async def run(self) -> None:
        prompt: PromptSession[str] = PromptSession(
            history=user_history(history_path()),
            enable_history_search=True,
            completer=ThreadedCompleter(SlashCompleter(self.server_models)),
            complete_while_typing=False,
            key_bindings=keys.prompt_keys(),
        )
        # A lone Esc is taken as Esc this soon, not after prompt_toolkit's half second.
        prompt.app.ttimeoutlen = keys.ESCAPE_WAIT
        # After every render, which makes the first one start the agent build.
        prompt.app.after_render += self._prompt_drawn
        terminal = _terminal(sys.stdin)
        try:
            await self._lines(prompt, terminal)
        finally:
            if terminal is not None:
                _bracketed_paste(on=False)

    async def _lines(self, prompt: PromptSession[str], terminal: int | None) -> None:
        while True:
            # Keys typed before the prompt is back were typed for a new line:
            # the cancelled question would swallow them (a Ctrl-D deletes
            # nothing, text is appended to it). ↑ still brings it back.
            try:
                waiting = _typed_ahead(terminal) or keys.typed_ahead(prompt.input)
                default = "" if waiting else self.pending_input
                self.pending_input = ""
                with patch_stdout(raw=True):
                    text = await prompt.prompt_async(HTML("<b>netbox</b>&gt; "), default=default)
            except KeyboardInterrupt:
                # Ctrl-C at the prompt clears the line; on an empty one, say how to leave.
                if not prompt.default_buffer.text:
                    self.console.print(Text("(exit or Ctrl-D to leave)", style="dim"))
                self.pending_input = ""
                continue
            except EOFError:
                return
            line = text.strip()
            if not line:
                continue
            if line in ("exit", "quit"):
                return  # as in a shell; a question is never just that word
            # Armed from right after the prompt returns until right before the
            # next one: a Ctrl-C anywhere in between cancels this line's work
            # (a turn, /compact, waiting for the agent) and nothing else.
            keys_wait: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            turn_keys: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            if terminal is not None:
                keys_wait = KeysWait(terminal)
                turn_keys = keys.TurnKeys(terminal, prompt.input)  # Esc cancels as Ctrl-C does
                _bracketed_paste(on=True)  # the prompt turned it off as it returned
            with keys_wait, CancelOnSignals(on_first=self._cancelling) as signals, turn_keys:
                try:
                    if (ending := await signals.run(self.handle(line))) is not None:
                        self.ending = ending
                        return
                except asyncio.CancelledError:
                    self.console.print(Text("cancelled", style="yellow"))
                    self.pending_input = "" if line.startswith("/") else line
                except Exception as exc:  # one line fails, the session goes on
                    self.console.print(turnview.error_line(exc))
            self.garbage_due = True

    def _cancelling(self, signum: int) -> None:
        del signum
        if self.view is not None:
            # Said on the status line, under the answer being discarded: a
            # line printed now would land above it.
            self.view.status.activity = "cancelling, rolling back"
        else:
            self.console.print(Text("cancelling… rolling back", style="yellow"))

    async def handle(self, line: str) -> str | None:
        if line.startswith("/"):
            return await self.slash_command(line)
        await self.ask(line)
        return None

    async def ask(self, question: str) -> None:
        runtime = await self.runtime()
        if self.netbox_check is not None:
            await self.netbox_check.get()  # its line, if any, before the first answer
        runtime.check_room(question)
        if runtime.thinking.note and not self.thinking_noted:
            # Known once the agent is built (from /api/show), said before the first answer.
            self.console.print(Text(runtime.thinking.note, style="yellow"))
        self.thinking_noted = True
        view = self.view = turnview.TurnView(self.console)
        view.marker = Marker(lambda: runtime.conversation.evidence, given=question)
        started = time.monotonic()
        try:
            with view:
                # A Ctrl-C cancels the turn itself: it rolls back and returns its
                # outcome normally. What is shown is that outcome, the ledger's,
                # even when the Ctrl-C came as the answer was being recorded.
                outcome = await run_to_its_end(
                    runtime.conversation.run_turn(question, view.on_event)
                )
                if outcome.status != "done":
                    view.discard()  # rolled back: what it said is not the answer
        finally:
            self.view = None
        turnview.print_outcome(self.console, outcome, time.monotonic() - started)
        if (outage := runtime.take_outage()) is not None:
            self.console.print(turnview.outage_line(outage))
        if outcome.status != "done":
            self.pending_input = question  # cancelled or failed: to edit and resend

    async def slash_command(self, line: str) -> str | None:
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        if command in ("/exit", "/quit"):
            return "exit"
        if command in ("/new", "/clear"):
            return "new"
        if command == "/help":
            self.console.print(Text.from_markup(HELP))
        elif command == "/history":
            self.console.print(tables.history_table(self.session.turns()))
        elif command == "/tokens":
            self.console.print(tables.tokens_table(self.session.turns()))
        elif command == "/rewind":
            await self.rewind(argument)
        elif command == "/compact":
            await self.compact()
        elif command == "/think":
            await self.think(argument)
        elif command == "/thinking":
            self.show_thinking(argument)
        elif command == "/show":
            await self.show(argument)
        elif command == "/model":
            await self.switch_model(argument)
        elif command == "/rename":
            self.rename(argument)
        elif command == "/copy":
            self.copy(argument)
        else:
            self.console.print(
                Text.assemble((f"unknown command {command}", "red"), "; /help lists them")
            )
        return None

    async def rewind(self, argument: str) -> None:
        runtime = await self.runtime()
        try:
            target = int(argument) if argument else None
        except ValueError:
            self.console.print(Text(f"/rewind takes a turn number, got {argument!r}", style="red"))
            return
        from netbox_chat.agent.history import rewind

        result = rewind(runtime.conversation, target)
        self.console.print(Text(str(result), style="green"))

    async def think(self, argument: str) -> None:
        runtime = await self.runtime()
        if not argument:
            self.console.print(runtime.thinking.label)
            return
        try:
            setting = check_setting(argument, "/think")
        except ValueError as exc:
            self.console.print(Text(str(exc), style="red"))
            return
        plan = runtime.set_thinking(setting)
        # Kept with the session (resume goes on with it) and for /model's next agent.
        if setting is not None:
            self.session.remember(think=setting)
        self.settings = replace(self.settings, think=setting)
        self.thinking_noted = True
        if plan.note:
            self.console.print(Text(plan.note, style="yellow"))
        else:
            self.console.print(Text(f"{plan.label} for the rest of this session", style="green"))

    async def switch_model(self, name: str) -> None:
        """`/model NAME`: the next questions go to another model. The agent is
        built again for it; a model the server does not have, or one it says
        cannot use tools (Ollama's capabilities), is refused before any
        question goes to it, and the session stays with the one it had.
        `/model` alone lists the server's models."""
        if not name:
            await self.list_models()
            return
        settings = replace(self.settings, model=name)
        # No on_problem: the refusal below is the one line a failed build gets
        # (the start-up's hint would print the same problem a second time).
        background = BackgroundRuntime(self.session, settings)
        try:
            with self.console.status("[dim]loading the agent…[/dim]"):
                runtime = await background.get()
        except UserFacingError as exc:  # the server does not serve it
            self._refuse_model(str(exc))
            return
        if runtime.problem:
            await runtime.aclose()
            self._refuse_model(runtime.problem)
            return
        await self.background.aclose()
        self.background, self.settings = background, settings
        self.switched_to = name
        self.thinking_noted = False
        self.console.print(
            Text(f"model {visible_line(name)} from the next question on", style="green")
        )

    def _refuse_model(self, problem: str) -> None:
        line = Text(visible_line(problem), style="red")
        line.append(f"; still {visible_line(self.settings.model)}")
        self.console.print(line)

    async def list_models(self) -> None:
        """`/model`: the session's model and the ones the server has, asked anew."""
        current = Text(f"model {visible_line(self.settings.model)}", style="dim")
        try:
            models = await asyncio.to_thread(self.ask_server_models)
        except UserFacingError as exc:
            self.console.print(current.append(f"; the server's models: {visible_line(str(exc))}"))
            return
        if not models:
            self.console.print(current.append("; the server lists no models"))
            return
        self.console.print(
            Text("the server's models (/model NAME switches, Tab completes):", style="dim")
        )
        for model in models:  # the session's own marked
            mark, style = ("* ", "bold") if model == self.settings.model else ("  ", "")
            self.console.print(Text(mark + visible_line(model), style=style))

    async def show(self, argument: str) -> None:
        """`/show [N]`: the tool calls of the last answered turn (or turn N),
        with what each returned, from the conversation at the turn's end."""
        from netbox_chat.agent.evidence import calls_of, tool_results, turn_messages

        turn = chosen_turn([t for t in self.session.turns() if t.status == "done"], argument)
        if turn is None:
            where = f"turn {argument} was not answered" if argument else "no turn answered yet"
            self.console.print(Text(f"/show: {where}", style="dim"))
            return
        runtime = await self.runtime()
        at_end = runtime.conversation.committed_values(turn.end_checkpoint_id)
        messages = at_end.get("messages", [])
        results = tool_results(turn_messages(turn, messages))
        if not results:
            self.console.print(Text(f"turn {turn.number} called no tools", style="dim"))
        else:
            self.console.print(
                Text(f"turn {turn.number}: {count(len(results), 'tool call')}", style="dim")
            )
        for result in results:
            self.console.print(
                tables.tool_call_view(
                    result.name, result.args, result.text, result.error, turn.answer or ""
                )
            )
        # Each claim of the answer and the result it rests on: every result
        # the conversation held at the turn's end (earlier turns' too).
        held = tool_results(messages[: turn.message_count])
        grounding = check(turn.answer or "", calls_of(held), given=turn.question)
        self.console.print(Text(f"turn {turn.number}: the answer's claims", style="dim"))
        self.console.print(tables.claims_view(grounding, [(r.name, r.args) for r in held]))

    def rename(self, argument: str) -> None:
        """`/rename TITLE`: the session's title, which `ls` shows and
        `resume TITLE` and the picker find it by."""
        title = " ".join(argument.split())
        if not title or not title.isprintable() or len(title) > TITLE_MAX:
            self.console.print(
                Text(f"/rename takes a title of one line, up to {TITLE_MAX} characters", "red")
            )
            return
        self.session.remember(title=title)
        self.console.print(
            Text(visible_line(f"session {self.session.id} is now “{title}”"), style="green")
        )

    def copy(self, argument: str) -> None:
        """`/copy [N]`: the last answer's Markdown (or turn N's) to the
        terminal's clipboard, by OSC 52 (clipboard.py)."""
        turn = chosen_turn([t for t in self.session.turns() if t.answer], argument)
        if turn is None:
            where = f"turn {argument} has no answer" if argument else "no answer yet"
            self.console.print(Text(f"/copy: {where}", style="dim"))
            return
        copied = clipboard.copy(turn.answer or "", sys.stdout)
        line = Text(
            f"copied turn {turn.number}'s answer ({count(copied.chars, 'character')} of Markdown)",
            style="green",
        )
        if copied.cut:
            line.append(
                f"; only its first {number(copied.chars)} characters: a terminal takes "
                f"about {clipboard.LIMIT // 1000} kB (`netbox-chat export` has it all)",
                style="yellow",
            )
        self.console.print(line)
        if copied.doubt:
            self.console.print(Text(copied.doubt, style="yellow"))

    def show_thinking(self, argument: str) -> None:
        turn = chosen_turn([t for t in self.session.turns() if t.thinking], argument)
        if turn is None:
            where = f"turn {argument}" if argument else "this session"
            self.console.print(Text(f"no thinking recorded for {where}", style="dim"))
            return
        self.console.print(turnview.thinking_text(turn))

    async def compact(self) -> None:
        from netbox_chat.agent.history import compact

        runtime = await self.runtime()
        before = self._last_request_tokens(runtime)
        with self.console.status("[dim]compacting…[/dim]"):
            result = await run_to_its_end(compact(runtime.conversation))
        # as its one line: rich would pretty-print the dataclass's fields instead
        self.console.print(Text(str(result)))
        if runtime.context is not None and before is not None and not result.cancelled:
            after = runtime.context.tokens_without(before, result.chars_before - result.chars_after)
            self.console.print(turnview.compaction_meter(before, after, runtime.context.window))

    def _last_request_tokens(self, runtime: Runtime) -> int | None:
        """Ollama's count of the last request: this process's, or the ledger's."""
        if runtime.context is not None and runtime.context.last_prompt_tokens is not None:
            return runtime.context.last_prompt_tokens
        done = [t for t in self.session.turns() if t.status == "done"]
        return done[-1].prompt_tokens_last if done else None


def chosen_turn(turns: list[Turn], argument: str) -> Turn | None:
    """The turn a command's argument names (`/show 2`, `/thinking 2`) among
    `turns`, or with no argument the last of them; None when there is none."""
    chosen = [turn for turn in turns if not argument or str(turn.number) == argument]
    return chosen[-1] if chosen else None


def require_terminal() -> None:
    """Refuse, before any session is made, to run the REPL without a terminal
    on both ends: with stdin piped it would type blind, with stdout redirected
    it would write prompt-toolkit's control codes into the file. `ask` is the
    command for scripts."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserFacingError(
            "the chat needs a terminal (stdin and stdout); in a script or a pipe, "
            'use `netbox-chat ask "QUESTION"`',
            exit_status=ExitStatus.USAGE,
        )


@dataclass(frozen=True)
class Ending:
    """How the REPL ended: "exit", or "new" when `/new` asked for a fresh
    session; and the model `/model` switched to (None: it did not), which
    that fresh session goes on with: the user chose it, the configuration
    did not."""

    how: str
    model: str | None = None


async def run_chat(
    session: OpenSession,
    settings: Settings,
    console: Console,
    *,
    resumed: bool,
    rewind_to: int | None = None,
) -> Ending:
    """Open the REPL on `session`: recover a crashed turn, recap, then prompt."""

    def say_problem(line: Text) -> None:
        # From the build's thread, while the prompt waits: prompt_toolkit's
        # patched stdout prints it above the prompt, at once.
        line.append(" · `netbox-chat doctor` checks the setup", style="dim")
        console.print(line)

    background = BackgroundRuntime(session, settings, say_problem)
    checked = NetBoxCheck(settings, say_problem)
    repl = Repl(session, settings, console, background, netbox_check=checked)
    picking = PICK_MODEL.set("/model NAME")  # no option can be given here
    try:
        if session.running_turns():
            # A crash left a turn half-done: roll it back before anything else.
            runtime = await repl.runtime()
            for report in runtime.conversation.recover_interrupted():
                turnview.print_rollback(
                    console, report, reason=f"turn {report.turn} was interrupted and "
                )
        if rewind_to is not None:
            from netbox_chat.agent.history import NothingToRewind, rewind

            runtime = await repl.runtime()
            try:
                console.print(Text(str(rewind(runtime.conversation, rewind_to)), style="green"))
            except NothingToRewind as exc:
                console.print(Text(str(exc), style="dim"))
        if resumed:
            repl.above_prompt = turnview.print_recap(console, session.id, session.recap(), settings)
        else:
            turnview.print_banner(console, session.id, settings, setting_label(settings.think))
        await repl.run()
    finally:
        await repl.background.aclose()  # /model may have replaced it
        PICK_MODEL.reset(picking)
    if session.discard_if_unanswered():
        console.print(
            Text(f"no question was answered in session {session.id}; nothing was kept", "dim")
        )
    else:
        hint = resume_command(session.id, ModelServer.of(settings))  # its own server, any shell
        console.print(Text(visible_line(f"session {session.id} saved; `{hint}`"), style="dim"))
    return Ending(repl.ending, repl.switched_to)
