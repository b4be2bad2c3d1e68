"""Settings from flags, the environment, a session's memory, a config file's
profile and its top-level defaults, then built-in defaults, in that order.

The settings are a table (`SETTINGS`): one entry per setting names its
environment variable, its flag, its config key, how to read it and its
default, so `netbox-chat config` can say where each value came from and a new
setting gets file, profile and environment support by adding one entry.

Kept free of I/O beyond reading the environment and the config file, so every
command (even `ls`) can resolve settings without paying for imports or network
calls. A profile's `token_command` is only described here; running it is
`credentials.py`'s job, for the commands that talk to NetBox.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbox_chat.owned import user_name

LEVELS = ("low", "medium", "high")
THINK_SETTINGS = ("on", "off", *LEVELS)
"""What NETBOX_CHAT_THINK and `/think` take; no setting means the model's own default
(thinking.py plans the request from it)."""

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen3:8b"
DEFAULT_NUM_CTX = 16384
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_DEADLINE = 1800.0
"""Seconds `ask`, each `eval` question and `doctor` may take in all: generous
(a cold 82-108 s load and a 167 s prefill were recorded, and a turn makes
several requests), so it ends only a wait that would otherwise never end."""
DEFAULT_NETBOX_TIMEOUT = 15.0
DEFAULT_NETBOX_MAX_BYTES = 32 << 20
"""The most of one NetBox reply's body that is read (decoded bytes): twice
NetBox 4.7's OpenAPI schema (14.6 MB, the biggest reply netbox-chat asks
for), and ten times a full 1,000-row page (NetBox's MAX_PAGE_SIZE) of
devices. A reply past it is cut off unread, not held (netbox/client.py)."""
DEFAULT_COMPACT_AT = 0.8
PROVIDERS = ("ollama", "openai")
"""`ollama` talks Ollama's own API; `openai` any OpenAI-compatible server
(llama-server, vLLM, SGLang, LM Studio, Ollama's /v1): netbox_chat.models."""

SESSIONS_MARK = ".netbox-chat"
"""The file netbox-chat puts in a sessions folder it made. It chooses nothing
(a repository can carry one); `ls` looks for it only to say where sessions
were left (`old_session_places`)."""

TOKEN_ENV = "NETBOX_TOKEN"
PROFILE_ENV = "NETBOX_CHAT_PROFILE"
CONFIG_NAME = Path("netbox-chat") / "config.toml"


class ConfigError(ValueError):
    """A setting or the config file is wrong; the message is one line.
    `usage`: the wrong value was typed on the command line (a flag's value
    it does not take), which the CLI reports as a usage error (exit 2)."""

    usage: bool = False


@dataclass(frozen=True)
class TokenSource:
    """Where the NetBox token comes from, without the token itself."""

    origin: str  # "env NETBOX_TOKEN", "profile prod", "file", ...
    env: str | None = None  # read this variable
    command: tuple[str, ...] | None = None  # or run this, once per process
    profile: str | None = None  # named in a failing command's error
    # The NetBox it was configured for: NETBOX_URL for NETBOX_TOKEN, the
    # netbox_url of the table that names token_env/token_command. The token
    # goes there or to a --netbox-url typed now, nowhere else (`refused`).
    netbox_url: str | None = None
    bound_to: str = ""  # how that URL is named in a refusal
    place: str = ""  # the table that names it: "profile lab", "file"; "" for NETBOX_TOKEN


def mask_token(text: str, token: str | None) -> str:
    """`text` with the NetBox token masked: the whole token and, for a v2 token
    (`nbt_<key>.<secret>`), the secret alone, which is sensitive too. Parts
    shorter than 8 characters are left alone (they would mask ordinary words)."""
    if not token:
        return text
    parts = [token, *([token.split(".", 1)[1]] if "." in token else [])]
    for part in parts:
        if len(part) >= 8:
            text = text.replace(part, "***")
    return text


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to know about where things are.

    The token is excluded from `repr` so a settings object that ends up in a
    traceback or a log line cannot leak it. `origins` says, per setting, which
    layer its value came from (`netbox-chat config` prints it).
    """

    sessions_dir: Path
    # A postgresql:// URL when the sessions live on a database server. It may
    # carry a password, so it stays out of `repr` like the token.
    store: str | None = field(default=None, repr=False)
    ollama_url: str = DEFAULT_OLLAMA_URL
    model: str = DEFAULT_MODEL
    netbox_url: str | None = None
    netbox_token: str | None = field(default=None, repr=False)
    num_ctx: int = DEFAULT_NUM_CTX
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    deadline: float = DEFAULT_DEADLINE  # ask, each eval question, doctor: in all (s)
    netbox_timeout: float = DEFAULT_NETBOX_TIMEOUT
    netbox_max_bytes: int = DEFAULT_NETBOX_MAX_BYTES
    think: str | None = None
    grounding: str = "mark"  # ungrounded claims: "mark" them, or "retry" the answer once
    num_predict: int | None = None  # the longest reply, thinking included (tokens)
    compact_at: float = DEFAULT_COMPACT_AT  # share of the window that triggers a compaction
    provider: str = "ollama"
    base_url: str | None = None  # an OpenAI-compatible server's URL, ending in /v1
    api_key_env: str | None = None  # the variable holding its key (never the key)
    # The key itself, read from `api_key_env` only when `base_url` was set in
    # the same place (see `_api_key`): out of `repr` like the token.
    api_key: str | None = field(default=None, repr=False)
    context_window: int | None = None  # overrides what the server says
    profile: str | None = None
    token_source: TokenSource | None = field(default=None, repr=False, compare=False)
    # Why the token is withheld (it belongs to another NetBox than `netbox_url`);
    # the commands that talk to NetBox stop with this line (credentials.py).
    token_refused: str | None = field(default=None, repr=False, compare=False)
    config_file: Path | None = field(default=None, compare=False)
    origins: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    warnings: tuple[str, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class ModelServer:
    """The model server a turn asked, as the ledger keeps it: the provider,
    the URL's scheme, host and port (never its `user:password@`, never a key)
    and the profile that named it. Enough to name the server to the user and
    to print a command that reaches it again."""

    provider: str
    scheme: str
    host: str
    port: int | None
    profile: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> ModelServer:
        from urllib.parse import urlsplit

        url = settings.base_url if settings.provider == "openai" else settings.ollama_url
        parts = urlsplit(url or "")
        try:
            port = parts.port
        except ValueError:  # checked when read; a URL the tests built by hand
            port = None
        return cls(
            settings.provider, parts.scheme or "http", parts.hostname or "", port, settings.profile
        )

    @property
    def url(self) -> str:
        """The server's URL as `--base-url` / `--ollama-url` take it (an
        OpenAI-compatible server's API is at /v1 on every server netbox-chat
        knows: llama-server, vLLM, SGLang, LM Studio, Ollama)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port is None else f":{self.port}"
        return f"{self.scheme}://{host}{port}" + ("/v1" if self.provider == "openai" else "")

    def shown(self) -> str:
        """`openai server http://10.0.0.5:8000/v1`: for the banner and notes."""
        return f"{self.provider} server {self.url}"

    def same_place(self, other: ModelServer) -> bool:
        """The same server, whichever profile named it."""
        return (self.provider, self.scheme, self.host.lower(), self.port) == (
            other.provider,
            other.scheme,
            other.host.lower(),
            other.port,
        )

    def flags(self) -> str:
        """The flags that reach this server: its profile, else the provider
        and URL of an OpenAI-compatible server. None for Ollama, the default
        provider, whose address (OLLAMA_HOST) is the user's own everywhere."""
        if self.profile:
            return f" --profile {shlex.quote(self.profile)}"
        if self.provider == "openai":
            return f" --provider openai --base-url {shlex.quote(self.url)}"
        return ""


def resume_command(session_id: str, server: ModelServer | None) -> str:
    """`netbox-chat resume ID` with what reaches the session's own server."""
    return f"netbox-chat resume {session_id}" + (server.flags() if server else "")


# --- reading one value ------------------------------------------------------------------


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def _positive(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(f"{where} must be a number, got {value!r}") from exc
    if number <= 0:
        raise ConfigError(f"{where} must be greater than zero, got {value!r}")
    return number


def _fraction(value: object, where: str) -> float:
    number = 0.0 if value in (0, "0") else _positive(value, where)
    if number >= 1:
        raise ConfigError(f"{where} must be a fraction below 1 (0 = off), got {value!r}")
    return number


def _ollama_url(value: object, where: str) -> str:
    url = _text(value, where)
    if "://" not in url:
        # Ollama's own CLI accepts OLLAMA_HOST=127.0.0.1:11434; so do we.
        url = f"http://{url}"
    return _http(url.rstrip("/"), where)


def _netbox_url(value: object, where: str) -> str | None:
    url = _text(value, where).rstrip("/")
    return _http(url, where) if url else None


def _http(url: str, where: str) -> str:
    """An http(s) URL, or a one-line refusal: another scheme never reaches
    the server as typed (`--ollama-url ftp://x` was seen to send the question
    to OLLAMA_HOST's server instead, quietly)."""
    if not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where} must be an http:// or https:// URL, got {url!r}")
    return url


def without_userinfo(url: str, mask: str = "") -> str:
    """`url` without the `user:password@` a proxy with basic auth may need:
    never stored with a session, never printed. `mask` stands in for it
    (`"***@"` where the user should see that the URL carries credentials)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=mask + parts.netloc.rpartition("@")[2]))


def _one_of(words: tuple[str, ...]) -> Callable[[object, str], str]:
    """A reader for a setting that takes one word of `words`, in any case: one
    piece, so every such setting refuses a stray word in the same line."""

    def read(value: object, where: str) -> str:
        word = _text(value, where).strip().lower()
        if word not in words:
            raise ConfigError(f"{where} must be one of {', '.join(words)}, got {value!r}")
        return word

    return read


def _think(value: object, where: str) -> str:
    if isinstance(value, bool):  # think = true in TOML
        return "on" if value else "off"
    return _one_of(THINK_SETTINGS)(value, where)


GROUNDING_SETTINGS = ("mark", "retry")
"""What NETBOX_CHAT_GROUNDING, `--grounding` and `grounding =` take (docs/grounding.md)."""


def _path(value: object, where: str) -> Path:
    return Path(_text(value, where)).expanduser()


DATABASE_SCHEMES = ("postgresql://", "postgres://")


def _store(value: object, where: str) -> str:
    """A folder or a postgresql:// URL; any other scheme is a typo to refuse."""
    text = _text(value, where)
    if "://" in text and not text.startswith(DATABASE_SCHEMES):
        scheme = text.split("://", 1)[0]
        raise ConfigError(
            f"{where}: unknown session store {scheme}://...: use a folder or a postgresql:// URL"
        )
    return text


def _base_url(value: object, where: str) -> str:
    """An OpenAI-compatible server's base URL: http(s), ending in /v1, as
    every such server documents it (`http://127.0.0.1:8000/v1`)."""
    url = _text(value, where).strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or not url.endswith("/v1"):
        raise ConfigError(
            f"{where} must be an http(s) URL ending in /v1 (http://127.0.0.1:8000/v1), "
            f"got {value!r}"
        )
    return url


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(value: object, where: str) -> str:
    """The NAME of a variable: a key written here instead would end up in a file."""
    name = _text(value, where).strip()
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError(f"{where} must name an environment variable (MY_KEY), not hold a key")
    return name


@dataclass(frozen=True)
class Setting:
    """One row of the table: the `Settings` field and config key share `name`."""

    name: str
    env: str | None
    flag: str | None
    read: Callable[[object, str], Any]
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("netbox_url", "NETBOX_URL", "--netbox-url", _netbox_url, None, "NetBox base URL"),
    Setting("model", "NETBOX_CHAT_MODEL", "--model", _text, DEFAULT_MODEL, "the model"),
    Setting("ollama_url", "OLLAMA_HOST", "--ollama-url", _ollama_url, DEFAULT_OLLAMA_URL, "Ollama"),
    Setting(
        "sessions_dir",
        "NETBOX_CHAT_SESSIONS",
        "--sessions-dir",
        _path,
        Path("sessions"),
        "folder of session files",
    ),
    Setting(
        "store",
        "NETBOX_CHAT_STORE",
        "--store",
        _store,
        None,
        "where sessions live: a folder, or a postgresql:// URL (a team's database)",
    ),
    Setting(
        "num_ctx",
        "NETBOX_CHAT_NUM_CTX",
        None,
        lambda v, w: int(_positive(v, w)),
        DEFAULT_NUM_CTX,
        "model context window (tokens)",
    ),
    Setting(
        "request_timeout",
        "NETBOX_CHAT_TIMEOUT",
        None,
        _positive,
        DEFAULT_REQUEST_TIMEOUT,
        "seconds Ollama may answer nothing at all (not even /api/ps), or stall mid-answer",
    ),
    Setting(
        "deadline",
        "NETBOX_CHAT_DEADLINE",
        "--deadline",
        _positive,
        DEFAULT_DEADLINE,
        "seconds ask, each eval question and doctor may take in all",
    ),
    Setting(
        "netbox_timeout",
        "NETBOX_TIMEOUT",
        None,
        _positive,
        DEFAULT_NETBOX_TIMEOUT,
        "NetBox request timeout (s)",
    ),
    Setting(
        "netbox_max_bytes",
        "NETBOX_MAX_BYTES",
        None,
        lambda v, w: int(_positive(v, w)),
        DEFAULT_NETBOX_MAX_BYTES,
        "the most of one NetBox reply read (bytes); a bigger reply fails that request",
    ),
    Setting(
        "think",
        "NETBOX_CHAT_THINK",
        "--think",
        _think,
        None,
        "thinking: on, off, low, medium, high (default: the model's own)",
    ),
    Setting(
        "grounding",
        "NETBOX_CHAT_GROUNDING",
        "--grounding",
        _one_of(GROUNDING_SETTINGS),
        "mark",
        "claims not in NetBox's replies: mark them, or retry (ask the model once to correct)",
    ),
    Setting(
        "num_predict",
        "NETBOX_CHAT_NUM_PREDICT",
        None,
        lambda v, w: int(_positive(v, w)),
        None,
        "longest reply in tokens, thinking included (default: Ollama's)",
    ),
    Setting(
        "compact_at",
        "NETBOX_CHAT_COMPACT_AT",
        None,
        _fraction,
        DEFAULT_COMPACT_AT,
        "compact when the window is this full (0 = off)",
    ),
    Setting(
        "provider",
        "NETBOX_CHAT_PROVIDER",
        "--provider",
        _one_of(PROVIDERS),
        "ollama",
        "model server kind: ollama, or openai (any OpenAI-compatible server)",
    ),
    Setting(
        "base_url",
        "NETBOX_CHAT_BASE_URL",
        "--base-url",
        _base_url,
        None,
        "OpenAI-compatible server, ending in /v1 (provider openai)",
    ),
    Setting(
        "api_key_env",
        "NETBOX_CHAT_API_KEY_ENV",
        None,
        _env_name,
        None,
        "name of the variable holding the server's API key (provider openai)",
    ),
    Setting(
        "context_window",
        "NETBOX_CHAT_CONTEXT_WINDOW",
        None,
        lambda v, w: int(_positive(v, w)),
        None,
        "the model's window in tokens, over what the server says (provider openai)",
    ),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}

