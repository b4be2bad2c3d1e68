"""The MCP server: the chat's own NetBox tools, and `check_answer` on their replies.

A low-level `mcp.server.Server`, not `MCPServer`: the tools take the model's
arguments as they come and read them themselves (netbox/arguments.py), so
every refusal is the tool's own words, exactly as in the chat; MCPServer would
validate them against a pydantic model first and answer with its own error.
Each call runs the chat's `NetBoxTool` (the same `ainvoke`), its text is the
result's text, and its JSON the structured content under the published
output schema. Nothing a client sends reaches the NetBox token or the
configuration: the tools are bound to a client built from the server's own
settings.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from netbox_chat.netbox.tools import DESCRIPTIONS, SCHEMAS

from .replies import Call, Replies, payload_of, verdicts

log = logging.getLogger(__name__)

CHECK = "check_answer"
MAX_ARGUMENTS = 64 * 1024  # characters of one call's arguments as JSON
STDIO = ""  # the one session of a connection that has no session id (stdio, in-process)

CHECK_DESCRIPTION = (
    "Check your answer against what NetBox returned before you give it. Call it once "
    "you have written an answer that states NetBox facts (names, counts, statuses, "
    "addresses, sites), after the netbox_* calls it rests on, with the whole answer "
    "text (and the user's question, whose own names count as given). Each claim comes "
    "back verified (a NetBox reply of this session holds it; source names the call), "
    "ungrounded (not in NetBox's replies, or contradicted: correct it with the tools "
    "or drop it) or unchecked (could not be tied to a record). It asks NetBox nothing "
    "and reads only the replies of this session's netbox_* calls."
)
CHECK_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "the whole answer you are about to give"},
        "question": {"type": "string", "description": "the user's question (optional)"},
    },
    "required": ["answer"],
}

_PAGE = {
    "count": {"type": "integer", "description": "every match in NetBox"},
    "returned": {"type": "integer", "description": "rows in this result"},
    "offset": {"type": "integer"},
    "next_offset": {
        "type": ["integer", "null"],
        "description": "offset of the next page; null when this is the last",
    },
    "results": {"type": "array", "items": {"type": "object"}},
    "note": {"type": "string"},
    "truncated": {"type": "string", "description": "what was cut to fit, and how to get it"},
}
_FOUND_ELSEWHERE = {
    "type": "object",
    "description": "types that hold a name this call found nothing for",
}
_CLAIM = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "kind": {"type": "string"}},
    "required": ["text", "kind"],
}


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "netbox_get_objects": _object(
        {"object_type": {"type": "string"}, **_PAGE, "found_elsewhere": _FOUND_ELSEWHERE},
        "object_type", "count", "returned", "offset", "next_offset", "results",
    ),
    "netbox_get_object_by_id": _object(
        {
            "object_type": {"type": "string"},
            "object": {"description": "the object, its fields as NetBox names them"},
            "note": {"type": "string"},
            "truncated": {"type": "string"},
        },
        "object_type", "object",
    ),
    "netbox_search_objects": _object(
        {
            "query": {"type": "string"},
            "results": {
                "type": "object",
                "description": "per object type: its count and the first matches",
            },
            "no_matches": {"type": "array", "items": {"type": "string"}},
            "errors": {"type": "object"},
            "found_elsewhere": _FOUND_ELSEWHERE,
            "note": {"type": "string"},
            "truncated": {"type": "string"},
        },
        "query", "results",
    ),
    "netbox_get_changelogs": _object(
        _PAGE, "count", "returned", "offset", "next_offset", "results"
    ),
    CHECK: _object(
        {
            "claims": {"type": "integer"},
            "ungrounded": {"type": "array", "items": _CLAIM},
            "unchecked": {"type": "array", "items": _CLAIM},
            "without_netbox": {
                "type": "boolean",
                "description": "the answer states facts and no netbox_* call was made",
            },
            "verdicts": {
                "type": "array",
                "items": _object(
                    {
                        "text": {"type": "string"},
                        "kind": {"type": "string"},
                        "status": {"enum": ["verified", "ungrounded", "unchecked"]},
                        "source": {
                            "type": ["object", "null"],
                            "description": "the call it rests on: tool and arguments",
                        },
                        "reason": {"type": "string"},
                    },
                    "text", "kind", "status", "source",
                ),
            },
            "calls": {"type": "integer", "description": "NetBox replies the check read"},
            "failed": {"type": "string", "description": "the check itself failed: why"},
        },
        "claims", "ungrounded", "unchecked", "without_netbox", "verdicts", "calls",
    ),
}  # fmt: skip

_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)


def tool_list() -> list[types.Tool]:
    """The four NetBox tools as the chat declares them, and check_answer; each
    read-only, with its output schema."""
    listed = [
        types.Tool(
            name=name,
            description=DESCRIPTIONS[name],
            input_schema=SCHEMAS[name],
            output_schema=OUTPUT_SCHEMAS[name],
            annotations=_READ_ONLY,
        )
        for name in SCHEMAS
    ]
    listed.append(
        types.Tool(
            name=CHECK,
            description=CHECK_DESCRIPTION,
            input_schema=CHECK_INPUT,
            output_schema=OUTPUT_SCHEMAS[CHECK],
            annotations=_READ_ONLY.model_copy(update={"open_world_hint": False}),
        )
    )
    return listed


def refusal(message: str) -> types.CallToolResult:
    """An error the model reads (`isError`), one line, as the chat's tools word theirs."""
    said = "Error: " + " ".join(message.split())
    return types.CallToolResult(content=[types.TextContent(text=said)], is_error=True)


