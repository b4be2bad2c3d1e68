"""A small async NetBox REST client: GET only, pooled, retried, cancellable.

- One ``httpx.AsyncClient`` per client, so connections are pooled.
- Retries (``retries`` extra attempts, short exponential backoff) only on connection
  errors and 502/503/504; a read timeout is not retried (a slow NetBox stays slow).
- Every reply is bounded: its body is streamed and read to at most ``max_bytes``
  (decoded), nothing past it is held, and the whole call (connect, every attempt,
  the last byte) has a deadline of ``DEADLINE_READS`` times ``timeout``; httpx's
  own ``timeout`` bounds only each read, so a body that never ends would
  otherwise be read for ever. Past either, the call fails in one line
  (``NetBoxTooLarge``, ``NetBoxTimeout``) and the tool says so to the model.
- Everything runs on the event loop: cancelling the task (Ctrl-C) aborts the request.
- Every failure is a ``NetBoxError`` subclass whose ``str()`` is one readable line and
  never contains the token (nor does any repr or log line of this module).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import httpx

from netbox_chat import tls
from netbox_chat.config import (
    DEFAULT_NETBOX_MAX_BYTES,
    TOKEN_ENV,
    Settings,
    mask_token,
    source_of,
    without_userinfo,
)
from netbox_chat.words import count

log = logging.getLogger(__name__)

USER_AGENT = "netbox-chat"
RETRY_STATUS = frozenset({502, 503, 504})
DEADLINE_READS = 4
"""A whole call may take this many read time-outs in all (60 s by default):
room for a slow page, never for a reply that does not end."""


class NetBoxError(Exception):
    """A NetBox call that failed; ``str()`` is one user-readable line."""

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None) -> None:
        super().__init__(" ".join(message.split()))
        self.status = status
        self.detail = detail


class NetBoxConnectionError(NetBoxError):
    """NetBox could not be reached (refused, DNS, connect timeout), after retries."""


class NetBoxTimeout(NetBoxError):
    """NetBox did not answer in time."""


class NetBoxAuthError(NetBoxError):
    """401/403: no token was sent, the token was refused, or it lacks permission
    (``cause``: "missing", "refused" or "permission", from NetBox's own detail)."""

    cause: str = "refused"


class NetBoxNotFound(NetBoxError):
    """404 with a JSON body: the endpoint exists, the object does not."""


class NetBoxNoEndpoint(NetBoxError):
    """404 with an HTML page: there is no such API endpoint."""


class NetBoxBadRequest(NetBoxError):
    """400: NetBox rejected a filter value; ``detail`` holds its field errors."""


class NetBoxServerError(NetBoxError):
    """5xx from NetBox (after retries for 502/503/504)."""


class NetBoxBadResponse(NetBoxError):
    """A response that is not the JSON NetBox should send."""


class NetBoxTooLarge(NetBoxError):
    """A reply whose body passed ``max_bytes``: cut off, not read further."""


# NetBox 4.7's own 403 details (netbox/api/authentication.py, and DRF's
# NotAuthenticated and PermissionDenied defaults): no token sent, a token it
# refused (its detail names why: invalid, expired, disabled, source IP, user
# inactive), or a valid token whose user may not read this.
NO_CREDENTIALS = "Authentication credentials were not provided."
NO_PERMISSION = "You do not have permission to perform this action."
AUTH_CAUSES = {
    "missing": "No token was sent: set {token}.",
    "refused": "The token from {token} is wrong, expired or disabled.",
    "permission": "The token from {token} is valid but lacks permission for this.",
}
"""Why NetBox said no, by cause, naming where the token comes from (`token`:
config.source_of's words for it)."""
ANY_TOKEN = f"{TOKEN_ENV} (or a profile's token_env or token_command)"
"""Where a token would come from when nothing names one."""


def auth_cause(code: int, detail: Any, *, sent_token: bool) -> str:
    """Why NetBox said 401/403, as a key of ``AUTH_CAUSES``."""
    if not sent_token or detail == NO_CREDENTIALS:
        return "missing"
    if detail == NO_PERMISSION or (code == 403 and "permission" in str(detail).lower()):
        return "permission"
    return "refused"


# The scheme word NetBox's token pages show before the token: NetBox >= 4.5 shows a
# v2 token as ``Bearer nbt_<key>.<secret>`` and its docs write v1 ones as
# ``Token <key>`` (https://netboxlabs.com/docs/netbox/integrations/rest-api/#authentication).
_SCHEME = re.compile(r"(?i)\s*(?:bearer|token)\s+")


def bare_token(token: str) -> str:
    """``token`` without a leading ``Bearer ``/``Token `` copied with it from NetBox's
    page: sent as is it would go out as ``Token Bearer nbt_...`` and be refused, and
    the secret part would escape masking."""
    token = token.strip()
    scheme = _SCHEME.match(token)
    return token[scheme.end() :].strip() if scheme else token


def auth_header(token: str) -> str:
    """v2 tokens (``nbt_<key>.<secret>``) are Bearer tokens; v1 40-char tokens use 'Token'."""
    token = bare_token(token)
    return f"Bearer {token}" if token.startswith("nbt_") else f"Token {token}"


def normalize_base_url(url: str) -> str:
    """'http://nb:8000/api/' -> 'http://nb:8000' (the client adds /api/ itself)."""
    url = url.strip().rstrip("/")
    if url.endswith("/api"):
        url = url[: -len("/api")]
    if "://" not in url:
        url = "http://" + url
    return url


class NetBoxClient:
    """Async, read-only NetBox API client."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float = 15.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: float = 0.25,
        url_from: str = "NETBOX_URL",
        token_from: str = TOKEN_ENV,
        max_bytes: int = DEFAULT_NETBOX_MAX_BYTES,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        # Where the URL and the token came from, named in the fixes: a
        # profile's netbox_url and token_env, not always the variables.
        self.url_from = url_from
        self.token_from = token_from
        self._shown_url = without_userinfo(self.base_url)
        self._token = bare_token(token) if token else None
        self._token = self._token or None
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_bytes = max_bytes
        self._outage: NetBoxError | None = None
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = auth_header(self._token)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            transport=transport,
            follow_redirects=True,
            verify=tls.context(),
        )

    @classmethod
    def of(cls, settings: Settings, **options: Any) -> NetBoxClient:
        """The client of `settings`' NetBox, its errors naming where the URL
        and the token came from; `options` as the constructor's (timeout,
        retries)."""
        if settings.netbox_url is None:
            raise ValueError("no NetBox URL")  # the callers refuse first, with the fix
        options.setdefault("timeout", settings.netbox_timeout)
        options.setdefault("max_bytes", settings.netbox_max_bytes)
        return cls(
            settings.netbox_url,
            settings.netbox_token,
            url_from=source_of(settings, "netbox_url"),
            token_from=source_of(settings, "token"),
            **options,
        )

    def scrub(self, text: str) -> str:
        """``text`` with the token (and its secret part) masked."""
        return mask_token(text, self._token)

    def __repr__(self) -> str:
        tok = "***" if self._token else None
        return f"NetBoxClient(base_url={self._shown_url!r}, token={tok})"

    async def __aenter__(self) -> NetBoxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _error(self, cls: type[NetBoxError], message: str, **kw: Any) -> NetBoxError:
        return cls(self.scrub(message), **kw)

    async def get(
        self,
        path: str,
        params: Sequence[tuple[str, str]] | None = None,
        *,
        timeout: float | None = None,
        optional: bool = False,
    ) -> Any:
        """GET /api/<path>/ and return the parsed JSON, or raise a ``NetBoxError``.

        ``optional``: a 401/403 or a time-out here is no outage (see ``take_outage``):
        the tools can do without the answer; the user's question may not need it.
        """
        try:
            return await self._get(path, params, timeout=timeout, optional=optional)
        except NetBoxConnectionError as e:
            self._outage = self._outage or e
            raise
        except (NetBoxAuthError, NetBoxTimeout) as e:
            if not optional:
                self._outage = self._outage or e
            raise

    def take_outage(self) -> NetBoxError | None:
        """The first failure since the last call that meant NetBox could not
        answer: it could not be reached, it did not answer in time, or it refused
        the token. A turn that met one was answered without (some of) NetBox, and
        the user must be told so plainly (the tool results only say it to the
        model)."""
        outage, self._outage = self._outage, None
        return outage

    async def _get(
        self,
        path: str,
        params: Sequence[tuple[str, str]] | None,
        *,
        timeout: float | None,
        optional: bool,
    ) -> Any:
        rel = "/api/" + path.strip("/") + "/"
        if rel == "/api//":
            rel = "/api/"
        kw: dict[str, Any] = {}
        if timeout is not None:
            kw["timeout"] = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        deadline = DEADLINE_READS * (timeout or self.timeout)
        try:
            async with asyncio.timeout(deadline):
                return await self._attempts(rel, params, kw)
        except TimeoutError:
            raise self._error(
                NetBoxTimeout,
                f"NetBox's reply to {rel} took over {deadline:g}s in all "
                f"({DEADLINE_READS} x NETBOX_TIMEOUT), so it was cut off. "
                "Try a smaller request or try again later.",
            ) from None

    async def _attempts(
        self, rel: str, params: Sequence[tuple[str, str]] | None, kw: dict[str, Any]
    ) -> Any:
        attempt = 0
        while True:
            try:
                log.debug("GET %s params=%s", rel, list(params or ()))
                request = self._http.build_request("GET", rel, params=list(params or ()), **kw)
                resp = await self._http.send(request, stream=True)
                try:
                    body = await self._read_body(resp, rel)
                finally:
                    await resp.aclose()
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff * (2**attempt))
                    attempt += 1
                    continue
                what = "timed out connecting" if isinstance(e, httpx.ConnectTimeout) else "refused"
                raise self._error(
                    NetBoxConnectionError,
                    f"Cannot reach NetBox at {self._shown_url} (connection {what} after "
                    f"{count(attempt + 1, 'attempt')}). Is it running, and is "
                    f"{self.url_from} right?",
                ) from e
            except httpx.TimeoutException as e:
                raise self._error(
                    NetBoxTimeout,
                    f"NetBox did not answer within {self.timeout:g}s ({rel}). "
                    "Try a smaller request or try again later.",
                ) from e
            except httpx.HTTPError as e:
                raise self._error(
                    NetBoxConnectionError,
                    f"Connection to NetBox failed during {rel}: {type(e).__name__}.",
                ) from e
            if resp.status_code in RETRY_STATUS and attempt < self.retries:
                await asyncio.sleep(self.backoff * (2**attempt))
                attempt += 1
                continue
            return self._handle(resp, body, rel)

    async def _read_body(self, resp: httpx.Response, rel: str) -> bytes:
        """The body, decoded, read only up to ``max_bytes``: a longer one (as
        its Content-Length says, or as it streams) is refused without reading
        or keeping the rest."""
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise self._too_large(rel)
        body = bytearray()
        async for chunk in resp.aiter_bytes():
            if len(body) + len(chunk) > self.max_bytes:
                raise self._too_large(rel)
            body += chunk
        return bytes(body)

    def _too_large(self, rel: str) -> NetBoxError:
        return self._error(
            NetBoxTooLarge,
            f"NetBox's reply to {rel} is over {self.max_bytes:,} bytes (NETBOX_MAX_BYTES), "
            "so it was cut off unread. Ask for fewer rows or fields.",
        )

    def _handle(self, resp: httpx.Response, raw: bytes, rel: str) -> Any:
        code = resp.status_code
        ctype = resp.headers.get("content-type", "")
        is_json = "json" in ctype
        body: Any = None
        if is_json:
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                if code == 200:
                    raise self._error(
                        NetBoxBadResponse,
                        f"NetBox sent malformed JSON for {rel} ({len(raw)} bytes).",
                        status=code,
                    ) from None
                is_json = False
        if code == 200:
            if not is_json:
                raise self._error(
                    NetBoxBadResponse,
                    f"NetBox answered {rel} with {ctype or 'no content type'}, not JSON. "
                    f"Is {self.url_from} ({self._shown_url}) the NetBox base URL?",
                    status=code,
                )
            return body
        detail = body.get("detail") if isinstance(body, dict) else None
        if code in (401, 403):
            cause = auth_cause(code, detail, sent_token=self._token is not None)
            named = self.token_from if self._token or self.token_from != TOKEN_ENV else ANY_TOKEN
            because = AUTH_CAUSES[cause].format(token=named)
            err = self._error(
                NetBoxAuthError,
                f"NetBox refused the request ({code}: {detail or 'forbidden'}). {because}",
                status=code,
                detail=detail,
            )
            assert isinstance(err, NetBoxAuthError)
            err.cause = cause
            raise err
        if code == 404:
            if is_json:
                raise self._error(
                    NetBoxNotFound,
                    f"No such object ({rel}): NetBox says {detail or 'not found'!r}.",
                    status=code,
                    detail=detail,
                )
            raise self._error(
                NetBoxNoEndpoint,
                f"NetBox has no API endpoint {rel} (404 page, not JSON).",
                status=code,
            )
        if code == 400:
            raise self._error(
                NetBoxBadRequest,
                f"NetBox rejected the request (400): {_field_errors(body, raw)}",
                status=code,
                detail=body,
            )
        if code >= 500:
            raise self._error(
                NetBoxServerError,
                f"NetBox server error {code} on {rel}"
                + (" (after retries)." if code in RETRY_STATUS and self.retries else "."),
                status=code,
            )
        raise self._error(
            NetBoxError,
            f"NetBox answered {code} for {rel}: {detail or resp.reason_phrase}.",
            status=code,
        )

    async def status(self) -> dict[str, Any]:
        """GET /api/status/ (NetBox version, Django version, plugins, workers)."""
        data = await self.get("status")
        if not isinstance(data, dict):
            raise self._error(NetBoxBadResponse, "NetBox /api/status/ did not return an object.")
        return data

    async def custom_fields(self) -> list[dict[str, Any]]:
        """Every custom field: name, type, object types, filter logic (one small request)."""
        fields = "name,label,type,object_types,filter_logic"
        data = await self.get(
            "extras/custom-fields", [("fields", fields), ("limit", "1000")], optional=True
        )
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise self._error(NetBoxBadResponse, "NetBox custom-fields answer has no results.")
        return [r for r in results if isinstance(r, dict)]

    async def object_type_names(self) -> dict[str, str]:
        """NetBox's object type name for each API endpoint: ``{"/api/dcim/devices/":
        "dcim.device", "/api/plugins/chat-demo/widgets/": "netbox_chat_demo.widget"}``."""
        data = await self.get(
            "core/object-types",
            [("fields", "app_label,model,rest_api_endpoint"), ("limit", "1000")],
            optional=True,
        )
        results = data.get("results") if isinstance(data, dict) else None
        return {
            str(r["rest_api_endpoint"]): f"{r.get('app_label')}.{r.get('model')}"
            for r in results or ()
            if isinstance(r, dict) and r.get("rest_api_endpoint")
        }

    async def schema(self, timeout: float = 120.0) -> dict[str, Any]:
        """The OpenAPI schema (about 14.6 MB for 4.7; takes seconds)."""
        data = await self.get("schema", [("format", "json")], timeout=timeout)
        if not isinstance(data, dict):
            raise self._error(NetBoxBadResponse, "NetBox /api/schema/ did not return an object.")
        return data


PREFLIGHT_TIMEOUT = 10.0
"""The longest the chat's check of NetBox at start may take (seconds)."""


async def access_problem(settings: Settings, *, timeout: float = PREFLIGHT_TIMEOUT) -> str | None:
    """Why the chat's NetBox cannot be read, in the client's one line with
    its fix naming where the URL or the token came from (unreachable, no
    answer in time, the token refused, not a NetBox at that URL); None when
    `/api/status/` answers with the token. One request, no retry: the chat
    asks it in the background as it starts, so that a wrong token or a
    NetBox that is down is said before the first answer, not after it."""
    client = NetBoxClient.of(settings, timeout=min(timeout, settings.netbox_timeout), retries=0)
    try:
        await client.status()
    except NetBoxError as exc:
        return str(exc)
    finally:
        await client.aclose()
    return None


def _field_errors(body: Any, raw: bytes) -> str:
    if isinstance(body, dict):
        parts = []
        for k, v in body.items():
            if isinstance(v, list):
                v = " ".join(str(x) for x in v)
            parts.append(f"{k}: {v}")
        return "; ".join(parts)[:600]
    if isinstance(body, list):
        return " ".join(str(x) for x in body)[:600]
    try:
        return json.dumps(raw[:300].decode("utf-8", errors="replace"))
    except ValueError:  # pragma: no cover
        return "(unreadable body)"
