"""eval's scoring on the claims reader (issue 34, item 1): right answers in
any shape score right, wrong ones wrong, non-answers score nothing and are
counted apart, judge replies are read however they are dressed. Every example
the issue names is here."""

from __future__ import annotations

from typing import Any

import pytest

from netbox_chat.claims.grounding import DEVICE_STATUSES
from netbox_chat.eval.questions import TEMPLATES, read_catalog
from netbox_chat.eval.report import constant_floor
from netbox_chat.eval.scoring import Aliases, judge_verdict, score, score_question
from netbox_chat.eval.truth import TruthClient
from tests.conftest import TEST_TOKEN
from tests.doubles.eval_models import GIVE_UPS, built
from tests.doubles.netbox_double import NetBoxDouble

DEVICES = ["dmi01-akron-sw01", "dmi01-akron-sw02", "dmi01-akron-sw010", "dmi01-akron-rtr01"]
TENANTS = ["Dunder-Mifflin, Inc.", "D. S. Weaver Labs", "Initech", "Globex"]
SITES = ["DM-Akron", "DM-Columbus", "MDF", "JBB Branch 104"]
VRFS = ["Shared", "Global", "Admin"]
STATUSES = ["active", "offline", "planned", "staged", "failed"]

Q_COUNT = "How many devices are at site DM-Akron?"
Q_NO_TENANT = "How many devices at site DM-Akron have no tenant assigned?"
Q_OFFLINE = "How many offline devices are at site DM-Akron?"
Q_LIST = "Which devices are in rack R1 at site DM-Akron?"
Q_TENANT = "Which tenant owns site DM-Akron?"
Q_VRF = "Which VRF is prefix 10.1.0.0/16 in?"
Q_SITE = "Which site is rack PP:MDF in?"
Q_STATUS = "What is the status of device dmi01-akron-sw01?"
Q_ALL = "Are all devices at site DM-Akron active? Name any that are not."
Q_ABSENT = "Which tenant has VLAN 999?"

