"""Every argument a model sends is honoured or refused, never dropped (issue 14, §1).

The corpus below is the argument shapes small local models really send (flattened
filters, misspelt argument names, strings for lists and numbers, lists for strings,
wrong types). Each case is asserted by what reached NetBox (the query string the
NetBox double on loopback received) and by what the model was told.

The cases run twice: through the tools as LangChain calls them (``ainvoke`` with the
model's dict, where a pydantic argument model used to drop keys), and through the
whole agent path: the scripted Ollama server sends the sloppy arguments as a model
would, the real ``ChatOllama`` parses them, the real deepagents graph runs the tools,
and the tool messages of the next request to Ollama are what the model read.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from netbox_chat.agent.graph import build_agent, find_end_node
from netbox_chat.agent.turns import Conversation
from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver
from netbox_chat.config import resolve_settings
from netbox_chat.netbox.client import NetBoxClient
from netbox_chat.netbox.tools import build_netbox_tools
from netbox_chat.store.sessions import SessionFile, SessionStore
from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.openai_server import chat_model_for, server_settings

SHAPE = ("fields", "brief", "limit", "offset", "ordering")  # not filters


@dataclass(frozen=True)
class Case:
    """One call as a model sends it; ``sent`` is the filter part of the query that must
    reach NetBox (None: nothing may be sent); ``told`` must appear in the answer."""

    id: str
    tool: str
    args: dict[str, Any]
    sent: list[tuple[str, str]] | None
    told: str
    shape: dict[str, str] = field(default_factory=dict)  # limit/offset/fields/... sent


GET, BY_ID, SEARCH, CHANGES = (
    "netbox_get_objects",
    "netbox_get_object_by_id",
    "netbox_search_objects",
    "netbox_get_changelogs",
)
DEVICE = {"object_type": "dcim.device"}

# fmt: off
CORPUS = [
    # filters flattened to the top level: the most common small-model slip
    Case(
        "flattened",
        GET,
        {**DEVICE, "site": "dm-akron", "status": "offline"},
        [("site", "dm-akron"), ("status", "offline")],
        "site, status (given at the top level) read as filters",
    ),
    Case(
        "flattened-changelog",
        CHANGES,
        {"changed_object_type": "dcim.device"},
        [("changed_object_type", "dcim.device")],
        "changed_object_type (given at the top level) read as filters",
    ),
    Case(
        "flattened-and-nested",
        GET,
        {**DEVICE, "filters": {"site": "dm-akron"}, "status": "offline"},
        [("site", "dm-akron"), ("status", "offline")],
        "status (given at the top level) read as filters",
    ),
    Case(
        "flattened-conflict",
        GET,
        {**DEVICE, "filters": {"site": "dm-akron"}, "site": "dm-columbus"},
        None,
        "'site' given twice with different values",
    ),
    Case(
        "flattened-not-a-filter",
        GET,
        {**DEVICE, "site_name": "DM-Akron"},
        None,
        "'site_name' is not a dcim.device filter",
    ),
    # misspelt or renamed tool arguments
    Case(
        "filter-for-filters",
        GET,
        {**DEVICE, "filter": {"site": "dm-akron"}},
        [("site", "dm-akron")],
        "'filter' read as filters",
    ),
    Case(
        "object_type-for-object_types",
        SEARCH,
        {"query": "akron", "object_type": "dcim.site"},
        [("q", "akron")],
        "'object_type' read as object_types",
        {"paths": "dcim/sites"},
    ),
    Case("order_by", GET, {**DEVICE, "order_by": "-name"}, [], "'order_by' read as ordering",
         {"ordering": "-name"}),
    Case("page_size", GET, {**DEVICE, "page_size": 3}, [], "'page_size' read as limit",
         {"limit": "3"}),
    Case("typo-limit", GET, {**DEVICE, "limt": 5}, None, "did you mean 'limit'?"),
    Case("typo-filters", GET, {**DEVICE, "fitlers": {"site": "x"}}, None,
         "did you mean 'filters'?"),
    Case(
        "both-filter-and-filters",
        GET,
        {**DEVICE, "filters": {"site": "dm-akron"}, "filter": {"status": "offline"}},
        None,
        "'filters' and 'filter' both given",
    ),
    Case(
        "filter-next-to-object_id",
        BY_ID,
        {**DEVICE, "object_id": 2, "site": "dm-akron"},
        None,
        "'site' is not an argument of netbox_get_object_by_id",
    ),
    Case(
        "filter-in-search",
        SEARCH,
        {"query": "akron", "status": "active"},
        None,
        "'status' is not an argument of netbox_search_objects",
    ),
    # strings for lists, lists for strings, strings for numbers
    Case(
        "fields-comma-string",
        GET,
        {**DEVICE, "fields": "name,status"},
        [],
        "fields 'name,status' read as ['name', 'status']",
        {"fields": "id,name,status"},
    ),
    Case("ordering-list", GET, {**DEVICE, "ordering": ["name"]}, [],
         "ordering ['name'] read as 'name'", {"ordering": "name"}),
    Case(
        "object_types-one-string",
        SEARCH,
        {"query": "akron", "object_types": "dcim.site"},
        [("q", "akron")],
        "object_types 'dcim.site' read as ['dcim.site']",
        {"paths": "dcim/sites"},
    ),
    Case("limit-string", GET, {**DEVICE, "limit": "5"}, [], "count", {"limit": "5"}),
    Case("brief-yes", GET, {**DEVICE, "brief": "yes", "fields": None}, [], "count",
         {"brief": "true"}),
    Case("object_id-string", BY_ID, {**DEVICE, "object_id": "2"}, None, "dmi01-akron-sw02",
         {"paths": "dcim/devices/2"}),
    Case("query-number", SEARCH, {"query": 100, "object_types": ["dcim.site"]}, [("q", "100")],
         "query 100 read as the text '100'"),
    # paging
    Case("changelog-offset", CHANGES, {"offset": 1, "limit": 1}, [], '"offset":1',
         {"offset": "1", "limit": "1"}),
    Case("offset-in-filters", CHANGES, {"filters": {"offset": 1}}, [],
         "offset (given inside filters) read as the offset argument", {"offset": "1"}),
    Case("negative-offset", GET, {**DEVICE, "offset": -3}, None,
         "offset must be 0 or more (got -3)"),
    Case(
        "limit-twice",
        GET,
        {**DEVICE, "limit": 5, "filters": {"limit": 7}},
        None,
        "'limit' given twice with different values",
    ),
    # wrong types, refused in words
    Case("limit-words", GET, {**DEVICE, "limit": "ten"}, None,
         "limit must be a whole number (got 'ten')"),
    Case("brief-maybe", GET, {**DEVICE, "brief": "maybe"}, None,
         "brief must be true or false (got 'maybe')"),
    Case("limit-bool", GET, {**DEVICE, "limit": True}, None, "limit must be a whole number"),
    Case("filters-list", GET, {**DEVICE, "filters": ["site"]}, None,
         "filters must be an object"),
    Case("filters-text", GET, {**DEVICE, "filters": "site=dm-akron"}, None,
         "filters must be an object"),
    Case("fields-object", GET, {**DEVICE, "fields": {"name": 1}}, None,
         "fields must be a list of names"),
    Case("object_id-words", BY_ID, {**DEVICE, "object_id": "two"}, None,
         "object_id must be a whole number (got 'two')"),
    Case("no-object_type", GET, {"site": "dm-akron"}, None, "object_type is required"),
    Case("no-query", SEARCH, {"object_types": ["dcim.site"]}, None, "query is required"),
]
# fmt: on


def nb_calls(netbox: NetBoxDouble, since: int) -> list[tuple[str, list[tuple[str, str]]]]:
    """The API calls NetBox received after ``since`` (path, query pairs)."""
    calls = []
    for target in netbox.requests[since:]:
        parts = urlsplit(target)
        path = parts.path.strip("/").removeprefix("api/").strip("/")
        if path not in ("status", "extras/custom-fields"):  # the tools' table, read once
            calls.append((path, parse_qsl(parts.query)))
    return calls


def check(case: Case, told: str, calls: list[tuple[str, list[tuple[str, str]]]]) -> None:
    assert case.told in told, told
    if case.sent is None and "paths" not in case.shape:
        assert told.startswith("Error: ") and "\n" not in told, told
        assert calls == [], calls
        return
    assert not told.startswith("Error: "), told
    assert calls, "nothing reached NetBox"
    wanted_paths = case.shape.get("paths")
    if wanted_paths:
        assert [p for p, _ in calls] == wanted_paths.split(","), calls
    _, query = calls[0]
    if case.sent is not None:
        assert [(k, v) for k, v in query if k not in SHAPE] == case.sent, query
    sent_shape = dict((k, v) for k, v in query if k in SHAPE)
    for key, value in case.shape.items():
        if key != "paths":
            assert sent_shape.get(key) == value, (key, query)


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_tool_reads_what_a_small_model_sends(case: Case, netbox: NetBoxDouble) -> None:
    async def go() -> str:
        async with NetBoxClient(netbox.url, TEST_TOKEN) as client:
            tools = {t.name: t for t in build_netbox_tools(client)}
            await tools[GET].ainvoke({"object_type": "dcim.site", "limit": 1})  # table ready
            start = len(netbox.requests)
            out = await tools[case.tool].ainvoke(case.args)
            calls.extend(nb_calls(netbox, start))
            return str(out)

    calls: list[tuple[str, list[tuple[str, str]]]] = []
    told = asyncio.run(go())
    check(case, told, calls)


def test_a_flattened_filter_counts_the_right_devices(netbox: NetBoxDouble) -> None:
    """The issue's first example: the model is told 1 offline device at Akron, not all."""

    async def go() -> str:
        async with NetBoxClient(netbox.url, TEST_TOKEN) as client:
            tools = {t.name: t for t in build_netbox_tools(client)}
            args = {**DEVICE, "site": "dm-akron", "status": "offline"}
            return str(await tools[GET].ainvoke(args))

    answer = json.loads(asyncio.run(go()))
    assert answer["count"] == 1 and answer["results"][0]["name"] == "dmi01-akron-sw02"


