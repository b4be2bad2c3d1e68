"""The grounding check on crafted answers: made-up answers in the forms real
models were recorded inventing are flagged, right answers in every shape are
not (issue 33's thresholds: at least 95 % and at most 2 %)."""

from __future__ import annotations

import pytest

from netbox_chat.claims import Claim, check
from tests.doubles.claims_evidence import DEVICES, EMPTY, EVIDENCE, SITES, VLANS, VMS

# (answer, the kind of the invented claim): every kind of claim, every shape.
MADE_UP = [
    # a device name that is not in the result, beside real ones
    ("dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-sw03 are at DM-Akron.", "name"),
    ("- dmi01-akron-sw01\n- dmi01-akron-sw04\n- dmi01-akron-rtr01", "name"),
    ("| Device | Status |\n|---|---|\n| dmi01-akron-sw01 | active |\n| dmi01-akron-fw01 | active |",
     "name"),
    ("1. dmi01-akron-rtr01\n2. dmi01-akron-rtr02", "name"),
    ("The router is **dmi01-akron-rtr02**.", "name"),
    ("akron-web02 runs in cluster akron-vmw.", "name"),
    ("The VMs are akron-web01, akron-db01 and akron-app01.", "name"),
    ("Tenant Initech owns VLAN 999.", "name"),
    ("It belongs to tenant Globex.", "name"),
    ("The site JBB Branch 105 is planned.", "name"),
    ("dmi01-columbus-sw01 is the only switch at DM-Columbus.", "name"),
    ("The device with ID 4711 is the core router.", "name"),
    ("VLAN 300 is the voice VLAN at DM-Akron.", "name"),
    ("VLAN 5 carries the data traffic.", "name"),  # the id taken for the VID
    ("Its interface is TenGigabitEthernet1/1/1.", "name"),
    ("The device type of dmi01-akron-sw01 is Catalyst 9500-48Y4C.", "name"),
    # a count taken from the page, or just made up (a count of a set: its `count` decides)
    ("There are 17 devices at DM-Akron.", "count"),
    ("DM-Akron has 12 devices.", "count"),
    ("I found 7 virtual machines in akron-vmw.", "count"),
    ("There are **41** sites.", "count"),
    ("dmi01-akron-sw01 has 48 interfaces.", "count"),
    ("Total: 9 devices.", "count"),
    ("Eleven devices are offline.", "count"),
    ("akron-db01 has 16 vCPUs.", "number"),
    ("akron-web01 has 16384 MB of memory.", "number"),
    ("Prefix 10.112.0.0/24 is 7.7 % utilised.", "number"),
    ("| Site | Devices |\n|---|---|\n| DM-Akron | 5 |\n| DM-Columbus | 14 |", "number"),
    ("The MTU of GigabitEthernet1/0/1 is 9000.", "number"),
    # addresses and prefixes
    ("dmi01-akron-sw01's primary IP is 10.112.0.12/24.", "address"),
    ("The rtr01 loopback is 10.255.0.1.", "address"),
    ("The Akron prefix is 10.113.0.0/24.", "address"),
    ("akron-web01 answers on 192.168.10.5.", "address"),
    ("Its IPv6 address is 2001:db8::11/64.", "address"),
    ("- 10.112.0.0/24\n- 10.112.1.0/24", "address"),
    # a real object given a wrong value
    ("dmi01-akron-sw01 is offline.", "value"),
    ("dmi01-akron-sw02 is active.", "value"),
    ("dmi01-akron-sw01 is at DM-Columbus.", "value"),
    ("| Name | Status |\n|---|---|\n| dmi01-akron-pdu01 | active |", "value"),
    ("- dmi01-akron-rtr01 (offline)", "value"),
    ("akron-test01 is active in akron-vmw.", "value"),
    ("VLAN Quarantine (999) is active.", "value"),
    ("DM-Columbus is planned.", "value"),
    ("dmi01-akron-rtr01 has the role Access Switch.", "value"),
    ("| Name | Tenant |\n|---|---|\n| dmi01-akron-sw02 | Dunder-Mifflin, Inc. |", "value"),
    ("The cluster akron-esx has 3 VMs.", "name"),
    ("dmi01-akron-sw01 is in rack R12.", "name"),
    ("Devices:\n- dmi01-akron-sw01 (active)\n- dmi01-akron-sw02 (active)", "value"),
]  # fmt: skip

# Facts stated with no tool call at all: flagged as answered without NetBox.
WITHOUT_NETBOX = [
    "There are 12 devices at DM-Akron.",
    "dmi01-akron-sw01 is active.",
    "The prefix 10.0.0.0/8 is in VRF Shared.",
    "There are no offline devices.",
]

