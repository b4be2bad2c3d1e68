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

An object in an expected answer or in `universe` is a name or a table of its
names, `{ display = "Dell R640 (17)", id = 17, slug = "..." }`, for an object
without a name: an answer that writes any of them names it. A yes/no
question whose scope is empty says so (`expected = { yes = true, empty = true
}`, or with a query `scope = { path = ..., params = ... }` counting it), and
then "there are none" is right as well.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from netbox_chat.claims.reader import key
from netbox_chat.errors import UserFacingError
from netbox_chat.eval.questions import KINDS, MAX_LIST, TIERS, Question
from netbox_chat.eval.truth import Query, QueryError, TruthClient
from netbox_chat.visible import visible_line

MAX_QUESTIONS = 1000
MAX_TEXT = 2000
MAX_BYTES = 1_000_000
"""A questions file larger than this is refused unread past it (`/dev/zero` ends)."""
MAX_DEPTH = 8
"""Tables and arrays nested deeper than this are no questions file (a question is
at most four deep: question, expected, a table of names, a value)."""
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,79}$")
_KEYS = {"id", "text", "kind", "tier", "domain", "query", "expected", "universe", "scope"}
_NAMES = ("name", "display", "slug", "id")
"""An object's names in a table, the first given is what reports call it."""
MAX_NAME = MAX_TEXT


class QuestionsFileError(UserFacingError):
    pass


def _fail(path: Path, n: int, message: str) -> QuestionsFileError:
    return QuestionsFileError(f"{path}: question {n}: {message}")


def _query(path: Path, n: int, data: Any, field: str = "query") -> Query:
    """A query table; a `scope` is a count of the objects a yes/no question is about."""
    allowed = {"path", "params", "take", "where"} - ({"take"} if field == "scope" else set())
    if not isinstance(data, dict) or set(data) - allowed:
        raise _fail(path, n, f"{field} takes {', '.join(sorted(allowed))}")
    params = data.get("params") or {}
    where = data.get("where") or {}
    if not isinstance(params, dict) or not isinstance(where, dict):
        raise _fail(path, n, f"{field} params and where are tables")
    try:
        return Query(
            path=str(data.get("path", "")),
            params=tuple((str(k), _scalar(v)) for k, v in params.items()),
            take=str(data.get("take", "count")),
            # where = { tenant = "" } keeps rows without a tenant; "!status" = "active" negates
            where=tuple((str(k), _scalar(v) or None) for k, v in where.items()),
        )
    except QueryError as exc:
        raise _fail(path, n, f"{field}: {exc}") from None


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise QueryError(f"{value!r} is not a text or a whole number")
    return str(value)


