"""The four read-only NetBox tools the agent calls.

Names and arguments follow the NetBox MCP server's tools, so prompts written for it
work here. Every tool returns a string: compact JSON on success, ``Error: ...`` in plain
words otherwise. They never raise for NetBox, HTTP or validation problems; only
cancellation (``asyncio.CancelledError``) goes through, so Ctrl-C aborts the request.

Every filter is validated against the filter table before anything is sent (see
validation.py): NetBox silently ignores what it does not understand and answers with
the whole list.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool

from netbox_chat.models.window import result_budget
from netbox_chat.visible import visible

from .arguments import Reading, read_arguments
from .client import (
    NetBoxAuthError,
    NetBoxBadRequest,
    NetBoxClient,
    NetBoxError,
    NetBoxServerError,
)
from .custom_fields import with_custom_fields
from .names import (
    Lookups,
    explain_bad_request,
    generic_relations,
    reread_refused,
    resolve_names,
)
from .object_types import (
    FilterTable,
    ObjectType,
    UnknownObjectType,
    load_cached_table,
    save_cached_table,
    schema_fingerprint,
    shipped_table,
)
from .validation import (
    FilterRejected,
    build_params,
    check_fields,
    check_ordering,
)

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
SEARCH_DEFAULT_LIMIT = 5
SEARCH_MAX_LIMIT = 25
CHANGELOG_DEFAULT_LIMIT = 10
RESULT_BUDGET = 8000  # characters of JSON in one tool result, when the window is not known
CHANGE_VALUE_MAX = 80  # characters of one before/after value in a changelog diff

# What a list shows when the model asks for neither fields nor brief: enough to answer
# the usual questions (status, where, what) without NetBox's full objects.
DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "dcim.device": (
        "id", "name", "status", "site", "location", "rack", "role", "device_type",
        "platform", "tenant", "serial", "primary_ip",
    ),
    "dcim.site": (
        "id", "name", "slug", "status", "region", "group", "tenant", "facility", "description",
    ),
    "dcim.location": ("id", "name", "slug", "site", "parent", "status", "tenant"),
    "dcim.rack": ("id", "name", "site", "location", "status", "role", "tenant", "u_height"),
    "dcim.interface": (
        "id", "device", "name", "type", "enabled", "mtu", "mac_address", "mode",
        "untagged_vlan", "description", "cable", "mgmt_only",
    ),
    "dcim.cable": ("id", "label", "type", "status", "a_terminations", "b_terminations"),
    "dcim.devicetype": ("id", "manufacturer", "model", "slug", "u_height", "device_count"),
    "dcim.platform": ("id", "name", "slug", "manufacturer", "device_count"),
    "ipam.prefix": (
        "id", "prefix", "status", "scope_type", "scope", "vrf", "vlan", "role", "tenant",
        "description",
    ),
    "ipam.ipaddress": (
        "id", "address", "status", "role", "dns_name", "assigned_object_type",
        "assigned_object", "vrf", "tenant", "description",
    ),
    "ipam.iprange": ("id", "start_address", "end_address", "size", "status", "vrf", "description"),
    "ipam.vlan": ("id", "vid", "name", "status", "site", "group", "role", "tenant", "description"),
    "ipam.vrf": ("id", "name", "rd", "tenant", "description"),
    "ipam.aggregate": ("id", "prefix", "rir", "tenant", "description"),
    "tenancy.tenant": ("id", "name", "slug", "group", "description"),
    "circuits.circuit": (
        "id", "cid", "provider", "type", "status", "tenant", "termination_a", "termination_z",
        "commit_rate",
    ),
    "virtualization.virtualmachine": (
        "id", "name", "status", "site", "cluster", "role", "platform", "tenant",
        "vcpus", "memory", "primary_ip",
    ),
    "virtualization.cluster": ("id", "name", "type", "group", "status", "scope", "tenant"),
}  # fmt: skip

SEARCH_DEFAULT_TYPES = (
    "dcim.device", "dcim.site", "dcim.rack", "dcim.interface", "ipam.ipaddress",
    "ipam.prefix", "ipam.vlan", "tenancy.tenant", "circuits.circuit",
    "virtualization.virtualmachine",
)  # fmt: skip

# Where a name that found nothing is looked for next: the common types, and circuit
# providers (a tenant's name was recorded searched as a provider, then reported "not
# found in NetBox"; docs/facts/real-models.md).
ELSEWHERE_TYPES = (*SEARCH_DEFAULT_TYPES, "circuits.provider")
ELSEWHERE_LIMIT = 3  # names shown per type that holds the name
# Filters that look an object up by its name: when they find nothing, say where it is.
NAME_FILTERS = frozenset({"name", "q", "slug", "cid", "address", "display"})

CHANGELOG_TYPE = "core.objectchange"
_DROP_KEYS = frozenset({"url", "display_url"})


# ---------------------------------------------------------------- result shaping


def _compact(value: Any, top: bool = False) -> Any:
    """NetBox JSON made small: no URLs, choices as their value, related objects as
    ``{id, display[, slug]}``, empty strings/lists/dicts dropped."""
    if isinstance(value, dict):
        if set(value) == {"value", "label"}:
            return value["value"]
        if not top and "id" in value and "display" in value:
            out = {"id": value["id"], "display": value["display"]}
            if value.get("slug"):
                out["slug"] = value["slug"]
            return out
        return {
            k: _compact(v)
            for k, v in value.items()
            if k not in _DROP_KEYS and v != "" and v != [] and v != {}
        }
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _fit_object(obj: dict[str, Any], budget: int) -> tuple[dict[str, Any], list[str]]:
    """Drop the largest fields of one object until it fits; returns the dropped names."""
    dropped: list[str] = []
    obj = dict(obj)
    while len(_dumps(obj)) > budget and len(obj) > 1:
        key = max(
            (k for k in obj if k not in ("id", "display", "name")),
            key=lambda k: len(_dumps(obj[k])),
            default=None,
        )
        if key is None:
            break
        dropped.append(key)
        del obj[key]
    return obj, dropped


def _fit_list(
    envelope: dict[str, Any], results: list[Any], budget: int
) -> tuple[list[Any], int, list[str]]:
    """As many results as fit in ``budget`` with the envelope; (kept, cut, dropped fields)."""
    room = budget - len(_dumps(envelope)) - 200
    kept: list[Any] = []
    used = 0
    dropped: list[str] = []
    for r in results:
        size = len(_dumps(r)) + 1
        if used + size > room:
            if not kept and isinstance(r, dict):  # one huge object: shrink it instead
                r, dropped = _fit_object(r, max(room, 500))
                kept.append(r)
            break
        kept.append(r)
        used += size
    return kept, len(results) - len(kept), dropped


def _error(message: str) -> str:
    return "Error: " + " ".join(str(message).split())


def _limit(n: int | None, default: int, cap: int, notes: list[str]) -> int:
    if n is None:
        return default
    if n < 1:
        # NetBox reads limit=0 as "everything up to 1000": never send it
        raise FilterRejected(f"limit must be from 1 to {cap} (got {n}; use offset to page).")
    if n > cap:
        notes.append(f"limit capped at {cap}")
        return cap
    return n


def _offset(n: int | None) -> int:
    if n is not None and n < 0:
        raise FilterRejected(f"offset must be 0 or more (got {n}).")
    return n or 0


# ---------------------------------------------------------------- the tools


class NetBoxTools:
    """The tools' implementation, bound to one client."""

    def __init__(
        self,
        client: NetBoxClient,
        table: FilterTable | None = None,
        *,
        live_schema: bool = True,
        budget: int = RESULT_BUDGET,
    ) -> None:
        self.client = client
        self._table = table
        self._custom_table: FilterTable | None = None
        self._live_schema = live_schema and table is None
        self._table_lock = asyncio.Lock()
        self.budget = budget

    async def table(self, *, custom_fields: bool = False) -> FilterTable:
        """The filter table for this NetBox, read once: the shipped one when the server is
        that version without plugins, else one derived from the server's own schema
        (cached on disk by version and plugin fingerprint). ``custom_fields``: with the
        ``cf_`` filters of its custom fields, read the first time a call uses one (so no
        other call waits for that request)."""
        async with self._table_lock:
            if self._table is None:
                self._table = await self._server_table()
            if custom_fields and self._live_schema and self._custom_table is None:
                self._custom_table = self._with_custom_fields(
                    self._table, await self._custom_fields()
                )
            return (self._custom_table if custom_fields else None) or self._table

    async def _server_table(self) -> FilterTable:
        table = shipped_table()
        if not self._live_schema:
            return table
        status = await self.client.status()
        version = str(status.get("netbox-version", ""))
        fingerprint = schema_fingerprint(status)
        if version and (version != table.netbox_version or status.get("plugins")):
            table = load_cached_table(version, fingerprint) or await self._derive(
                version, fingerprint, table
            )
        return table

    async def _derive(self, version: str, fingerprint: str, shipped: FilterTable) -> FilterTable:
        from .schema import derive_table

        try:
            names = await self.client.object_type_names()
        except NetBoxError:
            names = {}  # plugin types then keep the names their paths suggest
        try:
            schema = await self.client.schema()
            raw = derive_table(schema, type_names=names)
            if version == shipped.netbox_version:
                # the same NetBox with plugins: its own types sort as the shipped ones do
                for name, entry in raw["types"].items():
                    known = shipped.types.get(name)
                    if known is not None and known.ordering is not None:
                        entry["ordering"] = list(known.ordering)
            table = FilterTable(raw)
        except (NetBoxError, ValueError, KeyError, TypeError) as e:
            log.warning(
                "netbox-chat: filters checked against NetBox %s's table: the schema of this "
                "NetBox %s could not be read (%s)",
                shipped.netbox_version,
                version,
                visible(str(e)),  # NetBox's words, on the user's terminal
            )
            return shipped
        # NetBox caches its schema for a day per release (netbox/urls.py, cache_page), so a
        # plugin installed since can be missing from it: use such a table, never keep it
        stale = [p for p in names if p.startswith("/api/plugins/") and p not in schema["paths"]]
        if stale:
            log.warning("netbox-chat: NetBox's cached schema lacks %s; not cached", stale)
        else:
            save_cached_table(version, fingerprint, raw)
        return table

    async def _custom_fields(self) -> list[dict[str, Any]] | NetBoxError:
        try:
            return await self.client.custom_fields()
        except NetBoxError as e:
            return e

    @staticmethod
    def _with_custom_fields(
        table: FilterTable, custom: list[dict[str, Any]] | NetBoxError
    ) -> FilterTable:
        if isinstance(custom, NetBoxError):
            table = table.with_types(dict(table.types))
            table.custom_fields_note = f"this NetBox's custom fields could not be read ({custom})"
            log.warning("netbox-chat: %s", visible(table.custom_fields_note))
            return table
        return with_custom_fields(table, custom)

    async def _resolve(
        self, object_type: str, filters: Mapping[str, Any] | None = None
    ) -> tuple[FilterTable, ObjectType]:
        wants_cf = any(str(k).strip().lower().startswith("cf_") for k in filters or ())
        table = await self.table(custom_fields=wants_cf)
        return table, table.resolve(object_type)

    def _fail(self, e: BaseException) -> str:
        """``e`` as the tool's one-line refusal, within the result budget like any result."""
        if isinstance(e, NetBoxAuthError):
            said = _error(f"{e} Do not retry; tell the user.")
        elif isinstance(e, NetBoxError | FilterRejected | UnknownObjectType):
            said = _error(self.client.scrub(str(e)))
        else:
            log.exception("netbox tool failed")
            said = _error(self.client.scrub(f"unexpected {type(e).__name__}: {e}"))
        return said if len(said) <= self.budget else said[: self.budget - 1] + "…"

    # -- netbox_get_objects

    async def get_objects(self, arguments: Mapping[str, Any]) -> str:
        try:
            return await self._get_objects(read_arguments("netbox_get_objects", arguments))
        except Exception as e:
            return self._fail(e)

    async def _get_objects(self, reading: Reading) -> str:
        args, notes = reading.args, list(reading.notes)
        table, ot = await self._resolve(args["object_type"], args.get("filters"))
        filters = args.get("filters") or {}
        lookups = Lookups()
        if filters:
            filters = generic_relations(ot, filters, notes)
            filters = await resolve_names(self.client, table, ot, filters, notes, lookups)
        params = build_params(ot, filters, table, notes)
        n = _limit(args.get("limit"), DEFAULT_LIMIT, MAX_LIMIT, notes)
        off = _offset(args.get("offset"))
        order = check_ordering(ot, args.get("ordering"))
        params += self._shape_params(ot, args.get("fields"), args.get("brief"))
        params += [("limit", str(n)), ("offset", str(off))]
        if order:
            params.append(("ordering", order))
        try:
            data = await self._fetch(table, ot, filters, params, notes, lookups)
        except NetBoxServerError as e:
            if not order:
                raise
            # NetBox 4.7 answers 500 for terms it lists but cannot sort by (generic
            # relations such as assigned_object): say which argument to drop
            raise FilterRejected(
                f"{e} NetBox failed ordering {ot.name} by '{order}'; it cannot order by "
                "that. Ask again without ordering (or order by id or name)."
            ) from None
        if not isinstance(data, dict) or "results" not in data:
            return _error(f"NetBox sent an unexpected answer for {ot.path} (no results list).")
        results = [_compact(r, top=True) for r in data.get("results") or []]
        envelope: dict[str, Any] = {"object_type": ot.name}
        name = _name_sought(filters)
        if name and not data.get("count"):
            await self._elsewhere(envelope, notes, name, {ot.name})
        return self._page(envelope, data, results, off, notes)

    async def _fetch(
        self,
        table: FilterTable,
        ot: ObjectType,
        filters: Mapping[str, Any],
        params: list[tuple[str, str]],
        notes: list[str],
        lookups: Lookups,
    ) -> Any:
        """NetBox's answer to ``params``; a relation value NetBox refuses because no
        object has it is read as the object it names and asked again (each round
        replaces refused values with ones NetBox holds), else refused in one line."""
        while True:
            try:
                return await self.client.get(ot.path, params)
            except NetBoxBadRequest as e:
                again = await reread_refused(self.client, table, ot, params, e, notes, lookups)
                if again is None or again == params:
                    raise FilterRejected(explain_bad_request(table, ot, filters, e)) from None
                params = again

    def _shape_params(self, ot: ObjectType, fields: Any, brief: Any) -> list[tuple[str, str]]:
        names = check_fields(ot, fields)
        if names:
            if "id" not in names:
                names.insert(0, "id")
            return [("fields", ",".join(names))]
        if brief:
            return [("brief", "true")]
        default = DEFAULT_FIELDS.get(ot.name)
        if default:
            return [("fields", ",".join(f for f in default if f in ot.fields or not ot.fields))]
        return [("brief", "true")]

    def _truncation_note(self, had: int, kept: int, dropped: list[str], nxt: int) -> str:
        parts = [f"cut to fit {self.budget} characters"]
        if kept < had:
            parts.append(f"{kept} of {had} results shown; continue with offset={nxt}")
        if dropped:
            parts.append(f"fields left out: {', '.join(dropped)}")
        parts.append("ask for fewer fields or a smaller limit")
        return "; ".join(parts)

    # -- netbox_get_object_by_id

    async def get_object_by_id(self, arguments: Mapping[str, Any]) -> str:
        try:
            reading = read_arguments("netbox_get_object_by_id", arguments)
            args = reading.args
            _, ot = await self._resolve(args["object_type"])
            oid = args["object_id"]
            if oid < 1:
                raise FilterRejected(
                    f"object_id must be a positive whole number (got {oid}); "
                    "use netbox_get_objects or netbox_search_objects to find ids."
                )
            fields, brief = args.get("fields"), args.get("brief")
            names = check_fields(ot, fields)
            params: list[tuple[str, str]] = []
            if names:
                params.append(("fields", ",".join(names)))
            elif brief:
                params.append(("brief", "true"))
            data = await self.client.get(f"{ot.path}/{oid}", params)
            obj = _compact(data, top=True) if isinstance(data, dict) else data
            out: dict[str, Any] = {"object_type": ot.name}
            if isinstance(obj, dict):
                fitted, dropped = _fit_object(obj, self.budget - 300)
                if dropped:
                    out["truncated"] = (
                        f"cut to fit {self.budget} characters; fields left out: "
                        f"{', '.join(dropped)} (ask for them with fields=[...])"
                    )
                out["object"] = fitted
            else:
                out["object"] = obj
            if reading.notes:
                out["note"] = "; ".join(reading.notes)
            return _dumps(out)
        except Exception as e:
            return self._fail(e)

    # -- netbox_search_objects

    async def search_objects(self, arguments: Mapping[str, Any]) -> str:
        try:
            return await self._search(read_arguments("netbox_search_objects", arguments))
        except Exception as e:
            return self._fail(e)

    async def _search(self, reading: Reading) -> str:
        args = reading.args
        q = args["query"]
        if not q:
            raise FilterRejected("query is empty: NetBox would ignore it and list everything.")
        table = await self.table()
        object_types = args.get("object_types")
        wanted = list(object_types or SEARCH_DEFAULT_TYPES)
        types: list[ObjectType] = []
        unknown: list[str] = []
        for name in wanted:
            try:
                ot = table.resolve(name)
            except UnknownObjectType as e:
                unknown.append(str(e))
                continue
            if "q" not in ot.filters:
                unknown.append(f"{ot.name} cannot be searched (NetBox has no q filter there).")
                continue
            if ot not in types:
                types.append(ot)
        if unknown:
            raise FilterRejected(" ".join(unknown))
        notes = list(reading.notes)
        n = _limit(args.get("limit"), SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, notes)

        answers = await self._ask_each(types, q, n)
        found: dict[str, Any] = {}
        empty: list[str] = []
        errors: dict[str, str] = {}
        for ot, a in zip(types, answers, strict=True):
            if isinstance(a, BaseException):
                errors[ot.name] = self.client.scrub(str(a))
            elif not isinstance(a, dict) or not a.get("count"):
                empty.append(ot.name)
            else:
                rs = [_compact(r, top=True) for r in a.get("results") or []]
                found[ot.name] = {"count": a["count"], "results": rs}
        out: dict[str, Any] = {"query": q, "results": found}
        if empty:
            out["no_matches"] = empty
        if errors:
            out["errors"] = errors
        if not found:
            await self._elsewhere(out, notes, q, {ot.name for ot in types})
        if notes:
            out["note"] = "; ".join(notes)
        # over budget: drop results from the largest lists first, say so
        cut = 0
        while len(_dumps(out)) > self.budget:
            biggest = max(found.values(), key=lambda v: len(v["results"]), default=None)
            if not biggest or not biggest["results"]:
                break
            biggest["results"].pop()
            cut += 1
        if cut:
            out["truncated"] = (
                f"{cut} results cut to fit {self.budget} characters; search one object_type "
                "or use netbox_get_objects with filters"
            )
        return _dumps(out)

    async def _ask_each(self, types: list[ObjectType], q: str, n: int) -> list[Any]:
        """``q`` on each type at once, brief; answers or the exception of each (a
        refused token and a cancellation go through)."""

        async def one(ot: ObjectType) -> Any:
            return await self.client.get(ot.path, [("q", q), ("brief", "true"), ("limit", str(n))])

        answers = await asyncio.gather(*(one(ot) for ot in types), return_exceptions=True)
        for a in answers:
            if isinstance(a, NetBoxAuthError):
                raise a
            if isinstance(a, BaseException) and not isinstance(a, Exception):
                raise a  # cancellation
        return answers

    async def _elsewhere(
        self, out: dict[str, Any], notes: list[str], name: str, searched: set[str]
    ) -> None:
        """A name that found nothing, looked for in the other common types (one ``q``
        request each, at once): ``found_elsewhere`` says which hold it, so "not found"
        is never the only evidence."""
        table = await self.table()
        types = [
            table.types[t]
            for t in ELSEWHERE_TYPES
            if t in table.types and t not in searched and "q" in table.types[t].filters
        ]
        answers = await self._ask_each(types, name, ELSEWHERE_LIMIT)
        held: dict[str, Any] = {}
        for ot, a in zip(types, answers, strict=True):
            if isinstance(a, dict) and a.get("count"):
                names = [
                    str(r.get("display") or r.get("name") or r.get("id")) for r in a["results"]
                ]
                held[ot.name] = {"count": a["count"], "names": names[:ELSEWHERE_LIMIT]}
        out["found_elsewhere"] = held
        if held:
            where = ", ".join(f"{t} ({v['count']})" for t, v in held.items())
            notes.append(f"nothing here matches {name!r}, but {where} do: see found_elsewhere")
        else:
            notes.append(f"{name!r} is not in the other common types either")

    # -- netbox_get_changelogs

    async def get_changelogs(self, arguments: Mapping[str, Any]) -> str:
        try:
            return await self._changelogs(read_arguments("netbox_get_changelogs", arguments))
        except Exception as e:
            return self._fail(e)

    async def _changelogs(self, reading: Reading) -> str:
        args, notes = reading.args, list(reading.notes)
        table, ot = await self._resolve(CHANGELOG_TYPE, args.get("filters"))
        params = build_params(ot, args.get("filters"), table, notes)
        n = _limit(args.get("limit"), CHANGELOG_DEFAULT_LIMIT, MAX_LIMIT, notes)
        off = _offset(args.get("offset"))
        params += [("limit", str(n)), ("offset", str(off)), ("ordering", "-time")]
        data = await self.client.get(ot.path, params)
        if not isinstance(data, dict) or "results" not in data:
            return _error("NetBox sent an unexpected answer for the changelog (no results list).")
        entries = [_change_entry(r) for r in data.get("results") or []]
        return self._page({}, data, entries, off, notes)

    def _page(
        self,
        envelope: dict[str, Any],
        data: dict[str, Any],
        rows: list[Any],
        off: int,
        notes: list[str],
    ) -> str:
        """One page of a list answer, sized for the model: the total count, what
        was returned, where the next page starts, and a marker if it was cut."""
        count = data.get("count", len(rows))
        envelope["count"] = count
        kept, cut, dropped = _fit_list(envelope, rows, self.budget)
        envelope["returned"] = len(kept)
        envelope["offset"] = off
        nxt = off + len(kept)
        envelope["next_offset"] = nxt if nxt < count else None
        if cut or dropped:
            envelope["truncated"] = self._truncation_note(len(rows), len(kept), dropped, nxt)
        if notes:
            envelope["note"] = "; ".join(notes)
        envelope["results"] = kept
        return _dumps(envelope)


