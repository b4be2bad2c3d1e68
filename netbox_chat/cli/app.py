"""The `netbox-chat` command: Typer commands, arguments, exit statuses.

Thin on purpose: each command resolves settings, opens the session store and
hands over to the room that does the work. Heavy modules (LangChain through
`runtime`, prompt-toolkit through `repl`, and asyncio, 25 ms on its own) are
imported inside the commands that need them, so `ls` and `forget` start as
fast as Python does.

Annotations here are evaluated where they are written (no `from __future__
import annotations`): Typer reads every command's signature at every start,
three times over, and string annotations were compiled and evaluated anew
each time (33 ms of CPU on a slow machine, 14 ms without). The few types
imported only for the type checker are written as strings.
"""

import contextlib
import enum
import functools
import gc
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.shell_completion import CompletionItem, add_completion_class
from typer._completion_classes import FishComplete, ZshComplete
from typer.core import TyperGroup, TyperOption

from netbox_chat import process, typeahead, words
from netbox_chat.cli.completion import SessionIdWord, fish_choice, session_id_choices, zsh_answer
from netbox_chat.cli.options import (
    BEFORE,
    CHAT,
    OPTIONS,
    SERVER,
    WHERE,
    ChatOptions,
    chat_options,
    help_in_force,
)
from netbox_chat.config import (
    DATABASE_SCHEMES,
    SETTINGS_IN_FORCE,
    ConfigError,
    ModelServer,
    Settings,
    not_configured,
    profiles_on,
    resolve_settings,
    resume_command,
    without_userinfo,
)
from netbox_chat.errors import ExitStatus, UserFacingError, user_facing
from netbox_chat.store.choose import OpenSession, Store, find_session, open_store
from netbox_chat.store.errors import AmbiguousSession
from netbox_chat.store.sessions import SessionStore, SessionSummary, epoch
from netbox_chat.visible import visible, visible_line
from netbox_chat.words import number

if TYPE_CHECKING:
    from netbox_chat.ui.streamjson import JsonLines
    from netbox_chat.ui.turnview import TurnView

if TYPE_CHECKING:
    from rich.console import Console

    from netbox_chat.agent.runtime import CancelOnSignals


def report(error: Exception) -> ExitStatus:
    """The one place an exception becomes what the user sees (httpie's
    `raw_main`): one red line on stderr starting with `netbox-chat:`, and the
    documented exit status. Anything else than a `UserFacingError` is a bug
    of ours; it still gets one line (set NETBOX_CHAT_TRACEBACK=1 for the
    traceback), not a traceback over the user's terminal."""
    from netbox_chat.ui import turnview

    if isinstance(error, BrokenPipeError):
        return reader_went_away()
    error = user_facing(error)
    err().print(turnview.error_line(error, prefix="netbox-chat: "))
    if isinstance(error, AmbiguousSession):
        say("candidates: " + " ".join(error.candidates))
    return error.exit_status if isinstance(error, UserFacingError) else ExitStatus.USER_ERROR


