"""The ``cf_<name>`` filters of the user's own custom fields.

NetBox adds a filter per custom field to each filterset at request time, so they are
not in its OpenAPI schema (checked on 4.7.3: ``/api/schema/`` lists no ``cf_``
parameter) and not in the shipped table. They are read from
``/api/extras/custom-fields/`` and added to the table. Which lookups each one takes
follows NetBox 4.7.3's ``CustomField.to_filter`` (extras/models/customfields.py) and
``BaseFilterSet.get_additional_lookups`` (netbox/filtersets.py):

- filter logic "disabled": no filter at all (NetBox ignores ``cf_<name>``);
- text, long text, URL: exact logic takes the text lookups; loose logic already
  means "contains" and takes no lookup (its lookup is not a standard one);
- integer, decimal, date, date & time, object, multi-object: the numeric lookups;
- select, multi-select: the text lookups;
- boolean: none, one value, true/false only; JSON: no filter.

Measured on the live tier: ``cf_site_owner__ic`` on a loose text field and
``cf_internal_note`` with filtering disabled are ignored (the whole list comes back).
Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from .object_types import FilterTable, ObjectType

TEXT_LOOKUPS = frozenset(
    {"n", "ic", "nic", "iew", "niew", "isw", "nisw", "ie", "nie", "empty", "regex", "iregex"}
)
NUMERIC_LOOKUPS = frozenset({"n", "lte", "lt", "gte", "gt", "empty"})
TEXT_TYPES = frozenset({"text", "longtext", "url"})
NUMERIC_TYPES = frozenset({"integer", "decimal", "date", "datetime", "object", "multiobject"})
CHOICE_TYPES = frozenset({"select", "multiselect"})


def _value(v: Any) -> str:
    """A choice as NetBox sends it (``{"value": "text", "label": "Text"}``) or plain."""
    return str(v.get("value") if isinstance(v, Mapping) else v or "")


def lookups_of(field: Mapping[str, Any]) -> frozenset[str] | None:
    """The lookups of ``cf_<name>``; None when NetBox has no such filter."""
    kind, logic = _value(field.get("type")), _value(field.get("filter_logic"))
    if logic == "disabled":
        return None
    if kind in TEXT_TYPES:
        return frozenset() if logic == "loose" else TEXT_LOOKUPS
    if kind in NUMERIC_TYPES:
        return NUMERIC_LOOKUPS
    if kind in CHOICE_TYPES:
        return TEXT_LOOKUPS
    if kind == "boolean":
        return frozenset()
    return None


def _hint(field: Mapping[str, Any]) -> str:
    kind, logic = _value(field.get("type")), _value(field.get("filter_logic"))
    how = ", contains" if kind in TEXT_TYPES and logic == "loose" else ""
    return f"custom field, {kind}{how}"


def with_custom_fields(table: FilterTable, fields: Iterable[Mapping[str, Any]]) -> FilterTable:
    """``table`` with each custom field's filter added to the types it applies to.

    A field whose filtering is disabled is recorded as such, so a refusal can say why.
    """
    types = dict(table.types)
    for field in fields:
        name = str(field.get("name") or "")
        if not name:
            continue
        key = f"cf_{name}"
        lookups = lookups_of(field)
        kind = _value(field.get("type"))
        for type_name in field.get("object_types") or ():
            ot = types.get(str(type_name))
            if ot is None:
                continue
            if lookups is None:
                why = "filtering is disabled for this custom field"
                if _value(field.get("filter_logic")) != "disabled":
                    why = f"NetBox cannot filter on {kind} custom fields"
                types[ot.name] = replace(ot, unfilterable={**ot.unfilterable, key: why})
                continue
            types[ot.name] = _add_filter(ot, key, lookups, kind, _hint(field))
    return table.with_types(types)


def _add_filter(
    ot: ObjectType, key: str, lookups: frozenset[str], kind: str, hint: str
) -> ObjectType:
    single, boolean = ot.single, ot.boolean
    if kind == "boolean":
        single, boolean = single | {key}, boolean | {key}
    return replace(
        ot,
        filters={**ot.filters, key: lookups},
        hints={**ot.hints, key: hint},
        single=single,
        boolean=boolean,
    )
