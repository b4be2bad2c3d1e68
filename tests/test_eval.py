"""`netbox-chat eval` end to end: the real CLI, the real agent graph and tools,
the scripted Ollama playing three models over HTTP, the NetBox double as the
NetBox both the harness and the agent read.

- "oracle" answers every question with its truth, phrased several ways: the
  report must say 100 %.
- "flawed" answers each question wrong in one known way (the unscoped total,
  a missing list item, an extra name, a wrong value, a hallucinated "none", a
  confident answer to a false premise): each must be scored wrong, with why.
- "slow" stops mid-run: Ctrl-C and kill -9 keep every finished result, and
  `--resume RUN` finishes the run.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.eval.questions import question_from_json
from netbox_chat.eval.report import constant_floor
from netbox_chat.eval.scoring import score_question
from tests.doubles.eval_models import LOOK, MODELS, built, personas, wrong_answer
from tests.doubles.netbox_double import ACCESS as ACCESS_ROLE
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import (
    Delay,
    Reply,
    ScriptedOllama,
    Stall,
    Text,
    ToolCall,
    by_question,
)
from tests.drive.process import start
from tests.drive.runner import invoke

# A run builds a new agent per question (about 1-2 s each on a busy two-core
# machine, bench/bench_eval.py); the full two-model run asks 72 questions.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def eval_env(chat_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs")}


@pytest.fixture
def models(ollama: ScriptedOllama) -> ScriptedOllama:
    ollama.models.update(MODELS)
    return ollama


def test_list_json_prints_questions_with_truth_and_source_and_calls_no_model(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama
) -> None:
    result = invoke(["eval", "--list", "--json", "--seed", "3"], env=eval_env)
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["questions"]
    assert models.requests == []
    assert [q["id"] for q in listed] == [q.id for q in built(netbox, seed=3, per_template=3)]
    domains = {q["domain"] for q in listed}
    assert domains >= {
        "devices", "sites", "racks", "interfaces", "cables", "prefixes", "ip-addresses",
        "vlans", "vrfs", "tenants", "circuits", "virtual-machines", "power", "changelog",
    }  # fmt: skip
    assert {q["tier"] for q in listed} == {"simple", "medium", "advanced"}
    assert {q["kind"] for q in listed} == {
        "count", "list", "value", "boolean", "absence", "explanation"
    }  # fmt: skip
    traps = {q["trap"] for q in listed}
    assert {"scoped-count", "false-premise", "absence"} <= traps
    untenanted = next(q for q in listed if q["id"] == "untenanted-devices:all")
    devices = netbox.data["dcim/devices"]
    assert untenanted["expected"] == sum(1 for d in devices if not d.get("tenant"))
    assert untenanted["unscoped"] == len(devices) != untenanted["expected"]
    assert untenanted["query"]["text"] == "GET /api/dcim/devices/ | where tenant = empty | count"
    # Another seed draws other objects; the same seed the same ones.
    again = invoke(["eval", "--list", "--json", "--seed", "3"], env=eval_env)
    other = invoke(["eval", "--list", "--json", "--seed", "4"], env=eval_env)
    assert json.loads(again.stdout)["questions"] == listed
    assert json.loads(other.stdout)["questions"] != listed


@pytest.mark.long
def test_oracle_scores_100_and_flawed_scores_0_each_for_its_known_failure(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    questions = built(netbox, seed=7, per_template=1)
    models.responder = personas(questions)
    args = ["eval", "--seed", "7", "--per-template", "1", "-m", "oracle", "-m", "flawed"]
    result = invoke([*args, "--judge", "oracle", "--json"], env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    oracle, flawed = report["models"]["oracle"], report["models"]["flawed"]
    assert oracle["correct"] == {
        "right": len(questions), "scored": len(questions), "asked": len(questions), "rate": 1.0
    }  # fmt: skip
    assert flawed["correct"]["right"] == 0 and flawed["correct"]["scored"] == len(questions)
    why = {r["question"]: r["score"]["why"] for r in report["results"] if r["model"] == "flawed"}
    failures = {q.id: wrong_answer(q, i)[1] for i, q in enumerate(questions)}
    assert set(failures.values()) >= {
        "unscoped total", "missing item", "extra name", "wrong value", "hallucinated none",
        "confident answer to a false premise", "wrong number", "wrong verdict",
    }  # fmt: skip
    for qid, failure in failures.items():
        if failure == "unscoped total":
            q = next(q for q in questions if q.id == qid)
            assert why[qid] == f"says {q.unscoped}, the truth is {q.expected}"
        elif failure == "extra name":
            assert "not in the truth" in why[qid]
        elif failure == "missing item":
            assert why[qid].startswith("misses ")
        elif failure == "confident answer to a false premise":
            assert why[qid] == "answers as if there were one"
    # Each result carries what the turn cost, as `ask --json` reports it.
    first = report["results"][0]
    assert len(first["tool_calls"]) == 1 and first["tool_calls"][0]["name"] == LOOK.name
    assert first["tokens"]["in"] > 0 and first["tokens"]["out"] > 0
    assert first["seconds"] > 0 and first["first_token_seconds"] is not None
    assert oracle["tool_calls"]["median"] == 1 and oracle["tool_calls"]["over_budget"] == 0
    assert oracle["failed_turns"] == 0 and oracle["truncated"] == 0
    (comparison,) = report["comparisons"]
    assert comparison["a"] == "oracle" and comparison["call"] == "A better"
    assert comparison["difference"] == 1.0
    # Every transcript is a session of the run's own folder.
    run = tmp_path / "runs" / report["run"]
    sessions = {r["session"] for r in report["results"]}
    assert len(sessions) == 2 * len(questions)
    assert {p.stem for p in (run / "sessions").glob("*.sqlite")} == sessions
    exported = invoke(
        ["export", first["session"], "--sessions-dir", str(run / "sessions")], env=eval_env
    )
    assert exported.exit_code == 0 and first["answer"] in exported.stdout
    assert (run / "report.md").read_text().startswith(f"# netbox-chat eval, run {report['run']}")


QUESTIONS_TOML = """
[[question]]
id = "sites"
text = "How many sites are there?"
kind = "count"
query = { path = "dcim/sites", take = "count" }

