"""`netbox-chat mcp` as an MCP client sees it (issue 42): the SDK's own client
in this process for each tool and each error, a real stdio subprocess driven
over its pipes, and Streamable HTTP on loopback with and without the bearer
token and with a foreign Host header. Every answer is compared with what the
chat's own tool gives on the same call, against the NetBox double."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from netbox_chat.mcp.replies import MAX_CALLS, MAX_CHARS, MAX_SESSIONS, Call, Replies
from netbox_chat.mcp.server import MAX_ARGUMENTS, build_server
from netbox_chat.netbox.client import NetBoxClient
from netbox_chat.netbox.tools import SCHEMAS, build_netbox_tools
from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import free_port_number
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.process import cli, python, start

SECRET = TEST_TOKEN.split(".", 1)[1]
TOOLS = ["netbox_get_objects", "netbox_get_object_by_id", "netbox_search_objects",
         "netbox_get_changelogs", "check_answer"]  # fmt: skip
AKRON = {"object_type": "dcim.device", "filters": {"site": "dm-akron"}}
CALLS = [
    ("netbox_get_objects", AKRON),
    ("netbox_get_objects", {"object_type": "dcim.device", "filters": {"site": "DM-Akron"}}),
    ("netbox_get_objects", {"object_type": "dcim.interface", "limit": 2}),
    ("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 1}),
    ("netbox_search_objects", {"query": "akron"}),
    ("netbox_get_changelogs", {"filters": {"action": "update"}}),
]
REFUSED = [
    ("netbox_get_objects", {"object_type": "dcim.device", "filters": {"device__name__isw": "x"}}),
    ("netbox_get_objects", {"object_type": "dcim.device", "filters": {"site_name": "dm-akron"}}),
    ("netbox_get_objects", {"object_type": "dcim.device", "limit": "many"}),
    ("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": "abc"}),
    ("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 999}),
    ("netbox_search_objects", {"query": ""}),
    ("netbox_get_objects", {"object_type": "dcim.nothing"}),
    ("netbox_get_objects", {}),
]
MADE_UP = (
    "DM-Akron has 17 devices, among them dmi01-akron-sw01, dmi01-akron-sw02 and dmi01-akron-sw03."
)
QUESTION = "how many devices at DM-Akron?"


async def chat_tool(url: str, name: str, args: dict[str, Any]) -> str:
    """What the chat's own tool answers to the same call."""
    async with NetBoxClient(url, TEST_TOKEN) as client:
        tools = {t.name: t for t in build_netbox_tools(client)}
        return str(await tools[name].ainvoke(args))


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The handshake era, and the 2026-07-28 per-request wire the SDK client's
    default mode picks."""
    return str(request.param)


@asynccontextmanager
async def served(netbox: NetBoxDouble, mode: str = "legacy") -> AsyncIterator[Client]:
    """The SDK's client on the server in this process (opened and closed in the
    test's own task: anyio's scopes may not cross tasks, as fixtures would)."""
    async with (
        NetBoxClient(netbox.url, TEST_TOKEN) as nb,
        Client(build_server(build_netbox_tools(nb)), mode=mode) as c,
    ):
        yield c


def text_of(result: Any) -> str:
    (block,) = result.content
    return str(block.text)


async def test_lists_every_tool_read_only_with_its_schemas(mode: str, netbox: NetBoxDouble) -> None:
    async with served(netbox, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert list(tools) == TOOLS
        for name, tool in tools.items():
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.description
            if name in SCHEMAS:
                assert tool.input_schema == SCHEMAS[name]  # what the chat's model sees
        assert "before you give it" in str(tools["check_answer"].description)


@pytest.mark.parametrize(("name", "args"), CALLS, ids=[json.dumps(a) for _, a in CALLS])
async def test_each_tool_answers_as_the_chats_tool_does(
    mode: str, netbox: NetBoxDouble, name: str, args: dict[str, Any]
) -> None:
    async with served(netbox, mode) as client:
        result = await client.call_tool(name, args)
        assert result.is_error is False, text_of(result)
        assert text_of(result) == await chat_tool(netbox.url, name, args)
        assert result.structured_content == json.loads(text_of(result))


async def test_a_list_says_count_returned_and_the_next_page(
    mode: str, netbox: NetBoxDouble
) -> None:
    async with served(netbox, mode) as client:
        first = await client.call_tool(
            "netbox_get_objects", {"object_type": "dcim.interface", "limit": 2}
        )
        page = first.structured_content
        assert page["returned"] == 2 < page["count"] and page["next_offset"] == 2
        nxt = await client.call_tool(
            "netbox_get_objects", {"object_type": "dcim.interface", "limit": 2, "offset": 2}
        )
        assert {r["id"] for r in nxt.structured_content["results"]}.isdisjoint(
            r["id"] for r in page["results"]
        )


@pytest.mark.parametrize(("name", "args"), REFUSED, ids=[json.dumps(a) for _, a in REFUSED])
async def test_refusals_are_the_chats_words_as_an_error_result(
    mode: str, netbox: NetBoxDouble, name: str, args: dict[str, Any]
) -> None:
    async with served(netbox, mode) as client:
        seen = len(netbox.requests)
        result = await client.call_tool(name, args)
        assert result.is_error is True and result.structured_content is None
        said = text_of(result)
        assert said.startswith("Error: ") and "\n" not in said
        assert said == await chat_tool(netbox.url, name, args)
        if "device__name__isw" in json.dumps(args):  # the filter that deleted 15,878 interfaces
            assert "cannot follow relations" in said
            assert not [r for r in netbox.requests[seen:] if "interfaces" in r or "devices" in r]


async def test_bad_input_is_an_error_result_and_the_server_goes_on(
    mode: str, netbox: NetBoxDouble
) -> None:
    async with served(netbox, mode) as client:
        unknown = await client.call_tool("netbox_delete_objects", {"object_type": "dcim.device"})
        assert unknown.is_error and "there is no tool 'netbox_delete_objects'" in text_of(unknown)
        huge = await client.call_tool("netbox_search_objects", {"query": "x" * (MAX_ARGUMENTS + 1)})
        assert huge.is_error and f"at most {MAX_ARGUMENTS} are read" in text_of(huge)
        deep: Any = "x"
        for _ in range(200):
            deep = {"a": deep}
        nested = await client.call_tool(
            "netbox_get_objects", {"object_type": "dcim.site", "filters": deep}
        )
        assert nested.is_error and text_of(nested).startswith("Error: ")
        wrong = await client.call_tool("check_answer", {"answer": 42})
        assert wrong.is_error and "takes answer (and question) as text" in text_of(wrong)
        still = await client.call_tool("netbox_get_objects", {"object_type": "dcim.site"})
        assert still.is_error is False and still.structured_content["count"] == 3


async def test_the_netbox_token_never_reaches_the_client(netbox: NetBoxDouble) -> None:
    netbox.forbidden.add("dcim/devices")
    async with served(netbox) as c:
        refused = await c.call_tool("netbox_get_objects", AKRON)
        listed = await c.list_tools()
    assert refused.is_error and "lacks permission" in text_of(refused)
    seen = text_of(refused) + listed.model_dump_json()
    assert SECRET not in seen and "nbt_" not in seen
    assert "token" not in json.dumps([t.input_schema for t in listed.tools]).lower()


async def test_check_answer_gives_each_claim_its_verdict_and_call(
    mode: str, netbox: NetBoxDouble
) -> None:
    async with served(netbox, mode) as client:
        await client.call_tool("netbox_get_objects", AKRON)
        checked = await client.call_tool("check_answer", {"answer": MADE_UP, "question": QUESTION})
        assert checked.is_error is False
        got = checked.structured_content
        assert json.loads(text_of(checked)) == got
        assert got["ungrounded"] == [
            {"text": "17 devices", "kind": "count"},
            {"text": "dmi01-akron-sw03", "kind": "name"},
        ]
        verdicts = {v["text"]: v for v in got["verdicts"]}
        assert verdicts["dmi01-akron-sw01"]["status"] == "verified"
        assert verdicts["dmi01-akron-sw01"]["source"] == {
            "tool": "netbox_get_objects",
            "arguments": AKRON,
        }
        assert verdicts["17 devices"]["status"] == "ungrounded"
        # the count is contradicted by the set it counts: that call's own count
        assert verdicts["17 devices"]["source"] == verdicts["dmi01-akron-sw01"]["source"]
        assert verdicts["17 devices"]["reason"]
        assert got["calls"] == 1 and got["without_netbox"] is False


async def test_check_answer_before_any_call_says_no_netbox_was_read(
    mode: str, netbox: NetBoxDouble
) -> None:
    async with served(netbox, mode) as client:
        checked = await client.call_tool("check_answer", {"answer": MADE_UP})
        assert checked.structured_content["without_netbox"] is True
        assert checked.structured_content["calls"] == 0


def test_check_answer_matches_ask_json_on_the_same_replies(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    ollama.script([ToolCall("netbox_get_objects", AKRON)], [Text(MADE_UP)])
    asked = cli(chat_env, "ask", QUESTION, "--json")
    assert asked.returncode == 0, asked.stderr
    grounding = json.loads(asked.stdout)["grounding"]
    assert grounding["ungrounded"]  # the check has something to say

    async def through_mcp() -> dict[str, Any]:
        async with served(netbox) as c:
            await c.call_tool("netbox_get_objects", AKRON)
            checked = await c.call_tool("check_answer", {"answer": MADE_UP, "question": QUESTION})
            return dict(checked.structured_content)

    got = anyio.run(through_mcp)
    assert {key: got[key] for key in grounding} == grounding


# ------------------------------------------------------------------ a real process


def env_for(netbox: NetBoxDouble, tmp_path: Any, **more: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETBOX", "OLLAMA"))}
    env.update(
        NETBOX_URL=netbox.url,
        NETBOX_TOKEN=TEST_TOKEN,
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        **more,
    )
    return env


def rpc(proc: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    """One JSON-RPC message on the server's stdin; its answer from stdout (requests)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no answer"
    answer = json.loads(line)
    assert answer["id"] == message["id"], answer
    return dict(answer)


