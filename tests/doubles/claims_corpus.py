"""Crafted answers that measure the grounding check (issue 38, item 6).

Each case is a question, the tool calls a turn made, an answer and what the
answer is: right, or wrong in one of the six ways the issue measures, or an
invention. The calls' replies are never written by hand: the product's own
NetBox tools fetch them from the NetBox double (tests/doubles/netbox_double.py,
plus the few objects `MORE` adds through its `data` knob: paged interfaces, a
longer changelog, a facility code, descriptions), or in the live tier from the
real NetBox's seeded data (scripts/netbox_seed.py). A wrong answer only uses
names and numbers that are somewhere in its replies: that is what makes it
hard, and `loose_tokens` lets the tests hold the corpus to it.

    .venv/bin/python -m tests.doubles.claims_corpus --table          # the double
    .venv/bin/python -m tests.doubles.claims_corpus --table --live   # NETBOX_URL/TOKEN

prints the Markdown table docs/grounding.md shows; `--misses` lists the cases the
check got wrong, with the claims it read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import netbox_chat.claims as claims
from netbox_chat.netbox import NetBoxClient
from netbox_chat.netbox.object_types import shipped_table
from netbox_chat.netbox.tools import build_netbox_tools
from tests.doubles import live_netbox
from tests.doubles.netbox_double import COLUMBUS, DATA, NetBoxDouble, _interface, _ref

# ------------------------------------------------------------------ kinds

# The six kinds of wrong answer of the table, in its order and words.
WRONG = {
    "other_row": "a value taken from another row",
    "other_status": "a status taken from another row",
    "other_meaning": "a number present but meaning something else",
    "other_set": "a count of a different set, or of a page",
    "one_off": "a list with one member more or less",
    "flipped": "a flipped negation or yes/no",
}
# Inventions: a name or number no reply holds, or facts stated with no tool call.
INVENTED = {
    "invented": "a name or number in no reply",
    "no_call": "facts with no tool call (names from the question)",
}
RIGHT = "right"
KINDS = (RIGHT, *WRONG, *INVENTED)


@dataclass(frozen=True)
class Case:
    """One crafted answer: what it is (`kind`, see KINDS), the question, the keys
    of the calls the turn made (into CALLS or LIVE_CALLS) and the answer."""

    kind: str
    question: str
    calls: tuple[str, ...]
    answer: str


def cases(rows: Iterable[tuple[str, str, str, str]]) -> list[Case]:
    """Cases from compact rows: (kind, question, space-separated call keys, answer)."""
    return [Case(kind, q, tuple(calls.split()), answer) for kind, q, calls, answer in rows]


# ------------------------------------------------------------------ the double's data

TOKEN = "nbt_corpus.0123456789abcdef"
_DESCRIBED = {
    1: ("AKR", "Akron branch office, 2 racks"),
    2: ("CMH", "Columbus branch office"),
    3: ("DAY", "Dayton branch office (opens 2027)"),
}
# Interfaces Gi0/0/0..Gi0/0/13 on dmi01-columbus-sw01 (15 with its eth0): a page of 5
# is not the set. Gi0/0/0 is the uplink with no cable; Gi0/0/3 and Gi0/0/7 are disabled.
_PORTS = [
    _interface(
        6 + n,
        f"Gi0/0/{n}",
        4,
        "access" if n < 4 else None,
        (3,) if n < 4 else (),
        enabled=n not in (3, 7),
        description="uplink to core-sw" if n == 0 else "",
    )
    for n in range(14)
]
# Eight creations, newest first (the double keeps its rows' order), before its two updates.
_CREATED = [
    {
        "id": 12 + i,
        "time": f"2026-01-{10 - i:02d}T09:30:00Z",
        "user_name": user,
        "action": {"value": "create"},
        "changed_object_type": kind,
        "changed_object_id": oid,
        "object_repr": name,
        "prechange_data": None,
        "postchange_data": {"name": name},
    }
    for i, (user, kind, oid, name) in enumerate(
        [
            ("jhalpert", "ipam.ipaddress", 3, "10.1.0.1/24"),
            ("jhalpert", "ipam.ipaddress", 2, "10.0.0.2/24"),
            ("admin", "dcim.interface", 19, "Gi0/0/13"),
            ("admin", "dcim.interface", 18, "Gi0/0/12"),
            ("dschrute", "dcim.site", 4, "DM-Butte"),
            ("dschrute", "ipam.vlan", 4, "VOICE"),
            ("admin", "dcim.rack", 46, "DC1-R04"),
            ("admin", "tenancy.tenant", 2, "Initech"),
        ]
    )
]
MORE: dict[str, list[dict[str, Any]]] = {
    "dcim/sites": [
        *(
            {
                **site,
                "facility": _DESCRIBED[site["id"]][0],
                "description": _DESCRIBED[site["id"]][1],
            }
            for site in DATA["dcim/sites"]
        ),
        {
            "id": 4,
            "name": "DM-Butte",
            "slug": "dm-butte",
            "status": {"value": "staged"},
            "facility": "BUT",
            "description": "Butte field office",
        },
    ],
    "dcim/interfaces": [*DATA["dcim/interfaces"], *_PORTS],
    "core/object-changes": [*_CREATED, *DATA["core/object-changes"]],
    "ipam/vlans": [
        *DATA["ipam/vlans"],
        {
            "id": 4,
            "vid": 400,
            "name": "VOICE",
            "site": _ref(1, "DM-Akron"),
            "tenant": None,
            "_interface_id": [],
        },
        {
            "id": 5,
            "vid": 500,
            "name": "GUEST",
            "site": COLUMBUS,
            "tenant": None,
            "_interface_id": [],
        },
    ],
}

# ------------------------------------------------------------------ calls on the double


def _get(object_type: str, limit: int | None = None, **filters: Any) -> tuple[str, dict[str, Any]]:
    args: dict[str, Any] = {"object_type": object_type}
    if filters:
        args["filters"] = filters
    if limit is not None:
        args["limit"] = limit
    return ("netbox_get_objects", args)


def _by_id(object_type: str, oid: int) -> tuple[str, dict[str, Any]]:
    return ("netbox_get_object_by_id", {"object_type": object_type, "object_id": oid})


CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "devices": _get("dcim.device"),
    "devices2": _get("dcim.device", 2),
    "akron": _get("dcim.device", site="dm-akron"),
    "columbus": _get("dcim.device", site="dm-columbus"),
    "offline": _get("dcim.device", status="offline"),
    "active": _get("dcim.device", status="active"),
    "routers": _get("dcim.device", role="router"),
    "dunder": _get("dcim.device", tenant="dunder-mifflin"),
    "sw01": _by_id("dcim.device", 1),
    "sw02": _by_id("dcim.device", 2),
    "rtr01": _by_id("dcim.device", 3),
    "sites": _get("dcim.site"),
    "butte": _by_id("dcim.site", 4),
    "vlans": _get("ipam.vlan"),
    "akron_vlans": _get("ipam.vlan", site="dm-akron"),
    "if_sw01": _get("dcim.interface", device_id=1),
    "if_rtr01": _get("dcim.interface", device_id=3),
    "if_cs5": _get("dcim.interface", 5, device_id=4),
    "if_cs": _get("dcim.interface", 20, device_id=4),
    "gi000": _get("dcim.interface", device_id=4, name="Gi0/0/0"),
    "cables": _get("dcim.cable"),
    "racks": _get("dcim.rack"),
    "akron_racks": _get("dcim.rack", site="dm-akron"),
    "prefixes": _get("ipam.prefix"),
    "ips": _get("ipam.ipaddress"),
    "vrfs": _get("ipam.vrf"),
    "tenants": _get("tenancy.tenant"),
    "circuits": _get("circuits.circuit"),
    "terms": _get("circuits.circuittermination"),
    "feeds": _get("dcim.powerfeed"),
    "vms": _get("virtualization.virtualmachine"),
    "platforms": _get("dcim.platform"),
    "changes5": ("netbox_get_changelogs", {"limit": 5}),
    "changes": ("netbox_get_changelogs", {"limit": 20}),
    "search": ("netbox_search_objects", {"query": "akron"}),
}

# ------------------------------------------------------------------ fetching replies


async def fetch(
    url: str, token: str, calls: Mapping[str, tuple[str, dict[str, Any]]], *, pinned: bool = True
) -> dict[str, Any]:
    """Each call's reply as the agent's tools return it, JSON-decoded (the text when
    it is not JSON). `pinned`: the shipped filter table, as the double's tests use."""
    client = NetBoxClient(url, token)
    try:
        table = shipped_table() if pinned else None
        tools = {t.name: t for t in build_netbox_tools(client, table=table)}
        out: dict[str, Any] = {}
        for key, (name, args) in calls.items():
            text = await tools[name].ainvoke(dict(args))
            try:
                out[key] = json.loads(text)
            except ValueError:
                out[key] = text
        return out
    finally:
        await client.aclose()