_NEVER_FROM_SESSION = frozenset({"provider", "base_url", "api_key_env"})
"""Where the model server is and which key goes there: a session's stored data
never chooses them (issue 21's rule for NetBox tokens, applied to API keys)."""


def _command(value: object, where: str) -> tuple[str, ...]:
    """A token_command: a line split like a shell's (never run by one), or a list."""
    if isinstance(value, list):
        words = [_text(word, where) for word in value]
    else:
        try:
            words = shlex.split(_text(value, where))
        except ValueError as exc:  # an unclosed quote
            raise ConfigError(f"{where}: {exc}") from exc
    if not words:
        raise ConfigError(f"{where} is empty")
    return tuple(words)


# Every key a table may set, with its reader (checked when the file is read).
_READERS: dict[str, Callable[[object, str], Any]] = {
    **{setting.name: setting.read for setting in SETTINGS},
    "token_env": _text,
    "token_command": _command,
}
_TOKEN_KEYS = ("token_env", "token_command")
_TABLE_KEYS = frozenset(_READERS)
_TOP_KEYS = _TABLE_KEYS | {"default_profile", "profiles"}


# --- the config file ----------------------------------------------------------------------


def config_path(env: Mapping[str, str]) -> Path | None:
    """`$XDG_CONFIG_HOME/netbox-chat/config.toml`, else under `$HOME/.config`.

    Only from the given environment, so a caller passing `env={}` (tests,
    benchmarks) reads no file at all."""
    base = env.get("XDG_CONFIG_HOME") or (
        str(Path(env["HOME"]) / ".config") if env.get("HOME") else ""
    )
    return Path(base) / CONFIG_NAME if base else None