def test_stdio_subprocess_over_its_pipes(netbox: NetBoxDouble, tmp_path: Any) -> None:
    proc = start(env_for(netbox, tmp_path), "mcp", stdin=subprocess.PIPE)
    try:
        hello = rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "pipes", "version": "0"}}})  # fmt: skip
        assert hello is not None and hello["result"]["serverInfo"]["name"] == "netbox-chat"
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert [t["name"] for t in listed["result"]["tools"]] == TOOLS  # type: ignore[index]
        assert all(t["annotations"]["readOnlyHint"] for t in listed["result"]["tools"])  # type: ignore[index]
        assert all("outputSchema" in t for t in listed["result"]["tools"])  # type: ignore[index]

        def call(n: int, name: str, args: Any) -> dict[str, Any]:
            answer = rpc(proc, {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                "params": {"name": name, "arguments": args}})  # fmt: skip
            assert answer is not None
            return answer

        found = call(3, "netbox_get_objects", AKRON)["result"]
        assert found["structuredContent"]["count"] == 3 and not found.get("isError")
        refused = call(4, "netbox_get_objects", REFUSED[0][1])["result"]
        assert refused["isError"] and "cannot follow relations" in refused["content"][0]["text"]
        assert "error" in call(5, "netbox_get_objects", "not an object")  # a protocol error
        assert call(6, "nope", {})["result"]["isError"]
        proc.stdin.write("this is not JSON\n")  # type: ignore[union-attr]
        checked = call(7, "check_answer", {"answer": MADE_UP, "question": QUESTION})["result"]
        assert checked["structuredContent"]["ungrounded"] == [
            {"text": "17 devices", "kind": "count"},
            {"text": "dmi01-akron-sw03", "kind": "name"},
        ]  # the replies of this connection, kept across its calls
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=60) == 0
        said = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    first = said.splitlines()[0]
    assert (
        first
        == f"netbox-chat mcp: read-only NetBox tools of {netbox.url} and check_answer, on stdio"
    )
    assert SECRET not in said and TEST_TOKEN not in said


