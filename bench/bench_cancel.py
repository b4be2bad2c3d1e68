"""Benchmark 3: Ctrl-C to prompt, on a 500-turn session.

Part A drives the real REPL through a pty (pexpect): `netbox-chat resume` of a
copy of the cached 500-turn session, run by bench/_repl.py so the agent gets a
slow tool instead of the NetBox tools; the scripted Ollama server runs in this
process on 127.0.0.1. Every turn is: model call 1 (waits, then asks for the
slow tool), the slow tool, model call 2 (streams the answer). For each of the
cancels this script types a question, waits a random moment of the turn, sends
SIGINT through the terminal (Ctrl-C), and measures until the prompt is drawn
again after the REPL has printed "turn N cancelled ... rolled back" (it prints
that after the rollback and its verification have finished). It then checks
that no rollback was reported unverified, that the session's head is clean with
the expected messages, and how much the file and its tables grew over the
cancels.

Part B (diagnosis) does the same on the Conversation directly (task.cancel()
instead of SIGINT, no REPL) and splits the time into the rollback's steps
(drain the saver bridge, delete the turn's rows, verify with one state read,
close the ledger row), then runs one whole turn to check the thread is healthy.

Before each cancel, a Ctrl-C at the empty prompt (no turn, no rollback: the
REPL clears the line and says how to leave) is timed the same way, as the
floor: what a Ctrl-C -> prompt round trip costs on this machine at that
moment, so a max that the machine's load made shows there too.

Besides the cancels at a random moment of the turn, `--early` more land in
its first 50 ms, counted from the status line the REPL draws as the turn
starts (before the first model request, the "oops, wrong question" moment),
so that phase has figures of its own.

`--against REV` first measures `netbox_chat/` as committed at REV (extracted
with `git archive`; the same harness, cached session and cancel moments) and
prints its figures beside this tree's.

Targets: issue 7, median at most 100 ms and p95 at most 250 ms (part A);
issue 17, in every phase a median of at most 25 ms and a max of at most 60 ms.

    .venv/bin/python bench/bench_cancel.py [--cancels 50] [--early 10] [--inproc 20]
        [--seed 7] [--skip-repl] [--against REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as C
import pexpect

EARLY = 0.05  # the early cancels land this many seconds into the turn, or sooner
FIRST_WAIT = 0.3  # model call 1: seconds before it asks for the tool
SLOW_TOOL = 1.0  # the tool's seconds
STREAM = 0.8  # model call 2: seconds of streamed answer

STATUS_LINE = re.compile(rb"thinking\xe2\x80\xa6")
CANCELLED_THEN_PROMPT = re.compile(rb"turn \d+ cancelled(.*?)" + C.PROMPT_RE.pattern, re.S)
DONE_THEN_PROMPT = re.compile(rb"turn \d+ \xc2\xb7 tokens.*?" + C.PROMPT_RE.pattern, re.S)
# A Ctrl-C that lands after the REPL took the line but before the turn began:
# the REPL says only "cancelled" and offers the question again; no turn ran.
# Ctrl-C at an empty prompt: prompt_toolkit clears the line and the REPL says
# how to leave. No turn, no rollback: the floor of a Ctrl-C -> prompt round
# trip through the pty on this machine at this moment (the baseline).
AT_THE_PROMPT = re.compile(rb"\(exit or Ctrl-D to leave\).*?" + C.PROMPT_RE.pattern, re.S)
FLOOR = "floor: Ctrl-C at an empty prompt"
BEFORE_THE_TURN = re.compile(
    rb"(?<![0-9] )(?<![0-9] \x1b\[0m)cancelled(?:\x1b\[[0-9;]*m)*\r?\n.*?" + C.PROMPT_RE.pattern,
    re.S,
)


class Clock:
    """Arrival times of /api/chat requests, to tell which phase a Ctrl-C hit."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.lock = threading.Lock()

    def phase(self, since: int, now: float) -> str:
        with self.lock:
            mine = self.arrivals[since:]
        if not mine:
            return "before the first model request"
        if len(mine) == 1:
            return "model call 1" if now - mine[0] < FIRST_WAIT else "tool running"
        return "streaming the answer"


