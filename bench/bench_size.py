"""Benchmark 4: session file size after 10, 100 and 500 turns, and bytes per turn
against the JSON size of the turn's messages.

The sessions are the cached ones (real Conversation, real ChatOllama, scripted
Ollama server; every second turn calls one tool with a ~1 kB result), closed
after each stage, so a size is the file as it stays on disk (WAL folded in).
The JSON size of a turn is `json.dumps(messages_to_dict(turn's messages))`
(LangChain's own serialization); the bare wire form (role, content,
tool_calls) is shown too.

Target (issue 7): linear growth, at most 2x the JSON size per turn.

What-ifs (not the shipped design, `--what-if-turns 0` skips them): the same
turns built with `astream(..., durability="exit")` (one checkpoint per turn
instead of one per step), with and without deepagents' periodic snapshot of
`messages` (snapshot_frequency=50 updates), and then also without the copy of
every message id that begin_turn writes into the ledger (not needed when a
rollback truncates, see bench 3), to show what each contributes.

    .venv/bin/python bench/bench_size.py [--what-if-turns 500]
"""

# No `from __future__ import annotations` here: the what-if state class below
# must have its annotations evaluated where it is defined.
import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _common as C


def turns_of(messages: list[Any]) -> list[list[Any]]:
    from langchain_core.messages import HumanMessage

    turns: list[list[Any]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def wire(message: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.type, "content": message.content}
    if getattr(message, "tool_calls", None):
        data["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    return data


def json_sizes(session_dir: Path, session_id: str) -> tuple[float, float, int, float]:
    """(mean LangChain-JSON bytes per turn, mean wire-JSON bytes per turn, turns,
    median ms of one state read)."""
    from langchain_core.messages import messages_to_dict

    from netbox_chat.sessions import SessionFile, SessionStore

    with C.temp_dir("nbc-bench-size-") as tmp:
        sessions = C.fresh_copy(session_dir, tmp / "s")
        session = SessionFile.open(SessionStore(sessions), session_id)
        conversation = C.open_conversation(
            session, C.settings_for(sessions, "http://127.0.0.1:9"), C.bench_tools()
        )
        try:
            reads = []
            for _ in range(5):
                began = time.perf_counter()
                messages = conversation.messages()
                reads.append(time.perf_counter() - began)
        finally:
            C.close_conversation(conversation)
            session.close()
    turns = turns_of(messages)
    full = [len(json.dumps(messages_to_dict(t)).encode()) for t in turns]
    bare = [len(json.dumps([wire(m) for m in t]).encode()) for t in turns]
    return sum(full) / len(full), sum(bare) / len(bare), len(turns), sorted(reads)[2] * 1000


def vacuumed_size(path: Path) -> int:
    """Size of a VACUUMed copy (B-tree pages packed full): the page overhead."""
    with C.temp_dir("nbc-bench-vacuum-") as tmp:
        target = tmp / "vacuumed.sqlite"
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            conn.execute("VACUUM INTO ?", (str(target),))
        finally:
            conn.close()
        return target.stat().st_size


def anatomy(path: Path) -> dict[str, int]:
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        q = conn.execute
        page = q("PRAGMA page_size").fetchone()[0]
        snapshots = q(
            "SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints "
            "WHERE length(checkpoint) > 20000"
        ).fetchone()
        return {
            "file": path.stat().st_size,
            "checkpoints": q("SELECT count(*) FROM checkpoints").fetchone()[0],
            "checkpoint blobs": q(
                "SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints"
            ).fetchone()[0],
            "snapshot checkpoints": snapshots[0],
            "snapshot blobs": snapshots[1],
            "writes": q("SELECT count(*) FROM writes").fetchone()[0],
            "write blobs": q("SELECT sum(length(value)) FROM writes").fetchone()[0],
            "ledger": q(
                "SELECT sum(length(question) + length(coalesce(answer, '')) + length(tool_calls) "
                "+ length(coalesce(snapshot_message_ids, '')) + 120) FROM turns"
            ).fetchone()[0],
            "free pages": q("PRAGMA freelist_count").fetchone()[0] * page,
            "size after VACUUM": vacuumed_size(path),
        }
    finally:
        conn.close()


# --- what-ifs ---------------------------------------------------------------------------------


@contextlib.contextmanager
def messages_snapshot_frequency(frequency: int | None) -> Iterator[None]:
    """Build agents whose `messages` DeltaChannel snapshots every `frequency` updates."""
    if frequency is None:
        yield
        return
    from typing import Annotated, Required

    import deepagents.graph as graph_module
    from langchain_core.messages import AnyMessage
    from langgraph.channels.delta import DeltaChannel

    original = graph_module.DeepAgentState
    reducer = graph_module._messages_delta_reducer

    class State(original):  # type: ignore[misc,valid-type]
        messages: Required[  # type: ignore[misc]
            Annotated[list[AnyMessage], DeltaChannel(reducer, snapshot_frequency=frequency)]
        ]

    graph_module.DeepAgentState = State
    try:
        yield
    finally:
        graph_module.DeepAgentState = original


async def build_variant(
    folder: Path,
    turns: int,
    *,
    exit_durability: bool,
    frequency: int | None,
    ledger_ids: bool = True,
) -> dict[str, Any]:
    from netbox_chat.sessions import SessionFile, SessionStore
    from tests.ollama_server import ScriptedOllama

    store = SessionStore(folder)
    sizes: dict[int, int] = {}
    per_turn: dict[int, float] = {}
    read_ms = 0.0
    vacuumed = 0
    with ScriptedOllama(lifetime=900) as ollama:
        ollama.responder = C.instant_responder
        settings = C.settings_for(folder, ollama.url)
        session = SessionFile.create(store, model=settings.model)
        session_id = session.id
        session.close()
        done = 0
        stages = sorted({10, 100, turns})
        for stage in stages:
            session = SessionFile.open(store, session_id)
            with messages_snapshot_frequency(frequency):
                conversation = C.open_conversation(session, settings, C.bench_tools())
            if not ledger_ids:
                # What truncation rollback allows: the turn row needs no copy of
                # every message id (written at begin_turn, O(history), then nulled).
                begin_turn = session.begin_turn

                def without_ids(question: str, _begin: Any = begin_turn, **kwargs: Any) -> int:
                    return _begin(question, **{**kwargs, "message_ids": []})

                session.begin_turn = without_ids
            if exit_durability:
                conversation.graph.astream = functools.partial(
                    conversation.graph.astream, durability="exit"
                )
            try:
                started, first = time.perf_counter(), done
                while done < stage:
                    done += 1
                    outcome = await conversation.run_turn(C.question_for(done))
                    if outcome.status != "done":
                        raise RuntimeError(f"turn {done}: {outcome.status} {outcome.error}")
                per_turn[stage] = (time.perf_counter() - started) / max(1, done - first)
                if stage == stages[-1]:
                    reads = []
                    for _ in range(5):
                        began = time.perf_counter()
                        conversation.messages()
                        reads.append(time.perf_counter() - began)
                    read_ms = sorted(reads)[2] * 1000
            finally:
                C.close_conversation(conversation)
                session.close()
            sizes[stage] = C.session_bytes(store.path_for(session_id))
        vacuumed = vacuumed_size(store.path_for(session_id))
    return {"sizes": sizes, "per_turn": per_turn, "read_ms": read_ms, "vacuumed": vacuumed}


def print_growth(label: str, sizes: dict[int, int], json_per_turn: float) -> list[float]:
    stages = sorted(sizes)
    cells = "  ".join(f"{n} turns {sizes[n] / 1e6:6.2f} MB" for n in stages)
    print(f"{label:44} {cells}")
    slopes = []
    for a, b in itertools.pairwise(stages):
        slope = (sizes[b] - sizes[a]) / (b - a)
        slopes.append(slope)
        print(
            f"{'':44} turns {a}->{b}: {slope / 1000:6.1f} kB/turn = "
            f"{slope / json_per_turn:4.1f}x the JSON of a turn"
        )
    return slopes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what-if-turns", type=int, default=500)
    args = parser.parse_args()

    C.header("bench 4: session file size")
    cached = C.cached_sessions()
    full_json, wire_json, turns, read_ms = json_sizes(cached["stages"][500], cached["id"])
    print(
        f"JSON of one turn's messages (mean over {turns} turns): {full_json:,.0f} bytes as "
        f"LangChain dicts, {wire_json:,.0f} bytes as bare role/content/tool_calls"
    )
    sizes = {int(k): v for k, v in cached["sizes"].items()}
    print()
    slopes = print_growth("as shipped", sizes, full_json)
    print(f"{'':44} 500 turns: {sizes[500] / 500 / 1000:.1f} kB/turn on average")
    print(f"{'':44} state read at 500 turns: {read_ms:.0f} ms")
    print("\nanatomy of the 500-turn file (bytes):")
    path = next(cached["stages"][500].glob("*.sqlite"))
    for key, value in anatomy(path).items():
        print(f"  {key:22} {value:>14,}")

    if args.what_if_turns:
        variants = {
            "WHAT-IF durability=exit": {"exit_durability": True, "frequency": None},
            "WHAT-IF exit + no periodic snapshot": {
                "exit_durability": True,
                "frequency": 10**9,
            },
            "WHAT-IF the same + no message ids in ledger": {
                "exit_durability": True,
                "frequency": 10**9,
                "ledger_ids": False,
            },
        }
        print(f"\nwhat-ifs, built fresh to {args.what_if_turns} turns:")
        for label, options in variants.items():
            with C.temp_dir("nbc-bench-size-w-") as tmp:
                result = asyncio.run(build_variant(tmp, args.what_if_turns, **options))
            print_growth(label, result["sizes"], full_json)
            turn_ms = result["per_turn"][max(result["per_turn"])] * 1000
            print(
                f"{'':44} state read at {args.what_if_turns} turns: "
                f"{result['read_ms']:.0f} ms; a turn (late stage): {turn_ms:.0f} ms; "
                f"after VACUUM {result['vacuumed'] / 1e6:.2f} MB "
                f"({result['vacuumed'] / args.what_if_turns / full_json:.1f}x the JSON per turn)"
            )

    linear = slopes[-1] <= 1.25 * slopes[0]
    small = slopes[-1] <= 2 * full_json
    print(
        f"\nTARGET linear growth: {slopes[0] / 1000:.1f} kB/turn early vs "
        f"{slopes[-1] / 1000:.1f} kB/turn late -> {'met' if linear else 'NOT met'}"
    )
    print(
        f"TARGET <= 2x JSON per turn: {slopes[-1] / full_json:.1f}x (late) -> "
        f"{'met' if small else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
