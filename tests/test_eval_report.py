"""What the report's numbers count: one denominator per figure, said; the
keys beside the figures; the credited answers with the words that earned them.
The report of results scored by the real scorer on the questions the NetBox
double builds (the report is pure: plan and results in, Markdown and JSON out),
and `--show right` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from netbox_chat.eval.report import GROUNDED, markdown, summarize
from netbox_chat.eval.runfolder import Plan
from tests.doubles.eval_models import MODELS, built, record, right_answer
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Reply, ScriptedOllama, Text, by_question
from tests.drive.runner import invoke

CLAIMED = {"claims": 2, "ungrounded": [], "without_netbox": False}
NOTHING = {"claims": 0, "ungrounded": [], "without_netbox": False}


def test_the_score_the_floor_and_every_rate_count_the_same_questions_and_say_which_not(
    netbox: NetBoxDouble,
) -> None:
    questions = built(netbox, seed=0, per_template=1)
    explanations = [q for q in questions if q.kind == "explanation"]
    assert explanations
    results = [record("oracle", q, right_answer(q, i), CLAIMED) for i, q in enumerate(questions)]
    results += [record("shrug", q, "I don't know.", NOTHING) for q in questions]
    plan = Plan(models=("oracle", "shrug"), questions=tuple(questions), seed=0)
    summary = summarize(plan, results, run="r")
    scored = len(questions) - len(explanations)
    oracle, shrug = summary["models"]["oracle"], summary["models"]["shrug"]
    assert oracle["correct"] == {"right": scored, "scored": scored, "asked": len(questions),
                                 "rate": 1.0}  # fmt: skip
    assert all(f["scored"] == scored for f in summary["floor"]["answers"].values())
    # "I don't know." to an explanation is declined, not wrong: no figure counts it
    assert shrug["correct"]["scored"] == scored and shrug["declined"] == len(questions)
    assert shrug["by_kind"]["explanation"]["scored"] == 0
    assert oracle["by_kind"]["explanation"]["scored"] == 0
    text = markdown(summary)
    note = f"{len(explanations)} explanation question"
    assert note in summary["unscored"] and "not scored without --judge" in text
    assert "| shrug | explanation | - (" in text
    # grounded: a non-answer states nothing, so it is outside the share
    assert shrug["grounded"] == {"grounded": 0, "checked": 0, "rate": None}
    assert oracle["grounded"]["checked"] == len(questions)
    # the keys, one line each, beside the figures
    assert GROUNDED in text and "*pass^k*: " in text and "*95 % interval*: " in text
    # every why cell one short line
    assert all(len(w["why"]) <= 80 and "\n" not in w["why"] for w in summary["wrong"])


def test_with_a_judge_the_floor_counts_the_explanations_too(netbox: NetBoxDouble) -> None:
    questions = built(netbox, seed=0, per_template=1)
    plan = Plan(models=("oracle",), questions=tuple(questions), seed=0, judge="oracle")
    results = [record("oracle", q, right_answer(q, i)) for i, q in enumerate(questions)]
    for r in results:
        if r["kind"] == "explanation":
            r["score"] = {**r["score"], "correct": True}  # as the judge scored it
    summary = summarize(plan, results, run="r")
    assert summary["models"]["oracle"]["correct"]["scored"] == len(questions)
    assert all(f["scored"] == len(questions) for f in summary["floor"]["answers"].values())
    assert summary["unscored"] == ""


def test_the_credited_answers_carry_the_words_that_earned_them(netbox: NetBoxDouble) -> None:
    questions = built(netbox, seed=0, per_template=1)
    value = next(q for q in questions if q.template == "device-status")
    results = [
        record("m", value, f"Checked the device. It is **{value.expected}**. Anything else?")
    ]
    summary = summarize(Plan(models=("m",), questions=(value,), seed=0), results, run="r")
    (credited,) = summary["right"]
    assert credited["credit"] == f"It is {value.expected}."
    assert "## Credited answers" not in markdown(summary)
    shown = markdown(summary, show_right=True).split("## Credited answers")[1]
    assert f"| {value.text} | {value.expected} | It is {value.expected}. |" in shown


def test_show_right_lists_credited_answers_through_the_cli(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    ollama.models.update(MODELS)

    def reply(model: str, question: str, after_tool: bool) -> Reply:
        return [Text("There are 3 sites." if "sites" in question else "PP:B117 is offline.")]

    ollama.responder = by_question(reply)
    mine = tmp_path / "mine.toml"
    mine.write_text(
        '[[question]]\ntext = "How many sites are there?"\nkind = "count"\nexpected = 3\n\n'
        '[[question]]\ntext = "What is the status of device dmi01-akron-sw02?"\nkind = "value"\n'
        'expected = "offline"\nuniverse = ["active", "planned"]\n'
    )
    env = {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs")}
    args = ["eval", "-m", "oracle", "--per-template", "0", "--questions", str(mine)]
    result = invoke([*args, "--show", "right"], env=env)
    assert result.exit_code == 0, result.output
    credited = result.stdout.split("## Credited answers")[1]
    assert "| How many sites are there? | 3 | There are 3 sites. |" in credited
    assert "PP:B117" not in credited  # a value said of another device earns nothing
    wrong = result.stdout.split("## Wrong answers")[1].split("##")[0]
    assert "says offline of PP:B117, not of what was asked" in wrong
    plain = invoke([*args, "--json"], env=env)
    assert [c["credit"] for c in json.loads(plain.stdout)["right"]] == ["There are 3 sites."]
