"""Benchmark 3: Ctrl-C to prompt, on a 500-turn session.

Part A drives the real REPL through a pty (pexpect): `netbox-chat resume` of a
copy of the cached 500-turn session, run by bench/_repl.py so the agent gets a
slow tool instead of the NetBox tools; the scripted Ollama server runs in this
process on 127.0.0.1. Every turn is: model call 1 (waits, then asks for the
slow tool), the slow tool, model call 2 (streams the answer). For each of the
cancels this script types a question, waits a random moment of the turn, sends
SIGINT through the terminal (Ctrl-C), and measures until the prompt is drawn
again after the REPL has printed "turn N cancelled ... rolled back" (it prints
that after the rollback and its verification have finished).

Part A is then repeated with a what-if rollback (bench/_common.py,
install_truncating_rollback: delete the rows the turn added instead of writing
a restore), to show the figure the recommended design change gives.

Part B (diagnosis) does the same on the Conversation directly (task.cancel()
instead of SIGINT, no REPL) and splits the time into the rollback's steps, for
the shipped rollback and the what-if.

Target (issue 7): median at most 100 ms, p95 at most 250 ms (part A).

    .venv/bin/python bench/bench_cancel.py [--cancels 50] [--what-if-cancels 30]
        [--inproc 20] [--seed 7] [--skip-repl]
"""

from __future__ import annotations

import argparse
import asyncio
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

FIRST_WAIT = 0.3  # model call 1: seconds before it asks for the tool
SLOW_TOOL = 1.0  # the tool's seconds
STREAM = 0.8  # model call 2: seconds of streamed answer

CANCELLED_THEN_PROMPT = re.compile(rb"turn \d+ cancelled(.*?)" + C.PROMPT_RE.pattern, re.S)
DONE_THEN_PROMPT = re.compile(rb"turn \d+ \xc2\xb7 tokens.*?" + C.PROMPT_RE.pattern, re.S)


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
    from tests.ollama_server import Delay, Text, ToolCall

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


