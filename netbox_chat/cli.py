"""The `netbox-chat` command: Typer commands, arguments, exit statuses.

Thin on purpose: each command resolves settings, opens the session store and
hands over to the room that does the work. Heavy modules (LangChain through
`runtime`, prompt-toolkit through `repl`, and asyncio, 25 ms on its own) are
imported inside the commands that need them, so `ls` and `forget` start as
fast as Python does.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.shell_completion import CompletionItem, add_completion_class
from typer._completion_classes import FishComplete, ZshComplete
from typer.core import TyperGroup

from netbox_chat.completion import SessionIdWord, fish_choice, session_id_choices, zsh_choice
from netbox_chat.config import DATABASE_SCHEMES, PROFILE_ENV, Settings, resolve_settings
from netbox_chat.errors import ExitStatus, UserFacingError, user_facing
from netbox_chat.sessions import (
    AmbiguousSession,
    SessionStore,
    SessionSummary,
)
from netbox_chat.stores import OpenSession, Store, open_store

if TYPE_CHECKING:
    from netbox_chat.streamjson import JsonLines

if TYPE_CHECKING:
    from rich.console import Console

    from netbox_chat.runtime import CancelOnSignals
    from netbox_chat.turns import TurnOutcome


def report(error: Exception) -> ExitStatus:
    """The one place an exception becomes what the user sees (httpie's
    `raw_main`): one red line on stderr starting with `netbox-chat:`, and the
    documented exit status. Anything else than a `UserFacingError` is a bug
    of ours; it still gets one line (set NETBOX_CHAT_TRACEBACK=1 for the
    traceback), not a traceback over the user's terminal."""
    from netbox_chat import render

    error = user_facing(error)
    err().print(render.error_line(error, prefix="netbox-chat: "))
    if isinstance(error, AmbiguousSession):
        say("candidates: " + " ".join(error.candidates))
    return error.exit_status if isinstance(error, UserFacingError) else ExitStatus.USER_ERROR


def fit_to_streams(*consoles: Console) -> None:
    """Wrap lines only on a terminal: in a log or a pipe each message stays
    one line, so a grep finds it. Done per command, because the streams are
    only known then (Typer's test runner swaps them)."""
    for console in consoles:
        console.soft_wrap = not console.is_terminal


class PlainHelpZsh(ZshComplete):
    """Typer's zsh completion with each choice's help shown as written.

    Typer renders a choice's help as Rich markup first: that imports Rich's
    Markdown stack (40 ms on every Tab) and drops a title's `[eth0]`. No help
    text of this app holds markup (tests/test_habits.py checks), and a title
    is the user's own words."""

    def format_completion(self, item: CompletionItem) -> str:
        return zsh_choice(item.value, item.help)


class PlainHelpFish(FishComplete):
    """Typer's fish completion with each choice's help shown as written (see `PlainHelpZsh`)."""

    def format_completion(self, item: CompletionItem) -> str:
        return fish_choice(item.value, item.help)


