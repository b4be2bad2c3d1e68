"""A run's folder: its plan (models, seed, the questions with their truth),
its results as they finish, and its own sessions folder.

    eval-runs/<run>/run.json       what was asked of whom, and the truth
    eval-runs/<run>/results.jsonl  one line per finished answer, written as it finishes
    eval-runs/<run>/sessions/      one session per question (netbox-chat export reads them)

A result line is flushed and synced before the next question starts, so a
Ctrl-C or a kill -9 loses at most the question under way; a torn last line
(kill -9 in mid-write) is ignored on reading. Both files are read back as
untrusted input: a run folder is a file anyone can edit.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netbox_chat.errors import UserFacingError
from netbox_chat.eval.questions import Question, question_from_json
from netbox_chat.store.sessions import SessionStore

PLAN = "run.json"
RESULTS = "results.jsonl"
SESSIONS = "sessions"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Plan:
    """What a run asks: every model, `repeat` times, every question."""

    models: tuple[str, ...]
    questions: tuple[Question, ...]
    seed: int
    repeat: int = 1
    conversation: bool = False
    judge: str | None = None
    netbox_url: str | None = None

    def items(self) -> list[tuple[str, int, Question]]:
        """(model, repeat, question) in the order they are asked."""
        return [
            (model, rep, question)
            for model in self.models
            for rep in range(self.repeat)
            for question in self.questions
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "seed": self.seed,
            "repeat": self.repeat,
            "conversation": self.conversation,
            "judge": self.judge,
            "netbox_url": self.netbox_url,
            "questions": [q.as_json() for q in self.questions],
        }


def plan_from_json(data: Any) -> Plan:
    try:
        return Plan(
            models=tuple(str(m) for m in data["models"]),
            questions=tuple(question_from_json(q) for q in data["questions"]),
            seed=int(data["seed"]),
            repeat=int(data["repeat"]),
            conversation=bool(data["conversation"]),
            judge=None if data.get("judge") is None else str(data["judge"]),
            netbox_url=None if data.get("netbox_url") is None else str(data["netbox_url"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserFacingError(f"the run's {PLAN} is not a run plan: {exc}") from None


def well_formed(result: Any) -> bool:
    """A result line has what the report reads, of the right types."""
    if not isinstance(result, dict) or not isinstance(result.get("score"), dict):
        return False
    texts = ("model", "question", "tier", "kind", "domain", "session", "status")
    return (
        all(isinstance(result.get(key), str) for key in texts)
        and isinstance(result.get("repeat"), int)
        and result["score"].get("correct") in (True, False, None)
        and isinstance(result.get("tool_calls"), list)
        and isinstance(result.get("tokens"), dict)
    )


def result_key(result: dict[str, Any]) -> tuple[str, int, str]:
    return (str(result["model"]), int(result["repeat"]), str(result["question"]))


class RunFolder:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def id(self) -> str:
        return self.root.name

    @classmethod
    def create(cls, runs_dir: Path, plan: Plan) -> RunFolder:
        runs_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for n in range(100):
            root = runs_dir / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                root.mkdir()
            except FileExistsError:
                continue
            folder = cls(root)
            (root / PLAN).write_text(json.dumps(plan.as_json(), indent=1), encoding="utf-8")
            return folder
        raise UserFacingError(f"cannot make a run folder in {runs_dir}")

    @classmethod
    def open(cls, runs_dir: Path, run: str) -> RunFolder:
        if not _RUN_ID.match(run):
            raise UserFacingError(f"{run!r} is not a run id (the folder name under {runs_dir})")
        root = runs_dir / run
        if not (root / PLAN).is_file():
            raise UserFacingError(f"no run {run} in {runs_dir}")
        return cls(root)

    def plan(self) -> Plan:
        try:
            data = json.loads((self.root / PLAN).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserFacingError(f"cannot read {self.root / PLAN}: {exc}") from None
        return plan_from_json(data)

    def results(self) -> list[dict[str, Any]]:
        """The finished results, each once (the last line of a key wins)."""
        path = self.root / RESULTS
        if not path.exists():
            return []
        kept: dict[tuple[str, int, str], dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                result = json.loads(line)
                if well_formed(result):
                    kept[result_key(result)] = result
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a kill -9, or edited by hand
        return list(kept.values())

    def append(self, result: dict[str, Any]) -> None:
        """Write one result so that it survives a kill -9 the moment this returns."""
        line = json.dumps(result, ensure_ascii=False, default=str) + "\n"
        with open(self.root / RESULTS, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def store(self) -> SessionStore:
        return SessionStore(self.root / SESSIONS)

    def pending(
        self, plan: Plan, done: Iterable[dict[str, Any]]
    ) -> list[tuple[str, int, Question]]:
        finished = {result_key(r) for r in done}
        return [item for item in plan.items() if (item[0], item[1], item[2].id) not in finished]