def double_replies() -> dict[str, Any]:
    """The replies of CALLS, fetched from a NetBox double serving DATA and MORE."""
    with NetBoxDouble(token=TOKEN) as nb:
        nb.data.update({key: list(rows) for key, rows in MORE.items()})
        return asyncio.run(fetch(nb.url, TOKEN, CALLS))


# ------------------------------------------------------------------ the double's cases

_Q_AKRON = "Which devices are at DM-Akron?"
_Q_VLANS = "Which VLANs does DM-Akron have?"
_Q_GI = "Is Gi0/0/0 on dmi01-columbus-sw01 cabled?"
_TABLE_STATUS = "| Name | Status |\n|---|---|\n"

RIGHT_CASES = [
    # prose, counts, number words
    ("How many devices are there?", "devices", "There are 6 devices."),
    ("How many devices are at DM-Akron?", "akron",
     "DM-Akron has three devices: dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-rtr01."),
    ("Is dmi01-akron-sw02 offline?", "sw02", "Yes, dmi01-akron-sw02 is offline."),
    ("What is the status of dmi01-akron-sw01?", "sw01", "dmi01-akron-sw01 is active."),
    ("Which devices are offline?", "offline", "Only one device is offline: dmi01-akron-sw02."),
    (_Q_AKRON, "akron",
     "- dmi01-akron-sw01 (active)\n- dmi01-akron-sw02 (offline)\n- dmi01-akron-rtr01 (active)"),
    (_Q_AKRON, "akron",
     "| ID | Name | Status |\n|---|---|---|\n| 1 | dmi01-akron-sw01 | active |\n"
     "| 2 | dmi01-akron-sw02 | offline |\n| 3 | dmi01-akron-rtr01 | active |"),
    (_Q_VLANS, "akron_vlans", "The VLANs at DM-Akron are: 1. VLAN 100 2. VLAN 200 3. VLAN 400"),
    (_Q_VLANS, "akron_vlans", "1. mgmt (100)\n2. users (200)\n3. VOICE (400)"),
    ("How many racks does DM-Akron have?", "akron_racks",
     "DM-Akron has two racks: R101 and DC1-R04."),
    ("How many sites are there?", "sites", "There are four sites."),
    ("Tell me about DM-Butte.", "butte", "DM-Butte's facility code is BUT and it is staged."),
    ("What are the sites' facility codes?", "sites",
     "The facility codes are AKR, CMH, DAY and BUT."),
    ("How is DM-Akron described?", "sites",
     'DM-Akron is described as "Akron branch office, 2 racks".'),
    ("What is DM-Dayton's status?", "sites",
     "DM-Dayton is planned; its description says it opens 2027."),
    (_Q_GI, "gi000", "Gi0/0/0 on dmi01-columbus-sw01 has no cable."),
    (_Q_GI, "gi000", 'No, Gi0/0/0 is not cabled; its description is "uplink to core-sw".'),
    ("What interfaces does dmi01-columbus-sw01 have?", "if_cs5",
     "dmi01-columbus-sw01 has 15 interfaces; the first 5 are eth0, Gi0/0/0, Gi0/0/1, Gi0/0/2 "
     "and Gi0/0/3."),
    ("Which interfaces of dmi01-columbus-sw01 are disabled?", "if_cs",
     "Three interfaces are disabled: eth0, Gi0/0/3 and Gi0/0/7."),
    ("What changed recently?", "changes5",
     "The change log has 10 entries. The 5 most recent are the creations of 10.1.0.1/24, "
     "10.0.0.2/24, Gi0/0/13, Gi0/0/12 and DM-Butte."),
    ("Who made the latest changes?", "changes5",
     "jhalpert made the two most recent changes: creating 10.1.0.1/24 and 10.0.0.2/24."),
    ("What happened to dmi01-akron-sw02?", "changes",
     "admin changed the status of dmi01-akron-sw02 from active to offline."),
    ("What are the VRFs' route distinguishers?", "vrfs",
     "VRF Blue has the route distinguisher 65000:1; Red has none."),
    ("Which prefixes are in VRF Blue?", "prefixes",
     "10.0.0.0/24 and 192.168.0.0/24 are in VRF Blue; 10.1.0.0/24 is in no VRF."),
    ("Is 192.168.0.0/24 in use?", "prefixes", "192.168.0.0/24 is reserved."),
    ("What status do the IP addresses have?", "ips",
     "10.0.0.2/24 is reserved; 10.0.0.1/24 and 10.1.0.1/24 are active."),
    ("How many IP addresses are there?", "ips", "There are 3 IP addresses."),
    ("What circuits are there?", "circuits",
     "LUM-1001 is an active Lumen circuit for Dunder-Mifflin, Inc.; ZAY-2001 from Zayo is "
     "planned."),
    ("Where does ZAY-2001 land?", "terms",
     "ZAY-2001's Z side lands on the provider network Zayo MPLS, its A side at DM-Dayton."),
    ("What is ge-0/0/1 on dmi01-akron-rtr01 connected to?", "if_rtr01",
     "ge-0/0/1 on dmi01-akron-rtr01 is cabled to LUM-1001: Termination A (cable #2)."),
    ("How is eth0 on dmi01-akron-sw01 configured?", "if_sw01",
     "eth0 is a tagged port: untagged VLAN mgmt (100), tagged users (200)."),
    ("What about eth1 on dmi01-akron-sw01?", "if_sw01",
     "eth1 is an access port in VLAN 200 (users) and has no cable."),
    ("How many cables are there?", "cables", "There are 2 cables, both connected."),
    ("What does PP-Akron-A feed?", "feeds", "PP-Akron-A feeds PF-A1 and PF-A2, both active."),
    ("What runs in akron-vmw?", "vms", "The cluster akron-vmw runs two VMs: vm-web01 and vm-db01."),
    ("Who owns the VMs?", "vms",
     "vm-db01 has no tenant; vm-web01 belongs to Dunder-Mifflin, Inc."),
    ("Which tenants are there?", "tenants",
     "NetBox has two tenants: Dunder-Mifflin, Inc. and Initech."),
    ("Which devices are routers?", "routers",
     "The routers are dmi01-akron-rtr01 and two devices named core-sw, one at DM-Dayton and "
     "one at DM-Columbus."),
    ("List the devices.", "devices2",
     "There are 6 devices; the first two are dmi01-akron-sw01 and dmi01-akron-sw02."),
    ("How many devices are active?", "devices active", "5 of the 6 devices are active."),
    ("Are all devices active?", "devices", "All devices but dmi01-akron-sw02 are active."),
    ("Is anything at DM-Columbus offline?", "offline", "No device at DM-Columbus is offline."),
    ("What is at DM-Columbus?", "columbus",
     "DM-Columbus has 2 devices: dmi01-columbus-sw01 (Access Switch) and core-sw (Router)."),
    ("Tell me about dmi01-akron-sw01.", "sw01",
     "dmi01-akron-sw01 is in rack R101 at DM-Akron, tenant Dunder-Mifflin, Inc., primary IP "
     "10.0.0.1/24."),
    ("Does dmi01-akron-sw02 have a primary IP?", "sw02",
     "No, dmi01-akron-sw02 has no primary IP and no tenant."),
    ("What platform does dmi01-akron-rtr01 run?", "rtr01", "dmi01-akron-rtr01 runs Junos."),
    ("Does any device run NX-OS?", "platforms devices", "No device runs NX-OS."),
    ("Which devices does Dunder-Mifflin own?", "dunder",
     "Dunder-Mifflin, Inc. has two devices, dmi01-akron-sw01 and dmi01-akron-rtr01."),
    ("Who owns VLAN 300?", "vlans", "VLAN 300 (servers) at DM-Columbus belongs to Initech."),
    ("How many VLANs are there?", "vlans", "There are five VLANs."),
    ("Which VLAN is VOICE?", "akron_vlans", "VOICE is VLAN 400 at DM-Akron."),
    ("Where is VLAN GUEST?", "vlans", "GUEST (500) is at DM-Columbus and has no tenant."),
    ("List the racks.", "racks",
     "| ID | Rack | Site |\n|---|---|---|\n| 1 | R101 | DM-Akron |\n| 2 | R201 | DM-Columbus |\n"
     "| 46 | DC1-R04 | DM-Akron |"),
    ("List the sites.", "sites",
     "| Site | Facility | Status |\n|---|---|---|\n| DM-Akron | AKR | active |\n"
     "| DM-Columbus | CMH | active |\n| DM-Dayton | DAY | planned |\n| DM-Butte | BUT | staged |"),
    ("Search for akron.", "search", "The search for akron found 3 devices and 1 site, DM-Akron."),
    ("Is any interface of dmi01-columbus-sw01 disabled?", "if_cs5",
     "Yes: eth0 is disabled, and so is Gi0/0/3."),
    ("How many Akron devices are active?", "akron", "Two of the three Akron devices are active."),
    ("Where does LUM-1001 run?", "terms",
     "LUM-1001 runs from DM-Akron (A side) to DM-Columbus (Z side)."),
    ("What is dmi01-akron-sw02?", "sw02", "dmi01-akron-sw02 is an Access Switch in rack R101."),
    ("What did dschrute do?", "changes", "dschrute created DM-Butte and the VLAN VOICE."),
    ("Is anything at DM-Columbus offline?", "columbus",
     "No, neither device at DM-Columbus is offline."),
    ("Are any of dmi01-columbus-sw01's interfaces cabled?", "if_cs",
     "None of dmi01-columbus-sw01's interfaces has a cable."),
    ("Is DC1-R04 at DM-Akron?", "akron_racks", "Yes, DC1-R04 (ID 46) is at DM-Akron."),
    ("Which VRF is 10.0.0.1/24 in?", "ips", "10.0.0.1/24 is in VRF Blue."),
    ("How many prefixes are active?", "prefixes", "Of the 3 prefixes, 2 are active."),
    ("Who is ZAY-2001's tenant?", "circuits", "ZAY-2001 has no tenant."),
    ("How many power feeds are there?", "feeds", "There are two power feeds."),
    # Markdown dressing: bold, code spans, headings, dashes, an empty cell
    (_Q_AKRON, "akron",
     "**3** devices:\n\n1. `dmi01-akron-sw01` — active\n2. `dmi01-akron-sw02` — offline\n"
     "3. `dmi01-akron-rtr01` — active"),
    ("Summarise DM-Columbus.", "columbus",
     "### DM-Columbus\n\n- **Devices:** 2\n- **Switch:** dmi01-columbus-sw01 (tenant Initech, "
     "rack R201)\n- **Router:** core-sw"),
    ("List the prefixes.", "prefixes",
     "| ID | Prefix | VRF | Status |\n|---|---|---|---|\n| 1 | 10.0.0.0/24 | Blue | active |\n"
     "| 2 | 10.1.0.0/24 | — | active |\n| 3 | 192.168.0.0/24 | Blue | reserved |"),
    ("What VLAN is Gi0/0/0 in?", "gi000", "Gi0/0/0 is an access port in VLAN 300 (servers)."),
    ("Which VRF has no RD?", "vrfs", "VRF Red has no route distinguisher."),
    ("Is ZAY-2001 planned?", "circuits", "Yes, ZAY-2001 is planned."),
    ("Is dmi01-akron-sw01 offline?", "sw01", "No, dmi01-akron-sw01 is active."),
    ("Are all power feeds active?", "feeds", "Yes, all power feeds are active."),
    ("Does Initech own any VLAN?", "vlans", "Yes, one: VLAN 300 (servers)."),
    ("How many interfaces does dmi01-columbus-sw01 have?", "if_cs5",
     "There are fifteen interfaces on dmi01-columbus-sw01 (5 shown)."),
    ("What happened to DM-Dayton?", "changes",
     "On 2026-01-02 admin changed DM-Dayton's status from active to offline."),
    ("Which VMs have no tenant?", "vms", "Only vm-db01 has no tenant."),
    ("Which interface is the uplink on dmi01-columbus-sw01?", "if_cs",
     'Gi0/0/0 is the uplink (description "uplink to core-sw"); it has no cable.'),
    ("Are all sites active?", "sites",
     "No: DM-Akron and DM-Columbus are active, DM-Dayton is planned and DM-Butte is staged."),
    ("What is eth0 on dmi01-akron-sw01 connected to?", "if_sw01",
     "eth0 is cabled (cable #1) to ge-0/0/0."),
    ("How many tenants are there?", "tenants", "Two."),
    # a yes/no about any object of a set; a list narrowed by a status word
    ("Does any device run Junos?", "platforms devices", "Yes, dmi01-akron-rtr01 runs Junos."),
    ("Is there a router at DM-Dayton?", "devices", "Yes, core-sw is a router at DM-Dayton."),
    ("Which prefixes are active?", "prefixes",
     "The active prefixes are 10.0.0.0/24 and 10.1.0.0/24."),
]  # fmt: skip

