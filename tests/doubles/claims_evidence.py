"""NetBox tool results as the agent's tools return them (compact JSON, the
envelope of netbox_chat.netbox.tools), shared by the claims tests and the
grounding bench: devices at one site, the sites, VLANs, prefixes, addresses,
virtual machines, an interface page, an empty result and a search."""

from __future__ import annotations

from typing import Any


def _ref(i: int, display: str, slug: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": i, "display": display}
    if slug:
        out["slug"] = slug
    return out


AKRON = _ref(1, "DM-Akron", "dm-akron")
COLUMBUS = _ref(2, "DM-Columbus", "dm-columbus")
DUNDER = _ref(5, "Dunder-Mifflin, Inc.", "dunder-mifflin")
ACCESS = _ref(3, "Access Switch", "access-switch")
ROUTER = _ref(4, "Core Router", "core-router")

DEVICES = {
    "object_type": "dcim.device",
    "count": 5,
    "returned": 5,
    "offset": 0,
    "next_offset": None,
    "results": [
        {"id": 11, "name": "dmi01-akron-sw01", "status": "active", "site": AKRON,
         "role": ACCESS, "device_type": _ref(7, "Catalyst 9300"), "tenant": DUNDER,
         "serial": "FOC2231X0AB", "primary_ip": _ref(91, "10.112.0.11/24")},
        {"id": 12, "name": "dmi01-akron-sw02", "status": "offline", "site": AKRON,
         "role": ACCESS, "device_type": _ref(7, "Catalyst 9300"), "tenant": None,
         "serial": "FOC2231X0AC"},
        {"id": 13, "name": "dmi01-akron-rtr01", "status": "active", "site": AKRON,
         "role": ROUTER, "device_type": _ref(8, "ISR 4331"), "tenant": DUNDER,
         "primary_ip": _ref(93, "10.112.0.1/24")},
        {"id": 14, "name": "dmi01-akron-pdu01", "status": "planned", "site": AKRON,
         "role": _ref(6, "PDU", "pdu"), "device_type": _ref(9, "AP7900"), "tenant": None},
        {"id": 15, "name": "dmi01-akron-sw010", "status": "active", "site": AKRON,
         "role": ACCESS, "device_type": _ref(7, "Catalyst 9300"), "tenant": None},
    ],
}  # fmt: skip

SITES = {
    "object_type": "dcim.site",
    "count": 24,
    "returned": 3,
    "offset": 0,
    "next_offset": 3,
    "results": [
        {"id": 1, "name": "DM-Akron", "slug": "dm-akron", "status": "active",
         "region": _ref(40, "Ohio", "us-oh"), "facility": "Akron Data Center"},
        {"id": 2, "name": "DM-Columbus", "slug": "dm-columbus", "status": "active",
         "region": _ref(40, "Ohio", "us-oh")},
        {"id": 3, "name": "JBB Branch 104", "slug": "jbb-branch-104", "status": "planned",
         "tenant": _ref(6, "Jimbob's Banking", "jimbobs-banking")},
    ],
}  # fmt: skip

VLANS = {
    "object_type": "ipam.vlan",
    "count": 3,
    "returned": 3,
    "offset": 0,
    "next_offset": None,
    "results": [
        {"id": 201, "vid": 100, "name": "Data", "status": "active", "site": AKRON},
        {"id": 202, "vid": 200, "name": "Voice", "status": "active", "site": AKRON},
        {"id": 203, "vid": 999, "name": "Quarantine", "status": "reserved", "site": AKRON,
         "tenant": DUNDER},
    ],
}  # fmt: skip

PREFIXES = {
    "object_type": "ipam.prefix",
    "count": 2,
    "returned": 2,
    "offset": 0,
    "next_offset": None,
    "results": [
        {"id": 31, "prefix": "10.112.0.0/24", "status": "active", "vrf": _ref(2, "Shared"),
         "scope": AKRON, "vlan": _ref(201, "Data (100)")},
        {"id": 32, "prefix": "10.112.128.0/17", "status": "container", "vrf": None},
    ],
}  # fmt: skip

VMS = {
    "object_type": "virtualization.virtualmachine",
    "count": 3,
    "returned": 3,
    "offset": 0,
    "next_offset": None,
    "results": [
        {"id": 51, "name": "akron-web01", "status": "active", "cluster": _ref(9, "akron-vmw"),
         "vcpus": 4, "memory": 8192, "tenant": DUNDER},
        {"id": 52, "name": "akron-db01", "status": "active", "cluster": _ref(9, "akron-vmw"),
         "vcpus": 8, "memory": 32768, "tenant": DUNDER},
        {"id": 53, "name": "akron-test01", "status": "offline", "cluster": _ref(9, "akron-vmw"),
         "vcpus": 2, "memory": 4096},
    ],
}  # fmt: skip

INTERFACES = {
    "object_type": "dcim.interface",
    "count": 52,
    "returned": 3,
    "offset": 0,
    "next_offset": 3,
    "results": [
        {"id": 701, "device": _ref(11, "dmi01-akron-sw01"), "name": "GigabitEthernet1/0/1",
         "type": "1000base-t", "enabled": True, "mtu": 1500,
         "untagged_vlan": _ref(201, "Data (100)")},
        {"id": 702, "device": _ref(11, "dmi01-akron-sw01"), "name": "GigabitEthernet1/0/2",
         "type": "1000base-t", "enabled": False},
        {"id": 724, "device": _ref(11, "dmi01-akron-sw01"), "name": "GigabitEthernet1/0/24",
         "type": "1000base-t", "enabled": True, "cable": _ref(5, "#5")},
    ],
}  # fmt: skip

ADDRESS = {
    "id": 91, "address": "10.112.0.11/24", "status": "active", "dns_name": "sw01.akron.example.com",
    "assigned_object_type": "dcim.interface",
    "assigned_object": {"id": 750, "display": "Vlan100", "device": _ref(11, "dmi01-akron-sw01")},
    "tenant": DUNDER,
}  # fmt: skip

EMPTY = {
    "object_type": "dcim.device",
    "count": 0,
    "returned": 0,
    "offset": 0,
    "next_offset": None,
    "results": [],
}

EVIDENCE: list[Any] = [DEVICES, SITES, VLANS, PREFIXES, VMS, INTERFACES, ADDRESS, EMPTY]