# ------------------------------------------------------------------ the agent path


def run_agent_turn(
    tmp_path: Path, ollama: ScriptedOllama, netbox: NetBoxDouble, calls: list[ToolCall]
) -> list[str]:
    """One turn of the real agent in which the model makes ``calls`` at once; returns
    the tool messages the model read in its next request, in call order."""

    async def go() -> list[str]:
        folder = tmp_path / "sessions"
        settings = resolve_settings(sessions_dir=folder, env={}, **server_settings(ollama))
        session = SessionFile.create(SessionStore(folder), model="qwen3:8b")
        saver = BridgedSqliteSaver(session.db, session.id)
        client = NetBoxClient(netbox.url, TEST_TOKEN)
        try:
            tools = build_netbox_tools(client)
            graph = build_agent(settings, tools, saver, model=chat_model_for(settings))
            conversation = Conversation(session, graph, saver, find_end_node(graph))
            ollama.script(list(calls), [Text("done")])
            outcome = await conversation.run_turn("check the network")
            assert outcome.status == "done", outcome.error
        finally:
            await client.aclose()
            saver.conn.close()
            session.close()
        second = ollama.requests[1]["messages"]
        return [m["content"] for m in second if m["role"] == "tool"]

    return asyncio.run(go())


AGENT_CASES = [c for c in CORPUS if c.sent is not None and "paths" not in c.shape]