class _Names:
    """The objects a question names, each under the name reports call it,
    with its other names (aliases) gathered as the file's tables give them."""

    def __init__(self, path: Path, n: int) -> None:
        self.path, self.n = path, n
        self.aliases: dict[str, tuple[str, ...]] = {}
        # each name or other name -> the object it names, and whether a table gave it
        self._owner: dict[str, tuple[str, bool]] = {}

    def read(self, value: Any, where: str) -> str:
        """An object written as a name, or as a table of its names."""
        if isinstance(value, str):
            forms = [self._text(value, where)]
        elif isinstance(value, dict) and value and not set(value) - set(_NAMES):
            forms = [
                f"#{self._id(value[field], f'{where}.id')}"
                if field == "id"
                else self._text(value[field], f"{where}.{field}")
                for field in _NAMES
                if field in value
            ]
        else:
            raise _fail(
                self.path,
                self.n,
                f"{where} is not a name or a table of name, display, slug and id",
            )
        name, others = forms[0], tuple(dict.fromkeys(f for f in forms[1:] if f != forms[0]))
        table = not isinstance(value, str)
        for form in (name, *others):
            # a table's name that another object has too, as the scorer reads names (key:
            # "DM Akron" = "dm-akron"); plain names are left as they were (old files)
            owner, tabled = self._owner.setdefault(
                form if form.startswith("#") else key(form), (name, table)
            )
            if owner != name and (table or tabled):
                raise _fail(self.path, self.n, f"{where}: {form!r} already names {owner!r}")
        if others:
            self.aliases[name] = tuple(dict.fromkeys((*self.aliases.get(name, ()), *others)))
        return name

    def _text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
            raise _fail(self.path, self.n, f"{where} must be a name of 1 to {MAX_NAME} characters")
        return value

    def _id(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(
                self.path, self.n, f"{where} must be a NetBox id (a whole number, 1 or more)"
            )
        return value

    def all(self, values: Any, where: str) -> list[str]:
        if not isinstance(values, list):
            raise _fail(self.path, self.n, f"{where} must be a list of names")
        return [self.read(v, f"{where}[{i}]") for i, v in enumerate(values, 1)]


def _expected(path: Path, n: int, kind: str, value: Any, objects: _Names) -> Any:
    """A typed answer, checked against its answer type."""
    if kind == "count" and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if kind == "value" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind == "value" and isinstance(value, str | dict):
        return objects.read(value, "expected")
    if kind == "list" and isinstance(value, list):
        return sorted(objects.all(value, "expected"))
    if kind == "absence" and value in ("none", [], 0):
        return None
    if kind == "boolean" and isinstance(value, dict):
        unknown = set(value) - {"yes", "exceptions", "empty"}
        if unknown:
            raise _fail(path, n, f"expected takes yes, exceptions and empty, not {min(unknown)}")
        if not isinstance(value.get("yes"), bool):
            raise _fail(path, n, "expected.yes must be true or false")
        exceptions = sorted(objects.all(value.get("exceptions", []), "expected.exceptions"))
        empty = value.get("empty", False)
        if not isinstance(empty, bool):
            raise _fail(path, n, "expected.empty must be true or false")
        if empty and exceptions:
            raise _fail(
                path, n, "expected.empty: a question with nothing in scope has no exceptions"
            )
        return {"yes": value["yes"], "exceptions": exceptions} | ({"empty": True} if empty else {})
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

    text = _read(path)
    if _depth(text) > MAX_DEPTH:
        raise QuestionsFileError(f"{path}: nested deeper than {MAX_DEPTH} levels (the limit)")
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise QuestionsFileError(visible_line(f"{path} is not TOML: {exc}")) from None
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


def _read(path: Path) -> str:
    """The file's text, read no further than MAX_BYTES (a device or a pipe has no
    size to ask first), refused past it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise QuestionsFileError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise QuestionsFileError(f"{path}: larger than {MAX_BYTES:,} bytes (the limit)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QuestionsFileError(f"{path} is not TOML: {exc}") from None


def _depth(text: str) -> int:
    """How deep TOML arrays and inline tables nest, read before the parser
    recurses into them (strings, comments and table headers skipped): tomllib
    recurses once a level, and a file nested thousands deep would end in a
    RecursionError. One pass over the text."""
    deepest = depth = 0
    quote = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not quote and stripped.startswith("[") and stripped.endswith("]") and "=" not in line:
            continue  # a table header: [[question]]
        i = 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\" and quote in ('"', '"""'):
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = ""
                    continue
            elif c == "#":
                break
            elif c in "\"'":
                quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(quote)
                continue
            elif c in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif c in "]}" and depth:
                depth -= 1
            i += 1
        if quote in ('"', "'"):
            quote = ""  # a one-line string ends with its line
    return deepest


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
    if ("query" in item) == ("expected" in item):
        raise _fail(path, n, "give a query or an expected answer (one of the two)")
    if "scope" in item and (kind != "boolean" or "query" not in item):
        raise _fail(path, n, "scope is for a yes/no question with a query")
    objects = _Names(path, n)
    query = None
    if "query" in item:
        query = _query(path, n, item["query"])
        scope = _query(path, n, item["scope"], "scope") if "scope" in item else None
        if client is None:
            raise _fail(path, n, "a query needs NetBox (set NETBOX_URL and NETBOX_TOKEN)")
        try:
            found: dict[str, tuple[str, ...]] = {}
            expected = _from_truth(path, n, kind, client.answer(query, found))
            objects.aliases.update(found)  # an unnamed device in the truth is also "#17"
            if scope is not None and client.answer(scope) == 0:
                if expected["exceptions"]:
                    raise _fail(path, n, "scope counts nothing, yet the query finds exceptions")
                expected["empty"] = True
        except QueryError as exc:
            raise _fail(path, n, str(exc)) from None
    else:
        expected = _expected(path, n, kind, item["expected"], objects)
    universe = objects.all(item.get("universe", []), "universe")
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
        aliases=objects.aliases,
    )
