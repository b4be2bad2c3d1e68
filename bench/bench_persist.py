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

    .venv/bin/python bench/bench_persist.py [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import _common as C


async def run(turns: int) -> dict[str, list[float]]:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from netbox_chat.agent import build_agent
    from netbox_chat.sessions import SessionFile, SessionStore
    from tests.ollama_server import ScriptedOllama

    class MemorySaver(InMemorySaver):
        def drain(self, timeout: float | None = None) -> None:
            pass

        def ids_after(self, checkpoint_id: str | None) -> None:
            pass

    from netbox_chat.checkpointer import BridgedSqliteSaver

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
        raw_file_saver = BridgedSqliteSaver(raw_session.db)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="turns on each conversation")
    args = parser.parse_args()

    C.header("bench 6: per-turn persistence cost")
    times = asyncio.run(run(args.turns))
    n = args.turns
    window = max(1, n // 5)
    early, late = slice(0, window), slice(n - window, n)
    print(f"\nms per turn (mean), turns 1-{window}, {n - window + 1}-{n} and all:")
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

    print("\nadded by the session file (ms per turn, median of the per-turn differences):")
    for a, b in (
        ("file (shipped)", "memory"),
        ("raw graph, file saver", "raw graph, memory saver"),
    ):
        print(
            f"  {a:32} vs {b:24} early {added(a, b, early):+6.1f}   late {added(a, b, late):+6.1f}"
        )
    print(
        "\n(no target in the issue: this is the figure to watch; the scripted model "
        "answers at once, so real turns are seconds longer and the share is smaller)"
    )


if __name__ == "__main__":
    main()
