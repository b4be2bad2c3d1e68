"""`netbox-chat export`: a session's transcript as Markdown or JSON.

Read from the session's own ledger (the `turns` and `history_edits` tables),
on a read-only connection: exporting never writes the file, never takes the
lock (a session open in another netbox-chat can be exported), and never
imports LangChain. The ledger holds every turn, including the ones the model
no longer sees (cancelled, failed, interrupted, rewound), which is what a
transcript has to show; the checkpoints hold only what the model sees.

`--tool-results` adds what each tool call returned, which only the
checkpoints hold: read on a read-only connection too, through LangGraph's saver
(this one imports LangChain), by the code `/show` uses (netbox_chat.agent.evidence).

The NetBox token is never part of a session, and the secrets passed in are
masked anyway, so an export cannot leak one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal, cast

from netbox_chat.agent.evidence import ToolResult, table_of, tool_results, turn_messages
from netbox_chat.claims.present import summary_of
from netbox_chat.config import mask_token
from netbox_chat.models.thinking import thought_for
from netbox_chat.store.database import Connection, read_only_connection
from netbox_chat.store.errors import UnreadableSession
from netbox_chat.store.ledger import Turn, session_model, stored_model
from netbox_chat.store.migrations import has_table
from netbox_chat.store.postgres import PgSessionStore
from netbox_chat.store.sessions import SessionStore, check_session, read_turns
from netbox_chat.visible import visible, visible_json
from netbox_chat.words import count, number

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

Store = SessionStore | PgSessionStore
Format = Literal["md", "json"]

STATUS_NOTES = {
    "done": "",
    "running": "running (or the process ended; rolled back when the session is next opened)",
    "cancelled": "cancelled, rolled back: the model does not see it",
    "failed": "failed, rolled back: the model does not see it",
    "interrupted": "interrupted (the process ended), rolled back: the model does not see it",
    "rewound": "rewound: set aside by a rewind, the model does not see it",
}


def read_transcript(
    store: Store, session_id: str, *, thinking: bool = False, results: bool = False
) -> dict[str, Any]:
    """The session's transcript as plain data (what the JSON export prints).

    How long and how much the model thought is always there; the thinking
    itself only with `thinking`: it is a scratchpad, often longer than the
    answer, and the model never sees it again. What each tool call returned
    only with `results` (`tool_results`, null for a turn whose messages were
    rolled back): it is most of a session's bytes."""
    if isinstance(store, PgSessionStore):
        meta, turns, edits = store.ledger(session_id)
    else:
        meta, turns, edits = _read_file(store, session_id)
    done = [t for t in turns if t.status == "done"]
    returned = stored_tool_results(store, session_id, turns) if results else None
    # A turn from before the ledger kept its model asked the session's first.
    started = stored_model(meta.get("model")) or ""
    return {
        "session": session_id,
        "title": meta.get("title", ""),
        "model": session_model(turns[-1].model if turns else None, started),
        "model_at_start": started,
        "created_at": meta.get("created_at", ""),
        "schema_version": int(meta.get("schema_version", "0")),
        "totals": {
            "turns": len(turns),
            "answered": len(done),
            "tokens_in": sum(t.tokens_in for t in turns),
            "tokens_out": sum(t.tokens_out for t in turns),
            "tool_calls": sum(len(t.tool_calls) for t in turns),
        },
        "turns": [_turn_json(t, started, thinking=thinking, returned=returned) for t in turns],
        "edits": [
            {"kind": kind, "at": at, **json.loads(detail or "{}")} for kind, at, detail in edits
        ],
    }


