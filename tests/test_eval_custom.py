"""A user's own questions (`eval --questions FILE`, issue 34 item 1): an
expected object given by its id, slug or display form (a device without a
name), a yes/no question whose scope is empty, the names that count as wrong
shown per question by `--list --json`, the file checked as untrusted input,
and all of it kept through `--resume`. The real CLI, the real agent graph,
the scripted Ollama playing one model per answer shape, the NetBox double."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.eval_models import LOOK
from tests.doubles.netbox_double import ACCESS, NetBoxDouble
from tests.doubles.ollama_server import Reply, ScriptedOllama, Text, by_question
from tests.drive.runner import invoke

pytestmark = pytest.mark.timeout(600)

# Rack R101 holds dmi01-akron-sw01 and a device without a name (NetBox shows
# it as "Dell R640 (17)"); a second unnamed device, id 18, is elsewhere.
MINE = """
[[question]]
id = "rack"
text = "Which devices are in rack R101?"
kind = "list"
expected = ["dmi01-akron-sw01", { display = "Dell R640 (17)", id = 17, slug = "r640-17" }]
universe = ["dmi01-akron-sw02", { display = "Dell R640 (18)", id = 18, slug = "r640-18" }]

[[question]]
id = "empty"
text = "Are all devices at site DM-Empty active? Name any that are not."
kind = "boolean"
expected = { yes = true, empty = true }
universe = ["dmi01-akron-sw01", "dmi01-akron-sw02"]

