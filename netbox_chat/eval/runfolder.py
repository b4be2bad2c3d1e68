"""A run's folder: its plan (models, seed, the questions with their truth),
its results as they finish, and its own sessions folder.

    eval-runs/<run>/run.json       what was asked of whom, and the truth
    eval-runs/<run>/results.jsonl  one line per finished answer, written as it finishes
    eval-runs/<run>/sessions/      one session per question (netbox-chat export reads them)

A result line is flushed and synced before the next question starts, so a
Ctrl-C or a kill -9 loses at most the question under way; a torn last line
(kill -9 in mid-write) is ignored on reading. Both files are read back as
untrusted input: a run folder is a file anyone can edit. The folder is the
user's alone (0700, files 0600, `netbox_chat.owned`): it holds NetBox data.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netbox_chat.config import without_userinfo
from netbox_chat.errors import UserFacingError
from netbox_chat.eval.questions import Question, question_from_json
from netbox_chat.owned import (
    FILE_MODE,
    FOLDER_MODE,
    NotOwned,
    check_folder,
    create_file,
    make_folder,
    open_append,
    replace_file,
)
from netbox_chat.store.sessions import SessionStore
from netbox_chat.visible import visible_line

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
    left_out: Mapping[str, str] = field(default_factory=dict)
    """Templates left out because a read failed, and why (the report's header says so)."""
    absent: Mapping[str, str] = field(default_factory=dict)
    """Object types NetBox refused (403) or lacks (404): no data, said by name."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """The fingerprint of the data the questions came from (questions.CatalogRead)."""

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
            "netbox_url": None if self.netbox_url is None else without_userinfo(self.netbox_url),
            "questions": [q.as_json() for q in self.questions],
            "left_out": dict(self.left_out),
            "absent": dict(self.absent),
            "data": dict(self.data),
        }


def plan_from_json(data: Any) -> Plan:
    """The plan a run folder holds, read as untrusted input: a run folder is
    handed over like any file. Every field must have its type (no `str()` of
    whatever stands there), names hold no control character (a newline in a
    model's name would forge lines of the report), a NetBox URL loses any
    `user:password@`. One line when it is not a plan."""
    try:
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        questions = data["questions"]
        if not isinstance(questions, list) or not all(isinstance(q, dict) for q in questions):
            raise ValueError("questions is not a list of objects")
        for q in questions:
            for key in ("id", "tier", "kind", "domain"):
                _name(q[key], f"a question's {key}")
            if not isinstance(q["text"], str):
                raise ValueError("a question's text is not text")
        models = data["models"]
        if not isinstance(models, list) or not models:
            raise ValueError("models is not a list of names")
        netbox_url = _optional_name(data.get("netbox_url"), "netbox_url")
        return Plan(
            models=tuple(_name(m, "a model") for m in models),
            questions=tuple(question_from_json(q) for q in questions),
            seed=_integer(data["seed"], "seed", 0),
            repeat=_integer(data["repeat"], "repeat", 1),
            conversation=_flag(data["conversation"], "conversation"),
            judge=_optional_name(data.get("judge"), "judge"),
            netbox_url=None if netbox_url is None else without_userinfo(netbox_url),
            left_out=_reasons(data.get("left_out"), "left_out"),
            absent=_reasons(data.get("absent"), "absent"),
            data=_fingerprint(data.get("data")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserFacingError(visible_line(f"the run's {PLAN} is not a run plan: {what}")) from None


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or visible_line(value) != value:
        raise ValueError(f"{what} is not a name: {value!r}")
    return value


def _reasons(value: Any, what: str) -> dict[str, str]:
    """Names and one line of why each (absent in a run made before they were kept)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{what} is not names with a reason each")
    return {_name(k, what): visible_line(v) for k, v in value.items()}


def _fingerprint(value: Any) -> dict[str, Any]:
    """Per object type, its count and last change (or why its read failed)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and set(v) <= {"count", "last_change", "failed"}
        for k, v in value.items()
    ):
        raise ValueError("data is not a count and a last change per object type")
    return value


def _optional_name(value: Any, what: str) -> str | None:
    return None if value is None else _name(value, what)


def _integer(value: Any, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what} is not a whole number of at least {least}: {value!r}")
    return value


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} is not true or false: {value!r}")
    return value


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


def _check_entries(run: str, folder: Path) -> None:
    """The files of a run to resume: no symlink, each the user's, made 0600
    (a run made before runs were private was 0644)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            _check_entry(run, entry)


def _check_entry(run: str, entry: os.DirEntry[str]) -> None:
    if entry.is_symlink():
        raise NotOwned(
            f"refusing to resume run {run}: {entry.path} is a symbolic link, "
            "which a run never makes; start a new run instead"
        )
    info = entry.stat()
    if info.st_uid != os.getuid():
        raise NotOwned(f"refusing to resume run {run}: {entry.path} is not yours; start a new run")
    if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(entry.path, FILE_MODE)
        except OSError as exc:
            raise NotOwned(f"cannot make {entry.path} private: {exc.strerror}") from None


def result_key(result: dict[str, Any]) -> tuple[str, int, str]:
    return (str(result["model"]), int(result["repeat"]), str(result["question"]))


class RunFolder:
    """One run's folder, the user's alone: 0700, its files 0600, written
    only through names it made itself (a symlink there is never followed)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def id(self) -> str:
        return self.root.name

    @classmethod
    def create(cls, runs_dir: Path, plan: Plan) -> RunFolder:
        make_folder(runs_dir, "eval runs folder")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for n in range(100):
            root = runs_dir / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                os.mkdir(root, FOLDER_MODE)
                os.chmod(root, FOLDER_MODE)  # whatever the umask took off
            except FileExistsError:
                continue
            except OSError as exc:
                raise UserFacingError(
                    f"cannot make a run folder in {runs_dir}: {exc.strerror}"
                ) from None
            create_file(root / PLAN, json.dumps(plan.as_json(), indent=1))
            return cls(root)
        raise UserFacingError(f"cannot make a run folder in {runs_dir}")

    @classmethod
    def open(cls, runs_dir: Path, run: str) -> RunFolder:
        """A run to resume: the user's own folder, holding no symlink (a run
        makes none; one in a folder handed over would have the resumed run
        write or delete wherever it points). Refused in one line otherwise."""
        if not _RUN_ID.match(run):
            raise UserFacingError(f"{run!r} is not a run id (the folder name under {runs_dir})")
        root = runs_dir / run
        if not os.path.lexists(root) or not (root / PLAN).exists():
            raise UserFacingError(f"no run {run} in {runs_dir}")
        check_folder(root, "run folder", follow=False)
        _check_entries(run, root)
        sessions = root / SESSIONS
        if sessions.is_dir():  # a link there was refused above
            check_folder(sessions, "run's sessions folder", follow=False)
            _check_entries(run, sessions)
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
        with open(open_append(self.root / RESULTS), "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write(self, name: str, text: str) -> Path:
        """A report, replaced whole (a symlink at its name is replaced, never followed)."""
        path = self.root / name
        replace_file(path, text)
        return path

    def store(self) -> SessionStore:
        return SessionStore(self.root / SESSIONS)

    def pending(
        self, plan: Plan, done: Iterable[dict[str, Any]]
    ) -> list[tuple[str, int, Question]]:
        finished = {result_key(r) for r in done}
        return [item for item in plan.items() if (item[0], item[1], item[2].id) not in finished]