def state_dir(env: Mapping[str, str]) -> Path | None:
    """`$XDG_STATE_HOME/netbox-chat`, else under `$HOME/.local/state`: the user's own
    state (the REPL's input history, measured cold starts), where shells keep theirs.
    Only from the given environment, as `config_path`."""
    base = env.get("XDG_STATE_HOME") or (
        str(Path(env["HOME"]) / ".local" / "state") if env.get("HOME") else ""
    )
    return Path(base) / "netbox-chat" if base else None


@dataclass(frozen=True)
class ConfigFile:
    """The config file as read and checked: its defaults, its profiles, and
    what in it was ignored, said as warnings rather than refused."""

    path: Path
    defaults: Mapping[str, Any]
    profiles: Mapping[str, Mapping[str, Any]]
    default_profile: str | None
    warnings: tuple[str, ...] = ()


_HEADER = re.compile(r"\s*\[\s*([^\]\[]+?)\s*\]")
_KEY = re.compile(r"""\s*["']?([A-Za-z0-9_.-]+?)["']?\s*=""")


def _line_of(text: str, table: str, key: str) -> int | None:
    """The line where `key` is set in `[table]` ("" for the top level):
    tomllib reports syntax errors with lines but keeps none for good keys."""
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        if header := _HEADER.match(line):
            current = header.group(1).replace('"', "").replace(" ", "")
        elif (found := _KEY.match(line)) and current == table and found.group(1) == key:
            return number
    return None