# (kind, question, answer, expected, universe, right)
CASES: list[tuple[str, str, str, Any, list[str], bool]] = [
    # counts: the number bound to the noun, in any shape
    ("count", Q_COUNT, "There are 14 devices at DM-Akron.", 14, [], True),
    ("count", Q_COUNT, "**14**", 14, [], True),
    ("count", Q_COUNT, "Thirty.", 30, [], True),
    ("count", Q_COUNT, "Thirty devices.", 30, [], True),
    ("count", Q_COUNT, "Twenty-one devices are at DM-Akron.", 21, [], True),
    ("count", Q_COUNT, "DM-Akron has three devices.", 3, [], True),
    ("count", Q_COUNT, "1. dmi01-akron-sw01\n2. dmi01-akron-sw02\n3. dmi01-akron-rtr01", 3, [], True),
    ("count", Q_COUNT, "- dmi01-akron-sw01\n- dmi01-akron-sw02", 2, [], True),
    ("count", Q_COUNT, "| Name | Status |\n|---|---|\n| dmi01-akron-sw01 | active |\n"
     "| dmi01-akron-sw02 | offline |", 2, [], True),
    ("count", Q_COUNT, "| Role | Devices |\n|---|---|\n| access | 9 |\n| core | 5 |\n"
     "| **Total** | **14** |", 14, [], True),
    ("count", Q_COUNT, "There are 3 devices (ids 11, 12 and 13).", 3, [], True),
    ("count", Q_COUNT, "3 devices: #11, #12 and #13.", 3, [], True),
    ("count", Q_COUNT, "DM-Akron has 14 devices across 3 racks.", 14, [], True),
    ("count", Q_COUNT, "14 devices: 10 active and 4 offline.", 14, [], True),
    ("count", Q_COUNT, "A total of 1,204 devices.", 1204, [], True),
    ("count", Q_NO_TENANT, "Of the 72 devices, 14 have no tenant.", 14, [], True),
    ("count", Q_NO_TENANT, "14 of them have no tenant (out of 72 in total).", 14, [], True),
    ("count", Q_NO_TENANT, "There are no devices without a tenant.", 0, [], True),
    ("count", Q_NO_TENANT, "None.", 0, [], True),
    ("count", Q_NO_TENANT, "None of them: every device has a tenant.", 0, [], True),
    ("count", Q_OFFLINE, "Two: dmi01-akron-sw02 and dmi01-akron-sw010.", 2, [], True),
    ("count", Q_COUNT, "There are 72 devices.", 14, [], False),  # the unscoped total
    ("count", Q_NO_TENANT, "There are 72 devices.", 14, [], False),
    ("count", Q_COUNT, "4 racks' worth of gear, but only 3 devices.", 4, [], False),
    ("count", Q_COUNT, "Either 4 or 5 devices.", 4, [], False),
    ("count", Q_COUNT, "It's 4 or maybe 5.", 5, [], False),
    ("count", Q_OFFLINE, "4 devices, 2 of them offline.", 4, [], False),
    ("count", Q_COUNT, "There are none.", 3, [], False),
    ("count", Q_COUNT, "Several devices.", 3, [], False),
    # lists: every object of the truth, no other of the asked kind
    ("list", Q_LIST, "dmi01-akron-sw01 and dmi01-akron-sw02.", DEVICES[:2], DEVICES, True),
    ("list", Q_LIST, "- `dmi01-akron-sw02`\n- **dmi01-akron-sw01**", DEVICES[:2], DEVICES, True),
    ("list", Q_LIST, "| Device | Site |\n|---|---|\n| DMI01-AKRON-SW01 | DM-Akron |\n"
     "| dmi01-akron-sw02 | DM-Akron |", DEVICES[:2], DEVICES + SITES, True),
    ("list", Q_LIST, "Both are at DM-Akron: dmi01-akron-sw01, dmi01-akron-sw02.", DEVICES[:2],
     DEVICES, True),  # the site is not an extra device
    ("list", Q_LIST, "dmi01-akron-sw01 and dmi01-akron-sw02, not dmi01-akron-rtr01.", DEVICES[:2],
     DEVICES, True),
    ("list", Q_TENANT, "Dunder-Mifflin, Inc. and D. S. Weaver Labs.", TENANTS[:2], TENANTS, True),
    ("list", Q_TENANT, "dunder-mifflin and d-s-weaver-labs", TENANTS[:2], TENANTS, True),
    ("list", Q_LIST, "Only dmi01-akron-sw01.", DEVICES[:2], DEVICES, False),
    ("list", Q_LIST, "dmi01-akron-sw01, dmi01-akron-sw02, dmi01-akron-rtr01", DEVICES[:2],
     DEVICES, False),
    ("list", Q_LIST, "dmi01-akron-sw010 and dmi01-akron-sw02", DEVICES[:2], DEVICES, False),
    ("list", Q_LIST, "There are none.", DEVICES[:2], DEVICES, False),
    # values: asserted, not negated, no other
    ("value", Q_STATUS, "It is *Offline*.", "offline", STATUSES, True),
    ("value", Q_STATUS, "dmi01-akron-sw01 is offline (it was active until May).", "offline",
     STATUSES, False),
    ("value", Q_STATUS, "Status: **offline**.", "offline", STATUSES, True),
    ("value", Q_STATUS, "dmi01-akron-sw01 is not active.", "active", STATUSES, False),
    ("value", Q_STATUS, "It isn't offline; it is active.", "active", STATUSES, True),
    ("value", Q_STATUS, "Active, or maybe offline.", "offline", STATUSES, False),
    ("value", Q_TENANT, "Dunder-Mifflin, Inc. owns it.", "Dunder-Mifflin, Inc.", TENANTS, True),
    ("value", Q_TENANT, "D. S. Weaver Labs owns DM-Akron.", "D. S. Weaver Labs", TENANTS, True),
    ("value", Q_VRF, "It is in the VRF **Shared**.", "Shared", VRFS, True),
    ("value", Q_VRF, "It is in Global; the shared services use it too.", "Global", VRFS, True),
    ("value", Q_SITE, "Rack PP:MDF is at DM-Akron.", "DM-Akron", SITES, True),
    ("value", Q_SITE, "PP:MDF is in DM-Columbus.", "DM-Akron", SITES, False),
    ("value", "What is the VID of VLAN Data?", "It has VID 2000.", "200", [], False),
    ("value", "What is the VID of VLAN Data?", "Its VID is 200.", "200", [], True),
    # yes or no, and every exception
    ("boolean", Q_ALL, "No: dmi01-akron-sw02 is offline.", {"yes": False,
     "exceptions": ["dmi01-akron-sw02"]}, DEVICES, True),
    ("boolean", Q_ALL, "No. dmi01-akron-sw02 is offline; dmi01-akron-sw01 and dmi01-akron-rtr01 "
     "are active.", {"yes": False, "exceptions": ["dmi01-akron-sw02"]}, DEVICES, True),
    ("boolean", Q_ALL, "Not all: dmi01-akron-sw02 is planned.", {"yes": False,
     "exceptions": ["dmi01-akron-sw02"]}, DEVICES, True),
    ("boolean", Q_ALL, "Yes, all devices at DM-Akron are active.", {"yes": True,
     "exceptions": []}, DEVICES, True),
    ("boolean", Q_ALL, "There are no inactive devices at DM-Akron.", {"yes": True,
     "exceptions": []}, DEVICES, True),
    ("boolean", Q_ALL, "No, one is not.", {"yes": False, "exceptions": ["dmi01-akron-sw02"]},
     DEVICES, False),
    ("boolean", Q_ALL, "No. dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-rtr01 are all "
     "offline.", {"yes": False, "exceptions": ["dmi01-akron-sw02"]}, DEVICES, False),
    ("boolean", Q_ALL, "No: dmi01-akron-sw02 and dmi01-akron-sw010 are offline.", {"yes": False,
     "exceptions": ["dmi01-akron-sw02"]}, DEVICES, False),
    ("boolean", Q_ALL, "Yes, all devices are active.", {"yes": False,
     "exceptions": ["dmi01-akron-sw02"]}, DEVICES, False),
    ("boolean", Q_ALL, "Perhaps.", {"yes": True, "exceptions": []}, DEVICES, False),
    # absence and false premise
    ("absence", Q_ABSENT, "No tenant has VLAN 999.", None, TENANTS, True),
    ("absence", Q_ABSENT, "VLAN 999 isn't assigned to any tenant.", None, TENANTS, True),
    ("absence", Q_ABSENT, "There is no VLAN 999 in NetBox.", None, TENANTS, True),
    ("absence", Q_ABSENT, "I couldn't find any VLAN 999.", None, TENANTS, True),
    ("absence", Q_ABSENT, "Not sure, but VLAN 201 is at JBB Branch 104.", None, TENANTS, False),
    ("absence", Q_ABSENT, "It was not hard to find: VLAN 999 belongs to tenant Initech.", None,
     [], False),
    ("absence", Q_ABSENT, "Tenant Initech has VLAN 999, no doubt about it.", None, [], False),
    ("absence", Q_ABSENT, "Globex. There is no other.", None, TENANTS, False),
]  # fmt: skip


