"""Read the arguments a model sent to a NetBox tool: liberal in, exact out.

Small local models do not send textbook arguments: filters flattened to the top
level, ``filter`` for ``filters``, ``"10"`` for 10, ``"name,status"`` for a list, a
list for a string. A pydantic argument model between the model and the tools drops
unknown keys without a word (the request then goes out unfiltered) and refuses the
rest before the tool can read it. So the tools take the raw arguments and read them
here, by one rule:

- what can be read one way only (a JSON string that parses, a filter name of that
  object type given at the top level, ``"10"`` for 10, ``"a,b"`` for a list) is used,
  and the reading is reported back to the model in the result's ``note``;
- anything else is refused with a one-line reason (``FilterRejected``);
- nothing is ever dropped.

Nothing here does I/O; the filters themselves are checked by validation.py.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .validation import TOOL_ARGUMENTS, FilterRejected

# The JSON types of each tool's arguments (what the schemas the model sees say).
ARGUMENT_KINDS: dict[str, dict[str, str]] = {
    "netbox_get_objects": {
        "object_type": "string",
        "filters": "object",
        "fields": "names",
        "brief": "boolean",
        "limit": "integer",
        "offset": "integer",
        "ordering": "names",
    },
    "netbox_get_object_by_id": {
        "object_type": "string",
        "object_id": "integer",
        "fields": "names",
        "brief": "boolean",
    },
    "netbox_search_objects": {"query": "string", "object_types": "names", "limit": "integer"},
    "netbox_get_changelogs": {"filters": "object", "limit": "integer", "offset": "integer"},
}

REQUIRED: dict[str, tuple[str, ...]] = {
    "netbox_get_objects": ("object_type",),
    "netbox_get_object_by_id": ("object_type", "object_id"),
    "netbox_search_objects": ("query",),
}

# Other names models give the tools' arguments, each meaning one argument only.
ARGUMENT_SYNONYMS: dict[str, str] = {
    "filter": "filters",
    "where": "filters",
    "params": "filters",
    "field": "fields",
    "order": "ordering",
    "order_by": "ordering",
    "orderby": "ordering",
    "sort": "ordering",
    "sort_by": "ordering",
    "page_size": "limit",
    "per_page": "limit",
    "max_results": "limit",
    "top": "limit",
    "skip": "offset",
    "objecttype": "object_type",
    "object": "object_type",
    "model": "object_type",
    "endpoint": "object_type",
    "types": "object_types",
    "objecttypes": "object_types",
    "search": "query",
    "q": "query",
    "term": "query",
    "text": "query",
    "id": "object_id",
    "pk": "object_id",
}
# Singular/plural slips between the tools' own argument names.
_SLIPS = {"object_types": "object_type", "object_type": "object_types", "object_ids": "object_id"}

_INT = re.compile(r"\s*[+-]?\d+\s*")
_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})


@dataclass
class Reading:
    """One tool call's arguments as the tool will use them, and how they were read."""

    args: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _show(value: Any) -> str:
    """A value as the model sent it, short, without JSON's escaped quotes."""
    if isinstance(value, str):
        text = f"'{value}'"
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(_show(v) for v in value) + "]"
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _as_int(name: str, value: Any, notes: list[str]) -> int:
    if isinstance(value, bool):
        raise FilterRejected(f"{name} must be a whole number (got {_show(value)}).")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        notes.append(f"{name} {_show(value)} read as {int(value)}")
        return int(value)
    if isinstance(value, str) and _INT.fullmatch(value):
        notes.append(f"{name} {_show(value)} read as {int(value)}")
        return int(value)
    raise FilterRejected(f"{name} must be a whole number (got {_show(value)}).")


def _as_bool(name: str, value: Any, notes: list[str]) -> bool:
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower() if isinstance(value, str | int) else None
    if low in _TRUE or low in _FALSE:
        notes.append(f"{name} {_show(value)} read as {'true' if low in _TRUE else 'false'}")
        return low in _TRUE
    raise FilterRejected(f"{name} must be true or false (got {_show(value)}).")


def _as_string(name: str, value: Any, notes: list[str]) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        notes.append(f"{name} {_show(value)} read as the text {_show(str(value))}")
        return str(value)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        notes.append(f"{name} {_show(value)} read as {_show(value[0])}")
        return value[0].strip()
    raise FilterRejected(f"{name} must be a string (got {_show(value)}).")