def reader_went_away() -> ExitStatus:
    """stdout's reader closed it (`netbox-chat ls | head`): not an error of
    anyone's, so nothing is printed, as git (killed by SIGPIPE) prints
    nothing. stdout is pointed at /dev/null so that the interpreter's last
    flush at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return ExitStatus.BROKEN_PIPE


def fit_to_streams(*consoles: "Console") -> None:
    """Wrap lines only on a terminal: in a log or a pipe each message stays
    one line, so a grep finds it. Done per command, because the streams are
    only known then (Typer's test runner swaps them)."""
    for console in consoles:
        console.soft_wrap = not console.is_terminal


class PlainHelpZsh(ZshComplete):
    """Typer's zsh completion, answered as `completion.zsh_answer` answers:
    values and help handed to `compadd` as data, never as code (Typer's
    `_arguments` answer evaluated a session title), each help shown as
    written.

    Typer renders a choice's help as Rich markup first: that imports Rich's
    Markdown stack (40 ms on every Tab) and drops a title's `[eth0]`. No help
    text of this app holds markup (tests/test_habits.py checks), and a title
    is the user's own words."""

    def complete(self) -> str:
        args, incomplete = self.get_completion_args()
        items = self.get_completions(args, incomplete)
        return zsh_answer([(item.value, item.help) for item in items])


class PlainHelpFish(FishComplete):
    """Typer's fish completion with each choice's help shown as written (see `PlainHelpZsh`)."""

    def format_completion(self, item: CompletionItem) -> str:
        return fish_choice(item.value, item.help)


HELP_WORDS = frozenset(("-h", "--help"))
PROFILE_WORDS = frozenset(OPTIONS["profile"].metadata["flags"])

CONTINUE = ("-c", "--continue")
"""Before any command: continue the last session (`Commands.parse_args`)."""


class Commands(TyperGroup):
    """Runs every command, from `netbox-chat` and from Typer's test runner
    alike, through `report`: the commands raise, they never print errors."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Typer registers its own shell classes while it builds the command;
        # ours replace them just before a completion request is read.
        add_completion_class(PlainHelpZsh, "zsh")
        add_completion_class(PlainHelpFish, "fish")
        return super().main(*args, **kwargs)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """`netbox-chat "which sites are there?"` asks it, as `llm "q"` does:
        a first word that is no command and holds a space is a question, also
        after the chat's options (`netbox-chat -m qwen3:14b "…"`, as `llm -m`
        goes), which then go to `ask` with it. A single unknown word stays an
        unknown command (a typo of `ls` must not go to the model).

        `netbox-chat -c "…"` continues the last session, as `llm -c` and
        `claude -c` do: it is `ask --continue "…"` (any word, with `-c` saying
        it is a question); `-c` alone reopens that session's chat (`resume
        --latest`: never the list to pick from)."""
        if HELP_WORDS & set(args):
            self.show_values_in_force(args)
        at = self.first_word(args)
        word = args[at] if at < len(args) else ""
        options = args[:at]
        if word not in self.commands and any(opt in CONTINUE for opt in options):
            options = [opt for opt in options if opt not in CONTINUE]
            if at == len(args):
                args = ["resume", "--latest", *options]
            else:
                args = ["ask", "--continue", word, *options, *args[at + 1 :]]
        elif word not in self.commands and len(word.split()) > 1:
            args = ["ask", word, *options, *args[at + 1 :]]
        return list(super().parse_args(ctx, args))

    def show_values_in_force(self, args: list[str]) -> None:
        """--help of any command shows each option's value in force and
        where it came from (options.help_in_force), not a built-in default
        the environment or the config file replaces. Worked out only when
        help is asked for: it reads the config file."""
        from rich.markup import escape  # Typer renders help as Rich markup

        profile = next(
            (value for flag, value in itertools.pairwise(args) if flag in PROFILE_WORDS),
            None,
        )
        texts: dict[str, str] = {}
        for command in [self, *self.commands.values()]:
            for param in command.params:
                if not isinstance(param, TyperOption) or param.name not in OPTIONS:
                    continue
                if OPTIONS[param.name].metadata["shows_value"]:
                    if param.name not in texts:
                        texts[param.name] = escape(help_in_force(param.name, profile))
                    param.help = texts[param.name]

    def first_word(self, args: list[str]) -> int:
        """Where the first argument that is neither an option of ours nor its
        value is: a flag stands alone, as does `--opt=value` or `-mVALUE`; any
        other option takes the next word."""
        flags = {
            opt
            for param in self.params
            if getattr(param, "is_flag", False)
            for opt in (*param.opts, *param.secondary_opts)
        } | set(CONTINUE)
        at = 0
        while at < len(args) and args[at].startswith("-") and args[at] != "--":
            word = args[at]
            alone = word in flags or "=" in word or (not word.startswith("--") and len(word) > 2)
            at += 1 if alone else 2
        return at

    def shell_complete(self, ctx: Any, incomplete: str) -> list[CompletionItem]:
        """After the chat's own options, only the commands that take them
        are offered: the CLI refuses the others there (`options_before`)."""
        offered = super().shell_complete(ctx, incomplete)
        return [
            item
            for item in offered
            if item.value not in self.commands or not not_taken_by(ctx, self.commands[item.value])
        ]

    def invoke(self, ctx: Any) -> Any:
        consoles.cache_clear()  # made under this command's streams and environment
        fit_to_streams(*consoles())
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # usage errors, --help, and exit statuses a command chose
        except Exception as exc:
            if os.environ.get("NETBOX_CHAT_TRACEBACK"):
                raise
            raise typer.Exit(int(report(exc))) from None


app = typer.Typer(
    cls=Commands,
    name="netbox-chat",
    help=(
        "Ask your NetBox questions in plain words, answered by a local model (Ollama or "
        "an OpenAI-compatible server).\n\n"
        'Run without a command to start a new chat session; `netbox-chat "a question"` '
        'asks one (as `netbox-chat ask`), and `netbox-chat -c "a question"` asks it in '
        "the last session (`ask --continue`; `-c` alone reopens that chat). Sessions live in "
        "NETBOX_CHAT_SESSIONS, one SQLite file each; by default in the sessions/ folder of "
        "the checkout netbox-chat was installed from (pip install -e), else in "
        "$XDG_DATA_HOME/netbox-chat/sessions, whatever the current folder (see "
        "`netbox-chat config`).\n\n"
        "Exit codes: 0 ok, 1 user error, 2 usage, 3 session store cannot be opened "
        "or written, 4 session in use by another netbox-chat, 5 `ask` answered without "
        "NetBox (unreachable, or the token refused), 6 the store failed while an answer "
        "was recorded (kept or not is unknown until the session is opened again), 130 "
        "`ask` interrupted, 141 stdout closed early (`| head`), quietly."
    ),
    no_args_is_help=False,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def complete_session_id(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]] | list[str]:
    """Session ids for Typer's completion, when the entry point (main.py) did not
    answer first (PowerShell, or a line it does not read): the same choices,
    from the folder the options name before the command or after it, and
    none after an option typed before the command that it does not take,
    which the CLI refuses (`options_before`)."""
    from typer._click.core import ParameterSource  # typer 0.28 vendors click

    if ctx.parent is not None and not_taken_by(ctx.parent, ctx.command):
        return []

    def named(name: str) -> Any:
        """Typed after the command, else before it; else None (the
        environment and the config file are read as the command reads them)."""
        for typed in (ctx, ctx.parent):
            source = None if typed is None else typed.get_parameter_source(name)
            if typed is not None and source is ParameterSource.COMMANDLINE:
                return typed.params.get(name)
        return None

    word = SessionIdWord(
        incomplete,
        sessions_dir=named("sessions_dir"),
        store=named("store"),
        profile=named("profile"),
    )
    choices = session_id_choices(word)
    if any(title is None for _, title in choices):
        return [sid for sid, _ in choices]
    return [(sid, title or "") for sid, title in choices]


ThreadArg = Annotated[
    str,
    typer.Argument(
        help="Session id, or a unique prefix of one.", autocompletion=complete_session_id
    ),
]

# `ls` shows this many of the newest sessions unless --all: a table of a
# thousand rows costs most of a second to draw and nobody reads it.
LS_ROWS = 20


@functools.cache
def consoles() -> "tuple[Console, Console]":
    """stdout's and stderr's consoles, made on first use: Rich's console
    module costs 17 ms of imports, which a Tab press (Typer's completion
    builds this app and runs no command) never needs."""
    from netbox_chat.ui.console import VisibleConsole

    class PipeConsole(VisibleConsole):
        def on_broken_pipe(self) -> None:
            """Rich's own handling exits 1; ours goes through `report`."""
            raise BrokenPipeError

    # No `:name:` emoji codes: we never write them, questions and answers must
    # print as written, and rich's emoji table costs every command 3 ms to load.
    # Control characters in what they print are shown, never sent (VisibleConsole).
    return (
        PipeConsole(highlight=False, emoji=False),
        PipeConsole(stderr=True, highlight=False, emoji=False),
    )


def out() -> "Console":
    return consoles()[0]


def err() -> "Console":
    return consoles()[1]


def say(
    message: str, style: str = "", *, stdout: bool = False, soft_wrap: bool | None = None
) -> None:
    """Print one line as written, never as Rich markup nor terminal control:
    it may hold the user's own words (a question, a path, a server's error)."""
    from rich.text import Text

    (out() if stdout else err()).print(Text(visible(message), style=style), soft_wrap=soft_wrap)


def hanging(line: str, console: "Console") -> str:
    """`line` as a terminal shows it: wrapped at spaces only, each following
    line indented under the first one's text, so a check's detail never
    reads as a line of its own, nor breaks inside a word or a path. Left
    whole in a pipe or a log, for grep."""
    import textwrap

    if not console.is_terminal:
        return line
    try:  # the terminal's own width: an exported COLUMNS may be stale
        width = os.get_terminal_size(console.file.fileno()).columns
    except (OSError, ValueError):
        width = console.width
    return "\n".join(
        textwrap.wrap(
            line,
            max(width, 20),
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


# Warnings already printed: each once per process, however often the config
# file is read (a resumed session resolves the settings twice).
_warned: set[str] = set()


def warn_once(warning: str) -> None:
    if warning not in _warned:
        _warned.add(warning)
        say(f"netbox-chat: {warning}", "yellow", soft_wrap=True)


def settings_from(
    chat: ChatOptions, *, session_model: str | None = None, need_token: bool = False
) -> Settings:
    """The settings (config.py's layers) for this command line: the one
    place the chat's options become settings. With `need_token`, a
    profile's token_command is run (once per process)."""
    from netbox_chat.credentials import with_token

    if chat.store is not None and chat.store.startswith(DATABASE_SCHEMES):
        warn_password_in_argv(chat.store)
    try:
        settings = resolve_settings(
            profile=chat.profile, session_model=session_model, **chat.settings_flags()
        )
        if need_token:
            settings = with_token(settings)
    except ValueError as exc:
        raise settings_error(exc) from None
    for warning in settings.warnings:
        warn_once(warning)
    SETTINGS_IN_FORCE.set(settings)  # what an error worded far from here names (source_of)
    return settings


def warn_password_in_argv(url: str) -> None:
    """A password in `--store` is seen by every local user (`ps`) and kept in
    the shell's history: say so, once, and where else it can go."""
    from netbox_chat.store.postgres import has_password

    if has_password(url):
        warn_once(
            "a password in --store is visible to other users in `ps` and kept in your "
            "shell history: put it in ~/.pgpass or PGPASSWORD instead"
        )


def chat_options_typed(ctx: Any) -> list[Any]:
    """The chat's own options typed on the command line (the app's context),
    as its parameters."""
    from typer._click.core import ParameterSource  # typer 0.28 vendors click

    return [
        param
        for param in ctx.command.params
        if param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    ]


def not_taken_by(ctx: Any, command: Any) -> list[Any]:
    """Those of the chat's options typed before `command` (the app's context)
    that the command does not take."""
    taken = {param.name for param in command.params}
    return [param for param in chat_options_typed(ctx) if param.name not in taken]


def options_before(ctx: typer.Context, name: str, chat: ChatOptions) -> None:
    """The chat's own options typed before a command (`netbox-chat --profile
    lab ask "…"`, as `git -C dir status` goes) mean what they mean after it:
    handed to the command (options.with_options_before). One the command
    does not take is refused (exit 2), as it is after the command, saying
    so, never dropped: a dropped --profile asked another NetBox than the one
    named. Completion follows the same rule (`Commands.shell_complete`,
    `complete_session_id`, `completion.read_by_typer`)."""
    command = ctx.command.get_command(ctx, name)  # type: ignore[attr-defined]
    if refused := not_taken_by(ctx, command):
        flags = ", ".join(param.opts[0] for param in refused)
        own = {opt for param in command.params for opt in param.opts} & {
            opt for param in refused for opt in param.opts
        }
        why = (
            f"{flags} before `{name}` is the chat's; {name}'s own goes after it "
            f"(`netbox-chat {name} {sorted(own)[0]} …`)"
            if own
            else f"`netbox-chat {name}` takes no {flags}"
        )
        raise UserFacingError(
            f"{why}; `netbox-chat {name} --help` lists what it takes",
            exit_status=ExitStatus.USAGE,
        )
    ctx.meta[BEFORE] = chat


def require_netbox(settings: Settings) -> None:
    """Refuse before any session is created: without NetBox every answer fails.

    A token the configuration names (a profile's token_env) but that is not
    set is refused here, naming the variable, not found by the first question
    as a 403. With no token named at all, one line says so and the chat
    starts: a NetBox may let anyone read."""
    from netbox_chat.credentials import missing_token

    if settings.netbox_url is None:
        raise UserFacingError(f"{not_configured()}; `netbox-chat doctor` checks the setup")
    missing = missing_token(settings)
    if missing is None:
        return
    if settings.token_source is not None:
        raise UserFacingError(f"{missing}; `netbox-chat config` shows where settings come from")
    say(f"netbox-chat: {missing}: only a NetBox that lets anyone read will answer", "yellow")


@typeahead.held()  # keys typed until the prompt is up wait for it, unechoed
def _chat(
    settings: Settings,
    chat: ChatOptions,
    thread: str | None,
    *,
    resume: bool,
    rewind_to: int | None = None,
    pick: bool = True,
) -> None:
    """A chat: a new session, or (`resume`) `thread`, or with none the one
    picked from a list on a terminal (`pick`), else the most recent."""
    import asyncio
    from dataclasses import replace

    from netbox_chat.cli.repl import require_terminal, run_chat

    store = open_store(settings)
    fresh = settings  # for a session made by /new: not the resumed one's
    if resume:
        if pick and thread is None and sys.stdin.isatty() and sys.stdout.isatty():
            from netbox_chat.cli.picker import pick_session

            thread = pick_session(store)  # piped, the most recent, as before
            if thread is None:
                return  # left the list: nothing opened
        settings, session = open_to_continue(store, thread, chat, note_model=True)
    else:
        require_netbox(settings)
        require_terminal()  # before a session is made that nobody could use
        session = new_session(store, settings)
    with session:
        require_terminal()
        ending = asyncio.run(
            run_chat(session, settings, out(), resumed=resume, rewind_to=rewind_to)
        )
    while ending.how == "new":  # /new: a fresh session without leaving
        if ending.model is not None:  # and with the model /model switched to
            fresh = replace(fresh, model=ending.model)
        with new_session(store, fresh) as session:
            ending = asyncio.run(run_chat(session, fresh, out(), resumed=False))


def open_to_continue(
    store: Store, thread: str | None, chat: ChatOptions, *, note_model: bool = False
) -> tuple[Settings, OpenSession]:
    """The session `thread` names (its id, a prefix or its title; None: the
    most recently active), opened, and the settings to go on with it
    (`settings_for_session`, then the session's own `/think`); refused
    before it is opened when NetBox is not configured."""
    session_id = find_session(store, thread) if thread is not None else store.most_recent()
    settings = settings_for_session(store, session_id, chat, note_model=note_model)
    require_netbox(settings)
    session = store.open(session_id)
    return with_session_think(settings, chat, session.meta().get("think")), session


def with_session_think(settings: Settings, chat: ChatOptions, stored: str | None) -> Settings:
    """The `/think` a session last chose (its meta), taken as the session's
    model is (config.py's session layer): under `--think` and
    NETBOX_CHAT_THINK, over the config file, and not with a typed
    `--profile`. Anyone with access to the store writes that row: only one
    of `/think`'s words is taken."""
    from dataclasses import replace

    from netbox_chat.models.thinking import check_setting

    try:
        think = check_setting(stored, "think")
    except ValueError:
        return settings
    origin = settings.origins.get("think", "")
    if think is None or chat.profile is not None or origin.startswith(("flag", "env")):
        return settings
    return replace(settings, think=think, origins={**settings.origins, "think": "session"})


def new_session(store: Store, settings: Settings) -> OpenSession:
    return store.create(
        model=settings.model, netbox_url=settings.netbox_url, profile=settings.profile
    )


def settings_for_session(
    store: Store, session_id: str, chat: ChatOptions, *, note_model: bool = False
) -> Settings:
    """The settings to continue a session with: the user's own NetBox, token
    and profile (flags, environment, config file), and the session's model
    (the one its newest turn asked, so a `/model` switch carries over) unless
    a flag, the environment or a typed profile names another. With
    `note_model` (the chat, whose banner names the model) that is said in one
    yellow line; `ask` keeps its stderr to the one line of an error.

    The session's rows may have been written by anyone with access to the
    store, so they never choose the NetBox, the profile or the token: the
    NetBox the session remembers is only compared with the user's. Against
    another one, the earlier answers describe the other instance: that needs
    `--netbox-url` or `--profile` typed on the command line, and is said in
    one yellow line.

    A session whose newest turn asked another model server than the one
    configured now goes on with the configuration in force, its model too
    (the session's is that server's); the chat says in one line where it was
    started and the command that resumes it there."""
    summary = store.summarize(session_id)
    from dataclasses import replace

    # The store is open: the settings name its folder, whatever else the options say.
    chat = replace(chat, sessions_dir=store.root if isinstance(store, SessionStore) else None)
    settings = settings_from(chat, session_model=summary.model or None, need_token=True)
    started = summary.server
    moved = started is not None and not started.same_place(ModelServer.of(settings))
    if moved:
        settings = settings_from(chat, need_token=True)
    change = netbox_change(summary, settings)
    if change is not None:
        if settings.netbox_url is None or (chat.netbox_url is None and chat.profile is None):
            mine = profiles_on(summary.netbox_url, settings.config_file)
            own = f"; your profile for it: --profile {' or '.join(mine)}" if mine else ""
            if settings.netbox_url is None:
                raise UserFacingError(f"{change}{own}")
            raise UserFacingError(
                f"{change}; resume it with --netbox-url or --profile to go on against this one{own}"
            )
        say(
            f"netbox-chat: {change}: its earlier answers describe the other NetBox",
            "yellow",
            soft_wrap=True,
        )
    # Only once the session is sure to go on: a refusal stays one line.
    if note_model and moved and started is not None:
        asked = f" (model {summary.model})" if summary.model else ""
        say(
            visible_line(
                f"netbox-chat: session {summary.id} was started on {started.shown()}{asked}; "
                f"going on with {settings.model} on {ModelServer.of(settings).shown()}; "
                f"`{resume_command(summary.id, started)}` resumes it there"
            ),
            "yellow",
            soft_wrap=True,
        )
    elif note_model and summary.model and settings.model != summary.model:
        say(
            f"netbox-chat: session {summary.id} last asked {summary.model}; going on with "
            f"{settings.model} ({settings.origins.get('model', 'default')})",
            "yellow",
            soft_wrap=True,
        )
    return settings


def netbox_change(summary: SessionSummary, settings: Settings) -> str | None:
    """What differs between the NetBox a session was started with and the one
    configured now, in words (None when they are the same or unknown)."""
    if not summary.netbox_url:
        return None
    started = f"session {summary.id} was started against {visible_line(summary.netbox_url)}"
    if settings.netbox_url is None:
        return f"{started}, and no NetBox is configured here (NETBOX_URL, --netbox-url, a profile)"
    if without_userinfo(summary.netbox_url) == without_userinfo(settings.netbox_url):
        return None
    origin = settings.origins.get("netbox_url", "")
    shown = without_userinfo(settings.netbox_url, "***@")
    return f"{started}, this one talks to {shown} ({origin})"


def show_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version

        print(f"netbox-chat {version('netbox-chat')}")
        raise typer.Exit()


CHATS = (None, "resume")
"""The invocations that open the REPL: no command (a new session) and `resume`."""


@app.callback(invoke_without_command=True)
@chat_options(*CHAT)
def main_callback(
    ctx: typer.Context,
    _version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=show_version
        ),
    ] = False,
    *,
    chat: ChatOptions,
) -> None:
    """Start a new chat session when no command is given."""
    if ctx.invoked_subcommand != "ask":  # `ask` guards itself (process.py)
        process.release()
    if ctx.invoked_subcommand not in CHATS:  # a chat's start-up ends at its prompt (repl.py)
        process.started()
    if ctx.invoked_subcommand is not None:
        options_before(ctx, ctx.invoked_subcommand, chat)
    if ctx.invoked_subcommand is None:
        _chat(settings_from(chat, need_token=True), chat, None, resume=False)


@app.command()
@chat_options(*CHAT)
def resume(
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Session id, unique prefix or title (default: a list to pick from on a "
            "terminal, else the most recent session).",
            autocompletion=complete_session_id,
        ),
    ] = None,
    at: Annotated[
        int | None,
        typer.Option(
            "--at", min=0, help="Rewind to just after turn N before the prompt (see /history)."
        ),
    ] = None,
    latest: Annotated[
        bool,
        typer.Option("--latest", help="The most recent session, without the list (as -c)."),
    ] = False,
    *,
    chat: ChatOptions,
) -> None:
    """Reopen a session and continue it, with its memory.

    Named by its id, an id prefix or its title (`/rename`); with none, on a
    terminal, a list of the sessions, the most recent first, to filter by
    typing and open with Enter (piped: the most recent). Prints what was
    restored (turns, messages, the last exchange). A turn that a crash left
    half-done is rolled back first. With --at N the conversation
    goes back to just after turn N (linearly: later turns are set aside, never
    replayed). It goes on with the model its latest turn asked unless a flag
    or the environment names another; the NetBox is your own, and another
    than the session's needs --netbox-url or --profile.
    """
    if latest and thread is not None:
        raise typer.BadParameter("give a session or --latest, not both")
    _chat(settings_from(chat.where()), chat, thread, resume=True, rewind_to=at, pick=not latest)


@app.command("ls")
@chat_options(*WHERE)
def list_sessions(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (every session) instead of a table.")
    ] = False,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help=f"Show every session, not the newest {LS_ROWS}.")
    ] = False,
    grep: Annotated[
        str | None,
        typer.Option(
            "--grep",
            "-q",
            help="Only sessions whose questions or answers contain this text "
            "(case-insensitive for ASCII letters).",
            show_default=False,
        ),
    ] = None,
    *,
    chat: ChatOptions,
) -> None:
    """List sessions, most recently active first. Never writes a session."""
    from netbox_chat.ui import tables

    settings = settings_from(chat)
    store = open_store(settings)
    limit = None if as_json or show_all else LS_ROWS
    matches = store.search(grep) if grep is not None else None
    ids = list(matches) if matches is not None else store.ids_by_recency()
    summaries = sorted(store.list_sessions(limit, ids), key=lambda s: s.last_active, reverse=True)
    chosen = settings.origins.get("sessions_dir", "")
    if isinstance(store, SessionStore) and chosen.startswith("default") and not as_json:
        _old_places(store.root)  # first: an empty store is when they matter most
    if as_json:
        print(json.dumps([s.as_json() for s in summaries], indent=2))
    elif not summaries:
        if grep is not None:
            say(f"no session in {store.root} mentions {grep!r}")
        else:
            say(f"no sessions in {store.root}; start one with `netbox-chat`")
    else:
        out().print(tables.sessions_table(summaries, matches))
        # The notes go to stderr: once the table is out, so that with both
        # streams on one pipe (`2>&1 | less`) they come after it, not inside.
        out().file.flush()
        origin = settings.origins.get("sessions_dir", "")
        if settings.store is None and origin.startswith("default"):  # else the user named it
            say(f"sessions in {store.root} ({origin})", "dim", soft_wrap=True)
        if (netbox := tables.one_netbox(summaries)) is not None:
            say(netbox, "dim", soft_wrap=True)
        _elsewhere(summaries, ModelServer.of(settings))
        hidden = len(ids) - len(summaries)
        if hidden > 0:
            older = "1 older session is" if hidden == 1 else f"{number(hidden)} older sessions are"
            say(f"… {older} not shown; `netbox-chat ls --all` lists them")
        if any(s.unanswered and not s.is_open for s in summaries):
            say(
                "sessions marked (never answered) were cut short in their first turn; "
                "`netbox-chat forget --unanswered` removes them"
            )
    if matches == {}:
        raise typer.Exit(int(ExitStatus.USER_ERROR))  # as grep: nothing matched


def _old_places(root: Path) -> None:
    """Sessions an older netbox-chat kept elsewhere (a marked sessions/ in the
    folder tree, ./sessions, the per-user folder): not used, never lost. One
    line each, with the one command that moves them into this store."""
    import shlex

    from netbox_chat.config import old_session_places

    for place in old_session_places(os.environ, root):
        found = len(list(place.glob("*.sqlite")))
        dest = shlex.quote(str(root))
        make = "" if root.is_dir() else f"mkdir -p -m 700 {dest} && "
        verb = "is" if found == 1 else "are"
        say(
            visible_line(
                f"{words.count(found, 'session')} in {place} {verb} not in this store (an "
                f"older netbox-chat kept them there); to move them here: "
                f"{make}mv -n {shlex.quote(str(place))}/*.sqlite* {dest}/"
            ),
            "yellow",
            soft_wrap=True,
        )


ELSEWHERE_LINES = 5


def _elsewhere(summaries: list[SessionSummary], here: ModelServer) -> None:
    """Sessions whose newest turn asked another model server than the one
    configured: the command that resumes each there (the first few)."""
    other = [s for s in summaries if s.server is not None and not s.server.same_place(here)]
    for summary in other[:ELSEWHERE_LINES]:
        assert summary.server is not None
        say(
            visible_line(
                f"{summary.id} is on {summary.server.shown()}: "
                f"`{resume_command(summary.id, summary.server)}`"
            ),
            "dim",
            soft_wrap=True,
        )
    if len(other) > ELSEWHERE_LINES:
        more = len(other) - ELSEWHERE_LINES
        say(f"… {more} more on other servers: `netbox-chat ls --json` gives each one's `resume`")


@app.command()
@chat_options(*WHERE)
def forget(
    threads: Annotated[
        list[str] | None,
        typer.Argument(
            help="Session ids, or unique prefixes of them.",
            autocompletion=complete_session_id,
            show_default=False,
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    unanswered: Annotated[
        bool,
        typer.Option(
            "--unanswered",
            help="Forget every session no turn ever finished in (left by a crash "
            "in a first turn) that no process has open.",
        ),
    ] = False,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Forget every session last active longer ago than this (30d, 12h, 2w) "
            "that no process has open.",
            show_default=False,
        ),
    ] = None,
    *,
    chat: ChatOptions,
) -> None:
    """Delete sessions for good (their .sqlite, -wal and -shm files, or their rows)."""
    chosen = sum((bool(threads), unanswered, older_than is not None))
    if chosen != 1:
        raise typer.BadParameter("give session ids, --unanswered or --older-than (one of them)")
    age = None if older_than is None else parse_age(older_than)
    store = open_store(settings_from(chat))
    if unanswered:
        _forget_unanswered(store)
        return
    if age is not None:
        cutoff = time.time() - age
        # A time that cannot be read never gets a session forgotten.
        old = [
            s.id
            for s in store.list_sessions()
            if not s.is_open and (epoch(s.last_active) or cutoff) < cutoff
        ]
        if old and not yes:
            _confirm_forget(old, f"last active over {older_than} ago")
        _forget_all(store, old, f"last active over {older_than} ago")
        return
    session_ids = list(dict.fromkeys(store.resolve(thread) for thread in threads or ()))
    if not yes:
        if len(session_ids) == 1:
            summary = store.summarize(session_ids[0])
            title = visible_line(summary.title or summary.unreadable or "(no question yet)")
            question = f"Forget session {session_ids[0]} ({title})?"
        else:
            question = f"Forget {len(session_ids)} sessions ({' '.join(session_ids)})?"
        if not typer.confirm(question, default=False):
            say("kept")
            raise typer.Exit(int(ExitStatus.USER_ERROR))
    for session_id in session_ids:
        store.forget(session_id)
        say(f"forgot session {session_id}", stdout=True)


AGE_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """`30d` → seconds; a usage error (exit 2) for anything else."""
    number, unit = text[:-1], text[-1:].lower()
    if unit not in AGE_UNITS or not number.isdigit():
        raise typer.BadParameter(
            f"{text!r} is not an age: a whole number and m, h, d or w (30d, 12h, 2w)",
            param_hint="--older-than",
        )
    return int(number) * AGE_UNITS[unit]


def _confirm_forget(session_ids: list[str], why: str) -> None:
    """Ask before a sweep; a no ends the command (exit 1), as for one id."""
    if typer.confirm(
        f"Forget {words.count(len(session_ids), 'session')} {why} ({' '.join(session_ids)})?",
        default=False,
    ):
        return
    say("kept")
    raise typer.Exit(int(ExitStatus.USER_ERROR))


def _forget_unanswered(store: Store) -> None:
    """Each session the scan found is opened (its lock) and checked again
    before it goes: one answered since the scan stays, as does one open."""
    forgotten = []
    for session_id in store.unanswered():
        try:
            with store.open(session_id) as session:
                gone = session.discard_if_unanswered()
        except UserFacingError as exc:  # opened since the scan, or gone: leave it
            say(f"netbox-chat: kept {session_id}: {exc}", "yellow", soft_wrap=True)
            continue
        if gone:
            forgotten.append(session_id)
        else:
            say(f"netbox-chat: kept {session_id}: answered since the scan", "yellow")
    _say_forgotten(forgotten, "left unanswered")


def _forget_all(store: Store, session_ids: list[str], why: str) -> None:
    forgotten = []
    for session_id in session_ids:
        try:
            store.forget(session_id)
        except UserFacingError as exc:  # opened or changed since the scan: leave it
            say(f"netbox-chat: kept {session_id}: {exc}", "yellow", soft_wrap=True)
        else:
            forgotten.append(session_id)
    _say_forgotten(forgotten, why)


def _say_forgotten(forgotten: list[str], why: str) -> None:
    if not forgotten:
        say(f"no session {why} to forget", stdout=True)
        return
    say(
        f"forgot {words.count(len(forgotten), 'session')} {why}: {' '.join(forgotten)}", stdout=True
    )


@app.command("config")
@chat_options(*WHERE, *SERVER)
def config_command(
    *,
    chat: ChatOptions,
) -> None:
    """Print every setting as resolved here and where it came from (flag,
    environment, profile, config file, default). The token shows only as set
    or missing; a token_command is run to check it works."""
    from netbox_chat.credentials import with_token
    from netbox_chat.ui import tables

    settings = settings_from(chat)
    open_store(settings)  # a store URL libpq cannot use is refused as by every command
    try:
        settings = with_token(settings)
    except ValueError as exc:  # every other setting is still worth seeing
        out().print(tables.settings_table(settings, token_failed=True), soft_wrap=True)
        raise UserFacingError(str(exc)) from None
    out().print(tables.settings_table(settings), soft_wrap=True)


@app.command()
@chat_options(*CHAT, "deadline")
def ask(
    question: Annotated[
        str | None,
        typer.Argument(
            help="The question, in quotes; `-` (or none, from a pipe) reads it from stdin.",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            help="Continue this session instead of a new one.",
            autocompletion=complete_session_id,
        ),
    ] = None,
    go_on: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the most recently active session."),
    ] = False,
    ephemeral: Annotated[
        bool,
        typer.Option("--ephemeral", help="Keep nothing: the session is deleted after the answer."),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print a JSON object: session, answer, tool calls, tokens, status."
        ),
    ] = False,
    stream_json: Annotated[
        bool,
        typer.Option(
            "--stream-json",
            help="Print one JSON object per line as the turn goes (text deltas, tool "
            "calls, rollback), then one with the --json fields (type result).",
        ),
    ] = False,
    *,
    chat: ChatOptions,
) -> None:
    """Run one turn without the REPL, print the answer and exit (scripts, cron).

    In a terminal the answer and the tool calls stream as in the REPL. Ctrl-C
    or SIGTERM cancels the turn, rolls it back and exits 130. A new session
    whose turn ends without an answer is not kept. Exits 5 when the answer was
    made without NetBox (unreachable, or the token refused).
    """
    import asyncio

    from netbox_chat.agent.runtime import CancelOnSignals
    from netbox_chat.ui import turnview
    from netbox_chat.ui.streamjson import JsonLines

    if sum((session is not None, go_on, ephemeral)) > 1:
        raise UserFacingError(
            "--session, --continue and --ephemeral exclude each other",
            exit_status=ExitStatus.USAGE,
        )
    question = read_question(question)
    lines = JsonLines(sys.stdout) if stream_json else None
    view = turnview.TurnView(out()) if out().is_terminal and not (as_json or lines) else None
    continuing = session is not None or go_on
    # Guarded from the first line: a signal before the turn starts stops it
    # from starting (exit 130), and once the outcome is recorded none can
    # change the exit status any more (see CancelOnSignals.settle).
    with CancelOnSignals() as signals:
        settings = settings_from(chat, need_token=not continuing)
        store = open_store(settings)
        if continuing:
            settings, opened = open_to_continue(store, session, chat)
        else:
            require_netbox(settings)
            opened = new_session(store, settings)
        with opened:
            try:
                result = asyncio.run(_ask_once(opened, settings, question, signals, lines or view))
            except UserFacingError as exc:
                from netbox_chat.agent.turns import TurnOutcome
                from netbox_chat.ui.streamjson import turn_result

                stays = continuing or not _discard(opened)
                # --json and --stream-json end with a result whatever happened.
                failed = TurnOutcome(0, "failed", error=str(exc))
                _print_result(
                    {**turn_result(opened.id, failed, started=False), "kept": stays}, lines, as_json
                )
                if not stays:
                    raise UserFacingError(
                        f"{exc}; nothing was kept", exit_status=exc.exit_status
                    ) from None
                raise
            result["kept"] = continuing or not _discard(opened)
        if ephemeral and result["kept"]:
            store.forget(opened.id)
            result["kept"] = False
    _print_result(result, lines, as_json)
    if lines is None and not as_json and result["status"] == "done" and view is None:
        # Flushed before any line on stderr: in `> log 2>&1` the answer comes first.
        print(visible(result["answer"]), flush=True)
    if result["status"] != "done" and not (as_json or stream_json):
        what = "" if result["turn"] is None else f"turn {result['turn']} {result['status']}: "
        kept = "" if result["kept"] else "; nothing was kept"
        say(f"netbox-chat: {what}{result['error'] or 'rolled back'}{kept}", "red")
    if result["netbox_error"] is not None:
        err().print(turnview.outage_line(result["netbox_error"], prefix="netbox-chat: "))
    if result["kept"] and err().is_terminal and view is not None:
        # Only beside an answer drawn in the terminal: piped (`| cat`), stdout
        # is the answer alone, as `llm "q" | cat` prints it, and a hint on
        # stderr would reach the terminal before the pipe's reader printed it.
        sid, server = result["session"], ModelServer.of(settings)
        say(
            visible_line(
                f'session {sid}: `netbox-chat ask -c "…"{server.flags()}` goes on, '
                f"`{resume_command(sid, server)}` opens it"
            ),
            "dim",
        )
    raise typer.Exit(int(ask_status(result)))


def read_question(question: str | None) -> str:
    """The question from the command line, or from stdin when it is `-`, or
    absent with stdin a pipe (`echo "…" | netbox-chat ask`). An empty one is a
    usage error: the model would answer a question nobody asked."""
    if question == "-" or (question is None and not sys.stdin.isatty()):
        question = sys.stdin.read()
    if question is None:
        raise UserFacingError(
            'no question: give it in quotes (netbox-chat ask "…"), or - to read it from stdin',
            exit_status=ExitStatus.USAGE,
        )
    if not question.strip():
        raise UserFacingError("the question is empty", exit_status=ExitStatus.USAGE)
    return question.strip()


def ask_status(result: dict[str, Any]) -> ExitStatus:
    """`ask`'s exit status: what a cron job must tell apart. An answer made
    while NetBox was unreachable or refused the token is recorded as the turn
    it was, but is not an answer from NetBox."""
    if result["status"] == "cancelled":
        return ExitStatus.INTERRUPTED
    if result["status"] != "done":
        return ExitStatus.USER_ERROR
    if result["netbox_error"] is not None:
        return ExitStatus.NETBOX_UNAVAILABLE
    return ExitStatus.OK


def _print_result(result: dict[str, Any], lines: "JsonLines | None", as_json: bool) -> None:
    """The result object of `--stream-json` (its last line) or `--json`;
    a session that was not kept is none."""
    if not result["kept"]:
        result["session"] = None
    if lines is not None:
        lines.write({"type": "result", **result})
    elif as_json:
        print(json.dumps(result, indent=2), flush=True)  # before stderr's lines


def _discard(session: OpenSession) -> bool:
    """Remove a new session none of whose turns finished; False if it stays
    (it has an answer, or it cannot be removed, the connection to its store
    lost: then it is kept as it is, and `ls` marks it never answered)."""
    from netbox_chat.store.postgres import database_errors

    kept_as_is: tuple[type[Exception], ...] = (UserFacingError, *database_errors())
    try:
        return session.discard_if_unanswered()
    except kept_as_is:
        return False


NOT_STARTED = "interrupted before the turn started; nothing was recorded"


async def _ask_once(
    session: OpenSession,
    settings: Settings,
    question: str,
    signals: "CancelOnSignals",
    watcher: "JsonLines | TurnView | None" = None,
) -> dict[str, Any]:
    """Run the turn, its events to `watcher` (JSON lines, or the terminal's
    streaming view, as in the REPL); what happened, as `ask --json` says it."""
    import asyncio

    from netbox_chat.agent.runtime import build_runtime
    from netbox_chat.agent.turns import EventSink, TurnOutcome, ignore_events
    from netbox_chat.ui import turnview
    from netbox_chat.ui.streamjson import turn_result

    outage = None
    try:
        # Built whole even if a signal comes meanwhile: the imports cannot be
        # interrupted, and asyncio.run would wait for the thread anyway.
        runtime = await asyncio.to_thread(build_runtime, session, settings)
        try:
            outcome = None
            if runtime.thinking.note:
                say(f"netbox-chat: {runtime.thinking.note}", "dim")
            if signals.received is None:
                for report in runtime.conversation.recover_interrupted():
                    reason = f"turn {report.turn} was interrupted and "
                    turnview.print_rollback(err(), report, reason=reason)
                view: TurnView | None = None
                sink: EventSink = ignore_events
                if isinstance(watcher, turnview.TurnView):
                    from netbox_chat.claims.present import Marker

                    view, sink = watcher, watcher.on_event
                    evidence = runtime.conversation
                    view.marker = Marker(lambda: evidence.evidence, given=question)
                elif watcher is not None:
                    sink = watcher.event
                runtime.check_room(question)
                started_at = time.monotonic()
                with (
                    contextlib.suppress(asyncio.CancelledError),  # cancelled before it began
                    view if view is not None else contextlib.nullcontext(),
                ):
                    outcome = await signals.run(
                        runtime.conversation.run_turn(question, sink, deadline=settings.deadline)
                    )
                if view is not None and outcome is not None and outcome.status == "done":
                    turnview.print_outcome(err(), outcome, time.monotonic() - started_at)
            outage = runtime.take_outage()
        finally:
            await runtime.aclose()
    finally:
        signals.settle()
    started = outcome is not None
    if outcome is None:
        outcome = TurnOutcome(0, "cancelled", error=NOT_STARTED)
    elif outcome.rollback is not None and not outcome.rollback.verified:
        turnview.print_rollback(err(), outcome.rollback)
    if outcome.context.truncated and outcome.context.window:
        err().print(turnview.truncation_line(outcome.context.window))
    return turn_result(session.id, outcome, started=started, outage=outage)


@app.command("export")
@chat_options(*WHERE)
def export_command(
    thread: ThreadArg,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="md (Markdown) or json.", case_sensitive=False)
    ] = "md",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file (0600) instead of stdout."),
    ] = None,
    thinking: Annotated[
        bool, typer.Option("--thinking", help="Include the model's thinking in each turn.")
    ] = False,
    results: Annotated[
        bool,
        typer.Option(
            "--tool-results", help="Include what each tool call returned (as /show prints it)."
        ),
    ] = False,
    *,
    chat: ChatOptions,
) -> None:
    """Print a session's transcript: questions, answers, tool calls, tokens per
    turn; cancelled, failed and rewound turns marked. Never writes the session."""
    from netbox_chat.cli.export import export_session
    from netbox_chat.owned import replace_file

    settings = settings_from(chat)
    fmt = fmt.lower()
    if fmt not in ("md", "json"):
        raise UserFacingError(
            f"unknown format {fmt!r}: use md or json", exit_status=ExitStatus.USAGE
        )
    store = open_store(settings)
    text = export_session(
        store,
        store.resolve(thread),
        "json" if fmt == "json" else "md",
        secrets=[settings.netbox_token],
        thinking=thinking,
        results=results,
    )
    if output is None:
        sys.stdout.write(text)
        return
    replace_file(output, text)
    say(f"wrote {output}")


@app.command()
@chat_options(*WHERE)
def copy(
    thread: ThreadArg,
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="The store to copy into: a folder or a postgresql:// URL.",
            show_default=False,
        ),
    ],
    *,
    chat: ChatOptions,
) -> None:
    """Copy a session, with its memory and its ledger, to another store (a
    folder to the team's database, or back). It keeps its id; the original
    stays where it is."""
    from netbox_chat.checkpoints.copying import copy_session

    source = open_store(settings_from(chat))
    target = open_store(resolve_target(to))
    session_id = source.resolve(thread)
    count = copy_session(source, session_id, target)
    say(
        f"copied session {session_id} ({words.count(count, 'checkpoint')}) to {target.root}",
        stdout=True,
    )


def settings_error(exc: ValueError) -> UserFacingError:
    """A setting that cannot be used, in one line: exit 2 for a flag's value
    the command does not take (a usage error, as `--format html`), exit 1 for
    a wrong environment or config file."""
    usage = isinstance(exc, ConfigError) and exc.usage
    return UserFacingError(str(exc), exit_status=ExitStatus.USAGE if usage else None)


def resolve_target(to: str) -> Settings:
    """The settings naming `copy --to`'s store: that value alone decides."""
    try:
        return resolve_settings(store=to, env={})
    except ValueError as exc:
        raise settings_error(exc) from None


@app.command()
@chat_options(*WHERE, *SERVER, "deadline")
def doctor(
    init_store: Annotated[
        bool,
        typer.Option(
            "--init-store",
            help="Create or migrate the schema of a postgresql:// store, then exit.",
        ),
    ] = False,
    *,
    chat: ChatOptions,
) -> None:
    """Check the setup: Ollama, the model and its tool support, NetBox, the
    token, the NetBox version, the session store. One line each; exits 1 if
    anything is wrong. With --init-store, create the database store's schema."""
    from netbox_chat.cli.doctor import init_database_store, run_checks

    if init_store:
        settings = settings_from(chat.where())
        if settings.store is None:
            raise UserFacingError(
                "--init-store is for a postgresql:// store (--store / NETBOX_CHAT_STORE); "
                "a sessions folder is created when it is first used",
                exit_status=ExitStatus.USAGE,
            )
        say("✓ " + init_database_store(settings.store), "green", stdout=True)
        return
    settings = settings_from(chat, need_token=True)
    checks = run_checks(settings)
    for check in checks:
        style = "" if check.info else "green" if check.ok else "dim" if check.skipped else "red"
        say(hanging(check.line(), out()), style, stdout=True, soft_wrap=True)
    if not all(check.ok for check in checks):
        raise typer.Exit(int(ExitStatus.USER_ERROR))


@app.command("mcp")
@chat_options("netbox_url", "profile")
def mcp_command(
    http: Annotated[bool, typer.Option("--http", help="Serve Streamable HTTP, not stdio.")] = False,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on with --http; beyond loopback it needs "
            "NETBOX_CHAT_MCP_TOKEN (or NETBOX_CHAT_MCP_TOKEN_COMMAND).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on with --http.")
    ] = 8765,
    *,
    chat: ChatOptions,
) -> None:
    """Serve the chat's read-only NetBox tools and check_answer to an MCP client
    (Claude Code, Codex, Cursor, goose, Claude Desktop): over stdio, or
    Streamable HTTP with --http. Needs the mcp extra (docs/mcp.md)."""
    try:
        from netbox_chat.mcp.serve import Reach, bearer_token, serve
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "mcp":
            raise
        raise UserFacingError(
            "the MCP server needs the mcp extra: pip install 'netbox-chat[mcp]'"
        ) from None
    settings = settings_from(chat, need_token=True)
    require_netbox(settings)
    try:
        token = bearer_token() if http else None
    except ValueError as exc:
        raise settings_error(exc) from None
    serve(settings, Reach(http=http, host=host, port=port), token)


class Shown(enum.StrEnum):
    """What `eval --show` adds to the report (the wrong answers are always listed)."""

    RIGHT = "right"


@app.command("eval")
# Its own --model, which takes several, stands for the chat's.
@chat_options("ollama_url", "provider", "base_url", "netbox_url", "think", "profile", "deadline")
def eval_command(
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="A model to evaluate; repeat the flag to compare several on the same "
            "questions (default NETBOX_CHAT_MODEL or the profile's).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Same seed + same data = same questions.")
    ] = 0,
    per_template: Annotated[
        int,
        typer.Option(
            "--per-template",
            min=0,
            max=50,
            help="Questions drawn per template (0: only --questions).",
        ),
    ] = 3,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            max=10_000,
            help="Ask N of the built questions, spread over the templates (the same N for "
            "the same seed): a first run in minutes.",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", min=1, max=100, help="Ask each N times.")] = 1,
    parallel: Annotated[
        int,
        typer.Option(
            "--parallel",
            min=1,
            max=32,
            help="Ask N questions at once, for a server that batches (vLLM, SGLang, "
            "llama-server with slots, Ollama with OLLAMA_NUM_PARALLEL).",
        ),
    ] = 1,
    conversation: Annotated[
        bool,
        typer.Option("--conversation", help="Ask them all in one session (contamination)."),
    ] = False,
    questions_file: Annotated[
        Path | None,
        typer.Option("--questions", help="A TOML file of your own questions to add."),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option("--judge", help="A model that grades explanation questions (only those)."),
    ] = None,
    list_only: Annotated[
        bool, typer.Option("--list", help="Print the questions and their truth; ask no model.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, not Markdown.")] = False,
    show: Annotated[
        Shown | None,
        typer.Option(
            "--show",
            help="right: list the credited answers too, each with the words that earned it "
            "(the JSON always has them).",
            show_default=False,
        ),
    ] = None,
    resume_run: Annotated[
        str | None, typer.Option("--resume", help="Finish a stopped run (its id).")
    ] = None,
    runs_dir: Annotated[
        Path,
        typer.Option(
            "--runs-dir",
            envvar="NETBOX_CHAT_EVAL_RUNS",
            help="Where runs are kept, one folder each with its sessions.",
        ),
    ] = Path("eval-runs"),
    *,
    chat: ChatOptions,
) -> None:
    """How often does a model answer right on this NetBox? Builds questions from
    its data, computes their truth by direct queries, asks each in a new session
    and scores the answers. Ctrl-C stops (exit 130) keeping every finished answer."""
    from netbox_chat.eval.command import EvalOptions, run_eval

    settings = settings_from(chat, need_token=True)
    options = EvalOptions(
        models=tuple(dict.fromkeys(models or [settings.model])),
        seed=seed,
        per_template=per_template,
        limit=limit,
        repeat=repeat,
        parallel=parallel,
        conversation=conversation,
        judge=judge,
        questions_file=questions_file,
        list_only=list_only,
        as_json=as_json,
        show_right=show is Shown.RIGHT,
        resume=resume_run,
        runs_dir=runs_dir,
    )
    status = run_eval(settings, options, out(), err())
    if status:
        raise typer.Exit(status)


def _stdout_is_devnull() -> bool:
    try:
        out, null = os.fstat(1), os.stat(os.devnull)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (null.st_dev, null.st_ino)


def main() -> None:
    """The `netbox-chat` entry point.

    When a command is done the process exits, and interpreter shutdown runs
    full garbage collections over every object still alive: about 21,000
    after `ls`, 5 ms a pass, 10 ms in all, longer than listing the sessions.
    Those passes find nothing that needs finalizing (session files, sockets
    and the event loop are closed explicitly; the std streams are flushed by
    the interpreter), so the survivors are frozen out of the collector first:
    reference counting still frees what it can, the OS reclaims the rest.
    """
    status: str | int | None = 0
    stdout, devnull_before = sys.stdout, _stdout_is_devnull()
    try:
        app()
    except SystemExit as done:
        status = done.code
        if sys.stdout is not stdout or (not devnull_before and _stdout_is_devnull()):
            # Typer's own EPIPE handling (`--version`) wraps stdout, and
            # rich's (Typer's help) points it at /dev/null, both exiting 1;
            # a reader going away is 141, as for every command.
            status = int(reader_went_away())
    finally:
        gc.freeze()
    try:  # what is still buffered: `ls --json | head -c1` breaks the pipe only here
        sys.stdout.flush()
    except BrokenPipeError:
        status = int(reader_went_away())
    sys.exit(status)