def mistakes_in(
    cases: list[Any], aliases: Aliases | None = None
) -> list[tuple[str, str, bool, str]]:
    """(kind, answer, whether it is right, the scorer's why) of each crafted
    case the scorer gets wrong."""
    mistakes = []
    for kind, question, answer, expected, universe, right in cases:
        verdict = score(kind, answer, expected, universe, question, aliases=aliases)
        if verdict.correct is not right:
            mistakes.append((kind, answer, right, verdict.why))
    return mistakes


def test_the_crafted_set_is_scored_without_one_mistake() -> None:
    assert len(CASES) >= 60
    mistakes = mistakes_in(CASES)
    wrongly_wrong = sum(1 for m in mistakes if m[2])
    assert not mistakes, (
        f"{wrongly_wrong} right answers marked wrong, {len(mistakes) - wrongly_wrong} wrong "
        f"answers marked right, of {len(CASES)}: {mistakes}"
    )


# The shapes of issue 39: a value bound to another object, an echo, a count
# with its total or breakdown, an absence in other words, a name NetBox does not
# hold. (kind, question, answer, expected, universe, noun, aliases, right)
Q_PLATFORM = "Which platform does device dmi01-albany-rtr01 run?"
PLATFORMS = ["Cisco IOS", "Juniper Junos", "Cisco NX-OS"]
Q_STATE = "What is the status of device dmi01-albany-rtr01?"
Q_MDF = "Are all devices at site MDF active? Name any that are not."
Q_VMS = "Does every virtual machine in cluster DO-LON1 have a tenant? Name any that do not."
Q_RD = "What is the route distinguisher of VRF Blue?"
RDS = ["65000:1", "65000:2", "65000:500"]
Q_IOS = "Which devices run platform Cisco IOS?"
NCSU = ["ncsu117-distswitch1", "ncsu117-access1"]
Q_CABLES = "How many cables are there at site MDF?"
SHAPES: list[tuple[str, str, str, Any, list[str], str, Aliases | None, bool]] = [
    ("value", Q_PLATFORM, "PP:B117 runs Cisco IOS.", "Cisco IOS", PLATFORMS, "platform", None, False),
    ("value", Q_PLATFORM, "dmi01-albany-rtr01 runs Cisco IOS.", "Cisco IOS", PLATFORMS, "platform",
     None, True),
    ("value", Q_PLATFORM, "It runs **Cisco IOS**.", "Cisco IOS", PLATFORMS, "platform", None, True),
    ("value", Q_PLATFORM, "The platform of dmi01-albany-rtr01 (site Albany) is Cisco IOS.",
     "Cisco IOS", PLATFORMS, "platform", None, True),
    ("value", Q_STATE, "PP:B117 is active.", "active", list(DEVICE_STATUSES), "status", None, False),
    ("value", Q_STATE, "The status of PP:B117 is active.", "active", list(DEVICE_STATUSES),
     "status", None, False),
    ("value", Q_STATE, "dmi01-albany-rtr01 is active.", "active", list(DEVICE_STATUSES), "status",
     None, True),
    ("value", Q_STATE, "Status: active", "active", list(DEVICE_STATUSES), "status", None, True),
    ("value", Q_STATE, "| Device | Status |\n|---|---|\n| PP:B117 | active |", "active",
     list(DEVICE_STATUSES), "status", None, False),  # a row's cells are its first cell's
    ("value", Q_STATE, "| Device | Status |\n|---|---|\n| dmi01-albany-rtr01 | active |", "active",
     list(DEVICE_STATUSES), "status", None, True),
    ("value", "Which site is rack DM-Akron-R1 in?", "DM-Akron", "DM-Akron", SITES, "site", None,
     True),  # a name the question holds is no echo
    ("value", "What is on the other end of the cable plugged into interface eth0 of device sw01?",
     "It goes to ge-0/0/0, which is on dmi01-akron-rtr01.", "dmi01-akron-rtr01",
     ["dmi01-akron-rtr01", "sw01"], "device", None, True),  # a port on the way, not a subject
    ("value", "Which device or virtual machine has IP address 10.0.0.9/24?",
     "Interface ens3 belongs to vm-web01.", "vm-web01", ["vm-web01", "sw01"], "device", None, True),
    ("boolean", Q_MDF, Q_MDF, {"yes": True, "exceptions": []}, ["dmi01-utica-rtr01"], "devices",
     None, False),  # the question, echoed
    ("boolean", Q_MDF, "None of the devices at MDF are active.", {"yes": True, "exceptions": []},
     ["dmi01-utica-rtr01"], "devices", None, False),  # the status said of the set: no
    ("boolean", Q_MDF, "All devices at MDF are offline.", {"yes": True, "exceptions": []},
     ["dmi01-utica-rtr01"], "devices", None, False),
    ("boolean", Q_MDF, "No device at MDF is offline.", {"yes": True, "exceptions": []},
     ["dmi01-utica-rtr01"], "devices", None, True),
    ("count", Q_NO_TENANT, "14 devices (of 72 in total) have no tenant.", 14, [], "devices", None,
     True),
    ("count", "How many interfaces does device dmi01-x have?",
     "52 in all: 49 copper ports, 2 StackWise ports and 1 LAG.", 52, [], "interfaces", None, True),
    ("count", Q_CABLES, "There are 4 VLANs but not a single cable at site MDF.", 0, [], "cables",
     None, True),
    ("count", Q_CABLES, "4 VLANs but not a single cable.", 0, [], "cables", None, True),
    ("count", Q_CABLES, "4 VLANs but not a single cable.", 4, [], "cables", None, False),
    ("boolean", Q_VMS, "Every VM in DO-LON1 lacks a tenant: vm61, vm62.",
     {"yes": False, "exceptions": ["vm61", "vm62"]}, ["vm61", "vm62", "vm70"], "virtual machines",
     None, True),
    ("boolean", "Are all devices at site Utica active? Name any that are not.",
     "Yes, although dmi01-utica-rtr01 is offline.", {"yes": True, "exceptions": []},
     ["dmi01-utica-rtr01", "dmi01-utica-sw01"], "devices", None, False),
    ("absence", "Which tenants own virtual machines in cluster C1?",
     "The virtual machines in cluster C1 are all untenanted.", None, TENANTS, "tenants", None, True),
    ("value", "Which VRF is prefix 10.0.0.0/24 in?", "It is in the charlie VRF.", "Charlie",
     ["Charlie", "Blue"], "VRF", None, True),
    ("value", "Which site is rack R1 in?", "Rack R1 is in ncsu-065.", "MDF", ["MDF", "Other"],
     "site", {"MDF": ["ncsu-065"]}, True),
    ("list", Q_IOS, "ncsu117-distswitch1 and ncsu117-distswitch2.", NCSU[:1], NCSU, "devices",
     None, False),  # a switch NetBox does not have
    ("list", Q_IOS, "- ncsu117-distswitch1\n- ncsu117-distswitch2", NCSU[:1], NCSU, "devices",
     None, False),
    ("list", Q_IOS, "They are ncsu117-distswitch1 (at site MDF, rack R2) and nothing else.",
     NCSU[:1], NCSU, "devices", None, True),
    ("value", Q_RD, "It is one of: 65000:1, 65000:2, 65000:500", "65000:1", RDS, "route distinguisher", None, False),
    ("value", Q_RD, "either 65000:500 or 65000:1", "65000:1", RDS, "route distinguisher", None, False),
    ("value", Q_RD, "65000:500 and 65000:1", "65000:1", RDS, "route distinguisher", None, False),
    ("value", Q_RD, "The RD of VRF Blue is 65000:1.", "65000:1", RDS, "route distinguisher", None,
     True),
]  # fmt: skip