def _read_file(
    store: SessionStore, session_id: str
) -> tuple[dict[str, str], list[Turn], list[tuple[str, str, str]]]:
    path = store.path_for(session_id)
    try:
        with read_only_connection(path) as conn:
            check_session(conn)
            meta = dict(conn.execute("SELECT key, value FROM session_meta").fetchall())
            turns = read_turns(conn, "ORDER BY number")
            edits = (
                conn.execute("SELECT kind, at, detail FROM history_edits ORDER BY id").fetchall()
                if has_table(conn, "history_edits")  # made at the first edit (m008)
                else []
            )
    except UnreadableSession as exc:
        raise UnreadableSession(f"session {session_id} is unreadable: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise UnreadableSession(f"session {session_id} is unreadable: {exc}") from exc
    return meta, turns, edits


def _turn_json(
    turn: Turn, started: str, *, thinking: bool, returned: dict[int, list[ToolResult]] | None
) -> dict[str, Any]:
    data = {
        "number": turn.number,
        "asked_by": turn.asked_by,
        "model": turn.model or started,
        "provider": turn.provider,
        "server": None if turn.server is None else asdict(turn.server),  # never userinfo
        "status": turn.status,
        "seen_by_model": turn.status == "done",
        "question": turn.question,
        "answer": turn.answer,
        "started_at": turn.started_at,
        "ended_at": turn.ended_at,
        "tokens": {"in": turn.tokens_in, "out": turn.tokens_out},
        "tool_calls": [asdict(call) for call in turn.tool_calls],
        "rolled_back_messages": turn.rolled_back,
        "error": turn.error,
        "thinking_seconds": turn.thinking_seconds,
        "thinking_chars": turn.thinking_chars,
        "grounding": turn.grounding,
        "context": {
            "window": turn.context_window,
            "prompt_tokens_max": turn.prompt_tokens_max,
            "prompt_tokens_last": turn.prompt_tokens_last,
            "truncated": turn.truncated,
        },
    }
    if thinking:
        data["thinking"] = turn.thinking
    if returned is not None:
        kept = returned.get(turn.number)
        data["tool_results"] = (
            None
            if kept is None
            else [
                {"name": r.name, "args": r.args, "error": r.error, "result": r.data()} for r in kept
            ]
        )
    return data


# Turns whose messages are still stored: a rolled-back turn's are deleted
# with it; a rewound turn's stay, as ancestry of the head.
KEPT_MESSAGES = ("done", "rewound")


def stored_tool_results(
    store: Store, session_id: str, turns: Sequence[Turn]
) -> dict[int, list[ToolResult]]:
    """What each tool call of each turn returned, by turn number, for the turns
    whose messages are stored, read at each turn's own end checkpoint.

    A minimal graph of the session's state schema reads them: LangGraph
    rebuilds the message list from its delta writes only through a compiled
    graph's channels. Turns are read oldest first, each end the child of the
    one before, so the saver extends the history it decoded last instead of
    walking the whole thread again (checkpoints.sqlite.HistoryCache)."""
    wanted = [t for t in turns if t.status in KEPT_MESSAGES and t.end_checkpoint_id]
    if not wanted:
        return {}
    from langgraph.graph import END, START, StateGraph

    from netbox_chat.agent.graph import SessionState

    with _read_only_saver(store, session_id) as saver:
        builder = StateGraph(SessionState)
        builder.add_node("read", _nothing)
        builder.add_edge(START, "read")
        builder.add_edge("read", END)
        graph = builder.compile(checkpointer=saver)
        found = {}
        for turn in wanted:
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": session_id,
                    "checkpoint_ns": "",
                    "checkpoint_id": turn.end_checkpoint_id,
                }
            }
            at_end = graph.get_state(config).values.get("messages", [])
            found[turn.number] = tool_results(turn_messages(turn, at_end))
    return found


def _nothing(state: Any) -> dict[str, Any]:
    """The reading graph's one node; it never runs."""
    return {}


@contextlib.contextmanager
def _read_only_saver(store: Store, session_id: str) -> Iterator[Any]:
    """The session's LangGraph saver on a read-only connection of its own:
    no lock taken, nothing written (the session may be open elsewhere)."""
    if isinstance(store, PgSessionStore):
        from netbox_chat.checkpoints.postgres import BridgedPostgresSaver
        from netbox_chat.store import postgres as pgstore

        with contextlib.closing(pgstore.connect(store.url, read_only=True)) as pg:
            yield BridgedPostgresSaver(pg, store.url, session_id)
        return
    from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver

    try:
        with read_only_connection(store.path_for(session_id), factory=Connection) as conn:
            yield BridgedSqliteSaver(cast(Connection, conn), session_id)
    except sqlite3.DatabaseError as exc:
        raise UnreadableSession(f"session {session_id} is unreadable: {exc}") from exc


def export_session(
    store: Store,
    session_id: str,
    fmt: Format = "md",
    *,
    secrets: Sequence[str | None] = (),
    thinking: bool = False,
    results: bool = False,
) -> str:
    """The transcript of `session_id` in `fmt`, with every secret masked and
    no control character raw: it goes to a terminal, or to a file that is
    read on one later (`visible`; in JSON a `\\u` escape, the same string)."""
    transcript = read_transcript(store, session_id, thinking=thinking, results=results)
    if fmt == "json":
        text = visible_json(json.dumps(transcript, indent=2, ensure_ascii=False)) + "\n"
    elif fmt == "md":
        text = visible(to_markdown(transcript))
    else:
        raise ValueError(f"unknown export format {fmt!r} (md or json)")
    for secret in secrets:
        text = mask_token(text, secret)
    return text


# --- Markdown ------------------------------------------------------------------------------


