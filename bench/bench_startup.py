"""Benchmark 2: time to the first prompt, through a real pty (pexpect).

Measured from spawn to the moment `netbox> ` is drawn, for `netbox-chat resume`
of a 500-turn session and for `netbox-chat` (a new session); the baseline is
spawn to exit of `python -c "import typer, rich, prompt_toolkit"`. Runs are
interleaved; each ends with Ctrl-D and a clean exit (not timed).

Target (issue 7): at most 1.3x the baseline.

Also printed, as diagnosis: the same two commands with the background agent
build switched off (bench/_repl.py, NETBOX_CHAT_BENCH_AGENT=none), which shows
what the build thread costs the prompt while it imports deepagents, and the
time from the prompt to a clean exit after an immediate Ctrl-D.

    .venv/bin/python bench/bench_startup.py [--runs 10] [--against REV]

`--against REV` first measures `netbox_chat/` as committed at REV (extracted
with `git archive`, no checkout) with this tree's harness and cached session,
and prints its figures above this tree's. Runs of the two trees are not
interleaved: compare ratios to each run's own baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import _common as C
import pexpect

LEAVE_HINT = b"exit or Ctrl-D to leave"
"""The last line of the banner and of a resume's recap: once it is on screen,
the whole start-up screen is (since issue 25, a recap's rendered answer and
this line are drawn above the prompt once it is up)."""


def to_prompt(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(seconds from spawn to the prompt, to the whole start-up screen, and
    from Ctrl-D to exit)."""
    started = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(40, 100), timeout=60)
    try:
        child.expect(C.PROMPT_RE)
        shown = time.perf_counter() - started
        if LEAVE_HINT not in (child.before or b""):
            child.expect(LEAVE_HINT)
            child.expect(C.PROMPT_RE)  # drawn again under it
        complete = time.perf_counter() - started
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        leaving = time.perf_counter() - started - complete
    finally:
        child.close(force=True)
    if child.exitstatus != 0:
        raise RuntimeError(f"{argv} exited {child.exitstatus}: {child.before!r}")
    return shown, complete, leaving


def timeline(argv: list[str], env: dict[str, str], path: Path) -> list[tuple[str, float]]:
    """One instrumented run (bench/_repl.py): (step, seconds since spawn) pairs."""
    path.unlink(missing_ok=True)
    started = time.time()
    shown, _, _ = to_prompt(argv, {**env, "NETBOX_CHAT_BENCH_TIMELINE": str(path)})
    marks = [line.rsplit(" ", 1) for line in path.read_text().splitlines()]
    return [(name, float(at) - started) for name, at in marks] + [("prompt drawn", shown)]


def to_exit(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(40, 100), timeout=60)
    child.expect(pexpect.EOF)
    elapsed = time.perf_counter() - started
    child.close(force=True)
    if child.exitstatus != 0:
        raise RuntimeError(f"{argv} exited {child.exitstatus}")
    return elapsed