def test_issue_39_shapes_right_ones_score_full_and_wrong_ones_nothing() -> None:
    mistakes = []
    for kind, question, answer, expected, universe, noun, aliases, right in SHAPES:
        verdict = score(kind, answer, expected, universe, question, noun=noun, aliases=aliases)
        if verdict.correct is not right:
            mistakes.append((answer, right, verdict.why))
    assert not mistakes


def test_a_give_up_in_any_wording_earns_nothing_on_the_built_set_and_is_declined(
    netbox: NetBoxDouble,
) -> None:
    """The give-up floor, measured over 14 wordings on the questions the double
    builds: a give-up deserves nothing, so each scores 0 and is declined on
    every question (an explanation too, where it is declined and unscored)."""
    questions = built(netbox, seed=0, per_template=3)
    assert len(GIVE_UPS) >= 10
    for answer in GIVE_UPS:
        verdicts = [score_question(q, answer) for q in questions]
        assert not any(v.correct for v in verdicts), answer
        assert all(v.declined for v in verdicts), answer
    floor = constant_floor(questions)["answers"]
    assert floor["I don't know."]["right"] == 0


# Other names of an object (a questions file's tables: issue 34 item 1): an
# unnamed device is "Dell R640 (17)", "#17", "id 17" or its slug.
R640 = "Dell R640 (17)"
OTHER = "Dell R640 (18)"
ALIASES = {R640: ["r640-17", "#17"], OTHER: ["r640-18", "#18"]}
RACK = [*DEVICES, R640, OTHER]
EMPTY = {"yes": True, "exceptions": [], "empty": True}
NO_EMPTY = {"yes": False, "exceptions": [], "empty": True}
Q_EMPTY = "Are all devices at site DM-Empty active? Name any that are not."
Q_ANY = "Is any device at site DM-Empty offline?"
Q_HOLDER = "Which device holds IP address 10.0.9.17/24?"
TRUTH = ["dmi01-akron-sw01", R640]