WRONG_CASES = {
    "other_row": [
        (_Q_AKRON, "akron", "dmi01-akron-rtr01 is an Access Switch."),
        ("Where is dmi01-columbus-sw01?", "devices", "dmi01-columbus-sw01 is at DM-Akron."),
        ("Who owns dmi01-akron-sw02?", "akron",
         "dmi01-akron-sw02 belongs to tenant Dunder-Mifflin, Inc."),
        ("Who owns dmi01-columbus-sw01?", "devices",
         "dmi01-columbus-sw01's tenant is Dunder-Mifflin, Inc."),
        ("Which rack is dmi01-akron-rtr01 in?", "devices", "dmi01-akron-rtr01 is in rack R101."),
        ("Which rack is dmi01-columbus-sw01 in?", "devices",
         "dmi01-columbus-sw01 is in rack R101."),
        ("What is VLAN 300 called?", "vlans", "VLAN 300 is named users."),
        ("Where is VLAN 100?", "vlans", "VLAN 100 (mgmt) is at DM-Columbus."),
        ("Who owns the servers VLAN?", "vlans", "The VLAN servers belongs to Dunder-Mifflin, Inc."),
        ("What is VRF Red's RD?", "vrfs", "VRF Red has the route distinguisher 65000:1."),
        ("Which VRF holds 10.1.0.0/24?", "prefixes", "10.1.0.0/24 is in VRF Blue."),
        ("What does dmi01-akron-sw01 run?", "devices", "dmi01-akron-sw01 runs Junos."),
        ("Who provides LUM-1001?", "circuits", "LUM-1001 is provided by Zayo."),
        ("Where is LUM-1001's A side?", "terms", "LUM-1001's A side is at DM-Dayton."),
        ("Who owns vm-db01?", "vms", "vm-db01 belongs to Dunder-Mifflin, Inc."),
        ("What roles do the Akron devices have?", "akron",
         "| Name | Role |\n|---|---|\n| dmi01-akron-sw01 | Access Switch |\n"
         "| dmi01-akron-rtr01 | Access Switch |"),
        ("What is DM-Columbus's facility?", "sites", "DM-Columbus's facility code is BUT."),
        ("What is eth1's VLAN?", "if_sw01", "eth1's untagged VLAN is mgmt (100)."),
        ("What is dmi01-akron-sw01's primary IP?", "devices",
         "dmi01-akron-sw01's primary IP is 10.1.0.1/24."),
        ("Where is R201?", "racks", "R201 is at DM-Akron."),
        ("Which racks are the Akron devices in?", "akron",
         "| Name | Rack |\n|---|---|\n| dmi01-akron-sw01 | R101 |\n| dmi01-akron-rtr01 | R101 |"),
        ("What do the Akron devices run?", "akron",
         "- dmi01-akron-sw01: IOS-XE\n- dmi01-akron-rtr01: IOS-XE"),
        ("Where does ZAY-2001 end?", "terms", "LUM-1001's Z side lands on Zayo MPLS."),
        ("When was DM-Butte created?", "changes", "DM-Butte was created on 2026-01-04."),
    ],
    "other_status": [
        (_Q_AKRON, "akron", "dmi01-akron-sw01 is offline."),
        (_Q_AKRON, "akron", "dmi01-akron-sw02 is active."),
        ("What is DM-Butte's status?", "sites", "DM-Butte is planned."),
        ("What is DM-Dayton's status?", "sites", "DM-Dayton is active."),
        ("Is 192.168.0.0/24 in use?", "prefixes", "192.168.0.0/24 is active."),
        ("What is 10.0.0.2/24's status?", "ips", "10.0.0.2/24 is active."),
        ("What is 10.1.0.1/24's status?", "ips", "10.1.0.1/24 is reserved."),
        ("Is ZAY-2001 in service?", "circuits", "ZAY-2001 is active."),
        ("What is LUM-1001's status?", "circuits", "LUM-1001 is planned."),
        (_Q_AKRON, "akron",
         "- dmi01-akron-sw01 (active)\n- dmi01-akron-sw02 (active)\n- dmi01-akron-rtr01 (active)"),
        (_Q_AKRON, "akron",
         _TABLE_STATUS + "| dmi01-akron-sw01 | offline |\n| dmi01-akron-sw02 | active |"),
        ("What is 10.0.0.0/24's status?", "prefixes", "10.0.0.0/24 is reserved."),
        ("What are the sites' statuses?", "sites",
         "| Site | Status |\n|---|---|\n| DM-Akron | active |\n| DM-Dayton | staged |"),
        ("Which Akron devices are down?", "akron",
         "dmi01-akron-rtr01 is offline, like dmi01-akron-sw02."),
        ("What is DM-Columbus's status?", "sites", "DM-Columbus is staged."),
        ("What is the status of the Akron devices?", "akron", "**dmi01-akron-sw02** is `active`."),
        ("What is the status of the prefixes?", "prefixes",
         "1. 10.0.0.0/24 — active\n2. 10.1.0.0/24 — reserved\n3. 192.168.0.0/24 — reserved"),
        ("Which sites are active?", "sites", "DM-Akron, DM-Columbus and DM-Butte are active."),
    ],
    "other_meaning": [
        ("How many racks does DM-Akron have?", "akron_racks", "DM-Akron has 46 racks."),
        ("Which VLAN is servers?", "vlans", "The servers VLAN is VLAN 3."),
        ("Which VLAN is users?", "vlans", "The users VLAN is VLAN 2."),
        ("What VLAN is Gi0/0/0 in?", "gi000", "Gi0/0/0 is in VLAN 3."),
        ("What is 10.0.0.1/24 assigned to?", "ips", "10.0.0.1/24 is in VLAN 66."),
        ("What is LUM-1001's commit rate?", "terms",
         "LUM-1001 has a commit rate of 1000000 kbps."),
        ("How many prefixes does VRF Blue hold?", "vrfs", "VRF Blue holds 65000 prefixes."),
        ("What is DM-Butte's ID?", "changes", "DM-Butte has the ID 16."),
        ("What is Gi0/0/13's ID?", "changes", "Gi0/0/13 is interface 14."),
        ("How many VLANs does DM-Akron have?", "akron_vlans", "DM-Akron has 100 VLANs."),
        ("How many interfaces does dmi01-columbus-sw01 have?", "devices",
         "dmi01-columbus-sw01 has 4 interfaces."),
        ("How tall is R101?", "akron_racks", "R101 is 46 U tall."),
        ("How many ports does dmi01-akron-sw01 have?", "sw01",
         "dmi01-akron-sw01 (10.0.0.1/24) has 24 ports."),
        ("How many devices does Initech have?", "tenants", "Initech has 2 devices."),
        ("How many changes did jhalpert make?", "changes5", "jhalpert made 12 changes."),
        ("What is DM-Dayton's facility?", "sites", "DM-Dayton's facility code is 2027."),
        ("How many devices does DM-Columbus have?", "columbus", "DM-Columbus has 4 devices."),
        ("How many VMs does akron-vmw run?", "vms", "akron-vmw runs 1 VM."),
    ],
    "other_set": [
        ("How many interfaces does dmi01-columbus-sw01 have?", "if_cs5",
         "dmi01-columbus-sw01 has 5 interfaces."),
        ("How many devices are there?", "devices2", "There are 2 devices."),
        ("How long is the change log?", "changes5", "The change log has 5 entries."),
        ("How many devices are there in NetBox?", "akron", "There are 3 devices in NetBox."),
        ("How many devices are at DM-Akron?", "devices", "DM-Akron has 6 devices."),
        ("How many devices are at DM-Akron?", "active akron", "DM-Akron has 5 devices."),
        ("How many VLANs does DM-Akron have?", "vlans", "DM-Akron has 5 VLANs."),
        ("How many VLANs are there?", "akron_vlans", "There are 3 VLANs in NetBox."),
        ("How many racks does DM-Akron have?", "racks", "DM-Akron has 3 racks."),
        ("How many interfaces of dmi01-columbus-sw01 are disabled?", "if_cs",
         "dmi01-columbus-sw01 has 2 disabled interfaces."),
        ("How many routers are there?", "routers", "There are 2 routers."),
        ("How many Akron devices are offline?", "akron offline",
         "Of the 3 Akron devices, 2 are offline."),
        ("How many prefixes are active?", "prefixes", "3 prefixes are active."),
        ("How many addresses are active?", "ips", "3 addresses are active."),
        ("How many changes did admin make?", "changes", "admin made 10 changes."),
        ("How many devices are at DM-Columbus?", "columbus devices", "DM-Columbus has 6 devices."),
        ("How many devices does Dunder-Mifflin own?", "dunder devices",
         "Dunder-Mifflin, Inc. has 6 devices."),
        ("Search for akron.", "search", "The search for akron found 1 device."),
        ("How many interfaces do the two switches have?", "if_sw01 if_cs5",
         "Together dmi01-akron-sw01 and dmi01-columbus-sw01 have 7 interfaces."),
        ("How many changes did jhalpert make?", "changes5", "jhalpert made 5 changes."),
        ("How many VLANs does DM-Columbus have?", "vlans", "DM-Columbus has 5 VLANs."),
        ("How many devices are there?", "devices2", "NetBox has two devices."),
        ("How many interfaces does dmi01-columbus-sw01 have?", "if_cs5",
         "It has five interfaces."),
        ("How many racks does DM-Columbus have?", "akron_racks racks",
         "DM-Columbus has two racks."),
    ],
    "one_off": [
        (_Q_AKRON, "akron", "The devices at DM-Akron are dmi01-akron-sw01 and dmi01-akron-sw02."),
        (_Q_AKRON, "devices",
         "The devices at DM-Akron are dmi01-akron-sw01, dmi01-akron-sw02, dmi01-akron-rtr01 and "
         "dmi01-columbus-sw01."),
        ("Which devices are offline?", "devices",
         "The offline devices are dmi01-akron-sw02 and dmi01-akron-sw01."),
        ("Which racks are at DM-Akron?", "racks", "DM-Akron's racks are R101, R201 and DC1-R04."),
        (_Q_VLANS, "akron_vlans", "1. VLAN 100 2. VLAN 200"),
        (_Q_VLANS, "vlans", "- mgmt (100)\n- users (200)\n- servers (300)\n- VOICE (400)"),
        ("Which devices are routers?", "routers",
         "The routers are dmi01-akron-rtr01 and core-sw at DM-Dayton."),
        ("Which tenants are there?", "tenants", "The only tenant is Dunder-Mifflin, Inc."),
        ("What runs in akron-vmw?", "vms", "The only VM in akron-vmw is vm-web01."),
        ("Which interfaces of dmi01-columbus-sw01 are disabled?", "if_cs",
         "The disabled interfaces are Gi0/0/3 and Gi0/0/7."),
        ("What does PP-Akron-A feed?", "feeds", "PP-Akron-A feeds only PF-A1."),
        ("Which platforms are there?", "platforms", "The platforms are IOS-XE and Junos."),
        ("Which devices does Dunder-Mifflin own?", "dunder devices",
         "Dunder-Mifflin, Inc.'s devices are dmi01-akron-sw01, dmi01-akron-rtr01 and "
         "dmi01-columbus-sw01."),
        ("List all sites.", "sites", "| Site |\n|---|\n| DM-Akron |\n| DM-Columbus |\n| DM-Dayton |"),
        ("Which circuits does Lumen provide?", "circuits",
         "Lumen's circuits are LUM-1001 and ZAY-2001."),
        ("Which prefixes are in VRF Blue?", "prefixes",
         "VRF Blue holds 10.0.0.0/24, 10.1.0.0/24 and 192.168.0.0/24."),
        ("Which VLANs does eth0 on dmi01-akron-sw01 carry?", "if_sw01",
         "eth0 carries VLAN 100 (mgmt) only."),
        ("Who made changes?", "changes", "admin and jhalpert made the changes."),
        ("Which prefixes are reserved?", "prefixes",
         "The reserved prefixes are 10.1.0.0/24 and 192.168.0.0/24."),
    ],
    "flipped": [
        (_Q_GI, "gi000", "Yes, Gi0/0/0 has a cable."),
        ("Is Gi0/0/0 enabled?", "gi000", "No, Gi0/0/0 is not enabled."),
        ("Is dmi01-akron-sw02 offline?", "sw02", "No, dmi01-akron-sw02 is not offline."),
        ("Is dmi01-akron-sw01 active?", "sw01", "No, dmi01-akron-sw01 is not active."),
        ("Are any devices offline?", "offline", "No, no device is offline."),
        ("Are all devices at DM-Akron active?", "akron", "Yes, all devices at DM-Akron are active."),
        ("Does eth1 on dmi01-akron-sw01 have a cable?", "if_sw01",
         "Yes, eth1 on dmi01-akron-sw01 is cabled."),
        ("Is ge-0/0/0 on dmi01-akron-rtr01 cabled?", "if_rtr01", "ge-0/0/0 has no cable."),
        ("Does VRF Red have a route distinguisher?", "vrfs",
         "Yes, VRF Red has a route distinguisher."),
        ("Does dmi01-akron-sw02 have a primary IP?", "sw02",
         "Yes, dmi01-akron-sw02 has a primary IP."),
        ("Does vm-db01 have a tenant?", "vms", "Yes, vm-db01 has a tenant."),
        ("Does any device run NX-OS?", "platforms devices", "Yes, NX-OS runs on a device."),
        ("Is ZAY-2001 active?", "circuits", "Yes, ZAY-2001 is active."),
        ("Is any interface on dmi01-columbus-sw01 disabled?", "if_cs",
         "No, every interface on dmi01-columbus-sw01 is enabled."),
        ("Is there a router at DM-Columbus?", "columbus",
         "No, there is no router at DM-Columbus."),
        ("Is DM-Dayton planned?", "sites", "No, DM-Dayton is not planned."),
        ("Is eth0 on dmi01-columbus-sw01 enabled?", "if_cs5",
         "Yes, eth0 on dmi01-columbus-sw01 is enabled."),
        ("Does dmi01-akron-rtr01 have a tenant?", "rtr01", "No, dmi01-akron-rtr01 has no tenant."),
        ("Is dmi01-akron-sw02 in a rack?", "sw02", "No, dmi01-akron-sw02 is not in a rack."),
        ("Does any device run Junos?", "platforms devices", "No device runs Junos."),
        ("Is there a router at DM-Akron?", "akron", "No, DM-Akron has no router."),
    ],
}  # fmt: skip