def _checked_table(
    path: Path, text: str, table: str, values: object, allowed: frozenset[str]
) -> dict[str, Any]:
    where = f"[{table}]" if table else "the top level"
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: {where} must be a table")
    for key, value in values.items():
        line = _line_of(text, table, key)
        at = f"{path} line {line}" if line else str(path)
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise ConfigError(f"{at}: unknown key {key!r} in {where} (known: {known})")
        if key in _READERS:  # checked here, where the line is known
            _READERS[key](value, f"{at}: {key}")
    if all(key in values for key in _TOKEN_KEYS):
        raise ConfigError(f"{path}: {where} names both token_env and token_command: keep one")
    return values


def _check_owner_and_modes(path: Path) -> None:
    """Refuse a config file that someone else could have written, as ssh's
    StrictModes does: whoever writes it chooses where the NetBox token is sent
    (netbox_url), which variable is sent as the token (token_env) and a
    command we run (token_command), so whatever it holds it must be the
    user's. The file and every folder above it (as given and with symlinks
    resolved) must be owned by the user or root and not writable by group or
    others; a folder others can write passes only with the sticky bit (/tmp),
    where nobody else can replace what is ours inside it."""
    uid = os.getuid()
    for start in dict.fromkeys((path.absolute(), path.resolve())):  # as given, then resolved
        for place in (start, *start.parents):
            try:
                info = place.stat()
            except OSError as exc:
                raise ConfigError(f"cannot check {place}: {exc.strerror}") from exc
            what = "it" if place == start else f"its folder {place}"
            if info.st_uid not in (uid, 0):
                raise ConfigError(
                    f"refusing {path}: {what} is owned by another user (uid {info.st_uid}), "
                    f"who could change where your NetBox token goes; "
                    f"chown {user_name(uid)} {place} (or move the file)"
                )
            mode = stat.S_IMODE(info.st_mode)
            sticky = place != start and mode & stat.S_ISVTX
            if mode & 0o022 and not sticky:
                raise ConfigError(
                    f"refusing {path}: {what} can be written by others (permissions "
                    f"{mode:04o}), who could change where your NetBox token goes; "
                    f"chmod go-w {place}"
                )


