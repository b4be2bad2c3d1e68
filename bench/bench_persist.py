"""Benchmark 6: per-turn persistence cost, session file vs memory.

The same scripted turns (instant model, a tool call every second turn) run on
several conversations side by side, turn i on each before turn i + 1 on any,
so drift hits all of them alike:

  file    Conversation.run_turn, BridgedSqliteSaver on the session file (shipped)
  memory  Conversation.run_turn, LangGraph's InMemorySaver (plus a no-op drain)
  raw graph, file / memory saver   graph.ainvoke alone with the same two savers
          and the same durability="exit" as a turn (no head checks, no ledger:
          the checkpointer's own cost)

The ledger (our turns table) is written to a session file in both
Conversation variants, so the difference is the checkpointer's cost.

Then a turn's own overhead (issue 17): its wall time minus the time spent in
the agent's `model` node (deepagents' middleware, building the request, HTTP,
parsing the answer) and its `tools` node, on copies of the cached 50- and
500-turn sessions, turn i on each before turn i + 1. What is left is ours and
LangGraph's: the head check, loading the state, persisting, the ledger.
Target: at 500 turns at most 10 ms more than at 50. Each session runs twice:
as shipped (the bridge keeps the decoded history between turns) and with the
history cache off (`history_cache=False`: every turn decodes the whole
history, as before), so one run shows both.

`--against REV` first measures `netbox_chat/` as committed at REV (extracted
with `git archive`; the same harness and cached sessions) and prints its
figures beside this tree's.

    .venv/bin/python bench/bench_persist.py [--turns 100] [--overhead-turns 30] [--against REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import _common as C


async def run(turns: int) -> dict[str, list[float]]:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from netbox_chat.agent.graph import build_agent
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama

    class MemorySaver(InMemorySaver):
        def drain(self, timeout: float | None = None) -> None:
            pass

        def ids_after(self, checkpoint_id: str | None) -> None:
            pass

    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

    times: dict[str, list[float]] = {}
    with C.temp_dir("nbc-bench-persist-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        ollama.responder = C.instant_responder
        settings = C.settings_for(tmp, ollama.url)
        store = SessionStore(tmp)
        sessions = []

        def conversation(saver: Any = None) -> Any:
            session = SessionFile.create(store, model=settings.model)
            sessions.append(session)
            return C.open_conversation(session, settings, C.bench_tools(), saver)

        conversations = {
            "file (shipped)": conversation(),
            "memory": conversation(MemorySaver()),
        }
        raw_session = SessionFile.create(store, model=settings.model)
        sessions.append(raw_session)
        raw_file_saver = BridgedSqliteSaver(raw_session.db, raw_session.id)
        raws = {
            "raw graph, file saver": build_agent(settings, C.bench_tools(), raw_file_saver),
            "raw graph, memory saver": build_agent(settings, C.bench_tools(), MemorySaver()),
        }
        times = {name: [] for name in [*conversations, *raws]}
        try:
            for turn in range(1, turns + 1):
                question = C.question_for(turn)
                for name, conv in conversations.items():
                    started = time.perf_counter()
                    outcome = await conv.run_turn(question)
                    times[name].append(time.perf_counter() - started)
                    if outcome.status != "done":
                        raise RuntimeError(f"{name} turn {turn}: {outcome.error}")
                for name, graph in raws.items():
                    config = {"configurable": {"thread_id": name}}
                    started = time.perf_counter()
                    await graph.ainvoke(
                        {"messages": [HumanMessage(question)]}, config, durability="exit"
                    )
                    times[name].append(time.perf_counter() - started)
        finally:
            for conv in conversations.values():
                C.close_conversation(conv)
            for session in sessions:
                session.close()
    return times


def time_node(graph: Any, name: str, spent: list[float]) -> None:
    """Add the seconds `graph`'s node `name` runs to `spent[0]`."""
    bound = graph.nodes[name].bound
    inner = bound.afunc

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started

    bound.afunc = timed


CACHE_OFF = ", history cache off"
"""The "before" rows: the same tree with the bridge's history cache disabled,
so every turn decodes the whole history the way LangGraph's own walk does."""


def uncached_saver(session: Any) -> Any:
    """The session's saver with the history cache off (a revision measured by
    `--against` that predates the cache has none to turn off)."""
    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

    try:
        return BridgedSqliteSaver(session.db, session.id, history_cache=False)
    except TypeError:
        return BridgedSqliteSaver(session.db, session.id)


