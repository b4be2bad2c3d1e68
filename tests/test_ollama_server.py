"""The scripted Ollama server, checked through the real ChatOllama client.

Every other test that uses ScriptedOllama trusts that what the client sees here is what
it would see from a real Ollama; these tests pin that down over real HTTP on loopback.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama as ollama_lib
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_ollama import ChatOllama

from tests.doubles.ollama_server import (
    Delay,
    HTTPError,
    ScriptedOllama,
    Stall,
    StreamError,
    Text,
    Thinking,
    ToolCall,
    fit_prompt,
    render_prompt,
    steps_from_json,
    tokenize,
)

MODELS = {"qwen3:8b": ["completion", "tools"], "gemma:2b": ["completion"]}


@pytest.fixture
def server() -> Iterator[ScriptedOllama]:
    with ScriptedOllama(models=MODELS) as scripted:
        yield scripted


def chat(server: ScriptedOllama, model: str = "qwen3:8b", **kwargs: Any) -> ChatOllama:
    return ChatOllama(base_url=server.url, model=model, **kwargs)


@tool
def netbox_get_objects(object_type: str) -> str:
    """Fetch NetBox objects of one type."""
    return object_type


def test_text_streams_in_word_chunks_that_join_to_the_script(server: ScriptedOllama) -> None:
    server.script([Text("Hello **world**, again")])
    chunks = [chunk.content for chunk in chat(server).stream("hi")]
    assert [c for c in chunks if c] == ["Hello ", "**world**, ", "again"]
    assert "".join(map(str, chunks)) == "Hello **world**, again"


def test_explicit_chunks_and_chunk_delay(server: ScriptedOllama) -> None:
    server.script([Delay(0.05), Text("abc", chunks=["a", "bc"], chunk_delay=0.05)])
    started = time.monotonic()
    chunks = [chunk.content for chunk in chat(server).stream("hi")]
    assert [c for c in chunks if c] == ["a", "bc"]
    assert time.monotonic() - started >= 0.1


def test_chunks_must_join_to_text() -> None:
    with pytest.raises(ValueError, match="do not join"):
        Text("abc", chunks=["a", "b"])


def test_async_stream(server: ScriptedOllama) -> None:
    server.script([Text("one two three")])

    async def collect() -> list[str]:
        return [str(chunk.content) async for chunk in chat(server).astream("hi")]

    assert "".join(asyncio.run(collect())) == "one two three"


def test_parallel_tool_calls_arrive_in_one_message_with_parsed_args(
    server: ScriptedOllama,
) -> None:
    server.script(
        [
            ToolCall("netbox_get_objects", {"object_type": "dcim.site"}),
            ToolCall("netbox_get_objects", {"object_type": "dcim.device"}),
        ]
    )
    reply = chat(server).bind_tools([netbox_get_objects]).invoke("list sites and devices")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("netbox_get_objects", {"object_type": "dcim.site"}),
        ("netbox_get_objects", {"object_type": "dcim.device"}),
    ]
    assert server.requests[0]["tools"][0]["function"]["name"] == "netbox_get_objects"


def test_usage_metadata_comes_from_final_line_and_grows_with_history(
    server: ScriptedOllama,
) -> None:
    server.script([Text("first answer")], [ToolCall("x", {}), ToolCall("y", {})])
    llm = chat(server)
    first = llm.invoke([HumanMessage("question one")])
    history = [HumanMessage("question one"), first, HumanMessage("question two")]
    second = llm.invoke(history)

    prompt_tokens = [
        len(tokenize(render_prompt(r["messages"], r["tools"]))) for r in server.requests
    ]
    assert first.usage_metadata is not None and second.usage_metadata is not None
    assert first.usage_metadata["input_tokens"] == prompt_tokens[0]
    assert first.usage_metadata["output_tokens"] == 2  # "first ", "answer"
    assert second.usage_metadata["input_tokens"] == prompt_tokens[1] > prompt_tokens[0]
    assert second.usage_metadata["output_tokens"] == 2  # two tool calls


def test_requests_are_recorded_with_the_history_sent(server: ScriptedOllama) -> None:
    server.script([Text("Paris")], [Text("Berlin")])
    llm = chat(server)
    answer = llm.invoke("capital of France?")
    llm.invoke([HumanMessage("capital of France?"), answer, HumanMessage("and Germany?")])
    server.wait_for_requests(2)
    assert server.requests[0]["messages"] == [{"role": "user", "content": "capital of France?"}]
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "and Germany?"},
    ]
    assert server.requests[1]["model"] == "qwen3:8b"
    assert server.requests[1]["stream"] is True


def test_wait_for_requests_fails_loudly() -> None:
    with ScriptedOllama() as server, pytest.raises(AssertionError, match="1 chat request"):
        server.wait_for_requests(1, timeout=0.05)


def test_unknown_model_is_404_and_consumes_no_reply(server: ScriptedOllama) -> None:
    server.script([Text("still here")])
    with pytest.raises(ollama_lib.ResponseError) as caught:
        chat(server, model="llama9:70b").invoke("hi")
    assert caught.value.status_code == 404
    assert caught.value.error == "model 'llama9:70b' not found"
    assert chat(server).invoke("hi").content == "still here"


def test_tools_on_a_model_without_tools_is_400(server: ScriptedOllama) -> None:
    server.script([Text("plain")])
    with pytest.raises(ollama_lib.ResponseError) as caught:
        chat(server, model="gemma:2b").bind_tools([netbox_get_objects]).invoke("hi")
    assert caught.value.status_code == 400
    assert "does not support tools" in caught.value.error
    # ollama-python always sends "tools": []; that alone must not trip the check.
    assert chat(server, model="gemma:2b").invoke("hi").content == "plain"


def test_http_error_step(server: ScriptedOllama) -> None:
    server.script([HTTPError(500, "server exploded")])
    with pytest.raises(ollama_lib.ResponseError) as caught:
        chat(server).invoke("hi")
    assert (caught.value.status_code, caught.value.error) == (500, "server exploded")


def test_exhausted_script_is_500_not_a_hang(server: ScriptedOllama) -> None:
    with pytest.raises(ollama_lib.ResponseError) as caught:
        chat(server).invoke("hi")
    assert caught.value.status_code == 500
    assert caught.value.error == "scripted server: no reply left for request 0"


def test_responder_serves_when_the_script_is_empty(server: ScriptedOllama) -> None:
    server.script([Text("scripted")])
    server.responder = lambda body: [Text(f"echo {len(body['messages'])}")]
    llm = chat(server)
    assert [llm.invoke("a").content for _ in range(3)] == ["scripted", "echo 1", "echo 1"]


def test_stream_error_mid_stream_raises_after_partial_text(server: ScriptedOllama) -> None:
    server.script([Text("partial"), StreamError("boom")])
    received: list[str] = []
    with pytest.raises(ollama_lib.ResponseError, match="boom"):
        for chunk in chat(server).stream("hi"):
            received.append(str(chunk.content))
    assert received == ["partial"]


def test_script_rejects_steps_after_a_terminal_step(server: ScriptedOllama) -> None:
    with pytest.raises(ValueError, match="last step"):
        server.script([Stall(), Text("never")])
    with pytest.raises(ValueError, match="only follow Delay"):
        server.script([Text("too late"), HTTPError(500, "x")])


def test_stall_with_client_timeout_records_a_disconnect(server: ScriptedOllama) -> None:
    server.script([Text("start"), Stall()])
    received: list[str] = []
    with pytest.raises(httpx.TimeoutException):
        for chunk in chat(server, client_kwargs={"timeout": 0.3}).stream("hi"):
            received.append(str(chunk.content))
    assert received == ["start"]
    server.wait_for_disconnects(1, timeout=2.0)
    assert server.disconnects == [0]


def test_cancelling_astream_mid_stall_records_a_disconnect_promptly(
    server: ScriptedOllama,
) -> None:
    server.script([Text("start"), Stall()])

    async def cancel_mid_stream() -> None:
        first_chunk = asyncio.Event()

        async def consume() -> None:
            async for _ in chat(server).astream("hi"):
                first_chunk.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first_chunk.wait(), timeout=2.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_stream())
    started = time.monotonic()
    server.wait_for_disconnects(1, timeout=1.0)
    assert server.disconnects == [0]
    assert time.monotonic() - started < 1.0


def test_exit_closes_a_stalled_connection() -> None:
    server = ScriptedOllama(models=MODELS).start()
    server.script([Text("start"), Stall()])
    body = {"model": "qwen3:8b", "messages": []}
    with (
        httpx.Client(base_url=server.url, timeout=5.0) as client,
        client.stream("POST", "/api/chat", json=body) as response,
    ):
        lines = response.iter_lines()
        assert json.loads(next(lines))["message"]["content"] == "start"
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 1.0
        with pytest.raises(httpx.HTTPError):
            next(lines)
    assert server.disconnects == []  # the server left, not the client


def test_lifetime_stops_the_server() -> None:
    server = ScriptedOllama(lifetime=0.1).start()
    deadline = time.monotonic() + 2.0
    while not server.stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.stopped
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/api/version", timeout=1.0)


def test_model_endpoints(server: ScriptedOllama) -> None:
    client = ollama_lib.Client(host=server.url)
    assert [m.model for m in client.list().models] == ["qwen3:8b", "gemma:2b"]
    shown = client.show("gemma:2b")
    assert shown.capabilities == ["completion"]
    assert shown.details is not None and shown.details.family == "gemma"
    with pytest.raises(ollama_lib.ResponseError) as caught:
        client.show("nope:1b")
    assert caught.value.status_code == 404
    assert httpx.get(f"{server.url}/api/version").json() == {"version": "0.12.0"}
    # langchain-ollama's own check against /api/tags accepts our listing.
    assert chat(server, validate_model_on_init=True).model == "qwen3:8b"


def test_steps_from_json() -> None:
    steps = steps_from_json(
        [
            {"delay": 0.5},
            {"text": "hi there", "chunk_delay": 0.01},
            {"tool_call": {"name": "f", "args": {"a": 1}}},
            {"stall": True},
        ]
    )
    assert steps == [Delay(0.5), Text("hi there", 0.01), ToolCall("f", {"a": 1}), Stall()]
    assert steps_from_json([{"http_error": [503, "busy"]}]) == [HTTPError(503, "busy")]
    assert steps_from_json([{"stream_error": "x"}]) == [StreamError("x")]
    assert steps_from_json([{"thinking": "hmm", "chunk_delay": 0.1}]) == [Thinking("hmm", 0.1)]
    assert Thinking("hmm") != Text("hmm")


def test_standalone_process_serves_a_script_and_exits_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([[{"text": "from a file"}]]))
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.doubles.ollama_server", "--script", str(script)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert ChatOllama(base_url=url, model="qwen3:8b").invoke("hi").content == "from a file"
        process.terminate()
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_ai_message_history_with_tool_calls_round_trips(server: ScriptedOllama) -> None:
    server.script([Text("done")])
    call = {"name": "x", "args": {"k": "v"}, "id": "1", "type": "tool_call"}
    chat(server).invoke([HumanMessage("go"), AIMessage("", tool_calls=[call])])
    sent = server.requests[0]["messages"][1]
    assert sent["tool_calls"] == [{"function": {"name": "x", "arguments": {"k": "v"}}}]


# --- thinking, as real servers deliver it -------------------------------------------------


def thinking_server(version: str = "0.12.4") -> ScriptedOllama:
    return ScriptedOllama(version=version)  # the default models: qwen3 thinks, qwen2.5 not


def raw_lines(server: ScriptedOllama, model: str, think: object = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if think is not None:
        body["think"] = think
    response = httpx.post(f"{server.url}/api/chat", json=body, timeout=5)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


REPLY = [Thinking("Let me see."), Text("Hello.")]


@pytest.mark.parametrize("think", [None, True, "high"])
def test_thinking_streams_in_its_own_field_before_the_content(think: object) -> None:
    with thinking_server() as server:
        server.script(REPLY)
        lines = raw_lines(server, "qwen3:8b", think)
    messages = [line["message"] for line in lines if not line["done"]]
    assert [m.get("thinking") for m in messages] == ["Let ", "me ", "see.", None]
    assert "".join(m["content"] for m in messages) == "Hello."


def test_langchain_keeps_the_thinking_only_when_reasoning_is_set() -> None:
    with thinking_server() as server:
        server.script(REPLY, REPLY)
        kept = chat(server, reasoning=True).invoke("hi")
        dropped = chat(server).invoke("hi")
    assert kept.additional_kwargs["reasoning_content"] == "Let me see."
    assert kept.content == dropped.content == "Hello." and not dropped.additional_kwargs


def test_think_false_stops_a_thinking_model_but_not_gpt_oss() -> None:
    with thinking_server() as server:
        server.script(REPLY, REPLY)
        qwen = raw_lines(server, "qwen3:8b", False)
        gpt_oss = raw_lines(server, "gpt-oss:20b", False)
    assert not any(line["message"].get("thinking") for line in qwen)
    assert "".join(line["message"].get("thinking", "") for line in gpt_oss) == "Let me see."


def test_unset_think_before_0_12_4_leaves_think_tags_in_the_content() -> None:
    with thinking_server("0.12.0") as server:
        server.script(REPLY, REPLY)
        unset = raw_lines(server, "qwen3:8b")
        asked = raw_lines(server, "qwen3:8b", True)
    assert "".join(line["message"]["content"] for line in unset) == (
        "<think>\nLet me see.\n</think>\n\nHello."
    )
    assert "".join(line["message"].get("thinking", "") for line in asked) == "Let me see."


def test_servers_before_0_9_have_no_think_and_no_thinking_capability() -> None:
    with thinking_server("0.8.0") as server:
        server.script(REPLY)
        lines = raw_lines(server, "qwen3:8b", True)  # `think` unknown: ignored
        shown = httpx.post(f"{server.url}/api/show", json={"model": "qwen3:8b"}).json()
    assert "<think>" in "".join(line["message"]["content"] for line in lines)
    assert "thinking" not in shown["capabilities"]


@pytest.mark.parametrize("think", [True, "low"])
def test_think_on_a_model_without_the_capability_is_400(think: object) -> None:
    with thinking_server() as server:
        server.script([Text("never")])
        response = httpx.post(
            f"{server.url}/api/chat",
            json={"model": "qwen2.5:7b", "messages": [], "think": think},
        )
        assert response.status_code == 400
        assert response.json() == {"error": '"qwen2.5:7b" does not support thinking'}
        assert raw_lines(server, "qwen2.5:7b", False)[0]["message"]["content"] == "never"


def test_show_reports_the_family_gpt_oss_is_run_as() -> None:
    with thinking_server() as server:
        shown = httpx.post(f"{server.url}/api/show", json={"model": "gpt-oss:20b"}).json()
    assert shown["details"]["family"] == "gptoss"
    assert shown["model_info"]["gptoss.context_length"] == 131_072
    assert "thinking" in shown["capabilities"]


# --- the window, as Ollama fits a request into it -------------------------------------------

NETBOX_JSON = json.dumps(
    {
        "count": 40,
        "results": [
            {
                "id": i,
                "url": f"http://127.0.0.1:8000/api/dcim/devices/{i}/",
                "name": f"dmi01-akron-sw{i:02d}",
                "status": {"value": "active", "label": "Active"},
                "site": {"id": 3, "slug": "dm-akron", "display": "DM-Akron"},
            }
            for i in range(40)
        ],
    }
)


def test_tokenizer_counts_json_nearer_three_characters_a_token_than_four() -> None:
    prose = "One device is offline at DM-Akron: the access switch in the second rack."
    assert "".join(tokenize(NETBOX_JSON)) == NETBOX_JSON
    assert 2.4 < len(NETBOX_JSON) / len(tokenize(NETBOX_JSON)) < 3.2
    assert len(prose) / len(tokenize(prose)) > 4


def test_window_comes_from_num_ctx_and_defaults_like_ollama(server: ScriptedOllama) -> None:
    big = "word " * 3000  # about 3,000 tokens: twice fits 16k, but not Ollama's default 4,096
    server.script([Text("a")], [Text("b")])
    chat(server).invoke([HumanMessage(big), HumanMessage(big), HumanMessage("last")])
    chat(server, num_ctx=16384).invoke([HumanMessage(big), HumanMessage(big), HumanMessage("last")])
    default, wide = server.seen
    assert default is not None and wide is not None
    assert default.window == 4096 and default.messages_dropped == 1 and default.evaluated < 4096
    assert wide.window == 16384 and not wide.truncated
    assert wide.evaluated == wide.requested_tokens > 6000


def test_num_ctx_above_the_trained_length_is_capped(server: ScriptedOllama) -> None:
    server.script([Text("a")])
    chat(server, model="gemma:2b", num_ctx=65536).invoke("hi")
    seen = server.seen[0]
    assert seen is not None and seen.window == server.context_lengths["gemma:2b"]


def test_overflow_is_answered_200_dropping_oldest_non_system_messages(
    server: ScriptedOllama,
) -> None:
    """chatPrompt keeps the system message and the latest one; the model never sees the
    first question, the client gets a normal answer and a prompt_eval_count below what
    it sent."""
    server.script([Text("fine")])
    history = [
        SystemMessage("You are netbox-chat."),
        HumanMessage("FACT-ONE " + NETBOX_JSON),
        AIMessage("noted"),
        HumanMessage("FACT-TWO " + NETBOX_JSON),
        AIMessage("noted"),
        HumanMessage("which fact?"),
    ]
    reply = chat(server, num_ctx=2048).invoke(history)
    seen = server.seen[0]
    assert seen is not None and reply.content == "fine"
    assert seen.messages_dropped >= 2
    assert "You are netbox-chat." in seen.text and "which fact?" in seen.text
    assert "FACT-ONE" not in seen.text
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] == seen.evaluated <= 2048
    assert seen.requested_tokens > 2 * seen.evaluated


def test_a_latest_message_longer_than_the_window_is_cut_in_the_middle(
    server: ScriptedOllama,
) -> None:
    server.script([Text("fine")])
    reply = chat(server, num_ctx=1024).invoke([HumanMessage("START " + NETBOX_JSON + " END")])
    seen = server.seen[0]
    assert seen is not None and seen.middle_cut > 0
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] == seen.evaluated
    assert 500 <= seen.evaluated <= 520  # num_keep plus half of what is left
    # num_keep tokens are the template's first few: the start of the question is gone.
    assert "START" not in seen.text and "END" in seen.text


def test_tool_definitions_count_toward_the_prompt() -> None:
    tools = [{"type": "function", "function": {"name": "x", "description": "d " * 200}}]
    with_tools = fit_prompt([{"role": "user", "content": "hi"}], tools, 4096)
    without = fit_prompt([{"role": "user", "content": "hi"}], [], 4096)
    assert with_tools.evaluated > without.evaluated + 150
