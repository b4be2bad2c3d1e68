"""`netbox-chat doctor`: can we reach the model server (Ollama or an
OpenAI-compatible one), the model, NetBox, the sessions folder?

Each check is one line, passed or failed, and a failed one names the fix. The
checks are quick on purpose (short timeouts, no retries, no LangChain import
but for an OpenAI-compatible server's chat client, which doctor builds as a
turn does so that it cannot pass while turns fail) and never touch a
session: the folder check creates and deletes a hidden temp file, nothing
else.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from netbox_chat import tls
from netbox_chat.config import Settings, netbox_setup, source_of, without_userinfo
from netbox_chat.errors import UserFacingError
from netbox_chat.models.coldstart import cold_start_line, last_cold_start, record_path
from netbox_chat.models.dialects import ServerFacts, json_object
from netbox_chat.models.model_info import ModelInfo, parse_show
from netbox_chat.models.window import session_window, turn_floor
from netbox_chat.owned import NotOwned, check_folder, check_parents
from netbox_chat.store.errors import StoreError
from netbox_chat.store.sessions import refuse_network_filesystem
from netbox_chat.visible import visible_line
from netbox_chat.words import count, number

TIMEOUT = 3.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    skipped: bool = False
    """Not run, because a check it depends on failed: shown as skipped, not
    as a second failure with nothing to fix of its own."""
    info: bool = False
    """Nothing to pass or fail (whether the model is in memory, what a cold
    start costs): shown with `·`, not a ✓ that would claim a check passed."""

    def line(self) -> str:
        if self.skipped:
            return f"- {self.name}: {self.detail}"
        if self.info:
            return f"· {self.name}: {self.detail}"
        mark = "✓" if self.ok else "✗"
        text = f"{mark} {self.name}: {self.detail}"
        return text if self.ok or not self.fix else f"{text} → {self.fix}"


def skipped(name: str, why: str = "") -> Check:
    return Check(name, False, f"skipped ({why})" if why else "skipped", skipped=True)


def run_checks(settings: Settings, *, timeout: float = TIMEOUT) -> list[Check]:
    """Every check, in the order a user would fix them. Each is bounded by its
    own short timeout; the one that reads a model's answer (the trial on an
    OpenAI-compatible server) also by the command's deadline (NETBOX_CHAT_DEADLINE)."""
    if settings.provider == "openai":
        until = time.monotonic() + settings.deadline
        checks = check_openai(settings, timeout=timeout, until=until)
    else:
        checks = check_ollama(settings, timeout=timeout)
    checks += asyncio.run(check_netbox(settings, timeout=timeout))
    if settings.store is not None:
        checks.append(check_database_store(settings.store))
    else:
        checks.append(
            check_sessions_folder(settings.sessions_dir, settings.origins.get("sessions_dir", ""))
        )
    return checks


# --- Ollama ------------------------------------------------------------------------


def check_ollama(settings: Settings, *, timeout: float = TIMEOUT) -> list[Check]:
    url, model = settings.ollama_url, settings.model
    try:
        with httpx.Client(base_url=url, timeout=timeout, verify=tls.context()) as http:
            version = http.get("/api/version")
            version.raise_for_status()
            shown = http.post("/api/show", json={"model": model})
    except httpx.HTTPError as exc:
        reason = _http_reason(exc)
        return [
            Check(
                "Ollama",
                False,
                f"cannot reach {without_userinfo(url, '***@')} ({reason})",
                f"start it with `ollama serve`, or point {source_of(settings, 'ollama_url')} at it",
            ),
            skipped("model", f"{model}: Ollama unreachable"),
        ]
    number = json_object(version).get("version", "unknown version")
    checks = [Check("Ollama", True, f"{without_userinfo(url, '***@')} (version {number})")]
    if shown.status_code == 404:
        checks.append(
            Check(
                "model",
                False,
                f"{model} is not pulled on this Ollama",
                f"`ollama pull {model}`, or pick another with --model / NETBOX_CHAT_MODEL",
            )
        )
        return checks
    if shown.status_code != 200:
        message = json_object(shown).get("error") or shown.reason_phrase
        checks.append(
            Check("model", False, f"{model}: Ollama answered {shown.status_code}: {message}")
        )
        return checks
    info = parse_show(model, json_object(shown))
    checks.append(_model_check(info))
    checks.append(check_window(settings, info))
    checks.append(check_loaded(url, model, timeout))
    last = last_cold_start(record_path(os.environ), model)
    checks.append(Check("cold start", True, cold_start_line(last, model), info=True))
    return checks


