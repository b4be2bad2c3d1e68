"""The grounding check's pipeline, stage by stage (issue 38): read turns an
answer into facts with spans, index keeps each call's set with its filters
and counts, verify gives each fact a verdict and the call it rests on,
present shows the three verdicts apart. Each stage is pure: tested alone,
then through `check` where the operator sees the difference."""

from __future__ import annotations

from netbox_chat.claims import Call, check
from netbox_chat.claims.index import Index
from netbox_chat.claims.present import MARK, marked, summary_line
from netbox_chat.claims.read import read
from netbox_chat.claims.verify import verify
from tests.doubles.claims_evidence import AKRON, COLUMBUS, DEVICES, INTERFACES, PREFIXES, SITES, VMS

AKRON_CALL = Call("netbox_get_objects", {"object_type": "dcim.device",
                                         "filters": {"site": "dm-akron"}}, DEVICES)  # fmt: skip
PAGE = Call("netbox_get_objects", {"object_type": "dcim.interface", "limit": 3}, INTERFACES)


def _kinds(answer: str, question: str = "") -> list[tuple[str, str]]:
    return [(f.kind, answer[f.start : f.end]) for f in read(answer, question)]


def test_read_gives_typed_facts_with_their_spans() -> None:
    assert ("count", "4") in _kinds("DM-Akron has 4 racks.")
    (count,) = [f for f in read("2 of them are offline.") if f.kind == "count"]
    assert (count.number, count.qualifier) == (2, "offline")
    (page,) = [f for f in read("3 interfaces are shown here.") if f.kind == "count"]
    assert page.page
    (members,) = [f for f in read("The devices are sw01-a and sw02-b.") if f.kind == "members"]
    assert members.members == ("sw01-a", "sw02-b") and not members.narrowed
    (every,) = [f for f in read("No device is offline.") if f.kind == "quantifier"]
    assert (every.every, every.value, every.noun) == (False, "offline", "device")
    # "No," answers the question: what follows is said of the named object, not of a set
    said = read("No, dmi01-akron-sw02 is offline.", "Is dmi01-akron-sw02 active?")
    assert [(f.kind, f.subject) for f in said] == [("yesno", None), ("value", "dmi01-akron-sw02")]
    (yes,) = [f for f in read("Yes, it is.", "Is sw02 offline?") if f.kind == "yesno"]
    assert yes.answer is True
    (value,) = [f for f in read("dmi01-akron-sw02 is offline.") if f.kind == "value"]
    assert (value.subject, value.value) == ("dmi01-akron-sw02", "offline")
    (has,) = [f for f in read("No, Gi0/0/0 has no cable.") if f.kind == "has"]
    assert (has.subject, has.field, has.answer) == ("Gi0/0/0", "cable", False)
    # a list called a sample, or narrowed by a verb, claims nothing of the set
    assert not [f for f in read("Some devices are sw01-a and sw02-b.") if f.kind == "members"]


def test_index_keeps_each_calls_set_with_its_filters_and_count() -> None:
    index = Index.of([AKRON_CALL, PAGE, SITES])
    devices, interfaces, sites = index.sets
    assert (devices.object_type, dict(devices.filters), devices.count) == (
        "dcim.device", {"site": "dm-akron"}, 5,
    )  # fmt: skip
    assert (
        devices.complete
        and not interfaces.complete
        and (interfaces.count, len(interfaces.rows)) == (52, 3)
    )
    assert sites.source == 2 and index.calls[2].name == ""  # a bare payload is a call too


def _verdicts(answer: str, calls: list[object], question: str = "") -> list[tuple[str, str]]:
    index = Index.of(calls)
    return [(v.fact.kind, v.status) for v in verify(read(answer, question), index, question)]