def part_a(
    cached: dict[str, Any], cancels: int, rng: random.Random, *, truncate: bool = False
) -> dict[str, Any]:
    from tests.ollama_server import ScriptedOllama

    repl = str(Path(__file__).with_name("_repl.py"))
    clock = Clock()
    results: list[tuple[float, str]] = []
    late = 0
    unverified = 0
    with C.temp_dir("nbc-bench-cancel-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        sessions = C.fresh_copy(cached["stages"][500], tmp / "sessions")
        path = next(sessions.glob("*.sqlite"))
        size_before = C.session_bytes(path)
        ollama.responder = responder(clock)
        env = C.bench_env(
            NETBOX_CHAT_SESSIONS=str(sessions),
            OLLAMA_HOST=ollama.url,
            NETBOX_URL="http://127.0.0.1:9",
            NETBOX_CHAT_BENCH_SLOW_TOOL=str(SLOW_TOOL),
            NETBOX_CHAT_BENCH_ROLLBACK="truncate" if truncate else "shipped",
        )
        child = pexpect.spawn(
            C.PYTHON, [repl, "resume", cached["id"]], env=env, dimensions=(40, 100), timeout=60
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
            for i in range(cancels):
                since = len(clock.arrivals)
                child.send("\x15" + C.question_for(i) + "\r")  # Ctrl-U clears a leftover
                entered = time.perf_counter()
                moment = rng.uniform(0.0, 0.9 * length)
                read_for(child, entered + moment - time.perf_counter())
                sent = time.perf_counter()
                phase = clock.phase(since, sent)
                child.sendintr()
                which = child.expect([CANCELLED_THEN_PROMPT, DONE_THEN_PROMPT], timeout=60)
                back = time.perf_counter()
                if which == 1:
                    late += 1  # the turn ended before the Ctrl-C landed
                    continue
                if b"could not be verified" in (child.match.group(1) or b""):
                    unverified += 1
                results.append((back - sent, phase))
            child.send("\x15")  # clear the re-offered question, then Ctrl-D leaves
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=60)
        finally:
            child.close(force=True)
        grown = C.session_bytes(path) - size_before
        check = asyncio.run(check_session(sessions, cached["id"], ollama.url))
    return {
        "times": results,
        "late": late,
        "unverified": unverified,
        "length": length,
        "check": check,
        "truncate": truncate,
        "grown": grown,
    }


async def check_session(sessions: Path, session_id: str, url: str) -> str:
    """After the run: the head must be clean and hold only finished turns."""
    from netbox_chat.sessions import SessionFile, SessionStore

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
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                if self.current is not None:
                    self.current[label] = self.current.get(label, 0.0) + (
                        time.perf_counter() - started
                    )
                    count = f"#{label}"
                    self.current[count] = self.current.get(count, 0) + 1

        setattr(obj, name, timed)


async def part_b(
    cached: dict[str, Any], count: int, rng: random.Random, *, truncate: bool
) -> dict[str, Any]:
    from netbox_chat.sessions import SessionFile, SessionStore
    from netbox_chat.turns import message_ids
    from tests.ollama_server import ScriptedOllama

    clock = Clock()
    rows: list[tuple[float, dict[str, float], str, bool]] = []
    mismatches = 0
    with C.temp_dir("nbc-bench-cancel-b-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        sessions = C.fresh_copy(cached["stages"][500], tmp / "sessions")
        ollama.responder = responder(clock)
        store = SessionStore(sessions)
        session = SessionFile.open(store, cached["id"])
        path = store.path_for(cached["id"])
        settings = C.settings_for(sessions, ollama.url)
        conversation = C.open_conversation(session, settings, C.bench_tools(SLOW_TOOL))
        if truncate:
            C.install_truncating_rollback(conversation)
        timer = StepTimer()
        timer.wrap(conversation, "rollback", "rollback, all of it")
        timer.wrap(conversation.saver, "drain", "wait for in-flight saver calls")
        timer.wrap(conversation, "committed_values", "state reads (committed_values)")
        timer.wrap(conversation.graph, "update_state", "update_state (restore writes)")
        timer.wrap(conversation, "verify", "verify (incl. one state read)")
        timer.wrap(conversation, "head_checkpoint_id", "head checkpoint id (get_tuple)")
        timer.wrap(conversation, "_has_pending_writes", "pending-writes check (get_tuple)")
        timer.wrap(conversation.session, "finish_turn", "ledger: finish_turn")
        try:
            started = time.perf_counter()
            outcome = await conversation.run_turn("warm-up")
            length = time.perf_counter() - started
            size_before = C.session_bytes(path)
            for i in range(count):
                ids_before = message_ids(conversation.messages())  # not timed
                since = len(clock.arrivals)
                task = asyncio.create_task(conversation.run_turn(C.question_for(i)))
                await asyncio.sleep(rng.uniform(0.0, 0.9 * length))
                phase = clock.phase(since, time.perf_counter())
                timer.current = {}
                sent = time.perf_counter()
                task.cancel()
                outcome = await task
                elapsed = time.perf_counter() - sent
                steps, timer.current = timer.current, None
                if outcome.status != "cancelled":
                    continue
                verified = outcome.rollback is not None and outcome.rollback.verified
                rows.append((elapsed, steps, phase, verified))
                mismatches += message_ids(conversation.messages()) != ids_before  # not timed
            session.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with conversation.saver.lock:
                conversation.saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            grown = C.session_bytes(path) - size_before
            # one more whole turn: the thread must still be healthy
            before = len(conversation.messages())
            outcome = await conversation.run_turn("after the cancels")
            after = len(conversation.messages())
            healthy = outcome.status == "done" and after == before + 4
            problems = conversation.head_problems()
        finally:
            C.close_conversation(conversation)
            session.close()
    return {
        "rows": rows,
        "length": length,
        "grown": grown,
        "healthy": healthy and not problems,
        "truncate": truncate,
        "mismatches": mismatches,
    }


def report_a(a: dict[str, Any]) -> float | None:
    times = [t for t, _ in a["times"]]
    if not times:
        print("no cancel landed inside a turn")
        return None
    s = C.summary(times)
    title = "WHAT-IF rollback by truncating the turn's rows" if a["truncate"] else "as shipped"
    print(
        f"\nA. real REPL through a pty, {title}, SIGINT -> prompt back (rollback done), "
        f"{s['n']} cancels: median {C.ms(s['median'])}, p95 {C.ms(s['p95'])}, "
        f"min {C.ms(s['min'])}, max {C.ms(s['max'])}"
    )
    by_phase: dict[str, list[float]] = {}
    for t, phase in a["times"]:
        by_phase.setdefault(phase, []).append(t)
    for phase, values in sorted(by_phase.items()):
        print(f"   {phase:34} n={len(values):2}  median {C.ms(statistics.median(values))}")
    print(
        f"   Ctrl-C after the turn had ended (not counted): {a['late']}; "
        f"rollbacks reported unverified: {a['unverified']}"
    )
    print(f"   {a['check']}")
    print(
        f"   the session file grew {a['grown'] / 1e6:.1f} MB over 2 whole turns and "
        f"{len(a['times']) + a['late']} cancels"
    )
    return s["median"]


def report_b(b: dict[str, Any]) -> None:
    rows = b["rows"]
    if not rows:
        return
    s = C.summary([r[0] for r in rows])
    title = (
        "WHAT-IF rollback by truncating the turn's rows"
        if b["truncate"]
        else "as shipped (two-pass restore)"
    )
    print(
        f"\nB. Conversation only (task.cancel(), no REPL), {title}, {s['n']} cancels: "
        f"median {C.ms(s['median'])}, p95 {C.ms(s['p95'])}, max {C.ms(s['max'])}; "
        f"verified {sum(r[3] for r in rows)}/{len(rows)}; messages differing from the "
        f"pre-turn ones afterwards (checked untimed): {b['mismatches']}"
    )
    labels: dict[str, None] = {}
    for _, steps, _, _ in rows:
        labels.update(dict.fromkeys(k for k in steps if not k.startswith("#")))
    print("   where the time goes (median over cancels; calls per cancel):")
    for label in labels:
        values = [steps.get(label, 0.0) for _, steps, _, _ in rows]
        calls = statistics.median([steps.get(f"#{label}", 0) for _, steps, _, _ in rows])
        print(f"     {label:38} {statistics.median(values) * 1000:6.1f} ms  x{calls:g}")
    unwinding = [t - steps.get("rollback, all of it", 0.0) for t, steps, _, _ in rows]
    print(
        f"     {'outside the rollback (task unwinding)':38} "
        f"{statistics.median(unwinding) * 1000:6.1f} ms"
    )
    print(
        f"   session file grew {b['grown'] / len(rows) / 1000:.0f} kB per cancel; "
        f"a whole turn after the cancels: {'healthy' if b['healthy'] else 'BROKEN'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=50)
    parser.add_argument("--inproc", type=int, default=20, help="part B cancels (0: skip)")
    parser.add_argument("--skip-repl", action="store_true", help="part B only")
    parser.add_argument(
        "--what-if-cancels", type=int, default=30, help="part A again, what-if rollback"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    C.header("bench 3: Ctrl-C to prompt on a 500-turn session")
    cached = C.cached_sessions()
    rng = random.Random(args.seed)
    a = part_a(cached, args.cancels, rng) if not args.skip_repl else None
    a_what_if = None
    if args.what_if_cancels and not args.skip_repl:
        a_what_if = part_a(cached, args.what_if_cancels, rng, truncate=True)
    parts_b = []
    if args.inproc:
        for truncate in (False, True):
            parts_b.append(asyncio.run(part_b(cached, args.inproc, rng, truncate=truncate)))
    if a is not None:
        report_a(a)
    if a_what_if is not None:
        report_a(a_what_if)
    for b in parts_b:
        report_b(b)
    times = [t for t, _ in a["times"]] if a is not None else []
    if times:
        s = C.summary(times)
        ok_median, ok_p95 = s["median"] <= 0.100, s["p95"] <= 0.250
        print(
            f"TARGET median <= 100 ms: {C.ms(s['median'])} -> {'met' if ok_median else 'NOT met'}"
        )
        print(f"TARGET p95 <= 250 ms: {C.ms(s['p95'])} -> {'met' if ok_p95 else 'NOT met'}")


if __name__ == "__main__":
    main()
