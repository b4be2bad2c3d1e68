"""Many `ask` processes at once, as a team's operators or cron start them
(issue 41): the load tests (tests/test_load.py) and bench/bench_load.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.doubles.ollama_server import Delay, Reply, Text, last_user_text
from tests.drive.process import start

MODEL_SECONDS = 0.5
"""How long the scripted model takes over each reply: a fast real model's
short answer, so that the processes overlap the way real ones would."""


def answer_to(question: str) -> str:
    """The scripted model's answer to `question`: each process must get its own."""
    return f"The answer to {question!r}."


def slow_model(body: dict[str, Any]) -> Reply:
    """A responder (ScriptedOllama.responder) answering each question with its
    own answer after MODEL_SECONDS."""
    return [Delay(MODEL_SECONDS), Text(answer_to(last_user_text(body)))]


@dataclass(frozen=True)
class Asked:
    """One `ask` process: its question, exit status, output, and when it ended
    (seconds since they were all started)."""

    question: str
    code: int
    stdout: str
    stderr: str
    seconds: float


def ask_at_once(
    env: dict[str, str],
    questions: Sequence[str],
    *args: str,
    on_exit: Callable[[list[Asked]], None] | None = None,
    timeout: float = 300.0,
) -> list[Asked]:
    """`netbox-chat ask QUESTION ARGS` for every question, all started at once;
    each result in the order of `questions`. `on_exit` is told the results so
    far each time one ends (a test releases the model once the others ended).
    `timeout` bounds the whole for a loaded machine; past it all are killed."""
    began = time.monotonic()
    running = {i: start(env, "ask", question, *args) for i, question in enumerate(questions)}
    done: dict[int, Asked] = {}
    try:
        while running:
            for i, process in list(running.items()):
                if process.poll() is None:
                    continue
                out, err = process.communicate()
                ended = time.monotonic() - began
                done[i] = Asked(questions[i], process.returncode, out, err, ended)
                del running[i]
                if on_exit is not None:
                    on_exit([done[k] for k in sorted(done)])
            assert time.monotonic() - began < timeout, f"{len(running)} asks still running"
            time.sleep(0.01)
    finally:
        for process in running.values():
            process.kill()
            process.communicate()
    return [done[i] for i in range(len(questions))]
