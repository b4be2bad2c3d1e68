"""The turn ledger of either store: the Turn record, its columns, rows checked, its SQL.

Anyone with access to a store writes its rows, so every value read back is
checked here (`stored_model`, `stored_server`, `stored_grounding`) for the
folder store and the PostgreSQL store alike. The SQL of meta, turns and
history edits is written once (`Ledger`, `ledger_sql`) for a session file
(tables of one session) and the database (tables keyed by `session_id`), as
LangGraph's Postgres saver shares its SQL between its sync and async savers.
Like the rest of `store/`, it never imports LangChain.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, Self, TypedDict

from netbox_chat.config import PROVIDERS, ModelServer, without_userinfo

# A session holds an answer once one of its turns finished; a later rewind
# does not make it a session that never happened.
ANSWERED = "('done', 'rewound')"

TurnStatus = Literal["running", "done", "cancelled", "failed", "interrupted", "rewound"]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class ToolCallRecord:
    """One tool call of a turn, as the ledger keeps it: what was called, how
    much it returned, how long it took, whether it failed."""

    name: str
    args: dict[str, Any]
    result_chars: int = 0
    seconds: float = 0.0
    error: bool = False


@dataclass
class Turn:
    """One question and what became of it: a row of the turn ledger, as the
    recap, /history, /tokens and `export` read it."""

    number: int
    question: str
    status: TurnStatus
    started_at: str
    ended_at: str | None = None
    base_checkpoint_id: str | None = None
    base_message_count: int | None = None
    end_checkpoint_id: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    rolled_back: int = 0
    error: str | None = None
    answer: str | None = None
    message_count: int | None = None
    prompt_tokens_max: int | None = None
    prompt_tokens_last: int | None = None
    context_window: int | None = None
    truncated: bool = False
    thinking: str | None = None
    thinking_seconds: float | None = None
    thinking_chars: int = 0
    asked_by: str | None = None
    model: str | None = None  # None: a row from before m005, it asked the session's model
    provider: str | None = None
    server_scheme: str | None = None  # None: a row from before m006, the server is not known
    server_host: str | None = None
    server_port: int | None = None
    profile: str | None = None
    # the grounding check of the answer, as `ask --json` gives it (None: a row
    # from before m007, or a turn with no answer)
    grounding: dict[str, Any] | None = None

    @property
    def server(self) -> ModelServer | None:
        """The model server the turn asked, when the row says it (m006)."""
        return stored_server(
            self.provider, self.server_scheme, self.server_host, self.server_port, self.profile
        )


TURN_FIELDS = tuple(f.name for f in fields(Turn))
TURN_COLUMNS = ", ".join(TURN_FIELDS)


_HOST = re.compile(r"[A-Za-z0-9._:-]{1,253}")
PROFILE_NAME_MAX = 100


def stored_server(
    provider: object, scheme: object, host: object, port: object, profile: object
) -> ModelServer | None:
    """A turn's model server read back from a store, or None when the row
    does not say one. Anyone with access to the store writes these rows, and
    they are shown and printed in a command to copy: a known provider and
    scheme, a host name or address (no `user@`, no path), a port, a printable
    profile name; anything else is no server at all. It never chooses where
    the next turn goes: only what the user is told."""
    if provider not in PROVIDERS or scheme not in ("http", "https"):
        return None
    if not isinstance(host, str) or not _HOST.fullmatch(host):
        return None
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        return None
    if isinstance(port, int) and not 0 < port < 65536:
        return None
    if profile is not None and not (
        isinstance(profile, str)
        and 0 < len(profile) <= PROFILE_NAME_MAX
        and profile.isprintable()
        and profile == profile.strip()
    ):
        return None
    return ModelServer(str(provider), str(scheme), host, port, profile)


def turn_from_row(row: tuple[Any, ...]) -> Turn:
    values = dict(zip(TURN_FIELDS, row, strict=True))
    calls = json.loads(values["tool_calls"] or "[]")
    values["tool_calls"] = [ToolCallRecord(**call) for call in calls]
    values["model"] = stored_model(values["model"])
    values["provider"] = values["provider"] if values["provider"] in PROVIDERS else None
    server = stored_server(*(values[k] for k in _SERVER_FIELDS))
    kept = (None,) * 4 if server is None else astuple(server)[1:]
    values.update(zip(_SERVER_FIELDS[1:], kept, strict=True))  # all of it, or none of it
    values["grounding"] = stored_grounding(values["grounding"])
    return Turn(**values)


_SERVER_FIELDS = ("provider", "server_scheme", "server_host", "server_port", "profile")


# The kinds of claim the grounding check reports (netbox_chat.claims).
GROUNDING_KINDS = (
    "name", "number", "address", "value", "count", "members", "quantifier", "yesno",
)  # fmt: skip
_GROUNDING_KEYS = {"claims", "ungrounded", "without_netbox"}


def stored_grounding(value: object) -> dict[str, Any] | None:
    """A turn's grounding read back from a store, or None when it is not one:
    anyone with access to the store writes these rows, so only the exact
    shape `ask --json` gives is taken (its texts are shown escaped). Rows
    from before the check told unchecked claims apart have no "unchecked"."""
    if not isinstance(value, str):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) - {"unchecked"} != _GROUNDING_KEYS:
        return None
    claims, without = data["claims"], data["without_netbox"]
    if type(claims) is not int or claims < 0 or type(without) is not bool:
        return None
    if not all(_claim_list(data.get(k, [])) for k in ("ungrounded", "unchecked")):
        return None
    return {**data, "unchecked": data.get("unchecked", [])}


def _claim_list(claims: object) -> bool:
    return isinstance(claims, list) and all(
        isinstance(c, dict)
        and set(c) == {"text", "kind"}
        and isinstance(c["text"], str)
        and c["kind"] in GROUNDING_KINDS
        for c in claims
    )


MODEL_NAME_MAX = 200


def stored_model(value: object) -> str | None:
    """A model name read back from a store, or None when it is not one.

    Anyone with access to a store writes these rows, and the name goes to
    the model server (as the model asked for, never as a URL or a command)
    and to the screen: one printable line, no longer than any real id
    (`hf.co/org/repo:Q4_K_M`, `Qwen/Qwen3-8B`, a llama-server file path)."""
    if not isinstance(value, str) or not value or len(value) > MODEL_NAME_MAX:
        return None
    return value if value.isprintable() and value == value.strip() else None


def session_model(latest: object, started: object) -> str:
    """The model a session goes on with: its newest turn's, or, for a turn
    from before the ledger kept one (or none yet), the model it was started
    with; "" when neither is a model name (`stored_model`)."""
    return stored_model(latest) or stored_model(started) or ""


class SessionStart(TypedDict):
    """What a new session is started with, on either store: the model, the
    NetBox it asks (URL and the profile that named it; never the token), and
    an id only for `copy`, which keeps it."""

    model: str
    netbox_url: NotRequired[str | None]
    profile: NotRequired[str | None]
    session_id: NotRequired[str | None]


# What `copy` carries over of a session's meta (the rest belongs to the store).
COPIED_META = ("created_at", "title", "model", "netbox_url", "profile", "think")

TITLE_MAX = 200
"""The longest title: the first question's first line is cut there, a
`/rename` refused past it."""


def turn_to_row(turn: Turn) -> tuple[Any, ...]:
    """The inverse of `turn_from_row`, in `TURN_FIELDS` order (for `copy`)."""
    values = asdict(turn)
    values["tool_calls"] = json.dumps(values["tool_calls"])
    values["grounding"] = None if turn.grounding is None else json.dumps(turn.grounding)
    return tuple(values[name] for name in TURN_FIELDS)


def asked_by() -> str:
    """Who asks a turn: the OS user and host, as the ledger records it."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class CleanPoint:
    """A head the ledger recorded as the clean end of a turn or of a history
    edit, with its message count and the checkpoint it was made from (whose
    writes made it). None where the ledger does not know."""

    checkpoint_id: str | None
    message_count: int | None
    parent_checkpoint_id: str | None
    parent_message_count: int | None