def _result(text: str, payload: Any) -> types.CallToolResult:
    if not isinstance(payload, dict) or text.startswith("Error"):
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=payload)


def session_of(ctx: Any) -> str | None:
    """Which session a request belongs to: its `Mcp-Session-Id` over HTTP, the one
    connection on stdio (or in-process), None for an HTTP request without a
    session. On the 2026-07-28 wire there is none, and a header sent there is
    not the SDK's checked session id, so it is not read."""
    request = getattr(ctx, "request", None)
    if request is None:
        return STDIO
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return None
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


class NetBoxMCP:
    """The server's state: the tools (the chat's, bound to one NetBox client) and
    each session's replies."""

    def __init__(self, tools: Sequence[Any]) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.replies = Replies()

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        del ctx, params
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments: Mapping[str, Any] = params.arguments or {}
        try:
            size = len(json.dumps(arguments, default=str, ensure_ascii=False))
        except (TypeError, ValueError):  # pragma: no cover - the wire only carries JSON
            return refusal("the arguments are not JSON.")
        if size > MAX_ARGUMENTS:
            return refusal(
                f"the arguments are {size} characters; at most {MAX_ARGUMENTS} are read."
            )
        session = session_of(ctx)
        if params.name == CHECK:
            return self._check(session, arguments)
        tool = self.tools.get(params.name)
        if tool is None:
            known = ", ".join([*self.tools, CHECK])
            return refusal(f"there is no tool {params.name[:80]!r}; the tools are {known}.")
        try:
            text = str(await tool.ainvoke(dict(arguments)))
        except Exception as e:  # the tools answer every failure themselves; this is a bug
            log.exception("netbox-chat mcp: %s failed", params.name)
            return refusal(f"{params.name} failed unexpectedly ({type(e).__name__}).")
        payload = payload_of(text)
        if session is not None:
            self.replies.add(session, Call(params.name, dict(arguments), payload, len(text)))
        return _result(text, payload)

    def _check(self, session: str | None, arguments: Mapping[str, Any]) -> types.CallToolResult:
        answer, question = arguments.get("answer"), arguments.get("question", "")
        if not isinstance(answer, str) or not isinstance(question, str):
            return refusal("check_answer takes answer (and question) as text.")
        if session is None:
            return refusal(
                "check_answer needs an MCP session to know which replies your answer may "
                "rest on, and this request has none: connect with the initialize "
                "handshake (Streamable HTTP keeps its Mcp-Session-Id) or over stdio."
            )
        checked = verdicts(answer, self.replies.of(session), question=question)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(checked, ensure_ascii=False))],
            structured_content=checked,
        )

    async def discover(self, ctx: Any, params: types.RequestParams | None) -> types.DiscoverResult:
        """Over HTTP only the handshake versions are offered: the 2026-07-28 wire
        keeps no session, and check_answer needs one (a client that probes falls
        back to `initialize`)."""
        del ctx, params
        return types.DiscoverResult(
            supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability()),
        )


def build_server(tools: Sequence[Any], *, version: str = "", sessions: bool = False) -> Server[Any]:
    """The MCP server offering `tools` (the chat's, from `build_netbox_tools`) and
    check_answer. `sessions`: served over HTTP, where only the handshake era keeps
    a session for check_answer to read."""
    state = NetBoxMCP(tools)
    server: Server[Any] = Server(
        "netbox-chat",
        version=version,
        instructions=(
            "Read-only NetBox tools. Filters NetBox would ignore are refused with the ones "
            "that work; lists say count, returned and next_offset. Before giving an answer "
            f"that states NetBox facts, call {CHECK} with it."
        ),
        on_list_tools=state.list_tools,
        on_call_tool=state.call_tool,
    )
    if sessions:
        server.add_request_handler("server/discover", types.RequestParams, state.discover)
    return server
