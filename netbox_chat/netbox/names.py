"""Names where NetBox wants slugs or ids, generic relations, and NetBox's 400s.

Recorded from real models (docs/facts/real-models.md): ``tenant: "Dunder-Mifflin,
Inc."`` (a display name; NetBox answered 400), ``rack_id`` given a rack's name,
``assigned_object_id: [66, 67]`` with ``assigned_object_type`` (400). A relation filter
whose value cannot be a slug (or an id) is looked up on its own type: exactly one
object with that name (any case) or slug gives its slug or id, with a note; several
are listed and none is named by the closest, both as refusals. A slug or id NetBox
answers 400 for (no object has it) is looked up the same way, after the 400 only. What
NetBox still refuses with a 400 comes back as one line naming the filter and what it
takes. One call looks up at most ``LOOKUPS_PER_CALL`` names: more are refused before
any request.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .client import NetBoxBadRequest, NetBoxClient
from .object_types import FilterTable, ObjectType
from .validation import FilterRejected

SLUG = re.compile(r"[-a-z0-9_]+")
LOOKUP_LIMIT = 50  # objects one name lookup reads: a name matches few
# Names one tool call may look up (each costs one or two NetBox requests, one after
# the other): 200 tenant names in one call made 400 requests and a refusal four
# times the result budget before this bound.
LOOKUPS_PER_CALL = 5


class Lookups:
    """The name lookups one tool call has left: counted over its filters and over
    the re-reads after NetBox's 400s, so no call's requests grow with its values."""

    def __init__(self, left: int = LOOKUPS_PER_CALL) -> None:
        self.left = left

    def take(self) -> bool:
        """One lookup, if any is left."""
        if self.left < 1:
            return False
        self.left -= 1
        return True


# An IP address's generic relation, as the filters that work: the type NetBox names
# the assigned object by, and the filter of that kind of object.
GFK_FILTERS: dict[str, dict[str, str]] = {
    "ipam.ipaddress": {
        "dcim.interface": "interface_id",
        "virtualization.vminterface": "vminterface_id",
    },
}
GFK_KEYS = frozenset({"assigned_object_id", "assigned_object_type"})
GFK_ALTERNATIVES = (
    "interface_id (dcim.interface ids), vminterface_id (VM interface ids), or device_id / "
    "virtual_machine_id for every address of a device or VM"
)


@dataclass(frozen=True)
class Relation:
    """A filter that takes another object's slug or id."""

    target: ObjectType
    by: str  # "slug" or "id"


def relation(table: FilterTable, ot: ObjectType, key: str) -> Relation | None:
    """The object type ``key`` points at and what it takes, when both are known.

    What it takes: the schema's hint says ``(slug)`` or ``(ID)`` (or the name ends in
    ``_id``); a filter with no hint that has an ``_id`` twin and points at a type with
    slugs takes a slug: NetBox's tree-node filters (``role``, ``platform``,
    ``location``, ``region``) are ``to_field_name='slug'`` but lose their label on the
    way into the schema (netbox/dcim/filtersets.py, DeviceFilterSet.role).

    The type: the one the object's field of that name refers to (the table's
    ``relations``); else one named like the hint's label (``Circuit group`` ->
    circuits.circuitgroup) or the filter (``tenant`` -> tenancy.tenant,
    ``virtual_machine_id`` -> virtualization.virtualmachine), preferring ``ot``'s own
    app. A name ``ot``'s app also ends other types with (``group`` beside
    dcim.rackgroup and dcim.sitegroup) is not read as another app's type: no guess,
    so no wrong object."""
    hint = ot.hints.get(key, "")
    base = key.removesuffix("_id")
    pointed = table.types.get(ot.relations.get(base, ""))
    by = "id" if key.endswith("_id") or hint.endswith("(ID)") else None
    by = by or ("slug" if "(slug)" in hint else None)
    if by is None and not hint and pointed and f"{key}_id" in ot.filters:
        by = "slug" if "slug" in pointed.fields else None
    if by is None or key not in ot.filters:
        return None
    found = [pointed] if pointed else _named_like(table, ot, key, hint)
    if len(found) != 1 or "q" not in found[0].filters:
        return None
    return Relation(found[0], by)