def test_a_count_rests_on_the_sets_count_and_a_page_only_when_said() -> None:
    assert _verdicts("dmi01-akron-sw01 has 52 interfaces.", [PAGE]) == [("count", "verified")]
    # 3 rows of 52 returned: "3 interfaces" is a page counted as the total
    assert _verdicts("dmi01-akron-sw01 has 3 interfaces.", [PAGE]) == [("count", "ungrounded")]
    assert _verdicts("3 interfaces are shown here.", [PAGE]) == [("count", "verified")]
    assert _verdicts("DM-Akron has 2 offline devices.", [AKRON_CALL]) == [("count", "ungrounded")]
    asked = "How many devices at DM-Akron are offline?"
    assert _verdicts("1 device is offline.", [AKRON_CALL], asked) == [("count", "verified")]


def test_members_quantifiers_and_yes_no_are_checked_against_every_record() -> None:
    whole = "The devices at DM-Akron are dmi01-akron-sw01 and dmi01-akron-sw02."
    assert ("members", "ungrounded") in _verdicts(whole, [AKRON_CALL])  # 5 in the set
    assert _verdicts("No device is offline.", [AKRON_CALL]) == [("quantifier", "ungrounded")]
    at_akron = "Is any device at DM-Akron failed?"
    assert _verdicts("No device is failed.", [AKRON_CALL], at_akron) == [
        ("quantifier", "verified"), ("yesno", "verified"),
    ]  # fmt: skip
    # DM-Akron's devices are not every device: no verdict rests on them alone
    assert _verdicts("No device is failed.", [AKRON_CALL]) == [("quantifier", "unchecked")]
    # a page (3 sites of 24) cannot say what every record holds
    assert _verdicts("No site is planned.", [SITES]) == [("quantifier", "unchecked")]
    asked = "Is dmi01-akron-sw02 offline?"
    assert ("yesno", "ungrounded") in _verdicts("No.", [AKRON_CALL], asked)
    assert ("yesno", "verified") in _verdicts("Yes.", [AKRON_CALL], asked)


def test_a_number_said_as_a_field_rests_on_that_field_of_its_own_record() -> None:
    """ "8 vCPUs" of akron-web01 is its `vcpus` (4), not akron-db01's 8 somewhere in
    the reply; an object whose record lacks the field leaves it unchecked."""
    assert _verdicts("akron-db01 has 8 vCPUs.", [VMS]) == [("measure", "verified")]
    assert _verdicts("akron-web01 has 8 vCPUs.", [VMS]) == [("measure", "ungrounded")]
    assert _verdicts("dmi01-akron-sw01 is 8 U tall.", [AKRON_CALL]) == [("measure", "unchecked")]
    (claim,) = [c for c in check("akron-web01 has 8 vCPUs.", [VMS]).all if c.text == "8 vCPUs"]
    assert (claim.kind, claim.status) == ("number", "ungrounded")  # the bare number's verdict
    assert "says 4" in claim.reason
    # "has port 24" names another interface, not the switch's id
    assert not [f for f in read("dmi01-akron-sw01 has port 24.") if f.kind == "measure"]


def test_a_list_narrowed_by_a_word_is_compared_with_the_set_narrowed_so() -> None:
    both = "10.112.0.0/24 and 10.112.128.0/17"
    assert _verdicts(f"The prefixes are {both}.", [PREFIXES]) == [("members", "verified")]
    # one of them is a container: the container prefixes are one, not two
    assert _verdicts(f"The container prefixes are {both}.", [PREFIXES]) == [
        ("members", "ungrounded")
    ]
    # no reply says which prefixes are "core": the list cannot be checked
    assert _verdicts(f"The core prefixes are {both}.", [PREFIXES]) == [("members", "unchecked")]


def test_a_yes_or_no_about_any_object_of_a_set_is_checked_against_its_records() -> None:
    asked = "Is any device at DM-Akron offline?"
    assert _verdicts("Yes.", [AKRON_CALL], asked) == [("yesno", "verified")]
    assert _verdicts("No.", [AKRON_CALL], asked) == [("yesno", "ungrounded")]
    # no record says which devices are routers (roles "Access Switch", "Core Router")
    asked = "Is there a router at DM-Akron?"
    assert _verdicts("No.", [AKRON_CALL], asked) == [("yesno", "unchecked")]
    # a tenant no reply names: the rows cannot say whether one belongs to it
    asked = "Does any device at DM-Akron belong to Initech?"
    assert _verdicts("No.", [AKRON_CALL], asked) == [("yesno", "unchecked")]