def _name_sought(filters: Mapping[str, Any]) -> str | None:
    """The name a call looks an object up by (``name``, ``name__ic``, ``q``, ...)."""
    for key, value in filters.items():
        if str(key).partition("__")[0] in NAME_FILTERS:
            first = value[0] if isinstance(value, list) and value else value
            if isinstance(first, str) and first.strip():
                return first.strip()
    return None


def _short(v: Any) -> Any:
    s = _dumps(v) if not isinstance(v, str) else v
    if len(s) > CHANGE_VALUE_MAX:
        return s[: CHANGE_VALUE_MAX - 1] + "…"
    return v


def _change_entry(r: dict[str, Any]) -> dict[str, Any]:
    """One changelog row: who did what to which object, and for updates what changed."""
    e: dict[str, Any] = {
        k: _compact(r.get(k))
        for k in (
            "id",
            "time",
            "user_name",
            "action",
            "changed_object_type",
            "changed_object_id",
            "object_repr",
        )
        if r.get(k) not in (None, "")
    }
    if r.get("message"):
        e["message"] = r["message"]
    pre, post = r.get("prechange_data"), r.get("postchange_data")
    if isinstance(pre, dict) and isinstance(post, dict):
        changes = {
            k: [_short(pre.get(k)), _short(post.get(k))]
            for k in sorted(set(pre) | set(post))
            if k != "last_updated" and pre.get(k) != post.get(k)
        }
        if changes:
            e["changes"] = changes
    return e


