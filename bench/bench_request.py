"""Benchmark 5: the size of a fresh session's first request body to Ollama.

Builds the agent the way `build_runtime` does (real NetBox tools bound to a
client that is never called: the tool schemas are static), runs one turn of a
new session against the scripted Ollama server and reads the first /api/chat
body the server received. Sizes are in characters of the JSON body, compact
(`separators=(",", ":")`, as httpx sends it) and with the breakdown: system
prompt, each tool schema, the question.

Targets: at most 16,000 characters (issue 7); under 6,000 with every tool argument
typed (issue 14).

    .venv/bin/python bench/bench_request.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import _common as C

QUESTION = "Which devices at DM-Akron are offline?"


def compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


async def first_request() -> tuple[dict[str, Any], str]:
    from netbox_chat.store.sessions import SessionFile, SessionStore
    from tests.doubles.ollama_server import ScriptedOllama, Text

    try:
        from netbox_chat.netbox.client import NetBoxClient
        from netbox_chat.netbox.tools import build_netbox_tools
    except ImportError:
        NetBoxClient = None

    with C.temp_dir("nbc-bench-req-") as tmp, ScriptedOllama() as ollama:
        ollama.script([Text("Two devices are offline.")])
        settings = C.settings_for(tmp, ollama.url)
        session = SessionFile.create(SessionStore(tmp), model=settings.model)
        client = None
        if NetBoxClient is not None:
            client = NetBoxClient("http://127.0.0.1:9", "0" * 40)
            tools = build_netbox_tools(client)
            which = "the real NetBox tools"
        else:
            tools = C.bench_tools()
            which = "bench tools (netbox_chat.netbox.tools not importable)"
        conversation = C.open_conversation(session, settings, tools)
        try:
            outcome = await conversation.run_turn(QUESTION)
            if outcome.status != "done":
                raise RuntimeError(f"turn {outcome.status}: {outcome.error}")
        finally:
            C.close_conversation(conversation)
            session.close()
            if client is not None:
                await client.aclose()
        return ollama.requests[0], which


def main() -> None:
    C.header("bench 5: first request body of a fresh session")
    body, which = asyncio.run(first_request())
    total = compact(body)
    print(f"tools: {which}")
    print(f"\nfirst /api/chat body: {total:,} characters (compact JSON)")
    print(f"  with json.dumps defaults (spaces): {len(json.dumps(body)):,}")
    messages = body.get("messages", [])
    tools = body.get("tools", [])
    print("\nbreakdown (compact JSON characters):")
    for message in messages:
        content = message.get("content", "")
        print(
            f"  message {message.get('role'):10} {compact(message):>7,}  (content {len(content):,})"
        )
    print(f"  tools ({len(tools)})          {compact(tools):>7,}")
    for tool in sorted(tools, key=compact, reverse=True):
        function = tool.get("function", {})
        description = function.get("description", "")
        parameters = function.get("parameters", {})
        print(
            f"    {function.get('name', '?'):28} {compact(tool):>7,}  "
            f"(description {len(description):,}, parameters {compact(parameters):,})"
        )
    rest = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    print(f"  everything else   {compact(rest):>7,}  {sorted(rest)}")
    verdict = "met" if total <= 16_000 else "NOT met"
    print(f"\nTARGET first request <= 16,000 characters: {total:,} -> {verdict}")
    verdict = "met" if total < 6_000 else "NOT met"
    print(f"TARGET first request < 6,000 characters, arguments typed: {total:,} -> {verdict}")


if __name__ == "__main__":
    main()
