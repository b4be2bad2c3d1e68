"""A chat: real session, graph and ChatOllama on the scripted server; what a new process reads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.types import Command

from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.runtime import Runtime, build_runtime
from netbox_chat.agent.turns import Conversation, TurnOutcome
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.config import Settings
from netbox_chat.store.choose import OpenSession, open_store
from netbox_chat.store.postgres import PgSessionStore
from tests.doubles import ROOT
from tests.doubles.graphs import build_graph
from tests.doubles.ollama_server import ScriptedOllama
from tests.doubles.openai_server import chat_model_for, server_settings
from tests.doubles.stores import StoreUnderTest


@dataclass
class Chat:
    conversation: Conversation
    model: BaseChatModel
    kind: str
    store: StoreUnderTest

    @property
    def session(self) -> OpenSession:
        return self.conversation.session

    def close(self) -> None:
        self.conversation.session.close()  # its connection is the saver's

    def snapshot(self) -> dict[str, Any]:
        """Everything a history edit could write, read from a fresh connection."""
        return self.store.snapshot(self.session.id)


@contextlib.asynccontextmanager
async def new_chat(
    kind: str, ollama: ScriptedOllama, store: StoreUnderTest, *, check_ledger: bool = True
) -> AsyncIterator[Chat]:
    """A chat on a new session; when it closes, its ledger must agree with its
    checkpoints (unless the test damaged the ledger on purpose)."""
    session = store.create()
    chat = open_chat(session, kind, ollama, store)
    try:
        yield chat
    finally:
        chat.close()
    if check_ledger:
        store.assert_ledger_agrees(session.id)


@contextlib.asynccontextmanager
async def open_session_runtime(
    settings: Settings, tools: Sequence[BaseTool], session_id: str | None = None
) -> AsyncIterator[Runtime]:
    """A session of the store `settings` name (a new one, or `session_id`),
    opened the way the REPL opens one (`build_runtime`) and closed the way it
    closes one: the runtime, the session, then a database store's connection."""
    sessions = open_store(settings)
    opened = sessions.create(model="qwen3:8b") if session_id is None else sessions.open(session_id)
    runtime = await asyncio.to_thread(build_runtime, opened, settings, tools=list(tools))
    try:
        yield runtime
    finally:
        await runtime.aclose()
        opened.close()
        if isinstance(sessions, PgSessionStore):
            sessions.close()


def fresh_process(chat: Chat, question: str = "", answer: str = "") -> dict[str, Any]:
    """Close the session here and read it (and optionally run one more turn
    against its own scripted server) from a brand-new Python process."""
    chat.close()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_PROCESS,
            chat.store.value,
            chat.session.id,
            chat.kind,
            question,
            answer,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    chat.store.assert_ledger_agrees(chat.session.id)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def contents(messages: list[Any]) -> list[str]:
    return [m["content"] if isinstance(m, dict) else m.content for m in messages]


async def turn(chat: Chat, ollama: ScriptedOllama, question: str, *replies: Any) -> TurnOutcome:
    ollama.script(*replies)
    outcome = await chat.conversation.run_turn(question)
    assert outcome.status == "done", outcome
    return outcome


def open_chat(
    session: OpenSession, kind: str, server: ScriptedOllama, store: StoreUnderTest
) -> Chat:
    """A Conversation on `session` built the way build_runtime builds one, with
    test tools, on whichever model server `server` is; kind is "deepagents",
    "delta" (minimal DeltaChannel graph) or "plain" (minimal add_messages graph)."""
    settings = store.settings(**server_settings(server))
    saver = open_saver(session)
    model = chat_model_for(settings)
    if kind == "deepagents":
        graph = build_agent(settings, DEEPAGENTS_TOOLS, saver, model=model)
    else:
        graph = build_graph(model, MINIMAL_TOOLS, saver, delta=kind == "delta")
    return Chat(Conversation(session, graph, saver, find_end_node(graph)), model, kind, store)


_FRESH_PROCESS = r"""
import asyncio, json, sys
from pathlib import Path
from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.models.ollama import build_model
from netbox_chat.config import resolve_settings
from netbox_chat.checkpoints.saver import open_saver
from netbox_chat.store.choose import open_store
from netbox_chat.agent.turns import Conversation
from tests.doubles import ROOT
from tests.doubles.graphs import build_graph
from tests.doubles.ollama_server import ScriptedOllama, Text


def dump(conv):
    head = conv.head_checkpoint_id()
    values = conv.committed_values(head)
    return {
        "messages": [
            {"id": m.id, "type": m.type, "content": m.content,
             "summary": m.additional_kwargs.get("lc_source") == "summarization"}
            for m in values.get("messages", [])
        ],
        "files": sorted(values.get("files") or {}),
        "problems": conv.head_problems(),
        "next": list(conv.graph.get_state(conv.pinned(head)).next) if head else [],
    }

async def main(store, session_id, kind, question, answer):
    with ScriptedOllama() as ollama:
        settings = resolve_settings(store=store, ollama_url=ollama.url, env={})
        session = open_store(settings).open(session_id)
        saver = open_saver(session)
        model = build_model(settings)
        if kind == "deepagents":
            graph = build_agent(settings, [], saver, model=model)
        else:
            graph = build_graph(model, [], saver, delta=kind == "delta")
        conv = Conversation(session, graph, saver, find_end_node(graph))
        out = {
            "state": dump(conv),
            "turns": [[t.number, t.status, t.message_count] for t in session.turns()],
            "edits": [[kind, detail] for kind, _, detail in session.edits()],
        }
        if question:
            ollama.script([Text(answer)])
            outcome = await conv.run_turn(question)
            out["status"] = outcome.status
            out["request"] = ollama.requests[-1]["messages"]
            out["state_after"] = dump(conv)
        session.close()
    print(json.dumps(out))

asyncio.run(main(*sys.argv[1:6]))
"""


@tool
async def lookup(query: str) -> str:
    """Look something up."""
    return f"lookup result for {query}: " + "row " * 400


@tool
async def take_note(query: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Look something up and leave a note in the agent's files."""
    return Command(
        update={
            "files": {"/notes.md": {"content": f"note about {query}", "encoding": "utf-8"}},
            "messages": [ToolMessage(f"noted {query}", tool_call_id=tool_call_id)],
        }
    )


@tool
async def slow_lookup(query: str) -> str:
    """Look something up slowly."""
    await asyncio.sleep(5)
    return f"slow result for {query}"


DEEPAGENTS_TOOLS: list[BaseTool] = [lookup, take_note, slow_lookup]


MINIMAL_TOOLS: list[BaseTool] = [lookup, slow_lookup]
