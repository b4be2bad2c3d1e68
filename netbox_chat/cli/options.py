"""The chat's options (model, server, NetBox, store, …), declared once for every command.

`ChatOptions` is the declaration: each field is one option, its flags, help
and environment variable in the field's metadata. A command names the ones
it takes with `@chat_options(...)`, which adds them to its signature for
Typer to read, in this class's order (so every command's --help lists them
alike), and hands the command one `ChatOptions` of what was typed. This is
how `llm` shares its options between commands (`tool_options` in llm/cli.py,
https://github.com/simonw/llm: a decorator adding click options), written for
Typer, which reads options from a function's signature.

Light on purpose: the completion fast path (completion.py) reads the flags
from here on every Tab press, so Typer is imported only by the functions
that run inside the CLI.
"""

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, TypeVar

from netbox_chat.config import PROFILE_ENV
from netbox_chat.errors import ExitStatus, UserFacingError

Command = TypeVar("Command", bound=Callable[..., Any])


def option(*flags: str, help: str, envvar: str | None = None, shows_value: bool = False) -> Any:
    """One chat option's declaration: the field is None unless typed. With
    `envvar`, --help names the variable and shows no default, because a value
    left unset is resolved later (the environment, the config file's profile,
    then the default). `shows_value`: --help ends the text with the value in
    force and where it came from (`help_in_force`), never a default the
    config file replaces."""
    metadata = {"flags": flags, "help": help, "envvar": envvar, "shows_value": shows_value}
    return field(default=None, metadata=metadata)


@dataclass(frozen=True)
class ChatOptions:
    """The chat's options as typed on the command line; None: not typed.

    A value Typer took from the environment is None here too: `resolve_settings`
    reads the environment itself, so that `netbox-chat config` names the right
    origin and a profile from NETBOX_CHAT_PROFILE does not count as typed."""

    sessions_dir: Path | None = option(
        "--sessions-dir",
        envvar="NETBOX_CHAT_SESSIONS",
        help="Folder of session files (unless set: the sessions/ folder of the checkout "
        "installed with pip install -e, else $XDG_DATA_HOME/netbox-chat/sessions).",
        shows_value=True,
    )
    ollama_url: str | None = option(
        "--ollama-url", envvar="OLLAMA_HOST", help="Ollama server.", shows_value=True
    )
    provider: str | None = option(
        "--provider",
        envvar="NETBOX_CHAT_PROVIDER",
        help="Model server: ollama, or openai for any OpenAI-compatible server.",
        shows_value=True,
    )
    base_url: str | None = option(
        "--base-url",
        envvar="NETBOX_CHAT_BASE_URL",
        help="The OpenAI-compatible server, ending in /v1 (with --provider openai).",
        shows_value=True,
    )
    model: str | None = option(
        "--model",
        "-m",
        envvar="NETBOX_CHAT_MODEL",
        help="The model (Ollama's name, or the server's /v1/models id); it must call tools.",
        shows_value=True,
    )
    netbox_url: str | None = option(
        "--netbox-url",
        envvar="NETBOX_URL",
        help="NetBox base URL; the token comes from NETBOX_TOKEN or the profile, never a flag.",
        shows_value=True,
    )
    # No envvar: NETBOX_CHAT_THINK takes more words than a flag's on and off.
    think: bool | None = option(
        "--think/--no-think",
        help=(
            "Let the model think (shown dimmed) or ask it not to. NETBOX_CHAT_THINK takes "
            "on, off, low, medium or high (default: the model's own)."
        ),
    )
    grounding: str | None = option(
        "--grounding",
        envvar="NETBOX_CHAT_GROUNDING",
        help=(
            "Claims of an answer that NetBox's replies do not hold: mark them, or "
            "retry: ask the model once, within the turn, to correct or drop them."
        ),
        shows_value=True,
    )
    profile: str | None = option(
        "--profile",
        "-p",
        envvar=PROFILE_ENV,
        help="A profile of the config file: its NetBox, token, model… (see `netbox-chat config`).",
    )
    store: str | None = option(
        "--store",
        envvar="NETBOX_CHAT_STORE",
        help=(
            "Where sessions live: a folder, or a postgresql:// URL for a team's database "
            "(needs the package's postgres extra)."
        ),
    )
    deadline: float | None = option(
        "--deadline",
        envvar="NETBOX_CHAT_DEADLINE",
        help=(
            "Seconds the command may take in all (ask; each eval question; doctor), "
            "whatever the model server keeps sending."
        ),
        shows_value=True,
    )

    def where(self) -> "ChatOptions":
        """Only the options that say where the sessions are: enough to open
        the store before a session's own settings can be resolved."""
        return ChatOptions(sessions_dir=self.sessions_dir, store=self.store, profile=self.profile)

    def settings_flags(self) -> dict[str, Any]:
        """The options as `resolve_settings`' flags (all but the profile,
        which is its own argument); --think is the setting's on or off."""
        flags = {name: getattr(self, name) for name in OPTIONS if name != "profile"}
        flags["think"] = None if self.think is None else ("on" if self.think else "off")
        return flags


