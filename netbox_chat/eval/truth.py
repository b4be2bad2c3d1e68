"""The harness's own read-only NetBox client and the queries that compute the truth.

Written apart from the agent's tools (netbox_chat/netbox/) on purpose: a bug in
a tool must not be able to grade itself. A `Query` is an API path and its
filters on the configured NetBox, plus what to take from the rows; it is also
how a user's `--questions` file states where an answer comes from, so it is
validated as untrusted input: a path of the NetBox API, never a URL.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from netbox_chat import tls
from netbox_chat.errors import UserFacingError
from netbox_chat.netbox.client import auth_cause, auth_header

PAGE = 1000
"""Rows per request: NetBox's default MAX_PAGE_SIZE, so a listing takes the fewest calls."""

MAX_ROWS = 100_000
"""A listing longer than this is not an answer anyone can check by reading it."""

SMALLEST_PAGE = 50
"""A page that times out is asked again four times smaller, down to this."""

ATTEMPTS = 3
"""Tries of one request that times out or gets a 5xx, waiting `backoff` seconds,
then twice that, between them: a NetBox under load recovers, a read that still
fails is a failure, never "no data"."""

_PATH = re.compile(r"^[a-z][a-z0-9-]*(/[a-z][a-z0-9-]*)+(/[0-9]+)?$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$")
TAKES = ("count", "list", "distinct", "value")
_CONTROL = frozenset({"limit", "offset", "format", "export", "brief", "fields", "exclude"})


class QueryError(UserFacingError):
    """A query that cannot be run as written (a user's file, or NetBox said no)."""


class NetBoxUnreadable(UserFacingError):
    """NetBox cannot be read at all (unreachable, or it refused the token): no
    question's truth can be computed, so the run stops with the fix rather
    than skip every template as having no data."""


class NoData(QueryError):
    """NetBox said this is not there for us: 403 (the token may not view it) or
    404 (this NetBox has no such endpoint or object). The one "no data"."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class ReadFailed(QueryError):
    """NetBox did not give the rows: time-outs, 5xx or no connection, after every
    try. Never "no data": what needs this read is left out, and said so."""


class TimedOut(ReadFailed):
    """A request that took longer than the client's time-out (a smaller page may not)."""


@dataclass(frozen=True)
class Query:
    """`GET /api/<path>/?<params>`, rows kept where every `where` holds, then `take`.

    `take` is `count` (how many rows), `list:<field>` (that field of each row),
    `distinct:<field>` (its distinct values, sorted) or `value:<field>` (of the
    one row). A path ending in an id reads that one object. `where` compares a
    dotted field with a value, `None` meaning the field is empty, a leading
    `!` on the field negating it: filters NetBox spells differently across
    versions are applied here, on rows NetBox returned, rather than guessed.
    """

    path: str
    params: tuple[tuple[str, str], ...] = ()
    take: str = "count"
    where: tuple[tuple[str, str | None], ...] = field(default=())

    def __post_init__(self) -> None:
        check_query(self)

    @property
    def single(self) -> bool:
        return self.path.rsplit("/", 1)[-1].isdigit()

    def text(self) -> str:
        """The query as a person would read it in a report."""
        query = "&".join(f"{key}={value}" for key, value in self.params)
        words = [f"GET /api/{self.path}/" + (f"?{query}" if query else "")]
        for name, value in self.where:
            negated = name.startswith("!")
            words.append(
                f"where {name.lstrip('!')} {'!=' if negated else '='} "
                + ("empty" if value is None else value)
            )
        words.append(self.take)
        return " | ".join(words)

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "params": dict(self.params),
            "where": [[name, value] for name, value in self.where],
            "take": self.take,
            "text": self.text(),
        }


def check_query(query: Query) -> None:
    """Refuse what is not a plain read of this NetBox's API: a scheme, a host,
    `..`, odd characters, paging of its own, an unknown `take`."""
    if not _PATH.match(query.path):
        raise QueryError(f"query path {query.path!r} is not a NetBox API path like dcim/devices")
    for key, value in query.params:
        if not _PARAM.match(key) or key in _CONTROL:
            raise QueryError(f"query parameter {key!r} is not a NetBox filter")
        if not isinstance(value, str) or len(value) > 200 or "\n" in value:
            raise QueryError(f"query parameter {key}={value!r} is not a filter value")
    kind, _, name = query.take.partition(":")
    if kind not in TAKES or (kind == "count") != (name == ""):
        raise QueryError(f"query take {query.take!r}: use count, list:F, distinct:F or value:F")
    if name and not _FIELD.match(name):
        raise QueryError(f"query field {name!r} is not a dotted field name")
    if query.single and kind != "value":
        raise QueryError("a query of one object (a path ending in an id) takes value:F")
    for where_field, wanted in query.where:
        if not _FIELD.match(where_field.removeprefix("!")):
            raise QueryError(f"query where {where_field!r} is not a dotted field name")
        if wanted is not None and not isinstance(wanted, str):
            raise QueryError(f"query where {where_field}={wanted!r} is not text")