INVENTED_CASES = {
    "invented": [
        ("How many devices are at DM-Akron?", "akron", "DM-Akron has 4 devices."),
        ("What is Gi0/0/0 connected to?", "if_cs5", "Gi0/0/0 is cabled to dmi01-akron-sw03."),
        ("Who owns dmi01-akron-sw01?", "akron",
         "| Name | Tenant |\n|---|---|\n| dmi01-akron-sw01 | Globex |"),
        ("Which VLAN is VOICE?", "akron_vlans", "VOICE is VLAN 250."),
        ("What is DM-Cleveland's status?", "sites", "DM-Cleveland is decommissioning."),
        ("What addresses are reserved?", "ips", "10.0.0.3/24 is reserved."),
        ("How many devices are there?", "devices", "There are 12 devices."),
        ("Which racks are at DM-Akron?", "racks", "R102 is at DM-Akron."),
        ("What is the MTU of eth0?", "if_sw01", "eth0 has an MTU of 9000."),
        ("Who created DM-Butte?", "changes", "DM-Butte was created by Michael Scott."),
    ],
    "no_call": [
        ("Is dmi01-akron-sw02 offline?", "", "Yes, dmi01-akron-sw02 is offline."),
        ("How many devices are at DM-Akron?", "", "DM-Akron has 3 devices."),
        (_Q_VLANS, "", "DM-Akron has VLANs 100, 200 and 400."),
        (_Q_GI, "", "No, Gi0/0/0 has no cable."),
        ("Which site is BUT?", "", "BUT is the facility code of DM-Butte."),
        ("Which VRF has RD 65000:1?", "", "VRF Blue has the route distinguisher 65000:1."),
    ],
}  # fmt: skip