def test_a_status_of_a_name_two_records_share_is_the_one_the_sentence_places() -> None:
    mgmt = Call("netbox_get_objects", {"object_type": "ipam.vlan"}, {
        "object_type": "ipam.vlan", "count": 2, "returned": 2, "results": [
            {"id": 1, "vid": 300, "name": "MGMT", "status": "active", "site": AKRON},
            {"id": 2, "vid": 300, "name": "MGMT", "status": "reserved", "site": COLUMBUS},
        ]})  # fmt: skip
    wrong = check("MGMT (300) at DM-Columbus is active.", [mgmt])
    assert [c.text for c in wrong.ungrounded] == ["active"]
    assert not check("MGMT (300) at DM-Columbus is reserved.", [mgmt]).ungrounded


def test_the_three_verdicts_are_told_apart_on_the_screen() -> None:
    answer = "dmi01-akron-sw02 is active. No site is planned."
    grounding = check(answer, [AKRON_CALL, SITES])
    assert [c.text for c in grounding.ungrounded] == ["active"]
    assert grounding.unchecked and all(c.status == "unchecked" for c in grounding.unchecked)
    assert MARK in marked(answer, grounding) and marked(answer, grounding).count(MARK) == 1
    line = summary_line(grounding)
    assert line.startswith("1 not in NetBox's replies: active")
    assert f"{len(grounding.unchecked)} unchecked" in line
    json = grounding.as_json()
    assert set(json) == {"claims", "ungrounded", "without_netbox", "unchecked"}
    assert json["unchecked"] == [c.as_json() for c in grounding.unchecked]


def test_a_value_is_checked_against_its_own_subjects_record_only() -> None:
    # sw01 is active, sw02 offline: "active" said of sw02 is wrong, though sw01 holds it
    grounding = check("dmi01-akron-sw01 and its peer: dmi01-akron-sw02 is active.", [AKRON_CALL])
    assert [(c.text, c.subject) for c in grounding.ungrounded] == [("active", "dmi01-akron-sw02")]


def test_names_from_the_question_are_facts_when_nothing_was_looked_up() -> None:
    grounding = check("Yes, dmi01-akron-sw02 is offline.", [], given="Is dmi01-akron-sw02 offline?")
    assert grounding.without_netbox
    assert summary_line(grounding).startswith("answered without NetBox")


# ------------------------------------------------------------------ issue 38: coverage rules
TENANTS = Call("netbox_get_objects", {"object_type": "tenancy.tenant"}, {
    "count": 2, "results": [{"id": 5, "name": "Dunder-Mifflin, Inc.", "device_count": 3},
                            {"id": 6, "name": "Initech", "device_count": 2}]})  # fmt: skip
ALL_DEVICES = Call("netbox_get_objects", {"object_type": "dcim.device"}, DEVICES)


def test_a_count_of_a_filtered_set_says_its_filter_or_stays_unchecked() -> None:
    # the call fetched DM-Akron's 5 devices: "5 devices in NetBox" is not what it counts
    assert _verdicts("There are 5 devices in NetBox.", [AKRON_CALL]) == [("count", "unchecked")]
    assert _verdicts("DM-Akron has 5 devices.", [AKRON_CALL]) == [("count", "verified")]
    assert _verdicts("There are 5 devices.", [AKRON_CALL], "How many at DM-Akron?") == [
        ("count", "verified")
    ]