COLD_START = (
    "the first question waits while Ollama loads it; netbox-chat waits as long as "
    "Ollama answers /api/ps"
)


def check_loaded(url: str, model: str, timeout: float) -> Check:
    """Whether the model is in memory (`/api/ps`): if not, the first question pays
    the load, which netbox-chat waits for (liveness.py) but the user should expect."""
    try:
        with httpx.Client(base_url=url, timeout=timeout, verify=tls.context()) as http:
            answer = http.get("/api/ps")
        listed = json_object(answer).get("models") if answer.status_code == 200 else None
    except httpx.HTTPError:
        listed = None
    if not isinstance(listed, list):
        return Check(
            "loaded",
            True,
            f"unknown (this Ollama does not answer /api/ps); {COLD_START}",
            info=True,
        )
    names = {str(m.get(k)) for m in listed if isinstance(m, dict) for k in ("name", "model")}
    if model in names:
        return Check(
            "loaded", True, f"{model} is in memory: no load before the first answer", info=True
        )
    return Check("loaded", True, f"{model} is not in memory: {COLD_START}", info=True)


def _model_check(info: ModelInfo) -> Check:
    model = info.name
    if info.capabilities is None:
        return Check("model", True, f"{model} (this Ollama does not report tool support)")
    if info.can_use_tools:
        return Check("model", True, info.describe())
    return Check(
        "model",
        False,
        f"{model} does not support tool calling",
        "choose a tool-capable model (qwen3:8b, llama3.1, ...) with --model",
    )


def check_window(settings: Settings, info: ModelInfo) -> Check:
    """The session's window: NETBOX_CHAT_NUM_CTX against the model's own
    length, and against what one turn needs."""
    name = "context window"
    window = session_window(settings.num_ctx, info.context_length)
    if info.context_length and settings.num_ctx > info.context_length:
        return Check(
            name,
            False,
            f"NETBOX_CHAT_NUM_CTX {number(settings.num_ctx)} is more than {info.name}'s "
            f"{number(info.context_length)}: sessions get {number(window)}",
            f"set NETBOX_CHAT_NUM_CTX to {info.context_length} or less",
        )
    if (small := too_small_for_a_turn(window, "raise NETBOX_CHAT_NUM_CTX")) is not None:
        return small
    limit = f" of {number(info.context_length)}" if info.context_length else ""
    return Check(
        name, True, f"{number(window)} tokens{limit} (NETBOX_CHAT_NUM_CTX; {compaction(settings)})"
    )


def too_small_for_a_turn(window: int, fix: str) -> Check | None:
    """A window one turn does not fit in, as `ask` would refuse it: `fix`
    (whatever sets the window here) and the power of two that fits."""
    needed = turn_floor(window)
    if window >= needed:
        return None
    return Check(
        "context window",
        False,
        f"{number(window)} tokens is less than one turn needs (about {number(needed)}: system "
        "prompt, tool definitions, one tool result, the answer)",
        f"{fix} to at least {1 << (needed - 1).bit_length()}",
    )


def compaction(settings: Settings) -> str:
    return f"compacts at {settings.compact_at:.0%}" if settings.compact_at else "compaction off"


# --- An OpenAI-compatible server ----------------------------------------------------

TRIAL_TIMEOUT = 30.0
"""The one short generation may wait for a model to load; the rest stays quick."""


