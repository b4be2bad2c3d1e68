"""Bench 13: `netbox-chat eval --parallel N` against one at a time (issue 34 item 6).

The NetBox double and the scripted Ollama, which waits a fixed latency before
every reply (a server that batches: each request takes as long however many
are under way). Two runs of the same questions, `--parallel 1` and
`--parallel N`: their wall times, the ratio (target: at most 0.35 for 95
questions at N=4), and whether every score is the same.

    .venv/bin/python bench/bench_eval_parallel.py [--per-template 3] [--parallel 4] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import NETBOX_CHAT, header
from netbox_chat.eval.questions import build_questions
from netbox_chat.eval.truth import TruthClient
from tests.conftest import TEST_TOKEN
from tests.doubles.eval_models import MODELS, personas
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Delay, ScriptedOllama


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-template", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model request")
    args = parser.parse_args()
    header(f"bench 13: eval --parallel {args.parallel} against one at a time")
    with NetBoxDouble(token=TEST_TOKEN) as netbox, ScriptedOllama(models=MODELS) as ollama:
        with TruthClient(netbox.url, TEST_TOKEN) as client:
            questions = build_questions(client, seed=0, per_template=args.per_template).questions
        persona = personas(questions)

        def slow(body: dict[str, Any]) -> Any:
            return [Delay(args.latency), *persona(body)]

        ollama.responder = slow
        runs: dict[int, tuple[float, dict[str, Any]]] = {}
        for parallel in (1, args.parallel):
            with tempfile.TemporaryDirectory() as tmp:
                env = {
                    **{
                        k: v
                        for k, v in os.environ.items()
                        if not k.startswith(("NETBOX", "OLLAMA"))
                    },
                    "NETBOX_URL": netbox.url,
                    "NETBOX_TOKEN": TEST_TOKEN,
                    "OLLAMA_HOST": ollama.url,
                    "XDG_CONFIG_HOME": tmp,
                    "NETBOX_CHAT_EVAL_RUNS": str(Path(tmp) / "runs"),
                }
                command = [NETBOX_CHAT, "eval", "-m", "oracle", "--json", "--seed", "0"]
                command += ["--per-template", str(args.per_template), "--parallel", str(parallel)]
                started = time.perf_counter()
                done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
                runs[parallel] = (time.perf_counter() - started, json.loads(done.stdout))
    (one, one_report), (many, many_report) = runs[1], runs[args.parallel]

    def scores(report: dict[str, Any]) -> dict[str, Any]:
        return {r["question"]: r["score"] for r in report["results"]}

    print(f"questions: {len(questions)}, {args.latency} s per model request")
    print(f"--parallel 1        {one:.1f} s")
    print(f"--parallel {args.parallel:<8} {many:.1f} s ({many / one:.2f} of one at a time)")
    print(f"same scores: {scores(one_report) == scores(many_report)}")


if __name__ == "__main__":
    main()
