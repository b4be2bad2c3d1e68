"""Object types (``dcim.device``) and the filter table behind validation.

The shipped table (``filters.json``) was generated from a real NetBox 4.7.3's OpenAPI
schema by ``netbox_chat.netbox.schema``. It is read once, lazily, and indexed into
frozensets, so validating a call is a few dict/set lookups.

For another NetBox version a table can be derived from that server's own schema; it is
cached per version under ``${XDG_CACHE_HOME:-~/.cache}/netbox-chat/`` (see
``cached_table_path`` and ``NetBoxTools`` in tools.py, which prefers it when reachable).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

SHIPPED_TABLE = "filters.json"


@dataclass(frozen=True)
class ObjectType:
    name: str  # "dcim.device"
    path: str  # "dcim/devices"
    filters: dict[str, frozenset[str]]  # base filter name -> lookups it supports
    fields: tuple[str, ...]  # serializer fields, for ?fields=
    hints: dict[str, str]  # short descriptions, e.g. {"site": "Site name (slug)"}
    single: frozenset[str] = frozenset()  # filters taking one value (NetBox keeps the last)
    boolean: frozenset[str] = frozenset()  # filters taking only true/false
    ordering: tuple[str, ...] | None = None  # ?ordering= terms NetBox honours, if known
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a choice filter's values
    # the type a relation filter points at, by its field: {"role": "dcim.devicerole"}
    relations: dict[str, str] = field(default_factory=dict)
    # names that look like filters but that NetBox ignores here, and why (custom fields)
    unfilterable: dict[str, str] = field(default_factory=dict)

    def has_filter(self, key: str) -> bool:
        """True when ``key`` (plain name or name__lookup) is a filter NetBox honours here."""
        if key in self.filters:
            return True
        base, sep, lookup = key.rpartition("__")
        return bool(sep) and lookup in self.filters.get(base, ())

    def is_single(self, key: str) -> bool:
        return key in self.single or key.endswith("__empty")

    def is_bool(self, key: str) -> bool:
        return key in self.boolean or key.endswith("__empty")

    def orderable(self) -> tuple[str, ...]:
        """Known ordering terms, or (tables derived at run time) the plain serializer fields."""
        if self.ordering is not None:
            return self.ordering
        return tuple(f for f in self.fields if f not in ("url", "display_url", "display"))


class FilterTable:
    """Object types and their filters for one NetBox version."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.netbox_version: str = str(raw.get("netbox_version", "unknown"))
        # why cf_ filters are not known, when the custom fields could not be read
        self.custom_fields_note: str | None = None
        sets = [frozenset(s) for s in raw["lookup_sets"]]
        self.types: dict[str, ObjectType] = {}
        for name, entry in raw["types"].items():
            self.types[name] = ObjectType(
                name=name,
                path=entry["path"].strip("/"),
                filters={f: sets[i] for f, i in entry["filters"].items()},
                fields=tuple(entry.get("fields", ())),
                hints=dict(entry.get("hints", {})),
                single=frozenset(entry.get("single", ())),
                boolean=frozenset(entry.get("bool", ())),
                ordering=tuple(entry["ordering"]) if "ordering" in entry else None,
                choices={f: tuple(v) for f, v in entry.get("choices", {}).items()},
                relations=dict(entry.get("relations", {})),
            )
        # other spellings a model might use: "dcim/devices", "devices", "device"
        self._aliases: dict[str, str] = {}
        counts: dict[str, int] = {}
        for name, ot in self.types.items():
            for short in {name.split(".", 1)[1], ot.path.rsplit("/", 1)[-1]}:
                counts[short] = counts.get(short, 0) + 1
        for name, ot in self.types.items():
            self._aliases[ot.path] = name
            self._aliases[ot.path.replace("/", ".")] = name
            for short in {name.split(".", 1)[1], ot.path.rsplit("/", 1)[-1]}:
                if counts[short] == 1 and short not in self.types:
                    self._aliases[short] = name

    def with_types(self, types: dict[str, ObjectType]) -> FilterTable:
        """The same table with ``types`` (same names and paths, other filters)."""
        other = copy.copy(self)
        other.types = types
        return other

    def resolve(self, object_type: str) -> ObjectType:
        """The object type for a name, or ``UnknownObjectType`` naming the closest ones."""
        key = str(object_type).strip().lower()
        if key in self.types:
            return self.types[key]
        alias = self._aliases.get(key.strip("/").removeprefix("api/"))
        if alias:
            return self.types[alias]
        raise UnknownObjectType(object_type, self.closest_types(key))

    def closest_types(self, key: str, n: int = 5) -> list[str]:
        key = key.lower()
        names = list(self.types)
        found = difflib.get_close_matches(key, names, n=n, cutoff=0.5)
        # "device" / "devices" / "ip address" style guesses: match on the model part too
        squashed = re.sub(r"[^a-z0-9]", "", key.split(".")[-1].split("/")[-1])
        for name in names:
            model = name.split(".", 1)[1]
            close = squashed and (squashed == model or squashed.rstrip("s") == model)
            if close and name not in found:
                found.insert(0, name)
        if len(found) < n:
            by_model = {name.split(".", 1)[1]: name for name in names}
            for m in difflib.get_close_matches(squashed, list(by_model), n=n, cutoff=0.6):
                if by_model[m] not in found:
                    found.append(by_model[m])
        return found[:n]


class UnknownObjectType(ValueError):
    def __init__(self, given: str, closest: list[str]) -> None:
        self.given = given
        self.closest = closest
        hint = f" Closest: {', '.join(closest)}." if closest else ""
        super().__init__(
            f"Unknown object_type {given!r}. Use NetBox's dotted names such as "
            f"'dcim.device', 'ipam.prefix'.{hint}"
        )


@cache
def shipped_table() -> FilterTable:
    """The table shipped with the package (NetBox 4.7.3), read once."""
    text = resources.files(__package__).joinpath(SHIPPED_TABLE).read_text(encoding="utf-8")
    return FilterTable(json.loads(text))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "netbox-chat"


def schema_fingerprint(status: dict[str, Any]) -> str:
    """What decides a NetBox's schema besides its version: its plugins and their versions
    (from ``/api/status/``). Custom fields are not in the schema; they are read apart."""
    plugins = status.get("plugins") or {}
    text = json.dumps(sorted(plugins.items()) if isinstance(plugins, dict) else plugins)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# What a cached table holds; a table cached by an older netbox-chat lacks what this one
# reads (2: ``relations``), so it is derived again, never used without it.
TABLE_FORMAT = 2


def cached_table_path(version: str, fingerprint: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", version)
    return cache_dir() / f"filters-netbox-{safe}-{fingerprint}-t{TABLE_FORMAT}.json"


def load_cached_table(version: str, fingerprint: str) -> FilterTable | None:
    path = cached_table_path(version, fingerprint)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return FilterTable(raw)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_cached_table(version: str, fingerprint: str, raw: dict[str, Any]) -> None:
    from .schema import dumps_table

    path = cached_table_path(version, fingerprint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(dumps_table(raw), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only home only costs the next process one schema fetch