def _permission_warnings(path: Path, data: Mapping[str, Any]) -> tuple[str, ...]:
    """ssh warns about keys others can read; a config that names a token
    command is as sensitive (it says how to get the secret)."""
    tables = [data, *dict(data.get("profiles", {})).values()]
    if not any(isinstance(t, dict) and "token_command" in t for t in tables):
        return ()
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o044:
        return (
            f"warning: permissions {mode:04o} for {path} are too open: it names a "
            f"token_command; chmod 600 {path}",
        )
    return ()


def load_config(path: Path) -> ConfigFile | None:
    """Read and check the file; None when there is none. One-line errors."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    _check_owner_and_modes(path)
    import tomllib  # 6 ms, paid only by those who have a file

    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends "(at line N, column M)".
        raise ConfigError(f"{path}: {exc}") from exc
    _checked_table(path, text, "", data, frozenset(_TOP_KEYS))
    profiles = data.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"{path}: profiles must be tables, [profiles.NAME]")
    checked = {
        name: _checked_table(path, text, f"profiles.{name}", values, _TABLE_KEYS)
        for name, values in profiles.items()
    }
    default_profile = data.pop("default_profile", None)
    if default_profile is not None and default_profile not in checked:
        line = _line_of(text, "", "default_profile")
        raise ConfigError(
            f"{path} line {line}: default_profile {default_profile!r} is not a profile "
            f"({_profile_list(checked)})"
        )
    warnings = _permission_warnings(path, {**data, "profiles": checked})
    return ConfigFile(path, data, checked, default_profile, warnings)


def profiles_on(netbox_url: str, config_file: Path | None) -> list[str]:
    """The user's own profiles for `netbox_url`: named in a refusal to resume
    a session against another NetBox, for the user to choose (a session may
    never choose one itself)."""
    config = load_config(config_file) if config_file is not None else None
    wanted = without_userinfo(netbox_url)
    return sorted(
        name
        for name, table in (config.profiles.items() if config else ())
        if isinstance(table.get("netbox_url"), str)
        and without_userinfo(table["netbox_url"].rstrip("/")) == wanted
    )


def _profile_list(profiles: Mapping[str, object]) -> str:
    return "profiles: " + ", ".join(sorted(profiles)) if profiles else "it has no profiles"


# --- merging the layers ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Layer:
    """One source of settings (flags, environment, session, profile, file),
    named so that an error and `config` can say where a value came from."""

    origin: str
    values: Mapping[str, Any]

    def where(self, setting: Setting) -> str:
        """How an error names the value: the variable, the flag, or the key."""
        if self.origin == "env":
            return str(setting.env)
        if self.origin == "flag":
            return str(setting.flag)
        return f"{setting.name} ({self.origin})"

    def label(self, setting: Setting) -> str:
        """What `netbox-chat config` prints as the value's origin."""
        if self.origin in ("env", "flag"):
            return f"{self.origin} {self.where(setting)}"
        return self.origin