def _all(
    right: Sequence[tuple[str, str, str]], *kinds: Mapping[str, Sequence[tuple[str, str, str]]]
) -> list[Case]:
    rows = [(RIGHT, *row) for row in right]
    rows += [(kind, *row) for table in kinds for kind, group in table.items() for row in group]
    return cases(rows)


CASES = _all(RIGHT_CASES, WRONG_CASES, INVENTED_CASES)

# ------------------------------------------------------------------ the live tier's cases

# On the real NetBox's seeded data (scripts/netbox_seed.py): no changelog (it grows with
# every seeding), ids only where the seed fixes them; `loose_tokens` catches a drift.
LIVE_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "devices": _get("dcim.device"),  # 11 devices, a page of 10
    "akron": _get("dcim.device", site="dm-akron"),
    "offline": _get("dcim.device", status="offline"),
    "sites": _get("dcim.site"),
    "akron_vlans": _get("ipam.vlan", site="dm-akron"),
    "vlans": _get("ipam.vlan"),
    "prefixes": _get("ipam.prefix"),
    "ips": _get("ipam.ipaddress"),  # 11 addresses, a page of 10
    "if_sw01": _get("dcim.interface", device="dmi01-akron-sw01"),
    "if_rtr01": _get("dcim.interface", device="dmi01-akron-rtr01"),
    "circuits": _get("circuits.circuit"),
    "types": _get("dcim.devicetype"),
    "platforms": _get("dcim.platform"),
    "tenants": _get("tenancy.tenant"),
}
_Q_OFFLINE = "Which devices are offline?"
_Q_SW01_GI2 = "Is GigabitEthernet1/0/2 on dmi01-akron-sw01 cabled?"

