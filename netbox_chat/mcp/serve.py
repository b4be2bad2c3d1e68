"""Serving `netbox-chat mcp`: over stdio, or Streamable HTTP behind a bearer token.

Reach is decided here. On loopback HTTP needs no token (anyone who can reach
127.0.0.1 can already read the user's files and configuration), but gets one
if NETBOX_CHAT_MCP_TOKEN or NETBOX_CHAT_MCP_TOKEN_COMMAND gives it; bound
anywhere else it refuses to start without one. The token never comes from a
flag (`ps` and the shell history would show it). The SDK's Host/Origin
allow-list (DNS rebinding) stays on in both cases, and a request's body is
bounded. What is served where is said in one line on stderr, never the tokens.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from netbox_chat.config import Settings, without_userinfo
from netbox_chat.credentials import run_token_command
from netbox_chat.errors import ExitStatus, UserFacingError

from .server import build_server

TOKEN_ENV = "NETBOX_CHAT_MCP_TOKEN"
TOKEN_COMMAND_ENV = "NETBOX_CHAT_MCP_TOKEN_COMMAND"
MAX_BODY = 256 * 1024  # bytes of one HTTP request: the largest arguments are 64 KiB
PATH = "/mcp"
MIN_TOKEN = 16  # characters: a bearer token shorter than this is refused as guessable

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Reach:
    """Where the server listens: stdio, or HTTP on `host`:`port`."""

    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"


def bearer_token(environ: MutableMapping[str, str] | None = None) -> str | None:
    """The HTTP bearer token: NETBOX_CHAT_MCP_TOKEN, or the first line printed by
    the command in NETBOX_CHAT_MCP_TOKEN_COMMAND (split as a shell would, never
    run by one); None when neither is set."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV, "").strip()
    command = env.get(TOKEN_COMMAND_ENV, "").strip()
    if token and command:
        raise UserFacingError(f"set {TOKEN_ENV} or {TOKEN_COMMAND_ENV}, not both")
    if command:
        token = run_token_command(tuple(shlex.split(command)), None, named=TOKEN_COMMAND_ENV)
    if token and len(token) < MIN_TOKEN:
        raise UserFacingError(
            f"the MCP bearer token is {len(token)} characters; use at least {MIN_TOKEN} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return token or None


def check_reach(reach: Reach, token: str | None) -> None:
    """Refuse HTTP beyond loopback without a bearer token (exit 2)."""
    if reach.http and not reach.loopback and token is None:
        raise UserFacingError(
            f"--host {reach.host} would let anyone who reaches it read your NetBox: set "
            f"{TOKEN_ENV} (or {TOKEN_COMMAND_ENV}) to a bearer token clients must send",
            exit_status=ExitStatus.USAGE,
        )


def start_line(settings: Settings, reach: Reach, token: str | None) -> str:
    """The one line said at start: what is exposed, where, and behind what."""
    netbox = without_userinfo(settings.netbox_url or "")
    what = f"netbox-chat mcp: read-only NetBox tools of {netbox} and check_answer"
    if not reach.http:
        return f"{what}, on stdio"
    guard = "bearer token required" if token else "no token: loopback only"
    return f"{what}, on {reach.url} ({guard}; Host/Origin checked)"


class BearerGuard:
    """Every HTTP request must carry `Authorization: Bearer <token>` (compared in
    constant time); others get 401 before the MCP app sees them."""

    def __init__(self, app: ASGI, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"www-authenticate", b'Bearer realm="netbox-chat"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"bearer token required\n"})
                return
        await self.app(scope, receive, send)


def serve(settings: Settings, reach: Reach, token: str | None) -> None:
    """Serve until the client goes (stdio) or the process is stopped (HTTP);
    `token`: the bearer HTTP clients must send (`bearer_token`)."""
    import anyio

    check_reach(reach, token)
    anyio.run(_serve, settings, reach, token)


async def _serve(settings: Settings, reach: Reach, token: str | None) -> None:
    from importlib.metadata import version

    from netbox_chat.netbox.client import NetBoxClient
    from netbox_chat.netbox.tools import build_netbox_tools

    assert settings.netbox_url is not None  # the command refuses to start without one
    client = NetBoxClient.of(settings)  # bounded as the chat's, its fixes naming their source
    try:
        server = build_server(
            build_netbox_tools(client), version=version("netbox-chat"), sessions=reach.http
        )
        print(start_line(settings, reach, token), file=sys.stderr, flush=True)
        if reach.http:
            await _serve_http(server, reach, token)
        else:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
    finally:
        await client.aclose()


async def _serve_http(server: Any, reach: Reach, token: str | None) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    security = None  # on loopback: the SDK's own allow-list of 127.0.0.1, localhost, [::1]
    if not reach.loopback:
        named = f"[{reach.host}]" if ":" in reach.host else reach.host
        security = TransportSecuritySettings(
            allowed_hosts=[f"{named}:{reach.port}", named],
            allowed_origins=[f"http://{named}:{reach.port}", f"https://{named}"],
        )
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host="127.0.0.1",  # only read when `security` is None: the SDK's loopback list
        transport_security=security,
        max_request_body_size=MAX_BODY,
    )
    guarded: ASGI = BearerGuard(app, token) if token else app
    config = uvicorn.Config(
        guarded,
        host=reach.host,
        port=reach.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    await uvicorn.Server(config).serve()