def _pick_profile(
    flag: str | None, env: Mapping[str, str], config: ConfigFile | None
) -> tuple[str | None, str]:
    """The profile and why: flag > env > default_profile (never a session's)."""
    for name, why in (
        (flag, "--profile"),
        (env.get(PROFILE_ENV), PROFILE_ENV),
        (config.default_profile if config else None, "default_profile"),
    ):
        if name:
            profiles = config.profiles if config else {}
            if name not in profiles:
                where = config.path if config else "no config file"
                raise ConfigError(
                    f"no profile {name!r} (from {why}) in {where} ({_profile_list(profiles)})"
                )
            return name, why
    return None, ""


def _token_source(
    env: Mapping[str, str], profile: str | None, config: ConfigFile | None
) -> TokenSource | None:
    """NETBOX_TOKEN > the profile's token_env/token_command > the file's."""
    if env.get(TOKEN_ENV):
        url = _netbox_url(env.get("NETBOX_URL", ""), "NETBOX_URL")
        return TokenSource(f"env {TOKEN_ENV}", env=TOKEN_ENV, netbox_url=url, bound_to="NETBOX_URL")
    tables: list[tuple[str, Mapping[str, Any]]] = []
    if config is not None:
        if profile is not None:
            tables.append((f"profile {profile}", config.profiles[profile]))
        tables.append(("file", config.defaults))
    for origin, table in tables:
        # A profile without a netbox_url of its own talks to the top level's.
        raw = table.get("netbox_url", config.defaults.get("netbox_url") if config else None)
        url = _netbox_url(raw, f"netbox_url ({origin})") if raw is not None else None
        bound_to = f"the netbox_url of {'the config file' if origin == 'file' else origin}"
        if "token_env" in table:
            name = _text(table["token_env"], f"token_env ({origin})")
            return TokenSource(
                f"{origin}, token_env {name}",
                env=name,
                netbox_url=url,
                bound_to=bound_to,
                place=origin,
            )
        if "token_command" in table:
            command = _command(table["token_command"], f"token_command ({origin})")
            named = profile if origin.startswith("profile") else None
            return TokenSource(
                f"{origin}, token_command",
                command=command,
                profile=named,
                netbox_url=url,
                bound_to=bound_to,
                place=origin,
            )
    return None


FLAG_ORIGIN = f"flag {_BY_NAME['netbox_url'].flag}"  # what `config` prints for it


def _refusal(token: TokenSource | None, netbox_url: str | None, origin: str) -> str | None:
    """Why the token may not go to `netbox_url`, or None when it may: a token
    is sent only to the NetBox it was configured for, or to one typed with
    --netbox-url on this command line (the user's own choice, said now)."""
    if token is None or netbox_url is None or origin == FLAG_ORIGIN:
        return None
    if token.netbox_url is not None and without_userinfo(token.netbox_url) == without_userinfo(
        netbox_url
    ):
        return None
    bound = (
        f"{token.bound_to} ({without_userinfo(token.netbox_url, '***@')})"
        if token.netbox_url
        else f"{token.bound_to}, which is not set"
    )
    return (
        f"the NetBox token ({token.origin}) is sent only to {bound}, not to "
        f"{without_userinfo(netbox_url, '***@')} ({origin}): configure that NetBox's own "
        f"token with it, or pass --netbox-url to send this one there"
    )