[[question]]
id = "holder"
text = "Which device holds IP address 10.0.9.17/24?"
kind = "value"
expected = { display = "Dell R640 (17)", id = 17, slug = "r640-17" }
universe = ["dmi01-akron-sw01", { display = "Dell R640 (18)", id = 18 }]
"""
TEXT = {
    qid: line.split('"')[1]
    for qid, line in zip(
        ("rack", "empty", "holder"),
        [line for line in MINE.splitlines() if line.startswith("text")],
        strict=True,
    )
}
# The rack question's other names, as --list --json and the run folder show them.
RACK_ALIASES = {"Dell R640 (17)": ["r640-17", "#17"], "Dell R640 (18)": ["r640-18", "#18"]}
# One model per answer shape: (answer to rack, to empty, to holder), each
# with whether it is right.
SHAPES: dict[str, tuple[tuple[str, bool], tuple[str, bool], tuple[str, bool]]] = {
    "by-id": (
        ("dmi01-akron-sw01 and the device with id 17.", True),
        ("There are no devices at DM-Empty.", True),
        ("It is held by device ID: 17.", True),
    ),
    "by-hash": (
        ("- dmi01-akron-sw01\n- #17", True),
        ("No, there are no devices at DM-Empty at all.", True),
        ("#17", True),
    ),
    "by-display": (
        ("| Device |\n|---|\n| dmi01-akron-sw01 |\n| Dell R640 (17) |", True),
        ("Yes.", True),  # true of nothing: every device there (none) is active
        ("The Dell R640 (17).", True),
    ),
    "by-slug": (
        ("dmi01-akron-sw01 and r640-17 (it has no name).", True),
        ("Yes, all devices at DM-Empty are active.", True),
        ("`r640-17`", True),
    ),
    "wrong-other": (
        ("dmi01-akron-sw01, #17 and r640-18.", False),  # the other unnamed device
        ("Yes, all are active except dmi01-akron-sw02.", False),
        ("It is id 18.", False),
    ),
    "wrong-miss": (
        ("Only dmi01-akron-sw01.", False),
        ("No.", False),
        ("dmi01-akron-sw01 holds it.", False),
    ),
    "wrong-none": (
        ("There are none.", False),
        ("There are none, but dmi01-akron-sw01 is offline.", False),
        ("No device holds it.", False),
    ),
}


# A device without a name in rack R101, as NetBox serves it.
UNNAMED = {
    "id": 7, "name": None, "display": "Cisco C9300 (7)",
    "site": {"id": 1, "slug": "dm-akron", "name": "DM-Akron"},
    "status": {"value": "planned"}, "role": ACCESS, "tenant": None,
    "rack": {"id": 1, "name": "R101"}, "primary_ip4": None,
}  # fmt: skip


@pytest.fixture
def eval_env(chat_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs")}


@pytest.fixture
def shapes(ollama: ScriptedOllama) -> ScriptedOllama:
    ollama.models.update({name: ["completion", "tools"] for name in SHAPES})
    by_text = {text: n for n, text in enumerate(TEXT.values())}

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        return [Text(SHAPES[model][by_text[question]][0])] if after_tool else [LOOK]

    ollama.responder = by_question(reply)
    return ollama


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def listed(env: dict[str, str], path: Path) -> dict[str, Any]:
    args = ["eval", "--list", "--json", "--per-template", "0", "--questions", str(path)]
    result = invoke(args, env=env)
    assert result.exit_code == 0, result.output
    return {q["id"]: q for q in json.loads(result.stdout)["questions"]}


def test_list_json_shows_each_question_s_truth_wrong_names_and_other_names(
    eval_env: dict[str, str], tmp_path: Path
) -> None:
    questions = listed(eval_env, write(tmp_path, MINE))
    rack, empty, holder = questions["rack"], questions["empty"], questions["holder"]
    assert rack["expected"] == ["Dell R640 (17)", "dmi01-akron-sw01"]
    # the names that count as wrong: the other objects of the asked kind
    assert rack["universe"] == ["dmi01-akron-sw02", "Dell R640 (18)"]
    assert rack["aliases"] == RACK_ALIASES
    assert empty["expected"] == {"yes": True, "exceptions": [], "empty": True}
    assert empty["universe"] == ["dmi01-akron-sw01", "dmi01-akron-sw02"]
    assert "aliases" not in empty
    assert holder["expected"] == "Dell R640 (17)"
    assert holder["universe"] == ["dmi01-akron-sw01", "Dell R640 (18)"]
    assert holder["aliases"]["Dell R640 (17)"] == ["r640-17", "#17"]


def test_right_answers_by_id_slug_display_or_none_score_right_and_wrong_ones_wrong_and_resume_keeps_it(
    eval_env: dict[str, str], shapes: ScriptedOllama, tmp_path: Path
) -> None:
    path = write(tmp_path, MINE)
    models = [arg for name in SHAPES for arg in ("-m", name)]
    args = ["eval", "--per-template", "0", "--questions", str(path), *models, "--json"]
    result = invoke(args, env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    scored = {(r["model"], r["question"]): r["score"] for r in report["results"]}
    mistakes = [
        (model, qid, answer, verdict["why"])
        for model, answers in SHAPES.items()
        for qid, (answer, right) in zip(TEXT, answers, strict=True)
        if (verdict := scored[(model, qid)])["correct"] is not right
    ]
    assert not mistakes
    assert scored[("by-id", "empty")]["why"] == (
        "says there is none (nothing is in the question's scope)"
    )
    assert scored[("wrong-other", "rack")]["why"] == "names Dell R640 (18), not in the truth"
    assert scored[("wrong-other", "empty")]["why"] == (
        "names dmi01-akron-sw02 as exceptions, which are not"
    )
    # The report says what the truth of an empty scope is.
    wrong = {(w["model"], w["question"]): w for w in report["wrong"]}
    assert wrong[("wrong-miss", "empty")]["truth"] == "yes (nothing in scope: none is right too)"

    # The run folder keeps the other names and the empty scope: answers
    # asked again on --resume are scored the same.
    run = tmp_path / "runs" / report["run"]
    plan = json.loads((run / "run.json").read_text())
    kept = {q["id"]: q for q in plan["questions"]}
    assert kept["rack"]["aliases"] == RACK_ALIASES
    assert kept["empty"]["expected"]["empty"] is True
    results = run / "results.jsonl"
    lines = results.read_text().splitlines()
    first = [line for line in lines if json.loads(line)["model"] != "by-id"]
    results.write_text("".join(f"{line}\n" for line in first))
    again = invoke(["eval", "--resume", report["run"], "--json"], env=eval_env)
    assert again.exit_code == 0, again.output
    resumed = json.loads(again.stdout)
    assert resumed["models"]["by-id"]["correct"]["right"] == 3
    assert {(r["model"], r["question"]): r["score"] for r in resumed["results"]} == scored
    # A run folder is handed over like any file: other names that are not
    # names are refused in one line.
    kept["rack"]["aliases"] = {"Dell R640 (17)": "#17"}
    (run / "run.json").write_text(json.dumps({**plan, "questions": list(kept.values())}))
    refused = invoke(["eval", "--resume", report["run"]], env=eval_env)
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (
        "netbox-chat: the run's run.json is not a run plan: "
        "a question's aliases are not names and their other names"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            'kind = "list"\nexpected = ["a", { display = "D (17)", id = "17" }]',
            "question 1: expected[2].id must be a NetBox id (a whole number, 1 or more)",
        ),
        (
            'kind = "list"\nexpected = ["a", { display = "D (17)", serial = "X1" }]',
            "question 1: expected[2] is not a name or a table of name, display, slug and id",
        ),
        (
            'kind = "list"\nexpected = ["a"]\nuniverse = [{ display = "B (9)", id = 9 }, '
            '{ display = "C (9)", id = 9 }]',
            "question 1: universe[2]: '#9' already names 'B (9)'",
        ),
        (
            'kind = "boolean"\nexpected = { yes = true, empty = true, exceptions = ["a"] }',
            "question 1: expected.empty: a question with nothing in scope has no exceptions",
        ),
        (
            'kind = "boolean"\nexpected = { yes = true, empty = "yes" }',
            "question 1: expected.empty must be true or false",
        ),
        (
            'kind = "boolean"\nexpected = { yes = true, exeptions = ["a"] }',
            "question 1: expected takes yes, exceptions and empty, not exeptions",
        ),
        (
            'kind = "count"\nexpected = 2\nscope = { path = "dcim/devices" }',
            "question 1: scope is for a yes/no question with a query",
        ),
        (
            'kind = "boolean"\nquery = { path = "dcim/devices", take = "list:name" }\n'
            'scope = { path = "dcim/devices", take = "list:name" }',
            "question 1: scope takes params, path, where",
        ),
        (
            'kind = "boolean"\nquery = { path = "dcim/devices", take = "list:name" }\n'
            'scope = { path = "https://evil/x" }',
            "question 1: scope: ",
        ),
        # past a limit (n04: tomllib recurses once a level, into a RecursionError)
        ('kind = "count"\nexpected = ' + "[" * 5000 + "]" * 5000, "nested deeper than 8 levels"),
        (
            'kind = "count"\nexpected = ' + "{ a = " * 9 + "1" + " }" * 9,
            "nested deeper than 8 levels",
        ),
        ('kind = "count"\nexpected = 1\n# ' + "x" * 1_000_001, "larger than 1,000,000 bytes"),
    ],
)
def test_a_bad_object_or_scope_is_one_line_naming_file_question_and_field_exit_1(
    eval_env: dict[str, str], tmp_path: Path, entry: str, message: str
) -> None:
    path = write(tmp_path, f'[[question]]\ntext = "Which?"\n{entry}\n')
    args = ["eval", "--list", "--per-template", "0", "--questions", str(path)]
    result = invoke(args, env=eval_env)
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert f"{path}: {message}" in line


def test_a_scope_query_marks_an_empty_scope_each_run(
    eval_env: dict[str, str], netbox: NetBoxDouble, tmp_path: Path
) -> None:
    """With a query the truth follows the data, and so does the scope: a
    site with no device is empty, a site with devices is not."""
    netbox.data["dcim/sites"].append({"id": 4, "name": "DM-Empty", "slug": "dm-empty"})
    question = """
