"""Benchmark 10: how long a long answer takes to draw (issue 25, item 1).

Drives the real REPL through a pty (pexpect), run by bench/_repl.py with the
bench tools, on a new session. The scripted Ollama server (in this process,
127.0.0.1) streams one long Markdown answer, one token per NDJSON line as
Ollama does, spread over about a second. The figure is the time from the
server writing the answer's last token to the REPL drawing the line it prints
after the answer (`turn N · tokens ...`), read from the pty: the last byte of
the answer is on the screen by then. The answer's last words are checked to
have been drawn.

Two answers:
- 25 kB: a 200-row Markdown table between a sentence and a closing line, the
  shape of the answer in the issue (about 4.4k tokens).
- 100 kB: four such sections, each under a heading with a short list.

The same is measured with the REPL drawing no answer text at all (a WHAT-IF,
`NETBOX_CHAT_BENCH_VIEW=none` in bench/_repl.py): what the stream itself costs
after its last token, the floor under the drawing.

`--against REV` (default `main`) first measures `netbox_chat/` as committed
at REV (extracted with `git archive`, the same harness), and prints its
figures beside this tree's. A run that has not drawn the answer `--give-up`
seconds after its last token is stopped and reported as "> N s".

Targets (issue 25): 25 kB on screen within 1.5 s of its last token, 100 kB
within 3 s.

    .venv/bin/python bench/bench_render.py [--runs 3] [--give-up 60] [--against main]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import _common as C
import pexpect

STREAM_SECONDS = 1.0
TARGETS = {"25 kB": 1.5, "100 kB": 3.0}
END_MARK = "That is every device listed."
OUTCOME = re.compile(rb"turn \d+ \xc2\xb7 tokens")


def section(site: str, rows: int) -> str:
    header = (
        "| # | name | site | status | role | platform | primary IP | last seen |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {n} | {site}-sw{n:03d} | {site} | offline | access-switch | cisco-ios-xe-17 "
        f"| 10.{n // 250}.{n % 250}.1/24 | 2026-11-{1 + n % 28:02d} 08:{n % 60:02d} |\n"
        for n in range(1, rows + 1)
    )
    return f"**{rows} devices** at {site} are offline, newest first:\n\n{header}{body}"


def answer(size: str) -> str:
    if size == "25 kB":
        return section("dm-akron", 200) + f"\n{END_MARK}\n"
    parts = [
        f"## {site}\n\n{section(site, 200)}\n- checked against NetBox just now\n"
        f"- {site} has 200 offline devices\n\n"
        for site in ("dm-akron", "dm-binghamton", "dm-camden", "dm-nashua")
    ]
    return "".join(parts) + END_MARK + "\n"


class LastToken:
    """When the scripted server wrote the end of each reply (its last token)."""

    def __init__(self) -> None:
        from tests import ollama_server

        self.times: list[float] = []
        self.lock = threading.Lock()
        end = ollama_server._ChatStream._end

        def timed_end(stream: Any) -> None:
            end(stream)
            with self.lock:
                self.times.append(time.perf_counter())

        ollama_server._ChatStream._end = timed_end  # type: ignore[method-assign]


def respond(text: str) -> Any:
    from tests.doubles.ollama_server import Text

    def responder(body: dict[str, Any]) -> list[Any]:
        del body
        reply = Text(text)
        return [Text(text, chunk_delay=STREAM_SECONDS / len(reply.pieces()))]

    return responder


def one_run(size: str, give_up: float, **extra_env: str) -> dict[str, Any]:
    """A new REPL, one warm-up question, then the long answer."""
    from tests.doubles.ollama_server import ScriptedOllama, Text

    text = answer(size)
    ends = LastToken()
    repl = str(Path(__file__).with_name("_repl.py"))
    with C.temp_dir("nbc-bench-render-") as tmp, ScriptedOllama(lifetime=900) as ollama:
        env = C.bench_env(
            NETBOX_CHAT_SESSIONS=str(tmp / "sessions"),
            OLLAMA_HOST=ollama.url,
            NETBOX_URL="http://127.0.0.1:9",
            **extra_env,
        )
        child = pexpect.spawn(C.PYTHON, [repl], env=env, dimensions=(40, 100), timeout=60)
        try:
            child.expect(C.PROMPT_RE)
            ollama.responder = lambda body: [Text("Ready.")]
            child.send("warm up\r")
            child.expect(OUTCOME, timeout=120)
            child.expect(C.PROMPT_RE)
            ollama.responder = respond(text)
            since = len(ends.times)
            child.send("list every offline device\r")
            return {"tokens": len(Text(text).pieces()), **watch(child, ends, since, give_up)}
        finally:
            child.close(force=True)


def watch(child: pexpect.spawn, ends: LastToken, since: int, give_up: float) -> dict[str, Any]:
    """Read the pty until the line after the answer (the reply after the
    first `since`), or give up."""
    window = b""
    received = 0
    mark_seen = False
    mark = END_MARK.encode()
    last_token: float | None = None
    while True:
        with ends.lock:
            if last_token is None and len(ends.times) > since:
                last_token = ends.times[since]
        if last_token is not None and time.perf_counter() - last_token > give_up:
            return {"seconds": None, "bytes": received, "drawn": mark_seen}
        try:
            data = child.read_nonblocking(65536, timeout=0.05)
        except pexpect.TIMEOUT:
            continue
        now = time.perf_counter()
        received += len(data)
        window = (window + data)[-65536:]
        mark_seen = mark_seen or mark in window
        if OUTCOME.search(window):
            with ends.lock:
                last_token = ends.times[since]
            return {"seconds": now - last_token, "bytes": received, "drawn": mark_seen}


def measure(runs: int, give_up: float, **extra_env: str) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for size in TARGETS:
        results = [one_run(size, give_up, **extra_env) for _ in range(runs)]
        figures[size] = results
        shown = ", ".join(fmt(r["seconds"], give_up) for r in results)
        what = " (WHAT-IF: no answer text drawn)" if extra_env else ""
        print(
            f"{size}{what}: {results[0]['tokens']:,} tokens; last token → end: {shown}", flush=True
        )
    return figures


def fmt(seconds: float | None, give_up: float) -> str:
    return f"> {give_up:.0f} s (gave up)" if seconds is None else f"{seconds:.2f} s"


def median(results: list[dict[str, Any]]) -> float | None:
    times = [r["seconds"] for r in results]
    if any(t is None for t in times):
        return None
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per answer size (this tree)")
    parser.add_argument("--give-up", type=float, default=60.0, help="seconds after the last token")
    parser.add_argument("--against", default="main", help="revision to measure first ('' for none)")
    parser.add_argument("--figures", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figures:  # measuring another revision for figures_of_revision
        figures = measure(1, args.give_up)
        Path(args.figures).write_text(json.dumps(figures))
        return
    C.header("Benchmark 10: a long answer, last token to drawn (REPL, pty)")
    before = None
    if args.against:
        before = C.figures_of_revision(
            "bench_render.py", args.against, ["--give-up", str(args.give_up)]
        )
    after = measure(args.runs, args.give_up)
    # The same REPL drawing no answer text at all: what the stream itself
    # (HTTP, LangChain, LangGraph, the ledger) costs after the last token.
    floor = measure(args.runs, args.give_up, NETBOX_CHAT_BENCH_VIEW="none")
    print()
    print(f"| answer | {args.against or '-'} | this tree (median of {args.runs}) | target |")
    print("|---|---|---|---|")
    for size, target in TARGETS.items():
        old = fmt(median(before[size]), args.give_up) if before else "-"
        new = median(after[size])
        print(f"| {size} | {old} | {fmt(new, args.give_up)} | ≤ {target} s |")
    for size in TARGETS:
        shown = fmt(median(floor[size]), args.give_up)
        print(f"| {size}, WHAT-IF no answer drawn | - | {shown} | - |")
    for size, target in TARGETS.items():
        new = median(after[size])
        drawn = all(r["drawn"] for r in after[size])
        met = new is not None and new <= target and drawn
        verdict = "met" if met else "NOT met"
        print(f"TARGET {size} drawn within {target} s of its last token: {verdict}")


if __name__ == "__main__":
    main()
