"""`--questions FILE`: the user's own questions, in TOML.

    [[question]]
    text = "How many devices are in rack R101?"
    kind = "count"                       # count, list, value, boolean or absence
    tier = "simple"                      # simple, medium or advanced (default simple)
    domain = "racks"                     # free text (default custom)
    query = { path = "dcim/devices", params = { rack_id = "1" }, take = "count" }
    # or, instead of a query:  expected = 2

A query is better than a typed answer: it is recomputed on every run, so the
truth follows the data. The file is untrusted input: every field is checked,
and a query is only an API path with filters on the configured NetBox
(truth.check_query), never a URL of its own.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from netbox_chat.errors import UserFacingError
from netbox_chat.eval.questions import KINDS, MAX_LIST, TIERS, Question
from netbox_chat.eval.truth import Query, QueryError, TruthClient

MAX_QUESTIONS = 1000
MAX_TEXT = 2000
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
_KEYS = {"id", "text", "kind", "tier", "domain", "query", "expected", "universe"}


class QuestionsFileError(UserFacingError):
    pass


def _fail(path: Path, n: int, message: str) -> QuestionsFileError:
    return QuestionsFileError(f"{path}: question {n}: {message}")


def _query(path: Path, n: int, data: Any) -> Query:
    if not isinstance(data, dict) or set(data) - {"path", "params", "take", "where"}:
        raise _fail(path, n, "query takes path, params, take and where")
    params = data.get("params") or {}
    where = data.get("where") or {}
    if not isinstance(params, dict) or not isinstance(where, dict):
        raise _fail(path, n, "query params and where are tables")
    try:
        return Query(
            path=str(data.get("path", "")),
            params=tuple((str(k), _scalar(v)) for k, v in params.items()),
            take=str(data.get("take", "count")),
            # where = { tenant = "" } keeps rows without a tenant; "!status" = "active" negates
            where=tuple((str(k), _scalar(v) or None) for k, v in where.items()),
        )
    except QueryError as exc:
        raise _fail(path, n, str(exc)) from None


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise QueryError(f"{value!r} is not a text or a whole number")
    return str(value)


def _expected(path: Path, n: int, kind: str, value: Any) -> Any:
    """A typed answer, checked against its answer type."""
    if kind == "count" and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if kind == "value" and isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    if kind == "list" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sorted(value)
    if kind == "absence" and value in ("none", [], 0):
        return None
    if kind == "boolean" and isinstance(value, dict) and isinstance(value.get("yes"), bool):
        exceptions = value.get("exceptions", [])
        if isinstance(exceptions, list) and all(isinstance(v, str) for v in exceptions):
            return {"yes": value["yes"], "exceptions": sorted(exceptions)}
    raise _fail(path, n, f"expected {value!r} is not an answer of type {kind}")


def _from_truth(path: Path, n: int, kind: str, truth: Any) -> Any:
    if kind == "count" and isinstance(truth, int):
        return truth
    if kind == "value" and truth not in (None, "") and not isinstance(truth, list):
        return str(truth)
    if kind in ("list", "boolean", "absence") and isinstance(truth, list | int):
        rows = truth if isinstance(truth, list) else []
        if kind == "list" and isinstance(truth, list) and 0 < len(truth) <= MAX_LIST:
            return sorted(truth)
        if kind == "boolean" and isinstance(truth, list):
            return {"yes": not truth, "exceptions": sorted(rows)}
        if kind == "absence" and not truth:
            return None
    raise _fail(path, n, f"its query gives {truth!r}, which is not an answer of type {kind}")


def load_questions(path: Path, client: TruthClient | None) -> list[Question]:
    """The file's questions with their truth (queries run on `client`; with no
    client, as for `--list` of a file with typed answers only, a query is an error)."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuestionsFileError(f"cannot read {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise QuestionsFileError(f"{path} is not TOML: {exc}") from None
    items = data.get("question")
    if set(data) - {"question"} or not isinstance(items, list) or not items:
        raise QuestionsFileError(f"{path}: expected one or more [[question]] tables, nothing else")
    if len(items) > MAX_QUESTIONS:
        raise QuestionsFileError(f"{path}: more than {MAX_QUESTIONS} questions")
    questions = []
    seen: set[str] = set()
    for n, item in enumerate(items, 1):
        questions.append(_question(path, n, item, client))
        if questions[-1].id in seen:
            raise _fail(path, n, f"id {questions[-1].id} is used twice")
        seen.add(questions[-1].id)
    return questions


def _question(path: Path, n: int, item: Any, client: TruthClient | None) -> Question:
    if not isinstance(item, dict):
        raise _fail(path, n, "not a table")
    unknown = set(item) - _KEYS
    if unknown:
        raise _fail(
            path,
            n,
            f"unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(sorted(unknown))}",
        )
    text, kind = item.get("text"), item.get("kind")
    tier, domain = item.get("tier", "simple"), item.get("domain", "custom")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise _fail(path, n, f"text must be a question of 1 to {MAX_TEXT} characters")
    if kind not in KINDS or kind == "explanation":
        raise _fail(path, n, "kind must be count, list, value, boolean or absence")
    if tier not in TIERS:
        raise _fail(path, n, "tier must be simple, medium or advanced")
    if not isinstance(domain, str) or not re.match(r"^[a-z][a-z0-9-]{0,30}$", domain):
        raise _fail(path, n, "domain must be a short lowercase word")
    qid = item.get("id", f"custom:{n}")
    if not isinstance(qid, str) or not _ID.match(qid):
        raise _fail(path, n, "id must be letters, digits and . _ : - (up to 80)")
    universe = item.get("universe", [])
    if not isinstance(universe, list) or not all(isinstance(u, str) for u in universe):
        raise _fail(path, n, "universe must be a list of names")
    if ("query" in item) == ("expected" in item):
        raise _fail(path, n, "give a query or an expected answer (one of the two)")
    query = None
    if "query" in item:
        query = _query(path, n, item["query"])
        if client is None:
            raise _fail(path, n, "a query needs NetBox (set NETBOX_URL and NETBOX_TOKEN)")
        try:
            expected = _from_truth(path, n, kind, client.answer(query))
        except QueryError as exc:
            raise _fail(path, n, str(exc)) from None
    else:
        expected = _expected(path, n, kind, item["expected"])
    return Question(
        id=qid,
        text=text.strip(),
        tier=tier,
        kind=kind,
        domain=domain,
        query=query,
        expected=expected,
        universe=tuple(universe),
        trap="absence" if kind == "absence" else None,
        source=str(path.name),
    )