def resolve_settings(
    *,
    env: Mapping[str, str] | None = None,
    profile: str | None = None,
    session_model: str | None = None,
    **flags: Any,
) -> Settings:
    """Merge the layers: flags > environment > the session's model (for a
    resumed session, unless a profile was given as a flag) > the profile >
    the file's top level > built-in defaults.

    A session is someone else's data on a shared store, so it gives the model
    only: never the NetBox, the profile, or anything that says which token is
    sent where (the CLI compares the NetBox it remembers with this one).

    `flags` are keyword arguments named like the settings (None: not given).
    Raises ConfigError (a ValueError) with a one-line message.
    """
    env = os.environ if env is None else env
    unknown = set(flags) - set(_BY_NAME)
    if unknown:
        raise TypeError(f"not settings: {', '.join(sorted(unknown))}")
    path = config_path(env)
    config = load_config(path) if path is not None else None
    chosen, why = _pick_profile(profile, env, config)
    layers = [
        _Layer("flag", {k: v for k, v in flags.items() if v is not None}),
        _Layer("env", {s.name: env[s.env] for s in SETTINGS if s.env and env.get(s.env)}),
        _Layer("session", {"model": session_model} if session_model and not profile else {}),
    ]
    if config is not None:
        if chosen is not None:
            layers.append(_Layer(f"profile {chosen}", config.profiles[chosen]))
        layers.append(_Layer("file", config.defaults))
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    ranks: dict[str, int] = {}  # which layer a value came from (0: the flags)
    for setting in SETTINGS:
        values[setting.name], origins[setting.name] = setting.default, "default"
        ranks[setting.name] = len(layers)
        for rank, layer in enumerate(layers):
            if setting.name in layer.values:
                raw = layer.values[setting.name]
                raw = str(raw) if isinstance(raw, Path) else raw  # typer's Path flags
                try:
                    values[setting.name] = setting.read(raw, layer.where(setting))
                except ConfigError as exc:
                    exc.usage = layer.origin == "flag"
                    raise
                origins[setting.name] = layer.label(setting)
                ranks[setting.name] = rank
                break
    if origins["sessions_dir"] == "default":
        values["sessions_dir"], origins["sessions_dir"] = default_sessions_dir(env)
    _place_store(values, origins, ranks)
    token = _token_source(env, chosen, config)
    refused = _refusal(token, values["netbox_url"], origins["netbox_url"])
    warnings = config.warnings if config else ()
    if chosen is not None and config is not None:
        origins["profile"] = why
        if why in ("--profile", PROFILE_ENV):
            warnings += _shadowed(chosen, config.profiles[chosen], origins, token)
    api_key, warning = _api_key(values, origins, ranks, env)
    warnings += warning
    return Settings(
        **values,
        api_key=api_key,
        netbox_token=(env.get(token.env) or None) if token and token.env and not refused else None,
        profile=chosen,
        token_source=token,
        token_refused=refused,
        config_file=config.path if config else None,
        origins=origins,
        warnings=warnings,
    )


SETTINGS_IN_FORCE: ContextVar[Settings | None] = ContextVar("settings_in_force", default=None)
"""The command's settings, for the errors worded far from them (a turn's
"cannot reach Ollama"): set once where the CLI resolves them, read through
`source_of`. As errors.PICK_MODEL, a context variable, so that a thread the
chat starts with its context (the agent build) sees the same."""


def source_of(settings: Settings | None, name: str) -> str:
    """Where the value of setting `name` (or "token", the NetBox token) came
    from, as a fix names the place to change it: the flag (`--netbox-url`),
    the variable (`NETBOX_URL`), the key and its table in the config file
    (`netbox_url in profile lab of ~/.config/netbox-chat/config.toml`). A value
    nothing set is named by its variable, where it would be set. The one
    place that words a setting's origin for a fix, in every command alike;
    `settings` None: the command's (`SETTINGS_IN_FORCE`), if any."""
    settings = SETTINGS_IN_FORCE.get() if settings is None else settings
    if name == "token":
        return _token_named(settings)
    setting = _BY_NAME[name]
    origin = settings.origins.get(name, "default") if settings is not None else "default"
    kind, _, rest = origin.partition(" ")
    if kind in ("flag", "env"):
        return rest
    if settings is not None and settings.config_file is not None:
        if kind == "profile":
            return f"{name} in profile {rest} of {shown_path(settings.config_file)}"
        if kind == "file":
            return f"{name} in {shown_path(settings.config_file)}"
    return str(setting.env or setting.flag or name)


def _token_named(settings: Settings | None) -> str:
    source = None if settings is None else settings.token_source
    if settings is None or source is None or not source.place or settings.config_file is None:
        return TOKEN_ENV
    table = "" if source.place == "file" else f"{source.place} of "
    where = f"{table}{shown_path(settings.config_file)}"
    if source.env is not None:
        return f'{source.env} (token_env = "{source.env}" in {where})'
    return f"the token_command in {where}"


def netbox_setup() -> str:
    """Where a NetBox is configured, as the first run is told: the quick
    start's way (a profile in the config file, named where this user's is)
    first, then the variables."""
    path = config_path(os.environ)
    shown = shown_path(path) if path is not None else "~/" + str(Path(".config") / CONFIG_NAME)
    return (
        f"put netbox_url and token_env in a profile of {shown} (the README's quick "
        "start), or set NETBOX_URL and NETBOX_TOKEN"
    )


def not_configured() -> str:
    """The line for a command that needs a NetBox none is configured for."""
    return f"NetBox is not configured: {netbox_setup()} (or pass --netbox-url)"


def shown_path(path: Path) -> str:
    """`path` as the user would type it: under the home folder, with `~`."""
    with contextlib.suppress(RuntimeError, ValueError):
        return str(Path("~") / path.relative_to(Path.home()))
    return str(path)


