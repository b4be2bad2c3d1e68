"""The question set: templates over the user's own data, drawn by seed, with
the truth computed by the harness's own queries (truth.py).

A template names its tier, answer type and domain and turns the catalog
(every object of each type the templates draw from, read whole) into drafts:
a question's words, the query that answers it, and the names that would be
wrong to give. Each template draws with its own seeded generator, so the same
seed on the same data gives the same questions, and adding a template changes
no other template's draw. A template whose objects this NetBox does not have
yields nothing and is skipped; one whose read failed is left out whole and
said so (a slow NetBox is not an empty one).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from netbox_chat.claims.grounding import DEVICE_STATUSES, IP_STATUSES
from netbox_chat.claims.reader import singular
from netbox_chat.eval.truth import (
    NoData,
    Query,
    QueryError,
    TruthClient,
    dig,
    label,
)

TIERS = ("simple", "medium", "advanced")
KINDS = ("count", "list", "value", "boolean", "absence", "explanation")
BUDGETS = {"simple": 3, "medium": 7, "advanced": 12}
"""Tool calls a question of each tier should need: the measured medians and
75th percentiles of the benchmark this product grew from (issue 23)."""

MAX_LIST = 25
"""A list question whose answer is longer cannot be read back reliably."""

Expected = int | str | list[str] | dict[str, Any] | None


@dataclass(frozen=True)
class Question:
    """One question with its truth. `universe` holds names a wrong answer
    would give (the other objects of the kind asked for); `trap` names the
    failure the question is built to catch."""

    id: str
    text: str
    tier: str
    kind: str
    domain: str
    query: Query | None
    """The harness's query that computed `expected` (None: typed in a questions file)."""
    expected: Expected
    universe: tuple[str, ...] = ()
    trap: str | None = None
    unscoped: int | None = None
    reference: str = ""
    source: str = "built"
    template: str = ""
    """The template it was drawn from: its near-duplicates share it, and the
    statistics resample templates, not questions ("" for a user's own)."""
    noun: str = ""
    """What the question counts or lists ("devices"), for the scorer."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Other names of the names in `expected` and `universe` (a slug, a display
    form, `#<id>`; for an unnamed object outside a built truth, its id of one
    kind, `device #42`): an answer that writes one names that object (an
    unnamed device is "#17" as much as "Dell R640 (17)")."""

    @property
    def group(self) -> str:
        """The cluster it belongs to: its template, or itself when typed in."""
        return self.template or self.id

    def as_json(self, *, universe: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "tier": self.tier,
            "kind": self.kind,
            "domain": self.domain,
            "expected": self.expected,
            "query": None if self.query is None else self.query.as_json(),
            "trap": self.trap,
            "source": self.source,
            "template": self.template,
            "noun": self.noun,
        }
        if self.unscoped is not None:
            data["unscoped"] = self.unscoped
        if self.reference:
            data["reference"] = self.reference
        if universe:
            data["universe"] = list(self.universe)
        if self.aliases:
            data["aliases"] = {name: list(other) for name, other in self.aliases.items()}
        return data


def question_from_json(data: Mapping[str, Any]) -> Question:
    """A question as a run folder stored it (the run's own file, re-read on --resume)."""
    query = data.get("query")
    return Question(
        id=str(data["id"]),
        text=str(data["text"]),
        tier=str(data["tier"]),
        kind=str(data["kind"]),
        domain=str(data["domain"]),
        query=None
        if query is None
        else Query(
            path=query["path"],
            params=tuple((str(k), str(v)) for k, v in query["params"].items()),
            take=query["take"],
            where=tuple((str(k), None if v is None else str(v)) for k, v in query["where"]),
        ),
        expected=_expected(data["expected"]),
        universe=tuple(data.get("universe") or ()),
        trap=data.get("trap"),
        unscoped=data.get("unscoped"),
        reference=str(data.get("reference") or ""),
        source=str(data.get("source") or "built"),
        template=str(data.get("template") or ""),
        noun=str(data.get("noun") or ""),
        aliases=_aliases(data.get("aliases") or {}),
    )


def _expected(data: Any) -> Any:
    if isinstance(data, dict) and not isinstance(data.get("empty", False), bool):
        raise ValueError("a question's expected empty is not true or false")
    return data


