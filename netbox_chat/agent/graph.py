"""Building the deep agent: model, tools, system prompt, and the facts about its
compiled graph that rollback needs (the node that routes to `__end__`).

Importing this module costs seconds (deepagents pulls in LangChain), which is
why the REPL builds the agent on a background thread while the user types.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Required

from deepagents import (
    FilesystemMiddleware,
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    create_deep_agent,
    register_harness_profile,
)
from deepagents._messages_reducer import _messages_delta_reducer
from deepagents.graph import DeepAgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from netbox_chat.agent.replies import ReplyRepair
from netbox_chat.config import Settings
from netbox_chat.models.ollama import build_model
from netbox_chat.models.thinking import REASONING_KEY, inlines_thinking, split_thinking
from netbox_chat.netbox.repeats import RepeatedCalls

SYSTEM_PROMPT = """\
You are netbox-chat, an assistant for network operators. NetBox is the \
network's source of truth; answer only from what the NetBox tools return, \
never from memory or guesses.

How to work:
- Object types are NetBox's dotted names: dcim.site, dcim.device, \
dcim.interface, ipam.prefix, ipam.ipaddress, ipam.vlan, tenancy.tenant, ...
- Filter with exact values: `site` takes a slug (dm-akron), `name` is exact \
and case-sensitive, `q` searches. For several values pass a list.
- If a tool rejects a filter, read why and retry with the form it suggests. \
Never treat a rejected or failed call as an empty answer.
- Counts come from the tool result's `count`, not from the rows you received. \
If there are more rows than returned, say so or page with `offset`.
- Ask for only the fields you need. Do not invent objects, ids or values.

Answer briefly in Markdown: lead with the answer, then a short list or table \
of the objects it rests on (name, site, status, ...).\
"""

# The file tools deepagents adds by default, minus everything this read-only
# agent has no use for. `read_file` stays because deepagents offloads very
# large tool results to its in-state virtual files and points the model there.
FILE_TOOLS_KEPT: list[Any] = ["read_file"]

FILE_TOOLS_PROMPT = (
    "Very large tool results may be saved to a virtual file; read them with read_file."
)


class SessionState(DeepAgentState):
    """deepagents' state, with `messages` stored as deltas only.

    deepagents snapshots the whole message list every 50 updates, so a
    session file grows with the square of the conversation (24 MB at 500
    turns, bench 4). Without periodic snapshots a turn adds only its own
    messages. Reads stay linear either way (a snapshot is as long as the
    history it replaces), and /compact or a rewind writes a fresh snapshot.
    """

    messages: Required[  # type: ignore[misc]
        Annotated[
            list[AnyMessage],
            DeltaChannel(_messages_delta_reducer, snapshot_frequency=sys.maxsize),
        ]
    ]


def _exclude_subagents_for_ollama() -> None:
    """The `task` tool (sub-agents) roughly doubles the request and a small
    local model uses it badly; a harness profile for the ollama provider
    turns the default general-purpose sub-agent off."""
    register_harness_profile(
        "ollama",
        HarnessProfile(general_purpose_subagent=GeneralPurposeSubagentProfile(enabled=False)),
    )


# Where langchain-ollama 1.1.0 keeps Ollama's `message.thinking` (when `reasoning`
# is truthy) and what it sends back as `thinking` on later requests.


class ThinkingMiddleware(AgentMiddleware[Any, Any, Any]):
    """Keeps the model's scratchpad out of the conversation it is sent.

    A request carries no thinking from earlier turns, so thinking costs no
    context later on. The current turn's thinking stays: Ollama's templates for
    qwen3 and gpt-oss render thinking only for the assistant messages after the
    last user message, which is what a model in the middle of a tool loop
    expects. A reply's `<think>...</think>` content is moved to where
    `message.thinking` goes, so the stored answer is only the answer.
    """

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        response = await handler(request.override(messages=without_old_thinking(request.messages)))
        inline = inlines_thinking(getattr(request.model, "reasoning", None))
        response.result = [_thinking_apart(message, inline) for message in response.result]
        return response


def without_old_thinking(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages with the thinking of every turn before the last question removed."""
    last_question = max(
        (i for i, message in enumerate(messages) if isinstance(message, HumanMessage)), default=0
    )
    return [
        _without_thinking(message) if i < last_question else message
        for i, message in enumerate(messages)
    ]


def _without_thinking(message: AnyMessage) -> AnyMessage:
    if not isinstance(message, AIMessage):
        return message
    # The content is left as it is: `_thinking_apart` already moved a leading
    # thinking block out when the reply came, so what is left is the answer,
    # and a `<think>` in it is text the model wrote (issue 21, item 9).
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != REASONING_KEY}
    if kwargs == message.additional_kwargs:
        return message
    return message.model_copy(update={"additional_kwargs": kwargs})


def _thinking_apart(message: BaseMessage, inline: bool) -> BaseMessage:
    if not isinstance(message, AIMessage) or not isinstance(message.content, str):
        return message
    thinking, answer = split_thinking(message.content, inline)
    if not thinking:
        return message
    earlier = message.additional_kwargs.get(REASONING_KEY) or ""
    kwargs = {
        **message.additional_kwargs,
        REASONING_KEY: "\n\n".join(filter(None, [earlier, thinking])),
    }
    return message.model_copy(update={"additional_kwargs": kwargs, "content": answer})


def build_agent(
    settings: Settings,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver[Any],
    *,
    model: Any = None,
    context_guard: AgentMiddleware[Any, Any, Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled deep agent for one session.

    deepagents' default in-state backend is kept, so virtual files and
    offloaded tool results live inside the checkpoint and die with the
    session; nothing is written beside the session file. `context_guard`
    (netbox_chat.agent.context) takes the slot of deepagents' summarization.
    """
    _exclude_subagents_for_ollama()
    middleware: list[AgentMiddleware[Any, Any, Any]] = [
        FilesystemMiddleware(tools=FILE_TOOLS_KEPT, system_prompt=FILE_TOOLS_PROMPT),
        # Outside ThinkingMiddleware: it reads the answer with the thinking taken out.
        ReplyRepair(),
        ThinkingMiddleware(),
        RepeatedCalls(),
    ]
    if context_guard is not None:
        middleware.append(context_guard)
    return create_deep_agent(
        model=model if model is not None else build_model(settings),
        tools=list(tools),
        system_prompt=SYSTEM_PROMPT,
        middleware=middleware,
        state_schema=SessionState,
        checkpointer=checkpointer,
    )


def find_end_node(graph: CompiledStateGraph[Any, Any, Any, Any]) -> str:
    """The one node with an edge to `__end__`, discovered, never hard-coded.

    Rollback writes are attributed to it so that after the restore the graph
    has nothing left to run (`next == ()`).
    """
    sources = {edge.source for edge in graph.get_graph().edges if edge.target == "__end__"}
    if len(sources) != 1:
        raise RuntimeError(f"expected one node routing to __end__, found {sorted(sources)}")
    return sources.pop()
