"""What a run's results say: correctness overall and by tier, answer type,
domain and template; declined answers apart; pass^k over repeats; what a
constant answer would score on the same questions (the floor); tool calls
against the tier budgets; tokens, times, failed turns, truncations,
compactions; a paired bootstrap of each pair of models over templates, which
says when a difference is too small to call; and every wrong answer with why.
Pure functions over the plan and the result records; the Markdown and the
JSON say the same things.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from netbox_chat.eval.questions import BUDGETS, KINDS, TIERS, Question, build_lines
from netbox_chat.eval.runfolder import Plan
from netbox_chat.eval.scoring import score_question
from netbox_chat.words import count, number

BOOTSTRAP_SAMPLES = 2000

CONSTANT_ANSWERS = ("I don't know.", "None.", "Yes.", "No.", "0", "1", "active")
"""Answers a model that read nothing could give to every question: what each
scores on a question set is the floor a real score has to rise above."""

SHORT = 160
"""Characters of a question, a truth or an answer quoted in the list of wrong answers."""

WHY = 80
"""Characters of a `why` cell: one line in a report as wide as a terminal."""


def group_of(result: dict[str, Any]) -> str:
    """The template a result's question was drawn from (near-duplicates share one);
    a result of an older run without it falls back to its question id's prefix."""
    return str(result.get("template") or str(result["question"]).split(":")[0])


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
        "declined": sum(1 for r in results if r["score"].get("declined")),
        "grounded": grounded_share(results),
        "interval": rate_interval(results),
        "pass_k": pass_k(results),
        "by_tier": by("tier", TIERS),
        "by_kind": by("kind", KINDS),
        "by_domain": by("domain", ()),
        "by_template": {
            group: _rate([r for r in results if group_of(r) == group])
            for group in sorted({group_of(r) for r in results})
        },
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


def _cluster_interval(
    groups: Sequence[tuple[float, int]], seed: int
) -> tuple[float, float, float] | None:
    """Mean and 95 % interval of a per-question figure whose questions come in
    clusters (sum over the cluster, its size): the clusters are resampled, not
    the questions, since near-duplicates of one template rise and fall together."""
    if not groups:
        return None
    rng = random.Random(seed)
    n = len(groups)
    means = []
    for _ in range(BOOTSTRAP_SAMPLES):
        drawn = rng.choices(groups, k=n)
        means.append(sum(total for total, _ in drawn) / sum(size for _, size in drawn))
    means.sort()
    mean = sum(total for total, _ in groups) / sum(size for _, size in groups)
    return mean, means[int(0.025 * BOOTSTRAP_SAMPLES)], means[int(0.975 * BOOTSTRAP_SAMPLES) - 1]


def _clusters(per_question: dict[str, float], group: dict[str, str]) -> list[tuple[float, int]]:
    sums: dict[str, list[float]] = {}
    for qid, value in per_question.items():
        sums.setdefault(group.get(qid, qid), []).append(value)
    return [(sum(values), len(values)) for _, values in sorted(sums.items())]