def check_openai(
    settings: Settings, *, timeout: float = TIMEOUT, until: float | None = None
) -> list[Check]:
    """The server and its version, the model, whether it can call tools and
    returns reasoning (one short request), and the window."""
    from netbox_chat.models.dialects import ServerError, Unfinished, probe, trial

    model = settings.model
    if settings.base_url is None:
        return [
            Check(
                "model server",
                False,
                "provider openai has no base_url",
                "pass --base-url http://HOST:PORT/v1 or set NETBOX_CHAT_BASE_URL",
            ),
            Check("model", False, f"{model}: not checked (no server)"),
        ]
    try:
        facts = probe(settings.base_url, model, settings.api_key, timeout=timeout)
    except ServerError as exc:
        return [
            Check(
                "model server",
                False,
                visible_line(str(exc)),
                "start the server, or point --base-url / NETBOX_CHAT_BASE_URL at it",
            ),
            Check("model", False, f"{model}: not checked (server unreachable)"),
        ]
    speaks = facts.speaks
    version = f" (version {visible_line(facts.version)})" if facts.version else ""
    checks = [
        Check(
            "model server",
            True,
            f"{speaks.name} at {without_userinfo(settings.base_url, '***@')}{version}",
        )
    ]
    if not facts.serves_model:
        listed = visible_line(", ".join(facts.served[:8]) or "none")
        checks.append(
            Check("model", False, f"{model} is not served (it serves: {listed})", "--model ID")
        )
        return checks
    broken = check_chat_client(settings, facts, TRIAL_TIMEOUT)
    if broken is not None:
        checks.append(broken)
        return checks
    try:
        tried = trial(
            settings.base_url,
            model,
            settings.api_key,
            timeout=TRIAL_TIMEOUT,
            stall=min(TRIAL_TIMEOUT, settings.request_timeout),
            until=until,
        )
    except Unfinished as exc:
        # The answer began, then stalled behind keep-alives or ran past the deadline.
        fix = (
            "check the server (or the proxy in front of it), or raise --deadline / "
            "NETBOX_CHAT_DEADLINE"
        )
        checks.append(Check("model", False, f"{model}: no answer ({exc})", fix))
    except httpx.HTTPError as exc:
        checks.append(Check("model", False, f"{model}: no answer ({_http_reason(exc)})"))
    else:
        if tried.refused:
            # vLLM without its flags: the one refusal a short request shows.
            fix = f"start it with {speaks.tools_fix}" if speaks.tools_fix else "turn tools on"
            checks.append(Check("model", False, f"{model}: {speaks.name} refuses tool calls", fix))
        else:
            # SGLang without --tool-call-parser accepts tools and answers with the
            # call as text: only a real call shows it, so the flag is named.
            tools = (
                "tools"
                if facts.dialect != "sglang"
                else f"tools if started with {speaks.tools_fix}"
            )
            reasoning = (
                f"returns reasoning in `{tried.reasoning_field}`"
                if tried.reasoning_field
                else "no reasoning in a short answer"
            )
            checks.append(Check("model", True, f"{model} ({tools}; {reasoning})"))
    checks.append(check_served_window(settings, facts.window, speaks.name))
    return checks


def check_chat_client(settings: Settings, facts: ServerFacts, timeout: float) -> Check | None:
    """Build the chat model a turn builds (models.provider_for) and send one
    small request through its client: None when that works, else the failed
    model check. Doctor's own trial is plain httpx; without this, a client the
    installed openai release refuses passed every check while each turn
    failed ("Invalid timeout", issue 41)."""
    from netbox_chat.models import Served, provider_for
    from netbox_chat.models.openai import list_models_through

    try:
        chat = provider_for(settings).chat_model(
            settings, Served(None, settings.num_ctx, facts), reasoning=None
        )
        asyncio.run(asyncio.wait_for(list_models_through(chat), timeout))
    except Exception as exc:  # whatever a turn would meet first, in one line
        said = visible_line(f"{type(exc).__name__}: {exc}")[:300]
        return Check(
            "model",
            False,
            f"{settings.model}: the chat client turns use fails ({said})",
            "install the openai, httpx2 and langchain-openai releases netbox-chat pins",
        )
    return None