# (kind, question, answer, expected, universe, right)
NAMED_CASES: list[tuple[str, str, str, Any, list[str], bool]] = [
    ("list", Q_LIST, "dmi01-akron-sw01 and the device with id 17.", TRUTH, RACK, True),
    ("list", Q_LIST, "dmi01-akron-sw01 and ID: 17.", TRUTH, RACK, True),
    ("list", Q_LIST, "- dmi01-akron-sw01\n- #17", TRUTH, RACK, True),
    ("list", Q_LIST, "| Device |\n|---|\n| dmi01-akron-sw01 |\n| Dell R640 (17) |", TRUTH, RACK,
     True),
    ("list", Q_LIST, "dmi01-akron-sw01 and `r640-17`.", TRUTH, RACK, True),
    ("list", Q_LIST, "dmi01-akron-sw01 and dell r640 17.", TRUTH, RACK, True),
    ("list", Q_LIST, "dmi01-akron-sw01, #17 and id 18.", TRUTH, RACK, False),
    ("list", Q_LIST, "dmi01-akron-sw01, #17 and r640-18.", TRUTH, RACK, False),
    ("list", Q_LIST, "dmi01-akron-sw01 and 17 others.", TRUTH, RACK, False),  # a number, not an id
    ("list", Q_LIST, "Only dmi01-akron-sw01.", TRUTH, RACK, False),
    ("list", Q_LIST, "dmi01-akron-sw01, not #17.", TRUTH, RACK, False),
    ("value", Q_HOLDER, "It is held by device id 17.", R640, RACK, True),
    ("value", Q_HOLDER, "`r640-17`", R640, RACK, True),
    ("value", Q_HOLDER, "The Dell R640 (17).", R640, RACK, True),
    ("value", Q_HOLDER, "It is id 18.", R640, RACK, False),
    ("value", Q_HOLDER, "Not #17: dmi01-akron-sw01 holds it.", R640, RACK, False),
    ("boolean", Q_ALL, "No: #17 is planned.", {"yes": False, "exceptions": [R640]}, RACK, True),
    ("boolean", Q_ALL, "No, r640-17 is offline.", {"yes": False, "exceptions": [R640]}, RACK,
     True),
    ("boolean", Q_ALL, "No: #18 is planned.", {"yes": False, "exceptions": [R640]}, RACK, False),
    # an empty scope: "none" is right, the yes or no still per the truth
    ("boolean", Q_EMPTY, "There are no devices at DM-Empty.", EMPTY, RACK, True),
    ("boolean", Q_EMPTY, "No, there are no devices at DM-Empty at all.", EMPTY, RACK, True),
    ("boolean", Q_EMPTY, "Yes: DM-Empty has no devices, so none is inactive.", EMPTY, RACK, True),
    ("boolean", Q_EMPTY, "Yes.", EMPTY, RACK, True),
    ("boolean", Q_EMPTY, "No.", EMPTY, RACK, False),
    ("boolean", Q_EMPTY, "Yes, all are active except dmi01-akron-sw02.", EMPTY, RACK, False),
    ("boolean", Q_EMPTY, "Yes, but #17 is offline.", EMPTY, RACK, False),
    ("boolean", Q_EMPTY, "There are none, but dmi01-akron-sw01 is offline.", EMPTY, RACK, False),
    ("boolean", Q_EMPTY, "Perhaps.", EMPTY, RACK, False),
    ("boolean", Q_ANY, "No.", NO_EMPTY, RACK, True),
    ("boolean", Q_ANY, "There are no devices at DM-Empty.", NO_EMPTY, RACK, True),
    ("boolean", Q_ANY, "Yes.", NO_EMPTY, RACK, False),
    ("boolean", Q_ANY, "Yes, dmi01-akron-sw02 is offline.", NO_EMPTY, RACK, False),
    # without the mark, "none" is not an answer to a yes/no question
    ("boolean", Q_ALL, "There are no devices at DM-Akron.", {"yes": True, "exceptions": []},
     RACK, False),
    # a "yes" that names an exception says no
    ("boolean", Q_ALL, "Yes, all are active except dmi01-akron-sw02.", {"yes": True,
     "exceptions": []}, DEVICES, False),
    ("boolean", Q_ALL, "Yes; dmi01-akron-sw02 is not active.", {"yes": True, "exceptions": []},
     DEVICES, False),
    ("boolean", Q_ALL, "Yes: dmi01-akron-sw01 and dmi01-akron-sw02 are active.", {"yes": True,
     "exceptions": []}, DEVICES, True),
]  # fmt: skip