async def overhead(turns: int) -> dict[str, list[float]]:
    """Per-turn overhead (wall time minus the model and tools nodes) on the
    cached 50- and 500-turn sessions, with the history cache and without,
    interleaved; the first turn on each is a warm-up."""
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama

    cached = C.cached_sessions()
    spent = [0.0]
    times: dict[str, list[float]] = {}
    with C.temp_dir("nbc-bench-overhead-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        ollama.responder = C.instant_responder
        conversations = {}
        for variant in ("", CACHE_OFF):
            for stage in (50, 500):
                name = f"{stage} turns{variant}"
                sessions = C.fresh_copy(cached["stages"][stage], tmp / f"{stage}{bool(variant)}")
                session = SessionFile.open(SessionStore(sessions), cached["id"])
                settings = C.settings_for(sessions, ollama.url)
                saver = uncached_saver(session) if variant else None
                conv = C.open_conversation(session, settings, C.bench_tools(), saver)
                for node in ("model", "tools"):
                    time_node(conv.graph, node, spent)
                conversations[name] = conv
                times[name] = []
        try:
            for turn in range(turns + 1):
                for name, conv in conversations.items():
                    spent[0] = 0.0
                    started = time.perf_counter()
                    outcome = await conv.run_turn(C.question_for(turn))
                    elapsed = time.perf_counter() - started
                    if outcome.status != "done":
                        raise RuntimeError(f"{name} turn {turn}: {outcome.error}")
                    if turn:
                        times[name].append(elapsed - spent[0])
            # the cache must load what the file holds: compare with an uncached saver
            for stage in (50, 500):
                cached_view = conversations[f"{stage} turns"]
                session = cached_view.session
                fresh = C.open_conversation(
                    session, settings, C.bench_tools(), uncached_saver(session)
                )
                same = cached_view.messages() == fresh.messages()
                C.close_conversation(fresh)
                times[f"the cache at {stage} turns loads what the file holds"] = [float(same)]
                histories = getattr(cached_view.saver, "histories", None)
                if histories is not None:
                    times[f"reads at {stage} turns: walks, reuses"] = [
                        float(histories.walks),
                        float(histories.reuses),
                    ]
        finally:
            for conv in conversations.values():
                C.close_conversation(conv)
                conv.session.close()
    return times


def measure(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "persist": asyncio.run(run(args.turns)),
        "overhead": asyncio.run(overhead(args.overhead_turns)),
    }


def report_persist(label: str, times: dict[str, list[float]], n: int) -> None:
    window = max(1, n // 5)
    early, late = slice(0, window), slice(n - window, n)
    print(f"\n{label}: ms per turn (mean), turns 1-{window}, {n - window + 1}-{n} and all:")
    print(f"{'':34} {'early':>8} {'late':>8} {'all':>8}")
    for name, values in times.items():
        print(
            f"{name:34} {statistics.mean(values[early]) * 1000:8.1f} "
            f"{statistics.mean(values[late]) * 1000:8.1f} {statistics.mean(values) * 1000:8.1f}"
        )

    def added(a: str, b: str, part: slice) -> float:
        # The median of the per-turn differences (same turn, same shape): a
        # full garbage collection lands on a few turns at random and would
        # swing a difference of means over 20 turns by several ms.
        pairs = zip(times[a][part], times[b][part], strict=True)
        return statistics.median(x - y for x, y in pairs) * 1000

    print("added by the session file (ms per turn, median of the per-turn differences):")
    for a, b in (
        ("file (shipped)", "memory"),
        ("raw graph, file saver", "raw graph, memory saver"),
    ):
        print(
            f"  {a:32} vs {b:24} early {added(a, b, early):+6.1f}   late {added(a, b, late):+6.1f}"
        )


def overhead_growth(times: dict[str, list[float]], variant: str = "") -> float:
    """Median of the per-turn differences, 500 turns minus 50 (seconds)."""
    pairs = zip(times[f"500 turns{variant}"], times[f"50 turns{variant}"], strict=True)
    return statistics.median(x - y for x, y in pairs)


def report_overhead(runs: dict[str, dict[str, Any]]) -> None:
    print("\na turn's own overhead (wall time minus the model and tools nodes), median ms:")
    print(f"   {'':44} {'50 turns':>9} {'500 turns':>10} {'500 - 50':>9}")
    for label, figures in runs.items():
        times = figures["overhead"]
        for variant in ("", CACHE_OFF):
            print(
                f"   {label + variant:44} "
                f"{statistics.median(times[f'50 turns{variant}']) * 1000:9.1f} "
                f"{statistics.median(times[f'500 turns{variant}']) * 1000:10.1f} "
                f"{overhead_growth(times, variant) * 1000:+9.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="turns on each conversation")
    parser.add_argument(
        "--overhead-turns", type=int, default=30, help="turns on each cached session"
    )
    parser.add_argument("--against", metavar="REV", help="measure REV's netbox_chat/ first")
    parser.add_argument("--figures", type=Path, help=argparse.SUPPRESS)  # JSON, for --against
    args = parser.parse_args()

    if args.figures:  # measuring another revision for --against: figures only
        args.figures.write_text(json.dumps(measure(args)))
        return
    C.header("bench 6: per-turn persistence cost, and a turn's own overhead")
    C.cached_sessions()  # this tree's, built before any timing starts
    runs: dict[str, dict[str, Any]] = {}
    if args.against:
        forwarded = [f"--turns={args.turns}", f"--overhead-turns={args.overhead_turns}"]
        runs[args.against] = C.figures_of_revision("bench_persist.py", args.against, forwarded)
    runs["this tree"] = measure(args)
    for label, figures in runs.items():
        report_persist(label, figures["persist"], args.turns)
    report_overhead(runs)
    for stage in (50, 500):
        figures = runs["this tree"]["overhead"]
        same = figures[f"the cache at {stage} turns loads what the file holds"]
        walks, reuses = figures[f"reads at {stage} turns: walks, reuses"]
        print(
            f"CHECK the history cache loads what the file holds ({stage} turns) -> "
            f"{'ok' if same == [1.0] else 'FAILED'}; history reads: {walks:.0f} walked the "
            f"file, {reuses:.0f} reused the kept history"
        )
    growth = overhead_growth(runs["this tree"]["overhead"])
    verdict = "met" if growth <= 0.010 else "NOT met"
    print(
        f"\nTARGET (this tree) overhead at 500 turns <= at 50 turns + 10 ms: "
        f"{growth * 1000:+.1f} ms -> {verdict}"
    )
    print(
        "(the scripted model answers at once, so real turns are seconds longer and the "
        "share is smaller)"
    )


if __name__ == "__main__":
    main()