# ------------------------------------------------------------------ Streamable HTTP

BEARER = "mcp-test-bearer-0123456789abcdef"


@contextmanager
def http_serving(netbox: NetBoxDouble, tmp_path: Any, **env: str) -> Iterator[str]:
    """`netbox-chat mcp --http` on a loopback port (`env`: a bearer token), until
    the block ends; its URL. Its first line names what it serves, and where."""
    port = free_port_number()
    proc = start(
        env_for(netbox, tmp_path, **env), "mcp", "--http", "--port", str(port),
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/mcp"
        guard = "bearer token required" if env else "no token: loopback only"
        assert line.strip() == (
            f"netbox-chat mcp: read-only NetBox tools of {netbox.url} and check_answer, "
            f"on {url} ({guard}; Host/Origin checked)"
        ), line
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(url, timeout=5)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, "never listened"
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            rest = proc.stderr.read()
            assert BEARER not in rest and SECRET not in rest
            proc.stderr.close()


@pytest.fixture
def http_server(netbox: NetBoxDouble, tmp_path: Any) -> Iterator[str]:
    """The server on loopback with a bearer token."""
    with http_serving(netbox, tmp_path, NETBOX_CHAT_MCP_TOKEN=BEARER) as url:
        yield url


def post(url: str, body: Any, **headers: str) -> httpx2.Response:
    return httpx2.post(
        url,
        content=body if isinstance(body, bytes) else json.dumps(body).encode(),
        headers={"content-type": "application/json",
                 "accept": "application/json, text/event-stream", **headers},
        timeout=30,
    )  # fmt: skip


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip


async def session(url: str) -> Any:
    return Client(
        streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"authorization": f"Bearer {BEARER}"})
        )
    )