def default_sessions_dir(env: Mapping[str, str], checkout: Path | None = None) -> tuple[Path, str]:
    """Where sessions live when nothing names a folder, and why: one store per
    installation, whatever the current folder. Installed from a checkout
    (`pip install -e .`, found from the package's own location), it is that
    checkout's `sessions/`; installed any other way (pipx, a wheel), one
    folder per user, `$XDG_DATA_HOME/netbox-chat/sessions`. Nothing in the
    current folder's tree chooses it: a marked `sessions/` there may be a
    cloned repository's or another user's. `checkout` stands in for the
    installation's own (the tests' copy of the package)."""
    checkout = installed_checkout() if checkout is None else checkout
    if checkout is not None:
        return checkout / "sessions", "default: this checkout's sessions/ (pip install -e)"
    return user_sessions_dir(env), "default: $XDG_DATA_HOME/netbox-chat/sessions"


def installed_checkout(package: Path | None = None) -> Path | None:
    """The checkout netbox-chat runs from, when it runs from one: the folder
    above the package, holding the project's pyproject.toml. An install from a
    wheel (pipx, pip) puts the package in site-packages, with no such file."""
    top = (package or Path(__file__)).resolve().parent.parent
    try:
        text = (top / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return top if re.search(r'^name\s*=\s*"netbox-chat"', text, re.MULTILINE) else None


def user_sessions_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/netbox-chat/sessions`, `~/.local/share` when the
    variable is unset or relative (the XDG spec says ignore it then)."""
    data = env.get("XDG_DATA_HOME", "")
    if not Path(data).is_absolute():
        try:
            data = str(Path.home() / ".local" / "share")
        except RuntimeError:  # no home folder at all
            raise ConfigError(
                "no home folder to keep sessions in: set NETBOX_CHAT_SESSIONS or --sessions-dir"
            ) from None
    return Path(data) / "netbox-chat" / "sessions"


def old_session_places(env: Mapping[str, str], store: Path, cwd: Path | None = None) -> list[Path]:
    """Folders that held sessions under the rules before one store per
    installation, other than `store`: the nearest marked `sessions/` in or
    above the current folder, `./sessions`, and the per-user folder. `ls`
    names them so that no session is lost; none of them is used."""
    here = Path.cwd() if cwd is None else cwd
    found: list[Path] = []
    marked = next(
        (
            f / "sessions"
            for f in (here, *here.parents)
            if (f / "sessions" / SESSIONS_MARK).is_file()
        ),
        None,
    )
    places = [marked, here / "sessions"]
    with contextlib.suppress(ConfigError):  # no home folder: no per-user folder either
        places.append(user_sessions_dir(env))
    for place in places:
        if place is None or place in found or _same_folder(place, store):
            continue
        if any(place.glob("*.sqlite")):
            found.append(place)
    return found


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _api_key(
    values: Mapping[str, Any],
    origins: Mapping[str, str],
    ranks: Mapping[str, int],
    env: Mapping[str, str],
) -> tuple[str | None, tuple[str, ...]]:
    """The API key, only for the base_url configured with it: both set in the
    same place (one profile, the file's top level, the environment, the
    command line). A --base-url typed over a profile's key would otherwise
    send that key to another server; it then goes without one, said once."""
    name = values["api_key_env"]
    if name is None or values["provider"] != "openai":
        return None, ()
    if ranks["api_key_env"] != ranks["base_url"]:
        where = origins["base_url"]
        return None, (
            f"warning: api_key_env {name} ({origins['api_key_env']}) was not configured "
            f"with this base_url ({where}): no key is sent; set both in one place",
        )
    return env.get(name) or None, ()


def _place_store(values: dict[str, Any], origins: dict[str, str], ranks: dict[str, int]) -> None:
    """`store` names a folder or a database. A folder is the sessions folder,
    unless `sessions_dir` was set by a layer above (a --sessions-dir flag
    over NETBOX_CHAT_STORE); a database URL stays in `store`, and wins."""
    store = values["store"]
    if store is None or store.startswith(DATABASE_SCHEMES):
        return
    values["store"] = None
    if ranks["store"] <= ranks["sessions_dir"]:
        values["sessions_dir"] = _path(store, "store")
        origins["sessions_dir"] = origins["store"]
    origins["store"] = "default"


def _shadowed(
    name: str, table: Mapping[str, Any], origins: Mapping[str, str], token: TokenSource | None
) -> tuple[str, ...]:
    """The profile asked for, but the environment decides some of it: with
    NETBOX_URL and NETBOX_TOKEN still exported, `--profile prod` would talk to
    the other NetBox. Said, since the order (env over profile) is the rule."""
    keys = [key for key in table if key in origins and origins[key].startswith("env ")]
    says = [f"{origins[key][4:]} overrides its {key}" for key in keys]
    if token is not None and token.env == TOKEN_ENV and set(table) & set(_TOKEN_KEYS):
        says.append(f"{TOKEN_ENV} overrides its {next(k for k in _TOKEN_KEYS if k in table)}")
    return (f"warning: profile {name}: {'; '.join(says)}",) if says else ()
