"""The `netbox-chat` command: Typer commands, arguments, exit statuses.

Thin on purpose: each command resolves settings, opens the session store and
hands over to the room that does the work. Heavy modules (LangChain through
`runtime`, prompt-toolkit through `repl`, and asyncio, 25 ms on its own) are
imported inside the commands that need them, so `ls` and `forget` start as
fast as Python does.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from netbox_chat import render
from netbox_chat.config import Settings, resolve_settings
from netbox_chat.errors import ExitStatus, UserFacingError
from netbox_chat.sessions import AmbiguousSession
from netbox_chat.stores import OpenSession, open_store

app = typer.Typer(
    name="netbox-chat",
    help=(
        "Ask your NetBox questions in plain words, answered by a local Ollama model.\n\n"
        "Run without a command to start a new chat session. Sessions live in "
        "NETBOX_CHAT_SESSIONS (default ./sessions), one SQLite file each.\n\n"
        "Exit codes: 0 ok, 1 user error, 2 usage, 3 session store cannot be opened "
        "or written, 4 session in use by another netbox-chat, 130 `ask` interrupted."
    ),
    no_args_is_help=False,
    add_completion=False,
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
            "(needs pip install 'netbox-chat[postgres]'). Overrides --sessions-dir."
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
        help="NetBox base URL; the API token is read from NETBOX_TOKEN only.",
        show_default=False,
    ),
]
ThreadArg = Annotated[str, typer.Argument(help="Session id, or a unique prefix of one.")]

# `ls` shows this many of the newest sessions unless --all: a table of a
# thousand rows costs most of a second to draw and nobody reads it.
LS_ROWS = 20

# No `:name:` emoji codes: we never write them, questions and answers must
# print as written, and rich's emoji table costs every command 3 ms to load.
stdout = Console(highlight=False, emoji=False)
stderr = Console(stderr=True, highlight=False, emoji=False)


def fail(error: UserFacingError) -> typer.Exit:
    """Print a one-line error (plus candidates when ambiguous) and pick the exit code.

    The message often quotes what the user typed, so it is printed as text,
    never parsed as rich markup (`forget '[/x]'` must not crash)."""
    stderr.print(Text(f"netbox-chat: {error}", style="red"), soft_wrap=True)
    if isinstance(error, AmbiguousSession):
        stderr.print("candidates: " + " ".join(error.candidates), soft_wrap=True)
    return typer.Exit(int(error.exit_status))


def settings_from(
    sessions_dir: Path | None = None,
    ollama_url: str | None = None,
    model: str | None = None,
    netbox_url: str | None = None,
    store: str | None = None,
) -> Settings:
    try:
        return resolve_settings(
            store=store,
            sessions_dir=sessions_dir,
            ollama_url=ollama_url,
            model=model,
            netbox_url=netbox_url,
        )
    except ValueError as exc:
        raise fail(UserFacingError(str(exc))) from None


def require_netbox(settings: Settings) -> None:
    """Refuse before any session is created: without NetBox every answer fails."""
    if settings.netbox_url is None:
        raise fail(
            UserFacingError(
                "NetBox is not configured: set NETBOX_URL and NETBOX_TOKEN "
                "(or pass --netbox-url); `netbox-chat doctor` checks the setup"
            )
        )


def _chat(
    settings: Settings, thread: str | None, *, resume: bool, rewind_to: int | None = None
) -> None:
    import asyncio

    from netbox_chat.repl import run_chat

    require_netbox(settings)
    store = open_store(settings)
    try:
        if resume:
            session_id = store.resolve(thread) if thread is not None else store.most_recent()
            session: OpenSession = store.open(session_id)
        else:
            session = store.create(model=settings.model)
    except UserFacingError as exc:
        raise fail(exc) from None
    with session:
        try:
            asyncio.run(run_chat(session, settings, stdout, resumed=resume, rewind_to=rewind_to))
        except UserFacingError as exc:
            raise fail(exc) from None


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    store: StoreOption = None,
) -> None:
    """Start a new chat session when no command is given."""
    if ctx.invoked_subcommand is None:
        settings = settings_from(sessions_dir, ollama_url, model, netbox_url, store)
        _chat(settings, None, resume=False)


@app.command()
def resume(
    thread: Annotated[
        str | None,
        typer.Argument(help="Session id or unique prefix (default: the most recent session)."),
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
    store: StoreOption = None,
) -> None:
    """Reopen a session and continue it, with its memory.

    Prints what was restored (turns, messages, the last exchange). A turn that
    a crash left half-done is rolled back first. With --at N the conversation
    goes back to just after turn N (linearly: later turns are set aside, never
    replayed).
    """
    settings = settings_from(sessions_dir, ollama_url, model, netbox_url, store)
    _chat(settings, thread, resume=True, rewind_to=at)


@app.command("ls")
def list_sessions(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (every session) instead of a table.")
    ] = False,
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help=f"Show every session, not the newest {LS_ROWS}.")
    ] = False,
    sessions_dir: SessionsDir = None,
    store_option: StoreOption = None,
) -> None:
    """List sessions, most recently active first. Never writes anything."""
    store = open_store(settings_from(sessions_dir, store=store_option))
    limit = None if as_json or show_all else LS_ROWS
    try:
        listed = store.list_sessions(limit)
        hidden = 0 if limit is None else len(store.session_ids()) - len(listed)
    except UserFacingError as exc:
        raise fail(exc) from None
    summaries = sorted(listed, key=lambda s: s.last_active, reverse=True)
    if as_json:
        print(json.dumps([s.as_json() for s in summaries], indent=2))
    elif not summaries:
        stderr.print(f"no sessions in {store.root}; start one with `netbox-chat`")
    else:
        stdout.print(render.sessions_table(summaries))
        if hidden > 0:
            stderr.print(
                f"… {hidden} older session(s) not shown; `netbox-chat ls --all` lists them"
            )


@app.command()
def forget(
    thread: ThreadArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    sessions_dir: SessionsDir = None,
    store_option: StoreOption = None,
) -> None:
    """Delete a session for good (its .sqlite, -wal and -shm files, or its rows)."""
    store = open_store(settings_from(sessions_dir, store=store_option))
    try:
        session_id = store.resolve(thread)
        summary = store.summarize(session_id)
        if not yes:
            title = summary.title or summary.unreadable or "(no question yet)"
            if not typer.confirm(f"Forget session {session_id} ({title})?", default=False):
                stderr.print("kept")
                raise typer.Exit(int(ExitStatus.USER_ERROR))
        store.forget(session_id)
    except UserFacingError as exc:
        raise fail(exc) from None
    stdout.print(f"forgot session {session_id}")


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Continue this session instead of a new one."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print a JSON object: session, answer, tool calls, tokens, status."
        ),
    ] = False,
    sessions_dir: SessionsDir = None,
    ollama_url: OllamaUrl = None,
    model: Model = None,
    netbox_url: NetboxUrl = None,
    store_option: StoreOption = None,
) -> None:
    """Run one turn without the REPL, print the answer and exit (scripts, cron).

    Ctrl-C or SIGTERM cancels the turn, rolls it back and exits 130.
    """
    import asyncio

    settings = settings_from(sessions_dir, ollama_url, model, netbox_url, store_option)
    require_netbox(settings)
    store = open_store(settings)
    try:
        opened = (
            store.open(store.resolve(session))
            if session is not None
            else store.create(model=settings.model)
        )
    except UserFacingError as exc:
        raise fail(exc) from None
    with opened:
        try:
            result = asyncio.run(_ask_once(opened, settings, question))
        except UserFacingError as exc:
            raise fail(exc) from None
    if as_json:
        print(json.dumps(result, indent=2))
    elif result["status"] == "done":
        if sys.stdout.isatty():
            from rich.markdown import Markdown

            stdout.print(Markdown(result["answer"]))
        else:
            print(result["answer"])
    if result["status"] != "done" and not as_json:
        stderr.print(
            f"[red]netbox-chat: turn {result['turn']} {result['status']}: "
            f"{result['error'] or 'rolled back'}[/red]",
            soft_wrap=True,
        )
    if result["status"] == "cancelled":
        raise typer.Exit(int(ExitStatus.INTERRUPTED))
    if result["status"] != "done":
        raise typer.Exit(int(ExitStatus.USER_ERROR))


async def _ask_once(session: OpenSession, settings: Settings, question: str) -> dict[str, Any]:
    import asyncio
    from dataclasses import asdict

    from netbox_chat.runtime import CancelOnSignals, build_runtime

    auth_warnings: list[str] = []
    runtime = await asyncio.to_thread(
        build_runtime, session, settings, on_auth_failure=auth_warnings.append
    )
    try:
        for report in runtime.conversation.recover_interrupted():
            render.print_rollback(stderr, report, reason=f"turn {report.turn} was interrupted and ")
        task = asyncio.create_task(runtime.conversation.run_turn(question))
        with CancelOnSignals(task):
            outcome = await task
    finally:
        await runtime.aclose()
    for warning in auth_warnings:
        stderr.print(f"[bold red]{warning}[/bold red]")
    if outcome.rollback is not None and not outcome.rollback.verified:
        render.print_rollback(stderr, outcome.rollback)
    return {
        "session": session.id,
        "turn": outcome.number,
        "status": outcome.status,
        "answer": outcome.answer,
        "tool_calls": [asdict(call) for call in outcome.tool_calls],
        "tokens": {"in": outcome.tokens_in, "out": outcome.tokens_out},
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
    sessions_dir: SessionsDir = None,
    store_option: StoreOption = None,
) -> None:
    """Print a session's transcript: questions, answers, tool calls, tokens per
    turn; cancelled, failed and rewound turns marked. Never writes the session."""
    from netbox_chat.export import export_session

    settings = settings_from(sessions_dir, store=store_option)
    fmt = fmt.lower()
    if fmt not in ("md", "json"):
        raise fail(UserFacingError(f"unknown format {fmt!r}: use md or json"))
    store = open_store(settings)
    try:
        text = export_session(
            store,
            store.resolve(thread),
            "json" if fmt == "json" else "md",
            secrets=[settings.netbox_token],
        )
    except UserFacingError as exc:
        raise fail(exc) from None
    if output is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise fail(UserFacingError(f"cannot write {output}: {exc.strerror}")) from None
    stderr.print(f"wrote {output}", soft_wrap=True)


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
    target = open_store(settings_from(store=to))
    try:
        session_id = source.resolve(thread)
        count = copy_session(source, session_id, target)
    except UserFacingError as exc:
        raise fail(exc) from None
    stdout.print(
        Text(f"copied session {session_id} ({count} checkpoint(s)) to {target.root}"),
        soft_wrap=True,
    )


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
    store_option: StoreOption = None,
) -> None:
    """Check the setup: Ollama, the model and its tool support, NetBox, the
    token, the NetBox version, the session store. One line each; exits 1 if
    anything is wrong. With --init-store, create the database store's schema."""
    from netbox_chat.doctor import init_database_store, run_checks

    settings = settings_from(sessions_dir, ollama_url, model, netbox_url, store_option)
    if init_store:
        if settings.store_url is None:
            raise fail(
                UserFacingError(
                    "--init-store is for a postgresql:// store (--store / NETBOX_CHAT_STORE); "
                    "a sessions folder is created when it is first used"
                )
            )
        try:
            line = "✓ " + init_database_store(settings.store_url)
            stdout.print(Text(line, style="green"), soft_wrap=True)
        except UserFacingError as exc:
            raise fail(exc) from None
        return
    checks = run_checks(settings)
    for check in checks:
        style = "green" if check.ok else "red"
        stdout.print(Text(check.line(), style=style), soft_wrap=True)
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