RIGHT = [
    # prose
    "There are 5 devices at DM-Akron.",
    "DM-Akron has five devices.",
    "dmi01-akron-sw01 is active.",
    "dmi01-akron-sw02 is offline.",
    "dmi01-akron-pdu01 is planned; the others are active.",
    "dmi01-akron-sw02 is not active: it is offline.",
    "The router at DM-Akron is dmi01-akron-rtr01, a Catalyst? No: an ISR 4331.",
    "dmi01-akron-sw01 belongs to Dunder-Mifflin, Inc. and sits at DM-Akron.",
    "Two devices belong to Dunder-Mifflin: dmi01-akron-sw01 and dmi01-akron-rtr01.",
    "Three devices have no tenant.",
    "3 of them have no tenant.",
    "Of the 5 devices, 3 are active.",
    "One device is offline: dmi01-akron-sw02.",
    "NetBox has 24 sites; the first page shows DM-Akron, DM-Columbus and JBB Branch 104.",
    "JBB Branch 104 is planned and belongs to Jimbob's Banking.",
    "VLAN 100 (Data) and VLAN 200 (Voice) are active at DM-Akron.",
    "VLAN 999 is reserved for Dunder-Mifflin, Inc.",
    "Prefix 10.112.0.0/24 is in VRF Shared and carries VLAN Data.",
    "The primary IP of dmi01-akron-sw01 is 10.112.0.11/24.",
    "10.112.0.11 is on Vlan100 of dmi01-akron-sw01.",
    "10.112.0.11/24 resolves to sw01.akron.example.com.",
    "akron-web01 has 4 vCPUs and 8192 MB of memory.",
    "akron-db01 runs in akron-vmw with 8 vCPUs.",
    "akron-test01 is offline; akron-web01 and akron-db01 are active.",
    "dmi01-akron-sw01 has 52 interfaces; GigabitEthernet1/0/2 is disabled.",
    "GigabitEthernet1/0/1 has an MTU of 1500 and is untagged in VLAN 100.",
    "GigabitEthernet1/0/24 on dmi01-akron-sw01 has cable #5.",
    "The serial of dmi01-akron-sw02 is FOC2231X0AC.",
    "dmi01-akron-sw010 is an access switch (Catalyst 9300).",
    "There are no devices matching that filter.",
    "There are none: NetBox returned no devices.",
    "No devices are offline at DM-Columbus.",
    # another case, slugs
    "DMI01-AKRON-SW01 is active.",
    "dm-akron has 5 devices.",
    "The tenant is dunder-mifflin.",
    "Site dm-columbus is active.",
    "Devices at dm akron: DMI01-akron-sw02 (offline).",
    "jbb-branch-104 is a planned site.",
    "The switch **dmi01-akron-sw01** (ID 11) is *active*, a Catalyst 9300 with serial "
    "FOC2231X0AB, primary IP 10.112.0.11/24.",
    "Two devices have no tenant at DM-Akron... wait, three: dmi01-akron-sw02, dmi01-akron-pdu01 "
    "and dmi01-akron-sw010.",
    # lists
    "- dmi01-akron-sw01\n- dmi01-akron-sw02\n- dmi01-akron-rtr01",
    "Devices at DM-Akron:\n\n- **dmi01-akron-sw01** — active\n- **dmi01-akron-sw02** — offline",
    "1. dmi01-akron-sw01 (active)\n2. dmi01-akron-sw02 (offline)\n3. dmi01-akron-rtr01 (active)",
    "The 3 virtual machines in akron-vmw:\n1. akron-web01\n2. akron-db01\n3. akron-test01",
    "* `akron-web01` — 4 vCPUs\n* `akron-db01` — 8 vCPUs\n* `akron-test01` — 2 vCPUs",
    "Sites:\n- DM-Akron (active)\n- DM-Columbus (active)\n- JBB Branch 104 (planned)",
    "- VLAN 100: Data\n- VLAN 200: Voice\n- VLAN 999: Quarantine (reserved)",
    "Two devices have no tenant besides the PDU:\n- dmi01-akron-sw02\n- dmi01-akron-sw010",
    "Virtual machines in **akron-vmw** (3 total):\n\n- akron-web01 — active, 4 vCPUs, 8 GB\n"
    "- akron-db01 — active, 8 vCPUs, 32 GB\n- akron-test01 — offline, 2 vCPUs, 4 GB",
    # tables
    "## Devices at DM-Akron\n\nNetBox returned **5 devices** for site DM-Akron:\n\n"
    "| # | Name | Role | Status |\n|---|---|---|---|\n| 1 | dmi01-akron-sw01 | Access Switch | "
    "Active |\n| 2 | dmi01-akron-sw02 | Access Switch | Offline |\n| 3 | dmi01-akron-rtr01 | "
    "Core Router | Active |\n\n**Note:** 1 device is offline.",
    "| Name | Status | Role |\n|---|---|---|\n| dmi01-akron-sw01 | Active | Access Switch |\n"
    "| dmi01-akron-rtr01 | Active | Core Router |",
    "| Device | Site | Tenant |\n|---|---|---|\n| dmi01-akron-sw01 | DM-Akron | Dunder-Mifflin |\n"
    "| dmi01-akron-sw02 | DM-Akron | — |",
    "| VM | vCPUs | Memory (MB) |\n|---|---|---|\n| akron-web01 | 4 | 8192 |\n"
    "| akron-db01 | 8 | 32768 |\n| akron-test01 | 2 | 4096 |",
    "| VID | Name | Status |\n|---|---|---|\n| 100 | Data | active |\n| 200 | Voice | active |\n"
    "| 999 | Quarantine | reserved |",
    "| Status | Devices |\n|---|---|\n| active | 3 |\n| offline | 1 |\n| planned | 1 |\n"
    "| **Total** | **5** |",
    # numbers that are not NetBox claims
    "In turn 2 I listed the devices: dmi01-akron-sw01 is still active.",
    "No changes in the last 24 hours on dmi01-akron-sw01.",
    "Port 24 of dmi01-akron-sw01 is GigabitEthernet1/0/24.",
    "Step 1: I looked up DM-Akron. Step 2: I listed its 5 devices.",
    "NetBox 4.2 shows dmi01-akron-rtr01 as active.",
    "The first 3 of 24 sites are DM-Akron, DM-Columbus and JBB Branch 104.",
    "Interfaces 1 to 3 of 52 on dmi01-akron-sw01 are shown; 49 more are on the next pages.",
    "Here is the answer for 2026-12-04 at 10:30: dmi01-akron-sw01 is active.",
    # the tools' own words, years, pages
    "I called netbox_get_objects for dcim.device; the `primary_ip` field of dmi01-akron-sw02 "
    "is empty.",
    "Showing 5 of 5 devices at DM-Akron (as of 2026).",
    "**Summary**\n\n### Devices\n\n- dmi01-akron-sw01: Catalyst 9300, serial FOC2231X0AB",
    "NetBox lists 52 interfaces on dmi01-akron-sw01; I fetched the first 3.",
    # no claims at all
    "I don't know.",
    "Which site do you mean?",
    "Hello! Ask me about your NetBox.",
]


