"""Shell completion of session ids, answered before the CLI is imported.

Every Tab press starts a new `netbox-chat` process. Typer answers it only
after importing itself and the whole CLI and building the app (about 100 ms,
most of it imports), and for zsh and fish it renders each title as Rich
markup, which costs 40 ms more and eats a question's `[eth0]`. A session id is
the one word whose completion reads the sessions folder, so the entry point
(main.py) answers that word itself through `answer_session_id`, in what
Typer's completion scripts read (for zsh, the `zsh_answer` that the app's
Typer class gives too: Typer's own let zsh run a title), from this module's
light imports (the config and the ledger reader).
The chat's options that say where the sessions are count before the
command as after it, as the CLI reads them. Anything else (another of the
chat's options before a command, which the CLI gives the command or refuses
by the command), or anything it cannot read with certainty, goes to Typer.

The chat's options are read from their one declaration (options.py);
`SESSION_ID_COMMANDS` and the commands' own options repeat what the Typer
app declares, and tests/test_habits.py compares them with the app, so they
cannot drift apart.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from netbox_chat.cli.options import WHERE, option_words
from netbox_chat.config import ConfigError, resolve_settings
from netbox_chat.errors import UserFacingError
from netbox_chat.store.ids import normalize_session_id
from netbox_chat.store.sessions import SessionStore
from netbox_chat.visible import visible_line

COMPLETE_VAR = "_NETBOX_CHAT_COMPLETE"

# Titles are offered only for this many matching ids: a title costs opening
# the session file, and a longer list is read by nobody.
COMPLETE_TITLES = 40

# Commands whose first argument is a session id, and the options whose value is one.
SESSION_ID_COMMANDS = frozenset({"resume", "export", "forget", "copy"})
SESSION_ID_OPTIONS = frozenset({"--session", "-s"})

_CHAT_WORDS = tuple(option_words())

# Every option of the app that takes a value, and every flag: a word that is
# neither makes the fast path step aside (Typer knows better).
VALUE_OPTIONS = frozenset(
    {
        *(word for _, word, flag in _CHAT_WORDS if not flag),
        "--at",
        "--format",
        "-f",
        "--output",
        "-o",
        "--to",
        "--grep",
        "-q",
        "--older-than",
        # eval's
        "--seed",
        "--per-template",
        "--repeat",
        "--parallel",
        "--questions",
        "--judge",
        "--resume",
        "--runs-dir",
        "--show",
        "--limit",
        # mcp's
        "--host",
        "--port",
        *SESSION_ID_OPTIONS,
    }
)
FLAG_OPTIONS = frozenset(
    {
        *(word for _, word, flag in _CHAT_WORDS if flag),
        "--json",
        "--stream-json",
        "--thinking",
        "--tool-results",
        "--yes",
        "-y",
        "--unanswered",
        "--all",
        "-a",
        "--init-store",
        "--latest",
        "--http",
        "--continue",
        "-c",
        "--ephemeral",
        "--version",
        "--conversation",
        "--list",
        "--install-completion",
        "--show-completion",
        "--help",
        "-h",
    }
)

# The options on the line that decide which folder the ids come from.
_LOCATION_OPTIONS = {word: name for name, word, _ in _CHAT_WORDS if name in WHERE}
_CHAT_NAMES = {word: name for name, word, _ in _CHAT_WORDS}


@dataclass(frozen=True)
class SessionIdWord:
    """The word being completed is a session id (or a prefix of one)."""

    incomplete: str
    sessions_dir: str | None = None
    store: str | None = None
    profile: str | None = None


def session_id_word(words: Sequence[str], incomplete: str) -> SessionIdWord | None:
    """Whether `incomplete`, typed after `words` (the program name excluded),
    is a session id; None when it is not, or when the line holds a word this
    reader does not know."""
    if incomplete.startswith("-"):
        return None
    command: str | None = None
    positionals = 0
    location: dict[str, str] = {}
    pending: str | None = None  # an option still waiting for its value
    for word in words:
        if pending is not None:
            if pending in _LOCATION_OPTIONS:
                location[_LOCATION_OPTIONS[pending]] = word
            pending = None
        elif word.startswith("-"):
            name, equals, value = word.partition("=")
            if name in VALUE_OPTIONS:
                if not equals:
                    pending = name
                elif name in _LOCATION_OPTIONS:
                    location[_LOCATION_OPTIONS[name]] = value
            elif name not in FLAG_OPTIONS or equals:
                return None
        elif command is None:
            command = word
        else:
            positionals += 1
    wanted = (
        pending in SESSION_ID_OPTIONS
        if pending is not None
        else command in SESSION_ID_COMMANDS and positionals == 0
    )
    return SessionIdWord(incomplete, **location) if wanted else None


def read_by_typer(words: Sequence[str]) -> bool:
    """Whether the line puts before a command one of the chat's options that
    says more than where the sessions are: the CLI hands it to the command if
    the command takes it and refuses it (exit 2) if not (`app.options_before`),
    which Typer's own completion knows per command; this reader steps aside.
    The options that say where the sessions are (`WHERE`) are taken by every
    command with a session id, and read here, before the command or after it.
    Before a question (a first word with a space) the options are `ask`'s, as
    `app.Commands` reads the line, and this reader goes on."""
    at = 0
    names: list[str] = []
    while at < len(words) and words[at].startswith("-") and words[at] != "--":
        name, equals, _ = words[at].partition("=")
        glued = not name.startswith("--") and len(name) > 2  # -mqwen3:8b
        names.append(name[:2] if glued else name)
        alone = name not in VALUE_OPTIONS or bool(equals) or glued
        at += 1 if alone else 2
    if at == 0 or at >= len(words) or len(words[at].split()) > 1:
        return False  # no option before, no command yet, or a question
    return any(name in _CHAT_NAMES and _CHAT_NAMES[name] not in WHERE for name in names)


def session_id_choices(
    word: SessionIdWord, *, with_titles: bool = True
) -> list[tuple[str, str | None]]:
    """The matching ids of the folder the line (or the environment, or the
    config file) names, with their titles when few match. A database store is
    not opened for a Tab press: it offers nothing."""
    try:
        settings = resolve_settings(
            sessions_dir=word.sessions_dir, store=word.store, profile=word.profile
        )
        prefix = normalize_session_id(word.incomplete) if word.incomplete else ""
    except (ConfigError, UserFacingError):
        return []
    if settings.store is not None:
        return []
    store = SessionStore(settings.sessions_dir)
    ids = [sid for sid in store.session_ids() if sid.startswith(prefix)]
    if not with_titles or len(ids) > COMPLETE_TITLES:
        return [(sid, None) for sid in ids]
    # A title is anyone's text (a copied session, the team's store): shown on
    # one line, its control characters as escapes, whatever the shell.
    return [(sid, visible_line(store.summarize(sid).title) or "(no question yet)") for sid in ids]


# The characters a zsh answer carries as themselves: none of them means
# anything to zsh, inside `$'...'` or out of it, whatever its options.
_ZSH_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
# The array holding what the listing shows, local to Typer's completion function.
_ZSH_SHOWN = "_netbox_chat_shown"


def zsh_word(text: str) -> str:
    """`text` as one zsh word that evaluates to exactly `text`: every
    character but a few plain ones written as the `\\xHH` escapes of its
    UTF-8 bytes inside `$'...'`. Nothing of it is code, whichever of the two
    evaluations a zsh answer goes through (see `zsh_answer`)."""
    return (
        "$'"
        + "".join(
            char
            if char in _ZSH_PLAIN
            else "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "replace"))
            for char in text
        )
        + "'"
    )


def zsh_answer(choices: Sequence[tuple[str, str | None]]) -> str:
    """The zsh code Typer's completion function runs (`eval $(netbox-chat)`):
    the choices handed to `compadd` as data, each help only in the listing.

    Typer answers `_arguments '*: :(("value":"help" ...))'`, and `_arguments`
    evaluates the text between the double parentheses once more; no escaping
    survives both evaluations for every character (a title's `\\"` closed the
    quotes and ran a `<(...)`: issue 21, item 3). Here each string is one
    `zsh_word`, so the only code in the answer is ours, and it holds no
    character that word splitting or globbing of the command substitution
    could change."""
    if not choices:
        return "_files"  # as Typer answers when nothing matches
    values = " ".join(zsh_word(value) for value, _ in choices)
    if not any(help_text for _, help_text in choices):
        return f"compadd -- {values}"
    shown = " ".join(
        zsh_word(f"{value}  -- {help_text}" if help_text else value) for value, help_text in choices
    )
    return (
        f"local {_ZSH_SHOWN}; set -A {_ZSH_SHOWN} {shown}; compadd -l -d {_ZSH_SHOWN} -- {values}"
    )


_WHITESPACE = re.compile(r"\s")


def fish_choice(value: str, help_text: str | None) -> str:
    """One choice as Typer's fish script reads it: a tab or newline in the
    help would end fish's field."""
    return f"{value}\t{_WHITESPACE.sub(' ', help_text)}" if help_text else value