[[question]]
id = "akron-devices"
text = "Which devices are at DM-Akron?"
kind = "list"
tier = "medium"
domain = "devices"
query = { path = "dcim/devices", params = { site_id = 1 }, take = "list:name" }

[[question]]
id = "slow-one"
text = "What is the status of dmi01-akron-sw02?"
kind = "value"
expected = "offline"

[[question]]
id = "tenants"
text = "How many tenants are there?"
kind = "count"
expected = 2
"""
TEXTS = [line.split('"')[1] for line in QUESTIONS_TOML.splitlines() if line.startswith("text")]
# Each question's right answer, as a model would word it.
ANSWERS = dict(
    zip(
        TEXTS,
        [
            "There are 3 sites.",
            "dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-rtr01.",
            "It is offline.",
            "Two.",
        ],
        strict=True,
    )
)


def answers_right(model: str, question: str, after_tool: bool) -> Reply:
    """Every model answers QUESTIONS_TOML's questions right, after one tool call."""
    return [Text(ANSWERS[question])] if after_tool else [LOOK]


def test_markdown_report_says_when_a_difference_is_too_small_to_call(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    """Two models that answer alike cannot be told apart: the report says so.
    Four questions of one's own prove it as well as the 36 built ones would
    (the bootstrap of a difference that is zero on every question straddles
    zero at any size) for a ninth of the turns."""
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)
    models.responder = by_question(answers_right)
    args = ["eval", "--per-template", "0", "--questions", str(path), "-m", "oracle", "-m", "twin"]
    result = invoke([*args, "--conversation"], env=eval_env)
    assert result.exit_code == 0, result.output
    assert "all in one session" in result.stdout
    assert "| oracle | twin |" in result.stdout and "too small to call" in result.stdout


