"""The context window: requests never overflow in silence.

Real parts: session files, the real deepagents agent built by `build_runtime`
(with the context guard in it), the real ChatOllama over HTTP against the
scripted Ollama, which fits every request into its `num_ctx` window the way
Ollama does and records what its "model" actually saw (`ollama.seen`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool

from netbox_chat.agent import history
from netbox_chat.agent.runtime import Runtime, build_runtime
from netbox_chat.agent.turns import (
    ContextCompacted,
    ContextMeasured,
    ContextSummaryFailed,
    TurnEvent,
)
from netbox_chat.cli.export import export_session
from netbox_chat.config import resolve_settings
from netbox_chat.models.window import FIXED_REQUEST_CHARS, result_budget
from netbox_chat.store.sessions import SessionFile, SessionStore
from tests.conftest import TEST_TOKEN
from tests.doubles.chats import open_session_runtime
from tests.doubles.context import (
    FACT,
    agent_responder,
    faithful_summary,
    is_summary_request,
    lookup,
    netbox_rows,
)
from tests.doubles.inspect_session import read_from_fresh_process as inspect
from tests.doubles.ollama_server import (
    HTTPError,
    ScriptedOllama,
    Stall,
    Step,
    Text,
    Thinking,
    ToolCall,
)
from tests.doubles.openai_server import SESSION_WINDOW, ScriptedOpenAI, server_settings
from tests.drive.process import cli, start


@tool
async def slow_lookup(query: str) -> str:
    """Look devices up slowly."""
    await asyncio.sleep(5)
    return netbox_rows(query, 500)


TOOLS: list[BaseTool] = [lookup, slow_lookup]


@contextlib.asynccontextmanager
async def open_runtime(
    sessions_dir: Path, ollama: ScriptedOllama, session_id: str | None = None, **env: str
) -> AsyncIterator[Runtime]:
    if isinstance(ollama, ScriptedOpenAI):  # the server's own window is the session's
        ollama.context_lengths["qwen3:8b"] = int(env.get("NETBOX_CHAT_NUM_CTX", SESSION_WINDOW))
    settings = resolve_settings(sessions_dir=sessions_dir, env=env, **server_settings(ollama))
    async with open_session_runtime(settings, TOOLS, session_id) as runtime:
        yield runtime


class Events:
    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def model_requests(ollama: ScriptedOllama) -> Iterator[int]:
    """Indexes of the agent's own requests (not the summarizer's)."""
    return (i for i, body in enumerate(ollama.requests) if not is_summary_request(body))


# The guard on Ollama's API and on one OpenAI-compatible dialect (vLLM), which
# counts the same request its own way and refuses one that is too long.
@pytest.mark.model_servers("ollama", "vllm")
async def test_forty_turns_of_big_results_never_overflow_and_keep_turn_one(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = agent_responder
    async with open_runtime(sessions_dir, ollama) as runtime:
        session_id = runtime.conversation.session.id
        assert runtime.window == 16384  # the setting, under qwen3:8b's 40,960
        events = Events()
        for number in range(1, 41):
            outcome = await runtime.conversation.run_turn(
                f"which devices match turn-{number}", events
            )
            assert outcome.status == "done", outcome.error
        turns = runtime.conversation.session.turns()
        edits = runtime.conversation.session.edits()

    seen = [s for s in ollama.seen if s is not None]
    assert all(not s.truncated for s in seen), "Ollama cut a request"
    assert all(s.requested_tokens <= 16384 for s in seen)  # none refused as too long
    if not isinstance(ollama, ScriptedOpenAI):
        # one window for every request of the session, summaries included (#9977)
        assert {r["options"]["num_ctx"] for r in ollama.requests} == {16384}
    assert max(s.requested_tokens for s in seen) <= int(16384 * 0.8) + 2_000
    compactions = events.of(ContextCompacted)
    assert len(compactions) >= 3
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    # The fact was said once, in turn 1's answer; turn 40's model still sees it.
    last = ollama.seen[max(model_requests(ollama))]
    assert last is not None and FACT in last.text
    assert "turn-1 " not in last.text and "turn-2 " not in last.text  # summarized away
    # The ledger: every turn's sizes, as Ollama counted them.
    assert all(t.context_window == 16384 for t in turns)
    assert all(t.prompt_tokens_max and t.prompt_tokens_max <= 16384 for t in turns)
    assert not any(t.truncated for t in turns)
    assert [k for k, _, _ in edits].count("auto-compact") == len(compactions)
    measured = events.of(ContextMeasured)
    assert turns[-1].prompt_tokens_last == measured[-1].prompt_tokens
    transcript = export_session(SessionStore(sessions_dir), session_id)
    assert transcript.count("automatic compaction in turn") == len(compactions)


# The guard on Ollama's API and on one OpenAI-compatible dialect (vLLM), which
# counts the same request its own way and refuses one that is too long.
@pytest.mark.model_servers("ollama", "vllm")
async def test_one_turn_with_three_big_results_compacts_between_its_calls(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script(
        [ToolCall("lookup", {"query": "first"})],
        [ToolCall("lookup", {"query": "second"})],
    )
    # The third call comes after two 6-8 kB results: about 5,500 tokens, past
    # 80 % of 8,192 with the system prompt and tools; the summary goes first.
    ollama.responder = lambda body: (
        faithful_summary(body)
        if is_summary_request(body)
        else [Text("All three lookups done.")]
        if '"query": "third"' in str(body["messages"][-1].get("content"))
        else [ToolCall("lookup", {"query": "third"})]
    )
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="8192") as runtime:
        events = Events()
        outcome = await runtime.conversation.run_turn("look up three things", events)
        assert outcome.status == "done", outcome.error
        turn = runtime.conversation.session.turns()[-1]

    assert outcome.answer == "All three lookups done."
    assert events.of(ContextCompacted), "no compaction inside the turn"
    kinds = ["summary" if is_summary_request(b) else "agent" for b in ollama.requests]
    assert kinds.index("summary") > 1  # after the turn's first two model calls
    assert all(s is None or not s.truncated for s in ollama.seen)
    assert all(s is None or s.requested_tokens <= 8192 for s in ollama.seen)
    # the model asked again after the summary with the question still in view
    after = ollama.seen[kinds.index("summary") + 1]
    assert after is not None and "look up three things" in after.text
    assert turn.prompt_tokens_max is not None and turn.prompt_tokens_max <= 8192


async def _history_then_overflowing_turn(runtime: Runtime, ollama: ScriptedOllama) -> None:
    ollama.responder = agent_responder
    for number in range(1, 4):
        outcome = await runtime.conversation.run_turn(f"which devices match turn-{number}")
        assert outcome.status == "done", outcome.error


def committed(runtime: Runtime) -> tuple[str | None, list[str], Any]:
    conversation = runtime.conversation
    head = conversation.head_checkpoint_id()
    values = conversation.committed_values(head)
    return (
        head,
        [str(m.id) for m in values.get("messages", [])],
        values.get(history.SUMMARIZATION_EVENT),
    )


async def test_ctrl_c_during_an_automatic_compaction_rolls_the_whole_turn_back(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="8192") as runtime:
        await _history_then_overflowing_turn(runtime, ollama)
        before = committed(runtime)
        summary_started = asyncio.Event()

        def stall_the_summary(body: dict[str, Any]) -> list[Step]:
            if is_summary_request(body):
                summary_started.set()
                return [Stall()]
            return agent_responder(body)

        ollama.responder = stall_the_summary
        task = asyncio.create_task(runtime.conversation.run_turn("which devices match turn-4"))
        await asyncio.wait_for(asyncio.to_thread(_wait_for, summary_started), 10)
        task.cancel()
        outcome = await task
        assert outcome.status == "cancelled"
        assert outcome.rollback is not None and outcome.rollback.verified
        assert committed(runtime) == before

        ollama.responder = agent_responder
        again = await runtime.conversation.run_turn("which devices match turn-4")
        assert again.status == "done", again.error


def _wait_for(event: asyncio.Event) -> None:
    import time

    deadline = time.monotonic() + 10
    while not event.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)


async def test_a_failed_summary_never_loses_the_conversation(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="8192") as runtime:
        await _history_then_overflowing_turn(runtime, ollama)
        messages_before = len(runtime.conversation.messages())
        summary_before = committed(runtime)[2]

        def failing_summary(body: dict[str, Any]) -> list[Step]:
            if is_summary_request(body):
                return [HTTPError(500, "llama runner process has terminated")]
            return agent_responder(body)

        ollama.responder = failing_summary
        events = Events()
        outcome = await runtime.conversation.run_turn("which devices match turn-4", events)
        assert outcome.status == "done", outcome.error
        failed = events.of(ContextSummaryFailed)
        assert failed and "llama runner process has terminated" in failed[0].reason
        assert not events.of(ContextCompacted)
        messages = runtime.conversation.messages()
        assert len(messages) == messages_before + 4  # question, call, result, answer
        assert committed(runtime)[2] == summary_before  # no new summary recorded

        ollama.responder = lambda body: (
            [Text("")] if is_summary_request(body) else agent_responder(body)
        )
        events = Events()
        outcome = await runtime.conversation.run_turn("which devices match turn-5", events)
        assert outcome.status == "done"
        assert next(f.reason for f in events.of(ContextSummaryFailed)) == (
            "the model's summary was empty"
        )


async def test_resume_after_compaction_sends_the_summary_not_the_raw_history(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = agent_responder
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="8192") as runtime:
        session_id = runtime.conversation.session.id
        events = Events()
        for number in range(1, 6):
            outcome = await runtime.conversation.run_turn(
                f"which devices match turn-{number}", events
            )
            assert outcome.status == "done", outcome.error
        assert events.of(ContextCompacted)
        last_before_quit = ollama.seen[max(model_requests(ollama))]

    first_after = len(ollama.requests)
    async with open_runtime(sessions_dir, ollama, session_id, NETBOX_CHAT_NUM_CTX="8192") as rt:
        outcome = await rt.conversation.run_turn("which devices match turn-6")
        assert outcome.status == "done", outcome.error
    resumed = ollama.seen[first_after]
    assert resumed is not None and last_before_quit is not None
    assert history.SUMMARY_PREFIX.strip() in resumed.text
    assert "turn-1 " not in resumed.text
    # as small as before quitting: the same summary and tail, plus the last
    # answer and the new question
    assert resumed.requested_tokens <= last_before_quit.requested_tokens + 100
    assert not is_summary_request(ollama.requests[first_after])


async def test_rewind_to_a_turn_before_a_compaction_restores_its_full_conversation(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = agent_responder
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="8192") as runtime:
        conversation = runtime.conversation
        events = Events()
        full_after: dict[int, int] = {}
        for number in range(1, 6):
            outcome = await conversation.run_turn(f"which devices match turn-{number}", events)
            full_after[number] = len(conversation.messages())
            if events.of(ContextCompacted) and number >= 3:
                break
        compacted_in = number
        first = min(n for n in full_after if n < compacted_in)

        result = history.rewind(conversation, first)
        assert result.messages_after == full_after[first]
        assert result.undid_compaction and "the compaction since then is undone" in str(result)
        assert committed(runtime)[2] is None  # the summary is gone with it
        before = len(ollama.requests)
        outcome = await conversation.run_turn("which devices match turn-9")
        assert outcome.status == "done"
        seen = ollama.seen[before]
        assert seen is not None and "which devices match turn-1" in seen.text
        assert history.SUMMARY_PREFIX.strip() not in seen.text


async def test_a_window_too_small_for_one_result_is_never_silent(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = agent_responder
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="2048") as runtime:
        events = Events()
        outcome = await runtime.conversation.run_turn("which devices match turn-1", events)
        turn = runtime.conversation.session.turns()[-1]
    assert any(s is not None and s.truncated for s in ollama.seen)
    truncated = [e for e in events.of(ContextMeasured) if e.truncated]
    assert truncated, "Ollama cut the request and nobody said so"
    assert outcome.context.truncated and turn.truncated


async def test_compaction_off_lets_the_truncation_through_and_says_so(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = agent_responder
    env = {"NETBOX_CHAT_NUM_CTX": "8192", "NETBOX_CHAT_COMPACT_AT": "0"}
    async with open_runtime(sessions_dir, ollama, **env) as runtime:
        events = Events()
        for number in range(1, 5):
            await runtime.conversation.run_turn(f"which devices match turn-{number}", events)
        turns = runtime.conversation.session.turns()
    assert not events.of(ContextCompacted)
    cut = [i for i, s in enumerate(ollama.seen) if s is not None and s.truncated]
    assert cut, "the scenario should overflow an 8k window"
    assert [t.number for t in turns if t.truncated]
    assert sum(e.truncated for e in events.of(ContextMeasured)) == len(cut)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "half"])
def test_compact_at_must_be_a_fraction(value: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NETBOX_CHAT_COMPACT_AT"):
        resolve_settings(sessions_dir=tmp_path, env={"NETBOX_CHAT_COMPACT_AT": value})


# --- through the real CLI ----------------------------------------------------------------

BIG_QUESTION = "check these devices: " + ", ".join(f"dmi01-akron-sw{n:03d}" for n in range(260))


def run_ask(env: dict[str, str], question: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(env, "ask", question, "--json", *args, timeout=60)


@pytest.mark.long
def test_kill_9_during_an_automatic_compaction_leaves_the_pre_turn_state(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    summary_asked = threading.Event()

    def respond(body: dict[str, Any]) -> list[Step]:
        if is_summary_request(body):
            summary_asked.set()
            return [Stall()]
        return [Text("Checked: all of them are active.")]

    ollama.responder = respond
    env = {**chat_env, "NETBOX_CHAT_NUM_CTX": "8192"}
    first = run_ask(env, BIG_QUESTION)
    assert first.returncode == 0, first.stderr
    session_id = json.loads(first.stdout)["session"]
    second = run_ask(env, BIG_QUESTION, "--session", session_id)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["context"]["compactions"] == 0
    before = inspect(sessions_dir, session_id)

    proc = start(
        env,
        *("ask", BIG_QUESTION, "--session", session_id),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert summary_asked.wait(30), "the third turn never asked for a summary"
    finally:
        proc.kill()
        proc.wait(10)
    after = inspect(sessions_dir, session_id, after_crash=True)
    assert after["messages"] == before["messages"]
    assert after["next"] == [] and after["pending_writes"] == 0
    assert [t["status"] for t in after["turns"]] == ["done", "done", "running"]

    ollama.responder = lambda body: [Text("Short answer.")]
    again = run_ask(env, "and now?", "--session", session_id)
    assert again.returncode == 0, again.stderr
    assert "turn 3 was interrupted and rolled back" in again.stderr
    final = inspect(sessions_dir, session_id)
    assert [t["status"] for t in final["turns"]] == ["done", "done", "interrupted", "done"]


def test_ask_json_and_export_report_the_context_and_the_truncation(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.responder = lambda body: [Text("Checked.")]
    env = {**chat_env, "NETBOX_CHAT_NUM_CTX": "8192", "NETBOX_CHAT_COMPACT_AT": "0"}
    first = run_ask(env, BIG_QUESTION)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    context = result["context"]
    assert context["window"] == 8192 and not context["truncated"]
    assert context["prompt_tokens_last"] == ollama.seen[-1].evaluated  # type: ignore[union-attr]
    session_id = result["session"]
    for _ in range(3):  # compaction off: the fourth request no longer fits
        done = run_ask(env, BIG_QUESTION, "--session", session_id)
    cut = json.loads(done.stdout)
    assert cut["context"]["truncated"] is True and cut["status"] == "done"
    assert "Ollama cut this request to fit its 8k window" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

    listed = cli(env, "ls", "--json", check=True)
    (row,) = json.loads(listed.stdout)
    assert row["context_window"] == 8192
    assert row["context_tokens"] == cut["context"]["prompt_tokens_last"] < 8192
    exported = cli(env, "export", session_id, check=True).stdout
    assert exported.count("Ollama cut a request of this turn") == 1
    as_json = json.loads(cli(env, "export", session_id, "--format", "json", check=True).stdout)
    assert [t["context"]["truncated"] for t in as_json["turns"]] == [False, False, False, True]


async def test_the_fixed_part_of_a_request_is_what_window_py_assumes(
    ollama: ScriptedOllama, sessions_dir: Path, netbox: Any
) -> None:
    """window.FIXED_REQUEST_CHARS (doctor's floor) against the real system
    prompt and tool definitions the agent sends."""
    ollama.script([Text("ok")])
    env = {"NETBOX_URL": netbox.url, "NETBOX_TOKEN": TEST_TOKEN}
    store = SessionStore(sessions_dir)
    session = SessionFile.create(store, model="qwen3:8b")
    settings = resolve_settings(sessions_dir=sessions_dir, ollama_url=ollama.url, env=env)
    runtime = await asyncio.to_thread(build_runtime, session, settings)
    try:
        await runtime.conversation.run_turn("hi")
    finally:
        await runtime.aclose()
        session.close()
    body = ollama.requests[0]
    sent = len(json.dumps(body["tools"])) + sum(
        len(m["content"]) for m in body["messages"] if m["role"] == "system"
    )
    assert sent <= FIXED_REQUEST_CHARS < sent * 1.2


def test_the_repl_shows_the_meter_the_compaction_and_compact_before_after(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    from tests.drive.pty import leave, plain, spawn

    ollama.responder = lambda body: (
        faithful_summary(body) if is_summary_request(body) else [Text("Checked.")]
    )
    child = spawn({**chat_env, "NETBOX_CHAT_NUM_CTX": "8192"})
    child.sendline(BIG_QUESTION[:2000])
    child.expect(r"context (\d+(\.\d)?k?) / 8k \((\d+)%\)")
    first_fill = int(child.match.group(3))
    for _ in range(2):
        child.expect(r"netbox\S*>")
        time.sleep(0.3)
        child.sendline(BIG_QUESTION)
        child.expect(r"context [\d.]+k / 8k \(\d+%\)")
    child.expect(r"netbox\S*>")
    time.sleep(0.3)
    child.sendline(BIG_QUESTION)
    child.expect(r"context [\d.]+k/8k: summarized \d+ older messages")
    child.expect(r"context [\d.]+k / 8k \((\d+)%\)")
    for question in ("and the switches?", "and the routers?"):  # so /compact has work
        child.expect(r"netbox\S*>")
        time.sleep(0.3)
        child.sendline(question)
        child.expect(r"context [\d.]+k / 8k \(\d+%\)")
    child.expect(r"netbox\S*>")
    child.sendline("/tokens")
    child.expect("last request")
    child.expect(r"netbox\S*>")
    time.sleep(0.3)
    child.sendline("/compact")
    child.expect(r"%\)(\x1b\[0m)?\r\n")  # the meter after ends the line
    printed = plain((child.before or "") + (child.after or ""))
    assert re.search(r"compacted \d+ messages", printed), printed
    meter = re.search(
        r"context [\d.]+k? / 8k \((\d+)%\) → context [\d.]+k? / 8k \((\d+)%\)", printed
    )
    assert meter is not None, printed
    before, after = int(meter.group(1)), int(meter.group(2))
    out = leave(child)
    assert 0 < first_fill < 60 and after < before
    assert "Traceback" not in plain(out)


@pytest.mark.parametrize(("num_ctx", "cut"), [("2048", True), ("16384", False)])
async def test_the_netbox_result_budget_scales_with_the_window(
    num_ctx: str,
    cut: bool,
    ollama: ScriptedOllama,
    netbox: Any,
    sessions_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    many = [
        {
            "id": n,
            "name": f"dmi01-akron-sw{n:03d}",
            "site": {"id": 1, "slug": "dm-akron"},
            "status": {"value": "active"},
        }
        for n in range(1, 41)
    ]  # about 3,300 characters of JSON
    monkeypatch.setitem(netbox.data, "dcim/devices", many)
    ollama.responder = lambda body: (
        faithful_summary(body)
        if is_summary_request(body)
        else [Text("Forty devices.")]
        if body["messages"][-1]["role"] == "tool"
        else [ToolCall("netbox_get_objects", {"object_type": "dcim.device", "limit": 50})]
    )
    env = {"NETBOX_URL": netbox.url, "NETBOX_TOKEN": TEST_TOKEN, "NETBOX_CHAT_NUM_CTX": num_ctx}
    session = SessionFile.create(SessionStore(sessions_dir), model="qwen3:8b")
    settings = resolve_settings(sessions_dir=sessions_dir, ollama_url=ollama.url, env=env)
    runtime = await asyncio.to_thread(build_runtime, session, settings)
    try:
        outcome = await runtime.conversation.run_turn("list the devices")
    finally:
        await runtime.aclose()
        session.close()
    assert outcome.status == "done", outcome.error
    (result,) = {
        m["content"] for r in ollama.requests for m in r["messages"] if m["role"] == "tool"
    }
    budget = result_budget(int(num_ctx))  # 2,000 characters at 2k, 8,192 at 16k
    assert (f"cut to fit {budget} characters" in result) is cut
    assert len(result) <= budget
    assert {r["options"]["num_ctx"] for r in ollama.requests} == {int(num_ctx)}


async def test_the_window_is_capped_at_the_model_s_own_length(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("ok")])
    async with open_runtime(sessions_dir, ollama, NETBOX_CHAT_NUM_CTX="65536") as runtime:
        assert runtime.model_info is not None and runtime.model_info.context_length == 40_960
        assert runtime.window == 40_960
        await runtime.conversation.run_turn("hi")
    assert ollama.requests[-1]["options"]["num_ctx"] == 40_960


async def test_compact_asks_for_a_summary_that_fits_the_window(
    ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """/compact's own request is bounded by the session's window, not by a
    fixed 40,000 characters that a 4k window cannot hold."""
    ollama.responder = agent_responder
    env = {"NETBOX_CHAT_NUM_CTX": "4096", "NETBOX_CHAT_COMPACT_AT": "0"}
    async with open_runtime(sessions_dir, ollama, **env) as runtime:
        for number in range(1, 31):  # a transcript of about 20,000 characters
            await runtime.conversation.run_turn(f"which devices match turn-{number}")
        result = await history.compact(runtime.conversation)
    assert result.summarized > 0
    (summary,) = [
        seen
        for body, seen in zip(ollama.requests, ollama.seen, strict=True)
        if is_summary_request(body)
    ]
    assert summary is not None and not summary.truncated
    assert summary.requested_tokens <= 4096


def test_the_running_turn_s_thinking_counts_toward_the_window(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Issue 21, item 6: the replies of the running turn carry their thinking
    into the next request (Ollama's template renders it, as the double does),
    so a turn that thinks at length between two tool calls is compacted
    before Ollama would drop the oldest messages: turn 1's fact still reaches
    the model (through the summary), and nothing is cut."""
    filler = " ".join(
        f"Site note {i}: the uplinks here were reviewed, all in order." for i in range(40)
    )
    thought = "Let me consider every site carefully before I answer. " * 400

    def respond(body: dict[str, Any]) -> list[Step]:
        if is_summary_request(body):
            return faithful_summary(body)
        messages = body["messages"]
        question = str([m for m in messages if m["role"] == "user"][-1]["content"])
        if "sites" not in question:
            return [Text(FACT if "ticket" in question else filler)]
        if messages[-1]["role"] == "user":
            return [Thinking(thought), ToolCall("netbox_get_objects", {"object_type": "dcim.site"})]
        return [Text("Three sites.")]

    ollama.responder = respond
    env = {**chat_env, "NETBOX_CHAT_NUM_CTX": "8192"}
    first = run_ask(env, "what is the rack key ticket?")
    session_id = json.loads(first.stdout)["session"]
    for n in range(2):
        assert (
            run_ask(env, f"tell me about the uplinks, part {n}", "--session", session_id).returncode
            == 0
        )
    asked = len(ollama.requests)
    last = run_ask(env, "which sites are there?", "--session", session_id)
    assert last.returncode == 0, last.stderr
    result = json.loads(last.stdout)
    assert result["answer"] == "Three sites." and thought.strip() in result["thinking"]
    assert result["context"]["compactions"] == 1 and result["context"]["truncated"] is False
    agent = [
        ollama.seen[i]
        for i in range(asked, len(ollama.requests))
        if not is_summary_request(ollama.requests[i])
    ]
    assert all(s is not None and s.messages_dropped == 0 and s.middle_cut == 0 for s in agent)
    assert FACT in agent[-1].text  # type: ignore[union-attr]


def _many_devices(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": n,
            "name": f"dmi01-akron-sw{n:03d}",
            "site": {"id": 1, "slug": "dm-akron"},
            "status": {"value": "active"},
        }
        for n in range(1, count + 1)
    ]