async def test_http_with_the_bearer_lists_calls_and_checks_per_session(http_server: str) -> None:
    async with await session(http_server) as one, await session(http_server) as two:
        tools = (await one.list_tools()).tools
        assert [t.name for t in tools] == TOOLS
        assert all(t.annotations and t.annotations.read_only_hint for t in tools)
        found = await one.call_tool("netbox_get_objects", AKRON)
        assert found.structured_content["count"] == 3
        mine = await one.call_tool("check_answer", {"answer": MADE_UP, "question": QUESTION})
        theirs = await two.call_tool("check_answer", {"answer": MADE_UP, "question": QUESTION})
    assert mine.structured_content["calls"] == 1 and not mine.structured_content["without_netbox"]
    assert theirs.structured_content["calls"] == 0 and theirs.structured_content["without_netbox"]


def test_http_without_the_bearer_or_with_a_wrong_one_is_401(http_server: str) -> None:
    assert post(http_server, INITIALIZE).status_code == 401
    assert post(http_server, INITIALIZE, authorization=f"Bearer {BEARER[:-1]}x").status_code == 401
    assert post(http_server, INITIALIZE, authorization=BEARER).status_code == 401
    assert post(http_server, INITIALIZE, authorization=f"Bearer {BEARER}").status_code == 200


def test_http_refuses_a_foreign_host_or_origin_and_a_huge_body(http_server: str) -> None:
    bearer = f"Bearer {BEARER}"
    assert (
        post(http_server, INITIALIZE, authorization=bearer, host="evil.example").status_code == 421
    )
    foreign = post(http_server, INITIALIZE, authorization=bearer, origin="http://evil.example")
    assert foreign.status_code == 403
    huge = dict(INITIALIZE, params={**INITIALIZE["params"], "pad": "x" * 400_000})  # type: ignore[dict-item]
    assert post(http_server, huge, authorization=bearer).status_code == 413
    assert post(http_server, INITIALIZE, authorization=bearer).status_code == 200


def test_http_beyond_loopback_needs_a_bearer_token(netbox: NetBoxDouble, tmp_path: Any) -> None:
    done = cli(env_for(netbox, tmp_path), "mcp", "--http", "--host", "0.0.0.0", timeout=60)
    assert done.returncode == 2
    assert "--host 0.0.0.0 would let anyone who reaches it read your NetBox" in done.stderr
    assert "NETBOX_CHAT_MCP_TOKEN" in done.stderr and done.stdout == ""
    short = cli(
        env_for(netbox, tmp_path, NETBOX_CHAT_MCP_TOKEN="short"), "mcp", "--http", timeout=60
    )
    assert short.returncode != 0 and "use at least 16" in short.stderr