@pytest.mark.model_servers()  # tool calls arrive whole or in pieces
def test_sloppy_arguments_through_the_real_agent(
    tmp_path: Path, ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Each case as its own tool call of one model message, through ChatOllama's
    parsing and the deepagents graph; the calls NetBox saw are matched to each case by
    content (ToolNode runs one message's calls concurrently)."""
    told = run_agent_turn(tmp_path, ollama, netbox, [ToolCall(c.tool, c.args) for c in AGENT_CASES])
    assert len(told) == len(AGENT_CASES)
    seen = nb_calls(netbox, 0)
    filters_seen = [[(k, v) for k, v in q if k not in SHAPE] for _, q in seen]
    for case, message in zip(AGENT_CASES, told, strict=True):
        assert case.told in message and not message.startswith("Error"), (case.id, message)
        assert case.sent in filters_seen, (case.id, seen)


@pytest.mark.model_servers()  # tool calls arrive whole or in pieces
def test_refusals_through_the_real_agent_send_nothing(
    tmp_path: Path, ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    refused = [c for c in CORPUS if c.sent is None and "paths" not in c.shape]
    told = run_agent_turn(tmp_path, ollama, netbox, [ToolCall(c.tool, c.args) for c in refused])
    for case, message in zip(refused, told, strict=True):
        assert message.startswith("Error: ") and case.told in message, (case.id, message)
    assert nb_calls(netbox, 0) == []


@pytest.mark.model_servers()  # tool calls arrive whole or in pieces
def test_json_strings_are_parsed_by_chatollama_and_still_read(
    tmp_path: Path, ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Models send nested objects as JSON strings (ollama #6155); langchain-ollama 1.1.0
    parses a string argument that holds a JSON object or list before the tool sees it
    (``_parse_arguments_from_tool_call``), and "10" / "yes" stay strings for the tool to
    read. Keep it so: each reaches NetBox as the filter, limit and brief it meant."""
    told = run_agent_turn(
        tmp_path,
        ollama,
        netbox,
        [
            ToolCall(
                GET,
                {
                    **DEVICE,
                    "filters": '{"site": "dm-akron", "status": "offline"}',
                    "limit": "10",
                    "brief": "yes",
                    "fields": None,
                },
            ),
            ToolCall(SEARCH, {"query": "akron", "object_types": '["dcim.site"]'}),
        ],
    )
    calls = dict(nb_calls(netbox, 0))  # the two calls ran concurrently
    assert set(calls) == {"dcim/devices", "dcim/sites"}
    query = calls["dcim/devices"]
    assert [(k, v) for k, v in query if k not in SHAPE] == [
        ("site", "dm-akron"),
        ("status", "offline"),
    ]
    assert ("limit", "10") in query and ("brief", "true") in query
    first = json.loads(told[0])
    assert first["count"] == 1 and "limit '10' read as 10" in first["note"]