LIVE_RIGHT = [
    (_Q_AKRON, "akron",
     "DM-Akron has 5 devices: dmi01-akron-fw01, dmi01-akron-rtr01, dmi01-akron-sw01, "
     "dmi01-akron-sw02 and dmi01-akron-sw03."),
    (_Q_OFFLINE, "offline",
     "Three devices are offline: dmi01-akron-sw02, dmi01-akron-sw03 and dmi01-columbus-sw02."),
    ("What is the status of dmi01-akron-fw01?", "akron",
     "The firewall dmi01-akron-fw01 is in status failed."),
    (_Q_VLANS, "akron_vlans", "1. VLAN 100 (USERS) 2. VLAN 200 (VOICE) 3. VLAN 300 (MGMT)"),
    ("What is the status of the MGMT VLANs?", "vlans",
     "MGMT (300) is reserved at DM-Columbus but active at DM-Akron."),
    ("Tell me about DM-Cleveland.", "sites",
     "DM-Cleveland is decommissioning and belongs to Globex."),
    ("How many devices are there?", "devices", "NetBox has 11 devices."),
    ("Which addresses are not active?", "ips",
     'Of the 11 IP addresses, 10.10.100.250/24 is reserved ("unassigned") and '
     '10.10.100.251/24 is deprecated ("old gateway") among the first 10.'),
    (_Q_SW01_GI2, "if_sw01", "No, GigabitEthernet1/0/2 on dmi01-akron-sw01 has no cable and is disabled."),
    ("Which port is dmi01-akron-sw01's uplink?", "if_sw01",
     "GigabitEthernet1/0/1 is the uplink: a tagged port, untagged VLAN MGMT (300), on cable #1."),
    ("Which circuits are active?", "circuits",
     "LUM-1002 is planned, for Globex; LUM-1001 and ZAY-2001 are active."),
    ("How many C9300-48P are there?", "types", "Seven devices are C9300-48P switches."),
    ("Does any device run NX-OS?", "platforms", "No device runs NX-OS."),
    ("What is 10.10.30.0/24 for?", "prefixes",
     "10.10.30.0/24 is reserved; its description is Akron future."),
    ("Which prefix do Akron's users have?", "prefixes",
     "The Akron users prefix is 10.10.100.0/24, on VLAN USERS (100)."),
    ("Which tenants are there?", "tenants", "The tenants are Acme and Globex."),
    ("List the sites.", "sites",
     "| Site | Status | Tenant |\n|---|---|---|\n| DM-Akron | active | Acme |\n"
     "| DM-Cleveland | decommissioning | Globex |\n| DM-Columbus | active | Acme |\n"
     "| DM-Dayton | planned | Globex |"),
    ("How many Akron devices are offline?", "akron", "Two of the five Akron devices are offline."),
    ("How many VLANs are there?", "vlans",
     "There are six VLANs; DM-Dayton's USERS (100) is deprecated."),
    ("Is GigabitEthernet1/0/2 on dmi01-akron-rtr01 cabled?", "if_rtr01",
     "Yes, GigabitEthernet1/0/2 on dmi01-akron-rtr01 is on cable #1, though disabled."),
    ("What is 10.10.100.251/24?", "ips",
     '10.10.100.251/24 is deprecated; its description is "old gateway".'),
    ("Describe the Akron prefixes.", "prefixes",
     '- 10.10.0.0/16 — container, "Akron supernet"\n- 10.10.100.0/24 — active, "Akron users"\n'
     '- 10.10.200.0/24 — active, "Akron voice"\n- 10.10.30.0/24 — reserved, "Akron future"'),
    ("How many ISR4331 are there?", "types", "Three devices are ISR4331 routers."),
    ("Is dmi01-akron-sw01's uplink enabled?", "if_sw01",
     "Yes, GigabitEthernet1/0/1 (uplink) is enabled."),
    # a number said as a field, a list narrowed by a status word, a yes/no about any
    # object of a set, a status of a name two sites share
    ("How tall is a C9300-48P?", "types", "A C9300-48P is 1 U tall."),
    ("Which prefixes are containers?", "prefixes",
     "The container prefixes are 10.10.0.0/16 and 10.20.0.0/16."),
    ("Does any device run Junos?", "platforms", "Yes, Junos runs on one device."),
    ("What is the status of USERS at DM-Dayton?", "vlans",
     "USERS (100) at DM-Dayton is deprecated."),
]  # fmt: skip