def to_markdown(transcript: dict[str, Any]) -> str:
    totals = transcript["totals"]
    out = [
        f"# netbox-chat session {transcript['session']}",
        "",
        f"- title: {transcript['title'] or '(no question yet)'}",
        f"- model: {_models_md(transcript)}",
        f"- created: {transcript['created_at']}",
        f"- turns: {number(totals['turns'])} ({number(totals['answered'])} answered), "
        f"tokens {number(totals['tokens_in'])} in / {number(totals['tokens_out'])} out, "
        f"{count(totals['tool_calls'], 'tool call')}",
        "",
    ]
    edits_after: dict[int, list[dict[str, Any]]] = {}
    for edit in transcript["edits"]:
        # A rewind to turn N happens after the turns it sets aside; a
        # compaction after the last finished turn (its after_turn).
        position = max([int(edit.get("after_turn", 0)), *map(int, edit.get("set_aside", []))])
        edits_after.setdefault(position, []).append(edit)
    last, model = 0, transcript["model_at_start"]
    for turn in transcript["turns"]:
        out += _edits_md(edits_after, last, turn["number"])
        out += _turn_md(turn, switched=turn["model"] != model)
        last, model = turn["number"], turn["model"]
    out += _edits_md(edits_after, last, None)
    return "\n".join(out).rstrip("\n") + "\n"


def _models_md(transcript: dict[str, Any]) -> str:
    """The model the session goes on with, and the one it started with if
    `/model` (or a resume with another) changed it."""
    now, started = transcript["model"], transcript["model_at_start"]
    return now if now == started or not started else f"{now} (started with {started})"


def _edits_md(
    edits_after: dict[int, list[dict[str, Any]]], since: int, before: int | None
) -> list[str]:
    """Edits recorded after turn `since` and before turn `before` starts."""
    lines: list[str] = []
    for after in sorted(edits_after):
        if after < since or (before is not None and after >= before):
            continue
        for edit in edits_after.pop(after):
            lines += [f"> **history edit ({edit['at']})**: {_edit_text(edit)}", ""]
    return lines


def _edit_text(edit: dict[str, Any]) -> str:
    where = f"turn {edit['after_turn']}" if edit.get("after_turn") else "the start"
    if edit["kind"] == "rewind":
        aside = edit.get("set_aside") or []
        turns = "turn" if len(aside) == 1 else "turns"
        also = f"; {turns} {', '.join(map(str, aside))} set aside" if aside else ""
        return (
            f"rewound to {where} ({edit.get('messages_before', '?')} → "
            f"{edit.get('message_count', '?')} messages{also})"
        )
    if edit["kind"] == "compact":
        return (
            f"compacted after {where}: {count(edit.get('summarized', '?'), 'message')} "
            f"summarized, {count(edit.get('kept_exchanges', '?'), 'exchange')} kept, "
            f"{number(edit.get('messages_before', '?'))} → "
            f"{number(edit.get('message_count', '?'))} messages, "
            f"{number(edit.get('chars_before', '?'))} → "
            f"{number(edit.get('chars_after', '?'))} characters "
            f"(tokens {number(edit.get('tokens_in', 0))} in / "
            f"{number(edit.get('tokens_out', 0))} out)"
        )
    if edit["kind"] == "auto-compact":
        return (
            f"automatic compaction in turn {edit.get('turn', '?')}: the request was about "
            f"{number(edit.get('tokens_before', '?'))} of "
            f"{number(edit.get('window', '?'))} tokens; "
            f"{count(edit.get('summarized', '?'), 'older message')} summarized by the model "
            f"(about {number(edit.get('tokens_after', '?'))} tokens after)"
        )
    return f"{edit['kind']} after {where}"