def _aliases(data: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(data, dict) or not all(
        isinstance(name, str) and isinstance(other, list) and all(isinstance(o, str) for o in other)
        for name, other in data.items()
    ):
        raise ValueError("a question's aliases are not names and their other names")
    return {name: tuple(other) for name, other in data.items()}


# --- the catalog --------------------------------------------------------------------

CATALOG = (
    "dcim/sites",
    "dcim/devices",
    "dcim/device-roles",
    "dcim/racks",
    "dcim/power-panels",
    "dcim/power-feeds",
    "ipam/prefixes",
    "ipam/ip-addresses",
    "ipam/vlans",
    "ipam/vrfs",
    "tenancy/tenants",
    "circuits/circuits",
    "circuits/providers",
    "circuits/provider-networks",
    "dcim/interfaces",
    "dcim/platforms",
    "virtualization/virtual-machines",
    "virtualization/clusters",
    "core/object-changes",
    "extras/tags",
)

Catalog = Mapping[str, Sequence[Mapping[str, Any]]]

READERS = 4
"""Object types read at once: NetBox serves a few requests in parallel (its
gunicorn workers), and more would only queue there."""

CHANGED = {"core/object-changes": "time"}
"""The field that says when an object last changed, where it is not `last_updated`."""


class Unread(Exception):
    """A template asked for an object type whose read failed: the template is left out."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(why)
        self.path, self.why = path, why


@dataclass
class CatalogRead(Mapping[str, Sequence[Mapping[str, Any]]]):
    """Every object of each type the templates draw from, read whole or not at
    all: a type whose read failed raises `Unread` when a template asks for it
    (so no truth and no universe is built from part of it); a type NetBox
    refused (403) or lacks (404) is empty, and `absent` says why."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, path: str) -> Sequence[Mapping[str, Any]]:
        if path in self.failed:
            raise Unread(path, self.failed[path])
        return self.rows.get(path, [])

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def fingerprint(self) -> dict[str, Any]:
        """What the questions came from: per type, how many objects and when the
        last of them changed (a failed read says so), for --resume to compare."""
        found: dict[str, Any] = {}
        for path in CATALOG:
            if path in self.failed:
                found[path] = {"failed": self.failed[path]}
                continue
            rows = self.rows.get(path, [])
            stamps = [
                str(r[CHANGED.get(path, "last_updated")] or "") for r in rows if _stamped(r, path)
            ]
            found[path] = {"count": len(rows), "last_change": max(stamps, default=None)}
        return found


def _stamped(row: Mapping[str, Any], path: str) -> bool:
    return bool(row.get(CHANGED.get(path, "last_updated")))


def read_catalog(client: TruthClient) -> CatalogRead:
    """Every object of each type the templates draw from, ordered by id (so the
    draw depends on the data, not on NetBox's default ordering), the types read
    `READERS` at once, each once."""
    read = CatalogRead()

    def one(path: str) -> None:
        try:
            rows = client.rows(path, [("ordering", "id")])
        except NoData as exc:
            read.absent[path] = str(exc)
            rows = []
        except QueryError as exc:  # time-outs, 5xx, a reply that is no listing
            read.failed[path] = str(exc)
            return
        read.rows[path] = [row for row in rows if "id" in row]

    with ThreadPoolExecutor(READERS) as pool:
        list(pool.map(one, CATALOG))
    read.rows = {path: read.rows[path] for path in CATALOG if path in read.rows}
    return read


def data_now(client: TruthClient) -> dict[str, Any]:
    """The fingerprint of NetBox's data as it is now, one small request per type
    (its count and its most recently changed object), to compare with a run's."""
    found: dict[str, Any] = {}

    def one(path: str) -> None:
        stamp = CHANGED.get(path, "last_updated")
        try:
            page = client.get(path, [("limit", "1"), ("ordering", f"-{stamp}")])
        except NoData:
            found[path] = {"count": 0, "last_change": None}
            return
        except QueryError as exc:
            found[path] = {"failed": str(exc)}
            return
        results = page.get("results") if isinstance(page, dict) else None
        first = results[0] if isinstance(results, list) and results else {}
        last = first.get(stamp) if isinstance(first, dict) else None
        count = page.get("count") if isinstance(page, dict) else None
        found[path] = {"count": count, "last_change": str(last) if last else None}

    with ThreadPoolExecutor(READERS) as pool:
        list(pool.map(one, CATALOG))
    return {path: found[path] for path in CATALOG}


def changed_types(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The types whose count or last change differ between two fingerprints
    (a type either side could not read is left out: unknown is not changed)."""
    changed = []
    for path, before in then.items():
        after = now.get(path)
        if not isinstance(before, dict) or not isinstance(after, dict):
            continue
        if "failed" in before or "failed" in after:
            continue
        if before != after:
            changed.append(path)
    return changed


def names(rows: Iterable[Mapping[str, Any]], key: str = "name") -> tuple[str, ...]:
    """Every object's name (an unnamed one's display form: truth.label)."""
    found = (label(row) if key == "name" else row.get(key) for row in rows)
    return tuple(sorted({str(name) for name in found if name}))


def unnamed_ids(cat: Catalog) -> dict[str, str]:
    """The id alias of each catalog object without a name, by the label it goes
    by (truth.label): "Dell R640 (42)" -> "device #42". A built question's wrong
    extras carry it, so an answer adding "#42" or "device id 42" to a list
    names a wrong object; the kind keeps "site id 42" or a VM's "id 42" from
    naming the device (scoring._refers_to). A named object gets none: its
    name is how an answer gives it, and ids repeat across object types."""
    found: dict[str, str] = {}
    seen: Counter[str] = Counter()
    for path, rows in cat.items():
        kind = singular(path.rsplit("/", 1)[-1].replace("-", " "))
        for row in rows:
            if "name" in row and row["name"] in (None, "") and (name := label(row)):
                found[name] = f"{kind} #{row['id']}"
                seen[name] += 1
    return {name: alias for name, alias in found.items() if seen[name] == 1}


def unique(rows: Sequence[Mapping[str, Any]], key: str = "name") -> list[Mapping[str, Any]]:
    """Rows whose `key` no other row shares: a question naming one is unambiguous."""
    seen = Counter(str(row.get(key)) for row in rows)
    return [row for row in rows if row.get(key) and seen[str(row.get(key))] == 1]


# --- templates ----------------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    key: str
    text: str
    query: Query
    universe: tuple[str, ...] = ()
    unscoped: Query | None = None
    reference: str = ""
    scope: Query | None = None
    """A yes/no question's scope ("all devices at site S"): a draft whose scope
    is empty is dropped, since "yes" and "there are none" are both right then."""


@dataclass(frozen=True)
class Template:
    id: str
    tier: str
    kind: str
    domain: str
    drafts: Callable[[Catalog], list[Draft]]
    trap: str | None = None
    empty_is_absence: bool = False
    """A list whose truth is empty becomes an absence question ("none")."""
    noun: str = ""
    """What its questions count, list or ask the value of, for the scorer."""


def q(
    path: str, take: str = "count", where: Sequence[tuple[str, str | None]] = (), **params: Any
) -> Query:
    return Query(path, tuple((k, str(v)) for k, v in params.items()), take, tuple(where))


Row = Mapping[str, Any]


def each(
    rows: Iterable[Row],
    text: str,
    query: Callable[[Row], Query],
    universe: tuple[str, ...] = (),
    *,
    scope: Callable[[Row], Query] | None = None,
    unscoped: Callable[[Row], Query] | None = None,
) -> list[Draft]:
    """One draft per object, keyed by its id: `text` filled in with its fields
    (`{name}`, `{site[name]}`), its query (and a yes/no question's scope, a
    scoped count's unscoped total) made for it. Most templates are this."""
    return [
        Draft(
            str(row["id"]),
            text.format_map(row),
            query(row),
            universe,
            unscoped=None if unscoped is None else unscoped(row),
            scope=None if scope is None else scope(row),
        )
        for row in rows
    ]


def field_of(path: str, field: str) -> Callable[[Row], Query]:
    """The query for a field of the object itself: `status` of dcim/devices/7."""
    return lambda row: q(f"{path}/{row['id']}", f"value:{field}")


def having(
    path: str, take: str, key: str, where: Sequence[tuple[str, str | None]] = (), **params: Any
) -> Callable[[Row], Query]:
    """The query for the `path` objects whose filter `key` is the object's id
    (the devices with site_id=S)."""
    return lambda row: q(path, take, where, **{key: row["id"]}, **params)


def _sites_devices(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "How many devices are at site {name}?",
        having("dcim/devices", "count", "site_id"),
    )


def _device_status(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/devices"]),
        "What is the status of device {name}?",
        field_of("dcim/devices", "status"),
        DEVICE_STATUSES,
    )


def _rack_site(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/racks"]),
        "Which site is rack {name} in?",
        field_of("dcim/racks", "site.name"),
        names(cat["dcim/sites"]),
    )


def _tenant_count(cat: Catalog) -> list[Draft]:
    return (
        [Draft("all", "How many tenants are defined in NetBox?", q("tenancy/tenants"))]
        if cat["tenancy/tenants"]
        else []
    )


def _vlan_vid(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["ipam/vlans"]),
        "What is the VLAN ID (VID) of VLAN {name}?",
        field_of("ipam/vlans", "vid"),
        tuple(sorted({str(v["vid"]) for v in cat["ipam/vlans"] if v.get("vid") is not None})),
    )


def _prefix_vrf(cat: Catalog) -> list[Draft]:
    return each(
        [p for p in unique(cat["ipam/prefixes"], "prefix") if p.get("vrf")],
        "Which VRF is prefix {prefix} in?",
        field_of("ipam/prefixes", "vrf.name"),
        names(cat["ipam/vrfs"]),
    )


def _ip_status(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["ipam/ip-addresses"], "address"),
        "What is the status of IP address {address}?",
        field_of("ipam/ip-addresses", "status"),
        IP_STATUSES,
    )