def _page_until_summarized(body: dict[str, Any]) -> list[Step]:
    """Pages through the devices until the guard summarizes, then answers the
    question it sees last, word for word (or says it lost it)."""
    if is_summary_request(body):
        return faithful_summary(body)
    messages = body["messages"]
    summarized = any(str(m.get("content", "")).startswith(history.SUMMARY_PREFIX) for m in messages)
    asked = [
        str(m["content"])
        for m in messages
        if m["role"] == "user" and not str(m["content"]).startswith(history.SUMMARY_PREFIX)
    ]
    calls = sum(1 for m in messages if m["role"] == "tool")
    if messages[-1]["role"] == "tool" and (summarized or calls >= 8):
        return [Text(f"Answer to: {asked[-1]}" if asked else "Answer to: (no question seen)")]
    if messages[-1]["role"] == "user" and summarized and asked:
        return [Text(f"Answer to: {asked[-1]}")]
    offset = 50 * calls
    return [
        ToolCall(
            "netbox_get_objects", {"object_type": "dcim.device", "limit": 50, "offset": offset}
        )
    ]


QUESTION = "Which DM-Akron switches are active, page by page?"


def test_the_question_being_asked_is_never_summarized(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: Any, sessions_dir: Path
) -> None:
    """Issue 25, item 5: a summary inside the running turn (after three
    4 kB results in an 8k window) is followed by the question, as its own
    user message and exactly as typed; the answer is to that question, and
    the next turn still sees it after the summary."""
    netbox.data["dcim/devices"] = _many_devices(400)
    ollama.responder = _page_until_summarized
    env = {**chat_env, "NETBOX_CHAT_NUM_CTX": "8192"}
    first = run_ask(env, QUESTION)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["context"]["compactions"] == 1
    assert result["answer"] == f"Answer to: {QUESTION}"
    kinds = ["summary" if is_summary_request(b) else "agent" for b in ollama.requests]
    after = ollama.requests[kinds.index("summary") + 1]["messages"]
    assert [m["role"] for m in after[:3]] == ["system", "user", "user"]
    assert str(after[1]["content"]).startswith(history.SUMMARY_PREFIX)
    assert QUESTION not in str(after[1]["content"])  # not folded into the summary
    assert after[2]["content"] == QUESTION
    assert [m["role"] for m in after[3:]] == ["assistant", "tool"]  # the last step, kept

    then = run_ask(env, "and the routers?", "--session", result["session"])
    assert then.returncode == 0, then.stderr
    nxt = ollama.requests[-1]["messages"]
    assert str(nxt[1]["content"]).startswith(history.SUMMARY_PREFIX)
    assert nxt[2] == {"role": "user", "content": QUESTION}
    assert json.loads(then.stdout)["answer"] == "Answer to: and the routers?"