OPTIONS: dict[str, Field[Any]] = {each.name: each for each in fields(ChatOptions)}
"""Every chat option by name, in the order --help lists them."""


# The groups commands take: where the sessions are, which model server and
# NetBox, how a turn runs.
STORE = ("sessions_dir", "store")
WHERE = (*STORE, "profile")
SERVER = ("ollama_url", "provider", "base_url", "model", "netbox_url")
TURN = ("think", "grounding")
CHAT = (*WHERE, *SERVER, *TURN)
"""What a chat takes: the REPL's, `resume`'s and `ask`'s."""


def option_words() -> Iterator[tuple[str, str, bool]]:
    """Each word that names a chat option on a command line: the option's
    name, the word, and whether it is a flag (takes no value). What the
    completion fast path reads a line with."""
    for name, each in OPTIONS.items():
        for declared in each.metadata["flags"]:
            for word in declared.split("/"):
                yield name, word, each.type == bool | None


def help_in_force(name: str, profile: str | None = None) -> str:
    """The option's help as --help shows it: for an option that `shows_value`,
    ended with the value in force and where it came from (`(now
    http://10.0.0.5:11434, from ollama_url in profile lab of
    ~/.config/netbox-chat/config.toml)`, `(default qwen3:8b)`), resolved as the
    command would with `profile`; a configuration that cannot be read sends
    the reader to `netbox-chat config`, which says why."""
    from netbox_chat.config import resolve_settings, source_of, without_userinfo

    meta = OPTIONS[name].metadata
    text = str(meta["help"])
    if not meta["shows_value"]:
        return text
    try:
        settings = resolve_settings(profile=profile)
    except ValueError:
        return f"{text.rstrip('.')} (the value in force: see `netbox-chat config`)."
    value = getattr(settings, name)
    if value is None:
        return f"{text.rstrip('.')} (not set)."
    shown = f"{value:g}" if isinstance(value, float) else without_userinfo(str(value), "***@")
    if settings.origins.get(name, "default").startswith("default"):
        return f"{text.rstrip('.')} (default {shown})."
    return f"{text.rstrip('.')} (now {shown}, from {source_of(settings, name)})."


@functools.cache
def typer_annotation(name: str) -> Any:
    """The option as Typer reads it from a signature. Made once and shared by
    every command, as a module-level `Annotated` alias would be: Typer copies
    it before use."""
    import typer

    each = OPTIONS[name]
    meta = each.metadata
    info = typer.Option(
        *meta["flags"],
        envvar=meta["envvar"],
        help=meta["help"],
        show_default=False,
    )
    return Annotated[each.type, info]


def chat_options(*names: str) -> Callable[[Command], Command]:
    """Give the decorated command the chat options `names`: Typer sees them
    as parameters after the command's own (in `ChatOptions`' order, whatever
    the order of `names`), and the command gets them as one keyword argument,
    `chat`. An unknown name, or one the command declares itself, is a
    TypeError when the CLI is imported, not when the command runs."""
    unknown = set(names) - set(OPTIONS)
    if unknown:
        raise TypeError(f"not chat options: {', '.join(sorted(unknown))}")
    chosen = [name for name in OPTIONS if name in names]

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command)
        own = [param for name, param in signature.parameters.items() if name != "chat"]
        if clash := {param.name for param in own} & set(chosen):
            raise TypeError(f"{command.__name__} declares chat options itself: {clash}")
        added = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=typer_annotation(name),
            )
            for name in chosen
        ]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            typed = typed_on_command_line({name: kwargs.pop(name) for name in chosen})
            return command(*args, chat=ChatOptions(**with_options_before(typed)), **kwargs)

        parameters = [*own, *added]
        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        # What Typer's get_type_hints reads: the new parameters, not `chat`.
        run.__annotations__ = {param.name: param.annotation for param in parameters}
        return run  # type: ignore[return-value]

    return decorate


BEFORE = "netbox_chat.options_before"
"""Where the app's callback leaves the chat's options typed before the
command (`netbox-chat --profile lab ask …`), in its context's meta, for the
command to take as its own (`with_options_before`)."""


def with_options_before(typed: dict[str, Any]) -> dict[str, Any]:
    """`typed` (a command's chat options) with those typed before the command
    added: they mean the same there as after it, as `git -C DIR status` and
    `llm -m MODEL` read them. The app's callback has refused any the command
    does not take. The same option typed on both sides must say the same."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    parent = None if ctx is None else ctx.parent
    before: ChatOptions | None = None if parent is None else parent.meta.get(BEFORE)
    if before is None:
        return typed
    merged = dict(typed)
    for name in typed:
        value = getattr(before, name)
        if value is None:
            continue
        if typed[name] is not None and typed[name] != value:
            flag = OPTIONS[name].metadata["flags"][0].split("/")[0]
            raise UserFacingError(
                f"{flag} typed twice, {value} before the command and {typed[name]} after "
                "it: give it once",
                exit_status=ExitStatus.USAGE,
            )
        merged[name] = value
    return merged


def typed_on_command_line(values: dict[str, Any]) -> dict[str, Any]:
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