def responder(clock: Clock) -> Callable[[dict[str, Any]], list[Any]]:
    from tests.doubles.ollama_server import Delay, Text, ToolCall

    def respond(body: dict[str, Any]) -> list[Any]:
        with clock.lock:
            clock.arrivals.append(time.perf_counter())
        turn = C.turn_number(body)
        if body["messages"][-1].get("role") == "user":
            return [Delay(FIRST_WAIT), ToolCall("slow_inventory", {"site": C.SITES[turn % 6]})]
        answer = C.answer_for(turn)
        pieces = len(Text(answer).pieces())
        return [Text(answer, chunk_delay=STREAM / pieces)]

    return respond


def read_for(child: pexpect.spawn, seconds: float) -> None:
    """Wait while reading the terminal, so the child never blocks on a full pty."""
    if seconds > 0:
        child.expect([pexpect.TIMEOUT], timeout=seconds)


def file_probe(path: Path) -> dict[str, int]:
    """Bytes in use and rows of a session file, read-only (works while the REPL
    holds it: a read sees the committed WAL too)."""
    from netbox_chat.store.database import read_only_connection

    with read_only_connection(path) as conn:
        q = conn.execute
        page = q("PRAGMA page_size").fetchone()[0]
        return {
            "bytes": q("PRAGMA page_count").fetchone()[0] * page,
            "checkpoints": q("SELECT count(*) FROM checkpoints").fetchone()[0],
            "writes": q("SELECT count(*) FROM writes").fetchone()[0],
        }


def cancel_moments(cancels: int, early: int, rng: random.Random) -> list[tuple[bool, float]]:
    """(early?, fraction of its window) for each cancel, shuffled: the same
    seed gives the same moments to every revision measured."""
    moments = [(False, rng.random()) for _ in range(cancels)]
    moments += [(True, rng.random()) for _ in range(early)]
    rng.shuffle(moments)
    return moments


def moment(planned: tuple[bool, float], length: float) -> float:
    early, fraction = planned
    return fraction * (EARLY if early else 0.9 * length)


