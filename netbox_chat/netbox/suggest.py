"""Which filter a refused name meant: suggestions ranked by meaning, not only spelling.

A refusal is only as good as its first suggestion: the model usually takes it. The
closest spelling is often a valid filter with another meaning (``ip`` -> ``id``,
``vlan_id`` -> ``qinq_svlan_id``, ``since`` -> ``user``), and ``id=100`` for a VLAN
number answers 0 rows without an error, a confident wrong answer. So candidates are
ranked: the same name in another case; NetBox's own word for a common synonym; the
endpoint's own filter that does what a relation hop meant; then spelling, never
leading with ``id`` (or ``q``) unless that is what was asked. Each comes with its
description, so the model can tell ``id`` (this object's id) from a VID. No I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from .object_types import FilterTable, ObjectType

# Other words for NetBox's own filter names, most likely meaning first. A candidate is
# offered only where the endpoint has it (``vid`` means ``vlan_vid`` on prefixes and
# ``vlan``, the assigned VID, on interfaces).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "ip": ("address",),
    "ip_address": ("address",),
    "ipaddress": ("address",),
    "addr": ("address",),
    "cidr": ("prefix", "address"),
    "network": ("prefix",),
    "subnet": ("prefix",),
    "vlan_id": ("vid", "vlan_vid", "vlan", "id"),
    "vlanid": ("vid", "vlan_vid", "vlan"),
    "vlan_number": ("vid", "vlan_vid", "vlan"),
    "vlan": ("vid", "vlan_vid"),
    "vid": ("vlan_vid", "vlan"),
    "since": ("time_after", "created__gte"),
    "after": ("time_after", "created__gte"),
    "from": ("time_after", "created__gte"),
    "start": ("time_after", "created__gte"),
    "until": ("time_before", "created__lte"),
    "before": ("time_before", "created__lte"),
    "to": ("time_before", "created__lte"),
    "end": ("time_before", "created__lte"),
    "date": ("time_after", "created__gte"),
    "hostname": ("name", "dns_name"),
    "host": ("name", "dns_name"),
    "device_name": ("device", "name"),
    "devicename": ("device", "name"),
    "fqdn": ("dns_name",),
    "dns": ("dns_name",),
    "object_type": ("changed_object_type", "object_type"),
    "content_type": ("changed_object_type", "object_type"),
    "model": ("changed_object_type",),
    "object_id": ("changed_object_id",),
    "username": ("user_name", "user"),
    "changed_by": ("user_name", "user"),
    "action_type": ("action",),
    "mac": ("mac_address",),
    "serial_number": ("serial",),
    "sn": ("serial",),
    "state": ("status",),
    "enabled_only": ("enabled",),
    "search": ("q",),
    "query": ("q",),
    "text": ("q",),
    "keyword": ("q",),
    "prefix_length": ("mask_length",),
    "mask": ("mask_length",),
    "asn": ("asn_id", "asn"),
    # Refused without the filter that does the job before issue 24 (item 8): NetBox's
    # interface filter for its device's role, an IP address's containing prefix, and
    # the change log's times (its objects have no `created`).
    "role": ("device_role",),
    "prefix": ("parent",),
    "within": ("parent",),
    "created": ("time_after", "time_before"),
    "created__gte": ("time_after",),
    "created__gt": ("time_after",),
    "created__lte": ("time_before",),
    "created__lt": ("time_before",),
    "time": ("time_after", "time_before"),
}

# What common filters mean, where NetBox's schema gives no short description.
MEANINGS: dict[str, str] = {
    "id": "this object's own id",
    "vid": "VLAN number 1-4094",
    "address": "IP address, e.g. 10.0.0.1/24",
    "prefix": "prefix, e.g. 10.0.0.0/24",
    "name": "exact name",
    "region": "Region (slug)",
    "time_after": "changed at or after, e.g. 2026-01-01",
    "time_before": "changed before",
    "changed_object_type": "type of the changed object, e.g. dcim.device",
    "changed_object_id": "id of the changed object",
    "related_object_type": "type of a related object, not the changed one",
    "user_name": "who made the change",
    "mask_length": "prefix length, e.g. 24",
}

# Valid filters that answer something else than most misspellings meant: offered
# only when the name asked for is close to them on its own terms.
MISLEADING = frozenset({"id", "q", "related_object_type", "related_object_id"})


def describe(ot: ObjectType, name: str) -> str:
    """``name (what it means)``: the schema's description, else our own, else the name."""
    base = name.split("__", 1)[0]
    hint = ot.hints.get(name) or MEANINGS.get(name) or (MEANINGS.get(base) if base else None)
    if hint and hint.lower() != name.replace("_", " "):
        return f"{name} ({hint})"
    return name


