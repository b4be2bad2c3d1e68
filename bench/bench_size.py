"""Benchmark 4: session file size at 10 to 500 turns, bytes per turn vs JSON.

The sessions are the cached ones (real Conversation, real ChatOllama, scripted
Ollama server; every second turn calls one tool with a ~1 kB result), closed
after each stage, so a size is the file as it stays on disk (WAL folded in).
The JSON size of a turn is `json.dumps(messages_to_dict(turn's messages))`
(LangChain's own serialization); the bare wire form (role, content,
tool_calls) is shown too. Each stage's whole file is set against its turns'
JSON (mean JSON of a turn x turns): a short session pays for the b-trees every
file has, one page each at least. The anatomy of the 500-turn file splits it
by table and index (SQLite's dbstat), with the blobs and ledger columns
inside them.

Targets: linear growth, at most 2x the JSON size per turn (issue 7); the
whole file at most 2x its turns' JSON at 50 turns (issue 32, item 15).

    .venv/bin/python bench/bench_size.py [--against REV]

`--against REV` measures REV's `netbox_chat/` first (its own cached
sessions, built by its code: 1-2 min the first time) and prints both
side by side.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sqlite3
import time
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

    from netbox_chat.store.sessions import SessionFile, SessionStore

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


def anatomy(path: Path, turns: int) -> None:
    """Print where the bytes of a closed session file go: each table and index
    (pages, payload), then the blobs and ledger columns inside the payload."""
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        q = conn.execute
        page = q("PRAGMA page_size").fetchone()[0]
        size = path.stat().st_size
        print(f"\nanatomy of the {turns}-turn file: {size:,} bytes, {page:,}-byte pages")
        print(f"  {'table or index':32} {'on pages':>11} {'payload':>11} {'per turn':>9}")
        for name, pages, payload in q(
            "SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ):
            print(f"  {name:32} {pages:>11,} {payload:>11,} {pages / turns:>9,.0f}")
        free = q("PRAGMA freelist_count").fetchone()[0] * page
        print(f"  {'free pages':32} {free:>11,}")
        rows = q(
            "SELECT count(*), sum(length(checkpoint)), sum(length(metadata)) FROM checkpoints"
        ).fetchone()
        print(
            f"  checkpoints: {rows[0]:,} rows; checkpoint blobs {rows[1]:,} bytes "
            f"({rows[1] / rows[0]:,.0f} each), metadata {rows[2]:,} ({rows[2] / rows[0]:,.0f} each)"
        )
        for channel, kind, count, blobs in q(
            "SELECT channel, type, count(*), sum(length(value)) FROM writes GROUP BY 1, 2"
        ):
            print(
                f"  writes to {channel!r} ({kind}): {count:,} rows, value blobs {blobs:,} bytes "
                f"({blobs / turns:,.0f} per turn)"
            )
        ledger = q(
            "SELECT sum(length(question)), sum(length(coalesce(answer, ''))), "
            "sum(length(tool_calls)), sum(length(coalesce(base_checkpoint_id, '')) "
            "+ length(coalesce(end_checkpoint_id, '')))  FROM turns"
        ).fetchone()
        print(
            "  ledger columns per turn: "
            + ", ".join(
                f"{label} {value / turns:,.0f}"
                for label, value in zip(
                    ("question", "answer", "tool_calls", "checkpoint ids"), ledger, strict=True
                )
            )
            + " bytes"
        )
    finally:
        conn.close()
    vacuumed = vacuumed_size(path)
    print(f"  a VACUUMed copy: {vacuumed:,} bytes ({vacuumed / turns:,.0f} per turn)")


def print_growth(sizes: dict[int, int], json_per_turn: float) -> None:
    """Print the bytes per turn between stages."""
    for a, b in itertools.pairwise(sorted(sizes)):
        slope = (sizes[b] - sizes[a]) / (b - a)
        print(
            f"  turns {a}->{b}: {slope:,.0f} bytes/turn = "
            f"{slope / json_per_turn:.2f}x the JSON of a turn"
        )


def measure() -> dict[str, Any]:
    """The figures of the code measured (this tree's, or REV's under `--against`)."""
    cached = C.cached_sessions(log=lambda line: print(line, flush=True))
    full_json, wire_json, turns, read_ms = json_sizes(cached["stages"][500], cached["id"])
    return {
        "json": full_json,
        "wire": wire_json,
        "turns": turns,
        "read_ms": read_ms,
        "sizes": {int(k): v for k, v in cached["sizes"].items()},
        "file_500": str(next(cached["stages"][500].glob("*.sqlite"))),
    }


def whole_file_table(runs: dict[str, dict[str, Any]]) -> None:
    """Each stage's whole file, and against its turns' JSON, for each code measured."""
    labels = list(runs)
    print("\nwhole file against its turns' JSON (mean JSON of a turn x turns):")
    head = "".join(f" {label[:15]:>15} {'/ JSON':>7}" for label in labels)
    print(f"  {'turns':>5} {'JSON':>10}{head}{'  change' if len(labels) > 1 else ''}")
    for stage in C.STAGES:
        json_bytes = runs[labels[-1]]["json"] * stage
        cells = "".join(
            f" {runs[label]['sizes'][stage]:>15,} "
            f"{runs[label]['sizes'][stage] / (runs[label]['json'] * stage):>6.2f}x"
            for label in labels
        )
        change = ""
        if len(labels) > 1:
            change = f"  {runs[labels[-1]]['sizes'][stage] - runs[labels[0]]['sizes'][stage]:+,}"
        print(f"  {stage:>5} {json_bytes:>10,.0f}{cells}{change}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="measure REV's netbox_chat/ first")
    parser.add_argument("--figures", type=Path, help=argparse.SUPPRESS)  # JSON, for --against
    args = parser.parse_args()
    if args.figures:  # measuring another revision for --against: figures only
        args.figures.write_text(json.dumps(measure()))
        return

    C.header("bench 4: session file size")
    runs: dict[str, dict[str, Any]] = {}
    if args.against:
        runs[args.against] = C.figures_of_revision("bench_size.py", args.against, [])
        runs[args.against]["sizes"] = {int(k): v for k, v in runs[args.against]["sizes"].items()}
    mine = runs["this tree"] = measure()
    print(
        f"JSON of one turn's messages (mean over {mine['turns']} turns): {mine['json']:,.0f} "
        f"bytes as LangChain dicts, {mine['wire']:,.0f} bytes as bare role/content/tool_calls"
        + "".join(
            f"; {label}: {figures['json']:,.0f}"
            for label, figures in runs.items()
            if figures is not mine
        )
    )
    whole_file_table(runs)
    for label, figures in runs.items():
        print(f"\n{label}: bytes per turn between stages")
        print_growth(figures["sizes"], figures["json"])
        print(f"  a state read at 500 turns: {figures['read_ms']:.0f} ms")
    anatomy(Path(mine["file_500"]), 500)

    # As issue 7 set them: turns 10->100 early, 100->500 late.
    sizes, full_json = mine["sizes"], mine["json"]
    slopes = [(sizes[100] - sizes[10]) / 90, (sizes[500] - sizes[100]) / 400]
    linear = slopes[-1] <= 1.25 * slopes[0]
    small = slopes[-1] <= 2 * full_json
    whole = mine["sizes"][50] / (50 * full_json)
    print("\n(targets: this tree)")
    print(
        f"TARGET linear growth: {slopes[0]:,.0f} bytes/turn early vs "
        f"{slopes[-1]:,.0f} late -> {'met' if linear else 'NOT met'}"
    )
    print(
        f"TARGET <= 2x JSON per turn: {slopes[-1] / full_json:.2f}x (late) -> "
        f"{'met' if small else 'NOT met'}"
    )
    print(
        f"TARGET whole file <= 2x its JSON at 50 turns: {whole:.2f}x "
        f"({mine['sizes'][50]:,} bytes) -> {'met' if whole <= 2 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
