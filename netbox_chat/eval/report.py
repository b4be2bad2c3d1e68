"""What a run's results say: correctness overall and by tier, answer type and
domain; tool calls against the tier budgets; tokens, times, failed turns,
truncations, compactions; and a paired bootstrap of each pair of models,
which says when a difference is too small to call. Pure functions over the
result records; the Markdown and the JSON say the same things.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from netbox_chat.eval.questions import BUDGETS, KINDS, TIERS
from netbox_chat.eval.runfolder import Plan
from netbox_chat.words import count, number

BOOTSTRAP_SAMPLES = 2000


def _rate(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in results if r["score"]["correct"] is not None]
    right = sum(1 for r in scored if r["score"]["correct"])
    return {
        "right": right,
        "scored": len(scored),
        "asked": len(results),
        "rate": None if not scored else round(right / len(scored), 4),
    }


def _median(values: Iterable[float | int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return None if not present else round(float(statistics.median(present)), 3)


def model_summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one model's results."""
    calls = [len(r.get("tool_calls") or []) for r in results]
    over = [r for r in results if len(r.get("tool_calls") or []) > BUDGETS.get(r["tier"], 99)]

    def by(key: str, order: Sequence[str]) -> dict[str, Any]:
        seen = sorted({r[key] for r in results}, key=lambda v: (v not in order, str(v)))
        groups = {value: _rate([r for r in results if r[key] == value]) for value in seen}
        return {value: figures for value, figures in groups.items() if figures["asked"]}

    tokens_in = sum(int((r.get("tokens") or {}).get("in") or 0) for r in results)
    tokens_out = sum(int((r.get("tokens") or {}).get("out") or 0) for r in results)
    return {
        "correct": _rate(results),
        "by_tier": by("tier", TIERS),
        "by_kind": by("kind", KINDS),
        "by_domain": by("domain", ()),
        "tool_calls": {
            "mean": None if not calls else round(statistics.fmean(calls), 2),
            "median": _median(calls),
            "over_budget": len(over),
            "budgets": dict(BUDGETS),
            "by_tier": {
                tier: _median(len(r.get("tool_calls") or []) for r in results if r["tier"] == tier)
                for tier in TIERS
                if any(r["tier"] == tier for r in results)
            },
        },
        "tokens": {"in": tokens_in, "out": tokens_out},
        "seconds": {
            "median": _median(r.get("seconds") for r in results),
            "total": round(sum(float(r.get("seconds") or 0) for r in results), 3),
            "first_token_median": _median(r.get("first_token_seconds") for r in results),
            "thinking_total": round(sum(float(r.get("thinking_seconds") or 0) for r in results), 3),
        },
        "failed_turns": sum(1 for r in results if r.get("status") != "done"),
        "truncated": sum(1 for r in results if (r.get("context") or {}).get("truncated")),
        "compactions": sum(int((r.get("context") or {}).get("compactions") or 0) for r in results),
    }


def paired_bootstrap(
    a: dict[str, list[bool]], b: dict[str, list[bool]], *, seed: int = 0
) -> dict[str, Any]:
    """The difference in correctness of A over B on the questions both answered,
    with a 95 % interval from resampling questions (each question's repeats
    averaged first, so the pairing is by question)."""
    shared = sorted(set(a) & set(b))
    diffs = [statistics.fmean(a[q]) - statistics.fmean(b[q]) for q in shared if a[q] and b[q]]
    if not diffs:
        return {"questions": 0, "difference": None, "low": None, "high": None, "call": "no data"}
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(BOOTSTRAP_SAMPLES))
    low = means[int(0.025 * BOOTSTRAP_SAMPLES)]
    high = means[int(0.975 * BOOTSTRAP_SAMPLES) - 1]
    difference = statistics.fmean(diffs)
    better = "A better" if difference > 0 else "B better"
    call = "too small to call" if low <= 0 <= high else better
    return {
        "questions": n,
        "difference": round(difference, 4),
        "low": round(low, 4),
        "high": round(high, 4),
        "call": call,
    }