def describe_all(ot: ObjectType, names: Iterable[str]) -> str:
    return ", ".join(describe(ot, n) for n in names) or "none"


def own_filter_for_hop(ot: ObjectType, parts: list[str]) -> str | None:
    """The endpoint's own filter doing what a relation hop meant: ``vlan__vid`` on
    prefixes is ``vlan_vid``, ``site__region__slug`` on devices is ``region``,
    ``group__slug`` on VLANs is ``group``, ``site__region__id`` is ``region_id``,
    ``device__site_id`` on interfaces is ``site_id``."""
    field = parts[-1]
    for rel in reversed(parts[:-1]):
        for cand in (
            f"{rel}_{field}",
            rel if field in ("slug", "name") else None,
            f"{rel}_id" if field in ("id", "pk") else None,
        ):
            if cand and ot.has_filter(cand):
                return cand
    # 'device__site_id' on interfaces: the interface's own site_id means the same
    if field.endswith("_id") and field != "id" and ot.has_filter(field):
        return field
    return None


def _spelling(word: str, candidates: list[str], n: int) -> list[str]:
    found = difflib.get_close_matches(word, candidates, n=n, cutoff=0.6)
    # prefix/substring matches catch 'site_name' -> 'site', 'status_id' -> 'status'
    stem = word.split("__")[0]
    for c in candidates:
        if len(found) >= n:
            break
        if c not in found and len(stem) >= 3 and (c.startswith(stem) or stem.startswith(c)):
            found.append(c)
    return found[:n]


def suggest_filters(ot: ObjectType, key: str, n: int = 4) -> list[str]:
    """The filters of ``ot`` that ``key`` most likely meant, best first."""
    low = key.strip().lower()
    ranked: list[str] = []

    def add(name: str | None) -> None:
        if name and name not in ranked and ot.has_filter(name):
            ranked.append(name)

    add(low)  # 'VID', 'SITE_ID'
    for form in (low, low.replace("-", "_").replace(" ", "_")):
        for cand in SYNONYMS.get(form, ()):
            add(cand)
    parts = [p for p in low.split("__") if p]
    if len(parts) > 1:
        add(own_filter_for_hop(ot, parts))
    base = parts[0] if parts else low
    own = ot.name.split(".", 1)[1] + "_"
    if base.startswith(own):  # 'tenant_name' on tenants -> 'name'
        add(base.removeprefix(own))
    for suffix in ("_name", "_slug"):  # 'tenant_name' -> 'tenant'
        if base.endswith(suffix):
            add(base.removesuffix(suffix))
    for cand in SYNONYMS.get(base, ()):
        add(cand)
    for cand in _spelling(low.replace("__", "_"), list(ot.filters), n + 2):
        if cand in MISLEADING and not low.startswith(cand):
            continue
        add(cand)
    return ranked[:n]


# Where to look when the asked-for type has no such filter, most asked-about first.
COMMON_TYPES = (
    "dcim.device", "dcim.interface", "dcim.site", "ipam.prefix", "ipam.vlan", "ipam.ipaddress",
    "virtualization.virtualmachine", "core.objectchange",
)  # fmt: skip


def elsewhere(table: FilterTable, ot: ObjectType, key: str, n: int = 3) -> list[str]:
    """Common types that do have the filter ``key`` meant: ``vid`` on devices is a
    filter of ipam.vlan, ``vlan_vid`` of ipam.prefix, ``vlan`` of dcim.interface."""
    low = key.strip().lower()
    wanted = (low, *SYNONYMS.get(low, ()))
    found = []
    for name in COMMON_TYPES:
        other = table.types.get(name)
        if other is None or other is ot:
            continue
        hit = next((w for w in wanted if other.has_filter(w)), None)
        if hit:
            found.append(f"{name} ({hit})")
        if len(found) >= n:
            break
    return found


def suggest_names(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Closest names among ``candidates`` (fields, ordering terms), synonyms first."""
    cands = list(candidates)
    low = word.strip().lower()
    ranked = [low] if low in cands else []
    for cand in SYNONYMS.get(low, ()):
        if cand in cands and cand not in ranked:
            ranked.append(cand)
    for cand in _spelling(low, cands, n + 2):
        if cand in MISLEADING and not low.startswith(cand):
            continue
        if cand not in ranked:
            ranked.append(cand)
    return ranked[:n]
