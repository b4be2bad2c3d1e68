"""Derive the filter table from NetBox's own OpenAPI schema.

NetBox silently ignores every query parameter its filterset does not know, so the
tools must know, per endpoint, exactly which filter names exist and which lookups
each one takes. NetBox publishes that in its OpenAPI schema (``/api/schema/``): every
list endpoint documents each filter as a query parameter (``name``, ``name__ic``,
``status__n``, ...). This module turns that 14.6 MB document into a small table:

    {"netbox_version": "4.7.3",
     "lookup_sets": [[], ["n"], ["empty", "ic", ...], ...],
     "types": {"dcim.device": {"path": "dcim/devices",
                               "filters": {"name": 5, "status": 1, ...},  # -> lookup_sets
                               "fields": ["id", "name", ...],             # serializer fields
                               "single": ["q", ...],   # not repeatable: NetBox keeps the last
                               "bool": ["cabled", ...],  # true/false only (else ignored)
                               "ordering": ["name", ...],  # honoured ?ordering= terms
                               "hints": {"site": "Site name (slug)", ...},
                               "choices": {"status": ["offline", "active", ...]},
                               "relations": {"role": "dcim.devicerole", ...}}}}

``relations`` names the type a relation filter points at, from the serializer field of
that name (``"role": {"$ref": ".../BriefDeviceRole"}``): NetBox's tree-node filters
(``role``, ``platform``, ``location``, ``region``) come with no description, so their
hint cannot say it.

``__empty`` lookups are always single and boolean, so they are not listed. ``ordering``
is not in the OpenAPI schema; it comes from NetBox itself
(tests/netbox/netbox_ordering_fields.py).

The shipped ``filters.json`` is generated with::

    tests/netbox/make_filter_table.sh   # schema from the live tier's NetBox + ordering

(``--file schema.json`` reads a saved schema instead of ``--url``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

# Query parameters that are not filters: pagination and response shaping.
NON_FILTER_PARAMS = frozenset({"brief", "fields", "omit", "limit", "offset", "ordering", "start"})

_CAMEL = re.compile(r"[^a-z0-9]")


def _model_name(serializer: str) -> str:
    """'IPAddress' -> 'ipaddress' (NetBox's serializers are named after their models)."""
    return _CAMEL.sub("", serializer.lower())


def _hint(description: str | None) -> str | None:
    """Keep short, single-line parameter descriptions such as 'Site name (slug)'."""
    if not description:
        return None
    d = description.strip()
    if "\n" in d or d.startswith("*") or len(d) > 40:
        return None
    return d


def _brief_model(prop: Any) -> str | None:
    """The model a serializer field refers to (``{"$ref": ".../BriefDeviceRole"}``,
    maybe under ``allOf`` when nullable): 'devicerole'."""
    if not isinstance(prop, dict):
        return None
    ref = prop.get("$ref") or next(
        (p.get("$ref") for p in prop.get("allOf") or () if isinstance(p, dict)), None
    )
    name = str(ref or "").rsplit("/", 1)[-1]
    return _model_name(name.removeprefix("Brief")) if name.startswith("Brief") else None


def _relation_types(types: dict[str, Any], models: dict[str, dict[str, str]]) -> None:
    """Each type's ``relations`` as type names: the one type with that model name,
    else the one in the same app; left out when neither is one."""
    by_model: dict[str, list[str]] = {}
    for name in types:
        by_model.setdefault(name.split(".", 1)[1], []).append(name)
    for name, related in models.items():
        app = name.split(".")[0]
        found: dict[str, str] = {}
        for key, model in related.items():
            named = by_model.get(model, [])
            same = [n for n in named if n.split(".")[0] == app]
            one = named if len(named) == 1 else same
            if len(one) == 1:
                found[key] = one[0]
        if found:
            types[name]["relations"] = found


def _choices(param: dict[str, Any], field: dict[str, Any] | None) -> list[str]:
    """The values a choice filter takes: the parameter's own enum, else that of the
    serializer field of the same name (``{"value": {"enum": [...]}, "label": ...}``),
    which is where NetBox 4.7 documents ``status`` and most other choice sets."""
    schema = param.get("schema", {})
    enum = schema.get("enum") or schema.get("items", {}).get("enum")
    if not enum and isinstance(field, dict):
        enum = field.get("properties", {}).get("value", {}).get("enum")
    return [str(v) for v in enum or () if v not in (None, "", "null")]


def derive_table(
    schema: dict[str, Any],
    ordering: dict[str, list[str]] | None = None,
    *,
    type_names: dict[str, str] | None = None,
    plugins: bool = True,
) -> dict[str, Any]:
    """Build the filter table from a parsed NetBox OpenAPI schema.

    ``ordering`` maps object types to the ``?ordering=`` terms NetBox honours. ``type_names``
    maps endpoints (``/api/plugins/chat-demo/widgets/``) to NetBox's own object type
    names (``netbox_chat_demo.widget``, from ``/api/core/object-types/``): a plugin's
    path does not say its app label. ``plugins=False`` leaves plugin endpoints out (the
    shipped table is NetBox's own).
    """
    components = schema.get("components", {}).get("schemas", {})
    lookup_sets: list[tuple[str, ...]] = [()]
    set_index: dict[tuple[str, ...], int] = {(): 0}
    types: dict[str, Any] = {}
    models: dict[str, dict[str, str]] = {}

    for path, item in sorted(schema.get("paths", {}).items()):
        get = item.get("get")
        if not get or "{" in path or not path.startswith("/api/"):
            continue
        if not plugins and path.startswith("/api/plugins/"):
            continue
        ref = (
            get.get("responses", {})
            .get("200", {})
            .get("content", {})
            .get("application/json", {})
            .get("schema", {})
            .get("$ref", "")
        )
        page_name = ref.rsplit("/", 1)[-1]
        if not page_name.startswith("Paginated"):
            continue  # not a list endpoint (status, schema, dashboards, ...)
        page = components.get(page_name, {})
        item_ref = page.get("properties", {}).get("results", {}).get("items", {}).get("$ref", "")
        serializer = item_ref.rsplit("/", 1)[-1]
        if not serializer:
            continue
        rel = path[len("/api/") :].strip("/")
        app = rel.split("/")[1] if rel.startswith("plugins/") else rel.split("/")[0]
        object_type = (type_names or {}).get(path) or f"{app}.{_model_name(serializer)}"

        names: dict[str, set[str]] = {}
        hints: dict[str, str] = {}
        single: list[str] = []
        boolean: list[str] = []
        properties = components.get(serializer, {}).get("properties", {})
        choices: dict[str, list[str]] = {}
        params = [p for p in get.get("parameters", []) if p.get("in") == "query"]
        all_names = {p["name"] for p in params}
        for p in params:
            name = p["name"]
            if name in NON_FILTER_PARAMS:
                continue
            ptype = p.get("schema", {}).get("type")
            if name.endswith("__empty"):
                if ptype != "boolean":  # the rule the validator relies on
                    raise ValueError(f"{path} {name}: __empty that is not boolean ({ptype})")
            else:
                if ptype != "array":
                    single.append(name)
                if ptype == "boolean":
                    boolean.append(name)
            base, sep, lookup = name.rpartition("__")
            if sep and base in all_names:
                names.setdefault(base, set()).add(lookup)
            else:
                names.setdefault(name, set())
                h = _hint(p.get("description"))
                if h:
                    hints[name] = h
                values = _choices(p, properties.get(name))
                if values:
                    choices[name] = values
        filters: dict[str, int] = {}
        for base in sorted(names):
            key = tuple(sorted(names[base]))
            if key not in set_index:
                set_index[key] = len(lookup_sets)
                lookup_sets.append(key)
            filters[base] = set_index[key]
        fields = list(components.get(serializer, {}).get("properties", {}).keys())
        entry: dict[str, Any] = {"path": rel, "filters": filters, "fields": fields}
        if single:
            entry["single"] = sorted(single)
        if boolean:
            entry["bool"] = sorted(boolean)
        if ordering and object_type in ordering:
            entry["ordering"] = sorted(ordering[object_type])
        if hints:
            entry["hints"] = hints
        if choices:
            entry["choices"] = choices
        if object_type in types:  # two endpoints with one serializer: keep the first, note it
            object_type = f"{app}.{rel.split('/')[-1].replace('-', '')}"
        types[object_type] = entry
        related = {
            k: _brief_model(properties[k])
            for k in sorted(properties)
            if k in filters or f"{k}_id" in filters
        }
        models[object_type] = {k: m for k, m in related.items() if m}
    _relation_types(types, models)

    # NetBox 4.7.3 serves "4.7.3 (4.7)"; /api/status/ says "4.7.3"
    version = str(schema.get("info", {}).get("version", "unknown")).split(" ")[0]
    return {
        "netbox_version": version,
        "source": "NetBox OpenAPI schema, GET /api/schema/?format=json",
        "lookup_sets": [list(s) for s in lookup_sets],
        "types": dict(sorted(types.items())),
    }


def dumps_table(table: dict[str, Any]) -> str:
    """Compact but diff-friendly: one object type per line."""
    head = {k: v for k, v in table.items() if k != "types"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))},")
    lines.append('"types": {')
    items = list(table["types"].items())
    for i, (k, v) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{comma}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def _fetch_schema(url: str, token: str | None) -> dict[str, Any]:
    import httpx

    from .client import auth_header

    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = auth_header(token)
    r = httpx.get(
        url.rstrip("/") + "/api/schema/", params={"format": "json"}, headers=headers, timeout=120
    )
    r.raise_for_status()
    result: dict[str, Any] = r.json()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="NetBox base URL (token from NETBOX_TOKEN)")
    src.add_argument("--file", help="a saved /api/schema/?format=json")
    ap.add_argument(
        "--ordering", help="JSON from tests/netbox/netbox_ordering_fields.py (run in NetBox)"
    )
    ap.add_argument("--no-plugins", action="store_true", help="leave plugin endpoints out")
    args = ap.parse_args(argv)
    ordering = None
    if args.ordering:
        with open(args.ordering, encoding="utf-8") as f:
            ordering = {k: v["ordering"] for k, v in json.load(f).items()}
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            schema = json.load(f)
    else:
        schema = _fetch_schema(args.url, os.environ.get("NETBOX_TOKEN"))
    sys.stdout.write(dumps_table(derive_table(schema, ordering, plugins=not args.no_plugins)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