def check_served_window(settings: Settings, served: int | None, server: str) -> Check:
    """The window the server says it gives one request, or the override."""
    name = "context window"
    window = settings.context_window or served
    if window is None:
        return Check(
            name,
            False,
            f"{server} does not say its window; sessions assume {number(settings.num_ctx)}",
            "set NETBOX_CHAT_CONTEXT_WINDOW (or context_window) to the server's",
        )
    if served and window > served:
        return Check(
            name,
            False,
            f"context_window {number(window)} is more than the {number(served)} "
            f"{server} gives a request",
            f"set context_window to {served} or less",
        )
    if (small := too_small_for_a_turn(window, "give the model a window")) is not None:
        return small
    origin = "context_window" if settings.context_window else f"as {server} says"
    return Check(name, True, f"{number(window)} tokens ({origin}; {compaction(settings)})")


def _http_reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {TIMEOUT:g}s"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return str(exc) or type(exc).__name__


# --- NetBox --------------------------------------------------------------------------


async def check_netbox(settings: Settings, *, timeout: float = TIMEOUT) -> list[Check]:
    from netbox_chat.netbox.client import (
        NetBoxAuthError,
        NetBoxClient,
        NetBoxConnectionError,
        NetBoxError,
        NetBoxTimeout,
    )

    if settings.netbox_url is None:
        return [
            Check("NetBox", False, "not configured", netbox_setup()),
            skipped("token", "no NetBox URL"),
            skipped("NetBox version", "no NetBox URL"),
        ]
    client = NetBoxClient.of(settings, timeout=timeout, retries=0)
    where = client.scrub(settings.netbox_url)
    try:
        status = await client.status()
    except (NetBoxConnectionError, NetBoxTimeout) as exc:
        return [
            Check(
                "NetBox",
                False,
                str(exc),
                f"check {source_of(settings, 'netbox_url')} and that NetBox is running",
            ),
            skipped("token", "NetBox unreachable"),
            skipped("NetBox version", "NetBox unreachable"),
        ]
    except NetBoxAuthError as exc:
        return [
            Check("NetBox", True, f"{where} answered"),
            Check("token", False, str(exc), token_fix(settings, exc.cause)),
            skipped("NetBox version", "the token was refused"),
        ]
    except NetBoxError as exc:
        return [
            Check(
                "NetBox",
                False,
                str(exc),
                f"is {source_of(settings, 'netbox_url')} the NetBox base URL?",
            ),
            skipped("token"),
            skipped("NetBox version"),
        ]
    finally:
        await client.aclose()
    checks = [Check("NetBox", True, f"{where} answered")]
    if settings.netbox_token is None:
        checks.append(
            Check(
                "token",
                False,
                f"{source_of(settings, 'token')} is not set (this NetBox answers without one, "
                "most do not)",
                token_fix(settings, "missing"),
            )
        )
    else:
        checks.append(Check("token", True, "accepted"))
    version = status.get("netbox-version")
    if not version:
        checks.append(
            Check(
                "NetBox version",
                False,
                "/api/status/ did not say (is this NetBox?)",
                f"point {source_of(settings, 'netbox_url')} at a NetBox 4.x",
            )
        )
    elif not str(version).startswith("4."):
        checks.append(
            Check(
                "NetBox version",
                False,
                f"{version}: netbox-chat's tools are written for NetBox 4.x",
                "upgrade NetBox, or expect refused filters",
            )
        )
    else:
        checks.append(Check("NetBox version", True, str(version)))
    return checks


def token_fix(settings: Settings, cause: str) -> str:
    """The fix for a refused token, by NetBox's reason, naming where this
    token comes from (a profile's own variable or command, not always
    NETBOX_TOKEN): the check's detail has said why (the client's words)."""
    origin = source_of(settings, "token")
    command = origin.startswith("the token_command")
    if cause == "missing":
        if command:
            return f"make {origin} print an API token"
        return f"set {origin} to an API token (NetBox → your profile → API tokens)"
    if cause == "permission":
        return "give the token's user permission to read, or use another token"
    if command:
        return f"create a new token and make {origin} print it"
    return f"create a new token and put it in {origin}"