def _flagged(answer: str, evidence: list[object]) -> bool:
    grounding = check(answer, evidence)
    return bool(grounding.ungrounded) or grounding.without_netbox


def test_made_up_answers_of_every_kind_are_flagged() -> None:
    assert len(MADE_UP) >= 40
    kinds = {kind for _, kind in MADE_UP}
    assert kinds == {"name", "number", "count", "address", "value"}
    missed = []
    for answer, kind in MADE_UP:
        found = {c.kind for c in check(answer, EVIDENCE).ungrounded}
        if kind not in found:
            missed.append((answer, kind, found))
    for answer in WITHOUT_NETBOX:
        if not check(answer, []).without_netbox:
            missed.append((answer, "without netbox", set()))
    total = len(MADE_UP) + len(WITHOUT_NETBOX)
    rate = 1 - len(missed) / total
    assert rate >= 0.95, f"flagged {rate:.1%} of {total}; missed: {missed}"


def test_right_answers_in_every_shape_are_not_flagged() -> None:
    assert len(RIGHT) >= 60
    flagged = [
        (answer, [c.text for c in check(answer, EVIDENCE).ungrounded])
        for answer in RIGHT
        if _flagged(answer, EVIDENCE)
    ]
    rate = len(flagged) / len(RIGHT)
    assert rate <= 0.02, f"flagged {rate:.1%} of {len(RIGHT)} right answers: {flagged}"


def test_the_verdict_carries_what_the_operator_sees() -> None:
    grounding = check("dmi01-akron-sw01, dmi01-akron-sw03 and 17 devices in all.", [DEVICES])
    assert [c.as_json() for c in grounding.ungrounded] == [
        {"text": "dmi01-akron-sw03", "kind": "name"},
        {"text": "17 devices", "kind": "number"},
    ]
    assert grounding.as_json() == {
        "claims": 3,
        "ungrounded": [
            {"text": "dmi01-akron-sw03", "kind": "name"},
            {"text": "17 devices", "kind": "number"},
        ],
        "without_netbox": False,
        "unchecked": [],
    }
    assert Claim("x", "name").as_json() == {"text": "x", "kind": "name"}