def _named_like(table: FilterTable, ot: ObjectType, key: str, hint: str) -> list[ObjectType]:
    """The types the hint's label or the filter's name may mean (see ``relation``)."""
    app = ot.name.split(".")[0]
    models = {name.split(".", 1)[1]: name for name in table.types}
    label = hint.partition(" (")[0].replace(" ", "").lower()
    if label in models and models[label].split(".")[0] == app:
        return [table.types[models[label]]]
    model = key.removesuffix("_id").replace("_", "")
    named = [t for name, t in table.types.items() if name.split(".", 1)[1] == model]
    same_app = [t for t in named if t.name.split(".")[0] == app]
    kin = [n for n in table.types if n.startswith(app + ".") and n.endswith(model)]
    return same_app if len(same_app) == 1 else ([] if kin else named)


def _fits(value: Any, by: str) -> bool:
    text = str(value).strip()
    if text == "null":
        return True
    return text.isdigit() if by == "id" else SLUG.fullmatch(text) is not None


def _label(obj: Mapping[str, Any]) -> str:
    return str(obj.get("name") or obj.get("display") or obj.get("id"))


async def _candidates(client: NetBoxClient, target: ObjectType, name: str) -> list[dict[str, Any]]:
    data = await client.get(
        target.path, [("q", name), ("brief", "true"), ("limit", str(LOOKUP_LIMIT))]
    )
    results = data.get("results") if isinstance(data, dict) else None
    return [r for r in results or [] if isinstance(r, dict)]


async def _closest(
    client: NetBoxClient, target: ObjectType, name: str, near: list[dict[str, Any]]
) -> str:
    """The objects NetBox's search found for ``name`` (``q``: its name, or a VLAN's
    vid, holds it), nearest first; else the nearest names on a page of the type, which
    a number (an id no object has) is near none of, so that page is not read for one."""
    if near:
        ranked = sorted(near, key=lambda r: -_likeness(name, _label(r)))[:3]
    elif name.isdigit():
        ranked = []
    else:
        data = await client.get(target.path, [("brief", "true"), ("limit", "100")])
        labels = {_label(r).lower(): r for r in (data.get("results") or []) if isinstance(r, dict)}
        close = difflib.get_close_matches(name.lower(), list(labels), n=3, cutoff=0.3)
        ranked = [labels[c] for c in close]
    shown = [f"{_label(r)!r} ({_key(r)})" for r in ranked]
    if shown:
        return f"closest: {', '.join(shown)}"
    return f"none is close; look it up with netbox_get_objects('{target.name}', {{'q': ...}})"


def _likeness(name: str, label: str) -> float:
    return difflib.SequenceMatcher(None, name.lower(), label.lower()).ratio()


# What an object's name is unique within: five interfaces named Vlan100 are told apart
# only by their device (or VM), which NetBox's brief form of each carries.
PARENTS = (("device", "device"), ("virtual_machine", "VM"))


def _key(obj: Mapping[str, Any]) -> str:
    """How the model names ``obj`` in its next call, and what tells it from another
    object of that name: ``slug dm-akron, id 1``, ``id 9, on device sw01``."""
    slug = obj.get("slug")
    key = f"slug {slug}, id {obj.get('id')}" if slug else f"id {obj.get('id')}"
    for field, kind in PARENTS:
        parent = obj.get(field)
        if isinstance(parent, Mapping):
            return f"{key}, on {kind} {_label(parent)}"
    return key