def test_a_count_of_a_type_no_reply_holds_is_unchecked_not_verified_by_any_number() -> None:
    # 5 is the devices' count, but no reply holds a set of VLANs
    assert _verdicts("DM-Akron has 5 VLANs.", [AKRON_CALL]) == [("count", "unchecked")]
    assert not check("DM-Akron has 5 VLANs.", [AKRON_CALL]).ungrounded
    # a number no reply holds at all stays not in NetBox
    assert [c.text for c in check("DM-Akron has 37 VLANs.", [AKRON_CALL]).ungrounded] == [
        "37 VLANs"
    ]


def test_a_count_said_of_an_object_rests_on_its_own_count_field() -> None:
    assert _verdicts("Initech has 2 devices.", [TENANTS]) == [("count", "verified")]
    assert _verdicts("Initech has 3 devices.", [TENANTS]) == [("count", "ungrounded")]
    # an abbreviation's dot does not cut the object off its sentence
    assert _verdicts("Dunder-Mifflin, Inc. has 2 devices.", [TENANTS]) == [("count", "ungrounded")]


def test_a_list_of_one_is_checked_against_the_whole_set() -> None:
    (only,) = [f for f in read("The only tenant is Initech.") if f.kind == "members"]
    assert (only.members, only.noun, only.narrowed) == (("Initech",), "tenant", False)
    assert ("members", "ungrounded") in _verdicts("The only tenant is Initech.", [TENANTS])
    one = Call("netbox_get_objects", {"object_type": "tenancy.tenant"},
               {"count": 1, "results": [{"id": 6, "name": "Initech"}]})  # fmt: skip
    assert ("members", "verified") in _verdicts("The only tenant is Initech.", [one])
    feeds = "dmi01-akron-rtr01 runs only Junos."
    assert [f.members for f in read(feeds) if f.kind == "members"] == [("Junos",)]


def test_a_whole_list_of_plain_names_is_a_members_fact() -> None:
    answer = "The tenants are Initech and Globex."
    (listed,) = [f for f in read(answer) if f.kind == "members"]
    assert listed.members == ("Initech", "Globex") and not listed.narrowed


def test_a_field_of_an_object_no_reply_holds_is_unchecked_and_an_empty_one_contradicts() -> None:
    # no reply holds a record of LUM-1001: its commit rate cannot be checked
    assert _verdicts("LUM-1001 has a commit rate of 1000 kbps.", [AKRON_CALL]) == [
        ("field", "unchecked")
    ]
    # dmi01-akron-sw02's record has no tenant: a tenant said of it is contradicted
    said = "dmi01-akron-sw02 has the tenant Dunder-Mifflin."
    assert ("field", "ungrounded") in _verdicts(said, [AKRON_CALL])
    # the field's name is not read as its value ("the route distinguisher 65000:1")
    (field,) = [
        f for f in read("VRF Red has the route distinguisher 65000:1.") if f.kind == "field"
    ]
    assert (field.field, field.value) == ("route distinguisher", "65000:1")
    named = "dmi01-akron-sw01 is named dmi01-akron-sw02."
    assert ("field", "ungrounded") in _verdicts(named, [AKRON_CALL])


def test_a_value_of_an_object_asked_about_but_in_no_reply_is_not_in_netbox() -> None:
    asked = "What is DM-Cleveland's status?"
    grounding = check("DM-Cleveland is decommissioning.", [AKRON_CALL], given=asked)
    assert [c.kind for c in grounding.ungrounded] == ["value"]
    # inside a quantifier the object scopes the set: no value of it is said
    said = "No device at DM-Columbus is offline."
    assert not [f for f in read(said) if f.kind == "value"]


def test_a_changes_user_must_be_one_a_reply_names() -> None:
    log = Call("netbox_get_changelogs", {}, {"count": 1, "results": [
        {"id": 1, "user_name": "dschrute", "object_repr": "DM-Butte"}]})  # fmt: skip
    assert _verdicts("DM-Butte was created by dschrute.", [log]) == [("actor", "verified")]
    assert _verdicts("DM-Butte was created by Michael Scott.", [log]) == [("actor", "ungrounded")]