# ---------------------------------------------------------------- LangChain wiring


def _names(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


# What the model sees of each tool's arguments: the types are spelled out, because a
# parameter without one invites exactly the shapes arguments.py has to read back.
SCHEMAS: dict[str, dict[str, Any]] = {
    "netbox_get_objects": _schema(
        {
            "object_type": {"type": "string", "description": "e.g. dcim.device, ipam.prefix"},
            "filters": {
                "type": "object",
                "description": (
                    '{"site":"dm-akron","status":"offline"}; a list matches any (tag: all, '
                    "tag__any: any); lookups: name__ic, id__gt"
                ),
            },
            "fields": _names("fields to return (default: a short set)"),
            "brief": {"type": "boolean", "description": "minimal fields"},
            "limit": {
                "type": "integer",
                "description": f"default {DEFAULT_LIMIT}, max {MAX_LIMIT}",
            },
            "offset": {"type": "integer"},
            "ordering": {"type": "string", "description": "e.g. name or -id"},
        },
        "object_type",
    ),
    "netbox_get_object_by_id": _schema(
        {
            "object_type": {"type": "string", "description": "e.g. dcim.device"},
            "object_id": {"type": "integer"},
            "fields": _names("fields to return"),
            "brief": {"type": "boolean"},
        },
        "object_type",
        "object_id",
    ),
    "netbox_search_objects": _schema(
        {
            "query": {"type": "string"},
            "object_types": _names("default: common types"),
            "limit": {
                "type": "integer",
                "description": f"per type, default {SEARCH_DEFAULT_LIMIT}",
            },
        },
        "query",
    ),
    "netbox_get_changelogs": _schema(
        {
            "filters": {
                "type": "object",
                "description": (
                    '{"changed_object_type":"dcim.device","action":"update",'
                    '"time_after":"2026-01-01"}'
                ),
            },
            "limit": {"type": "integer", "description": f"default {CHANGELOG_DEFAULT_LIMIT}"},
            "offset": {"type": "integer"},
        }
    ),
}

DESCRIPTIONS = {
    "netbox_get_objects": (
        "List NetBox objects of one type. Filters are NetBox API filters: site, role, tenant, "
        "tag take slugs; *_id take ids; name is exact (name__ic contains); q searches. "
        "Unsupported filters are rejected with the valid ones, never ignored. "
        "Returns count (all matches), returned, next_offset."
    ),
    "netbox_get_object_by_id": "Get one NetBox object by type and numeric id.",
    "netbox_search_objects": (
        "Find objects by free text (name, serial, address, description) across common types."
    ),
    "netbox_get_changelogs": "Recent NetBox changes (who changed what, when), newest first.",
}


class NetBoxTool(BaseTool):
    """A tool handed the model's arguments exactly as they came.

    LangChain validates a tool's arguments against a pydantic model, which drops keys it
    does not know (a flattened filter) and refuses loose types before the tool runs. With
    a JSON schema (a dict) as ``args_schema`` it passes them through untouched, and
    arguments.py reads them, so nothing is dropped and every refusal is the tool's own.
    """

    run_tool: Callable[[Mapping[str, Any]], Awaitable[str]]

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        del tool_call_id
        return (tool_input,), {}

    async def _arun(self, arguments: Any) -> str:
        if not isinstance(arguments, Mapping):
            return _error(f"{self.name} takes its arguments as an object (got {arguments!r}).")
        return await self.run_tool(arguments)

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError("the NetBox tools are async: use ainvoke")


def build_netbox_tools(
    client: NetBoxClient,
    *,
    table: FilterTable | None = None,
    live_schema: bool = True,
    budget: int | None = None,
    window_tokens: int | None = None,
) -> list[BaseTool]:
    """The four async NetBox tools, bound to ``client``.

    ``table`` pins the filter table (tests); otherwise the shipped 4.7.3 table is used
    when the server is 4.7.3, and another version's own schema (cached) when not.
    One result is at most ``budget`` characters: given, or ``result_budget(window_tokens)``
    for the model's window, or ``RESULT_BUDGET`` when neither is known.
    """
    if budget is None:
        budget = RESULT_BUDGET if window_tokens is None else result_budget(window_tokens)
    impl = NetBoxTools(client, table, live_schema=live_schema, budget=budget)
    runs: dict[str, Callable[[Mapping[str, Any]], Awaitable[str]]] = {
        "netbox_get_objects": impl.get_objects,
        "netbox_get_object_by_id": impl.get_object_by_id,
        "netbox_search_objects": impl.search_objects,
        "netbox_get_changelogs": impl.get_changelogs,
    }
    return [
        NetBoxTool(
            name=name, description=DESCRIPTIONS[name], args_schema=SCHEMAS[name], run_tool=run
        )
        for name, run in runs.items()
    ]