def _too_many(wanted: list[tuple[str, Relation, str]], left: int) -> str:
    """The refusal for a call that gives more names than it may look up, naming a few."""
    shown = ", ".join(f"{key}={given[:40]!r}" for key, _, given in wanted[:3])
    more = f" and {len(wanted) - 3} more" if len(wanted) > 3 else ""
    rel = wanted[0][1]
    return (
        f"{len(wanted)} filter values are names, not {rel.by}s ({shown}{more}); one call "
        f"looks up at most {left} names. Give the {rel.by}s (netbox_get_objects("
        f"'{rel.target.name}', {{'q': ...}}) finds them) or ask with fewer names."
    )


async def _read_name(
    client: NetBoxClient, rel: Relation, key: str, given: str, notes: list[str]
) -> tuple[Any, str | None]:
    """The slug or id of the one ``rel.target`` object ``given`` names (its name in any
    case, or its slug), with a note; else no value and the refusal: the objects it
    names when several do, the closest when none does."""
    name = given.strip()
    near = await _candidates(client, rel.target, name)
    same = [r for r in near if name.lower() in (_label(r).lower(), str(r.get("slug", "")).lower())]
    if len(same) == 1:
        meant = same[0][rel.by]
        notes.append(f"{key} {given!r} read as {rel.target.name} {rel.by} {meant!r}")
        return meant, None
    if same:
        listed = "; ".join(f"{_label(r)!r} ({_key(r)})" for r in same)
        return None, (
            f"'{key}': {given!r} names {len(same)} {rel.target.name} objects: {listed}. "
            f"Give the {rel.by} of the one you mean."
        )
    closest = await _closest(client, rel.target, name, near)
    held = "name or slug" if rel.by == "slug" else "name, slug or id"
    return None, (
        f"'{key}': no {rel.target.name} has the {held} {given!r} ({closest}); "
        f"{key} takes {'a slug' if rel.by == 'slug' else 'an id'}."
    )


async def resolve_names(
    client: NetBoxClient,
    table: FilterTable,
    ot: ObjectType,
    filters: Mapping[str, Any],
    notes: list[str],
    lookups: Lookups,
) -> dict[str, Any]:
    """``filters`` with every relation value that cannot be a slug or id replaced by
    the slug or id of the one object it names (see the module's docstring); raises
    ``FilterRejected`` for a name that matches several objects or none, and, before
    any request, for more names than ``lookups`` has left."""
    out = dict(filters)
    problems: list[str] = []
    wanted: list[tuple[Any, Relation, list[Any]]] = []
    for raw_key, value in filters.items():
        rel = relation(table, ot, str(raw_key).strip())
        values = list(value) if isinstance(value, list | tuple) else [value]
        if rel is not None and not all(
            _fits(v, rel.by) for v in values if isinstance(v, str | int)
        ):
            wanted.append((raw_key, rel, values))
    names = [
        (str(k).strip(), rel, v)
        for k, rel, values in wanted
        for v in values
        if isinstance(v, str) and not _fits(v, rel.by)
    ]
    if len(names) > lookups.left:
        raise FilterRejected(_too_many(names, lookups.left))
    for raw_key, rel, values in wanted:
        key = str(raw_key).strip()
        value = filters[raw_key]
        read: list[Any] = []
        for given in values:
            if not isinstance(given, str) or _fits(given, rel.by):
                read.append(given)
                continue
            lookups.take()
            meant, problem = await _read_name(client, rel, key, given, notes)
            if problem:
                problems.append(problem)
            else:
                read.append(meant)
        out[raw_key] = read if isinstance(value, list | tuple) else (read[0] if read else value)
    if problems:
        raise FilterRejected(" ".join(problems))
    return out


# NetBox 4.7.3 answers a relation filter value no object has with Django's
# ModelMultipleChoiceField error naming the first such value (django/forms/models.py,
# "invalid_choice"); the live tier's NetBox, for site=dm-nowhere and site_id=99999:
# {"site": ["Select a valid choice. dm-nowhere is not one of the available choices."]}
NO_SUCH_CHOICE = re.compile(r"Select a valid choice\. (.*) is not one of the available choices\.")