def test_each_grounded_claim_names_the_result_it_rests_on() -> None:
    grounding = check(
        "dmi01-akron-sw01 is at DM-Akron; VLAN 999 is reserved.", [SITES, DEVICES, VLANS]
    )
    sources = {c.text: c.source for c in grounding.all if c.status != "ungrounded"}
    assert sources["dmi01-akron-sw01"] == 1
    assert sources["VLAN 999"] == 2
    assert grounding.quiet


def test_a_count_equal_to_a_results_count_or_the_listed_objects_is_verified() -> None:
    by_count = check("akron-vmw runs 3 virtual machines.", [VMS])
    assert [(c.status, c.reason) for c in by_count.all if c.kind == "count"] == [
        ("verified", "NetBox counts 3")
    ]
    listed = check("Two of them: akron-web01 and akron-db01.", [VMS, {"count": 40}])
    assert listed.quiet


def test_none_after_an_empty_result_is_grounded_and_with_no_call_it_is_not() -> None:
    assert check("There are no devices at JBB Branch 104.", [EMPTY, SITES]).quiet
    alone = check("There are no devices at JBB Branch 104.", [])
    assert alone.without_netbox and alone.claims >= 1


def test_the_operator_own_words_are_not_claims() -> None:
    answer = "There is no device named foo99 in NetBox."
    assert check(answer, [EMPTY], given="Does device foo99 exist?").quiet
    assert check("Device bar42 exists.", [EMPTY]).ungrounded


def test_a_non_answer_states_nothing() -> None:
    for answer in ("I don't know.", "I cannot determine that.", "Could you say which site?"):
        grounding = check(answer, [])
        assert (grounding.claims, grounding.without_netbox) == (0, False)


@pytest.mark.parametrize("payload", ["Error: NetBox said 400", "not json at all", 42, None])
def test_any_payload_is_read_without_failing(payload: object) -> None:
    grounding = check("dmi01-akron-sw01 is active.", [payload])
    assert [c.text for c in grounding.ungrounded] == ["dmi01-akron-sw01"]


@pytest.mark.parametrize(
    ("text", "none"),
    [
        ("There are none.", True),
        ("No tenant has VLAN 999.", True),
        ("VLAN 999 isn't assigned to any tenant.", True),
        ("VLAN 999 does not exist in NetBox.", True),
        ("I couldn't find any VLAN 999.", True),
        ("It was not hard to find: VLAN 999 belongs to tenant Initech.", False),
        ("Tenant Initech has VLAN 999, no doubt about it.", False),
        ("Not sure, but VLAN 201 is at JBB Branch 104.", False),
        ("No.", False),
    ],
)
def test_says_none_reads_existence_not_any_negation_word(text: str, none: bool) -> None:
    from netbox_chat.claims.reader import says_none

    assert says_none(text) is none


@pytest.mark.parametrize(
    ("token", "name"),
    [
        ("dmi01-akron-sw03", True), ("R04", True), ("DM-Columbus", True), ("PP:MDF", False),
        ("read-only", False), ("IPv4", False), ("24h", False), ("4.7.3", False), ("2nd", False),
        ("10GB", False), ("netbox_get_objects", False), ("dcim.device", False),
        ("primary_ip", False), ("10.0.0.1/24", False),
    ],
)  # fmt: skip
def test_only_what_can_only_be_a_name_is_read_as_one(token: str, name: bool) -> None:
    from netbox_chat.claims.reader import identifier_like

    assert identifier_like(token) is name


def test_a_number_carries_what_it_counts() -> None:
    from netbox_chat.claims.reader import numbers, shape

    (whole, part) = numbers("Of the 72 devices, 14 have no tenant.")
    assert (whole.value, whole.context, part.value, part.subcount) == (72, True, 14, True)
    (word,) = numbers("DM-Akron has twenty-one active devices.")
    assert (word.value, word.noun, word.word) == (21, "device", True)
    text = "1. sw01\n2. In turn 2, the last 24 hours, 3 ms, NetBox 4.2."
    assert numbers(text, skip=shape(text).numbering) == []


def test_the_operator_sees_marks_and_one_line_naming_them() -> None:
    from netbox_chat.claims.present import marked, summary_line

    answer = "Devices: dmi01-akron-sw01, dmi01-akron-sw03 and 17 devices in all."
    grounding = check(answer, [DEVICES])
    assert marked(answer, grounding) == (
        "Devices: dmi01-akron-sw01, dmi01-akron-sw03\u2020 and 17 devices\u2020 in all."
    )
    assert summary_line(grounding) == "2 not in NetBox's replies: dmi01-akron-sw03, 17 devices"
    assert summary_line(check("There are 3 devices at DM-Akron.", [])) == (
        "answered without NetBox: 2 facts and no tool call"
    )
    quiet = check("dmi01-akron-sw01 is active.", [DEVICES])
    assert summary_line(quiet) == "" and marked("x", quiet) == "x"