def paired_bootstrap(
    a: dict[str, list[bool]],
    b: dict[str, list[bool]],
    *,
    seed: int = 0,
    group: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The difference in correctness of A over B on the questions both answered,
    with a 95 % interval from resampling templates (each question's repeats
    averaged first, so the pairing is by question; `group` maps a question to
    its template, a question without one being its own)."""
    shared = sorted(q for q in set(a) & set(b) if a[q] and b[q])
    diffs = {q: statistics.fmean(a[q]) - statistics.fmean(b[q]) for q in shared}
    clusters = _clusters(diffs, group or {})
    found = _cluster_interval(clusters, seed)
    if found is None:
        return {
            "questions": 0, "templates": 0, "difference": None, "low": None, "high": None,
            "call": "no data",
        }  # fmt: skip
    difference, low, high = found
    better = "A better" if difference > 0 else "B better"
    call = "too small to call" if low <= 0 <= high else better
    return {
        "questions": len(diffs),
        "templates": len(clusters),
        "difference": round(difference, 4),
        "low": round(low, 4),
        "high": round(high, 4),
        "call": call,
    }


def rate_interval(results: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """One model's correctness with its 95 % interval over templates: the
    points this run cannot tell apart."""
    per_question: dict[str, list[bool]] = {}
    group: dict[str, str] = {}
    for r in results:
        if r["score"]["correct"] is not None:
            per_question.setdefault(r["question"], []).append(bool(r["score"]["correct"]))
            group[r["question"]] = group_of(r)
    means = {q: statistics.fmean(v) for q, v in per_question.items()}
    found = _cluster_interval(_clusters(means, group), seed)
    if found is None:
        return {"low": None, "high": None, "templates": 0}
    _, low, high = found
    return {"low": round(low, 4), "high": round(high, 4), "templates": len(set(group.values()))}


GROUNDED = (
    "*grounded*: of the answers that state something to check (claims), the share whose "
    "every claim a NetBox reply of the same turn holds; a non-answer, or an answer "
    "stating nothing to check, is outside it."
)
KEYS = (
    "*95 % interval*: where *correct* could have come out on another draw of questions "
    "(a bootstrap over templates). *pass^k*: the share of questions right in every one of "
    "the k `--repeat` runs (`-`: one repeat). *declined*: non-answers (give-ups, questions "
    "back), wrong where scored. " + GROUNDED
)
"""The one-line key under the models' table."""


def grounded_share(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of the answers that state something to check, the share whose every
    claim a NetBox reply holds (issue 33): right and grounded are different
    things, a guess can be right. A non-answer states nothing: it is outside
    the share (it would be 100 % grounded, having no claim to fail)."""
    checked = [
        r["grounding"]
        for r in results
        if isinstance(r.get("grounding"), dict)
        and not r["score"].get("declined")
        and int(r["grounding"].get("claims") or 0) > 0
    ]
    grounded = sum(
        1
        for g in checked
        if not g.get("ungrounded") and not g.get("without_netbox") and not g.get("unchecked")
    )
    return {
        "grounded": grounded,
        "checked": len(checked),
        "rate": None if not checked else round(grounded / len(checked), 4),
    }


def pass_k(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """pass^k: the share of questions right in every one of their k repeats
    (None with one repeat). A model right half the time on every question has
    a mean of 50 % and a pass^3 near 12 %."""
    per_question: dict[str, list[bool]] = {}
    for r in results:
        if r["score"]["correct"] is not None:
            per_question.setdefault(r["question"], []).append(bool(r["score"]["correct"]))
    k = max((len(v) for v in per_question.values()), default=0)
    if k < 2:
        return None
    complete = [v for v in per_question.values() if len(v) == k]
    right = sum(1 for v in complete if all(v))
    return {
        "k": k,
        "questions": len(complete),
        "right_every_time": right,
        "rate": None if not complete else round(right / len(complete), 4),
    }


def scored_questions(questions: Sequence[Question], judge: bool) -> list[Question]:
    """The questions a run scores: all of them with a judge, else all but the
    explanations. The score, the floor and every rate count these."""
    return [q for q in questions if judge or q.kind != "explanation"]


def constant_floor(questions: Sequence[Question], judge: bool = False) -> dict[str, Any]:
    """What each constant answer scores on the questions the run scores (with a
    judge, an explanation too: no constant describes a device, so it earns
    nothing there), over the same denominator as the score."""
    scored = scored_questions(questions, judge)
    rates: dict[str, Any] = {}
    for answer in CONSTANT_ANSWERS:
        right = sum(1 for q in scored if score_question(q, answer).correct)
        rates[answer] = {
            "right": right,
            "scored": len(scored),
            "asked": len(scored),
            "rate": None if not scored else round(right / len(scored), 4),
        }
    best = max(rates.items(), key=lambda item: item[1]["right"], default=None)
    return {"answers": rates, "highest": None if best is None else best[0]}


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
    group = {q.id: q.group for q in plan.questions}
    pairs = []
    for i, first in enumerate(plan.models):
        for second in plan.models[i + 1 :]:
            test = paired_bootstrap(
                _correctness(ordered, first),
                _correctness(ordered, second),
                seed=plan.seed,
                group=group,
            )
            pairs.append({"a": first, "b": second, **test})
    expected = len(plan.items())
    return {
        "run": run,
        "seed": plan.seed,
        "repeat": plan.repeat,
        "conversation": plan.conversation,
        "questions": len(plan.questions),
        "templates": len(set(group.values())),
        "finished": len(ordered),
        "complete": len(ordered) >= expected,
        "expected_results": expected,
        "left_out": dict(plan.left_out),
        "absent": dict(plan.absent),
        "unscored": unscored_note(plan),
        "floor": constant_floor(plan.questions, plan.judge is not None),
        "models": models,
        "comparisons": pairs,
        "wrong": wrong_answers(plan, ordered),
        "right": credited_answers(plan, ordered),
        "results": ordered,
    }


def unscored_note(plan: Plan) -> str:
    """Which questions no figure counts, and why ("" when every one is scored)."""
    if plan.judge is not None:
        return ""
    n = sum(1 for q in plan.questions if q.kind == "explanation")
    if not n:
        return ""
    return (
        f"{count(n, 'explanation question')} {'is' if n == 1 else 'are'} not scored "
        f"without --judge: no figure counts {'it' if n == 1 else 'them'}"
    )


def shorten(text: str, limit: int = SHORT) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _truth(question: Question | None) -> str:
    if question is None:
        return "?"
    e = question.expected
    if question.kind == "absence":
        return "none"
    if question.kind == "boolean" and isinstance(e, dict):
        exceptions = e.get("exceptions") or []
        return (
            ("yes" if e.get("yes") else "no")
            + (f", except {', '.join(exceptions)}" if exceptions else "")
            + (" (nothing in scope: none is right too)" if e.get("empty") else "")
        )
    if isinstance(e, list):
        return ", ".join(e) if e else "none"
    return str(e)


def wrong_answers(plan: Plan, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each answer scored wrong: the question, the truth, what was said
    (shortened) and why (one line); a declined answer says so."""
    return [
        {
            **listed,
            "said": shorten(str(r.get("answer") or "")),
            "why": shorten(
                ("declined: " if r["score"].get("declined") else "") + r["score"]["why"], WHY
            ),
        }
        for r, listed in _scored(plan, results, False)
    ]


def credited_answers(plan: Plan, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each answer scored right, with the words of it that earned the credit,
    so that credit that looks undeserved can be found and read."""
    return [
        {**listed, "credit": shorten(str(r["score"].get("credit") or r["score"]["why"]))}
        for r, listed in _scored(plan, results, True)
    ]


def _scored(
    plan: Plan, results: Sequence[dict[str, Any]], correct: bool
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The results scored `correct`, each with what a list of them shows: the
    model, the question, its truth and the session to read."""
    by_id = {q.id: q for q in plan.questions}
    found = []
    for r in results:
        if r["score"]["correct"] is not correct:
            continue
        question = by_id.get(r["question"])
        found.append(
            (
                r,
                {
                    "model": r["model"],
                    "repeat": r["repeat"],
                    "question": r["question"],
                    "text": shorten(question.text if question else r["question"]),
                    "truth": shorten(_truth(question)),
                    "session": r.get("session"),
                },
            )
        )
    return found


def one_line(summary: dict[str, Any]) -> str:
    """The report in one line, for stderr when stdout goes to a file or a pipe."""
    parts = []
    for model, m in summary["models"].items():
        declined = f", {m['declined']} declined" if m["declined"] else ""
        parts.append(f"{model} {_pct(m['correct'])}{declined}")
    floor = summary["floor"]
    highest = floor["highest"]
    if highest is not None and floor["answers"][highest]["rate"] is not None:
        rate = floor["answers"][highest]["rate"]
        parts.append(f"a constant {highest!r} would score {100 * rate:.0f} %")
    left_out = summary.get("left_out") or {}
    if left_out:
        parts.append(f"{count(len(left_out), 'template')} left out, a read failed")
    return f"run {summary['run']}: " + "; ".join(parts)


def _pct(figures: dict[str, Any]) -> str:
    if figures["rate"] is None:
        return f"- ({figures['asked']} unscored)"
    return f"{100 * figures['rate']:.0f} % ({figures['right']}/{figures['scored']})"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value} s"


def _interval(figures: dict[str, Any]) -> str:
    if figures["low"] is None:
        return "-"
    return f"{100 * figures['low']:.0f} … {100 * figures['high']:.0f} %"


def _grounded(figures: dict[str, Any]) -> str:
    if figures["rate"] is None:
        return "-"
    return f"{100 * figures['rate']:.0f} % ({figures['grounded']}/{figures['checked']})"


def _pass_k(figures: dict[str, Any] | None) -> str:
    if not figures or figures["rate"] is None:
        return "-"
    return f"{100 * figures['rate']:.0f} % ({figures['right_every_time']}/{figures['questions']})"


def markdown(summary: dict[str, Any], *, show_right: bool = False) -> str:
    """The report a person reads; `show_right` adds the credited answers."""
    lines = [
        f"# netbox-chat eval, run {summary['run']}",
        "",
        f"{summary['questions']} questions from {count(summary['templates'], 'template')} "
        f"(seed {summary['seed']}), "
        f"{count(summary['repeat'], 'repeat')}, "
        + ("all in one session" if summary["conversation"] else "each in a new session")
        + f"; {summary['finished']} of {summary['expected_results']} answers finished"
        + ("." if summary["complete"] else " (stopped: --resume to finish)."),
        *_build_header(summary),
        "",
        "| model | correct | 95 % interval | declined | pass^k | grounded | failed turns |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, m in summary["models"].items():
        lines.append(
            f"| {model} | {_pct(m['correct'])} | {_interval(m['interval'])} | {m['declined']} "
            f"| {_pass_k(m['pass_k'])} | {_grounded(m['grounded'])} | {m['failed_turns']} |"
        )
    lines += [
        "",
        KEYS,
        "",
        f"The interval resamples the {count(summary['templates'], 'template')}, not the "
        "questions: a figure could move that far on another draw; two models closer than "
        "the pairwise interval cannot be told apart. The floor below is what one answer "
        "given to every question would score, over the same questions as *correct*.",
        "",
        "## Cost",
        "",
        "| model | tool calls (median) | over budget | tokens in/out | first token "
        "| per question | thinking | truncated | compactions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model, m in summary["models"].items():
        s = m["seconds"]
        lines.append(
            f"| {model} | {m['tool_calls']['median']} | {m['tool_calls']['over_budget']} "
            f"| {number(m['tokens']['in'])}/{number(m['tokens']['out'])} "
            f"| {_seconds(s['first_token_median'])} | {_seconds(s['median'])} "
            f"| {_seconds(s['thinking_total'])} | {m['truncated']} | {m['compactions']} |"
        )
    floor = summary["floor"]["answers"]
    if floor:
        lines += [
            "",
            "## The floor: one answer to every question",
            "",
            "| answer | would score |",
            "|---|---|",
        ]
        lines += [f"| {_cell(answer)} | {_pct(f)} |" for answer, f in floor.items()]
    for title, key in (
        ("tier", "by_tier"),
        ("answer type", "by_kind"),
        ("domain", "by_domain"),
        ("template", "by_template"),
    ):
        lines += ["", f"## By {title}", "", "| model | " + title + " | correct |", "|---|---|---|"]
        for model, m in summary["models"].items():
            lines += [f"| {model} | {value} | {_pct(f)} |" for value, f in m[key].items()]
    if summary["comparisons"]:
        lines += [
            "",
            "## Pairwise (paired bootstrap over templates, 95 %)",
            "",
            "| A | B | questions | templates | A - B | interval | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in summary["comparisons"]:
            if c["difference"] is None:
                lines.append(f"| {c['a']} | {c['b']} | 0 | 0 | - | - | no data |")
                continue
            lines.append(
                f"| {c['a']} | {c['b']} | {c['questions']} | {c['templates']} "
                f"| {100 * c['difference']:+.1f} pts "
                f"| {100 * c['low']:+.1f} … {100 * c['high']:+.1f} | {c['call']} |"
            )
    if summary["wrong"]:
        lines += [
            "",
            "## Wrong answers",
            "",
            "| model | question | truth | said | why | session |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {w['model']} | {_cell(w['text'])} | {_cell(w['truth'])} | {_cell(w['said'])} "
            f"| {_cell(w['why'])} | {w['session']} |"
            for w in summary["wrong"]
        ]
    if show_right and summary["right"]:
        lines += [
            "",
            "## Credited answers",
            "",
            "| model | question | truth | credited for | session |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {c['model']} | {_cell(c['text'])} | {_cell(c['truth'])} | {_cell(c['credit'])} "
            f"| {c['session']} |"
            for c in summary["right"]
        ]
    return "\n".join(lines) + "\n"


def _build_header(summary: dict[str, Any]) -> list[str]:
    """What the build left out and why, under the header's first line: a run
    missing templates is not the seed's whole set, and must say so."""
    lines = build_lines((), {}, summary.get("left_out") or {})
    absent = summary.get("absent") or {}
    if absent:
        lines.append("no data: " + "; ".join(f"{path}: {why}" for path, why in absent.items()))
    if summary.get("unscored"):
        lines.append(summary["unscored"])
    return ["", *(line[0].upper() + line[1:] + "." for line in lines)] if lines else []


def _cell(text: str) -> str:
    """A table cell: no column break, no line break."""
    return text.replace("|", "/").replace("\n", " ")