def clean_point_of(done: Sequence[Any] | None, edit_detail: str | None) -> CleanPoint:
    """The clean point from the last finished turn's row (number, end
    checkpoint, message count, base checkpoint, base message count) and the
    last history edit's detail: the edit counts if it was made after that turn."""
    last = done[0] if done else 0
    if edit_detail:
        detail = json.loads(edit_detail)
        if detail.get("after_turn") == last and "message_count" in detail:
            return CleanPoint(
                detail.get("head_after"),
                int(detail["message_count"]),
                detail.get("head_before"),
                detail.get("messages_before"),
            )
    if done is None:
        return CleanPoint(None, 0, None, None)
    return CleanPoint(*done[1:])


@dataclass(frozen=True)
class Recap:
    """What `resume` prints before the prompt: the counts and the last exchange,
    then any cancelled, failed or interrupted turns after it."""

    turns: int
    messages: int
    last: Turn | None
    unfinished: tuple[Turn, ...]


_PLACEHOLDER = re.compile(r":(\w+)")


@functools.cache
def ledger_sql(template: str, *, keyed: bool, pyformat: bool) -> str:
    """A ledger query for one store: `{where}`, `{and_}`, `{key_col}` and
    `{key_val}` become the `session_id` key (tables of many sessions) or
    nothing (a file of one), and `:name` parameters the driver's style."""
    text = template.format(
        where="WHERE session_id = :session_id" if keyed else "",
        and_="session_id = :session_id AND " if keyed else "",
        key_col="session_id, " if keyed else "",
        key_val=":session_id, " if keyed else "",
    )
    return _PLACEHOLDER.sub(r"%(\1)s", text) if pyformat else text


