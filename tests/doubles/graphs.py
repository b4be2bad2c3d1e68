"""Minimal agent graphs for tests: a model node, a tool node, and the one edge to END.

They isolate the checkpoint behaviour from deepagents' middleware: `build_graph(...,
delta=True)` stores `messages` in a `DeltaChannel` with deepagents' own reducer and
snapshot frequency (so a head has no `messages` value of its own and state is rebuilt
by replaying writes, as in the real agent); `delta=False` uses plain `add_messages`
(a full copy of the list in every checkpoint). Both speak to any chat model, so tests
drive the real ChatOllama against `tests.doubles.ollama_server.ScriptedOllama`.

The node names match what `netbox_chat.agent.turns.Conversation` expects: text streamed
from the node called "model" is reported as the answer, and `find_end_node` finds
"model" as the only node routing to END.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from deepagents._messages_reducer import _messages_delta_reducer
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

# The same declaration as deepagents' agent state (deepagents/graph.py).
DELTA_SNAPSHOT_FREQUENCY = 50


class DeltaState(TypedDict):
    messages: Annotated[
        list[AnyMessage],
        DeltaChannel(_messages_delta_reducer, snapshot_frequency=DELTA_SNAPSHOT_FREQUENCY),
    ]


class PlainState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver[Any],
    *,
    delta: bool = True,
    system_prompt: str | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START → model ⇄ tools; model → END when its last message asks for no tool."""
    bound: Any = model.bind_tools(list(tools)) if tools else model
    prefix = [SystemMessage(system_prompt)] if system_prompt else []

    async def call_model(state: dict[str, Any]) -> dict[str, Any]:
        response = await bound.ainvoke([*prefix, *state.get("messages", [])])
        return {"messages": [response]}

    def route(state: dict[str, Any]) -> str:
        # Also called by update_state(as_node="model"), where the list may be
        # empty (a rewind to the start) or end with any kind of message.
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if tools and isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        return END

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(DeltaState if delta else PlainState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    if tools:
        builder.add_node("tools", ToolNode(list(tools)))
        builder.add_edge("tools", "model")
        builder.add_conditional_edges("model", route, ["tools", END])
    else:
        builder.add_conditional_edges("model", route, [END])
    return builder.compile(checkpointer=checkpointer)