def measure(runs: int) -> dict[str, Any]:
    """Every figure of one tree's code (this tree's, or --against's)."""
    cached = C.cached_sessions()
    repl = str(Path(__file__).with_name("_repl.py"))
    with C.temp_dir("nbc-bench-start-") as tmp:
        resumed = C.fresh_copy(cached["stages"][500], tmp / "resume")
        fresh = tmp / "new"
        common = {"OLLAMA_HOST": "127.0.0.1:9", "NETBOX_URL": "http://127.0.0.1:9"}
        env_resume = C.bench_env(NETBOX_CHAT_SESSIONS=str(resumed), **common)
        env_new = C.bench_env(NETBOX_CHAT_SESSIONS=str(fresh), **common)
        no_agent = {"NETBOX_CHAT_BENCH_AGENT": "none"}
        cases: dict[str, tuple[list[str], dict[str, str]]] = {
            "resume (500 turns)": ([C.NETBOX_CHAT, "resume", cached["id"]], env_resume),
            "new session": ([C.NETBOX_CHAT], env_new),
            "what-if resume, no agent build": (
                [C.PYTHON, repl, "resume", cached["id"]],
                {**env_resume, **no_agent},
            ),
            "what-if new, no agent build": ([C.PYTHON, repl], {**env_new, **no_agent}),
        }
        baseline_argv = [C.PYTHON, "-c", "import typer, rich, prompt_toolkit"]
        # warm-up: page cache and .pyc files
        to_exit(baseline_argv, env_new)
        for argv, env in cases.values():
            to_prompt(argv, env)
        baseline: list[float] = []
        shown: dict[str, list[float]] = {name: [] for name in cases}
        complete: dict[str, list[float]] = {name: [] for name in cases}
        leaving: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            baseline.append(to_exit(baseline_argv, env_new))
            for name, (argv, env) in cases.items():
                first, whole, last = to_prompt(argv, env)
                shown[name].append(first)
                complete[name].append(whole)
                leaving[name].append(last)
        new_sessions = len(list(fresh.glob("*.sqlite")))
        steps: dict[str, dict[str, list[float]]] = {}
        for name, argv in (
            ("resume (500 turns)", [C.PYTHON, repl, "resume", cached["id"]]),
            ("new session", [C.PYTHON, repl]),
        ):
            env = env_resume if name.startswith("resume") else env_new
            for _ in range(max(3, runs // 2)):
                previous = 0.0
                for step, at in timeline(argv, env, tmp / "timeline.txt"):
                    steps.setdefault(name, {}).setdefault(step, []).append(at - previous)
                    previous = at
    return {
        "baseline": baseline,
        "shown": shown,
        "complete": complete,
        "leaving": leaving,
        "new_sessions": new_sessions,
        "steps": steps,
    }


def report(label: str, figures: dict[str, Any]) -> None:
    baseline = figures["baseline"]
    base = statistics.median(baseline)
    print(f"\n[{label}]")
    print(f"{'to the prompt':44} {'median':>9} {'min':>9} {'max':>9} {'x base':>7}")
    print(
        f"{'baseline: import typer, rich, prompt_toolkit':44} {base * 1000:7.0f}ms "
        f"{min(baseline) * 1000:7.0f}ms {max(baseline) * 1000:7.0f}ms {1:6.2f}x"
    )
    for name, values in figures["shown"].items():
        s = C.summary(values)
        print(
            f"{name:44} {s['median'] * 1000:7.0f}ms {s['min'] * 1000:7.0f}ms "
            f"{s['max'] * 1000:7.0f}ms {s['median'] / base:6.2f}x"
        )
    print("\nthe whole start-up screen (banner or recap, its last line drawn; median):")
    for name, values in figures["complete"].items():
        print(f"  {name:42} {statistics.median(values) * 1000:7.0f}ms")
    print("\nCtrl-D right at the prompt to process exit (median):")
    for name, values in figures["leaving"].items():
        print(f"  {name:42} {statistics.median(values) * 1000:7.0f}ms")
    print(f"(new sessions created by the runs: {figures['new_sessions']})")
    for name, by_step in figures["steps"].items():
        print(f"\nwhere the time goes, {name} (bench/_repl.py, instrumented; median ms):")
        for step, values in by_step.items():
            print(f"  {step:46} +{statistics.median(values) * 1000:5.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--against", metavar="REV", help="measure REV's netbox_chat/ first")
    parser.add_argument("--figures", type=Path, help=argparse.SUPPRESS)  # JSON, for --against
    args = parser.parse_args()

    if args.figures:  # measuring another revision for --against: figures only
        args.figures.write_text(json.dumps(measure(args.runs)))
        return
    C.header("bench 2: time to the first prompt")
    C.cached_sessions()  # this tree's, built before any timing starts
    runs: dict[str, dict[str, Any]] = {}
    if args.against:
        runs[args.against] = C.figures_of_revision(
            "bench_startup.py", args.against, [f"--runs={args.runs}"]
        )
    runs["this tree"] = measure(args.runs)
    for label, figures in runs.items():
        report(label, figures)
    print("\n(targets: this tree)")
    figures = runs["this tree"]
    base = statistics.median(figures["baseline"])
    for name in ("resume (500 turns)", "new session"):
        ratio = statistics.median(figures["shown"][name]) / base
        verdict = "met" if ratio <= 1.3 else "NOT met"
        print(f"TARGET {name} <= 1.3x baseline: {ratio:.2f}x -> {verdict}")


if __name__ == "__main__":
    main()