async def reread_refused(
    client: NetBoxClient,
    table: FilterTable,
    ot: ObjectType,
    params: list[tuple[str, str]],
    error: NetBoxBadRequest,
    notes: list[str],
    lookups: Lookups,
) -> list[tuple[str, str]] | None:
    """``params`` with each relation value NetBox's 400 says no object has read as the
    one object it names: a slug or id that is no object's may still be one's name
    (``site: hq`` for the site named HQ). None when the 400 refused no such value or
    ``lookups`` has none left (NetBox's 400 is then the answer); raises
    ``FilterRejected`` listing the objects, or naming the closest, otherwise. Only a
    request NetBox refused pays for the lookup."""
    detail = error.detail if isinstance(error.detail, dict) else {}
    read: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for key, why in detail.items():
        rel = relation(table, ot, str(key))
        said = [NO_SUCH_CHOICE.fullmatch(str(w)) for w in (why if isinstance(why, list) else [why])]
        refused = [m.group(1) for m in said if m and (str(key), m.group(1)) in params]
        if rel is None or not refused or not lookups.take():
            continue
        meant, problem = await _read_name(client, rel, str(key), refused[0], notes)
        if problem:
            problems.append(problem)
        else:
            read[(str(key), refused[0])] = str(meant)
    if problems:
        raise FilterRejected(" ".join(problems))
    return [(k, read.get((k, v), v)) for k, v in params] if read else None


def generic_relations(
    ot: ObjectType, filters: Mapping[str, Any], notes: list[str]
) -> dict[str, Any]:
    """``assigned_object_type`` + ``assigned_object_id`` as the filter that works
    (``interface_id`` for dcim.interface), with a note; an id without a type it can
    be read with is refused, naming the filters that work."""
    kinds = GFK_FILTERS.get(ot.name)
    keys = {str(k).strip(): k for k in filters}
    if not kinds or "assigned_object_id" not in keys:
        return dict(filters)
    raw_type = filters.get(keys["assigned_object_type"]) if "assigned_object_type" in keys else None
    kind = str(raw_type or "").strip().lower()
    if "." not in kind:
        kind = next((k for k in kinds if k.endswith("." + kind)), kind)
    if kind not in kinds:
        given = f"assigned_object_type {raw_type!r}" if raw_type else "no assigned_object_type"
        raise FilterRejected(
            f"'assigned_object_id' with {given}: NetBox cannot read that generic relation "
            f"here; use {GFK_ALTERNATIVES}."
        )
    out = {k: v for k, v in filters.items() if str(k).strip() not in GFK_KEYS}
    out[kinds[kind]] = filters[keys["assigned_object_id"]]
    notes.append(f"assigned_object_type {kind!r} with assigned_object_id read as {kinds[kind]}")
    return out


def explain_bad_request(
    table: FilterTable, ot: ObjectType, filters: Mapping[str, Any], error: NetBoxBadRequest
) -> str:
    """NetBox's 400 as one line: each refused filter, what was given, what it takes."""
    detail = error.detail if isinstance(error.detail, dict) else {}
    parts = []
    for key, why in detail.items():
        base = str(key).partition("__")[0]
        given = filters.get(key)
        shown = f" {given!r}" if given is not None else ""
        rel = relation(table, ot, str(key))
        if ot.choices.get(base):
            takes = f"one of {', '.join(ot.choices[base])}"
        elif rel is not None:
            takes = (
                f"a {rel.target.name} {rel.by} (find it with netbox_get_objects("
                f"'{rel.target.name}', {{'q': ...}}))"
            )
        else:  # NetBox's own words ("Enter a valid date/time.")
            said = " ".join(str(w) for w in why) if isinstance(why, list) else str(why)
            parts.append(f"'{key}'{shown} refused by NetBox: {said.rstrip('.')}")
            continue
        parts.append(f"'{key}'{shown} refused by NetBox; it takes {takes}")
    if not parts:
        return str(error)
    return "NetBox answered 400: " + "; ".join(parts) + "."