def test_names_by_id_slug_or_display_and_empty_scopes_are_scored_without_one_mistake() -> None:
    assert not mistakes_in(NAMED_CASES, ALIASES)


# A built question's wrong extras (issue 34's last limit): the objects of the
# universe without a name carry their id of one kind, "device #42" (questions.
# unnamed_ids), so an answer adding "#42" or "device id 42" names a wrong
# device; "site id 42", "VLAN 42", "42 devices" or a note on another name do
# not. The truth's own unnamed device keeps its plain "#17" (truth.other_names).
# The truth's devices are ids 12 and 13; unnamed devices 42, 7 and 1 are elsewhere.
Q_OFF = "Which devices at site DM-Akron are offline?"
OFF = ["dmi01-akron-sw02", "dmi01-akron-rtr01"]
UNNAMED = {"Dell R640 (42)": ["device #42"], "Cisco C9300 (7)": ["device #7"],
           "HP DL380 (1)": ["device #1"], R640: ["#17"]}  # fmt: skip
BUILT = [*DEVICES, "Dell R640 (42)", "Cisco C9300 (7)", "HP DL380 (1)", R640]
BOTH = [*OFF, R640]
ALL_UP = {"yes": False, "exceptions": ["dmi01-akron-sw02"]}
Q_NONE = "Which device has IP address 10.9.9.9/24?"
PAIR = "dmi01-akron-sw02 and dmi01-akron-rtr01"

