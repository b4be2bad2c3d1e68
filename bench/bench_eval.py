"""Bench 10: `netbox-chat eval`, the harness's own time per question apart
from the model's (issue 23).

Against the NetBox double and the scripted Ollama answering at once (one tool
call, then the truth), so what is left is the harness: building the questions
and their truth (NetBox requests), a new session and agent per question,
scoring, writing each result. The model's part is each turn's own seconds as
the run reports them; the harness's part is the rest of the wall time.

    .venv/bin/python bench/bench_eval.py [--per-template N]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import NETBOX_CHAT, header, ms
from netbox_chat.eval.questions import build_questions
from netbox_chat.eval.scoring import score
from netbox_chat.eval.truth import TruthClient
from tests.conftest import TEST_TOKEN
from tests.doubles.eval_models import MODELS, personas, right_answer
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama

TOKEN = TEST_TOKEN


LATENCY = 0.05
"""Seconds the double waits before each reply in the build bench: a NetBox across
a network (the public demo answered in 50-400 ms)."""


def bench_build() -> None:
    """Building the questions before the first one is asked (issue 39): each type
    read once, READERS templates at once, against one at a time as before; and
    --limit 10. On the double with LATENCY per request."""
    from netbox_chat.eval import questions

    with NetBoxDouble(token=TOKEN) as netbox:
        netbox.delays.update({path: LATENCY for path in netbox.data})
        for label, readers, limit in (
            ("one at a time", 1, None),
            (f"{questions.READERS} at once", questions.READERS, None),
            (f"{questions.READERS} at once, --limit 10", questions.READERS, 10),
        ):
            questions.READERS = readers
            with TruthClient(netbox.url, TOKEN) as client:
                started = time.perf_counter()
                built = build_questions(client, seed=0, per_template=3, limit=limit)
                seconds = time.perf_counter() - started
            print(
                f"build, {label:<28} {seconds:5.2f} s, {built.requests} requests, "
                f"{len(built.questions)} questions ({LATENCY * 1000:.0f} ms a request)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-template", type=int, default=1)
    args = parser.parse_args()
    header("bench 10: netbox-chat eval, harness time per question apart from the model's")
    bench_build()
    with NetBoxDouble(token=TOKEN) as netbox, ScriptedOllama(models=MODELS) as ollama:
        with TruthClient(netbox.url, TOKEN) as client:
            started = time.perf_counter()
            built = build_questions(client, seed=0, per_template=args.per_template)
            build_seconds = time.perf_counter() - started
        questions = built.questions
        n = len(questions)
        started = time.perf_counter()
        for _ in range(100):
            for i, q in enumerate(questions):
                score(q.kind, right_answer(q, i), q.expected, q.universe, q.text)
        score_seconds = (time.perf_counter() - started) / 100
        ollama.responder = personas(questions)
        with tempfile.TemporaryDirectory() as tmp:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("NETBOX", "OLLAMA"))},
                "NETBOX_URL": netbox.url,
                "NETBOX_TOKEN": TOKEN,
                "OLLAMA_HOST": ollama.url,
                "XDG_CONFIG_HOME": tmp,
                "NETBOX_CHAT_EVAL_RUNS": str(Path(tmp) / "runs"),
            }
            command = [NETBOX_CHAT, "eval", "-m", "oracle", "--json"]
            command += ["--per-template", str(args.per_template)]
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - started
    report = json.loads(done.stdout)
    results = report["results"]
    turns = sum(r["seconds"] for r in results)
    first = [r["first_token_seconds"] for r in results if r["first_token_seconds"] is not None]
    print(f"questions: {n} ({built.requests} NetBox requests to build them and their truth)")
    print(f"build questions + truth   {ms(build_seconds / n)} per question")
    print(f"score one answer          {ms(score_seconds / n)}")
    print(f"turn (agent + model)      {ms(turns / len(results))} per question")
    print(f"  first token             {ms(sum(first) / max(1, len(first)))} per question")
    harness = wall - turns
    print(
        f"harness, whole run        {ms(harness / len(results))} per question "
        f"(wall {wall:.1f} s - turns {turns:.1f} s; includes process start, "
        "a session and an agent per question, result writes)"
    )
    print(f"right: {report['models']['oracle']['correct']}")


if __name__ == "__main__":
    main()