def _turn_md(turn: dict[str, Any], *, switched: bool) -> list[str]:
    """One turn; `switched`: it asked another model than the turn before it
    (or, the first, than the session started with), which it then names."""
    status = turn["status"]
    mark = "" if status == "done" else f" · {status.upper()}"
    tokens = turn["tokens"]
    asked = f" · asked by {turn['asked_by']}" if turn.get("asked_by") else ""
    asked += f" · model {turn['model']}" if switched and turn["model"] else ""
    context = turn.get("context") or {}
    meter = (
        f" · largest request {number(context['prompt_tokens_max'])} of "
        f"{number(context['window'])} tokens"
        if context.get("window") and context.get("prompt_tokens_max") is not None
        else ""
    )
    lines = [
        f"## Turn {turn['number']}{mark}",
        "",
        f"_{turn['started_at']}{asked} · tokens {number(tokens['in'])} in / "
        f"{number(tokens['out'])} out{meter}_",
        "",
    ]
    if context.get("truncated"):
        lines += [
            "> ⚠ Ollama cut a request of this turn to fit its window: the model did not "
            "see all of the conversation",
            "",
        ]
    if status != "done":
        note = STATUS_NOTES.get(status, status)
        if turn["rolled_back_messages"]:
            note += f" ({count(turn['rolled_back_messages'], 'message')} removed)"
        lines += [f"> ⚠ {note}", ""]
        if turn["error"]:
            lines += [f"> error: {turn['error']}", ""]
    lines += [f"**Question:** {turn['question']}", ""]
    if turn["tool_calls"]:
        lines.append("Tool calls:")
        lines.append("")
        for call in turn["tool_calls"]:
            args = json.dumps(call["args"], ensure_ascii=False, sort_keys=True)
            flag = " **(error)**" if call["error"] else ""
            lines.append(
                f"- `{call['name']}` `{args}` → {call['result_chars']} chars, "
                f"{call['seconds']:.2f}s{flag}"
            )
        lines.append("")
    if turn["tool_calls"] and "tool_results" in turn:
        lines += _results_md(turn["tool_results"], turn["answer"] or "")
    if turn["thinking_chars"]:
        measured = (
            f"{thought_for(turn['thinking_seconds'])} ({number(turn['thinking_chars'])} characters)"
        )
        lines += [f"_{measured}_", ""]
    if turn.get("thinking"):
        lines += ["**Thinking:**", ""]
        lines += [f"> {line}".rstrip() for line in turn["thinking"].splitlines()]
        lines.append("")
    if turn["answer"]:
        lines += ["**Answer:**", "", turn["answer"], ""]
        line = summary_of(turn["grounding"]) if turn.get("grounding") else ""
        if line:
            lines += [f"> ⚠ {line}", ""]
    elif status == "done":
        lines += ["**Answer:** (empty)", ""]
    return lines


def _results_md(results: list[dict[str, Any]] | None, answer: str) -> list[str]:
    """`--tool-results` in Markdown: each call, then what it returned: a NetBox
    list as a table of all its rows (the columns `/show` shows), other JSON
    and text in a code block. NetBox's data cannot forge the transcript's
    structure: cells are escaped, blocks fenced longer than any run inside."""
    if results is None:
        return ["Tool results: not kept (the turn was rolled back).", ""]
    lines = ["Tool results:", ""]
    for index, result in enumerate(results, 1):
        args = json.dumps(result["args"], ensure_ascii=False, sort_keys=True)
        flag = " **(error)**" if result["error"] else ""
        lines += [f"{index}. {_code(result['name'])} {_code(args)}{flag}", ""]
        data = result["result"]
        table = (
            None if isinstance(data, str) else table_of(data, args=result["args"], answer=answer)
        )
        if table is None:
            text = data if isinstance(data, str) else json.dumps(data, indent=2, ensure_ascii=False)
            lines += [*_fenced(text, "text" if isinstance(data, str) else "json"), ""]
            continue
        lines += [
            _row(table.keys),
            _row(["---"] * len(table.keys)),
            *(_row(row) for row in table.rows),
            "",
        ]
        notes = [count(len(table.rows), "row")]
        if table.total > len(table.rows):
            notes.append(f"{table.total} in NetBox")
        if table.other_keys:
            notes.append(f"other fields (in --format json): {', '.join(table.other_keys)}")
        lines += [f"_{'; '.join(notes)}_", ""]
    return lines


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell_md(cell) for cell in cells) + " |"


# What ends a table cell or opens inline markup in CommonMark and GFM: a pipe, a
# code span, HTML or an autolink, a link or image (`![x](http://...)` is fetched when
# the transcript is opened), emphasis, strikethrough, an entity. Each is escaped with
# a backslash, which CommonMark allows before any ASCII punctuation
# (https://spec.commonmark.org/0.31.2/#backslash-escapes) and shows as the character.
_CELL_MARKUP = frozenset("\\|`<[]*_~&")


def _cell_md(text: str) -> str:
    """A table cell of NetBox's data: one line, shown as the text it is, never as
    markup (see `_CELL_MARKUP`). An underscore between letters or digits is left as
    it is (`primary_ip4`): CommonMark never reads one there as emphasis
    (https://spec.commonmark.org/0.31.2/#emphasis-and-strong-emphasis, rule 2)."""
    one_line = " ".join(text.split())
    out = []
    for at, char in enumerate(one_line):
        inside = 0 < at < len(one_line) - 1 and (
            one_line[at - 1].isalnum() and one_line[at + 1].isalnum()
        )
        out.append(f"\\{char}" if char in _CELL_MARKUP and not (char == "_" and inside) else char)
    return "".join(out)


def _code(text: str) -> str:
    """An inline code span holding `text` as it is, whatever backticks it has."""
    one_line = " ".join(text.split())
    ticks = "`" * (_longest_run(one_line, "`") + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") else ""
    return f"{ticks}{pad}{one_line}{pad}{ticks}"


def _fenced(text: str, info: str) -> list[str]:
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return [f"{fence}{info}", *text.splitlines(), fence]


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return longest