def cancel_in_repl(
    env: dict[str, str],
    session_id: str,
    moments: list[tuple[bool, float]],
    clock: Clock,
    between: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """`resume` the session in the real REPL through a pty, take two whole
    turns, then one Ctrl-C at each of `moments`; `between` runs once after the
    warm-up turns (to read the store's rows before the cancels). Returns the
    times (with the phase each Ctrl-C hit), and how many Ctrl-Cs came too late
    and how many rollbacks were reported unverified."""
    repl = str(Path(__file__).with_name("_repl.py"))
    results: list[tuple[float, str]] = []
    late = 0
    before_turn = 0
    unverified = 0
    child = pexpect.spawn(
        C.PYTHON, [repl, "resume", session_id], env=env, dimensions=(40, 100), timeout=60
    )
    try:
        child.expect(C.PROMPT_RE)
        # Two whole turns first: the first waits for the agent build, the
        # second gives the length of an uninterrupted turn on this session.
        length = 0.0
        for n in (1, 2):
            started = time.perf_counter()
            child.send(f"warm-up question {n}\r")
            child.expect(DONE_THEN_PROMPT, timeout=120)
            length = time.perf_counter() - started
        print(f"an uninterrupted turn takes {length * 1000:.0f} ms on this session")
        between()
        for i, planned in enumerate(moments):
            child.send("\x15")  # clear the question a cancel offers again
            read_for(child, 0.05)
            sent = time.perf_counter()
            child.sendcontrol("c")
            child.expect(AT_THE_PROMPT, timeout=60)
            results.append((time.perf_counter() - sent, FLOOR))
            since = len(clock.arrivals)
            child.send("\x15" + C.question_for(i) + "\r")  # Ctrl-U clears a leftover
            if planned[0]:
                # From the status line, drawn as the turn starts: a Ctrl-C
                # sent before the prompt has handed the line over is a key
                # press at the prompt, not a cancel.
                child.expect(STATUS_LINE, timeout=30)
            entered = time.perf_counter()
            read_for(child, entered + moment(planned, length) - time.perf_counter())
            sent = time.perf_counter()
            phase = clock.phase(since, sent)
            child.sendintr()
            which = child.expect(
                [CANCELLED_THEN_PROMPT, DONE_THEN_PROMPT, BEFORE_THE_TURN], timeout=60
            )
            back = time.perf_counter()
            if which == 1:
                late += 1  # the turn ended before the Ctrl-C landed
                continue
            if which == 2:
                before_turn += 1  # no turn ran: nothing to roll back, nothing to time
                continue
            if b"could not be verified" in (child.match.group(1) or b""):
                unverified += 1
            results.append((back - sent, phase))
        child.send("\x15")  # clear the re-offered question, then Ctrl-D leaves
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    return {"times": results, "late": late, "before_turn": before_turn, "unverified": unverified}


def part_a(cached: dict[str, Any], moments: list[tuple[bool, float]]) -> dict[str, Any]:
    from tests.doubles.ollama_server import ScriptedOllama

    clock = Clock()
    with C.temp_dir("nbc-bench-cancel-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        sessions = C.fresh_copy(cached["stages"][500], tmp / "sessions")
        path = next(sessions.glob("*.sqlite"))
        ollama.responder = responder(clock)
        env = C.bench_env(
            NETBOX_CHAT_SESSIONS=str(sessions),
            OLLAMA_HOST=ollama.url,
            NETBOX_URL="http://127.0.0.1:9",
            NETBOX_CHAT_BENCH_SLOW_TOOL=str(SLOW_TOOL),
        )
        probes: list[dict[str, int]] = []
        run = cancel_in_repl(
            env, cached["id"], moments, clock, lambda: probes.append(file_probe(path))
        )
        after = file_probe(path)
        check = asyncio.run(check_session(sessions, cached["id"], ollama.url))
    return {**run, "check": check, "before": probes[0], "after": after}


async def check_session(sessions: Path, session_id: str, url: str) -> str:
    """After the run: the head must be clean and hold only finished turns."""
    from netbox_chat.store.sessions import SessionFile, SessionStore

    store = SessionStore(sessions)
    session = SessionFile.open(store, session_id)
    conversation = C.open_conversation(session, C.settings_for(sessions, url), C.bench_tools())
    try:
        problems = conversation.head_problems()
        turns = session.turns()
        done = [t for t in turns if t.status == "done"]
        cancelled = [t for t in turns if t.status == "cancelled"]
        messages = len(conversation.messages())
        expected = done[-1].message_count
    finally:
        C.close_conversation(conversation)
        session.close()
    state = "clean" if not problems and messages == expected else f"PROBLEMS {problems}"
    return (
        f"session after the run: {len(done)} done turns, {len(cancelled)} cancelled, "
        f"{messages} messages (expected {expected}), head {state}"
    )


# --- part B: the same on the Conversation, with the rollback split into steps -------------


class StepTimer:
    """Adds up the time spent in wrapped methods while a cancel is being measured."""

    def __init__(self) -> None:
        self.current: dict[str, float] | None = None

    def wrap(self, obj: Any, name: str, label: str) -> None:
        if not hasattr(obj, name):
            return  # a step the measured revision does not have
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                current = self.current
                if current is not None:
                    current[label] = current.get(label, 0.0) + (time.perf_counter() - started)
                    current[f"#{label}"] = current.get(f"#{label}", 0) + 1

        setattr(obj, name, timed)


ROLLBACK = "rollback, all of it"


async def part_b(cached: dict[str, Any], moments: list[tuple[bool, float]]) -> dict[str, Any]:
    from netbox_chat.agent.turns import message_ids
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama

    clock = Clock()
    rows: list[tuple[float, dict[str, float], bool]] = []
    mismatches = 0
    with C.temp_dir("nbc-bench-cancel-b-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        sessions = C.fresh_copy(cached["stages"][500], tmp / "sessions")
        ollama.responder = responder(clock)
        store = SessionStore(sessions)
        session = SessionFile.open(store, cached["id"])
        path = store.path_for(cached["id"])
        settings = C.settings_for(sessions, ollama.url)
        conversation = C.open_conversation(session, settings, C.bench_tools(SLOW_TOOL))
        saver, timer = conversation.saver, StepTimer()
        timer.wrap(conversation, "rollback", ROLLBACK)
        timer.wrap(saver, "drain", "drain the saver bridge")
        timer.wrap(saver, "truncate_after", "truncate_after (delete the turn's rows)")
        timer.wrap(conversation, "verify_rolled_back", "verify_rolled_back")
        timer.wrap(conversation, "_inspect_rows", "  head check from rows")
        timer.wrap(conversation.graph, "get_state", "  state read (graph.get_state)")
        timer.wrap(saver, "get_tuple", "    head row (saver.get_tuple)")
        timer.wrap(saver, "get_delta_channel_history", "    message history (delta query)")
        timer.wrap(session, "finish_turn", "ledger: finish_turn")
        timer.wrap(saver, "put", "saver.put (while unwinding)")
        timer.wrap(saver, "put_writes", "saver.put_writes (while unwinding)")
        try:
            started = time.perf_counter()
            outcome = await conversation.run_turn("warm-up")
            length = time.perf_counter() - started
            before = file_probe(path)
            for i, planned in enumerate(moments):
                ids_before = message_ids(conversation.messages())  # not timed
                task = asyncio.create_task(conversation.run_turn(C.question_for(i)))
                await asyncio.sleep(moment(planned, length))
                timer.current = {}
                sent = time.perf_counter()
                task.cancel()
                outcome = await task
                elapsed = time.perf_counter() - sent
                steps, timer.current = timer.current, None
                if outcome.status != "cancelled":
                    continue
                verified = outcome.rollback is not None and outcome.rollback.verified
                rows.append((elapsed, steps, verified))
                mismatches += message_ids(conversation.messages()) != ids_before  # not timed
            after = file_probe(path)
            # one more whole turn: the thread must still be healthy
            messages_before = len(conversation.messages())
            outcome = await conversation.run_turn("after the cancels")
            healthy = outcome.status == "done" and len(conversation.messages()) == (
                messages_before + 4
            )
            problems = conversation.head_problems()
        finally:
            C.close_conversation(conversation)
            session.close()
    return {
        "rows": rows,
        "before": before,
        "after": after,
        "healthy": healthy and not problems,
        "mismatches": mismatches,
    }


def growth(before: dict[str, int], after: dict[str, int], cancels: int) -> str:
    grown = after["bytes"] - before["bytes"]
    return (
        f"the file grew {grown:,} bytes over {cancels} cancels "
        f"({grown / max(1, cancels):,.0f} bytes per cancel); rows: checkpoints "
        f"{before['checkpoints']:,} -> {after['checkpoints']:,}, writes "
        f"{before['writes']:,} -> {after['writes']:,}"
    )


def cancels(a: dict[str, Any]) -> list[tuple[float, str]]:
    """The timed cancels (the floor's round trips left out)."""
    return [(t, phase) for t, phase in a["times"] if phase != FLOOR]


def report_a(label: str, a: dict[str, Any]) -> None:
    times = [t for t, _ in cancels(a)]
    if not times:
        print(f"\nA. {label}: no cancel landed inside a turn")
        return
    s = C.summary(times)
    print(
        f"\nA. {label}: real REPL through a pty, SIGINT -> prompt back (rollback done), "
        f"{s['n']} cancels: median {C.ms(s['median'])}, p95 {C.ms(s['p95'])}, "
        f"min {C.ms(s['min'])}, max {C.ms(s['max'])}"
    )
    print(
        f"   Ctrl-C before the turn began (not counted): {a.get('before_turn', 0)}; "
        f"after the turn had ended (not counted): {a['late']}; "
        f"rollbacks reported unverified: {a['unverified']}"
    )
    print(f"   {a['check']}")
    print(f"   {growth(a['before'], a['after'], len(cancels(a)) + a['late'])}")


def by_phase(a: dict[str, Any]) -> dict[str, list[float]]:
    phases: dict[str, list[float]] = {}
    for t, phase in a["times"]:
        phases.setdefault(phase, []).append(t)
    return phases


PHASES = (
    "before the first model request",
    "model call 1",
    "tool running",
    "streaming the answer",
)


def phase_table(runs: dict[str, dict[str, Any]]) -> None:
    """Where the Ctrl-C landed, one column group per measured revision."""
    labels = [label for label, figures in runs.items() if figures["a"]]
    print(f"\n   {'where the Ctrl-C landed':32}" + "".join(f" | {lb:>24}" for lb in labels))
    print(f"   {'':32}" + " | {:>3} {:>9} {:>9}".format("n", "median", "max") * len(labels))
    for phase in (*PHASES, FLOOR):
        cells = []
        for label in labels:
            values = by_phase(runs[label]["a"]).get(phase, [])
            cells.append(
                f" | {len(values):3} {C.ms(statistics.median(values)):>9} {C.ms(max(values)):>9}"
                if values
                else f" | {0:3} {'-':>9} {'-':>9}"
            )
        print(f"   {phase:32}" + "".join(cells))


def report_b(label: str, b: dict[str, Any]) -> None:
    rows = b["rows"]
    if not rows:
        return
    s = C.summary([r[0] for r in rows])
    print(
        f"\nB. {label}: Conversation only (task.cancel(), no REPL), {s['n']} cancels: "
        f"median {C.ms(s['median'])}, p95 {C.ms(s['p95'])}, max {C.ms(s['max'])}; "
        f"verified {sum(r[2] for r in rows)}/{len(rows)}; messages differing from the "
        f"pre-turn ones afterwards (checked untimed): {b['mismatches']}"
    )
    labels: dict[str, None] = {}
    for _, steps, _ in rows:
        labels.update(dict.fromkeys(k for k in steps if not k.startswith("#")))
    print("   where the time goes (median over cancels; calls per cancel):")
    for step in labels:
        values = [steps.get(step, 0.0) for _, steps, _ in rows]
        calls = statistics.median([steps.get(f"#{step}", 0) for _, steps, _ in rows])
        print(f"     {step:42} {statistics.median(values) * 1000:6.1f} ms  x{calls:g}")
    unwinding = [t - steps.get(ROLLBACK, 0.0) for t, steps, _ in rows]
    print(
        f"     {'outside the rollback (task unwinding)':42} "
        f"{statistics.median(unwinding) * 1000:6.1f} ms"
    )
    print(f"   {growth(b['before'], b['after'], len(rows))}")
    print(f"   a whole turn after the cancels: {'healthy' if b['healthy'] else 'BROKEN'}")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    cached = C.cached_sessions()
    rng = random.Random(args.seed)
    a = None if args.skip_repl else part_a(cached, cancel_moments(args.cancels, args.early, rng))
    b = None
    if args.inproc:
        b = asyncio.run(part_b(cached, cancel_moments(args.inproc, args.early // 2, rng)))
    return {"a": a, "b": b}


def verdicts(a: dict[str, Any]) -> None:
    times = [t for t, _ in cancels(a)]
    if not times:
        return
    s = C.summary(times)
    median = "met" if s["median"] <= 0.100 else "NOT met"
    p95 = "met" if s["p95"] <= 0.250 else "NOT met"
    print(f"\nTARGET median <= 100 ms: {C.ms(s['median'])} -> {median}")
    print(f"TARGET p95 <= 250 ms: {C.ms(s['p95'])} -> {p95}")
    phases = by_phase(a)
    for phase in PHASES:
        values = phases.get(phase)
        if not values:
            print(f"TARGET {phase}: no cancel landed there -> NOT measured")
            continue
        met = statistics.median(values) <= 0.025 and max(values) <= 0.060
        print(
            f"TARGET {phase}: median {C.ms(statistics.median(values))} <= 25 ms, "
            f"max {C.ms(max(values))} <= 60 ms -> {'met' if met else 'NOT met'}"
        )
    checks = (
        a["unverified"] == 0
        and "head clean" in a["check"]
        and a["after"]["checkpoints"] == a["before"]["checkpoints"] + a["late"]
    )
    print(
        "CHECK every rollback verified, head clean, no rows left by the cancels -> "
        f"{'ok' if checks else 'FAILED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=50, help="part A cancels (REPL)")
    parser.add_argument("--early", type=int, default=10, help="more cancels in the first 50 ms")
    parser.add_argument("--inproc", type=int, default=20, help="part B cancels (0: skip)")
    parser.add_argument("--skip-repl", action="store_true", help="part B only")
    parser.add_argument("--seed", type=int, default=7, help="seed of the cancel moments")
    parser.add_argument("--against", metavar="REV", help="measure REV's netbox_chat/ first")
    parser.add_argument("--figures", type=Path, help=argparse.SUPPRESS)  # JSON, for --against
    args = parser.parse_args()

    if args.figures:  # measuring another revision for --against: figures only
        args.figures.write_text(json.dumps(measure(args)))
        return
    C.header("bench 3: Ctrl-C to prompt on a 500-turn session")
    C.cached_sessions()  # this tree's, built before any timing starts
    runs: dict[str, dict[str, Any]] = {}
    if args.against:
        forwarded = [
            f"--cancels={args.cancels}",
            f"--early={args.early}",
            f"--inproc={args.inproc}",
            f"--seed={args.seed}",
            *(["--skip-repl"] if args.skip_repl else []),
        ]
        runs[args.against] = C.figures_of_revision("bench_cancel.py", args.against, forwarded)
    runs["this tree"] = measure(args)
    for label, figures in runs.items():
        if figures["a"] is not None:
            report_a(label, figures["a"])
    if any(figures["a"] for figures in runs.values()):
        phase_table(runs)
    for label, figures in runs.items():
        if figures["b"] is not None:
            report_b(label, figures["b"])
    if runs["this tree"]["a"] is not None:
        print("\n(targets: this tree)")
        verdicts(runs["this tree"]["a"])


if __name__ == "__main__":
    main()