LIVE_WRONG = {
    "other_row": [
        (_Q_AKRON, "akron", "dmi01-akron-rtr01 is a Firewall."),
        ("What does dmi01-akron-sw01 run?", "akron", "dmi01-akron-sw01 runs Junos."),
        ("Who owns DM-Columbus?", "sites", "DM-Columbus belongs to Globex."),
        ("What is VLAN 200 at DM-Akron called?", "akron_vlans", "VLAN 200 is named MGMT."),
        ("Who provides ZAY-2001?", "circuits", "ZAY-2001 is provided by Lumen."),
        ("Which VLAN is 10.10.200.0/24 on?", "prefixes", "10.10.200.0/24 is on VLAN USERS (100)."),
        ("What is 10.10.30.0/24 for?", "prefixes", "10.10.30.0/24 is described as Akron voice."),
    ],
    "other_status": [
        ("What is the status of dmi01-akron-fw01?", "akron", "dmi01-akron-fw01 is offline."),
        ("What is DM-Dayton's status?", "sites", "DM-Dayton is decommissioning."),
        ("What is the status of MGMT at DM-Columbus?", "vlans",
         "MGMT (300) at DM-Columbus is active."),
        ("Is LUM-1002 in service?", "circuits", "LUM-1002 is active."),
        ("What is 10.10.100.251/24's status?", "ips", "10.10.100.251/24 is reserved."),
        (_Q_AKRON, "akron", "dmi01-akron-rtr01 is offline."),
        ("What is the status of USERS at DM-Dayton?", "vlans",
         "USERS (100) at DM-Dayton is active."),
    ],
    "other_meaning": [
        ("How tall is a C9300-48P?", "types", "A C9300-48P is 7 U tall."),
        ("How tall is an SRX345?", "types", "The SRX345 is 3 U high."),
        ("Which VLAN is VOICE?", "akron_vlans", "VOICE is VLAN 2."),
        ("Which VLAN is USERS at DM-Akron?", "akron_vlans", "USERS at DM-Akron is VLAN 1."),
        ("How many devices run IOS-XE?", "platforms", "IOS-XE runs on 1 device."),
        ("How many interfaces does dmi01-akron-rtr01 have?", "if_rtr01",
         "dmi01-akron-rtr01 has 12 interfaces."),
        ("How tall is an ISR4331?", "types", "The ISR4331 is 3 U tall."),
    ],
    "other_set": [
        ("How many devices are there?", "devices", "There are 10 devices."),
        ("How many IP addresses are there?", "ips", "There are 10 IP addresses."),
        ("How many VLANs are there in NetBox?", "akron_vlans", "There are 3 VLANs in total."),
        ("How many devices at DM-Akron are offline?", "offline",
         "DM-Akron has 3 offline devices."),
        ("How many VLANs does DM-Akron have?", "vlans", "DM-Akron has 6 VLANs."),
        ("How many devices are there?", "devices", "NetBox has ten devices."),
    ],
    "one_off": [
        (_Q_OFFLINE, "offline",
         "The offline devices are dmi01-akron-sw02 and dmi01-akron-sw03."),
        (_Q_VLANS, "akron_vlans", "1. VLAN 100 2. VLAN 200"),
        ("Which tenants are there?", "tenants", "The only tenant is Acme."),
        ("Which circuits does Lumen provide?", "circuits",
         "Lumen's circuits are LUM-1001, LUM-1002 and ZAY-2001."),
        ("Which prefixes are containers?", "prefixes",
         "The container prefixes are 10.10.0.0/16, 10.20.0.0/16 and 10.30.0.0/24."),
        ("Which Akron devices are offline?", "offline",
         "The offline devices at DM-Akron are dmi01-akron-sw02, dmi01-akron-sw03 and "
         "dmi01-columbus-sw02."),
        ("Which prefixes are active?", "prefixes",
         "The active prefixes are 10.10.100.0/24, 10.10.200.0/24, 10.20.100.0/24 and "
         "10.10.30.0/24."),
    ],
    "flipped": [
        (_Q_SW01_GI2, "if_sw01", "Yes, GigabitEthernet1/0/2 on dmi01-akron-sw01 is cabled."),
        ("Is GigabitEthernet1/0/1 on dmi01-akron-rtr01 cabled?", "if_rtr01",
         "No, GigabitEthernet1/0/1 on dmi01-akron-rtr01 has no cable."),
        ("Does any device run NX-OS?", "platforms", "Yes, NX-OS runs on some devices."),
        ("Are all devices at DM-Akron active?", "akron", "Yes, all devices at DM-Akron are active."),
        ("Is anything at DM-Columbus offline?", "offline", "No device at DM-Columbus is offline."),
        ("Is GigabitEthernet1/0/2 on dmi01-akron-rtr01 enabled?", "if_rtr01",
         "Yes, GigabitEthernet1/0/2 on dmi01-akron-rtr01 is enabled."),
        ("Does any device run IOS-XE?", "platforms", "No device runs IOS-XE."),
    ],
}  # fmt: skip

LIVE_INVENTED = {
    "invented": [
        ("How many devices are at DM-Akron?", "akron", "DM-Akron has 6 devices."),
        ("What is DM-Toledo's status?", "sites", "DM-Toledo is active."),
        ("Which VLAN is GUEST?", "akron_vlans", "VLAN 400 is GUEST."),
    ],
    "no_call": [
        ("Is dmi01-akron-sw02 offline?", "", "Yes, dmi01-akron-sw02 is offline."),
        ("How many VLANs are at DM-Akron?", "", "DM-Akron has 3 VLANs: USERS, VOICE and MGMT."),
    ],
}  # fmt: skip