def _circuit_provider(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["circuits/circuits"], "cid"),
        "Which provider supplies circuit {cid}?",
        field_of("circuits/circuits", "provider.name"),
        names(cat["circuits/providers"]),
    )


def _vm_cluster(cat: Catalog) -> list[Draft]:
    return each(
        [v for v in unique(cat["virtualization/virtual-machines"]) if v.get("cluster")],
        "Which cluster does virtual machine {name} run in?",
        field_of("virtualization/virtual-machines", "cluster.name"),
        names(cat["virtualization/clusters"]),
    )


def _feed_panel(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/power-feeds"]),
        "Which power panel does power feed {name} come from?",
        field_of("dcim/power-feeds", "power_panel.name"),
        names(cat["dcim/power-panels"]),
    )


def _vrf_rd(cat: Catalog) -> list[Draft]:
    return each(
        [v for v in unique(cat["ipam/vrfs"]) if v.get("rd")],
        "What is the route distinguisher of VRF {name}?",
        field_of("ipam/vrfs", "rd"),
        names(cat["ipam/vrfs"], "rd"),
    )


def _device_interfaces(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/devices"]),
        "How many interfaces does device {name} have?",
        having("dcim/interfaces", "count", "device_id"),
    )


def _changes_by_user(cat: Catalog) -> list[Draft]:
    users = sorted({str(c["user_name"]) for c in cat["core/object-changes"] if c.get("user_name")})
    return [
        Draft(
            user,
            f"How many changes has user {user} made in NetBox?",
            q("core/object-changes", user_name=user),
        )
        for user in users
    ]


def _site_status_count(cat: Catalog) -> list[Draft]:
    statuses = sorted({str(dig(d, "status")) for d in cat["dcim/devices"] if dig(d, "status")})
    return [
        Draft(
            f"{s['id']}-{status}",
            f"How many {status} devices are at site {s['name']}?",
            q("dcim/devices", site_id=s["id"], status=status),
        )
        for s in unique(cat["dcim/sites"])
        for status in statuses
    ]


def _role_site_list(cat: Catalog) -> list[Draft]:
    return [
        Draft(
            f"{s['id']}-{r['id']}",
            f"List the devices with role {r['name']} at site {s['name']}.",
            q("dcim/devices", "list:name", site_id=s["id"], role_id=r["id"]),
            names(cat["dcim/devices"]),
        )
        for s in unique(cat["dcim/sites"])
        for r in unique(cat["dcim/device-roles"])
    ]


def _vrf_prefixes(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["ipam/vrfs"]),
        "How many active prefixes are in VRF {name}?",
        having("ipam/prefixes", "count", "vrf_id", status="active"),
    )


def _site_vlans(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "Which VLANs are assigned to site {name}? Give their names.",
        having("ipam/vlans", "list:name", "site_id"),
        names(cat["ipam/vlans"]),
    )


def _cluster_vms(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["virtualization/clusters"]),
        "Which virtual machines run in cluster {name}?",
        having("virtualization/virtual-machines", "list:name", "cluster_id"),
        names(cat["virtualization/virtual-machines"]),
    )


def _provider_circuits(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["circuits/providers"]),
        "How many active circuits does provider {name} have?",
        having("circuits/circuits", "count", "provider_id", status="active"),
    )


def _site_all_active(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "Are all devices at site {name} active? Name any that are not.",
        having("dcim/devices", "list:name", "site_id", [("!status", "active")]),
        names(cat["dcim/devices"]),
        scope=having("dcim/devices", "count", "site_id"),
    )


