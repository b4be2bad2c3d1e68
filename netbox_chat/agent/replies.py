"""A model's reply read as it was meant: a tool call written as text, a tool
name with a leaked channel suffix or prefix, a reply cut at its length limit
or with no answer at all.

Real models were recorded doing each of these (docs/facts/real-models.md):
gpt-oss-120b answered with the JSON of a `netbox_get_objects` call as its final
text; gpt-oss through Ollama named the tool `netbox_get_objects<|channel|>
commentary`; 3 of 56 generations stopped at the output cap with no visible
text, and nemotron returned an empty answer after 9 tool calls. A call that
can be read one way only is run as that call and the model is told how it was
read; a reply with no answer fails the turn with one line that says what to do.
Text is read as a call only when the model unmistakably meant one: NetBox's own
text quoted back (a description written like a call) is an answer.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from netbox_chat.errors import UserFacingError
from netbox_chat.words import count

# Prefixes a model puts before a tool's name: gpt-oss's harmony format addresses
# tools as `functions.NAME` (openai/harmony, "to=functions.get_weather").
NAME_PREFIXES = ("functions.", "function.", "tools.", "tool.")

# A harmony control token and whatever follows it: `<|channel|>commentary`,
# `<|constrain|>json` (openai/harmony's special tokens).
_CONTROL_TOKEN = re.compile(r"<\|[a-z_]+\|>.*\Z", re.DOTALL)
_FENCE = re.compile(r"\A```[a-zA-Z]*\s*\n?(.*?)\n?```\Z", re.DOTALL)

# The keys a call written as text puts its tool's name and arguments under
# (OpenAI's `{"name", "arguments"}`, a function wrapper, and looser spellings).
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "input")

READ_AS_CALL = "netbox_chat_read_as_call"
"""`additional_kwargs` key marking a reply whose text was read as a tool call:
its text was never an answer (turns.py, which holds back text that begins like
`JSON_STARTS` until the call ends, then drops it)."""
JSON_STARTS = ("{", "[", "```")
"""How the text of a tool call written as text begins."""


class NoAnswer(UserFacingError):
    """The model's turn ended without an answer: cut at its output limit, or empty."""


def tool_name(name: str, known: Iterable[str]) -> str | None:
    """The tool a mangled name means (`netbox_get_objects<|channel|>commentary`,
    `functions.netbox_get_objects`), or None when it means none or is already right."""
    names = set(known)
    if name in names:
        return None
    cleaned = _CONTROL_TOKEN.sub("", name).strip()
    for prefix in NAME_PREFIXES:
        cleaned = cleaned.removeprefix(prefix)
    return cleaned if cleaned in names else None


def _unfenced(text: str) -> str:
    text = text.strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def _schema(tool: BaseTool | Mapping[str, Any]) -> tuple[str, set[str], set[str]] | None:
    """(name, argument names, required ones) of a tool with a JSON schema."""
    if isinstance(tool, BaseTool):
        schema = tool.args_schema if isinstance(tool.args_schema, Mapping) else None
        name = tool.name
    else:
        name, schema = str(tool.get("name", "")), tool.get("parameters")
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return None
    return name, set(schema["properties"]), set(schema.get("required") or ())