LIVE_CASES = _all(LIVE_RIGHT, LIVE_WRONG, LIVE_INVENTED)


def live_replies() -> dict[str, Any]:
    """The replies of LIVE_CALLS from the real NetBox of the live tier (its own filter
    table, as the product reads it)."""
    return asyncio.run(fetch(live_netbox.URL, live_netbox.TOKEN, LIVE_CALLS, pinned=False))


# ------------------------------------------------------------------ the measure

_CALL = getattr(claims, "Call", None)  # the rebuilt check's Call (issue 38); plain payloads before
_TOKEN = re.compile(r"[\w][\w./:,-]*[\w]|\d")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
# Words the answers use that are vocabulary, not NetBox data.
_VOCABULARY = frozenset({"netbox", "vlan", "vlans", "id", "ip", "ips", "vrf", "vm", "vms", "rd"})


def evidence(case: Case, replies: Mapping[str, Any], calls: Mapping[str, tuple[str, Any]]) -> list:
    """The case's calls as the check takes them: `Call(name, args, payload)` where the
    check has Call, else the plain payloads (today's check)."""
    made = [(*calls[key], replies[key]) for key in case.calls]
    if _CALL is None:
        return [payload for _, _, payload in made]
    return [_CALL(name, args, payload) for name, args, payload in made]


def loose_tokens(answer: str, replies: Iterable[Any], *, words: bool = False) -> list[str]:
    """The names and numbers of `answer` that no reply holds (any case): an empty list
    for every wrong answer of the corpus, at least one for an invention. Names are the
    tokens with a digit, a hyphen, a slash or more than one capital (`words`: or one,
    so that "Globex" counts, and so do English words opening a sentence)."""
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in replies).lower()
    numbers = set(_NUMBER.findall(text))
    loose = []
    for token in _TOKEN.findall(answer.replace("**", "")):
        token = token.rstrip(".,:")
        if token.lower() in _VOCABULARY:
            continue
        if _NUMBER.fullmatch(token):
            held = token in numbers
        elif any(c.isdigit() or c in "-/" for c in token):
            held = token.lower() in text
        else:
            held = sum(c.isupper() for c in token) <= (0 if words else 1) or token.lower() in text
        if not held:
            loose.append(token)
    return loose


@dataclass(frozen=True)
class Outcome:
    """What the check said of one case: any claim ungrounded (or answered without
    NetBox), any claim unchecked, or the check raised (`error`)."""

    case: Case
    ungrounded: bool
    unchecked: bool
    error: str = ""


Check = Callable[..., Any]  # check(answer, calls, *, given) -> Grounding


def judge(
    case: Case,
    replies: Mapping[str, Any],
    calls: Mapping[str, tuple[str, Any]],
    check: Check = claims.check,
) -> Outcome:
    try:
        g = check(case.answer, evidence(case, replies, calls), given=case.question)
    except Exception as e:  # today's check can raise (issue 38): counted, never hidden
        return Outcome(case, False, False, f"{type(e).__name__}: {e}")
    return Outcome(case, bool(g.ungrounded) or g.without_netbox, bool(getattr(g, "unchecked", ())))


@dataclass(frozen=True)
class Share:
    """How many of `n` answers were marked ungrounded, unchecked (and not ungrounded),
    and made the check raise."""

    n: int
    ungrounded: int
    unchecked: int
    errors: int

    @property
    def marked(self) -> int:
        return self.ungrounded + self.unchecked


def share(outcomes: Sequence[Outcome]) -> Share:
    return Share(
        len(outcomes),
        sum(o.ungrounded for o in outcomes),
        sum(o.unchecked and not o.ungrounded for o in outcomes),
        sum(bool(o.error) for o in outcomes),
    )


def measure(
    corpus: Sequence[Case],
    replies: Mapping[str, Any],
    calls: Mapping[str, tuple[str, Any]],
    check: Check = claims.check,
) -> dict[str, Share]:
    """Shares per kind, plus "wrong" (the six kinds together) and "inventions"; of
    the product's check, or of another (the tests measure the measure)."""
    outcomes = [judge(case, replies, calls, check) for case in corpus]
    by = {kind: share([o for o in outcomes if o.case.kind == kind]) for kind in KINDS}
    by["wrong"] = share([o for o in outcomes if o.case.kind in WRONG])
    by["inventions"] = share([o for o in outcomes if o.case.kind in INVENTED])
    # right answers: "ungrounded" is a false mark, "unchecked" is the unchecked share
    by[RIGHT] = share([o for o in outcomes if o.case.kind == RIGHT])
    return by


def _pct(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f} %)" if whole else "none"


def table(figures: Mapping[str, Share]) -> str:
    """The Markdown table docs/grounding.md shows."""
    lines = [
        "| answers | marked ungrounded | unchecked only | marked either | check raised |",
        "|---|---|---|---|---|",
    ]
    rows = [*((WRONG[k], k) for k in WRONG), ("all wrong answers", "wrong")]
    rows += [(INVENTED[k], k) for k in INVENTED]
    rows += [("all inventions", "inventions")]
    for label, key in rows:
        s = figures[key]
        lines.append(
            f"| {label} | {_pct(s.ungrounded, s.n)} | {_pct(s.unchecked, s.n)} "
            f"| {_pct(s.marked, s.n)} | {s.errors} |"
        )
    r = figures[RIGHT]
    lines.append(
        f"| right answers (false marks / unchecked) | {_pct(r.ungrounded, r.n)} "
        f"| {_pct(r.unchecked, r.n)} | {_pct(r.marked, r.n)} | {r.errors} |"
    )
    return "\n".join(lines)


def misses(
    corpus: Sequence[Case], replies: Mapping[str, Any], calls: Mapping[str, tuple[str, Any]]
) -> list[str]:
    """One line per case the check got wrong (a wrong answer or invention left
    unmarked, a right answer marked or unchecked) with the claims it read: what to
    look at when a share falls short."""
    lines = []
    for case in corpus:
        outcome = judge(case, replies, calls)
        missed = outcome.ungrounded or outcome.unchecked or bool(outcome.error)
        if case.kind != RIGHT:
            missed = not (outcome.ungrounded or (case.kind in WRONG and outcome.unchecked))
        if missed:
            read = outcome.error or [
                (c.text, c.status)
                for c in claims.check(
                    case.answer, evidence(case, replies, calls), given=case.question
                ).all
            ]
            lines.append(f"{case.kind}: {case.answer!r} <- {case.question!r}: {read}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print the Markdown table")
    parser.add_argument("--live", action="store_true", help="the live cases, on NETBOX_URL")
    parser.add_argument("--misses", action="store_true", help="list the cases the check got wrong")
    args = parser.parse_args(argv)
    corpus, calls, replies = CASES, CALLS, double_replies()
    if args.live:
        corpus, calls, replies = LIVE_CASES, LIVE_CALLS, live_replies()
    if args.misses:
        print("\n".join(misses(corpus, replies, calls)))
    if args.table or not args.misses:
        print(table(measure(corpus, replies, calls)))


if __name__ == "__main__":
    main()