# (kind, question, answer, expected, universe, right)
BUILT_CASES: list[tuple[str, str, str, Any, list[str], bool]] = [
    # an extra unnamed device by its id, in every shape: wrong
    ("list", Q_OFF, f"{PAIR} and #42.", OFF, BUILT, False),
    ("list", Q_OFF, "- dmi01-akron-sw02\n- dmi01-akron-rtr01\n- #42", OFF, BUILT, False),
    ("list", Q_OFF, "1. dmi01-akron-sw02\n2. dmi01-akron-rtr01\n3. id 42 (no name)", OFF, BUILT,
     False),
    ("list", Q_OFF, "| Device | Status |\n|---|---|\n| dmi01-akron-sw02 | offline |\n"
     "| dmi01-akron-rtr01 | offline |\n| #42 | offline |", OFF, BUILT, False),
    ("list", Q_OFF, f"The offline ones are {PAIR}, and the unnamed device with id 42.", OFF,
     BUILT, False),
    ("list", Q_OFF, f"{PAIR} are offline, as is device ID: 42.", OFF, BUILT, False),
    ("list", Q_OFF, f"{PAIR}, plus an unnamed Dell R640 (ID 42).", OFF, BUILT, False),
    ("list", Q_OFF, f"{PAIR}, and the unnamed device (ID 42).", OFF, BUILT, False),
    ("list", Q_OFF, "| ID | Device | Status |\n|---|---|---|\n| 12 | dmi01-akron-sw02 | offline |\n"
     "| 13 | dmi01-akron-rtr01 | offline |\n| 42 | (no name) | offline |", OFF, BUILT, False),
    ("list", Q_OFF, f"{PAIR}, and one more without a name (#7).", OFF, BUILT, False),
    ("list", Q_OFF, f"{PAIR}; also switch #7.", OFF, BUILT, False),
    ("list", Q_OFF, f"Three: {PAIR} and Cisco C9300 (7).", OFF, BUILT, False),
    ("boolean", Q_ALL, "No: dmi01-akron-sw02 is offline, and so is #42.", ALL_UP, BUILT, False),
    ("boolean", Q_ALL, "No. Not active: dmi01-akron-sw02, device id 7.", ALL_UP, BUILT, False),
    ("value", Q_HOLDER, "It is held by device #42.", "dmi01-akron-sw01", BUILT, False),
    ("absence", Q_NONE, "None: device id 42 has it.", None, BUILT, False),
    # the truth's own ids, and numbers that are not an unnamed device's id: right
    ("list", Q_OFF, "dmi01-akron-sw02 (id 12) and dmi01-akron-rtr01 (id 13).", OFF, BUILT, True),
    ("list", Q_OFF, "| ID | Device |\n|---|---|\n| 12 | dmi01-akron-sw02 |\n"
     "| 13 | dmi01-akron-rtr01 |", OFF, BUILT, True),
    ("list", Q_OFF, "| ID | Device |\n|---|---|\n| 1 | dmi01-akron-sw02 |\n"
     "| 7 | dmi01-akron-rtr01 |", OFF, BUILT, True),  # ids of other kinds, each row named
    ("list", Q_OFF, f"{PAIR}, on these VLANs:\n\n| ID | VLAN |\n|---|---|\n| 42 | users |\n"
     "| 7 | voice |", OFF, BUILT, True),
    ("list", Q_OFF, "| Device | Devices in rack |\n|---|---|\n| dmi01-akron-sw02 | 42 |\n"
     "| dmi01-akron-rtr01 | 7 |", OFF, BUILT, True),
    ("list", Q_OFF, "| ID | Device |\n|---|---|\n| 12 | dmi01-akron-sw02 |\n"
     "| 13 | dmi01-akron-rtr01 |\n| 17 | (no name) |", BOTH, BUILT, True),
    ("list", Q_OFF, f"Of the 42 devices at DM-Akron, 2 are offline: {PAIR}.", OFF, BUILT, True),
    ("list", Q_OFF, f"At site DM-Akron (id 42): {PAIR}.", OFF, BUILT, True),
    ("list", Q_OFF, f"Site id 42 has two offline devices, {PAIR}.", OFF, BUILT, True),
    ("list", Q_OFF, f"{PAIR}, both on VLAN 42 (VLAN ID 42).", OFF, BUILT, True),
    ("list", Q_OFF, f"{PAIR}; both in rack #7, tenant id 1.", OFF, BUILT, True),
    ("list", Q_OFF, f"{PAIR} (see change #42, port #7).", OFF, BUILT, True),
    ("list", Q_OFF, "Device 1: dmi01-akron-sw02\nDevice 2: dmi01-akron-rtr01", OFF, BUILT, True),
    ("list", Q_OFF, "- dmi01-akron-sw02 (rack unit 42)\n- dmi01-akron-rtr01 (U7)", OFF, BUILT,
     True),
    ("list", Q_OFF, "dmi01-akron-sw02, dmi01-akron-rtr01 and Dell R640 (id 17).", BOTH, BUILT,
     True),
    ("list", Q_OFF, "- dmi01-akron-sw02\n- dmi01-akron-rtr01\n- #17", BOTH, BUILT, True),
    ("list", Q_OFF, f"{PAIR} and #17, not #42.", BOTH, BUILT, True),
    ("boolean", Q_ALL, "No: dmi01-akron-sw02 (id 12) is offline; checked 42 devices.", ALL_UP,
     BUILT, True),
    ("value", Q_HOLDER, "dmi01-akron-sw01 (id 1), on interface id 42.", "dmi01-akron-sw01",
     BUILT, True),
    ("absence", Q_NONE, "None: no device has it (I checked all 42).", None, BUILT, True),
]  # fmt: skip


def test_an_extra_unnamed_object_named_by_its_id_is_a_wrong_extra() -> None:
    assert not mistakes_in(BUILT_CASES, UNNAMED)


def test_a_wrong_extra_by_id_is_reported_under_the_name_netbox_gives_it() -> None:
    verdict = score("list", f"{PAIR} and #42.", OFF, BUILT, Q_OFF, aliases=UNNAMED)
    assert verdict.why == "names Dell R640 (42), not in the truth"


def test_ids_of_unnamed_extras_do_not_raise_a_constant_answers_credit() -> None:
    """The floor: "I don't know." still declines, and every constant answer
    scores with the ids as it scores without them."""
    for answer in ("I don't know.", "None.", "Yes.", "No.", "0", "42", "#42", "active"):
        for kind, question, expected in (
            ("list", Q_OFF, OFF),
            ("boolean", Q_ALL, ALL_UP),
            ("value", Q_HOLDER, "dmi01-akron-sw01"),
            ("absence", Q_NONE, None),
        ):
            with_ids = score(kind, answer, expected, BUILT, question, aliases=UNNAMED)
            without = score(kind, answer, expected, BUILT, question)
            assert (with_ids.correct, with_ids.declined) == (without.correct, without.declined)
            assert with_ids.correct is (kind == "absence" and answer == "None.")
    assert score("list", "I don't know.", OFF, BUILT, Q_OFF, aliases=UNNAMED).declined