def _tenant_site_devices(cat: Catalog) -> list[Draft]:
    return [
        Draft(
            f"{t['id']}-{s['id']}",
            f"How many devices does tenant {t['name']} have at site {s['name']}?",
            q("dcim/devices", tenant_id=t["id"], site_id=s["id"]),
        )
        for t in unique(cat["tenancy/tenants"])
        for s in unique(cat["dcim/sites"])
    ]


def _site_cables(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "How many cables are there at site {name}?",
        having("dcim/cables", "count", "site_id"),
    )


def _rack_devices(cat: Catalog) -> list[Draft]:
    return each(
        [r for r in cat["dcim/racks"] if dig(r, "site.name")],
        "Which devices are in rack {name} at site {site[name]}?",
        having("dcim/devices", "list:name", "rack_id"),
        names(cat["dcim/devices"]),
    )


def _panel_feeds(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/power-panels"]),
        "Which power feeds come from power panel {name}?",
        having("dcim/power-feeds", "list:name", "power_panel_id"),
        names(cat["dcim/power-feeds"]),
    )


def _vrf_active_ips(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["ipam/vrfs"]),
        "How many IP addresses in VRF {name} are active?",
        having("ipam/ip-addresses", "count", "vrf_id", status="active"),
    )


def _cabled_interfaces(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/devices"]),
        "How many interfaces on device {name} are connected by a cable?",
        having("dcim/interfaces", "count", "device_id", [("!cable", None)]),
    )


def _untenanted(cat: Catalog) -> list[Draft]:
    if not cat["dcim/devices"]:
        return []
    return [
        Draft(
            "all",
            "How many devices have no tenant assigned?",
            q("dcim/devices", where=[("tenant", None)]),
            unscoped=q("dcim/devices"),
        )
    ]


def _untenanted_site(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "How many devices at site {name} have no tenant assigned?",
        having("dcim/devices", "count", "site_id", [("tenant", None)]),
        unscoped=having("dcim/devices", "count", "site_id"),
    )


def _role_sites(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/device-roles"]),
        "Which sites have at least one device with role {name}?",
        having("dcim/devices", "distinct:site.name", "role_id"),
        names(cat["dcim/sites"]),
    )


def _cluster_tenants(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["virtualization/clusters"]),
        "Which tenants own virtual machines in cluster {name}?",
        having("virtualization/virtual-machines", "distinct:tenant.name", "cluster_id"),
        names(cat["tenancy/tenants"]),
    )


def _no_primary_ip(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/sites"]),
        "Which devices at site {name} have no primary IPv4 address?",
        having("dcim/devices", "list:name", "site_id", [("primary_ip4", None)]),
        names(cat["dcim/devices"]),
    )


def _vlan_false_premise(cat: Catalog) -> list[Draft]:
    """Where is VLAN <vid> deployed for a tenant that has none with that vid
    (the recorded false premise: every model named a place)."""
    vlans = cat["ipam/vlans"]
    have = {(dig(v, "tenant.id"), v.get("vid")) for v in vlans}
    vids = sorted({v["vid"] for v in vlans if v.get("vid") is not None})
    return [
        Draft(
            f"{t['id']}-{vid}",
            f"Where is VLAN {vid} deployed for tenant {t['name']}?",
            q("ipam/vlans", "list:name", vid=vid, tenant_id=t["id"]),
            names(cat["dcim/sites"]) + names(vlans),
        )
        for t in unique(cat["tenancy/tenants"])
        for vid in vids
        if (t["id"], vid) not in have
    ]


def _circuit_false_premise(cat: Catalog) -> list[Draft]:
    have = {(dig(c, "provider.id"), dig(c, "tenant.id")) for c in cat["circuits/circuits"]}
    return [
        Draft(
            f"{p['id']}-{t['id']}",
            f"Which circuits does provider {p['name']} deliver to tenant {t['name']}?",
            q("circuits/circuits", "list:cid", provider_id=p["id"], tenant_id=t["id"]),
            names(cat["circuits/circuits"], "cid"),
        )
        for p in unique(cat["circuits/providers"])
        for t in unique(cat["tenancy/tenants"])
        if (p["id"], t["id"]) not in have
    ]


def _device_changers(cat: Catalog) -> list[Draft]:
    changed = sorted(
        {
            (int(c["changed_object_id"]), str(c.get("object_repr") or ""))
            for c in cat["core/object-changes"]
            if c.get("changed_object_type") == "dcim.device" and c.get("changed_object_id")
        }
    )
    return [
        Draft(
            str(oid),
            f"Which users have changed device {name}?",
            q(
                "core/object-changes",
                "distinct:user_name",
                changed_object_type="dcim.device",
                changed_object_id=oid,
            ),
            names(cat["core/object-changes"], "user_name"),
        )
        for oid, name in changed
        if name
    ]


def _vms_without_tenant(cat: Catalog) -> list[Draft]:
    vms = "virtualization/virtual-machines"
    return each(
        unique(cat["virtualization/clusters"]),
        "Does every virtual machine in cluster {name} have a tenant? Name any that do not.",
        having(vms, "list:name", "cluster_id", [("tenant", None)]),
        names(cat[vms]),
        scope=having(vms, "count", "cluster_id"),
    )


def _describe_device(cat: Catalog) -> list[Draft]:
    return [
        Draft(
            str(d["id"]),
            f"Describe device {d['name']}: where it is, what role it has and what state it is in.",
            q(f"dcim/devices/{d['id']}", "value:name"),
            reference=(
                f"{d['name']} is at site {dig(d, 'site.name')}, has role {dig(d, 'role.name')} "
                f"and status {dig(d, 'status')}."
            ),
        )
        for d in unique(cat["dcim/devices"])
        if dig(d, "site.name")
    ]


# --- what operators ask most (issue 34): an address's holder, a serial, a tag, a
# custom field, a prefix's addresses ---------------------------------------------------

_HOLDER = {
    "dcim.interface": "assigned_object.device.name",
    "virtualization.vminterface": "assigned_object.virtual_machine.name",
}