def dig(row: Mapping[str, Any], dotted: str) -> Any:
    """`row["site"]["name"]` for `site.name`; a choice field's value for
    `status` (`{"value": "active", ...}` → "active"); None when absent."""
    value: Any = row
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    if isinstance(value, Mapping) and "value" in value and "id" not in value:
        value = value["value"]
    return value


def label(row: Mapping[str, Any]) -> str | None:
    """What a person calls an object: its name, or for an object without one (a
    device need not have one: 22 of the public demo's 72 have none) NetBox's own
    display form, else `#<id>`, so every object counts in a truth."""
    name = row.get("name")
    if name not in (None, ""):
        return str(name)
    display = row.get("display")
    if isinstance(display, str) and display.strip():
        return display
    return None if row.get("id") is None else f"#{row['id']}"


def _owner(row: Mapping[str, Any], dotted: str) -> Mapping[str, Any] | None:
    """The object whose name a field is (`name`: the row; `device.name`: its
    device), or None for a field that is not a name."""
    if dotted != "name" and not dotted.endswith(".name"):
        return None
    owner = row if dotted == "name" else dig(row, dotted.removesuffix(".name"))
    return owner if isinstance(owner, Mapping) else None


def _named(row: Mapping[str, Any], dotted: str) -> Any:
    """`dig`, but a name (`name`, `device.name`) of an object without one is its
    label: an unnamed device at the far end of a cable still counts."""
    if dotted != "name" and not dotted.endswith(".name"):
        return dig(row, dotted)
    owner = _owner(row, dotted)
    return None if owner is None else label(owner)