[[question]]
id = "site-{site}"
text = "Are all devices at site {site} active? Name any that are not."
kind = "boolean"
query = {{ path = "dcim/devices", params = {{ site_id = {site} }}, take = "list:name", where = {{ "!status" = "active" }} }}
scope = {{ path = "dcim/devices", params = {{ site_id = {site} }} }}
"""
    path = write(tmp_path, question.format(site=4) + question.format(site=1))
    questions = listed(eval_env, path)
    assert questions["site-4"]["expected"] == {"yes": True, "exceptions": [], "empty": True}
    assert questions["site-1"]["expected"] == {"yes": False, "exceptions": ["dmi01-akron-sw02"]}
    assert questions["site-4"]["query"]["text"].startswith("GET /api/dcim/devices/")


def test_a_query_s_unnamed_device_is_named_by_its_id_too(
    eval_env: dict[str, str], netbox: NetBoxDouble, ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """A query's truth names an unnamed device by NetBox's display form; an
    answer that names it by id names it as well, another id does not."""
    netbox.data["dcim/devices"].append(UNNAMED)
    path = write(
        tmp_path,
        '[[question]]\nid = "rack"\ntext = "Which devices are in rack R101?"\nkind = "list"\n'
        'query = { path = "dcim/devices", params = { rack_id = 1 }, take = "list:name" }\n'
        'universe = ["dmi01-akron-rtr01", "dmi01-columbus-sw01"]\n',
    )
    (rack,) = listed(eval_env, path).values()
    assert rack["expected"] == ["Cisco C9300 (7)", "dmi01-akron-sw01", "dmi01-akron-sw02"]
    assert rack["aliases"]["Cisco C9300 (7)"] == ["#7"]
    answers = {
        "by-id": "dmi01-akron-sw01, dmi01-akron-sw02 and the unnamed device, id 7.",
        "by-display": "dmi01-akron-sw01, dmi01-akron-sw02, Cisco C9300 (7)",
        "wrong-other": "dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-columbus-sw01.",
        "wrong-miss": "dmi01-akron-sw01 and dmi01-akron-sw02.",
    }
    ollama.models.update({name: ["completion", "tools"] for name in answers})
    ollama.responder = by_question(
        lambda model, question, after_tool: [Text(answers[model])] if after_tool else [LOOK]
    )
    models = [arg for name in answers for arg in ("-m", name)]
    args = ["eval", "--per-template", "0", "--questions", str(path), *models, "--json"]
    result = invoke(args, env=eval_env)
    assert result.exit_code == 0, result.output
    correct = {r["model"]: r["score"]["correct"] for r in json.loads(result.stdout)["results"]}
    assert correct == {"by-id": True, "by-display": True, "wrong-other": False, "wrong-miss": False}


def test_built_questions_name_an_unnamed_device_by_its_id_too_and_a_named_one_not(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """The same other names reach the built questions: "#7" for the device
    without a name, no id for a named object (ids repeat across object
    types: "rack id 1" is not site #1)."""
    netbox.data["dcim/devices"].append(UNNAMED)
    result = invoke(["eval", "--list", "--json", "--per-template", "20"], env=eval_env)
    assert result.exit_code == 0, result.output
    questions = {q["id"]: q for q in json.loads(result.stdout)["questions"]}
    assert questions["rack-devices:1"]["aliases"] == {"Cisco C9300 (7)": ["#7"]}
    assert questions["site-all-active:1"]["aliases"] == {"Cisco C9300 (7)": ["#7"]}
    assert questions["rack-site:1"]["aliases"] == {"DM-Akron": ["dm-akron"]}


def test_a_file_written_before_these_fields_lists_as_it_did(
    eval_env: dict[str, str], tmp_path: Path
) -> None:
    old = write(
        tmp_path,
        '[[question]]\nid = "v"\ntext = "What is the status of dmi01-akron-sw02?"\n'
        'kind = "value"\nexpected = "offline"\nuniverse = ["active", "offline", "planned"]\n\n'
        '[[question]]\nid = "b"\ntext = "Are all devices at DM-Akron active?"\n'
        'kind = "boolean"\nexpected = { yes = false, exceptions = ["dmi01-akron-sw02"] }\n'
        'universe = ["dmi01-akron-sw01", "dmi01-akron-sw02"]\n\n'
        '[[question]]\nid = "a"\ntext = "Which tenant has VLAN 999?"\nkind = "absence"\n'
        'expected = "none"\n',
    )
    questions = listed(eval_env, old)
    assert {qid: q["expected"] for qid, q in questions.items()} == {
        "v": "offline",
        "b": {"yes": False, "exceptions": ["dmi01-akron-sw02"]},
        "a": None,
    }
    assert not any("aliases" in q for q in questions.values())
    assert questions["b"]["universe"] == ["dmi01-akron-sw01", "dmi01-akron-sw02"]


def test_an_endless_questions_file_is_read_no_further_than_the_limit(
    eval_env: dict[str, str],
) -> None:
    args = ["eval", "--list", "--per-template", "0", "--questions", "/dev/zero"]
    result = invoke(args, env=eval_env)
    assert result.exit_code == 1, result.output
    assert (
        result.stderr.strip() == "netbox-chat: /dev/zero: larger than 1,000,000 bytes (the limit)"
    )


def test_brackets_in_strings_comments_and_headers_do_not_count_as_depth(
    eval_env: dict[str, str], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        '[[question]]\ntext = "Which [[[[[[[[[[ ]]]]]]]]]] devices?"  # [[[[[[[[[[\n'
        'kind = "list"\nexpected = [\n  "a",\n  { display = "b [[[[[[[[[[", id = 2 },\n]\n',
    )
    assert listed(eval_env, path)["custom:1"]["expected"] == ["a", "b [[[[[[[[[["]