def _ip_holder(cat: Catalog) -> list[Draft]:
    """Which device or VM holds address X: the trap is an address on a VM's
    interface, where the device tools find nothing."""
    return each(
        [a for a in unique(cat["ipam/ip-addresses"], "address") if _held(a)],
        "Which device or virtual machine has IP address {address}?",
        lambda a: q(f"ipam/ip-addresses/{a['id']}", f"value:{_HOLDER[a['assigned_object_type']]}"),
        names(cat["dcim/devices"]) + names(cat["virtualization/virtual-machines"]),
    )


def _held(address: Row) -> bool:
    """An address assigned to a device's or a VM's interface."""
    return address.get("assigned_object_type") in _HOLDER


def _ip_interface(cat: Catalog) -> list[Draft]:
    """The interface an address is on; the wrong names are the other interfaces
    that hold an address."""
    interfaces = tuple(
        sorted(
            {str(n) for a in cat["ipam/ip-addresses"] if (n := dig(a, "assigned_object.name"))}
            | set(names(cat["dcim/interfaces"]))
        )
    )
    return each(
        [a for a in unique(cat["ipam/ip-addresses"], "address") if _held(a)],
        "Which interface is IP address {address} assigned to?",
        field_of("ipam/ip-addresses", "assigned_object.name"),
        interfaces,
    )


def _ip_unassigned(cat: Catalog) -> list[Draft]:
    """Which device has an address that is assigned to nothing: there is none."""
    return each(
        [
            a
            for a in unique(cat["ipam/ip-addresses"], "address")
            if not a.get("assigned_object_type")
        ],
        "Which device has IP address {address}?",
        lambda a: q(
            "ipam/ip-addresses",
            "list:address",
            [("!assigned_object_type", None)],
            address=a["address"],
        ),
        names(cat["dcim/devices"]) + names(cat["virtualization/virtual-machines"]),
    )


def _device_serial(cat: Catalog) -> list[Draft]:
    return each(
        [d for d in unique(cat["dcim/devices"]) if d.get("serial")],
        "What is the serial number of device {name}?",
        field_of("dcim/devices", "serial"),
        names(cat["dcim/devices"], "serial"),
    )


def _tag_devices(cat: Catalog) -> list[Draft]:
    return each(
        [t for t in unique(cat["extras/tags"]) if t.get("slug")],
        "Which devices are tagged {name}?",
        lambda t: q("dcim/devices", "list:name", tag=t["slug"]),
        names(cat["dcim/devices"]),
    )


def _site_custom_field(cat: Catalog) -> list[Draft]:
    """A custom field's value on a site (only fields a site has a value in)."""
    return [
        Draft(
            f"{s['id']}-{name}",
            f"What is the value of custom field {name} on site {s['name']}?",
            q(f"dcim/sites/{s['id']}", f"value:custom_fields.{name}"),
            tuple(
                sorted(
                    {
                        str(other["custom_fields"][name])
                        for other in cat["dcim/sites"]
                        if isinstance(other.get("custom_fields"), dict)
                        and other["custom_fields"].get(name) not in (None, "")
                    }
                )
            ),
        )
        for s in unique(cat["dcim/sites"])
        if isinstance(s.get("custom_fields"), dict)
        for name, value in sorted(s["custom_fields"].items())
        if value not in (None, "", [], {}) and isinstance(value, str | int)
    ]


def _prefix_addresses(cat: Catalog) -> list[Draft]:
    """How many addresses a prefix holds, in its own VRF (as NetBox counts a
    prefix's child addresses): the prefix's utilisation, in addresses.
    Containers are left out: NetBox counts theirs across every VRF."""
    return [
        Draft(
            str(p["id"]),
            f"How many IP addresses are there in prefix {p['prefix']}"
            + (f" (VRF {dig(p, 'vrf.name')})?" if p.get("vrf") else " (global table)?"),
            q(
                "ipam/ip-addresses",
                where=[("vrf.id", str(dig(p, "vrf.id")))] if p.get("vrf") else [("vrf", None)],
                parent=p["prefix"],
            ),
        )
        for p in unique(cat["ipam/prefixes"], "prefix")
        if dig(p, "status") != "container"
    ]


# --- what is plugged into a port, an interface's VLANs, a platform, where a circuit
# lands (issue 34). Each is answerable with the agent's read tools: an interface
# read by id carries its link_peers (the far end of its cable), mode and VLANs; a
# circuit carries termination_a and termination_z. ---------------------------------


def _ports(cat: Catalog) -> list[Row]:
    """Interfaces on a named device, which PORT names unambiguously: an
    interface's name is unique to its device
    (https://netboxlabs.com/docs/netbox/models/dcim/interface)."""
    return [i for i in cat["dcim/interfaces"] if i.get("name") and dig(i, "device.name")]


PORT = "interface {name} of device {device[name]}"


PEER_PATHS = {
    "dcim.interface": ("dcim/interfaces", "device.name"),
    "dcim.frontport": ("dcim/front-ports", "device.name"),
    "dcim.rearport": ("dcim/rear-ports", "device.name"),
    "circuits.circuittermination": ("circuits/circuit-terminations", "circuit.cid"),
}
"""Where the far end of a cable is listed by its cable (NetBox's cable_id filter),
and what names it: a device's port names its device, a circuit's termination its
circuit (an interface's link_peers_type;
https://netboxlabs.com/docs/netbox/models/dcim/cable)."""