def _typed_words(line: str) -> tuple[list[str], str]:
    """zsh and fish send the whole line: the words before the one being typed,
    and that word ("" after a space)."""
    words = _split(line)[1:]
    if words and not line.endswith(" "):
        return words[:-1], words[-1]
    return words, ""


def _split(line: str) -> list[str]:
    # As click's split_arg_string (Typer's copy): an unclosed quote still splits.
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        words.extend(lexer)
    except ValueError:
        words.append(lexer.token)
    return words


@dataclass(frozen=True)
class Answer:
    """What the shell reads: a line of output (None: nothing at all), and the
    exit status (fish asks "are there completions?" by status alone)."""

    output: str | None
    status: int = 0


def answer_session_id(environ: Mapping[str, str]) -> Answer | None:
    """The shell's answer when the word being completed is a session id, in
    the format Typer's completion scripts read; None to let Typer answer."""
    shell = environ.get(COMPLETE_VAR, "")
    if shell == "complete_bash":
        try:
            words = _split(environ["COMP_WORDS"])
            cword = int(environ["COMP_CWORD"])
        except (KeyError, ValueError):
            return None
        before, incomplete = words[1:cword], words[cword] if cword < len(words) else ""
    elif shell in ("complete_zsh", "complete_fish"):
        before, incomplete = _typed_words(environ.get("_TYPER_COMPLETE_ARGS", ""))
    else:
        return None
    if read_by_typer(before):
        return None
    word = session_id_word(before, incomplete)
    if word is None:
        return None
    choices = session_id_choices(word, with_titles=shell != "complete_bash")
    if shell == "complete_bash":
        return Answer("\n".join(sid for sid, _ in choices))
    if shell == "complete_zsh":
        return Answer(zsh_answer(choices))
    action = environ.get("_TYPER_COMPLETE_FISH_ACTION", "")
    if action == "is-args":
        return Answer(None, 0 if choices else 1)
    if action != "get-args":
        return Answer("")
    return Answer("\n".join(fish_choice(sid, title) for sid, title in choices))