class Ledger:
    """A session's own tables (meta, the turn ledger, history edits), one
    set of calls for both stores: a session file (`SessionFile`, its tables
    hold one session) and the database (`postgres.PgSession`, its tables hold
    every session's rows, keyed by `session_id`). Every write is one
    `db.atomic()`, so inside a caller's transaction (a rollback, a rewind) it
    commits with it."""

    id: str
    asked_by: str
    KEYED = False  # rows carry a session_id column
    PYFORMAT = False  # the driver's parameters are %(name)s, not :name

    @property
    def db(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _sql(self, template: str) -> str:
        return ledger_sql(template, keyed=self.KEYED, pyformat=self.PYFORMAT)

    def _run(self, template: str, **params: Any) -> Any:
        return self.db.execute(self._sql(template), {"session_id": self.id, **params})

    def _run_many(self, template: str, rows: Sequence[dict[str, Any]]) -> None:
        self.db.cursor().executemany(
            self._sql(template), [{"session_id": self.id, **row} for row in rows]
        )

    def _has_edits(self) -> bool:
        """Whether the history edits table is there: always in the database;
        a session file gets one at its first edit (migration m008)."""
        return True

    def _make_edits_table(self) -> None:
        """Create the history edits table if the store makes it lazily."""

    # meta

    def _record_start(self, start: SessionStart) -> None:
        """A new session's meta: the model and the NetBox it was started with
        (URL without credentials, and the profile that named it; never the
        token). Every teammate on a shared store reads these rows."""
        netbox_url = start.get("netbox_url")
        url = without_userinfo(netbox_url) if netbox_url else None
        remembered = {"netbox_url": url, "profile": start.get("profile")}
        self._set_meta(
            created_at=now_iso(),
            model=start["model"],
            title="",
            **{key: value for key, value in remembered.items() if value},
        )

    def _set_meta(self, **values: str) -> None:
        with self.db.atomic():
            self._run_many(_SET_META, [{"key": k, "value": v} for k, v in values.items()])

    def meta(self) -> dict[str, str]:
        return dict(self._run("SELECT key, value FROM session_meta {where}").fetchall())

    def remember(self, **choices: str) -> None:
        """Keep the user's choices for this session (its title from
        `/rename`, the `/think` setting) in its meta, beside the model and
        NetBox it was started with, where `ls`, `resume` and `copy` read
        them. Whoever writes the store can write these rows too: a reader
        checks what it takes (`stored_title`, the `/think` words)."""
        self._set_meta(**choices)

    # the turn ledger

    def begin_turn(
        self,
        question: str,
        *,
        base_checkpoint_id: str | None,
        base_message_count: int,
        model: str | None = None,
        server: ModelServer | None = None,
    ) -> int:
        """Record a turn as running, with its rollback point, who asked it,
        which model it asks and on which server (never its password or key),
        before it starts; the first question names the session.

        Committed without waiting for the disk (`atomic(synced=False)`): a
        Ctrl-C in the turn's first moments waits for this commit. Nothing of
        the turn is stored before its end, whose commits are synced and take
        this row with them; a power cut before then loses the row with a
        turn that left nothing behind."""
        with self.db.atomic(synced=False):
            row = self._run(
                "INSERT INTO turns({key_col}number, question, status, started_at, "
                "base_checkpoint_id, base_message_count, asked_by, model, provider, "
                "server_scheme, server_host, server_port, profile) "
                "SELECT {key_val}coalesce(max(number), 0) + 1, :question, 'running', :now, "
                ":base_checkpoint_id, :base_message_count, :asked_by, :model, :provider, "
                ":scheme, :host, :port, :profile "
                "FROM turns {where} RETURNING number",
                question=question,
                now=now_iso(),
                base_checkpoint_id=base_checkpoint_id,
                base_message_count=base_message_count,
                asked_by=self.asked_by,
                model=model,
                provider=server.provider if server else None,
                scheme=server.scheme if server else None,
                host=server.host if server else None,
                port=server.port if server else None,
                profile=server.profile if server else None,
            ).fetchone()
            self._run(
                "UPDATE session_meta SET value = :title WHERE {and_}key = 'title' AND value = ''",
                title=question.strip().splitlines()[0][:TITLE_MAX] if question.strip() else "",
            )
        return int(row[0])

    def finish_turn(
        self,
        number: int,
        status: TurnStatus,
        *,
        end_checkpoint_id: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        tool_calls: list[ToolCallRecord] | None = None,
        rolled_back: int = 0,
        error: str | None = None,
        answer: str | None = None,
        message_count: int | None = None,
        prompt_tokens_max: int | None = None,
        prompt_tokens_last: int | None = None,
        context_window: int | None = None,
        truncated: bool = False,
        thinking: str | None = None,
        thinking_seconds: float | None = None,
        grounding: dict[str, Any] | None = None,
    ) -> None:
        """Close a turn's row."""
        with self.db.atomic():
            self._run(
                "UPDATE turns SET status = :status, ended_at = :now, "
                "end_checkpoint_id = :end_checkpoint_id, tokens_in = :tokens_in, "
                "tokens_out = :tokens_out, tool_calls = :tool_calls, "
                "rolled_back = :rolled_back, error = :error, answer = :answer, "
                "message_count = :message_count, prompt_tokens_max = :prompt_tokens_max, "
                "prompt_tokens_last = :prompt_tokens_last, context_window = :context_window, "
                "truncated = :truncated, thinking = :thinking, "
                "thinking_seconds = :thinking_seconds, thinking_chars = :thinking_chars, "
                "grounding = :grounding "
                "WHERE {and_}number = :number",
                number=number,
                status=status,
                now=now_iso(),
                end_checkpoint_id=end_checkpoint_id,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                tool_calls=json.dumps([asdict(c) for c in tool_calls or []]),
                rolled_back=rolled_back,
                error=error,
                answer=answer,
                message_count=message_count,
                prompt_tokens_max=prompt_tokens_max,
                prompt_tokens_last=prompt_tokens_last,
                context_window=context_window,
                truncated=int(truncated),
                thinking=thinking,
                thinking_seconds=thinking_seconds,
                thinking_chars=len(thinking or ""),
                grounding=None if grounding is None else json.dumps(grounding),
            )

    def _turns(self, condition: str = "TRUE", order: str = "", **params: Any) -> list[Turn]:
        rows = self._run(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE {{and_}}({condition}) ORDER BY number {order}",
            **params,
        ).fetchall()
        return [turn_from_row(tuple(row)) for row in rows]

    def turns(self) -> list[Turn]:
        return self._turns()

    def running_turns(self) -> list[Turn]:
        return self._turns("status = 'running'")

    def recorded_status(self, number: int) -> str | None:
        """What the store holds for turn `number` after a write of it failed:
        its status as committed, or None when that cannot be known now. A
        file's commit either happened or not, and its own connection says
        which; a database store asks again on a new connection (PgSession)."""
        try:
            row = self._run("SELECT status FROM turns WHERE {and_}number = :number", number=number)
            found = row.fetchone()
        except sqlite3.Error:
            return None
        return str(found[0]) if found else None

    def finished_after(self, number: int) -> bool:
        """Whether any turn after `number` has ended (in whatever way)."""
        row = self._run(
            "SELECT 1 FROM turns WHERE {and_}number > :number AND status != 'running' LIMIT 1",
            number=number,
        ).fetchone()
        return row is not None

    def mark_rewound(self, after_number: int) -> int:
        """Mark every finished turn after `after_number` as rewound."""
        with self.db.atomic():
            cur = self._run(
                "UPDATE turns SET status = 'rewound' "
                "WHERE {and_}number > :number AND status = 'done'",
                number=after_number,
            )
        return int(cur.rowcount)

    def record_edit(self, kind: str, **detail: Any) -> None:
        with self.db.atomic():
            self._make_edits_table()
            self._run_many(
                _RECORD_EDIT, [{"kind": kind, "at": now_iso(), "detail": json.dumps(detail)}]
            )

    def edits(self) -> list[tuple[str, str, dict[str, Any]]]:
        if not self._has_edits():
            return []
        rows = self._run("SELECT kind, at, detail FROM history_edits {where} ORDER BY id")
        return [(kind, at, json.loads(detail)) for kind, at, detail in rows.fetchall()]

    def message_count_now(self) -> int:
        """Messages in the conversation as the last finished turn or the last
        history edit (rewind, compaction) after it left it."""
        return self.clean_point().message_count or 0

    def clean_point(self) -> CleanPoint:
        """Where the ledger says the conversation was last left: the end of
        the last finished turn, or the head written by the last history edit
        (rewind, compaction) after it. Lets a turn check its head from a few
        rows instead of reading the whole conversation."""
        done = self._run(
            "SELECT number, end_checkpoint_id, message_count, base_checkpoint_id, "
            "base_message_count FROM turns WHERE {and_}status = 'done' "
            "ORDER BY number DESC LIMIT 1"
        ).fetchone()
        last_edit = None
        if self._has_edits():
            edit = self._run("SELECT detail FROM history_edits {where} ORDER BY id DESC LIMIT 1")
            last_edit = edit.fetchone()
        return clean_point_of(done, last_edit[0] if last_edit else None)

    def recap(self) -> Recap:
        """The recap `resume` shows, from a few small queries: reading the
        whole ledger (every row, its tool calls parsed) would make the prompt
        of a long session wait for rows nobody is shown."""
        (done,) = self._run("SELECT count(*) FROM turns WHERE {and_}status = 'done'").fetchone()
        newest = self._turns("status = 'done'", "DESC LIMIT 1")
        last = newest[0] if newest else None
        # Only what went wrong after the last answer, rewound ones included: a
        # rewind to turn 1 must not bring back "turn 2 was failed" from before
        # turns 3 and 4 were answered (and set aside by that rewind).
        (answered,) = self._run(
            f"SELECT coalesce(max(number), 0) FROM turns WHERE {{and_}}status IN {ANSWERED}"
        ).fetchone()
        unfinished = self._turns(
            "number > :after AND status IN ('cancelled', 'failed', 'interrupted')",
            after=int(answered),
        )
        return Recap(int(done), self.message_count_now(), last, tuple(unfinished))

    def load_ledger(
        self,
        meta: dict[str, str],
        turns: list[Turn],
        edits: list[tuple[str, str, dict[str, Any]]],
    ) -> None:
        """Write a copied session's ledger as it was, in one transaction (`copy`)."""
        marks = ", ".join(f":{name}" for name in TURN_FIELDS)
        with self.db.atomic():
            copied = {key: meta[key] for key in COPIED_META if key in meta}
            if "netbox_url" in copied:  # a session from before issue 21 may hold credentials
                copied["netbox_url"] = without_userinfo(copied["netbox_url"])
            self._run_many(_SET_META, [{"key": k, "value": v} for k, v in copied.items()])
            self._run_many(
                f"INSERT INTO turns({{key_col}}{TURN_COLUMNS}) VALUES ({{key_val}}{marks})",
                [dict(zip(TURN_FIELDS, turn_to_row(turn), strict=True)) for turn in turns],
            )
            if edits:  # a file gets the table at its first edit (m008)
                self._make_edits_table()
                self._run_many(
                    _RECORD_EDIT,
                    [
                        {"kind": kind, "at": at, "detail": json.dumps(detail)}
                        for kind, at, detail in edits
                    ],
                )


_SET_META = (
    "INSERT INTO session_meta({key_col}key, value) VALUES ({key_val}:key, :value) "
    "ON CONFLICT({key_col}key) DO UPDATE SET value = excluded.value"
)
_RECORD_EDIT = (
    "INSERT INTO history_edits({key_col}kind, at, detail) VALUES ({key_val}:kind, :at, :detail)"
)