# --- the sessions folder -----------------------------------------------------------------


def check_sessions_folder(root: Path, why: str = "") -> Check:
    """Create and delete a hidden temp file; never open a session. `why`:
    where the folder was chosen (a flag, the environment, the default)."""
    name = "sessions folder"
    fix = "fix its permissions or free space, or set NETBOX_CHAT_SESSIONS / --sessions-dir"
    try:
        check_parents(root, "sessions folder")
    except NotOwned as exc:
        return Check(name, False, str(exc), "use a folder of your own, 0700")
    if not root.exists():
        parent = next((p for p in root.absolute().parents if p.exists()), None)
        if parent is None or not parent.is_dir():
            return Check(name, False, f"{root} cannot be created", fix)
        if not os.access(parent, os.W_OK | os.X_OK):
            return Check(name, False, f"{root} cannot be created: {_denied_reason(parent)}", fix)
        return Check(name, True, f"{root} (will be created, 0700{_why(why)})")
    if not root.is_dir():
        return Check(name, False, f"{root} is not a folder: {os.strerror(errno.ENOTDIR)}", fix)
    try:
        check_folder(root, "sessions folder", tighten=False)
    except NotOwned as exc:
        return Check(name, False, str(exc), "use a folder of your own, 0700")
    try:
        refuse_network_filesystem(root)
    except StoreError as exc:
        return Check(name, False, str(exc), "use a folder on a local disk")
    try:
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=root)
    except OSError as exc:
        return Check(name, False, f"{root} is not writable: {exc.strerror}", fix)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return Check(name, True, f"{root} (writable{_why(why)})")


def _why(why: str) -> str:
    return f"; {why}" if why else ""


# --- a session store on PostgreSQL --------------------------------------------------------


def check_database_store(url: str) -> Check:
    """Connect read-only and check both schemas (ours and LangGraph's tables).

    The only check that imports LangGraph: it knows how many migrations its
    Postgres tables must have had."""
    from netbox_chat.store import postgres as pgstore

    name = "session store"
    fix = "run `netbox-chat doctor --init-store` (creates or migrates the schema)"
    try:
        with pgstore.PgSessionStore(url).reading() as conn:
            from netbox_chat.checkpoints.postgres import langgraph_tables_current

            if not langgraph_tables_current(conn):
                return Check(name, False, f"{pgstore.shown_url(url)}: no checkpoint tables", fix)
            total = pgstore.scalar(conn, "SELECT count(DISTINCT session_id) FROM session_meta")
    except UserFacingError as exc:
        return Check(name, False, str(exc), fix if "schema" in str(exc) else "")
    return Check(
        name,
        True,
        f"{pgstore.shown_url(url)} (schema {pgstore.SCHEMA} v{pgstore.PG_SCHEMA_VERSION}, "
        f"{count(total, 'session')})",
    )


def init_database_store(url: str) -> str:
    """Create or migrate the store's schema: our tables and LangGraph's, in
    schema `netbox_chat`. Safe to run again; returns the line to print."""
    from netbox_chat.checkpoints.postgres import setup_tables
    from netbox_chat.store import postgres as pgstore

    conn = pgstore.connect(url)
    try:
        before = pgstore.migrate(conn)
        setup_tables(conn)
    except pgstore.database_errors() as exc:
        raise StoreError(
            f"cannot create the schema in {pgstore.shown_url(url)}: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from exc
    finally:
        conn.close()
    done = (
        "created"
        if before == 0
        else "already current"
        if before == pgstore.PG_SCHEMA_VERSION
        else "migrated"
    )
    return (
        f"session store {pgstore.shown_url(url)}: schema {pgstore.SCHEMA} {done} "
        f"(version {pgstore.PG_SCHEMA_VERSION}, with LangGraph's checkpoint tables)"
    )


def _denied_reason(path: Path) -> str:
    read_only = os.statvfs(path).f_flag & os.ST_RDONLY
    return os.strerror(errno.EROFS if read_only else errno.EACCES)
