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

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from netbox_chat.cli import app
from netbox_chat.eval.questions import Question, build_questions
from netbox_chat.eval.truth import TruthClient
from tests.conftest import TEST_TOKEN
from tests.netbox_double import NetBoxDouble
from tests.ollama_server import Delay, Reply, ScriptedOllama, Stall, Text, ToolCall, by_question

# A run builds a new agent per question (about 1-2 s each on a busy two-core
# machine, bench/bench_eval.py); the full two-model run asks 72 questions.
pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).parent.parent
MODELS = {name: ["completion", "tools"] for name in ("oracle", "twin", "flawed", "slow")}
LOOK = ToolCall("netbox_get_objects", {"object_type": "dcim.device", "filters": {}})
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five"]


def built(netbox: NetBoxDouble, seed: int = 7, per_template: int = 1) -> list[Question]:
    """The questions the CLI builds for this seed (same seed + same data)."""
    with TruthClient(netbox.url, TEST_TOKEN) as client:
        return build_questions(client, seed=seed, per_template=per_template).questions


def right_answer(q: Question, n: int) -> str:
    """The truth, phrased one of several ways (each must score right)."""
    e: Any = q.expected
    if q.kind == "count":
        if n % 3 == 0 and e < len(NUMBER_WORDS):
            return f"I found {NUMBER_WORDS[e]}."
        return ["There are **{}**.", "Count: {} in total.", "{} — that's the number."][
            n % 3
        ].format(e)
    if q.kind == "list":
        return ("They are: " if n % 2 else "Here they are\n\n- ") + (
            ", ".join(e) if n % 2 else "\n- ".join(f"`{name}`" for name in e)
        )
    if q.kind == "value":
        return [f"It is **{e}**.", f"`{e}`", f"The answer is {e}."][n % 3]
    if q.kind == "boolean":
        if e["yes"]:
            return "Yes, every one of them."
        return "No. Not all: " + " and ".join(e["exceptions"]) + "."
    if q.kind == "absence":
        return ["There are none.", "No such object exists in NetBox.", "I found nothing."][n % 3]
    return str(e)  # an explanation: the reference itself


def wrong_answer(q: Question, n: int) -> tuple[str, str]:
    """(an answer wrong in one known way, the failure's name)."""
    e: Any = q.expected
    if q.kind == "count":
        if q.unscoped is not None:
            return f"There are {q.unscoped}.", "unscoped total"
        if e > 0 and n % 2:
            return "There are none.", "hallucinated none"
        return f"There are {e + 1}.", "wrong number"
    if q.kind == "list":
        if len(e) >= 2:
            return "They are: " + ", ".join(e[1:]) + ".", "missing item"
        extra = next((name for name in q.universe if name not in e), None)
        if extra is None:
            return "There are none.", "hallucinated none"
        return f"They are: {', '.join(e)}, {extra}.", "extra name"
    if q.kind == "value":
        other = next((v for v in q.universe if v != e), f"{e}0")
        return f"It is {other}.", "wrong value"
    if q.kind == "boolean":
        return ("No, not all." if e["yes"] else "Yes, all of them."), "wrong verdict"
    if q.kind == "absence":
        return "It is deployed at DM-Akron, in rack R101.", "confident answer to a false premise"
    return "It is a printer in Paris.", "explanation"


def personas(questions: list[Question]) -> Any:
    """The three models, answering by question text (one tool call first)."""
    by_text = {q.text: (i, q) for i, q in enumerate(questions)}

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        if question.startswith("You grade an answer"):
            return [Text("WRONG" if "Paris" in question else "CORRECT")]
        if not after_tool:
            return [LOOK]
        n, q = by_text[question]
        if model == "flawed":
            return [Text(wrong_answer(q, n)[0])]
        if model == "slow" and n == 2:
            return [Delay(30.0), Text(right_answer(q, n))]
        return [Text(right_answer(q, n))]

    return by_question(reply)


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
    result = CliRunner().invoke(app, ["eval", "--list", "--json", "--seed", "3"], env=eval_env)
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
    again = CliRunner().invoke(app, ["eval", "--list", "--json", "--seed", "3"], env=eval_env)
    other = CliRunner().invoke(app, ["eval", "--list", "--json", "--seed", "4"], env=eval_env)
    assert json.loads(again.stdout)["questions"] == listed
    assert json.loads(other.stdout)["questions"] != listed


def test_oracle_scores_100_and_flawed_scores_0_each_for_its_known_failure(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    questions = built(netbox, seed=7, per_template=1)
    models.responder = personas(questions)
    args = ["eval", "--seed", "7", "--per-template", "1", "-m", "oracle", "-m", "flawed"]
    result = CliRunner().invoke(app, [*args, "--judge", "oracle", "--json"], env=eval_env)
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
    exported = CliRunner().invoke(
        app, ["export", first["session"], "--sessions-dir", str(run / "sessions")], env=eval_env
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
    result = CliRunner().invoke(app, [*args, "--conversation"], env=eval_env)
    assert result.exit_code == 0, result.output
    assert "all in one session" in result.stdout
    assert "| oracle | twin |" in result.stdout and "too small to call" in result.stdout


def start_eval(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "netbox_chat", "eval", "--json", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


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
    resumed = CliRunner().invoke(app, ["eval", "--resume", folder.name, "--json"], env=eval_env)
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
    result = CliRunner().invoke(app, [*args, "--deadline", "3"], env=eval_env)
    assert time.monotonic() - started < 30, result.output
    report = json.loads(result.stdout)
    assert report["complete"] is True
    by_question_id = {r["question"]: r for r in report["results"]}
    assert by_question_id["akron-devices"]["score"]["correct"] is False
    assert by_question_id["akron-devices"]["score"]["why"] == (
        "the turn failed: the turn did not finish within its deadline of 3 s "
        "(NETBOX_CHAT_DEADLINE): the model server kept the answer waiting; check the "
        "server, or raise --deadline / NETBOX_CHAT_DEADLINE"
    )
    assert sum(r["score"]["correct"] for r in report["results"]) == len(report["results"]) - 1