def _cable_peers(circuit: bool) -> Callable[[Catalog], list[Draft]]:
    """What is on the other end of the cable in a port: a device, or (the trap)
    a circuit's termination, where the device tools find no device. Asked the
    same way for both, so the wording does not give the answer away."""

    def peer(port: Row) -> Query:
        kind = port["link_peers_type"]
        path, name = PEER_PATHS[kind]
        mine = [("!id", str(port["id"]))] if kind == "dcim.interface" else []
        return q(path, f"value:{name}", mine, cable_id=dig(port, "cable.id"))

    def drafts(cat: Catalog) -> list[Draft]:
        return each(
            [
                i
                for i in _ports(cat)
                if i.get("link_peers_type") in PEER_PATHS
                and dig(i, "cable.id") is not None
                and (i["link_peers_type"] == "circuits.circuittermination") == circuit
            ],
            f"What is on the other end of the cable plugged into {PORT}? "
            "Give the device, or the circuit if it goes to a circuit.",
            peer,
            names(cat["dcim/devices"]) + names(cat["circuits/circuits"], "cid"),
        )

    return drafts


MODES = ("access", "tagged")
"""802.1Q modes whose VLANs are the ones listed on the interface (tagged-all
carries every VLAN, whatever is listed: its questions would need reading)."""


def _interface_mode(cat: Catalog) -> list[Draft]:
    return each(
        [i for i in _ports(cat) if dig(i, "mode") in MODES],
        f"What is the 802.1Q mode of {PORT}?",
        field_of("dcim/interfaces", "mode"),
        ("access", "tagged", "tagged-all", "q-in-q"),
    )


def _untagged_vlan(cat: Catalog) -> list[Draft]:
    return each(
        [i for i in _ports(cat) if dig(i, "mode") in MODES and i.get("untagged_vlan")],
        f"Which VLAN is untagged on {PORT}? Give its name.",
        field_of("dcim/interfaces", "untagged_vlan.name"),
        names(cat["ipam/vlans"]),
    )


def _interface_vlans(cat: Catalog) -> list[Draft]:
    """Every VLAN an interface carries: NetBox's VLAN filter interface_id holds
    the untagged and the tagged ones alike, as the question asks."""
    return each(
        [i for i in _ports(cat) if dig(i, "mode") in MODES],
        f"Which VLANs does {PORT} carry, tagged or untagged? Give their names.",
        having("ipam/vlans", "list:name", "interface_id"),
        names(cat["ipam/vlans"]),
    )


def _device_platform(cat: Catalog) -> list[Draft]:
    return each(
        [d for d in unique(cat["dcim/devices"]) if d.get("platform")],
        "Which platform does device {name} run?",
        field_of("dcim/devices", "platform.name"),
        names(cat["dcim/platforms"]),
    )


def _platform_devices(cat: Catalog) -> list[Draft]:
    return each(
        unique(cat["dcim/platforms"]),
        "Which devices run platform {name}?",
        having("dcim/devices", "list:name", "platform_id"),
        names(cat["dcim/devices"]),
    )


LANDINGS = ("dcim.site", "circuits.providernetwork")
"""Where a circuit's side lands, as the question asks: a site or a provider
network (since NetBox 4.2 a termination is termination_type + termination_id;
https://netboxlabs.com/docs/netbox/v4.3/models/circuits/circuittermination.md)."""


def _circuit_sides(cat: Catalog) -> list[Draft]:
    """The trap: a side at a provider network, not at a site."""
    universe = names(cat["dcim/sites"]) + names(cat["circuits/provider-networks"])
    return [
        Draft(
            f"{c['id']}-{side}",
            f"Where does the {side} side of circuit {c['cid']} terminate? "
            "Give the site or provider network.",
            q(
                "circuits/circuit-terminations",
                "value:termination.name",
                circuit_id=c["id"],
                term_side=side,
            ),
            universe,
        )
        for c in unique(cat["circuits/circuits"], "cid")
        for side in ("A", "Z")
        if dig(c, f"termination_{side.lower()}.termination_type") in LANDINGS
    ]


