"""A lookup tool returning NetBox rows of a chosen size; a model that calls it once a question."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.tools import tool

from netbox_chat.agent import history
from tests.doubles.ollama_server import (
    Step,
    Text,
    ToolCall,
)


@tool
async def lookup(query: str) -> str:
    """Look devices up in NetBox."""
    return netbox_rows(query, _size_of(query))


def agent_responder(body: dict[str, Any]) -> list[Step]:
    """One lookup per question, then an answer; turn 1's answer states the fact."""
    if is_summary_request(body):
        return faithful_summary(body)
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "user":
        question = str(last["content"])
        return [ToolCall("lookup", {"query": question.split()[-1]})]
    questions = [m for m in messages if m["role"] == "user"]
    number = len(questions)
    answer = f"Answer {number}: all devices found are active."
    if "turn-1" in str(messages[-2:]):
        answer += f" {FACT}."
    return [Text(answer)]


FACT = "FACT-rack-key: the DM-Akron rack key code is 4417"


def netbox_rows(query: str, size: int) -> str:
    """NetBox-like JSON of about `size` characters."""
    rows: list[dict[str, Any]] = []
    while len(json.dumps(rows)) < size - 200:
        n = len(rows)
        rows.append(
            {
                "id": n,
                "name": f"{query}-sw{n:02d}",
                "status": {"value": "active", "label": "Active"},
                "site": {"id": 3, "slug": "dm-akron", "display": "DM-Akron"},
                "primary_ip": f"10.0.{n}.1/24",
            }
        )
    return json.dumps({"count": len(rows), "query": query, "results": rows})


def _size_of(query: str) -> int:
    """6-8 kB, varying by query, deterministic."""
    return 6_000 + (sum(map(ord, query)) * 37) % 2_000


def is_summary_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and str(messages[0].get("content", "")).startswith(
        history.SUMMARY_INSTRUCTIONS[:40]
    )


def faithful_summary(body: dict[str, Any]) -> list[Step]:
    """A summarizer that keeps every fact line of the transcript (earlier
    summaries included), as a good model would."""
    transcript = "\n".join(str(m.get("content", "")) for m in body["messages"])
    facts = sorted(set(re.findall(r"FACT-[\w-]+:[^\n\]\"]*", transcript)))
    return [Text("Summary of the session so far.\n" + "\n".join(f"- {f}" for f in facts))]