class Commands(TyperGroup):
    """Runs every command, from `netbox-chat` and from Typer's test runner
    alike, through `report`: the commands raise, they never print errors."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Typer registers its own shell classes while it builds the command;
        # ours replace them just before a completion request is read.
        add_completion_class(PlainHelpZsh, "zsh")
        add_completion_class(PlainHelpFish, "fish")
        return super().main(*args, **kwargs)

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
        "Ask your NetBox questions in plain words, answered by a local Ollama model.\n\n"
        "Run without a command to start a new chat session. Sessions live in "
        "NETBOX_CHAT_SESSIONS (default ./sessions), one SQLite file each.\n\n"
        "Exit codes: 0 ok, 1 user error, 2 usage, 3 session store cannot be opened "
        "or written, 4 session in use by another netbox-chat, 130 `ask` interrupted."
    ),
    no_args_is_help=False,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

SessionsDir = Annotated[
    Path | None,
    typer.Option(
        "--sessions-dir",
        envvar="NETBOX_CHAT_SESSIONS",
        show_envvar=True,
        help="Folder of session files (default ./sessions).",
        show_default=False,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="NETBOX_CHAT_STORE",
        show_envvar=True,
        help=(
            "Where sessions live: a folder, or a postgresql:// URL for a team's database "
            "(needs the package's postgres extra)."
        ),
        show_default=False,
    ),
]
OllamaUrl = Annotated[
    str | None,
    typer.Option(
        "--ollama-url",
        envvar="OLLAMA_HOST",
        show_envvar=True,
        help="Ollama server (default http://127.0.0.1:11434).",
        show_default=False,
    ),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="NETBOX_CHAT_MODEL",
        show_envvar=True,
        help="Ollama model; it must support tool calling (default qwen3:8b).",
        show_default=False,
    ),
]
NetboxUrl = Annotated[
    str | None,
    typer.Option(
        "--netbox-url",
        envvar="NETBOX_URL",
        show_envvar=True,
        help="NetBox base URL; the token comes from NETBOX_TOKEN or the profile, never a flag.",
        show_default=False,
    ),
]
Think = Annotated[
    bool | None,
    typer.Option(
        "--think/--no-think",
        help=(
            "Let the model think (shown dimmed) or ask it not to. NETBOX_CHAT_THINK takes "
            "on, off, low, medium or high (default: the model's own)."
        ),
        show_default=False,
    ),
]
Profile = Annotated[
    str | None,
    typer.Option(
        "--profile",
        "-p",
        envvar=PROFILE_ENV,
        show_envvar=True,
        help="A profile of the config file: its NetBox, token, model… (see `netbox-chat config`).",
        show_default=False,
    ),
]


def complete_session_id(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]] | list[str]:
    """Session ids for Typer's completion, when `completion.main` did not
    answer first (PowerShell, or a line it does not read): the same choices."""
    word = SessionIdWord(
        incomplete,
        sessions_dir=ctx.params.get("sessions_dir"),
        store=ctx.params.get("store"),
        profile=ctx.params.get("profile"),
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
def consoles() -> tuple[Console, Console]:
    """stdout's and stderr's consoles, made on first use: Rich's console
    module costs 17 ms of imports, which a Tab press (Typer's completion
    builds this app and runs no command) never needs."""
    from rich.console import Console

    # No `:name:` emoji codes: we never write them, questions and answers must
    # print as written, and rich's emoji table costs every command 3 ms to load.
    return (
        Console(highlight=False, emoji=False),
        Console(stderr=True, highlight=False, emoji=False),
    )


def out() -> Console:
    return consoles()[0]


def err() -> Console:
    return consoles()[1]


def say(
    message: str, style: str = "", *, stdout: bool = False, soft_wrap: bool | None = None
) -> None:
    """Print one line as written, never as Rich markup: it may hold the
    user's own words (a question, a path, a server's error)."""
    from rich.text import Text

    (out() if stdout else err()).print(Text(message, style=style), soft_wrap=soft_wrap)


# A config file's warnings, printed once per process however often it is read.
_warned: set[str] = set()


def settings_from(
    sessions_dir: Path | None = None,
    ollama_url: str | None = None,
    model: str | None = None,
    netbox_url: str | None = None,
    think: bool | None = None,
    *,
    store: str | None = None,
    profile: str | None = None,
    remembered: dict[str, str] | None = None,
    need_token: bool = False,
) -> Settings:
    """Resolve the settings (config.py's layers) for this command line.

    Typer reads each flag's environment variable itself; those values are
    handed to `resolve_settings` as the environment, not as flags, so
    `netbox-chat config` names the right origin and a `--profile` from
    NETBOX_CHAT_PROFILE does not count as one typed on the command line.
    With `need_token`, a profile's token_command is run (once per process)."""
    from netbox_chat.credentials import with_token

    typed = typed_on_command_line(
        sessions_dir=sessions_dir,
        ollama_url=ollama_url,
        model=model,
        netbox_url=netbox_url,
        profile=profile,
    )
    typed["store"] = typed_on_command_line(store_option=store)["store_option"]
    if typed["store"] is not None and typed["store"].startswith(DATABASE_SCHEMES):
        warn_password_in_argv(typed["store"])
    typed["think"] = None if think is None else ("on" if think else "off")
    try:
        settings = resolve_settings(profile=typed.pop("profile"), remembered=remembered, **typed)
        if need_token:
            settings = with_token(settings)
    except ValueError as exc:
        raise UserFacingError(str(exc)) from None
    for warning in settings.warnings:
        if warning not in _warned:
            _warned.add(warning)
            say(f"netbox-chat: {warning}", "yellow", soft_wrap=True)
    return settings


def warn_password_in_argv(url: str) -> None:
    """A password in `--store` is seen by every local user (`ps`) and kept in
    the shell's history: say so, once, and where else it can go."""
    from netbox_chat.pgstore import has_password

    warning = (
        "a password in --store is visible to other users in `ps` and kept in your "
        "shell history: put it in ~/.pgpass or PGPASSWORD instead"
    )
    if has_password(url) and warning not in _warned:
        _warned.add(warning)
        say(f"netbox-chat: {warning}", "yellow", soft_wrap=True)


def typed_on_command_line(**values: Any) -> dict[str, Any]:
    """`values` with None for each parameter whose value Typer took from the
    environment rather than from the command line."""
    # typer 0.28 (pinned) vendors click as typer._click.
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return {
        name: None
        if ctx is not None and ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT
        else value
        for name, value in values.items()
    }


def require_netbox(settings: Settings) -> None:
    """Refuse before any session is created: without NetBox every answer fails."""
    if settings.netbox_url is None:
        raise UserFacingError(
            "NetBox is not configured: set NETBOX_URL and NETBOX_TOKEN "
            "(or pass --netbox-url); `netbox-chat doctor` checks the setup"
        )


def _chat(
    settings: Settings,
    thread: str | None,
    *,
    resume: bool,
    rewind_to: int | None = None,
    flags: dict[str, Any] | None = None,
) -> None:
    import asyncio

    from netbox_chat.repl import run_chat

    store = open_store(settings)
    if resume:
        session_id = store.resolve(thread) if thread is not None else store.most_recent()
        settings = settings_for_session(store, session_id, flags or {})
        require_netbox(settings)
        session: OpenSession = store.open(session_id)
    else:
        require_netbox(settings)
        session = new_session(store, settings)
    with session:
        asyncio.run(run_chat(session, settings, out(), resumed=resume, rewind_to=rewind_to))


def new_session(store: Store, settings: Settings) -> OpenSession:
    return store.create(
        model=settings.model, netbox_url=settings.netbox_url, profile=settings.profile
    )


def settings_for_session(store: Store, session_id: str, flags: dict[str, Any]) -> Settings:
    """The settings to continue a session with: its own NetBox (and profile)
    and model unless a flag or the environment says otherwise.

    Against another NetBox than the one its answers came from, the earlier
    answers describe the other instance: that needs `--netbox-url` or
    `--profile` typed on the command line, and is said in one yellow line."""
    summary = store.summarize(session_id)
    remembered = {
        "netbox_url": summary.netbox_url,
        "model": summary.model,
        "profile": summary.profile,
    }
    folder = store.root if isinstance(store, SessionStore) else None
    settings = settings_from(folder, **flags, remembered=remembered, need_token=True)
    change = netbox_change(summary, settings)
    if change is None:
        return settings
    typed = typed_on_command_line(netbox_url=flags.get("netbox_url"), profile=flags.get("profile"))
    if not any(typed.values()):
        raise UserFacingError(
            f"{change}; resume it with --netbox-url or --profile to go on against this one"
        )
    say(
        f"netbox-chat: {change}: its earlier answers describe the other NetBox",
        "yellow",
        soft_wrap=True,
    )
    return settings


def netbox_change(summary: SessionSummary, settings: Settings) -> str | None:
    """What differs between the NetBox a session was started with and the one
    configured now, in words (None when they are the same or unknown)."""
    if not summary.netbox_url or not settings.netbox_url:
        return None
    if summary.netbox_url == settings.netbox_url:
        return None
    origin = settings.origins.get("netbox_url", "")
    return (
        f"session {summary.id} was started against {summary.netbox_url}, "
        f"this one talks to {settings.netbox_url} ({origin})"
    )


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    think: Think = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Start a new chat session when no command is given."""
    if ctx.invoked_subcommand is None:
        settings = settings_from(
            sessions_dir,
            ollama_url,
            model,
            netbox_url,
            think,
            store=store_option,
            profile=profile,
            need_token=True,
        )
        _chat(settings, None, resume=False)


@app.command()
def resume(
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Session id or unique prefix (default: the most recent session).",
            autocompletion=complete_session_id,
        ),
    ] = None,
    at: Annotated[
        int | None,
        typer.Option(
            "--at", min=0, help="Rewind to just after turn N before the prompt (see /history)."
        ),
    ] = None,
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    think: Think = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Reopen a session and continue it, with its memory.

    Prints what was restored (turns, messages, the last exchange). A turn that
    a crash left half-done is rolled back first. With --at N the conversation
    goes back to just after turn N (linearly: later turns are set aside, never
    replayed). The session's own NetBox and model are used unless a flag or
    the environment names others; another NetBox needs --netbox-url or
    --profile.
    """
    flags = {
        "ollama_url": ollama_url,
        "model": model,
        "netbox_url": netbox_url,
        "think": think,
        "store": store_option,
    }
    settings = settings_from(sessions_dir, store=store_option, profile=profile)
    _chat(settings, thread, resume=True, rewind_to=at, flags={**flags, "profile": profile})


@app.command("ls")
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
    sessions_dir: SessionsDir = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """List sessions, most recently active first. Never writes anything."""
    from netbox_chat import render

    store = open_store(settings_from(sessions_dir, store=store_option, profile=profile))
    limit = None if as_json or show_all else LS_ROWS
    ids = store.search(grep) if grep is not None else store.ids_by_recency()
    summaries = sorted(store.list_sessions(limit, ids), key=lambda s: s.last_active, reverse=True)
    if as_json:
        print(json.dumps([s.as_json() for s in summaries], indent=2))
    elif not summaries:
        if grep is not None:
            say(f"no session in {store.root} mentions {grep!r}")
        else:
            say(f"no sessions in {store.root}; start one with `netbox-chat`")
    else:
        out().print(render.sessions_table(summaries))
        if (netbox := render.one_netbox(summaries)) is not None:
            say(netbox, "dim", soft_wrap=True)
        hidden = len(ids) - len(summaries)
        if hidden > 0:
            say(f"… {hidden} older session(s) not shown; `netbox-chat ls --all` lists them")
        if any(s.unanswered and not s.is_open for s in summaries):
            say(
                "sessions marked (never answered) were cut short in their first turn; "
                "`netbox-chat forget --unanswered` removes them"
            )


@app.command()
def forget(
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Session id, or a unique prefix of one.",
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
    sessions_dir: SessionsDir = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Delete a session for good (its .sqlite, -wal and -shm files, or its rows)."""
    store = open_store(settings_from(sessions_dir, store=store_option, profile=profile))
    if unanswered == (thread is not None):
        raise typer.BadParameter("give a session id or --unanswered (one of the two)")
    if unanswered:
        _forget_unanswered(store)
        return
    assert thread is not None
    session_id = store.resolve(thread)
    summary = store.summarize(session_id)
    if not yes:
        title = summary.title or summary.unreadable or "(no question yet)"
        if not typer.confirm(f"Forget session {session_id} ({title})?", default=False):
            say("kept")
            raise typer.Exit(int(ExitStatus.USER_ERROR))
    store.forget(session_id)
    say(f"forgot session {session_id}", stdout=True)


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
    say(f"forgot {len(forgotten)} session(s) never answered: {' '.join(forgotten)}", stdout=True)


@app.command("config")
def config_command(
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Print every setting as resolved here and where it came from (flag,
    environment, profile, config file, default). The token shows only as set
    or missing; a token_command is run to check it works."""
    from netbox_chat import render

    settings = settings_from(
        sessions_dir,
        ollama_url,
        model,
        netbox_url,
        store=store_option,
        profile=profile,
        need_token=True,
    )
    open_store(settings)  # a store URL libpq cannot use is refused as by every command
    out().print(render.settings_table(settings), soft_wrap=True)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            help="Continue this session instead of a new one.",
            autocompletion=complete_session_id,
        ),
    ] = None,
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
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    think: Think = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Run one turn without the REPL, print the answer and exit (scripts, cron).

    Ctrl-C or SIGTERM cancels the turn, rolls it back and exits 130. A new
    session whose turn ends without an answer is not kept.
    """
    import asyncio

    from netbox_chat.runtime import CancelOnSignals
    from netbox_chat.streamjson import JsonLines

    flags = {
        "ollama_url": ollama_url,
        "model": model,
        "netbox_url": netbox_url,
        "think": think,
        "store": store_option,
    }
    lines = JsonLines(sys.stdout) if stream_json else None
    # Guarded from the first line: a signal before the turn starts stops it
    # from starting (exit 130), and once the outcome is recorded none can
    # change the exit status any more (see CancelOnSignals.settle).
    with CancelOnSignals() as signals:
        settings = settings_from(
            sessions_dir,
            ollama_url,
            model,
            netbox_url,
            think,
            store=store_option,
            profile=profile,
            need_token=session is None,
        )
        store = open_store(settings)
        if session is not None:
            session_id = store.resolve(session)
            settings = settings_for_session(store, session_id, {**flags, "profile": profile})
            require_netbox(settings)
            opened: OpenSession = store.open(session_id)
        else:
            require_netbox(settings)
            opened = new_session(store, settings)
        with opened:
            try:
                result = asyncio.run(_ask_once(opened, settings, question, signals, lines))
            except UserFacingError as exc:
                from netbox_chat.turns import TurnOutcome

                stays = not (session is None and _discard(opened))
                # --json and --stream-json end with a result whatever happened.
                failed = TurnOutcome(0, "failed", error=str(exc))
                _print_result(
                    {**_result(opened, failed, started=False), "kept": stays}, lines, as_json
                )
                if not stays:
                    raise UserFacingError(
                        f"{exc}; nothing was kept", exit_status=exc.exit_status
                    ) from None
                raise
            result["kept"] = not (session is None and _discard(opened))
    _print_result(result, lines, as_json)
    if lines is None and not as_json and result["status"] == "done":
        if sys.stdout.isatty():
            from rich.markdown import Markdown

            out().print(Markdown(result["answer"]))
        else:
            print(result["answer"])
    if result["status"] != "done" and not (as_json or stream_json):
        what = "" if result["turn"] is None else f"turn {result['turn']} {result['status']}: "
        kept = "" if result["kept"] else "; nothing was kept"
        say(f"netbox-chat: {what}{result['error'] or 'rolled back'}{kept}", "red")
    if result["status"] == "cancelled":
        raise typer.Exit(int(ExitStatus.INTERRUPTED))
    if result["status"] != "done":
        raise typer.Exit(int(ExitStatus.USER_ERROR))


def _print_result(result: dict[str, Any], lines: JsonLines | None, as_json: bool) -> None:
    """The result object of `--stream-json` (its last line) or `--json`."""
    if lines is not None:
        lines.write({"type": "result", **result})
    elif as_json:
        print(json.dumps(result, indent=2))


def _discard(session: OpenSession) -> bool:
    """Remove a new session none of whose turns finished; False if it stays
    (it has an answer, or it cannot be removed, the connection to its store
    lost: then it is kept as it is, and `ls` marks it never answered)."""
    from netbox_chat.pgstore import database_errors

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
    signals: CancelOnSignals,
    lines: JsonLines | None = None,
) -> dict[str, Any]:
    import asyncio

    from netbox_chat import render
    from netbox_chat.runtime import build_runtime
    from netbox_chat.turns import TurnOutcome, ignore_events

    auth_warnings: list[str] = []
    try:
        # Built whole even if a signal comes meanwhile: the imports cannot be
        # interrupted, and asyncio.run would wait for the thread anyway.
        runtime = await asyncio.to_thread(
            build_runtime, session, settings, on_auth_failure=auth_warnings.append
        )
        try:
            outcome = None
            if runtime.thinking.note:
                say(f"netbox-chat: {runtime.thinking.note}", "dim")
            if signals.received is None:
                for report in runtime.conversation.recover_interrupted():
                    reason = f"turn {report.turn} was interrupted and "
                    render.print_rollback(err(), report, reason=reason)
                with contextlib.suppress(asyncio.CancelledError):  # cancelled before it began
                    sink = lines.event if lines is not None else ignore_events
                    outcome = await signals.run(runtime.conversation.run_turn(question, sink))
        finally:
            await runtime.aclose()
    finally:
        signals.settle()
    for warning in auth_warnings:
        say(warning, "bold red")
    started = outcome is not None
    if outcome is None:
        outcome = TurnOutcome(0, "cancelled", error=NOT_STARTED)
    elif outcome.rollback is not None and not outcome.rollback.verified:
        render.print_rollback(err(), outcome.rollback)
    if outcome.context.truncated and outcome.context.window:
        err().print(render.truncation_line(outcome.context.window))
    return _result(session, outcome, started=started)


def _result(session: OpenSession, outcome: TurnOutcome, *, started: bool) -> dict[str, Any]:
    """What `ask --json` prints for a turn (but `kept`, known only after it)."""
    from dataclasses import asdict

    return {
        "session": session.id,
        "turn": outcome.number if started else None,
        "status": outcome.status,
        "answer": outcome.answer,
        "thinking": outcome.thinking or None,
        "thinking_seconds": outcome.thinking_seconds,
        "tool_calls": [asdict(call) for call in outcome.tool_calls],
        "tokens": {"in": outcome.tokens_in, "out": outcome.tokens_out},
        "context": {
            "window": outcome.context.window,
            "prompt_tokens_max": outcome.context.prompt_tokens_max,
            "prompt_tokens_last": outcome.context.prompt_tokens_last,
            "truncated": outcome.context.truncated,
            "compactions": len(outcome.context.compactions),
        },
        "error": outcome.error,
    }


@app.command("export")
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
    sessions_dir: SessionsDir = None,
    store_option: StoreOption = None,
) -> None:
    """Print a session's transcript: questions, answers, tool calls, tokens per
    turn; cancelled, failed and rewound turns marked. Never writes the session."""
    from netbox_chat.export import export_session

    settings = settings_from(sessions_dir, store=store_option)
    fmt = fmt.lower()
    if fmt not in ("md", "json"):
        raise UserFacingError(f"unknown format {fmt!r}: use md or json")
    store = open_store(settings)
    text = export_session(
        store,
        store.resolve(thread),
        "json" if fmt == "json" else "md",
        secrets=[settings.netbox_token],
        thinking=thinking,
    )
    if output is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserFacingError(f"cannot write {output}: {exc.strerror}") from None
    say(f"wrote {output}")


@app.command()
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
    sessions_dir: SessionsDir = None,
    store_option: StoreOption = None,
) -> None:
    """Copy a session, with its memory and its ledger, to another store (a
    folder to the team's database, or back). It keeps its id; the original
    stays where it is."""
    from netbox_chat.copying import copy_session

    source = open_store(settings_from(sessions_dir, store=store_option))
    target = open_store(resolve_target(to))
    session_id = source.resolve(thread)
    count = copy_session(source, session_id, target)
    say(f"copied session {session_id} ({count} checkpoint(s)) to {target.root}", stdout=True)


def resolve_target(to: str) -> Settings:
    """The settings naming `copy --to`'s store: that value alone decides."""
    try:
        return resolve_settings(store=to, env={})
    except ValueError as exc:
        raise UserFacingError(str(exc)) from None


@app.command()
def doctor(
    init_store: Annotated[
        bool,
        typer.Option(
            "--init-store",
            help="Create or migrate the schema of a postgresql:// store, then exit.",
        ),
    ] = False,
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    profile: Profile = None,
    store_option: StoreOption = None,
) -> None:
    """Check the setup: Ollama, the model and its tool support, NetBox, the
    token, the NetBox version, the session store. One line each; exits 1 if
    anything is wrong. With --init-store, create the database store's schema."""
    from netbox_chat.doctor import init_database_store, run_checks

    if init_store:
        settings = settings_from(sessions_dir, store=store_option, profile=profile)
        if settings.store is None:
            raise UserFacingError(
                "--init-store is for a postgresql:// store (--store / NETBOX_CHAT_STORE); "
                "a sessions folder is created when it is first used"
            )
        say("✓ " + init_database_store(settings.store), "green", stdout=True)
        return
    settings = settings_from(
        sessions_dir,
        ollama_url,
        model,
        netbox_url,
        store=store_option,
        profile=profile,
        need_token=True,
    )
    checks = run_checks(settings)
    for check in checks:
        style = "green" if check.ok else "red"
        say(check.line(), style, stdout=True)
    if not all(check.ok for check in checks):
        raise typer.Exit(int(ExitStatus.USER_ERROR))


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
    try:
        app()
    finally:
        gc.freeze()