TEMPLATES: tuple[Template, ...] = (
    Template("site-devices", "simple", "count", "devices", _sites_devices, noun="devices"),
    Template("device-status", "simple", "value", "devices", _device_status, noun="status"),
    Template("rack-site", "simple", "value", "racks", _rack_site, noun="site"),
    Template("tenant-count", "simple", "count", "tenants", _tenant_count, noun="tenants"),
    Template("vlan-vid", "simple", "value", "vlans", _vlan_vid, noun="VLAN ID"),
    Template("prefix-vrf", "simple", "value", "prefixes", _prefix_vrf, noun="VRF"),
    Template("ip-status", "simple", "value", "ip-addresses", _ip_status, noun="status"),
    Template("circuit-provider", "simple", "value", "circuits", _circuit_provider, noun="provider"),
    Template("vm-cluster", "simple", "value", "virtual-machines", _vm_cluster, noun="cluster"),
    Template("feed-panel", "simple", "value", "power", _feed_panel, noun="power panel"),
    Template("vrf-rd", "simple", "value", "vrfs", _vrf_rd, noun="route distinguisher"),
    Template(
        "device-interfaces", "simple", "count", "interfaces", _device_interfaces, noun="interfaces"
    ),
    Template("user-changes", "simple", "count", "changelog", _changes_by_user, noun="changes"),
    Template(
        "site-status-devices", "medium", "count", "devices", _site_status_count, noun="devices"
    ),
    Template(
        "role-site-devices",
        "medium",
        "list",
        "devices",
        _role_site_list,
        empty_is_absence=True,
        noun="devices",
    ),
    Template("vrf-active-prefixes", "medium", "count", "prefixes", _vrf_prefixes, noun="prefixes"),
    Template(
        "site-vlans", "medium", "list", "vlans", _site_vlans, empty_is_absence=True, noun="VLANs"
    ),
    Template(
        "cluster-vms",
        "medium",
        "list",
        "virtual-machines",
        _cluster_vms,
        empty_is_absence=True,
        noun="virtual machines",
    ),
    Template(
        "provider-active-circuits",
        "medium",
        "count",
        "circuits",
        _provider_circuits,
        noun="circuits",
    ),
    Template("site-all-active", "medium", "boolean", "devices", _site_all_active, noun="devices"),
    Template(
        "tenant-site-devices", "medium", "count", "tenants", _tenant_site_devices, noun="devices"
    ),
    Template("site-cables", "medium", "count", "cables", _site_cables, noun="cables"),
    Template(
        "rack-devices",
        "medium",
        "list",
        "racks",
        _rack_devices,
        empty_is_absence=True,
        noun="devices",
    ),
    Template("panel-feeds", "medium", "list", "power", _panel_feeds, noun="power feeds"),
    Template(
        "vrf-active-ips", "medium", "count", "ip-addresses", _vrf_active_ips, noun="IP addresses"
    ),
    Template(
        "cabled-interfaces", "medium", "count", "interfaces", _cabled_interfaces, noun="interfaces"
    ),
    Template(
        "untenanted-devices",
        "advanced",
        "count",
        "devices",
        _untenanted,
        trap="scoped-count",
        noun="devices",
    ),
    Template(
        "site-untenanted-devices",
        "advanced",
        "count",
        "devices",
        _untenanted_site,
        trap="scoped-count",
        noun="devices",
    ),
    Template("role-sites", "advanced", "list", "sites", _role_sites, noun="sites"),
    Template(
        "cluster-tenants",
        "advanced",
        "list",
        "tenants",
        _cluster_tenants,
        empty_is_absence=True,
        noun="tenants",
    ),
    Template(
        "no-primary-ip",
        "advanced",
        "list",
        "devices",
        _no_primary_ip,
        empty_is_absence=True,
        noun="devices",
    ),
    Template(
        "vlan-for-tenant",
        "advanced",
        "absence",
        "vlans",
        _vlan_false_premise,
        trap="false-premise",
        noun="VLANs",
    ),
    Template(
        "circuits-for-tenant",
        "advanced",
        "absence",
        "circuits",
        _circuit_false_premise,
        trap="false-premise",
        noun="circuits",
    ),
    Template("device-changers", "advanced", "list", "changelog", _device_changers, noun="users"),
    Template(
        "cluster-vm-tenants",
        "advanced",
        "boolean",
        "virtual-machines",
        _vms_without_tenant,
        noun="virtual machines",
    ),
    Template("ip-holder", "simple", "value", "ip-addresses", _ip_holder, noun="device"),
    Template("device-serial", "simple", "value", "devices", _device_serial, noun="serial number"),
    Template("site-custom-field", "simple", "value", "sites", _site_custom_field, noun="value"),
    Template("ip-interface", "medium", "value", "interfaces", _ip_interface, noun="interface"),
    Template(
        "tag-devices",
        "medium",
        "list",
        "devices",
        _tag_devices,
        empty_is_absence=True,
        noun="devices",
    ),
    Template(
        "prefix-addresses", "medium", "count", "prefixes", _prefix_addresses, noun="IP addresses"
    ),
    Template(
        "ip-unassigned",
        "advanced",
        "absence",
        "ip-addresses",
        _ip_unassigned,
        trap="false-premise",
        noun="device",
    ),
    Template(
        "describe-device", "advanced", "explanation", "devices", _describe_device, noun="device"
    ),
    Template("cable-peer", "medium", "value", "cables", _cable_peers(False), noun="device"),
    Template(
        "cable-circuit",
        "medium",
        "value",
        "cables",
        _cable_peers(True),
        trap="cable-to-circuit",
        noun="circuit",
    ),
    Template("interface-mode", "simple", "value", "interfaces", _interface_mode, noun="mode"),
    Template("untagged-vlan", "simple", "value", "vlans", _untagged_vlan, noun="VLAN"),
    Template("interface-vlans", "medium", "list", "vlans", _interface_vlans, noun="VLANs"),
    Template("device-platform", "simple", "value", "devices", _device_platform, noun="platform"),
    Template(
        "platform-devices",
        "medium",
        "list",
        "devices",
        _platform_devices,
        empty_is_absence=True,
        noun="devices",
    ),
    Template("circuit-side", "medium", "value", "circuits", _circuit_sides, noun="site"),
)


# --- drawing ------------------------------------------------------------------------------


def expected_for(template: Template, truth: Any) -> tuple[str, Expected] | None:
    """The question's answer type and expected answer from its query's result,
    or None when this instance does not make the question the template wants
    (a list too long to read back, a false premise that turns out true)."""
    if template.kind == "count":
        return ("count", truth) if isinstance(truth, int) else None
    if template.kind in ("list", "absence"):
        if not isinstance(truth, list) or len(truth) > MAX_LIST:
            return None
        if not truth:
            return (
                ("absence", None)
                if template.empty_is_absence or template.kind == "absence"
                else None
            )
        return ("list", sorted(truth)) if template.kind == "list" else None
    if template.kind == "boolean":
        if not isinstance(truth, list) or len(truth) > MAX_LIST:
            return None
        return "boolean", {"yes": not truth, "exceptions": sorted(truth)}
    if template.kind in ("value", "explanation"):
        return (template.kind, str(truth)) if truth not in (None, "") else None
    return None


def is_none(question: Question) -> bool:
    """A question whose truth is "none" (a count of 0, an empty list): "None." or
    "0" would be right on it. A template that is not about absence gets at
    most one (with one question per template, only when it has no other), so
    a constant answer scores little on the set (the report shows what it would)."""
    return question.kind == "absence" or (question.kind == "count" and question.expected == 0)


@dataclass
class BuildReport:
    """What the builder did: the questions, the templates it skipped for lack of
    data (`absent`: the types NetBox refused or lacks, and why), the templates
    left out because a read failed (and why: their questions are not this
    seed's full set), the data's fingerprint, and what the truth cost."""

    questions: list[Question] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    requests: int = 0


def build_lines(
    skipped: Sequence[str], absent: Mapping[str, str], left_out: Mapping[str, str]
) -> list[str]:
    """What a build could not do, one line each, as stderr, the report's header
    and `--list` say it: templates with no data (and the types NetBox refused
    or lacks, by name), and templates left out because a read failed, by reason."""
    lines = []
    if skipped:
        refused = "; ".join(f"{path}: {why}" for path, why in absent.items())
        lines.append(f"no data for: {', '.join(skipped)}" + (f" ({refused})" if refused else ""))
    reasons: dict[str, list[str]] = {}
    for template, why in left_out.items():
        reasons.setdefault(why, []).append(template)
    for why, templates in reasons.items():
        lines.append(f"left out, a read failed: {', '.join(templates)} ({why})")
    return lines


