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
from tests.doubles.claims_evidence import DEVICES, INTERFACES, SITES

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
    assert _verdicts("1 device is offline.", [AKRON_CALL]) == [("count", "verified")]


def test_members_quantifiers_and_yes_no_are_checked_against_every_record() -> None:
    whole = "The devices at DM-Akron are dmi01-akron-sw01 and dmi01-akron-sw02."
    assert ("members", "ungrounded") in _verdicts(whole, [AKRON_CALL])  # 5 in the set
    assert _verdicts("No device is offline.", [AKRON_CALL]) == [("quantifier", "ungrounded")]
    assert _verdicts("No device is failed.", [AKRON_CALL]) == [("quantifier", "verified")]
    # a page (3 sites of 24) cannot say what every record holds
    assert _verdicts("No site is planned.", [SITES]) == [("quantifier", "unchecked")]
    asked = "Is dmi01-akron-sw02 offline?"
    assert ("yesno", "ungrounded") in _verdicts("No.", [AKRON_CALL], asked)
    assert ("yesno", "verified") in _verdicts("Yes.", [AKRON_CALL], asked)


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
