"""Benchmark 7: the request size of every model call over a long session with big
tool results, and what keeping it inside the window costs.

A session of N turns (default 100); every turn is one tool call whose result is
6-8 kB of NetBox-shaped JSON, then a short answer. The scripted Ollama server
fits each request into its `num_ctx` window the way Ollama does (oldest
messages dropped, then a middle cut; tests/doubles/ollama_server.py) and counts tokens
with its own tokenizer, so "truncated" below means a real Ollama would have cut
that request without an error.

Three ways of running it:

- `guard`: the shipped code (`build_runtime`, the context guard compacting at
  NETBOX_CHAT_COMPACT_AT of the window, 0.8);
- `deepagents` (WHAT-IF): deepagents' own SummarizationMiddleware, with the
  window given to ChatOllama as its profile (`max_input_tokens`), so it
  triggers at 85 % of the window by its own estimate (characters / 4);
- `off`: no compaction at all (NETBOX_CHAT_COMPACT_AT=0).

Figures: the largest request sent, how many requests Ollama would have cut,
the extra model calls (summaries) per 100 turns, the session file size, and a
small plot of every agent request's size against the window.

    .venv/bin/python bench/bench_context.py [--turns 100] [--window 16384] [--mode guard]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import _common as C

SITES = C.SITES


def big_result(query: str) -> str:
    """6-8 kB of NetBox-shaped JSON, varying by query, deterministic."""
    size = 6_000 + (sum(map(ord, query)) * 37) % 2_000
    rows: list[dict[str, Any]] = []
    while len(json.dumps(rows)) < size - 200:
        n = len(rows)
        rows.append(
            {
                "id": 1000 + n,
                "name": f"{query}-sw{n:02d}",
                "status": {"value": "active", "label": "Active"},
                "site": {"id": 3, "slug": query, "display": query.upper()},
                "primary_ip": f"10.0.{n}.1/24",
            }
        )
    return json.dumps({"count": len(rows), "results": rows})


def tools() -> list[Any]:
    from langchain_core.tools import tool

    @tool
    async def list_devices(site: str) -> str:
        """List the NetBox devices at a site."""
        return big_result(site)

    return [list_devices]


def respond(body: dict[str, Any]) -> list[Any]:
    """The agent: one lookup per question, then a short answer. A request with
    no tools is a summary request (ours or deepagents'): a short summary that
    keeps the first turn's fact, as a good model would."""
    from tests.doubles.ollama_server import Text, ToolCall

    messages = body.get("messages") or []
    if not body.get("tools"):
        text = json.dumps(messages)
        facts = sorted(set(re.findall(r"FACT_\w+", text)))
        return [Text("Summary: the operator asked about devices per site; " + " ".join(facts))]
    last = messages[-1]
    if last["role"] == "user":
        turn = sum(m["role"] == "user" for m in messages)
        return [ToolCall("list_devices", {"site": SITES[turn % len(SITES)]})]
    fact = " FACT_first_turn" if "Turn 1:" in json.dumps(messages[-3:]) else ""
    return [Text(f"All devices at that site are active.{fact}")]


@dataclass
class Run:
    mode: str
    agent_sizes: list[int]
    truncated: int
    summaries: int
    largest: int
    file_bytes: int
    seconds: float
    fact_at_end: bool


async def run(mode: str, turns: int, window: int) -> Run:
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama

    with C.temp_dir("nbc-bench-ctx-") as tmp, ScriptedOllama() as ollama:
        ollama.responder = respond
        env = {"NETBOX_CHAT_NUM_CTX": str(window)}
        if mode == "off":
            env["NETBOX_CHAT_COMPACT_AT"] = "0"
        from netbox_chat.config import resolve_settings

        settings = resolve_settings(sessions_dir=tmp, ollama_url=ollama.url, env=env)
        session = SessionFile.create(SessionStore(tmp), model=settings.model)
        conversation, closer = build(mode, session, settings)
        started = time.perf_counter()
        try:
            for turn in range(1, turns + 1):
                outcome = await conversation.run_turn(
                    f"Turn {turn}: which devices at {SITES[turn % len(SITES)]} are active?"
                )
                if outcome.status != "done":
                    raise RuntimeError(f"turn {turn} {outcome.status}: {outcome.error}")
        finally:
            seconds = time.perf_counter() - started
            await closer()
            session.close()
        file_bytes = sum(p.stat().st_size for p in tmp.glob(f"{session.id}.sqlite*"))
        agent = [
            seen
            for body, seen in zip(ollama.requests, ollama.seen, strict=True)
            if seen is not None and body.get("tools")
        ]
        every = [s for s in ollama.seen if s is not None]
        return Run(
            mode=mode,
            agent_sizes=[s.requested_tokens for s in agent],
            truncated=sum(s.truncated for s in every),
            summaries=len(every) - len(agent),
            largest=max(s.requested_tokens for s in every),
            file_bytes=file_bytes,
            seconds=seconds,
            fact_at_end="FACT_first_turn" in agent[-1].text,
        )


def build(mode: str, session: Any, settings: Any) -> tuple[Any, Any]:
    """The conversation and its closer, for one mode."""
    if mode in ("guard", "off"):
        from netbox_chat.agent.runtime import build_runtime

        runtime = build_runtime(session, settings, tools=tools())
        return runtime.conversation, runtime.aclose
    from langchain_ollama import ChatOllama

    from netbox_chat.agent.graph import build_agent, find_end_node
    from netbox_chat.agent.turns import Conversation
    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver
    from netbox_chat.store.sessions import connect

    saver = BridgedSqliteSaver(connect(session.path), session.id)
    model = ChatOllama(
        model=settings.model,
        base_url=settings.ollama_url,
        num_ctx=settings.num_ctx,
        temperature=0,
        profile={"max_input_tokens": settings.num_ctx},
    )
    graph = build_agent(settings, tools(), saver, model=model)

    async def close() -> None:
        saver.conn.close()

    return Conversation(session, graph, saver, find_end_node(graph), model=model), close


def plot(sizes: list[int], window: int, threshold: int, width: int = 72, height: int = 10) -> str:
    """Each column the largest agent request in its bucket; `=` the window,
    `-` the compaction threshold."""
    buckets = [
        max(
            sizes[
                i * len(sizes) // width : max(
                    (i + 1) * len(sizes) // width, i * len(sizes) // width + 1
                )
            ]
        )
        for i in range(min(width, len(sizes)))
    ]
    top = max(window, *buckets)
    rows = []
    for level in range(height, 0, -1):
        low = top * (level - 1) / height
        high = top * level / height
        marker = "=" if low < window <= high else "-" if low < threshold <= high else " "
        line = "".join("#" if b > low else marker for b in buckets)
        rows.append(f"{high / 1000:5.1f}k |{line}")
    rows.append("       +" + "-" * len(buckets))
    rows.append(f"        agent requests 1..{len(sizes)} (each column the largest of its bucket)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--window", type=int, default=16384)
    parser.add_argument(
        "--mode", choices=["guard", "deepagents", "off", "all"], default="all", help="what to run"
    )
    args = parser.parse_args()
    C.header("8. request size over a long session with big tool results (bench_context.py)")
    print(f"turns: {args.turns} · window: {args.window:,} tokens · results 6-8 kB each")
    threshold = int(args.window * 0.8)
    modes = ["guard", "deepagents", "off"] if args.mode == "all" else [args.mode]
    results = [asyncio.run(run(mode, args.turns, args.window)) for mode in modes]
    print()
    print(
        "| mode | largest request | requests Ollama cut | summaries / 100 turns | "
        "turn 1's fact at the end | file | time |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        label = r.mode + (" (WHAT-IF)" if r.mode == "deepagents" else "")
        print(
            f"| {label} | {r.largest:,} tokens ({r.largest / args.window:.0%}) | {r.truncated} | "
            f"{r.summaries * 100 / args.turns:.0f} | {'yes' if r.fact_at_end else 'no'} | "
            f"{r.file_bytes / 1e6:.2f} MB | {r.seconds:.0f} s |"
        )
    for r in results:
        print()
        print(
            f"{r.mode}: every agent request, tokens "
            f"(threshold {threshold:,}, window {args.window:,})"
        )
        print(plot(r.agent_sizes, args.window, threshold))
    shipped = results[0] if results[0].mode == "guard" else None
    if shipped is not None:
        met = shipped.truncated == 0 and shipped.largest <= args.window
        print()
        print(f"TARGET no request over the window, none cut: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