def other_names(query: Query, rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """The other names of the objects a query answers with by name (`list:name`,
    `value:site.name`): a slug or display form, and for an object without a
    name its `#<id>`, so that an answer naming an unnamed device "id 17" names
    the "Dell R640 (17)" of the truth. A named object's id is left out: ids
    repeat across object types, and "rack id 1" must not name site #1."""
    field = query.take.partition(":")[2]
    if field != "name" and not field.endswith(".name"):
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for row in rows:
        if not _holds(row, query.where):
            continue
        obj = _owner(row, field)
        if obj is None:
            continue
        name = label(obj)  # as the truth names it (truth.take)
        forms = [obj.get("display"), obj.get("slug")]
        if obj.get("name") in (None, "") and obj.get("id") is not None:
            forms.append(f"#{obj['id']}")
        others = tuple(dict.fromkeys(f for f in forms if isinstance(f, str) and f and f != name))
        if isinstance(name, str) and name and others:
            found[name] = others
    return found


def _holds(row: Mapping[str, Any], where: Sequence[tuple[str, str | None]]) -> bool:
    for name, wanted in where:
        negated = name.startswith("!")
        value = dig(row, name.lstrip("!"))
        if wanted is None:
            same = value in (None, "", [])
        else:
            same = value is not None and str(value) == wanted
        if same == negated:
            return False
    return True


def take(query: Query, rows: Sequence[Mapping[str, Any]]) -> int | str | list[str] | None:
    """What `query` answers, from the rows NetBox returned (pure)."""
    kept = [row for row in rows if _holds(row, query.where)]
    kind, _, name = query.take.partition(":")
    if kind == "count":
        return len(kept)
    values = [_named(row, name) for row in kept]
    texts = [str(value) for value in values if value not in (None, "")]
    if kind == "list":
        return texts
    if kind == "distinct":
        return sorted(set(texts))
    return texts[0] if len(kept) == 1 and texts else None


class TruthClient:
    """A synchronous, read-only client for the truth: GET only, one NetBox.

    Paging is done by offset on the configured URL, never by following the
    `next` link a server sends, so a query cannot be led to another host.
    `calls` says what the harness itself cost (bench/). One client may be read
    from several threads at once (httpx.Client is thread-safe)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        url_from: str = "NETBOX_URL",
        token_from: str = "NETBOX_TOKEN",
    ) -> None:
        # Where the URL and the token came from (config.source_of), named in
        # the fix when NetBox cannot be reached or refuses the token.
        self.url_from, self.token_from = url_from, token_from
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = auth_header(token)
        self.base = url.rstrip("/") + "/api/"
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            verify=tls.context(),
        )
        self.timeout = timeout
        self.backoff = backoff
        self.calls = 0
        self._lock = threading.Lock()  # reads run in parallel (questions.read_catalog)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TruthClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get(
        self, path: str, params: Sequence[tuple[str, str]] = (), *, patient: bool = True
    ) -> Any:
        """One GET, tried again after a time-out or a 5xx (`patient=False`: a
        time-out is raised at once, for a caller that will ask for less)."""
        failure: ReadFailed | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            failure = self._try(path, params)
            if not isinstance(failure, ReadFailed):
                return failure
            if isinstance(failure, TimedOut) and not patient:
                break
        assert failure is not None
        raise failure

    def _try(self, path: str, params: Sequence[tuple[str, str]]) -> Any:
        """The decoded reply, or the ReadFailed to try again after."""
        with self._lock:
            self.calls += 1
        where = f"GET /api/{path.strip('/')}/"
        try:
            response = self._http.get(self.base + path.strip("/") + "/", params=list(params))
        except httpx.ConnectError as exc:  # refused: nothing listens there (a slow one times out)
            raise NetBoxUnreadable(
                f"NetBox did not answer {where}: {exc}: is it running, "
                f"and is {self.url_from} right?"
            ) from None
        except httpx.TimeoutException:
            return TimedOut(f"{where} timed out ({ATTEMPTS} tries of {self.timeout:g} s)")
        except httpx.HTTPError as exc:
            return ReadFailed(f"NetBox did not answer {where}: {exc}")
        status = response.status_code
        if status in (401, 403) and self._refused(response):
            raise NetBoxUnreadable(
                f"NetBox refused {where} (HTTP {status}): check the token from {self.token_from}"
            )
        if status in (403, 404):
            why = "the token may not view it" if status == 403 else "this NetBox has none"
            raise NoData(f"NetBox answered {where} with HTTP {status} ({why})", path.strip("/"))
        if status >= 500 or status == 429:
            return ReadFailed(f"NetBox answered {where} with HTTP {status} ({ATTEMPTS} tries)")
        if status != 200:
            raise QueryError(f"NetBox answered {where} with HTTP {status}")
        try:
            return response.json()
        except ValueError:
            raise QueryError(f"NetBox sent no JSON for {where}") from None

    def _refused(self, response: httpx.Response) -> bool:
        """Whether a 401/403 refuses the token itself (or its absence), not
        only this one listing to a token without permission for it."""
        try:
            detail = response.json().get("detail")
        except (ValueError, AttributeError):
            detail = None
        sent = "Authorization" in self._http.headers
        return auth_cause(response.status_code, detail, sent_token=sent) != "permission"

    def rows(self, path: str, params: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Every row of a listing, page by page; a page that times out is asked
        again smaller. All of them or an error: never a part taken for the whole."""
        rows: list[dict[str, Any]] = []
        size = PAGE
        while True:
            try:
                page = self.get(
                    path,
                    [*params, ("limit", str(size)), ("offset", str(len(rows)))],
                    patient=size <= SMALLEST_PAGE,
                )
            except TimedOut:
                if size <= SMALLEST_PAGE:
                    raise
                size = max(SMALLEST_PAGE, size // 4)
                continue
            if not isinstance(page, dict) or not isinstance(page.get("results"), list):
                raise QueryError(f"GET /api/{path}/ is not a NetBox listing")
            batch = [row for row in page["results"] if isinstance(row, dict)]
            rows.extend(batch)
            if len(rows) > MAX_ROWS:
                raise QueryError(f"GET /api/{path}/ lists more than {MAX_ROWS:,} rows")
            if not batch or len(rows) >= int(page.get("count") or 0):
                return rows

    def count(self, path: str, params: Sequence[tuple[str, str]] = ()) -> int:
        page = self.get(path, [*params, ("limit", "1")])
        if not isinstance(page, dict) or not isinstance(page.get("count"), int):
            raise QueryError(f"GET /api/{path}/ is not a NetBox listing")
        return int(page["count"])

    def answer(
        self, query: Query, names: dict[str, tuple[str, ...]] | None = None
    ) -> int | str | list[str] | None:
        """Run `query` against NetBox: one request for a plain count, the
        listing otherwise. `names`, when given, receives the other names of
        the objects the answer names (other_names)."""
        if query.take == "count" and not query.where and not query.single:
            return self.count(query.path, query.params)
        if query.single:
            row = self.get(query.path)
            rows = [row] if isinstance(row, dict) else []
        else:
            rows = self.rows(query.path, query.params)
        if names is not None:
            names.update(other_names(query, rows))
        return take(query, rows)
