"""A small NetBox double on loopback for end-to-end tests of the chat path.

The tool layer itself is tested against a real NetBox (live tier) and against
responses recorded from one (default tier); this double only has to look
enough like NetBox 4.7 for a turn to run through the real tools over HTTP,
with a knob to make one endpoint slow so Ctrl-C can land mid-request.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit


def _ref(oid: int, name: str, **more: Any) -> dict[str, Any]:
    """A nested reference as NetBox 4.7 serializes one (id, name, slug...)."""
    return {"id": oid, "name": name, "slug": name.lower().replace(" ", "-"), **more}


def _status(value: str) -> dict[str, str]:
    """A choice field as NetBox serializes it: value and label."""
    return {"value": value, "label": value.capitalize()}


AKRON, COLUMBUS = _ref(1, "DM-Akron"), _ref(2, "DM-Columbus")
# Tenants: the display name real models sent for a slug (Dunder-Mifflin, Inc.).
DUNDER = {"id": 1, "name": "Dunder-Mifflin, Inc.", "slug": "dunder-mifflin"}
INITECH = _ref(2, "Initech")
ACCESS, ROUTER = _ref(1, "Access Switch"), _ref(2, "Router")
BLUE = _ref(1, "Blue")
SITES = [
    {"id": 1, "name": "DM-Akron", "slug": "dm-akron", "status": {"value": "active"}},
    {"id": 2, "name": "DM-Columbus", "slug": "dm-columbus", "status": {"value": "active"}},
    {"id": 3, "name": "DM-Dayton", "slug": "dm-dayton", "status": {"value": "planned"}},
]
PLATFORMS = [_ref(1, "IOS-XE"), _ref(2, "Junos"), _ref(3, "NX-OS")]  # NX-OS: on no device


def _device(
    oid: int, name: str, site: dict[str, Any], status: str, role: dict[str, Any], **more: Any
) -> dict[str, Any]:
    """A device as NetBox 4.7 lists it; tenant, rack, primary_ip4 and platform empty
    unless given."""
    place = {"id": site["id"], "slug": site["slug"], "name": site["name"]}
    empty = {"tenant": None, "rack": None, "primary_ip4": None, "platform": None}
    return {"id": oid, "name": name, "site": place, "status": {"value": status}, "role": role,
            **empty, **more}  # fmt: skip


# Every domain the evaluation harness asks about has a little data, with the
# shapes its traps need: a device without a tenant (the scoped count), a VLAN
# vid one tenant has and another has not (the false premise), a device without
# a primary IP, a site whose devices are not all active.
DEVICES = [
    _device(1, "dmi01-akron-sw01", AKRON, "active", ACCESS, tenant=DUNDER, rack=_ref(1, "R101"),
            primary_ip4={"id": 1, "address": "10.0.0.1/24"}, platform=PLATFORMS[0]),
    _device(2, "dmi01-akron-sw02", AKRON, "offline", ACCESS, rack=_ref(1, "R101"),
            platform=PLATFORMS[0]),
    _device(3, "dmi01-akron-rtr01", AKRON, "active", ROUTER, tenant=DUNDER,
            primary_ip4={"id": 3, "address": "10.1.0.1/24"}, platform=PLATFORMS[1]),
    _device(4, "dmi01-columbus-sw01", COLUMBUS, "active", ACCESS, tenant=INITECH,
            rack=_ref(2, "R201"), platform=PLATFORMS[0]),
]  # fmt: skip
CHANGES = [
    {
        "id": 10 + i,
        "time": f"2026-01-0{i + 1}T10:00:00Z",
        "user_name": "admin",
        "action": {"value": "update"},
        "changed_object_type": kind,
        "changed_object_id": oid,
        "object_repr": name,
        "prechange_data": {"status": "active"},
        "postchange_data": {"status": "offline"},
    }
    for i, (kind, oid, name) in enumerate(
        [("dcim.device", 2, "dmi01-akron-sw02"), ("dcim.site", 3, "DM-Dayton")]
    )
]
# What real models were recorded asking for (docs/facts/real-models.md): a tenant by
# its display name "Dunder-Mifflin, Inc.", rack "DC1-R04" by name where NetBox wants
# rack_id=46, IP addresses by assigned_object_id [66, 67]; and a device name that two
# sites share, so a name can match several objects.
DEVICES += [
    _device(5, "core-sw", _ref(3, "DM-Dayton"), "active", ROUTER),
    _device(6, "core-sw", COLUMBUS, "active", ROUTER),
]
_DEVICE = {
    d["id"]: {"id": d["id"], "display": d["name"], "name": d["name"], "description": ""}
    for d in DEVICES
}
VLANS = [
    {"id": 1, "vid": 100, "name": "mgmt", "site": AKRON, "tenant": DUNDER},
    {"id": 2, "vid": 200, "name": "users", "site": AKRON, "tenant": None},
    {"id": 3, "vid": 300, "name": "servers", "site": COLUMBUS, "tenant": INITECH},
]


def _vlan(oid: int) -> dict[str, Any]:
    """A VLAN as an interface refers to it (NetBox 4.7: display "USERS (100)")."""
    (v,) = [v for v in VLANS if v["id"] == oid]
    display = f"{v['name']} ({v['vid']})"
    return {"id": oid, "display": display, "vid": v["vid"], "name": v["name"], "description": ""}


def _interface(
    oid: int,
    name: str,
    device: int,
    mode: str | None = None,
    vlans: tuple[int, ...] = (),
    **more: Any,
) -> dict[str, Any]:
    """An interface as GET /api/dcim/interfaces/ shows one in NetBox 4.7 (the live
    tier's NetBox): its 802.1Q mode, its untagged VLAN (the first of `vlans`) and the
    tagged ones (the rest, on a tagged port); cabled by _plug."""
    untagged, *tagged = vlans or (None,)
    return {
        "id": oid, "display": name, "name": name, "device": _DEVICE[device], "enabled": True,
        "mode": mode and _status(mode), "untagged_vlan": untagged and _vlan(untagged),
        "tagged_vlans": [_vlan(v) for v in tagged], "cable": None, "cable_end": None,
        "link_peers": [], "link_peers_type": None, "connected_endpoints": None,
        "connected_endpoints_type": None, "connected_endpoints_reachable": False, **more,
    }  # fmt: skip


INTERFACES = [
    _interface(1, "eth0", 1, "tagged", (1, 2)),
    _interface(2, "eth1", 1, "access", (2,)),
    _interface(3, "ge-0/0/0", 3),
    _interface(4, "eth0", 4, "access", (3,), enabled=False),
    _interface(5, "ge-0/0/1", 3),  # cabled to circuit LUM-1001's A side
]
for _row in VLANS:  # NetBox's VLAN filter interface_id: untagged or tagged on the interface
    _row["_interface_id"] = [
        i["id"]
        for i in INTERFACES
        if _row["id"] in {v["id"] for v in [i["untagged_vlan"], *i["tagged_vlans"]] if v}
    ]
PROVIDER_NETWORKS = [{"id": 1, "display": "Zayo MPLS", "name": "Zayo MPLS", "description": ""}]
CIRCUITS = [
    {"id": 1, "cid": "LUM-1001", "provider": _ref(1, "Lumen"), "tenant": DUNDER,
     "status": _status("active")},
    {"id": 2, "cid": "ZAY-2001", "provider": _ref(2, "Zayo"), "tenant": None,
     "status": _status("planned")},
]  # fmt: skip


def _termination(oid: int, circuit: int, side: str, kind: str, where: dict[str, Any]) -> dict:
    """A circuit termination as NetBox 4.2+ shows one: termination_type and
    termination_id (it replaced site and provider_network;
    https://netboxlabs.com/docs/netbox/v4.3/models/circuits/circuittermination.md),
    the termination itself brief; the circuit carries it as termination_a/_z."""
    c = CIRCUITS[circuit - 1]
    brief = {"id": c["id"], "display": c["cid"], "cid": c["cid"], "provider": c["provider"]}
    target = {key: where[key] for key in ("id", "name", "slug") if key in where}
    row = {
        "id": oid, "display": f"{c['cid']}: Termination {side}", "circuit": brief,
        "term_side": side, "termination_type": kind, "termination_id": where["id"],
        "termination": {**target, "display": where["name"], "description": ""},
        "port_speed": 1_000_000 if kind == "dcim.site" else None, "upstream_speed": None,
        "xconnect_id": "", "description": "",
    }  # fmt: skip
    c[f"termination_{side.lower()}"] = {
        k: v for k, v in row.items() if k not in ("circuit", "term_side")
    }
    return {**row, "pp_info": "", "mark_connected": False, "cable": None, "cable_end": None,
            "link_peers": [], "link_peers_type": None}  # fmt: skip


TERMINATIONS = [
    _termination(1, 1, "A", "dcim.site", AKRON),
    _termination(2, 1, "Z", "dcim.site", COLUMBUS),
    _termination(3, 2, "A", "dcim.site", _ref(3, "DM-Dayton")),
    _termination(4, 2, "Z", "circuits.providernetwork", PROVIDER_NETWORKS[0]),
]
_PEER = {
    "dcim.interface": ("device", "name"),
    "circuits.circuittermination": ("circuit", "term_side"),
}


def _plug(
    oid: int, a: tuple[str, dict[str, Any]], b: tuple[str, dict[str, Any]], site: int
) -> dict:
    """A cable from end A to end B, as NetBox 4.7 shows it on both ends: `cable`,
    `cable_end` and `link_peers` (the other end, brief), and as the cable lists its
    a_ and b_terminations (the live tier's NetBox; GET /api/dcim/cables/{id}/)."""
    ref = {"id": oid, "display": f"#{oid}", "label": "", "description": ""}

    def brief(kind: str, row: dict[str, Any]) -> dict[str, Any]:
        keys = ("id", "display", *_PEER[kind], "description")
        return {**{k: row[k] for k in keys if k in row}, "cable": ref, "_occupied": True}

    for (kind, row), end, (peer_kind, peer) in ((a, "A", b), (b, "B", a)):
        row.update(cable=ref, cable_end=end, link_peers=[brief(peer_kind, peer)],
                   link_peers_type=peer_kind)  # fmt: skip
        if kind == peer_kind == "dcim.interface":  # the path ends at the other interface
            row.update(connected_endpoints=row["link_peers"],
                       connected_endpoints_type=peer_kind, connected_endpoints_reachable=True)  # fmt: skip
    return {
        "id": oid, "display": f"#{oid}", "label": "", "status": _status("connected"),
        "a_terminations": [{"object_type": a[0], "object_id": a[1]["id"], "object": brief(*a)}],
        "b_terminations": [{"object_type": b[0], "object_id": b[1]["id"], "object": brief(*b)}],
        "_site_id": [site],  # NetBox's site_id filter follows the terminations' sites
    }  # fmt: skip


CABLES = [
    _plug(1, ("dcim.interface", INTERFACES[0]), ("dcim.interface", INTERFACES[2]), 1),
    _plug(
        2, ("dcim.interface", INTERFACES[4]), ("circuits.circuittermination", TERMINATIONS[0]), 1
    ),
]
DATA: dict[str, list[dict[str, Any]]] = {
    "dcim/sites": SITES,
    "dcim/devices": DEVICES,
    "core/object-changes": CHANGES,
    "dcim/device-roles": [{**ACCESS}, {**ROUTER}],
    "dcim/racks": [
        {"id": 1, "name": "R101", "site": AKRON, "status": _status("active")},
        {"id": 2, "name": "R201", "site": COLUMBUS, "status": _status("active")},
        {"id": 46, "name": "DC1-R04", "site": AKRON, "status": _status("active")},
    ],
    "dcim/interfaces": INTERFACES,
    "dcim/cables": CABLES,
    "dcim/power-panels": [{"id": 1, "name": "PP-Akron-A", "site": AKRON}],
    "dcim/power-feeds": [
        {
            "id": 1,
            "name": "PF-A1",
            "power_panel": _ref(1, "PP-Akron-A"),
            "status": _status("active"),
        },
        {
            "id": 2,
            "name": "PF-A2",
            "power_panel": _ref(1, "PP-Akron-A"),
            "status": _status("active"),
        },
    ],
    "ipam/vrfs": [{"id": 1, "name": "Blue", "rd": "65000:1"}, {"id": 2, "name": "Red", "rd": None}],
    "ipam/prefixes": [
        {"id": 1, "prefix": "10.0.0.0/24", "vrf": BLUE, "status": _status("active")},
        {"id": 2, "prefix": "10.1.0.0/24", "vrf": None, "status": _status("active")},
        {"id": 3, "prefix": "192.168.0.0/24", "vrf": BLUE, "status": _status("reserved")},
    ],
    "ipam/ip-addresses": [
        {
            "id": 1,
            "address": "10.0.0.1/24",
            "vrf": BLUE,
            "status": _status("active"),
            "assigned_object_type": "dcim.interface",
            "assigned_object_id": 66,
        },
        {
            "id": 2,
            "address": "10.0.0.2/24",
            "vrf": BLUE,
            "status": _status("reserved"),
            "assigned_object_type": "dcim.interface",
            "assigned_object_id": 67,
        },
        {
            "id": 3,
            "address": "10.1.0.1/24",
            "vrf": None,
            "status": _status("active"),
            "assigned_object_type": "dcim.interface",
            "assigned_object_id": 68,
        },
    ],
    "ipam/vlans": VLANS,
    "tenancy/tenants": [{**DUNDER}, {**INITECH}],
    "circuits/providers": [{**_ref(1, "Lumen")}, {**_ref(2, "Zayo")}],
    "circuits/circuits": CIRCUITS,
    "circuits/circuit-terminations": TERMINATIONS,
    "circuits/provider-networks": PROVIDER_NETWORKS,
    "dcim/platforms": PLATFORMS,
    "virtualization/clusters": [{"id": 1, "name": "akron-vmw"}],
    "virtualization/virtual-machines": [
        {"id": 1, "name": "vm-web01", "cluster": _ref(1, "akron-vmw"), "tenant": DUNDER},
        {"id": 2, "name": "vm-db01", "cluster": _ref(1, "akron-vmw"), "tenant": None},
    ],
}
# Filters whose value is another object's slug or id, and that object's list: NetBox
# 4.7.3 answers 400 for a value no object has, as the live tier's NetBox does:
# {"tenant": ["Select a valid choice. Dunder-Mifflin, Inc. is not one of the available
# choices."]}, {"rack_id": ["“DC1” is not a valid value."]}, and for an id no object has
# {"site_id": ["Select a valid choice. 99999 is not one of the available choices."]}.
# Of several values, only the first no object has is named (Django's
# ModelMultipleChoiceField._check_values stops there).
RELATIONS = {
    "site": "dcim/sites",
    "site_id": "dcim/sites",
    "tenant": "tenancy/tenants",
    "tenant_id": "tenancy/tenants",
    "rack_id": "dcim/racks",
    # NetBox 4.7.3's DeviceFilterSet.role (to_field_name slug); 400 for a role no
    # device role has, as for a site
    "role": "dcim/device-roles",
    "role_id": "dcim/device-roles",
}
# Filters that read another field of the row (IP addresses by their interface's id).
FILTER_FIELDS = {("ipam/ip-addresses", "interface_id"): "assigned_object_id"}
# Choice values, as NetBox checks them (case-sensitive: "Active" is a 400).
STATUSES = ("active", "offline", "planned", "staged", "failed", "decommissioning")


def _matches(obj: dict[str, Any], key: str, values: list[str]) -> bool:
    """NetBox's filters as far as the tests use them: a field by its value, a
    related object by slug (`site=dm-akron`) or by id (`site_id=1`, which an
    object without one never matches), a choice by its value. A filter the
    double does not know matches everything."""
    if key == "tag":  # by slug, of the tags the object carries (NetBox's TagFilter)
        return any(tag.get("slug") in values for tag in obj.get("tags") or [])
    if key == "parent" and "address" in obj:  # the host, not its network
        return _inside(str(ipaddress.ip_interface(obj["address"]).ip), values)
    if key == "parent" and "prefix" in obj:
        return _inside(obj["prefix"], values)
    if f"_{key}" in obj:  # a filter NetBox answers through a relation the row does not show
        return any(str(held) in values for held in obj[f"_{key}"])
    if key.endswith("_id") and key not in obj and key[:-3] in obj:
        related = obj[key[:-3]]
        return related is not None and str(related.get("id")) in values
    if key in ("id", "vid", "changed_object_id") and key in obj:
        return str(obj[key]) in values
    field = obj.get(key)
    if isinstance(field, dict):
        field = field.get("slug") or field.get("value") or field.get("id")
    return str(field) in values if field is not None else key not in obj


def _inside(network: str, parents: list[str]) -> bool:
    """NetBox's `parent` filter: an address (or prefix) inside one of the
    prefixes, whatever its VRF (ipam/filtersets.py, search_by_parent:
    address__net_host_contained / prefix__net_contained_or_equal)."""
    inner = ipaddress.ip_network(network)
    for parent in parents:
        outer = ipaddress.ip_network(parent, strict=False)
        if inner.version == outer.version and inner.subnet_of(outer):  # type: ignore[arg-type]
            return True
    return False


def _public(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the API shows it, without the double's own bookkeeping keys."""
    return {key: value for key, value in obj.items() if not key.startswith("_")}


def _searched(obj: dict[str, Any], q: str) -> bool:
    """NetBox's q: a case-insensitive part of the name, slug or address."""
    return any(q.lower() in str(obj.get(k, "")).lower() for k in ("name", "slug", "address"))


def _refused(
    data: dict[str, list[dict[str, Any]]], key: str, values: list[str]
) -> dict[str, list[str]] | None:
    """NetBox's 400 for a filter value no object or choice has (see RELATIONS), or a
    date that is none (the live tier's NetBox: {"created__gte": ["Enter a valid
    date/time."]} for created__gte=yesterday)."""
    for value in values:
        if key.partition("__")[0] in ("created", "last_updated") and not _is_date(value):
            return {key: ["Enter a valid date/time."]}
        if key.endswith("_id") and not value.isdigit():
            return {key: [f"“{value}” is not a valid value."]}
        table = RELATIONS.get(key)
        known = (
            {str(o["id"] if key.endswith("_id") else o["slug"]) for o in data[table]}
            if table
            else set(STATUSES)
            if key == "status"
            else None
        )
        if known is not None and value not in known:
            return {key: [f"Select a valid choice. {value} is not one of the available choices."]}
    return None


def _order(value: Any) -> tuple[int, float, str]:
    """A sort key for one field of any type: missing first, numbers by value."""
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def _is_date(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


@dataclass
class Fault:
    """How an endpoint of a NetBox under load fails: a 5xx `status`, or with
    none a request that hangs until the client gives up (its time-out); only
    for pages of more than `above` rows (a smaller page is served), and only
    the first `times` such requests (None: every one)."""

    status: int | None = None
    times: int | None = None
    above: int = 0
    struck: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def strikes(self, limit: int) -> bool:
        with self._lock:
            if limit <= self.above or (self.times is not None and self.struck >= self.times):
                return False
            self.struck += 1
            return True


class NetBoxDouble:
    """`with NetBoxDouble(token=...) as nb:` → `nb.url`, `nb.requests`, `nb.delays`,
    `nb.faults`."""

    def __init__(self, token: str, *, lifetime: float = 600.0) -> None:
        self.token = token
        self.requests: list[str] = []
        self.delays: dict[str, float] = {}
        self.disconnects: list[str] = []
        # what /api/status/ answers; tests may swap it (an older NetBox, say)
        self.status: dict[str, Any] = {"netbox-version": "4.7.3", "django-version": "5.2"}
        # the objects it serves; tests may add their own (a site named by someone hostile)
        self.data: dict[str, list[dict[str, Any]]] = {k: list(v) for k, v in DATA.items()}
        # API paths (`dcim/sites`) the token's user may not view: DRF's PermissionDenied,
        # 403 "You do not have permission to perform this action." (rest_framework/
        # exceptions.py), as NetBox answers a valid token lacking the view permission
        self.forbidden: set[str] = set()
        # API paths (`dcim/interfaces`) that time out or answer 5xx (Fault)
        self.faults: dict[str, Fault] = {}
        # API paths whose reply never ends: a list page whose rows stream for
        # ever, one 100 kB piece every `seconds` (0: as fast as the socket
        # takes them), as a broken proxy or a hostile NETBOX_URL could send
        self.endless: dict[str, float] = {}
        self._stop = threading.Event()
        self._lifetime = lifetime
        self._timer: threading.Timer | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        # The lifetime guard must not keep the test process alive at exit.
        self._timer = threading.Timer(self._lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            if self._timer is not None:
                self._timer.cancel()
            self._server.shutdown()
            self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                del format, args

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                double.requests.append(self.path)
                auth = self.headers.get("Authorization", "")
                if not auth:
                    # NetBox 4.7 (LOGIN_REQUIRED) without a token: DRF's
                    # NotAuthenticated, answered 403 (rest_framework/exceptions.py)
                    return self._json(
                        403, {"detail": "Authentication credentials were not provided."}
                    )
                if auth != f"Bearer {double.token}":
                    return self._json(403, {"detail": "Invalid v2 token"})
                path = parts.path.strip("/").removeprefix("api/").strip("/")
                if path in double.forbidden:
                    detail = "You do not have permission to perform this action."
                    return self._json(403, {"detail": detail})
                fault = double.faults.get(path)
                limit = dict(parse_qsl(parts.query)).get("limit", "50")
                if fault is not None and fault.strikes(int(limit) if limit.isdigit() else 50):
                    if fault.status is not None:
                        return self._json(fault.status, {"detail": "Server Error"})
                    self._wait(600.0)  # until the client hangs up
                    double.disconnects.append(self.path)
                    return None
                if not self._wait(double.delays.get(path, 0.0)):
                    double.disconnects.append(self.path)
                    return None
                if path in double.endless:
                    return self._endless(double.endless[path])
                if path == "status":
                    return self._json(200, double.status)
                listing, _, oid = path.rpartition("/")
                if listing in double.data and oid.isdigit():  # GET /api/<list>/<id>/
                    found = [obj for obj in double.data[listing] if obj["id"] == int(oid)]
                    return self._json(200, _public(found[0])) if found else self._json(404, {})
                if path not in double.data:
                    return self._html(404)
                params: dict[str, list[str]] = {}
                for key, value in parse_qsl(parts.query):
                    params.setdefault(key, []).append(value)
                limit = int(params.pop("limit", ["50"])[0])
                offset = int(params.pop("offset", ["0"])[0])
                ordering = params.pop("ordering", [""])[0]
                for control in ("brief", "fields"):
                    params.pop(control, None)
                q = params.pop("q", [""])[0]
                for key, values in params.items():
                    refused = _refused(double.data, key, values)
                    if refused:
                        return self._json(400, refused)
                rows = [
                    obj
                    for obj in double.data[path]
                    if _searched(obj, q)
                    and all(
                        _matches(obj, FILTER_FIELDS.get((path, k), k), v) for k, v in params.items()
                    )
                ]
                if ordering:  # NetBox's ?ordering=field, -field for descending
                    name = ordering.lstrip("-")
                    rows.sort(key=lambda o: _order(o.get(name)), reverse=ordering.startswith("-"))
                page = rows[offset : offset + limit]
                more = offset + limit < len(rows)
                return self._json(
                    200,
                    {
                        "count": len(rows),
                        "next": f"{double.url}/api/{path}/?offset={offset + limit}"
                        if more
                        else None,
                        "previous": None,
                        "results": [_public(obj) for obj in page],
                    },
                )

            def _wait(self, seconds: float) -> bool:
                """Sleep, but notice a client that hangs up (the cancel tests)."""
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline and not double._stop.is_set():
                    time.sleep(0.02)
                    self.connection.settimeout(0)
                    try:
                        if self.connection.recv(1, 2) == b"":  # MSG_PEEK
                            return False
                    except BlockingIOError:
                        pass
                    except OSError:
                        return False
                    finally:
                        self.connection.settimeout(None)
                return True

            def _endless(self, pause: float) -> None:
                row = json.dumps({"id": 1, "name": "x" * 1000, "slug": "x"}).encode() + b","
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(b'{"count":1,"next":null,"previous":null,"results":[')
                    while not double._stop.is_set() and self._wait(pause):
                        self.wfile.write(row * 100)
                except OSError:
                    return

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _html(self, status: int) -> None:
                data = b"<html><body><h1>Page Not Found</h1></body></html>"
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