def test_a_quantifier_over_a_flag_and_a_counterexample_in_a_part_of_the_set() -> None:
    ports = Call(
        "netbox_get_objects",
        {"object_type": "dcim.interface"},
        {
            "count": 2,
            "results": [
                {"id": 1, "name": "eth0", "enabled": True},
                {"id": 2, "name": "eth1", "enabled": False},
            ],
        },
    )
    assert _verdicts("Every interface is enabled.", [ports]) == [("quantifier", "ungrounded")]
    assert _verdicts("No interface is disabled.", [ports]) == [("quantifier", "ungrounded")]
    # DM-Akron's devices are a part of all devices, yet sw02 there refutes "no device is offline"
    assert _verdicts("No device is offline.", [AKRON_CALL]) == [("quantifier", "ungrounded")]


def test_a_table_answering_which_objects_is_the_set() -> None:
    table = "| Device |\n|---|\n| dmi01-akron-sw01 |\n| dmi01-akron-sw02 |"
    asked = "Which devices are at DM-Akron?"
    (listed,) = [f for f in read(table, asked) if f.kind == "members"]
    assert listed.members == ("dmi01-akron-sw01", "dmi01-akron-sw02")
    assert ("members", "ungrounded") in _verdicts(table, [AKRON_CALL], asked)  # 5 in the set


def test_what_an_object_holds_listed_is_all_it_holds() -> None:
    held = "DM-Akron holds dmi01-akron-sw01 and dmi01-akron-sw02."
    assert [f.members for f in read(held) if f.kind == "members"] == [
        ("dmi01-akron-sw01", "dmi01-akron-sw02")
    ]
    assert ("members", "ungrounded") in _verdicts(held, [AKRON_CALL])


def test_a_creation_date_is_a_field_of_the_objects_own_record() -> None:
    site = Call("netbox_get_object_by_id", {"object_type": "dcim.site"},
                {"id": 4, "name": "DM-Butte", "created": "2026-01-06T09:30:00Z"})  # fmt: skip
    assert _verdicts("DM-Butte was created on 2026-01-06.", [site]) == [("field", "verified")]
    assert _verdicts("DM-Butte was created on 2026-01-04.", [site]) == [("field", "ungrounded")]


def test_a_numbered_list_run_into_one_line_is_numbering_not_numbers() -> None:
    vlans = Call(
        "netbox_get_objects",
        {"object_type": "ipam.vlan"},
        {
            "count": 2,
            "results": [
                {"id": 1, "vid": 100, "name": "USERS"},
                {"id": 2, "vid": 200, "name": "VOICE"},
            ],
        },
    )
    grounding = check("1. VLAN 100 (USERS) 2. VLAN 200 (VOICE)", [vlans])
    assert not grounding.ungrounded and "2" not in [c.text for c in grounding.all]
    # and answering "Which VLANs ...?" it is the set: VLAN 300 is left out
    three = Call("netbox_get_objects", {"object_type": "ipam.vlan"}, {"count": 3, "results": [
        {"id": 1, "vid": 100, "name": "USERS"}, {"id": 2, "vid": 200, "name": "VOICE"},
        {"id": 3, "vid": 300, "name": "MGMT"}]})  # fmt: skip
    asked = "Which VLANs are there?"
    assert ("members", "ungrounded") in _verdicts("1. VLAN 100 2. VLAN 200", [three], asked)
    assert ("members", "verified") in _verdicts(
        "1. VLAN 100 2. VLAN 200 3. VLAN 300", [three], asked
    )


def test_a_tools_refusal_grounds_no_number() -> None:
    """NetBox could not be reached: the tool's error names its attempts, and a
    count the model gave anyway rests on nothing NetBox returned."""
    refused = Call(
        "netbox_get_objects",
        {"object_type": "dcim.site"},
        "Error: Cannot reach NetBox at http://127.0.0.1:9 (connection refused after 3 attempts).",
    )
    grounding = check("There are 3 sites.", [refused], given="how many sites?")
    assert [c.text for c in grounding.ungrounded] == ["3 sites"]