@pytest.mark.long
def test_sigint_after_a_summary_that_kept_the_question_rolls_the_turn_back(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: Any, sessions_dir: Path
) -> None:
    """Ctrl-C (SIGINT to `ask`) while the model answers from the summary and
    the kept question: the session is as it was before the turn, and the
    next question is sent without that summary."""
    netbox.data["dcim/devices"] = _many_devices(400)
    ollama.responder = lambda body: [Text("Hello.")]
    env = {**chat_env, "NETBOX_CHAT_NUM_CTX": "8192"}
    first = run_ask(env, "hello")
    assert first.returncode == 0, first.stderr
    session_id = json.loads(first.stdout)["session"]
    before = inspect(sessions_dir, session_id)
    stalled = threading.Event()

    def stall_after_the_summary(body: dict[str, Any]) -> list[Step]:
        messages = body["messages"]
        if not is_summary_request(body) and any(
            str(m.get("content", "")).startswith(history.SUMMARY_PREFIX) for m in messages
        ):
            assert messages[2]["content"] == QUESTION  # kept, as its own message
            stalled.set()
            return [Stall()]
        return _page_until_summarized(body)

    ollama.responder = stall_after_the_summary
    proc = start(env, "ask", QUESTION, "--session", session_id)
    try:
        assert stalled.wait(60), "the turn never asked again after its summary"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, stderr
    assert "rolled back" in stderr
    assert inspect(sessions_dir, session_id)["messages"] == before["messages"]

    ollama.responder = lambda body: [Text("Short answer.")]
    again = run_ask(env, "and now?", "--session", session_id)
    assert again.returncode == 0, again.stderr
    sent = ollama.requests[-1]["messages"]
    assert not any(str(m["content"]).startswith(history.SUMMARY_PREFIX) for m in sent)
    assert [m["content"] for m in sent if m["role"] == "user"] == ["hello", "and now?"]