def _one_call(
    value: Any, tools: Sequence[tuple[str, set[str], set[str]]], names: set[str], *, whole: bool
) -> tuple[str, dict[str, Any]] | None:
    """The call ``value`` is: it names one of our tools, or (``whole``: it is the
    whole reply, not an item of a list) it is the arguments of exactly one tool,
    required ones included. A tool that requires nothing is never guessed from bare
    arguments: any JSON object of its keys (a NetBox description quoted back) would
    run it."""
    if not isinstance(value, Mapping):
        return None
    function = value.get("function")
    if isinstance(function, Mapping):  # {"type": "function", "function": {...}}
        value = function
    for key in _NAME_KEYS:
        named = value.get(key)
        if not isinstance(named, str):
            continue
        name = named if named in names else tool_name(named, names)
        if name is None:
            return None
        args: Any = next((value[k] for k in _ARGUMENT_KEYS if k in value), {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return None
        return (name, dict(args)) if isinstance(args, Mapping) else None
    if not whole:
        return None
    # Only the arguments: the one tool whose arguments, required ones included, they are.
    keys = set(value)
    matches = [name for name, props, required in tools if required and required <= keys <= props]
    return (matches[0], dict(value)) if len(matches) == 1 else None


def calls_in_text(
    text: str, tools: Sequence[BaseTool | Mapping[str, Any]], results: Iterable[str] = ()
) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls a reply's whole text is, or [] when it is anything else.

    The text must be nothing but JSON (a fence around it allowed): one call, or a
    list of calls, each naming one of `tools` with its arguments; or one object
    that is the arguments of exactly one of them (see `_one_call`). Prose that
    quotes JSON is an answer, and so is text one of the tool `results` holds as a
    value: NetBox's data quoted back (a description that reads like a call) is
    what the user asked to see, not a call the model meant.
    """
    body = _unfenced(text)
    if not body.startswith(("{", "[")):
        return []
    try:
        value = json.loads(body)
    except ValueError:
        return []
    # A text value in a tool result: the JSON string's inside, as tools.py writes it
    held = json.dumps(body, ensure_ascii=False)[1:-1]
    if any(held in result for result in results):
        return []
    schemas = [schema for schema in map(_schema, tools) if schema is not None]
    names = {_tool_name(tool) for tool in tools}
    whole = not isinstance(value, list)
    items = [value] if whole else value
    calls = [_one_call(item, schemas, names, whole=whole) for item in items]
    if not calls or any(call is None for call in calls):
        return []
    return [call for call in calls if call is not None]


def _tool_name(tool: BaseTool | Mapping[str, Any]) -> str:
    return tool.name if isinstance(tool, BaseTool) else str(tool.get("name", ""))


def cut_at_limit(message: AIMessage) -> str | None:
    """How the server said the reply was cut at its output limit, or None when
    it was not: Ollama's own API ends with `done_reason: "length"` (langchain-ollama
    keeps it as is), an OpenAI-compatible server with `finish_reason: "length"`
    (langchain-openai keeps that); the same rule on every server."""
    metadata = message.response_metadata
    if metadata.get("done_reason") == "length":
        return "Ollama done_reason"
    if metadata.get("finish_reason") == "length":
        return "finish_reason"
    return None


def no_answer(message: AIMessage, tool_calls_so_far: int) -> NoAnswer | None:
    """Why `message`, the model's last word, is not an answer (None when it is one)."""
    if message.tool_calls:
        return None
    field = cut_at_limit(message)
    if field is not None:
        return NoAnswer(
            "the model stopped at its output limit before it finished its answer "
            f'({field} "length"; thinking counts against that limit): '
            "turn thinking off with /think off (NETBOX_CHAT_THINK=off) or allow "
            "longer replies with NETBOX_CHAT_NUM_PREDICT, then ask again"
        )
    if isinstance(message.content, str) and message.content.strip():
        return None
    if not isinstance(message.content, str) and message.content:
        return None
    after = f" after {count(tool_calls_so_far, 'tool call')}" if tool_calls_so_far else ""
    return NoAnswer(
        f"the model ended its reply{after} without an answer: ask again, more "
        "narrowly, or turn thinking off with /think off (NETBOX_CHAT_THINK=off)"
    )


class ReplyRepair(AgentMiddleware[Any, Any, Any]):
    """Reads each model reply as it was meant (see the module's docstring).

    Placed outside ThinkingMiddleware, so the text it reads is the answer with
    the thinking already taken out. The note for each repaired call is kept by
    its call id until the call's result comes back, then put in front of it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._notes: dict[str, str] = {}

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        response = await handler(request)
        calls_so_far = sum(
            len(m.tool_calls) for m in _this_turn(request.messages) if isinstance(m, AIMessage)
        )
        results = [m.text for m in request.messages if isinstance(m, ToolMessage)]
        response.result = [
            self._read(message, request.tools, calls_so_far, results) for message in response.result
        ]
        return response

    def _read(
        self,
        message: BaseMessage,
        tools: Sequence[BaseTool | Mapping[str, Any]],
        calls_so_far: int,
        results: Sequence[str],
    ) -> BaseMessage:
        if not isinstance(message, AIMessage):
            return message
        names = {_tool_name(tool) for tool in tools}
        if message.tool_calls:
            return self._renamed(message, names)
        text = message.content if isinstance(message.content, str) else ""
        calls = calls_in_text(text, tools, results) if text.strip() else []
        if calls and cut_at_limit(message) is None:
            tool_calls = []
            for name, args in calls:
                call_id = f"call_text_{uuid.uuid4().hex[:12]}"
                self._notes[call_id] = (
                    f"your reply was the text of a {name} call, not an answer; it was run "
                    "as that call. Call tools as tool calls, and answer in words."
                )
                tool_calls.append({"name": name, "args": args, "id": call_id, "type": "tool_call"})
            kwargs = {**message.additional_kwargs, READ_AS_CALL: True}
            return message.model_copy(
                update={"content": "", "tool_calls": tool_calls, "additional_kwargs": kwargs}
            )
        problem = no_answer(message, calls_so_far)
        if problem is not None:
            raise problem
        return message

    def _renamed(self, message: AIMessage, names: set[str]) -> AIMessage:
        calls = []
        for call in message.tool_calls:
            meant = tool_name(call["name"], names)
            if meant is not None and call["id"]:
                self._notes[call["id"]] = f"tool name {call['name']!r} read as {meant!r}"
                call = {**call, "name": meant}
            calls.append(call)
        if calls == message.tool_calls:
            return message
        return message.model_copy(update={"tool_calls": calls})

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        result = await handler(request)
        note = self._notes.pop(str(request.tool_call.get("id")), None)
        if note is None or not isinstance(result, ToolMessage):
            return result
        # After the result: an `Error: ...` result must still start with it.
        return result.model_copy(update={"content": f"{result.text}\nNote: {note}."})


def _this_turn(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    """The messages after the last question (the current turn's so far)."""
    starts = [i for i, m in enumerate(messages) if m.type == "human"]
    return messages[starts[-1] + 1 :] if starts else messages