def _as_names(name: str, value: Any, notes: list[str]) -> list[str]:
    """A list of names; a string holding a JSON list or comma-separated names is read too."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise FilterRejected(
                    f"{name} must be a list of names (got {_show(value)}, not valid JSON)."
                ) from None
        else:
            names = [p.strip() for p in re.split(r"[,\s]+", text) if p.strip()]
            if len(names) > 1 or name != "ordering":  # "name,-id" is NetBox's own form
                notes.append(f"{name} {_show(value)} read as {_show(names)}")
            return names
    if isinstance(value, list | tuple):
        if not all(isinstance(v, str) for v in value):
            raise FilterRejected(f"{name} must be a list of names (got {_show(value)}).")
        if name == "ordering":
            notes.append(f"ordering {_show(value)} read as {_show(','.join(value))}")
        return [v.strip() for v in value if v.strip()]
    raise FilterRejected(f"{name} must be a list of names (got {_show(value)}).")


def _as_object(name: str, value: Any, notes: list[str]) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {str(k).strip(): v for k, v in value.items()}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            notes.append(f"{name} given as a JSON string, read as an object")
            return {str(k).strip(): v for k, v in parsed.items()}
    raise FilterRejected(
        f'{name} must be an object such as {{"site": "dm-akron", "status": "offline"}} '
        f"(got {_show(value)})."
    )


_READERS: dict[str, Callable[[str, Any, list[str]], Any]] = {
    "integer": _as_int,
    "boolean": _as_bool,
    "string": _as_string,
    "names": _as_names,
    "object": _as_object,
}


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def argument_name(tool: str, key: str) -> str | None:
    """The tool argument ``key`` means: its own name, a synonym or a singular/plural slip."""
    kinds = ARGUMENT_KINDS[tool]
    low = key.strip().lower()
    for name in (low, ARGUMENT_SYNONYMS.get(low), _SLIPS.get(low)):
        if name in kinds:
            return name
    return None


def read_arguments(tool: str, raw: Mapping[str, Any]) -> Reading:
    """Read ``raw`` (the model's arguments) for ``tool``.

    For a tool that takes filters, a key that is no argument (nor close to one) is read
    as a filter given at the top level, the most common small-model slip; validation.py
    then accepts it or refuses it like any filter. Raises ``FilterRejected`` with every
    problem found, in one message; ``required`` arguments must be present.
    """
    if not isinstance(raw, Mapping):
        raise FilterRejected(f"{tool} takes its arguments as an object (got {_show(raw)}).")
    kinds = ARGUMENT_KINDS[tool]
    takes_filters = "filters" in kinds
    reading = Reading()
    notes = reading.notes
    top_filters: dict[str, Any] = {}
    problems: list[str] = []
    seen: dict[str, str] = {}  # argument -> the key it was given as
    failed: set[str] = set()
    for raw_key, value in raw.items():
        key = str(raw_key).strip()
        name = argument_name(tool, key)
        if name is not None and name in seen:
            problems.append(f"'{seen[name]}' and '{key}' both given; send '{name}' once.")
            continue
        if name is None:
            close = difflib.get_close_matches(key.lower(), list(kinds), n=1, cutoff=0.75)
            if close:
                problems.append(f"'{key}' is not an argument of {tool}; did you mean '{close[0]}'?")
            elif takes_filters:
                top_filters[key] = value
            else:
                problems.append(_unknown_argument(tool, key))
            continue
        seen[name] = key
        if _is_empty(value):
            if value is not None and name in REQUIRED.get(tool, ()):
                problems.append(f"{name} is empty.")
                failed.add(name)
            continue
        if name != key:
            notes.append(f"'{key}' read as {name}")
        try:
            reading.args[name] = _READERS[kinds[name]](name, value, notes)
        except FilterRejected as e:
            problems.append(str(e))
            failed.add(name)
    problems += [
        f"{name} is required."
        for name in REQUIRED.get(tool, ())
        if name not in reading.args and name not in failed
    ]
    if problems:
        raise FilterRejected(" ".join(problems))
    if takes_filters:
        _merge_filters(tool, reading, top_filters)
    return reading


def _unknown_argument(tool: str, key: str) -> str:
    args = ", ".join(ARGUMENT_KINDS[tool])
    if tool == "netbox_get_object_by_id":
        return (
            f"'{key}' is not an argument of {tool} ({args}), which takes no filters; "
            "to filter, use netbox_get_objects."
        )
    return f"'{key}' is not an argument of {tool} ({args}); to filter, use netbox_get_objects."


def _merge_filters(tool: str, reading: Reading, top: dict[str, Any]) -> None:
    """Filters given at the top level join ``filters``; tool arguments put inside
    ``filters`` (``limit``, ``ordering``, ...) are used as the arguments they are."""
    filters: dict[str, Any] = dict(reading.args.get("filters") or {})
    for key, value in top.items():
        if key in filters and filters[key] != value:
            raise FilterRejected(
                f"'{key}' given twice with different values ({_show(value)} at the top level, "
                f"{_show(filters[key])} in filters); send it once, inside filters."
            )
        filters[key] = value
    if top:
        reading.notes.append(f"{', '.join(top)} (given at the top level) read as filters")
    kinds = ARGUMENT_KINDS[tool]
    for key in [k for k in filters if k in TOOL_ARGUMENTS]:
        value = filters.pop(key)
        if key not in kinds:
            raise FilterRejected(f"{tool} takes no '{key}' (it is not a filter either).")
        given = reading.args.get(key)
        inner = _READERS[kinds[key]](key, value, reading.notes)
        if given is not None and given != inner:
            raise FilterRejected(
                f"'{key}' given twice with different values (argument {_show(given)}, "
                f"{_show(inner)} inside filters); send it once."
            )
        reading.args[key] = inner
        reading.notes.append(f"{key} (given inside filters) read as the {key} argument")
    reading.args["filters"] = filters