def build_questions(
    client: TruthClient,
    *,
    seed: int,
    per_template: int = 3,
    catalog: Catalog | None = None,
    limit: int | None = None,
) -> BuildReport:
    """Draw up to `per_template` instances of every template this NetBox has data for
    (with `limit`, N of them spread over the templates: one from each of N
    templates taken in a seeded order, then a second from each, ...; only the
    templates needed are built). A template whose reads fail is left out whole
    (never built from what did come back), so the same seed on the same data
    draws the same questions, or says which templates it could not. Templates
    are built `READERS` at once; each object type is read once."""
    calls_before = client.calls
    report = BuildReport()
    if per_template == 0 or limit == 0:
        report.data = data_now(client)  # a file's own questions come from this data too
        return report
    cat = read_catalog(client) if catalog is None else catalog
    if isinstance(cat, CatalogRead):
        report.absent, report.data = dict(cat.absent), cat.fingerprint()
    ids = unnamed_ids(cat)
    order = list(TEMPLATES)
    if limit is not None:
        random.Random(f"{seed}:limit").shuffle(order)
    drawn: dict[str, list[Question]] = {}
    with ThreadPoolExecutor(READERS) as pool:
        for start in range(0, len(order), READERS):
            batch = order[start : start + READERS]
            for template, outcome in zip(
                batch,
                pool.map(lambda t: _outcome(client, t, cat, ids, seed, per_template), batch),
                strict=True,
            ):
                if isinstance(outcome, str):
                    report.left_out[template.id] = outcome
                    continue
                made, absent = outcome
                report.absent.update(absent)
                drawn[template.id] = made
                if not made:
                    report.skipped.append(template.id)
            if limit is not None and sum(1 for made in drawn.values() if made) >= limit:
                break  # enough templates for one question from each of `limit`
    chosen = _spread(order, drawn, limit)
    index = {t.id: n for n, t in enumerate(TEMPLATES)}
    report.questions = sorted(chosen, key=lambda q: index[q.template])
    report.left_out = {t.id: report.left_out[t.id] for t in TEMPLATES if t.id in report.left_out}
    report.skipped = [t.id for t in TEMPLATES if t.id in report.skipped]
    report.requests = client.calls - calls_before
    return report


def _spread(
    order: Sequence[Template], drawn: Mapping[str, list[Question]], limit: int | None
) -> list[Question]:
    """All the drawn questions, or `limit` of them: the first of each template in
    `order`, then the second of each, and so on."""
    if limit is None:
        return [q for t in order for q in drawn.get(t.id, [])]
    chosen: list[Question] = []
    for rank in range(max((len(made) for made in drawn.values()), default=0)):
        for template in order:
            made = drawn.get(template.id, [])
            if rank < len(made) and len(chosen) < limit:
                chosen.append(made[rank])
    return chosen


def _outcome(
    client: TruthClient,
    template: Template,
    cat: Catalog,
    ids: Mapping[str, str],
    seed: int,
    per_template: int,
) -> tuple[list[Question], dict[str, str]] | str:
    """A template's questions, drawn with its own seeded generator, and the
    types NetBox refused it (no data); or why it is left out (a read failed)."""
    try:
        return _draw(client, template, template.drafts(cat), ids, seed, per_template), {}
    except Unread as exc:
        return exc.why
    except NoData as exc:
        return [], {exc.path: str(exc)}
    except QueryError as exc:  # a truth read that failed after every try
        return str(exc)


def _draw(
    client: TruthClient,
    template: Template,
    drafts: list[Draft],
    ids: Mapping[str, str],
    seed: int,
    per_template: int,
) -> list[Question]:
    rng = random.Random(f"{seed}:{template.id}")
    rng.shuffle(drafts)
    made: list[Question] = []
    spare: list[Question] = []
    # Each try costs NetBox requests: give up on a template after a few misses.
    for draft in drafts[: per_template * 4]:
        if len(made) >= per_template:
            break
        question = _instantiate(client, template, draft, ids)
        if question is None:
            continue
        if template.kind == "absence" or not is_none(question):
            made.append(question)
        elif per_template > 1 and not any(is_none(q) for q in made):
            made.append(question)  # one empty list or zero count: the trap stays
        else:
            spare.append(question)
    if len(made) < per_template and spare and not any(is_none(q) for q in made):
        made.append(spare[0])
    return made


def _instantiate(
    client: TruthClient, template: Template, draft: Draft, ids: Mapping[str, str]
) -> Question | None:
    # an unnamed device of the truth is also "#17"; a wrong one is "device #42"
    found: dict[str, tuple[str, ...]] = {}
    truth = client.answer(draft.query, found)
    aliases = {name: (ids[name],) for name in draft.universe if name in ids} | found
    made = expected_for(template, truth)
    if made is None:
        return None
    kind, expected = made
    if draft.scope is not None and client.answer(draft.scope) == 0:
        return None
    unscoped = None
    if draft.unscoped is not None:
        total = client.answer(draft.unscoped)
        if not isinstance(total, int) or total == expected:
            return None  # the trap needs a total that differs from the scoped count
        unscoped = total
    if kind == "explanation":
        expected = draft.reference
    trap = template.trap
    if kind == "absence" and trap is None:
        trap = "absence"
    return Question(
        id=f"{template.id}:{draft.key}",
        text=draft.text,
        tier=template.tier,
        kind=kind,
        domain=template.domain,
        query=draft.query,
        expected=expected,
        universe=draft.universe,
        trap=trap,
        unscoped=unscoped,
        reference=draft.reference,
        template=template.id,
        noun=template.noun,
        aliases=aliases,
    )
