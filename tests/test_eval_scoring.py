"""The evaluation harness's pure parts: scoring by contradiction, the truth
queries' checks, a user's questions file as untrusted input, the paired
bootstrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from netbox_chat.eval.custom import QuestionsFileError, load_questions
from netbox_chat.eval.report import paired_bootstrap
from netbox_chat.eval.runfolder import RunFolder
from netbox_chat.eval.scoring import score
from netbox_chat.eval.truth import Query, QueryError, take

DEVICES = ["dmi01-akron-sw01", "dmi01-akron-sw02", "dmi01-akron-sw010", "dmi01-akron-rtr01"]


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ("There are 3 devices without a tenant.", True),
        ("**3**", True),
        ("Three of them (out of 12 in total).", True),
        ("I count 3: dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-rtr01.", True),
        ("There are 12 devices.", False),  # the unscoped total
        ("There are none.", False),  # a hallucinated none
        ("I could not find out.", False),
        ("", False),
    ],
)
def test_a_count_is_right_only_when_the_number_stated_is_the_truth(
    answer: str, right: bool
) -> None:
    assert score("count", answer, 3).correct is right


def test_numbers_of_the_question_and_of_names_are_not_a_count() -> None:
    question = "How many devices are in VLAN 100 at site 5?"
    assert score("count", "VLAN 100 at site 5 has 2 devices.", 2, question=question).correct
    assert score("count", "dmi01-akron-sw01 is the only one: 1.", 1).correct
    assert score("count", "10.0.0.1/24 and 2026-01-01 show 0 changes.", 0).correct
    assert score("count", "No devices lack a tenant.", 0).correct


@pytest.mark.parametrize(
    ("answer", "right", "why"),
    [
        ("dmi01-akron-sw01 and dmi01-akron-sw02.", True, "all 2 named"),
        ("- `dmi01-akron-sw02`\n- **dmi01-akron-sw01**", True, "all 2 named"),
        ("Only dmi01-akron-sw01.", False, "misses dmi01-akron-sw02"),
        (
            "dmi01-akron-sw01, dmi01-akron-sw02, dmi01-akron-rtr01",
            False,
            "names dmi01-akron-rtr01, not in the truth",
        ),
        (  # sw010 is another device, not a second mention of sw01
            "dmi01-akron-sw010 and dmi01-akron-sw02",
            False,
            "names dmi01-akron-sw010, not in the truth",
        ),
        ("There are none.", False, "misses dmi01-akron-sw01, dmi01-akron-sw02"),
    ],
)
def test_a_list_is_right_with_every_name_and_no_other(answer: str, right: bool, why: str) -> None:
    verdict = score("list", answer, ["dmi01-akron-sw01", "dmi01-akron-sw02"], DEVICES)
    assert (verdict.correct, verdict.why) == (right, why)


def test_list_precision_and_recall_are_reported() -> None:
    verdict = score("list", "dmi01-akron-sw01, dmi01-akron-rtr01", DEVICES[:2], DEVICES)
    assert (verdict.precision, verdict.recall) == (0.5, 0.5)


def test_a_value_is_right_when_given_and_no_other_is() -> None:
    statuses = ["active", "offline", "planned"]
    assert score("value", "It is *Offline*.", "offline", statuses).correct
    assert not score("value", "It is active.", "offline", statuses).correct
    assert not score("value", "Active, or maybe offline.", "offline", statuses).correct
    assert not score("value", "It has VID 2000.", "200").correct
    assert score("value", "Its VID is 200.", "200").correct


def test_a_boolean_needs_the_verdict_and_every_exception() -> None:
    truth = {"yes": False, "exceptions": ["dmi01-akron-sw02"]}
    assert score("boolean", "No: dmi01-akron-sw02 is offline.", truth, DEVICES).correct
    assert not score("boolean", "No, one is not.", truth, DEVICES).correct
    assert not score("boolean", "Yes, all devices are active.", truth, DEVICES).correct
    assert score("boolean", "Yes, all of them are.", {"yes": True, "exceptions": []}).correct
    yes = {"yes": True, "exceptions": []}
    assert score("boolean", "All devices at DM-Columbus are active.", yes).correct
    assert score("boolean", "Every virtual machine in akron-vmw has a tenant.", yes).correct
    assert not score("boolean", "Not every virtual machine has a tenant.", yes).correct
    assert not score("boolean", "Perhaps.", {"yes": True, "exceptions": []}).correct


def test_absence_and_false_premise_are_right_only_when_they_say_none() -> None:
    assert score("absence", "Tenant Globex has no VLAN 100.", None).correct
    assert score("absence", "VLAN 100 isn't deployed for Globex.", None).correct
    assert not score("absence", "VLAN 100 is deployed at DM-Akron for Globex.", None).correct


def test_explanations_are_left_to_a_judge() -> None:
    assert score("explanation", "It is a switch.", "reference").correct is None


def test_a_query_is_a_netbox_api_path_never_a_url() -> None:
    for path in ("http://evil/api/x", "//evil/dcim", "../etc/passwd", "dcim", "dcim/devices?x=1"):
        with pytest.raises(QueryError):
            Query(path)
    with pytest.raises(QueryError):
        Query("dcim/devices", (("limit", "5"),))  # paging is the harness's own
    with pytest.raises(QueryError):
        Query("dcim/devices", take="eval:__import__")
    with pytest.raises(QueryError):
        Query("dcim/devices/3", take="count")
    assert Query("dcim/devices/3", take="value:site.name").single


def test_take_applies_where_and_reads_choice_fields() -> None:
    rows = [
        {"name": "a", "tenant": None, "status": {"value": "active", "label": "Active"}},
        {"name": "b", "tenant": {"id": 1, "name": "Acme"}, "status": {"value": "offline"}},
    ]
    assert take(Query("dcim/devices", where=(("tenant", None),)), rows) == 1
    assert take(Query("dcim/devices", take="list:name", where=(("!status", "active"),)), rows) == [
        "b"
    ]
    assert take(Query("dcim/devices", take="distinct:tenant.name"), rows) == ["Acme"]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "q.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("question = 1", "expected one or more [[question]] tables"),
        ("[[question]]\ntext = 'x'\nkind = 'count'", "give a query or an expected answer"),
        ("[[question]]\ntext = 'x'\nkind = 'essay'\nexpected = 1", "kind must be"),
        ("[[question]]\ntext = 'x'\nkind = 'count'\nexpected = 'many'", "is not an answer"),
        (
            "[[question]]\ntext = 'x'\nkind = 'count'\nquery = { path = 'https://evil/x' }",
            "is not a NetBox API path",
        ),
        ("[[question]]\ntext = 'x'\nkind = 'count'\nexpected = 1\nrun = 'rm -rf'", "unknown key"),
        ("not = [toml", "is not TOML"),
    ],
)
def test_a_questions_file_is_checked_as_untrusted_input(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(QuestionsFileError, match=message.replace("[", r"\[")):
        load_questions(write(tmp_path, text), None)


def test_typed_answers_need_no_netbox(tmp_path: Path) -> None:
    path = write(tmp_path, "[[question]]\nid = 'a'\ntext = 'How many?'\nkind = 'count'\n"
                 "expected = 4\n")  # fmt: skip
    (question,) = load_questions(path, None)
    assert (question.id, question.expected, question.query) == ("a", 4, None)


def test_paired_bootstrap_calls_only_differences_the_data_can_carry() -> None:
    same = {f"q{i}": [i % 2 == 0] for i in range(40)}
    assert paired_bootstrap(same, same)["call"] == "too small to call"
    better = {f"q{i}": [True] for i in range(40)}
    worse = {f"q{i}": [i % 4 == 0] for i in range(40)}
    result = paired_bootstrap(better, worse)
    assert result["call"] == "A better" and result["low"] > 0
    # 40 questions, A right where B is wrong on 6, B right where A is wrong on 3:
    # 7.5 points apart, which 40 questions cannot tell from chance.
    a = {f"q{i}": [i >= 3] for i in range(40)}
    b = {f"q{i}": [i < 3 or i >= 9] for i in range(40)}
    close = paired_bootstrap(a, b)
    assert close["difference"] == 0.075 and close["call"] == "too small to call"


def test_a_run_folder_reads_back_only_whole_well_formed_results(tmp_path: Path) -> None:
    """A kill -9 can tear the last line; anyone can edit the file."""
    result = {
        "model": "m", "repeat": 0, "question": "q1", "tier": "simple", "kind": "count",
        "domain": "devices", "session": "s1", "status": "done", "tool_calls": [],
        "tokens": {"in": 1, "out": 1}, "score": {"correct": True, "why": "says 1"},
    }  # fmt: skip
    folder = RunFolder(tmp_path)
    folder.append(result)
    folder.append({**result, "question": "q2", "score": {"correct": "yes"}})
    folder.append({**result, "question": "q3", "tier": None})
    with open(tmp_path / "results.jsonl", "a") as handle:
        handle.write('{"model": "m", "repeat": 0, "quest')
    assert folder.results() == [result]
