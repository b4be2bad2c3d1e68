"""The same NetBox call twice in one turn is answered from the turn's first result.

Models repeat identical calls within a turn: an identical ``ipam.prefix`` re-fetch
cost about 40 s in one recorded trace, and hedge searches (``dunder``, ``mifflin``,
``DM-``) recur (docs/facts/real-models.md). A call with the same tool and the
same arguments *as read* (arguments.py: ``{"status": "active"}`` at the top level is
the same call as in ``filters``) as an earlier call of this turn gets that call's
result again, with a note, and NetBox is not asked. The earlier results are the
turn's own messages, so nothing outlives the turn: the next question asks again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from .arguments import ARGUMENT_KINDS, read_arguments
from .validation import FilterRejected


def call_key(name: str, args: Any) -> str | None:
    """What makes two calls the same call: the tool and its arguments as read (None
    for a tool that is not a NetBox tool, or arguments that cannot be read)."""
    if name not in ARGUMENT_KINDS or not isinstance(args, Mapping):
        return None
    try:
        reading = read_arguments(name, args)
    except FilterRejected:
        return None
    return json.dumps([name, reading.args], sort_keys=True, default=str)


def earlier_result(messages: Sequence[BaseMessage], name: str, args: Any) -> tuple[str, str] | None:
    """(call id, result) of this turn's earlier call that is the same call, when it
    succeeded."""
    key = call_key(name, args)
    if key is None:
        return None
    starts = [i for i, m in enumerate(messages) if m.type == "human"]
    turn = messages[starts[-1] + 1 :] if starts else messages
    results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    for message in turn:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            result = results.get(str(call["id"]))
            if result is None or not _succeeded(result):
                continue
            if call_key(call["name"], call["args"]) == key:
                return str(call["id"]), result.text
    return None


class RepeatedCalls(AgentMiddleware[Any, Any, Any]):
    """Answers a repeated NetBox call of the same turn from its first result: one
    made earlier (from the turn's messages), or one running beside it in the same
    parallel batch (awaited, then shared)."""

    def __init__(self) -> None:
        super().__init__()
        # Calls running now, by batch and call key: (call id, its result when it succeeds).
        self._running: dict[tuple[str, str], tuple[str, asyncio.Future[str | None]]] = {}

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        state = request.state if isinstance(request.state, Mapping) else {}
        messages = state.get("messages") or []
        call = request.tool_call
        found = earlier_result(messages, call["name"], call["args"])
        if found is not None:
            return _repeated(call, *found)
        key = call_key(call["name"], call["args"])
        if key is None or not messages:
            return await handler(request)
        batch = (str(messages[-1].id), key)
        if batch in self._running:
            first, running = self._running[batch]
            result = await asyncio.shield(running)
            return _repeated(call, first, result) if result is not None else await handler(request)
        running = asyncio.get_running_loop().create_future()
        self._running[batch] = (str(call["id"]), running)
        try:
            answer = await handler(request)
            if isinstance(answer, ToolMessage) and _succeeded(answer):
                running.set_result(answer.text)
        finally:
            self._running.pop(batch, None)
            if not running.done():
                running.set_result(None)  # cancelled or failed: the others ask for themselves
        return answer


def _succeeded(result: ToolMessage) -> bool:
    """A result worth reusing: a failed call may work when tried again."""
    return result.status != "error" and not result.text.startswith("Error")


def _repeated(call: Mapping[str, Any], first: str, result: str) -> ToolMessage:
    note = (
        f"Note: the same call as {first} earlier in this turn; this is its result, "
        "NetBox was not asked again. Use it, or change the call to learn more."
    )
    return ToolMessage(content=f"{result}\n{note}", tool_call_id=str(call["id"]), name=call["name"])
