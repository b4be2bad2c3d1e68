"""Benchmark 14: load held (issue 41). N `netbox-chat ask` processes started
at once, each in its own session, against a scripted model that takes 0.5 s
per reply and the NetBox double: 1 (a single run), then 8, then 32 at once,
on the session folder and (with NETBOX_CHAT_TEST_PG) on PostgreSQL.

A turn's overhead is its process's wall time (start to exit) less the
model's 0.5 s: the process start, the imports, the store, the graph, the
ledger. Printed as median and p95 per level, beside the single run's. Every
run must end exit 0 with its own answer kept; a failure stops the bench.
Machine load shows here as in no other bench (32 processes share the cores):
the figures are printed with the load average they ran under.

    .venv/bin/python bench/bench_load.py [--levels 1,8,32] [--rounds 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

import _common as C

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama
from tests.doubles.stores import empty_database, scratch_database
from tests.drive.load import MODEL_SECONDS, answer_to, ask_at_once, slow_model


def overheads(env: dict[str, str], at_once: int, round_: int) -> list[float]:
    """Each process's wall time less the model's, for `at_once` asks started together."""
    questions = [f"round {round_}: which devices are at site {n}?" for n in range(at_once)]
    asked = ask_at_once(env, questions, "--json")
    for one in asked:
        if one.code != 0 or json.loads(one.stdout)["answer"] != answer_to(one.question):
            raise RuntimeError(f"{one.question}: exit {one.code}: {one.stderr.strip()[-300:]}")
    return [one.seconds - MODEL_SECONDS for one in asked]


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,32", help="processes at once, comma-separated")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each level")
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]

    C.header("Benchmark 14: load held, N asks at once (issue 41)")
    print(
        f"cores: {os.cpu_count()}; model: {MODEL_SECONDS:g} s per reply; before: {load_average()}"
    )
    stores = ["folder"] + (["postgres"] if os.environ.get("NETBOX_CHAT_TEST_PG") else [])
    with C.temp_dir("nbc-bench-load-") as tmp, NetBoxDouble(token=TEST_TOKEN) as netbox:
        for kind in stores:
            print(f"\n## {kind} store")
            print(f"{'at once':>8} {'median':>9} {'p95':>9} {'max':>9} {'x single':>9}  load")
            single = None
            for level in levels:
                with contextlib.ExitStack() as stack:
                    ollama = stack.enter_context(ScriptedOllama())
                    ollama.responder = slow_model
                    if kind == "postgres":  # a database of its own, dropped after
                        store = stack.enter_context(scratch_database())
                        empty_database(store)
                    else:
                        store = str(tmp / f"sessions-{level}")
                    env = C.bench_env(
                        NETBOX_URL=netbox.url,
                        NETBOX_TOKEN=TEST_TOKEN,
                        OLLAMA_HOST=ollama.url,
                        NETBOX_CHAT_MODEL="qwen3:8b",
                        NETBOX_CHAT_STORE=store,
                        XDG_STATE_HOME=str(tmp / "state"),
                        XDG_CONFIG_HOME=str(tmp / "config"),
                    )
                    values = [v for r in range(args.rounds) for v in overheads(env, level, r)]
                s = C.summary(values)
                single = single or s["median"]
                print(
                    f"{level:>8} {C.ms(s['median']):>9} {C.ms(s['p95']):>9} {C.ms(s['max']):>9} "
                    f"{s['median'] / single:8.2f}x  {load_average()}"
                )
    print("\nTARGET every run exits 0 with its own answer, kept (a failure stops the bench): met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