def test_http_on_loopback_without_a_token_serves_any_local_client(
    netbox: NetBoxDouble, tmp_path: Any
) -> None:
    async def listed(url: str) -> list[str]:
        async with Client(url) as c:
            return [t.name for t in (await c.list_tools()).tools]

    with http_serving(netbox, tmp_path) as url:
        assert anyio.run(listed, url) == TOOLS
        assert post(url, INITIALIZE, host="evil.example").status_code == 421


def test_without_the_extra_the_command_says_how_to_get_it(
    netbox: NetBoxDouble, tmp_path: Any
) -> None:
    probe = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the mcp extra were not installed\n"
        "sys.argv = ['netbox-chat', 'mcp']\n"
        "from netbox_chat.cli.main import main\n"
        "main()\n"
    )
    done = cli(env_for(netbox, tmp_path), program=python(probe), timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().endswith(
        "the MCP server needs the mcp extra: pip install 'netbox-chat[mcp]'"
    ), done.stderr


def test_the_bearer_token_can_come_from_a_command(netbox: NetBoxDouble, tmp_path: Any) -> None:
    env = {"NETBOX_CHAT_MCP_TOKEN_COMMAND": f"printf '%s\\n' {BEARER}"}
    with http_serving(netbox, tmp_path, **env) as url:
        assert post(url, INITIALIZE).status_code == 401
        assert post(url, INITIALIZE, authorization=f"Bearer {BEARER}").status_code == 200


def test_the_replies_kept_are_bounded_per_session_and_in_sessions() -> None:
    replies = Replies()
    for n in range(MAX_CALLS + 50):
        replies.add("a", Call("netbox_get_objects", {"offset": n}, {"count": n}, 10))
    kept = replies.of("a")
    assert len(kept) == MAX_CALLS and kept[0].args == {"offset": 50}  # the oldest went first
    big = MAX_CHARS // 3 + 1
    for n in range(4):
        replies.add("b", Call("netbox_get_objects", {"offset": n}, {}, big))
    assert [c.args["offset"] for c in replies.of("b")] == [2, 3]  # within MAX_CHARS
    for n in range(MAX_SESSIONS):
        replies.add(f"s{n}", Call("netbox_get_objects", {}, {}, 1))
    assert replies.of("a") == [] and replies.of("b") == []  # the least recently used went
    assert len(replies.of(f"s{MAX_SESSIONS - 1}")) == 1


def sse_json(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a Streamable HTTP response (JSON, or one SSE event)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    (data,) = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data))


def test_a_session_id_sent_on_the_sessionless_wire_reads_no_session(http_server: str) -> None:
    bearer = {"authorization": f"Bearer {BEARER}"}
    opened = post(http_server, INITIALIZE, **bearer)
    sid = opened.headers["mcp-session-id"]
    legacy = {**bearer, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    post(http_server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **legacy)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "netbox_get_objects", "arguments": AKRON}}  # fmt: skip
    assert sse_json(post(http_server, call, **legacy))["result"]["structuredContent"]["count"] == 3

    async def check_on_the_2026_wire() -> Any:
        headers = {**bearer, "mcp-session-id": sid}  # that session's id, forged on the new wire
        transport = streamable_http_client(
            http_server, http_client=httpx2.AsyncClient(headers=headers)
        )
        async with Client(transport, mode="2026-07-28") as c:
            return await c.call_tool("check_answer", {"answer": MADE_UP})

    refused = anyio.run(check_on_the_2026_wire)
    assert refused.is_error and "check_answer needs an MCP session" in text_of(refused)
    check = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "check_answer", "arguments": {"answer": MADE_UP}}}  # fmt: skip
    assert sse_json(post(http_server, check, **legacy))["result"]["structuredContent"]["calls"] == 1