def start_eval(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return start(env, "eval", "--json", *args)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_a_run_stopped_mid_question_keeps_its_results_and_resume_finishes_it(
    stop: signal.Signals,
    eval_env: dict[str, str],
    netbox: NetBoxDouble,
    models: ScriptedOllama,
    tmp_path: Path,
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if after_tool and question == TEXTS[2] and model == "slow":
            return [Delay(60.0), Text(ANSWERS[question])]
        return answers_right(model, question, after_tool)

    models.responder = by_question(reply)
    run = start_eval(eval_env, "-m", "slow", "--per-template", "0", "--questions", str(path))
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 60
    # Two answers written, the third question's turn under way:
    while time.monotonic() < deadline:
        results = list(runs.glob("*/results.jsonl"))
        if (
            results
            and len(results[0].read_text().splitlines()) == 2
            and any(TEXTS[2] in json.dumps(body["messages"]) for body in models.requests)
        ):
            break
        assert run.poll() is None, run.communicate()
        time.sleep(0.05)
    else:
        raise AssertionError("the run never reached its third question")
    models.wait_for_requests(len(models.requests))
    time.sleep(0.3)
    run.send_signal(stop)
    out, err = run.communicate(timeout=60)
    (folder,) = runs.iterdir()
    kept = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert [r["question"] for r in kept] == ["sites", "akron-devices"]
    assert all(r["score"]["correct"] for r in kept)
    if stop == signal.SIGINT:
        assert run.returncode == 130, err
        report = json.loads(out)
        assert report["finished"] == 2 and report["complete"] is False
        assert f"--resume {folder.name}" in err
        # The cancelled question's session was rolled back and not kept.
        assert len(list((folder / "sessions").glob("*.sqlite"))) == 2
    else:
        assert run.returncode == -signal.SIGKILL

    models.responder = by_question(answers_right)
    resumed = invoke(["eval", "--resume", folder.name, "--json"], env=eval_env)
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["complete"] is True and report["models"]["slow"]["correct"]["rate"] == 1.0
    by_id = {r["question"]: r for r in report["results"]}
    assert [by_id[r["question"]]["session"] for r in kept] == [r["session"] for r in kept]
    # One session per answer: the interrupted one (rolled back, or left by the
    # kill) is gone, so `ls` of the run shows no dead session.
    assert {p.stem for p in (folder / "sessions").glob("*.sqlite")} == {
        r["session"] for r in report["results"]
    }


def test_a_question_past_the_deadline_fails_alone_and_the_run_goes_on(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    """Issue 32, item 3: a server that says it is working for ever holds one
    question to its deadline (--deadline), not the whole run."""
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if after_tool and question == TEXTS[1]:
            return [Stall()]
        return answers_right(model, question, after_tool)

    models.responder = by_question(reply)
    models.running = list(models.models)  # /api/ps: loaded, reading the prompt
    started = time.monotonic()
    args = ["eval", "-m", "slow", "--per-template", "0", "--questions", str(path), "--json"]
    result = invoke([*args, "--deadline", "3"], env=eval_env)
    assert time.monotonic() - started < 30, result.output
    report = json.loads(result.stdout)
    assert report["complete"] is True
    by_question_id = {r["question"]: r for r in report["results"]}
    assert by_question_id["akron-devices"]["score"]["correct"] is False
    assert by_question_id["akron-devices"]["score"]["why"] == (
        "the turn failed: the turn did not finish within its deadline of 3 s "
        "(--deadline): the model server kept the answer waiting; check the "
        "server, or raise it"
    )
    assert sum(r["score"]["correct"] for r in report["results"]) == len(report["results"]) - 1


@pytest.mark.model_servers("ollama", "vllm")
def test_a_model_the_server_does_not_have_stops_the_run_before_the_first_question(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    """`eval -m nosuch:1b` once ran every question, reported 0 % (0/36) with
    `None s` and exited 0: now one line, exit 1, nothing asked or built."""
    started = time.monotonic()
    result = invoke(["eval", "-m", "nosuch:1b"], env=eval_env)
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "nosuch:1b" in line
    assert result.stdout == ""
    assert time.monotonic() - started < 10
    assert models.requests == [] and netbox.requests == []
    assert not (tmp_path / "runs").exists()  # no run folder to --resume


def test_a_model_server_that_is_down_stops_the_run_with_one_line(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    env = {**eval_env, "OLLAMA_HOST": "http://127.0.0.1:9"}  # nothing listens there
    result = invoke(["eval", "-m", "qwen3:8b"], env=env)
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "cannot reach Ollama at http://127.0.0.1:9" in line
    assert netbox.requests == []


def test_a_judge_the_server_does_not_have_stops_the_run_too(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama
) -> None:
    result = invoke(["eval", "-m", "oracle", "--judge", "nosuch:1b"], env=eval_env)
    assert result.exit_code == 1, result.output
    assert "nosuch:1b" in result.stderr and models.requests == []


def describe_run(runs: Path, netbox: NetBoxDouble, model: str, judge: str) -> Path:
    """A run folder with one explanation question left to ask (explanations come
    only from the built templates, so the plan is written as a run would)."""
    reference = "dmi01-akron-sw01 is at site DM-Akron, has role Access Switch and status active."
    run = runs / "20260101-120000"
    run.mkdir(parents=True)
    question = {
        "id": "describe", "text": "Describe device dmi01-akron-sw01.", "tier": "advanced",
        "kind": "explanation", "domain": "devices", "expected": reference, "query": None,
        "trap": None, "source": "built", "universe": [], "reference": reference,
    }  # fmt: skip
    plan = {
        "models": [model], "seed": 0, "repeat": 1, "conversation": False, "judge": judge,
        "netbox_url": netbox.url, "questions": [question],
    }  # fmt: skip
    (run / "run.json").write_text(json.dumps(plan))
    return run


@pytest.mark.model_servers("vllm")
def test_the_judge_asks_the_runs_own_provider_and_server(
    eval_env: dict[str, str], netbox: NetBoxDouble, ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """With provider openai the judge's prompt (question, NetBox's reference,
    the answer) goes to the configured OpenAI-compatible server, never to
    Ollama at OLLAMA_HOST."""
    model = next(iter(ollama.models))

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if question.startswith("You grade an answer"):
            return [Text("CORRECT")]
        return [Text("It is an active access switch at DM-Akron.")] if after_tool else [LOOK]

    ollama.responder = by_question(reply)
    with ScriptedOllama() as elsewhere:
        env = {**eval_env, "OLLAMA_HOST": elsewhere.url}
        run = describe_run(tmp_path / "runs", netbox, model, model)
        result = invoke(["eval", "--resume", run.name, "--json"], env=env)
        assert result.exit_code == 0, result.output
        assert elsewhere.requests == []
    (answer,) = json.loads(result.stdout)["results"]
    assert answer["score"]["correct"] is True and answer["score"]["why"] == "judge: correct"
    assert any("You grade an answer" in json.dumps(body) for body in ollama.requests)


def test_a_judge_reply_without_a_verdict_is_wrong_not_left_out(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    """A judge that rambles leaves no verdict: the answer counts as wrong, in
    the denominator, and the report says why."""

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if question.startswith("You grade an answer"):
            return [Text("Hmm, hard to say; it depends on what you mean.")]
        return [Text("It is an active access switch at DM-Akron.")] if after_tool else [LOOK]

    models.responder = by_question(reply)
    run = describe_run(tmp_path / "runs", netbox, "oracle", "twin")
    result = invoke(["eval", "--resume", run.name, "--json"], env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (answer,) = report["results"]
    assert answer["score"]["correct"] is False
    assert report["models"]["oracle"]["correct"]["scored"] == 1
    assert report["models"]["oracle"]["correct"]["rate"] == 0.0


def listed(env: dict[str, str], *args: str) -> dict[str, Any]:
    result = invoke(["eval", "--list", "--json", *args], env=env)
    assert result.exit_code == 0, result.output
    return {q["id"]: q for q in json.loads(result.stdout)["questions"]}


def test_unnamed_objects_count_in_every_truth_by_their_display_form(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """A device need not have a name (22 of the public demo's 72 have none):
    it counts in lists and yes/no exceptions under NetBox's display form, and
    a wrong answer naming it is recognised as naming a device."""
    unnamed = {
        "id": 7, "name": None, "display": "Cisco C9300 (7)",
        "site": {"id": 1, "slug": "dm-akron", "name": "DM-Akron"},
        "status": {"value": "planned"}, "role": ACCESS_ROLE, "tenant": None,
        "rack": {"id": 1, "name": "R101"}, "primary_ip4": None,
    }  # fmt: skip
    netbox.data["dcim/devices"].append(unnamed)
    questions = listed(eval_env, "--per-template", "20")
    akron = questions["site-all-active:1"]
    assert akron["expected"] == {
        "yes": False,
        "exceptions": ["Cisco C9300 (7)", "dmi01-akron-sw02"],
    }
    assert "Cisco C9300 (7)" in questions["rack-devices:1"]["expected"]
    assert "Cisco C9300 (7)" in questions["no-primary-ip:1"]["expected"]
    assert questions["site-devices:1"]["expected"] == 4
    # the names that count as wrong, shown per question, hold it too
    assert "Cisco C9300 (7)" in questions["rack-devices:2"]["universe"]
    assert questions["rack-devices:2"]["noun"] == "devices"


def _unnamed(oid: int, rack: dict[str, Any]) -> dict[str, Any]:
    """A device without a name, as NetBox 4.7 lists one."""
    return {
        "id": oid, "name": None, "display": f"Cisco C9300 ({oid})",
        "site": {"id": 1, "slug": "dm-akron", "name": "DM-Akron"},
        "status": {"value": "planned"}, "role": ACCESS_ROLE, "tenant": None,
        "rack": rack, "primary_ip4": None,
    }  # fmt: skip


def test_an_unnamed_device_elsewhere_named_by_its_id_is_a_wrong_extra(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """Issue 34's last limit: a built question's wrong extras carry an unnamed
    device's id, so a list of rack R201's devices that adds "#7" (a device in
    rack R101) is wrong, as naming another device is; the truth's own ids, the
    site's id and a count that equals 7 are not extras."""
    netbox.data["dcim/devices"].append(_unnamed(7, {"id": 1, "name": "R101"}))
    questions = listed(eval_env, "--per-template", "20")
    r201 = questions["rack-devices:2"]
    assert r201["expected"] == ["dmi01-columbus-sw01"]
    assert r201["aliases"] == {"Cisco C9300 (7)": ["device #7"]}  # shown with --list --json
    elsewhere = question_from_json(r201)
    for wrong in (
        "dmi01-columbus-sw01 and #7.",
        "- dmi01-columbus-sw01\n- device id 7",
        "| Device |\n|---|\n| dmi01-columbus-sw01 |\n| id 7 (unnamed) |",
    ):
        assert score_question(elsewhere, wrong).why == "names Cisco C9300 (7), not in the truth"
    for right in (
        "dmi01-columbus-sw01 (id 4).",
        "Rack R201 at DM-Columbus (id 7) holds one device: dmi01-columbus-sw01.",
        "Of the 7 devices I checked, only dmi01-columbus-sw01 is in rack R201.",
        "Just dmi01-columbus-sw01, on VLAN ID 7.",
    ):
        assert score_question(elsewhere, right).correct, right
    # in its own rack the unnamed device is the truth: its id names it there
    r101 = question_from_json(questions["rack-devices:1"])
    assert r101.aliases["Cisco C9300 (7)"] == ("#7",)
    assert score_question(r101, "dmi01-akron-sw01, dmi01-akron-sw02 and #7.").correct


def test_the_ids_of_unnamed_extras_leave_the_floor_where_it_was(netbox: NetBoxDouble) -> None:
    """A constant answer ("None.", "Yes.", "0", "I don't know.") scores the same
    with the wrong extras' ids as without them: the floor does not rise."""
    netbox.data["dcim/devices"] += [
        _unnamed(7, {"id": 1, "name": "R101"}),
        _unnamed(8, {"id": 2, "name": "R201"}),
    ]
    questions = built(netbox, seed=7, per_template=3)
    typed = [q for q in questions if "device #7" in str(q.aliases)]
    assert typed
    untyped = [
        replace(q, aliases={n: f for n, f in q.aliases.items() if " #" not in str(f)})
        for q in questions
    ]
    floor = constant_floor(questions)
    assert floor == constant_floor(untyped)
    assert floor["answers"]["I don't know."]["right"] == 0


def test_no_yes_no_question_is_asked_over_an_empty_scope(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """ "Are all devices at a site with none active?" has two right answers
    ("yes", "there are none"): such a question is not drawn."""
    netbox.data["dcim/sites"].append({"id": 4, "name": "DM-Empty", "slug": "dm-empty"})
    questions = listed(eval_env, "--per-template", "20")
    assert "site-all-active:1" in questions and "site-devices:4" in questions
    assert "site-all-active:4" not in questions


def test_json_output_escapes_control_characters_from_a_questions_file_and_a_model(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    """U+202E (right-to-left override) and U+009B (C1 CSI) from a questions
    file or an answer reach stdout as JSON escapes, the same document to a
    parser (as `ask --json` does)."""
    text = "How many sites are there? \u202eevif\u202c \u009b2J"
    path = tmp_path / "mine.toml"
    path.write_text(
        '[[question]]\ntext = "How many sites are there? \\u202eevif\\u202c \\u009b2J"\n'
        'kind = "count"\nexpected = 3\n'
    )
    models.responder = by_question(
        lambda model, question, after_tool: (
            [Text("There are 3 \u009b2J\u202e.")] if after_tool else [LOOK]
        )
    )
    base = ["eval", "--per-template", "0", "--questions", str(path), "--json"]
    for args in ([*base, "--list"], [*base, "-m", "oracle"]):
        result = invoke(args, env=eval_env)
        assert result.exit_code == 0, result.output
        assert "\u202e" not in result.stdout and "\u009b" not in result.stdout
        assert "\\u202e" in result.stdout and "\\u009b" in result.stdout
        document = json.loads(result.stdout)
        if "--list" in args:
            assert document["questions"][0]["text"] == text
        else:
            assert document["results"][0]["answer"] == "There are 3 \u009b2J\u202e."


def test_repeat_reports_pass_k_beside_the_mean_and_the_report_lists_wrong_answers_with_why(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    """A model right on three questions every time and on the fourth only on
    its first try has a mean of 7/8 but a pass^2 of 3/4; the wrong answer is
    listed with its question, truth, what was said and why; piped, the report
    is plain Markdown and stderr ends with a one-line summary."""
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)
    asked: dict[str, int] = {}

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if not after_tool:
            return [LOOK]
        asked[question] = asked.get(question, 0) + 1
        if question == TEXTS[0] and asked[question] == 2:
            return [Text("There are 4 sites.")]
        return [Text(ANSWERS[question])]

    models.responder = by_question(reply)
    args = ["eval", "--per-template", "0", "--questions", str(path), "-m", "oracle"]
    result = invoke([*args, "--repeat", "2"], env=eval_env)
    assert result.exit_code == 0, result.output
    assert "\n| oracle | 88 % (7/8) |" in result.stdout
    header = next(
        line for line in result.stdout.splitlines() if line.startswith("| model | correct")
    )
    row = next(line for line in result.stdout.splitlines() if line.startswith("| oracle | 88 %"))
    cells = dict(zip(header.split(" | "), row.split(" | "), strict=True))
    assert cells["pass^k"] == "75 % (3/4)" and cells["declined"] == "0"
    wrong = result.stdout.split("## Wrong answers")[1]
    assert "| oracle | How many sites are there? | 3 | There are 4 sites. | says 4" in wrong
    assert result.stderr.splitlines()[-1].startswith("netbox-chat: run ")
    assert "oracle 88 % (7/8)" in result.stderr.splitlines()[-1]
    report = json.loads((next((tmp_path / "runs").iterdir()) / "report.json").read_text())
    assert report["models"]["oracle"]["pass_k"] == {
        "k": 2, "questions": 4, "right_every_time": 3, "rate": 0.75
    }  # fmt: skip
    (listed_wrong,) = report["wrong"]
    assert listed_wrong["truth"] == "3" and listed_wrong["said"] == "There are 4 sites."


@pytest.mark.long
def test_the_report_shows_what_a_constant_answer_would_score_and_results_by_template(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama
) -> None:
    """The floor: what "None.", "Yes.", a number... would score on this very
    question set, so a score is read against it; and each template's own
    rate, its near-duplicates together."""
    questions = built(netbox, seed=7, per_template=2)
    models.responder = personas(questions)
    args = ["eval", "--seed", "7", "--per-template", "2", "-m", "oracle", "--json"]
    result = invoke(args, env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    floor = report["floor"]["answers"]
    assert set(floor) >= {"I don't know.", "None.", "Yes.", "0", "active"}
    scorable = [q for q in questions if q.kind != "explanation"]
    absences = sum(1 for q in scorable if q.kind == "absence")
    assert floor["None."]["scored"] == len(scorable)
    assert floor["None."]["right"] >= absences > 0  # "None." is right where none is the truth
    highest = report["floor"]["highest"]
    assert floor[highest]["right"] == max(f["right"] for f in floor.values())
    templates = {q.template for q in questions}
    assert report["templates"] == len(templates)
    by_template = report["models"]["oracle"]["by_template"]
    assert set(by_template) == templates
    twice = [t for t in templates if sum(q.template == t for q in questions) == 2]
    assert twice and all(by_template[t]["asked"] == 2 for t in twice)
    assert {r["template"] for r in report["results"]} == templates


def test_the_report_is_drawn_as_markdown_in_a_terminal(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    import pexpect

    from tests.drive.screen import on_screen

    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)
    models.responder = by_question(answers_right)
    child, terminal = on_screen(
        {**eval_env, "TERM": "xterm"},
        *("eval", "--per-template", "0", "--questions", str(path), "-m", "oracle"),
        columns=160,
        lines=60,
    )
    child.expect(pexpect.EOF, timeout=120)
    shown = "\n".join(terminal.lines())
    assert "netbox-chat eval, run" in shown and "# netbox-chat" not in shown
    assert "|---" not in shown and "100 % (4/4)" in shown
    assert ": oracle 100 % (4/4)" not in shown  # the one-line summary: for a redirected stdout


def test_a_non_answer_earns_nothing_on_the_floor(netbox: NetBoxDouble) -> None:
    floor = constant_floor(built(netbox, seed=7, per_template=3))["answers"]
    assert floor["I don't know."]["right"] == 0


def test_templates_for_what_operators_ask_most_with_their_traps(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """Which device or VM holds an address (the trap: one on a VM), which
    interface, an address assigned to nothing (a false premise), a serial, a
    tag, a custom field, a prefix's addresses in its own VRF."""
    blue = {"id": 1, "name": "Blue", "slug": "blue"}
    sw01 = {"id": 1, "name": "dmi01-akron-sw01"}

    def ip(oid: int, address: str, vrf: Any, kind: str | None, held: Any) -> dict[str, Any]:
        return {
            "id": oid, "address": address, "vrf": vrf, "status": {"value": "active"},
            "assigned_object_type": kind, "assigned_object_id": None if held is None else oid,
            "assigned_object": held,
        }  # fmt: skip

    netbox.data["ipam/ip-addresses"] = [
        ip(1, "10.0.0.1/24", blue, "dcim.interface", {"id": 1, "name": "eth0", "device": sw01}),
        ip(2, "10.0.0.9/24", blue, "virtualization.vminterface",
           {"id": 5, "name": "ens3", "virtual_machine": {"id": 1, "name": "vm-web01"}}),
        ip(3, "10.0.0.250/24", blue, None, None),
        ip(4, "10.0.0.77/24", None, None, None),  # the global table: not in Blue's prefix
        ip(5, "10.1.0.1/24", None, "dcim.interface",
           {"id": 3, "name": "ge-0/0/0", "device": {"id": 3, "name": "dmi01-akron-rtr01"}}),
    ]  # fmt: skip
    core = {"id": 1, "name": "core", "slug": "core"}
    netbox.data["extras/tags"] = [core, {"id": 2, "name": "spare", "slug": "spare"}]
    netbox.data["dcim/devices"] = [
        {**d, "serial": f"FOC000{d['id']}A", "tags": [core] if d["id"] in (1, 3) else []}
        for d in netbox.data["dcim/devices"]
    ]
    netbox.data["dcim/sites"] = [
        {**s, "custom_fields": {"site_owner": f"netops-{s['id']}", "support_tier": s["id"],
                                "internal_note": None}}
        for s in netbox.data["dcim/sites"]
    ]  # fmt: skip
    questions = listed(eval_env, "--per-template", "20")

    def expected(qid: str) -> Any:
        return questions[qid]["expected"]

    assert expected("ip-holder:1") == "dmi01-akron-sw01"
    assert expected("ip-holder:2") == "vm-web01"
    assert {"vm-web01", "dmi01-akron-sw01"} <= set(questions["ip-holder:1"]["universe"])
    assert expected("ip-interface:1") == "eth0" and expected("ip-interface:5") == "ge-0/0/0"
    assert questions["ip-unassigned:3"]["kind"] == "absence"
    assert questions["ip-unassigned:3"]["text"] == "Which device has IP address 10.0.0.250/24?"
    assert "ip-unassigned:1" not in questions and "ip-holder:3" not in questions
    assert expected("device-serial:4") == "FOC0004A"
    assert expected("tag-devices:1") == ["dmi01-akron-rtr01", "dmi01-akron-sw01"]
    assert questions["tag-devices:2"]["kind"] == "absence"  # a tag no device carries
    assert expected("site-custom-field:2-site_owner") == "netops-2"
    assert expected("site-custom-field:3-support_tier") == "3"
    assert "site-custom-field:1-internal_note" not in questions
    assert expected("prefix-addresses:1") == 3  # .1, .9, .250 in Blue; not .77 (global)
    assert expected("prefix-addresses:2") == 1
    assert questions["prefix-addresses:1"]["text"] == (
        "How many IP addresses are there in prefix 10.0.0.0/24 (VRF Blue)?"
    )


def test_templates_for_a_port_its_vlans_a_platform_and_where_a_circuit_lands(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """What is plugged into a port: another device, or (the trap) a circuit's
    termination, asked in the same words; an interface's 802.1Q mode, untagged
    VLAN and every VLAN it carries; a device's platform and a platform's devices
    (none for one no device runs); where a circuit's sides land, a site or (the
    trap) a provider network. A device without a name at the far end of a cable
    is named by its display form."""
    questions = listed(eval_env, "--per-template", "20")

    def expected(qid: str) -> Any:
        return questions[qid]["expected"]

    assert expected("cable-peer:1") == "dmi01-akron-rtr01"
    assert expected("cable-peer:3") == "dmi01-akron-sw01"
    circuit = questions["cable-circuit:5"]
    assert circuit["expected"] == "LUM-1001" and circuit["trap"] == "cable-to-circuit"
    assert circuit["text"].replace("ge-0/0/1", "ge-0/0/0") == questions["cable-peer:3"]["text"]
    assert {"LUM-1001", "dmi01-akron-rtr01"} <= set(circuit["universe"])
    assert "cable-peer:2" not in questions and "cable-circuit:2" not in questions  # no cable
    assert expected("interface-mode:1") == "tagged" and expected("interface-mode:2") == "access"
    assert "interface-mode:3" not in questions  # an interface without a mode
    assert expected("untagged-vlan:1") == "mgmt" and expected("untagged-vlan:4") == "servers"
    assert expected("interface-vlans:1") == ["mgmt", "users"]
    assert expected("interface-vlans:2") == ["users"]
    assert expected("device-platform:3") == "Junos"
    assert "device-platform:5" not in questions  # a device without a platform
    assert expected("platform-devices:1") == [
        "dmi01-akron-sw01",
        "dmi01-akron-sw02",
        "dmi01-columbus-sw01",
    ]
    assert questions["platform-devices:3"]["kind"] == "absence"  # NX-OS runs nowhere
    assert expected("circuit-side:1-A") == "DM-Akron"
    assert expected("circuit-side:2-Z") == "Zayo MPLS"
    assert "Zayo MPLS" in questions["circuit-side:1-A"]["universe"]

    unnamed = {"id": 3, "display": "Juniper SRX345 (3)", "name": None, "description": ""}
    netbox.data["dcim/interfaces"] = [
        {**row, "device": unnamed} if row["device"]["id"] == 3 else row
        for row in netbox.data["dcim/interfaces"]
    ]
    again = listed(eval_env, "--per-template", "20")
    assert again["cable-peer:1"]["expected"] == "Juniper SRX345 (3)"


def test_parallel_runs_questions_at_once_with_the_same_scores_as_one_at_a_time(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    """--parallel 4 on a server that answers each question after a fixed
    delay: the answers overlap (a final request arrives while another is still
    waited for), and every score is what a sequential run gives."""
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)
    arrived: list[float] = []

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if not after_tool:
            return [LOOK]
        arrived.append(time.monotonic())
        said = "There are 4 sites." if question == TEXTS[0] else ANSWERS[question]
        return [Delay(2.0), Text(said)]

    models.responder = by_question(reply)
    args = ["eval", "--per-template", "0", "--questions", str(path), "-m", "oracle", "--json"]
    one = invoke(args, env=eval_env)
    assert one.exit_code == 0, one.output
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(arrived))  # one at a time
    arrived.clear()
    four = invoke([*args, "--parallel", "4"], env=eval_env)
    assert four.exit_code == 0, four.output
    assert any(b - a < 2.0 for a, b in itertools.pairwise(sorted(arrived)))

    def scores(result: Any) -> dict[str, Any]:
        report = json.loads(result.stdout)
        return {r["question"]: r["score"] for r in report["results"]}

    assert scores(four) == scores(one) and len(scores(one)) == 4
    assert [s["correct"] for s in scores(one).values()].count(False) == 1


def test_ctrl_c_in_a_parallel_run_rolls_back_every_turn_under_way_and_resume_finishes(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    """Two questions answered, two under way at once: Ctrl-C cancels both,
    keeps the two answers, leaves no session of the cancelled ones, exits
    130; --resume asks the two again."""
    path = tmp_path / "mine.toml"
    path.write_text(QUESTIONS_TOML)
    slow = set(TEXTS[2:])

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if after_tool and question in slow:
            return [Delay(60.0), Text(ANSWERS[question])]
        return answers_right(model, question, after_tool)

    models.responder = by_question(reply)
    args = ["-m", "slow", "--per-template", "0", "--questions", str(path), "--parallel", "2"]
    run = start_eval(eval_env, *args)
    runs = tmp_path / "runs"

    def under_way() -> bool:
        finals = [
            json.dumps(body["messages"])
            for body in models.requests
            if body["messages"][-1].get("role") == "tool"
        ]
        return all(any(text in final for final in finals) for text in slow)

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        results = list(runs.glob("*/results.jsonl"))
        if results and len(results[0].read_text().splitlines()) == 2 and under_way():
            break
        assert run.poll() is None, run.communicate()
        time.sleep(0.05)
    else:
        raise AssertionError("the run never had its two slow questions under way")
    time.sleep(0.3)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    (folder,) = runs.iterdir()
    kept = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert sorted(r["question"] for r in kept) == ["akron-devices", "sites"]
    assert json.loads(out)["finished"] == 2
    assert {p.stem for p in (folder / "sessions").glob("*.sqlite")} == {r["session"] for r in kept}
    models.responder = by_question(answers_right)
    resumed = invoke(["eval", "--resume", folder.name, "--json", "--parallel", "2"], env=eval_env)
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["complete"] is True and report["models"]["slow"]["correct"]["rate"] == 1.0


def test_the_question_mix_keeps_none_truths_few_so_a_constant_none_scores_little(
    netbox: NetBoxDouble,
) -> None:
    """On the double most counts of a site's devices by status are 0: a set of
    such questions would give "None." a high score for nothing. A template
    that is not about absence keeps at most one question whose truth is none."""
    from netbox_chat.eval.questions import is_none

    questions = built(netbox, seed=0, per_template=3)
    for template in {q.template for q in questions}:
        mine = [q for q in questions if q.template == template]
        if all(q.kind != "absence" or q.trap == "absence" for q in mine):
            assert sum(is_none(q) for q in mine) <= 1, template
    counts = [q for q in questions if q.template == "site-status-devices"]
    assert len(counts) == 3 and sum(q.expected == 0 for q in counts) <= 1


def test_the_report_gives_each_models_grounded_share_and_declined_answers_apart(
    eval_env: dict[str, str], models: ScriptedOllama, tmp_path: Path
) -> None:
    """Right and grounded are different things: a model that answers right
    without asking NetBox is right but not grounded; one that looks first is
    both; "I don't know." is wrong and counted as declined."""
    path = tmp_path / "sites.toml"
    path.write_text(
        '[[question]]\ntext = "How many sites are there?"\nkind = "count"\nexpected = 3\n'
    )
    sites = ToolCall("netbox_get_objects", {"object_type": "dcim.site", "filters": {}})

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if model == "twin":
            return [Text("There are 3 sites.")]  # a guess: no tool call
        if not after_tool:
            return [sites]
        return [Text("I don't know." if model == "flawed" else "There are 3 sites.")]

    models.responder = by_question(reply)
    args = ["eval", "--per-template", "0", "--questions", str(path), "--json"]
    result = invoke([*args, "-m", "oracle", "-m", "twin", "-m", "flawed"], env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["models"]
    assert report["oracle"]["correct"]["rate"] == 1.0 and report["twin"]["correct"]["rate"] == 1.0
    assert report["oracle"]["grounded"] == {"grounded": 1, "checked": 1, "rate": 1.0}
    assert report["twin"]["grounded"] == {"grounded": 0, "checked": 1, "rate": 0.0}
    assert report["flawed"]["correct"]["rate"] == 0.0 and report["flawed"]["declined"] == 1
    assert report["oracle"]["declined"] == 0
