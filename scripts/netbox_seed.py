"""Seed a NetBox with netbox-chat's test data, through the REST API (so the changelog fills).

Usage: netbox_seed.py BASE_URL TOKEN

Idempotent: every object is looked up first and only created when missing. Only the
standard library is used, so any Python 3 runs it. The data is shaped so that filters
matter: several sites, devices in every interesting status (offline devices at more
than one site, so "offline at DM-Akron" differs from "offline"), the same VLAN ids at
two sites, nested prefixes, IP addresses assigned to interfaces, tags.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

BASE = sys.argv[1].rstrip("/")
TOKEN = sys.argv[2]
AUTH = f"Bearer {TOKEN}" if TOKEN.startswith("nbt_") else f"Token {TOKEN}"


def call(method: str, path: str, params: dict | None = None, body: dict | None = None) -> dict:
    url = f"{BASE}/api/{path}/"
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", AUTH)
    req.add_header("Accept", "application/json")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise SystemExit(
            f"{method} {path} {params or ''} {body or ''} -> {e.code} {e.read()[:500]!r}"
        ) from None


created = 0


def ensure(ep: str, lookup: dict, body: dict) -> dict:
    global created
    found = call("GET", ep, lookup)
    if found["count"]:
        return found["results"][0]
    created += 1
    return call("POST", ep, body=body)


def ensure_field(ep: str, obj: dict, field: str, value: object) -> None:
    """PATCH one field when it differs: leaves 'update' entries in the changelog."""
    current = obj[field]["value"] if isinstance(obj[field], dict) else obj[field]
    if current != value:
        call("PATCH", f"{ep}/{obj['id']}", body={field: value})


t0 = time.time()
region = ensure("dcim/regions", {"slug": "ohio"}, {"name": "Ohio", "slug": "ohio"})
group = ensure("dcim/site-groups", {"slug": "branches"}, {"name": "Branches", "slug": "branches"})
acme = ensure("tenancy/tenants", {"slug": "acme"}, {"name": "Acme", "slug": "acme"})
globex = ensure("tenancy/tenants", {"slug": "globex"}, {"name": "Globex", "slug": "globex"})
tags = {
    slug: ensure("extras/tags", {"slug": slug}, {"name": name, "slug": slug, "color": color})
    for slug, name, color in [("core", "core", "ff5722"), ("monitored", "monitored", "4caf50")]
}

sites = {}
for name, slug, status, tenant in [
    ("DM-Akron", "dm-akron", "active", acme),
    ("DM-Columbus", "dm-columbus", "active", acme),
    ("DM-Dayton", "dm-dayton", "planned", globex),
    ("DM-Cleveland", "dm-cleveland", "decommissioning", globex),
]:
    sites[name] = ensure(
        "dcim/sites",
        {"slug": slug},
        {
            "name": name,
            "slug": slug,
            "status": status,
            "region": region["id"],
            "group": group["id"],
            "tenant": tenant["id"],
            "description": f"{name} branch office",
        },
    )

cisco = ensure("dcim/manufacturers", {"slug": "cisco"}, {"name": "Cisco", "slug": "cisco"})
juniper = ensure("dcim/manufacturers", {"slug": "juniper"}, {"name": "Juniper", "slug": "juniper"})
dtypes = {
    slug: ensure(
        "dcim/device-types",
        {"slug": slug},
        {"manufacturer": mfr["id"], "model": model, "slug": slug, "u_height": 1},
    )
    for slug, model, mfr in [
        ("c9300-48p", "C9300-48P", cisco),
        ("isr4331", "ISR4331", cisco),
        ("srx345", "SRX345", juniper),
    ]
}
roles = {
    slug: ensure("dcim/device-roles", {"slug": slug}, {"name": name, "slug": slug, "color": color})
    for slug, name, color in [
        ("access-switch", "Access Switch", "2196f3"),
        ("router", "Router", "f44336"),
        ("firewall", "Firewall", "9c27b0"),
    ]
}

# name, site, role, type, status, tag slugs, serial
DEVICES = [
    (
        "dmi01-akron-sw01",
        "DM-Akron",
        "access-switch",
        "c9300-48p",
        "active",
        ["monitored"],
        "FOC0001A",
    ),
    ("dmi01-akron-sw02", "DM-Akron", "access-switch", "c9300-48p", "offline", [], "FOC0002A"),
    (
        "dmi01-akron-sw03",
        "DM-Akron",
        "access-switch",
        "c9300-48p",
        "offline",
        ["monitored"],
        "FOC0003A",
    ),
    (
        "dmi01-akron-rtr01",
        "DM-Akron",
        "router",
        "isr4331",
        "active",
        ["core", "monitored"],
        "FDO0001A",
    ),
    ("dmi01-akron-fw01", "DM-Akron", "firewall", "srx345", "failed", ["core"], "CV0001A"),
    ("dmi01-columbus-sw01", "DM-Columbus", "access-switch", "c9300-48p", "active", [], "FOC0001C"),
    ("dmi01-columbus-sw02", "DM-Columbus", "access-switch", "c9300-48p", "offline", [], "FOC0002C"),
    ("dmi01-columbus-rtr01", "DM-Columbus", "router", "isr4331", "active", ["core"], "FDO0001C"),
    ("dmi01-dayton-rtr01", "DM-Dayton", "router", "isr4331", "planned", [], "FDO0001D"),
    ("dmi01-dayton-sw01", "DM-Dayton", "access-switch", "c9300-48p", "staged", [], "FOC0001D"),
    (
        "dmi01-cleveland-sw01",
        "DM-Cleveland",
        "access-switch",
        "c9300-48p",
        "decommissioning",
        [],
        "FOC0001L",
    ),
]
devices = {}
for name, site, role, dtype, status, dtags, serial in DEVICES:
    # devices that end up offline are created active and then changed, so the changelog
    # holds 'update' entries as well as 'create' ones
    first_status = "active" if status == "offline" else status
    dev = ensure(
        "dcim/devices",
        {"name": name},
        {
            "name": name,
            "device_type": dtypes[dtype]["id"],
            "role": roles[role]["id"],
            "site": sites[site]["id"],
            "status": first_status,
            "tenant": sites[site]["tenant"]["id"],
            "serial": serial,
            "tags": [{"slug": t} for t in dtags],
        },
    )
    ensure_field("dcim/devices", dev, "status", status)
    devices[name] = dev

ifaces = {}
for dname, d in devices.items():
    for ifn in ("GigabitEthernet1/0/1", "GigabitEthernet1/0/2", "Vlan100"):
        itype = "virtual" if ifn.startswith("Vlan") else "1000base-t"
        ifaces[(dname, ifn)] = ensure(
            "dcim/interfaces",
            {"device_id": d["id"], "name": ifn},
            {
                "device": d["id"],
                "name": ifn,
                "type": itype,
                "enabled": ifn != "GigabitEthernet1/0/2",
                "description": "uplink" if ifn == "GigabitEthernet1/0/1" else "",
            },
        )

vlan_group = ensure(
    "ipam/vlan-groups", {"slug": "ohio-vlans"}, {"name": "Ohio VLANs", "slug": "ohio-vlans"}
)
vlans = {}
for site, vid, name, status in [
    ("DM-Akron", 100, "USERS", "active"),
    ("DM-Akron", 200, "VOICE", "active"),
    ("DM-Akron", 300, "MGMT", "active"),
    ("DM-Columbus", 100, "USERS", "active"),
    ("DM-Columbus", 300, "MGMT", "reserved"),
    ("DM-Dayton", 100, "USERS", "deprecated"),
]:
    vlans[(site, vid)] = ensure(
        "ipam/vlans",
        {"vid": vid, "site_id": sites[site]["id"]},
        {
            "vid": vid,
            "name": name,
            "site": sites[site]["id"],
            "status": status,
            "tenant": acme["id"],
        },
    )

for pfx, status, site, vlan_key, desc in [
    ("10.10.0.0/16", "container", None, None, "Akron supernet"),
    ("10.10.100.0/24", "active", "DM-Akron", ("DM-Akron", 100), "Akron users"),
    ("10.10.200.0/24", "active", "DM-Akron", ("DM-Akron", 200), "Akron voice"),
    ("10.10.30.0/24", "reserved", "DM-Akron", None, "Akron future"),
    ("10.20.0.0/16", "container", None, None, "Columbus supernet"),
    ("10.20.100.0/24", "active", "DM-Columbus", ("DM-Columbus", 100), "Columbus users"),
    ("10.30.0.0/24", "deprecated", "DM-Dayton", None, "Dayton old"),
]:
    body: dict = {"prefix": pfx, "status": status, "description": desc}
    if vlan_key:
        body["vlan"] = vlans[vlan_key]["id"]
    if site:
        body |= {"scope_type": "dcim.site", "scope_id": sites[site]["id"]}
    ensure("ipam/prefixes", {"prefix": pfx}, body)

for i, dname in enumerate(
    [
        "dmi01-akron-sw01",
        "dmi01-akron-sw02",
        "dmi01-akron-sw03",
        "dmi01-akron-rtr01",
        "dmi01-akron-fw01",
    ],
    start=1,
):
    addr = f"10.10.100.{i}/24"
    ensure(
        "ipam/ip-addresses",
        {"address": addr},
        {
            "address": addr,
            "status": "active",
            "dns_name": f"{dname}.example.net",
            "assigned_object_type": "dcim.interface",
            "assigned_object_id": ifaces[(dname, "Vlan100")]["id"],
        },
    )
for i, dname in enumerate(
    ["dmi01-columbus-sw01", "dmi01-columbus-sw02", "dmi01-columbus-rtr01"], start=1
):
    addr = f"10.20.100.{i}/24"
    ensure(
        "ipam/ip-addresses",
        {"address": addr},
        {
            "address": addr,
            "status": "active",
            "dns_name": f"{dname}.example.net",
            "assigned_object_type": "dcim.interface",
            "assigned_object_id": ifaces[(dname, "Vlan100")]["id"],
        },
    )
for addr, status, desc in [
    ("10.10.100.250/24", "reserved", "unassigned"),
    ("10.10.100.251/24", "deprecated", "old gateway"),
    ("10.30.0.1/24", "dhcp", "Dayton DHCP pool"),
]:
    ensure(
        "ipam/ip-addresses",
        {"address": addr},
        {"address": addr, "status": status, "description": desc},
    )

# What operators ask most (issue 34): a device's platform, an interface's 802.1Q mode and
# VLANs, what a port is cabled to (another device's interface, or a circuit's
# termination: the trap), and where a circuit's sides land (a site, or a provider
# network: since NetBox 4.2 a termination is termination_type + termination_id).
platforms = {
    slug: ensure(
        "dcim/platforms",
        {"slug": slug},
        {"name": name, "slug": slug, "manufacturer": mfr["id"]},
    )
    for slug, name, mfr in [("ios-xe", "IOS-XE", cisco), ("junos", "Junos", juniper),
                            ("nx-os", "NX-OS", cisco)]
}  # fmt: skip


def ensure_ref(ep: str, obj: dict, field: str, value: int | None) -> None:
    """PATCH a relation (platform, VLAN...) when it does not point at `value` yet."""
    current = obj.get(field)
    if (current or {}).get("id") != value:
        call("PATCH", f"{ep}/{obj['id']}", body={field: value})


for dname, dev in devices.items():
    platform = (
        "junos"
        if "-fw" in dname
        else None
        if "dayton" in dname or "cleveland" in dname
        else "ios-xe"
    )
    ensure_ref("dcim/devices", call("GET", f"dcim/devices/{dev['id']}"), "platform",
               platform and platforms[platform]["id"])  # fmt: skip

# mode, untagged VLAN, tagged VLANs
for (dname, ifn), mode, untagged, tagged in [
    (("dmi01-akron-sw01", "GigabitEthernet1/0/2"), "access", ("DM-Akron", 100), []),
    (("dmi01-akron-sw01", "GigabitEthernet1/0/1"), "tagged", ("DM-Akron", 300),
     [("DM-Akron", 100), ("DM-Akron", 200)]),
    (("dmi01-akron-sw03", "GigabitEthernet1/0/2"), "access", ("DM-Akron", 200), []),
    (("dmi01-columbus-sw01", "GigabitEthernet1/0/1"), "tagged", None, [("DM-Columbus", 100)]),
    (("dmi01-columbus-sw01", "GigabitEthernet1/0/2"), "access", ("DM-Columbus", 100), []),
]:  # fmt: skip
    iface = call("GET", f"dcim/interfaces/{ifaces[(dname, ifn)]['id']}")
    want = {
        "mode": mode,
        "untagged_vlan": untagged and vlans[untagged]["id"],
        "tagged_vlans": sorted(vlans[t]["id"] for t in tagged),
    }
    have = {
        "mode": (iface["mode"] or {}).get("value"),
        "untagged_vlan": (iface["untagged_vlan"] or {}).get("id"),
        "tagged_vlans": sorted(v["id"] for v in iface["tagged_vlans"]),
    }
    if have != want:
        call("PATCH", f"dcim/interfaces/{iface['id']}", body=want)

providers = {
    slug: ensure("circuits/providers", {"slug": slug}, {"name": name, "slug": slug})
    for slug, name in [("lumen", "Lumen"), ("zayo", "Zayo")]
}
zayo_mpls = ensure(
    "circuits/provider-networks",
    {"name": "Zayo MPLS"},
    {"name": "Zayo MPLS", "provider": providers["zayo"]["id"]},
)
ctypes = {
    slug: ensure("circuits/circuit-types", {"slug": slug}, {"name": name, "slug": slug})
    for slug, name in [("internet", "Internet"), ("mpls", "MPLS")]
}
circuits = {}
terminations = {}
# cid, provider, type, status, tenant, A side, Z side (("dcim.site", site) or a provider network)
for cid, prov, ctype, status, tenant, a_side, z_side in [
    ("LUM-1001", "lumen", "internet", "active", acme, ("dcim.site", "DM-Akron"),
     ("dcim.site", "DM-Columbus")),
    ("ZAY-2001", "zayo", "mpls", "active", None, ("dcim.site", "DM-Dayton"),
     ("circuits.providernetwork", "Zayo MPLS")),
    ("LUM-1002", "lumen", "internet", "planned", globex, ("dcim.site", "DM-Columbus"), None),
]:  # fmt: skip
    body = {"cid": cid, "provider": providers[prov]["id"], "type": ctypes[ctype]["id"],
            "status": status, "tenant": tenant and tenant["id"]}  # fmt: skip
    circuits[cid] = ensure("circuits/circuits", {"cid": cid}, body)
    for side, where in (("A", a_side), ("Z", z_side)):
        if where is None:
            continue
        kind, name = where
        target = sites[name]["id"] if kind == "dcim.site" else zayo_mpls["id"]
        terminations[(cid, side)] = ensure(
            "circuits/circuit-terminations",
            {"circuit_id": circuits[cid]["id"], "term_side": side},
            {"circuit": circuits[cid]["id"], "term_side": side, "termination_type": kind,
             "termination_id": target, "port_speed": 1_000_000 if kind == "dcim.site" else None},
        )  # fmt: skip


def ensure_cable(a: tuple[str, int], b: tuple[str, int]) -> None:
    """A cable between two terminations (object type, id), unless the A end has one."""
    global created
    a_type, a_id = a
    ep = "dcim/interfaces" if a_type == "dcim.interface" else "circuits/circuit-terminations"
    if call("GET", f"{ep}/{a_id}")["cable"]:
        return
    created += 1
    call("POST", "dcim/cables", body={
        "a_terminations": [{"object_type": a_type, "object_id": a_id}],
        "b_terminations": [{"object_type": b[0], "object_id": b[1]}],
        "status": "connected",
    })  # fmt: skip


def port(dname: str, ifn: str) -> tuple[str, int]:
    return ("dcim.interface", ifaces[(dname, ifn)]["id"])


ensure_cable(port("dmi01-akron-sw01", "GigabitEthernet1/0/1"),
             port("dmi01-akron-rtr01", "GigabitEthernet1/0/2"))  # fmt: skip
ensure_cable(port("dmi01-columbus-sw01", "GigabitEthernet1/0/1"),
             port("dmi01-columbus-rtr01", "GigabitEthernet1/0/2"))  # fmt: skip
ensure_cable(port("dmi01-akron-rtr01", "GigabitEthernet1/0/1"),
             ("circuits.circuittermination", terminations[("LUM-1001", "A")]["id"]))  # fmt: skip
ensure_cable(port("dmi01-dayton-rtr01", "GigabitEthernet1/0/1"),
             ("circuits.circuittermination", terminations[("ZAY-2001", "A")]["id"]))  # fmt: skip

# The user's own NetBox has custom fields: the tools must learn their cf_ filters from
# the server (issue 14). filter_logic "disabled" is a field NetBox does not filter on.
for cf_name, cf_type, logic in [
    ("support_tier", "integer", "exact"),
    ("site_owner", "text", "loose"),
    ("internal_note", "text", "disabled"),
]:
    ensure(
        "extras/custom-fields",
        {"name": cf_name},
        {
            "name": cf_name,
            "type": cf_type,
            "object_types": ["dcim.site"],
            "filter_logic": logic,
        },
    )
for site_name, values in [
    ("DM-Akron", {"support_tier": 1, "site_owner": "netops-east", "internal_note": "x"}),
    ("DM-Columbus", {"support_tier": 2, "site_owner": "netops-east"}),
    ("DM-Dayton", {"support_tier": 2, "site_owner": "netops-west"}),
]:
    site = call("GET", f"dcim/sites/{sites[site_name]['id']}")
    if any(site["custom_fields"].get(k) != v for k, v in values.items()):
        call("PATCH", f"dcim/sites/{site['id']}", body={"custom_fields": values})

# The test plugin's own object type (tests/netbox/plugin/netbox_chat_demo): the tools
# learn it from this NetBox's /api/schema/, since it is not in their shipped table.
for w_name, colour, size in [("w-red-1", "red", 1), ("w-red-2", "red", 3), ("w-blue-1", "blue", 2)]:
    ensure(
        "plugins/chat-demo/widgets",
        {"name": w_name},
        {"name": w_name, "colour": colour, "size": size},
    )

print(f"    seeded in {time.time() - t0:.1f}s ({created} objects created)")