def test_an_id_is_read_only_where_it_is_written_as_one() -> None:
    """A truth that names an object only by id (`#17`, neither name nor
    display) is not named by a bare 17."""
    assert not score("list", "There are 17 of them.", ["#17", "sw01"], [], Q_LIST).correct
    assert score("list", "sw01 and #17.", ["#17", "sw01"], [], Q_LIST).correct


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I do not know the answer to that.",
        "I cannot determine that from NetBox.",
        "I'm sorry, but I can't help with that.",
        "I was unable to find that information.",
        "Could you tell me which site you mean?",
        "",
        *GIVE_UPS,
        "Which tenant has VLAN 999?",  # the question, echoed
    ],
)
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("count", 0),
        ("list", []),
        ("value", "unknown"),
        ("boolean", {"yes": False, "exceptions": []}),
        ("absence", None),
        ("explanation", "a reference"),
    ],
)
def test_a_non_answer_is_wrong_in_every_kind_and_counted_apart(
    answer: str, kind: str, expected: Any
) -> None:
    """Wrong and declined; to an explanation, which only a judge scores, declined
    and unscored (the judge is not asked: a non-answer describes nothing)."""
    verdict = score(kind, answer, expected, ["Initech"], "Which tenant has VLAN 999?")
    assert (verdict.correct, verdict.declined) == (None if kind == "explanation" else False, True)


def test_a_hedge_followed_by_an_answer_is_an_answer() -> None:
    verdict = score("count", "I'm not sure, but I count 14 devices.", 14, [], Q_COUNT)
    assert (verdict.correct, verdict.declined) == (True, False)


def test_constant_answers_earn_credit_only_where_they_are_the_truth() -> None:
    assert not score("count", "None.", 14, [], Q_COUNT).correct
    assert not score("list", "None.", DEVICES[:2], DEVICES, Q_LIST).correct
    assert not score("boolean", "None.", {"yes": True, "exceptions": []}, DEVICES, Q_ALL).correct
    assert not score("value", "None.", "offline", STATUSES, Q_STATUS).correct
    assert not score("absence", "Yes.", None, TENANTS, Q_ABSENT).correct
    assert not score("count", "Yes.", 0, [], Q_NO_TENANT).correct
    assert not score("value", "active", "offline", STATUSES, Q_STATUS).correct
    assert not score("boolean", "Yes.", {"yes": False, "exceptions": ["x"]}, ["x"], Q_ALL).correct
    assert score("boolean", "Yes.", {"yes": True, "exceptions": []}, DEVICES, Q_ALL).correct
    assert score("absence", "None.", None, TENANTS, Q_ABSENT).correct
    assert score("value", "active", "active", STATUSES, Q_STATUS).correct


@pytest.mark.parametrize(
    ("reply", "correct"),
    [
        ("CORRECT", True),
        ("**CORRECT**", True),
        ("Correct.", True),
        ("Verdict: correct", True),
        ("Grade: CORRECT - nothing contradicts the reference.", True),
        ("INCORRECT", False),
        ("**INCORRECT**", False),
        ("WRONG", False),
        ("Wrong: it says 12, the reference says 14.", False),
        ("The answer is not correct.", False),
        ("<think>the answer looks correct at first</think>\nWRONG", False),
        ("The answer says 12 devices while the reference says 14.\n\nVerdict: WRONG", False),
        ("I am not able to grade this.", False),
        ("", False),
    ],
)
def test_every_judge_reply_is_read_and_no_verdict_counts_wrong(reply: str, correct: bool) -> None:
    verdict = judge_verdict(reply)
    assert verdict.correct is correct


def test_every_list_and_value_template_carries_its_wrong_names(netbox: NetBoxDouble) -> None:
    """Every draft of every list and value template has a universe of wrong names
    or values: without one, "it is one of: a, b, c" would score right. The
    double is given a serial, a tag and a custom field so that every template
    draws."""
    core = {"id": 1, "name": "core", "slug": "core"}
    netbox.data["extras/tags"] = [core]
    netbox.data["dcim/devices"] = [
        {**d, "serial": f"FOC{d['id']}", "tags": [core]} for d in netbox.data["dcim/devices"]
    ]
    netbox.data["dcim/sites"] = [
        {**s, "custom_fields": {"owner": f"netops-{s['id']}"}} for s in netbox.data["dcim/sites"]
    ]
    with TruthClient(netbox.url, TEST_TOKEN) as client:
        catalog = read_catalog(client)
    listed = [t for t in TEMPLATES if t.kind in ("list", "value")]
    assert {t.id for t in listed} >= {"vrf-rd", "vlan-vid", "ip-interface"}
    for template in listed:
        drafts = template.drafts(catalog)
        assert drafts, f"{template.id} draws nothing on the double"
        assert all(d.universe for d in drafts), f"{template.id} has an empty universe"