def _correctness(results: Sequence[dict[str, Any]], model: str) -> dict[str, list[bool]]:
    kept: dict[str, list[bool]] = {}
    for r in results:
        if r["model"] == model and r["score"]["correct"] is not None:
            kept.setdefault(r["question"], []).append(bool(r["score"]["correct"]))
    return kept


def summarize(plan: Plan, results: Sequence[dict[str, Any]], *, run: str) -> dict[str, Any]:
    """The whole report as data (`--json`)."""
    ordered = sorted(results, key=lambda r: (r["model"], r["repeat"], r["question"]))
    models = {m: model_summary([r for r in ordered if r["model"] == m]) for m in plan.models}
    pairs = []
    for i, first in enumerate(plan.models):
        for second in plan.models[i + 1 :]:
            test = paired_bootstrap(
                _correctness(ordered, first), _correctness(ordered, second), seed=plan.seed
            )
            pairs.append({"a": first, "b": second, **test})
    expected = len(plan.items())
    return {
        "run": run,
        "seed": plan.seed,
        "repeat": plan.repeat,
        "conversation": plan.conversation,
        "questions": len(plan.questions),
        "finished": len(ordered),
        "complete": len(ordered) >= expected,
        "expected_results": expected,
        "models": models,
        "comparisons": pairs,
        "results": ordered,
    }


def _pct(figures: dict[str, Any]) -> str:
    if figures["rate"] is None:
        return f"- ({figures['asked']} unscored)"
    return f"{100 * figures['rate']:.0f} % ({figures['right']}/{figures['scored']})"


def markdown(summary: dict[str, Any]) -> str:
    """The report a person reads."""
    lines = [
        f"# netbox-chat eval, run {summary['run']}",
        "",
        f"{summary['questions']} questions (seed {summary['seed']}), "
        f"{count(summary['repeat'], 'repeat')}, "
        + ("all in one session" if summary["conversation"] else "each in a new session")
        + f"; {summary['finished']} of {summary['expected_results']} answers finished"
        + ("." if summary["complete"] else " (stopped: --resume to finish)."),
        "",
        "| model | correct | tool calls (median) | over budget | tokens in/out "
        "| first token | per question | thinking | failed | truncated | compactions |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, m in summary["models"].items():
        s = m["seconds"]
        lines.append(
            f"| {model} | {_pct(m['correct'])} | {m['tool_calls']['median']} "
            f"| {m['tool_calls']['over_budget']} "
            f"| {number(m['tokens']['in'])}/{number(m['tokens']['out'])} "
            f"| {s['first_token_median']} s | {s['median']} s | {s['thinking_total']} s "
            f"| {m['failed_turns']} | {m['truncated']} | {m['compactions']} |"
        )
    for title, key in (("tier", "by_tier"), ("answer type", "by_kind"), ("domain", "by_domain")):
        lines += ["", f"## By {title}", "", "| model | " + title + " | correct |", "|---|---|---|"]
        for model, m in summary["models"].items():
            lines += [f"| {model} | {value} | {_pct(f)} |" for value, f in m[key].items()]
    if summary["comparisons"]:
        lines += [
            "",
            "## Pairwise (paired bootstrap, 95 %)",
            "",
            "| A | B | questions | A - B | interval | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for c in summary["comparisons"]:
            if c["difference"] is None:
                lines.append(f"| {c['a']} | {c['b']} | 0 | - | - | no data |")
                continue
            lines.append(
                f"| {c['a']} | {c['b']} | {c['questions']} | {100 * c['difference']:+.1f} pts "
                f"| {100 * c['low']:+.1f} … {100 * c['high']:+.1f} | {c['call']} |"
            )
    wrong = [r for r in summary["results"] if r["score"]["correct"] is False]
    if wrong:
        lines += ["", "## Wrong answers", "", "| model | question | why | session |"]
        lines.append("|---|---|---|---|")
        lines += [
            f"| {r['model']} | {r['question']} | {_cell(r['score']['why'])} | {r['session']} |"
            for r in wrong
        ]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")
