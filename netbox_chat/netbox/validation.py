"""Reject, before any request, every filter NetBox 4.7 would silently ignore.

NetBox answers 200 with the *whole* list when a query parameter is not a filter it
knows: an unknown name (``?foo=bar``), an unknown lookup (``name__foo=``), any
``__in`` lookup (``id__in=1,2``), a name that follows a relation
(``device__site_id=3``), an empty value (``name=``). It silently drops unknown names
in ``fields=`` and ``ordering=`` too. An agent that counts from such an answer is
confidently wrong, so each of these is turned into a rejection that says what was
wrong and the form that works. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .object_types import FilterTable, ObjectType
from .suggest import (
    SYNONYMS,
    describe,
    describe_all,
    elsewhere,
    own_filter_for_hop,
    suggest_filters,
    suggest_names,
)

# The lookup suffixes NetBox's filtersets generate (the allowlist), plus the
# three the 4.7 schema also documents on a few filters (tag__any, created__after, ...).
# A suffix is accepted only where the schema lists it for that filter.
ALLOWED_LOOKUPS = frozenset(
    [
        "n",
        "ic",
        "nic",
        "isw",
        "nisw",
        "iew",
        "niew",
        "ie",
        "nie",
        "empty",
        "regex",
        "iregex",
        "lt",
        "lte",
        "gt",
        "gte",
    ]
)
SCHEMA_ONLY_LOOKUPS = frozenset({"any", "after", "before"})

# Django/ORM lookups a model may reach for, and NetBox's spelling of each.
DJANGO_LOOKUPS: dict[str, str | None] = {
    "exact": "",
    "iexact": "ie",
    "contains": "ic",
    "icontains": "ic",
    "startswith": "isw",
    "istartswith": "isw",
    "endswith": "iew",
    "iendswith": "iew",
    "isnull": "empty",
    "isempty": "empty",
    "ne": "n",
    "neq": "n",
    "not": "n",
    "gt": "gt",
    "gte": "gte",
    "ge": "gte",
    "lt": "lt",
    "lte": "lte",
    "le": "lte",
    "range": None,
    "like": "ic",
    "ilike": "ic",
    "match": "regex",
    "eq": "",
}

# Tool arguments a model sometimes puts inside ``filters``; tools.py lifts these out.
TOOL_ARGUMENTS = frozenset({"limit", "offset", "ordering", "fields", "brief"})
UNSUPPORTED_PARAMS = {
    "omit": "'omit' is not supported here: list the fields you want with the fields argument.",
    "start": "'start' (cursor paging) is not supported here: use the offset argument.",
    "format": "'format' is not a filter: results are always JSON.",
}

# How many valid field names a refusal lists (some types have 60).
FIELDS_SHOWN = 15

# Serializer fields that are links, not data.
NOT_FIELDS = frozenset({"url", "display_url", "display"})
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


class FilterRejected(ValueError):
    """A call that must not be sent: ``str()`` is the whole message for the model."""


def _names(ot: ObjectType, names: list[str]) -> str:
    return describe_all(ot, names)


def _lookups_of(ot: ObjectType, base: str) -> str:
    lk = sorted(ot.filters.get(base, ()))
    return ", ".join(f"{base}__{x}" for x in lk) if lk else "none (exact values only)"


def _related_type(table: FilterTable | None, relation: str) -> str | None:
    if table is None:
        return None
    rel = relation.removesuffix("_id")
    for name in table.types:
        if name.split(".", 1)[1] == rel.replace("_", ""):
            return name
    return None


def _diagnose_key(ot: ObjectType, key: str, table: FilterTable | None) -> str:
    """Why ``key`` is not a filter of ``ot``, and what to send instead."""
    where = f"{ot.name}"
    if key in UNSUPPORTED_PARAMS:
        return UNSUPPORTED_PARAMS[key]
    field = key.split("__", 1)[0]
    if field in ot.unfilterable:
        return f"'{key}': {ot.unfilterable[field]} (NetBox would ignore it)."
    if field.startswith("cf_") and field not in ot.filters:
        custom = [f for f in ot.filters if f.startswith("cf_")]
        unknown = table.custom_fields_note if table is not None else None
        return (
            f"'{key}': this NetBox has no custom field '{field[3:]}' on {where} (NetBox would "
            f"ignore it). Custom field filters here: {_names(ot, custom)}."
            + (f" Note: {unknown}." if unknown else "")
        )
    base, sep, lookup = key.rpartition("__")
    if sep and lookup == "in":
        if base in ot.filters:
            return (
                f"'{key}': NetBox ignores __in lookups (it would return everything); "
                f"pass a list as the value of the plain key: {{'{base}': [value1, value2]}}."
            )
        return (
            f"'{key}': NetBox ignores __in lookups, and '{base}' is not a {where} filter either "
            f"(closest: {_names(ot, suggest_filters(ot, base))}); pass a list as the value of "
            f"the plain key, e.g. {{'id': [1, 2]}}."
        )
    if sep and "__" not in base and (lookup in ALLOWED_LOOKUPS or lookup in SCHEMA_ONLY_LOOKUPS):
        if base in ot.filters:
            return (
                f"'{key}': filter '{base}' of {where} has no __{lookup} lookup (NetBox would "
                f"ignore it). Its lookups: {_lookups_of(ot, base)}."
            )
        # 'created__gte' on the change log means 'time_after': the whole key has a meaning
        meant = key.lower() if key.lower() in SYNONYMS else base
        return (
            f"'{key}': '{base}' is not a {where} filter. "
            f"Closest: {_names(ot, suggest_filters(ot, meant))}."
        )
    if sep and "__" not in base and lookup in DJANGO_LOOKUPS:
        nb = DJANGO_LOOKUPS[lookup]
        if base not in ot.filters:
            return (
                f"'{key}': '{base}' is not a {where} filter, and __{lookup} is not a NetBox "
                f"lookup. Closest filters: {_names(ot, suggest_filters(ot, base))}."
            )
        if nb is None:
            form = f"use {base}__gte and {base}__lte together"
        elif nb == "":
            form = f"use the plain key '{base}'"
        elif nb in ot.filters[base]:
            form = f"use '{base}__{nb}'"
        else:
            form = f"'{base}' lookups here: {_lookups_of(ot, base)}"
        return f"'{key}': __{lookup} is not a NetBox lookup (it would be ignored); {form}."
    if sep:
        return _diagnose_hop(ot, key, table)
    closest = suggest_filters(ot, key)
    msg = (
        f"'{key}' is not a {where} filter (NetBox would ignore it). Closest: {_names(ot, closest)}."
    )
    others = elsewhere(table, ot, key) if table is not None and not closest else []
    if others:
        msg += f" It is a filter of: {', '.join(others)}."
    return msg


def _diagnose_hop(ot: ObjectType, key: str, table: FilterTable | None) -> str:
    """``device__site_id``, ``site__name``, ``name__foo``: a relation hop or a bad lookup."""
    where = ot.name
    own = own_filter_for_hop(ot, key.split("__"))
    if own:
        return (
            f"'{key}': NetBox filters cannot follow relations (it would ignore this); use "
            f"{where}'s own filter {describe(ot, own)}: {{'{own}': ...}}."
        )
    first, _, rest = key.partition("__")
    related_name = _related_type(table, first)
    if related_name is None or table is None:
        if first in ot.filters and "__" not in rest:
            return (
                f"'{key}': __{rest} is not a lookup NetBox knows (it would ignore it). "
                f"Lookups of '{first}': {_lookups_of(ot, first)}."
            )
        closest = suggest_filters(ot, key)
        return (
            f"'{key}' is not a {where} filter, and NetBox filters cannot follow relations (it "
            f"would ignore this and return everything). Closest: {_names(ot, closest)}."
        )
    related = table.types[related_name]
    rest_base, _, rest_lookup = rest.rpartition("__")
    if rest_lookup not in ALLOWED_LOOKUPS or not rest_base:
        rest_base = rest
    step1 = rest if related.has_filter(rest) else None
    msg = (
        f"'{key}': NetBox filters cannot follow relations (it would ignore this and return "
        "everything). Ask in two steps: first netbox_get_objects('"
        f"{related_name}', {{'{step1 or '...'}': ...}}) for the ids"
    )
    if step1 is None:
        msg += (
            f" ({related_name} filters like: "
            f"{_names(related, suggest_filters(related, rest_base, 3))})"
        )
    via = (
        f"{first}_id" if f"{first}_id" in ot.filters else (first if first.endswith("_id") else None)
    )
    if via and via in ot.filters:
        msg += f", then here {{'{via}': [id1, id2]}}."
    else:
        msg += f", then filter here by those {first} ids."
    if ot.has_filter(rest) and _related_type(table, rest_base) is not None:
        msg += f" Or directly: {where} has its own filter '{rest}'."
    elif first in ot.filters and rest_base in ("slug", "name"):
        msg += f" Or directly: {describe(ot, first)}."
    return msg


def _is_scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool)


def _render(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _choice(ot: ObjectType, key: str, value: str, notes: list[str] | None) -> str | None:
    """``value`` as the choice it means, or None when it is no value of this choice
    filter. NetBox answers 400 for a choice it does not have, in any case ("Active" for
    ``active`` was recorded): the value in the right case is used, with a note."""
    base, _, lookup = key.partition("__")
    choices = ot.choices.get(base)
    if not choices or lookup not in ("", "n") or value in choices or value == "null":
        return value
    folded = {c.lower(): c for c in choices}
    meant = folded.get(value.strip().lower().replace(" ", "-")) or folded.get(value.strip().lower())
    if meant is not None and notes is not None:
        notes.append(f"{key} {value!r} read as {meant!r}")
    return meant


def _check_value(
    ot: ObjectType, key: str, value: Any, notes: list[str] | None = None
) -> tuple[list[str], str | None]:
    """(rendered values, problem)."""
    if value is None:
        empty = f"{key}__empty" if ot.has_filter(f"{key}__empty") else None
        tip = f" To match objects where it is empty use {{'{empty}': true}}." if empty else ""
        return [], f"'{key}' has no value (null).{tip or ' Give a value.'}"
    values = list(value) if isinstance(value, list | tuple | set) else [value]
    if not values:
        return [], (
            f"'{key}' is an empty list: no filter would be sent and NetBox would return "
            "everything. Give at least one value."
        )
    if len(values) > 1 and ot.is_single(key):
        return [], (
            f"'{key}' takes a single value: NetBox would silently use only the last one of a "
            "list. Ask once per value, or use a filter that takes several."
        )
    out = []
    for v in values:
        if not _is_scalar(v):
            return [], (
                f"'{key}' value must be a string, number or boolean, or a list of them "
                f"(got {type(v).__name__})."
            )
        s = _render(v)
        if s == "":
            return [], (
                f"'{key}' has an empty value: NetBox ignores empty filters and would return "
                "everything. Give a value, or use the __empty lookup to match empty fields."
            )
        if not s.strip():
            return [], f"'{key}' is blank (only spaces). Give a value."
        if ot.is_bool(key):
            # NetBox reads only true/True/false/False here and ignores anything else
            low = s.strip().lower()
            if low not in _TRUE and low not in _FALSE:
                return [], f"'{key}' takes true or false (NetBox ignores {s!r})."
            s = "true" if low in _TRUE else "false"
        meant = _choice(ot, key, s, notes)
        if meant is None:
            base = key.partition("__")[0]
            return [], (
                f"'{key}': {s!r} is not a value of {ot.name}'s {base} (NetBox would refuse "
                f"it). Its values: {', '.join(ot.choices[base])}."
            )
        out.append(meant)
    return out, None


def build_params(
    ot: ObjectType,
    filters: Mapping[str, Any] | None,
    table: FilterTable | None = None,
    notes: list[str] | None = None,
) -> list[tuple[str, str]]:
    """Validated query parameters for ``filters``: lists become repeated keys.

    A name that is a filter in lower case (``VID``, ``SITE_ID``: NetBox's names are all
    lower case) is read as that filter, and ``notes`` says so. Names are read first,
    values checked after: two names that are one filter (``Site`` and ``site``) would
    both reach NetBox, which ORs them (or keeps the last of a single-value filter), so
    they are sent once if their values agree and refused if not. Raises
    ``FilterRejected`` listing every problem, with the form that works.
    """
    if not filters:
        return []
    given: dict[str, list[tuple[str, Any]]] = {}  # filter -> (name as given, value)
    problems: list[str] = []
    for raw_key, value in filters.items():
        key = filter_name(ot, str(raw_key).strip(), notes)
        if not ot.has_filter(key):
            problems.append(_diagnose_key(ot, key, table))
            continue
        given.setdefault(key, []).append((str(raw_key).strip(), value))
    params: list[tuple[str, str]] = []
    for key, each in given.items():
        checked = [_check_value(ot, key, value, notes) for _, value in each]
        problem = next((p for _, p in checked if p), None)
        if problem:
            problems.append(problem)
            continue
        values = checked[0][0]
        if any(other != values for other, _ in checked[1:]):
            names = " and ".join(f"'{name}'" for name, _ in each)
            problems.append(
                f"{names} are the same filter '{key}', given different values "
                f"({', '.join(repr(value) for _, value in each)}): NetBox would "
                f"{'keep only the last' if ot.is_single(key) else 'match either'}. Send it once."
            )
            continue
        if len(each) > 1 and notes is not None:
            names = " and ".join(f"'{name}'" for name, _ in each)
            notes.append(f"{names} are the same filter '{key}' with the same value, sent once")
        params.extend((key, v) for v in values)
    if problems:
        raise FilterRejected(" ".join(problems))
    return params


def filter_name(ot: ObjectType, key: str, notes: list[str] | None) -> str:
    """``key`` as a filter of ``ot``: itself, or its lower case when only that is a
    filter (said in ``notes``)."""
    if not ot.has_filter(key) and ot.has_filter(key.lower()):
        if notes is not None:
            notes.append(f"filter '{key}' read as '{key.lower()}'")
        return key.lower()
    return key


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list | tuple):
        return [str(p).strip() for p in value if str(p).strip()]
    return [str(value)]


def check_fields(ot: ObjectType, fields: Any) -> list[str]:
    """Field names for ``?fields=``: NetBox silently drops unknown ones, so reject them."""
    names = _as_list(fields)
    if not ot.fields:
        return names
    bad = [n for n in names if n not in ot.fields]
    if bad:
        valid = [f for f in ot.fields if f not in NOT_FIELDS]
        parts = [f"'{b}' (closest: {', '.join(suggest_names(b, valid)) or 'none'})" for b in bad]
        shown = ", ".join(valid[:FIELDS_SHOWN])
        more = f" and {len(valid) - FIELDS_SHOWN} more" if len(valid) > FIELDS_SHOWN else ""
        raise FilterRejected(
            f"Unknown field(s) for {ot.name}: {'; '.join(parts)}. NetBox would silently leave "
            f"them out. Fields include: {shown}{more}."
        )
    return names


def check_ordering(ot: ObjectType, ordering: Any) -> str | None:
    """``ordering`` as NetBox wants it; unknown names (silently ignored there) are rejected."""
    terms = _as_list(ordering)
    if not terms:
        return None
    valid = list(ot.orderable())
    bad = [t for t in terms if valid and t.lstrip("-") not in valid]
    if bad:
        parts = [
            f"'{b}' (closest: {', '.join(suggest_names(b.lstrip('-'), valid)) or 'none'})"
            for b in bad
        ]
        raise FilterRejected(
            f"Cannot order {ot.name} by {'; '.join(parts)}: NetBox would ignore it. "
            "Use a field name, '-' in front for descending, e.g. '-id'."
        )
    return ",".join(terms)
