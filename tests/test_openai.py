"""netbox-chat on any OpenAI-compatible server, through the real CLI against the
scripted server (tests/doubles/openai_server.py) in each dialect: llama-server, vLLM,
SGLang, LM Studio and Ollama's /v1.

Run in full over the five dialects where they behave differently: a turn with
reasoning, a tool call (whole or in argument deltas) and the server's usage;
the window; the over-length answer; cancel (when each server notices); tools
refused; each thinking setting, in the fields each server reads. One dialect
stands for all elsewhere: vLLM for the key's rule; LM Studio alone writes
either reasoning field. The liveness rule (a silent server that says it is
alive) is in tests/test_liveness.py.

The suites that run on Ollama's API run on these servers too, through the
`model_servers` marker (tests/conftest.py): reasoning kept apart, sent back in
each server's field and counted, `--stream-json` and thinking off in
tests/test_thinking.py; cancel and rollback in tests/test_turns.py; crash,
rewind, compaction, the context guard, sloppy arguments and the REPL in theirs.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import Delay, HangUp, ScriptedOllama, Text, Thinking, ToolCall
from tests.doubles.openai_server import ScriptedOpenAI
from tests.drive.process import start
from tests.drive.runner import invoke

OFFLINE = ToolCall(
    "netbox_get_objects", {"object_type": "dcim.device", "filters": {"status": "offline"}}
)
REFUSE_WHEN_TOO_LONG = ["llama.cpp", "vllm", "sglang", "lmstudio"]
SERVER_NAMES = {
    "llama.cpp": "llama-server",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "lmstudio": "LM Studio",
    "ollama": "Ollama /v1",
}


def ask(env: dict[str, str], *args: str) -> tuple[int, dict, str]:
    result = invoke(["ask", *args, "--json"], env=env)
    data = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, data, result.stderr


def test_a_turn_with_a_tool_call_counts_the_servers_usage_in_its_window(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    """Its reasoning (kept apart, sent back in this server's field, counted) is
    tests/test_thinking.py's, on every server."""
    openai_server.script(
        [Thinking("Offline devices: ask NetBox."), OFFLINE],
        [Text("One offline device: dmi01-akron-sw02.")],
    )
    code, answer, stderr = ask(openai_env, "which devices are offline?")
    assert code == 0, stderr
    assert answer["answer"] == "One offline device: dmi01-akron-sw02."
    assert answer["tool_calls"][0]["args"]["filters"] == {"status": "offline"}
    # The ledger's counts are the server's own (the usage chunk it was asked for).
    assert openai_server.requests[0]["stream_options"] == {"include_usage": True}
    assert answer["tokens"]["in"] == sum(s.evaluated for s in openai_server.seen[:2])
    assert answer["context"]["window"] == 40_960  # as the server's own endpoint says


@pytest.mark.parametrize("openai_server", ["vllm"], indirect=True)
def test_every_server_is_sent_the_products_own_tools_and_every_netbox_read_is_recorded(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    openai_env: dict[str, str],
    openai_server: ScriptedOpenAI,
    netbox: NetBoxDouble,
) -> None:
    """Issue 32, item 1: no deepagents `task` sub-agent on any server. A
    sub-agent's NetBox reads would appear in no --json, ledger or export."""
    ollama.script([Text("Three sites.")])
    code, _, stderr = ask(chat_env, "how many sites?")
    assert code == 0, stderr
    # A model that still asks for a sub-agent gets no sub-agent: the name is unknown.
    openai_server.script(
        [ToolCall("task", {"description": "List the sites", "subagent_type": "general-purpose"})],
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Text("Three sites.")],
    )
    before = len(netbox.requests)
    code, answer, stderr = ask(openai_env, "how many sites?")
    assert code == 0, stderr

    def tools(request: dict) -> list[tuple]:
        """Each tool's name, description and arguments (langchain-ollama leaves
        out the arguments' defaults, langchain-openai keeps them)."""
        return [
            (
                f["name"],
                f["description"],
                sorted(f["parameters"]["properties"]),
                sorted(f["parameters"].get("required", [])),
            )
            for f in (tool["function"] for tool in request.get("tools", []))
        ]

    assert tools(openai_server.requests[0]) == tools(ollama.requests[0])
    assert "task" not in {tool[0] for tool in tools(openai_server.requests[0])}
    # Every NetBox read of the turn is one the answer lists.
    reads = [p for p in netbox.requests[before:] if not p.startswith("/api/status/")]
    listed = [call["name"] for call in answer["tool_calls"]]
    assert listed == ["task", "netbox_get_objects"]
    assert answer["tool_calls"][0]["error"] and len(reads) == 1


@pytest.mark.model_servers()
def test_a_reply_cut_at_num_predict_fails_the_turn_with_what_to_do_on_every_server(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Issue 32, item 2: NETBOX_CHAT_NUM_PREDICT reaches each server in its own
    field, the server stops the reply there, and the cut reply is never kept as
    an answer."""
    ollama.script([Thinking("Active sites: ask NetBox."), Text("The active sites are DM-Akron")])
    code, answer, stderr = ask({**chat_env, "NETBOX_CHAT_NUM_PREDICT": "6"}, "which sites?")
    sent = ollama.requests[0]
    if isinstance(ollama, ScriptedOpenAI):
        assert sent["max_tokens"] == 6
        field = 'finish_reason "length"'
    else:
        assert sent["options"]["num_predict"] == 6
        field = 'Ollama done_reason "length"'
    assert code == 1
    assert answer["status"] == "failed" and answer["kept"] is False
    assert answer["error"] == (
        "the model stopped at its output limit before it finished its answer "
        f"({field}; thinking counts against that limit): turn thinking off with "
        "/think off (NETBOX_CHAT_THINK=off) or allow longer replies with "
        "NETBOX_CHAT_NUM_PREDICT, then ask again"
    )
    assert "DM-Akron" not in stderr
    # Without the limit the same reply is a whole answer, and no limit is sent.
    ollama.script([Text("The active sites are DM-Akron")])
    code, answer, stderr = ask(chat_env, "which sites?")
    assert code == 0, stderr
    assert answer["answer"] == "The active sites are DM-Akron"
    assert "max_tokens" not in ollama.requests[1]


@pytest.mark.model_servers()
def test_a_server_that_dies_mid_answer_is_said_in_the_products_words_on_every_server(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Issue 32, item 4: not httpx's `RemoteProtocolError: peer closed
    connection…`, but which server, what happened and what to do; the turn is
    rolled back."""
    ollama.script([Text("Two devices are " * 5, chunk_delay=0.02), HangUp()])
    code, answer, stderr = ask(chat_env, "how many devices?")
    if isinstance(ollama, ScriptedOpenAI):
        server, log = SERVER_NAMES[ollama.dialect], "the server's log"
    else:
        server, log = "Ollama", "the Ollama server log"
    assert code == 1
    assert answer["status"] == "failed" and answer["kept"] is False
    assert answer["error"] == (
        f"{server} closed the connection mid-answer (peer closed connection without "
        "sending complete message body (incomplete chunked read)): it stopped or "
        f"crashed; try again, and if it repeats, check {log}"
    )
    assert "RemoteProtocolError" not in stderr


def test_a_request_too_long_for_the_window_is_compacted_and_sent_again(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    # Just above what one turn needs (window.too_small_for: 4,072 here), so the
    # question is asked and only the grown history can be too long.
    openai_server.context_lengths["qwen3:8b"] = 4_200
    env = {**openai_env, "NETBOX_CHAT_COMPACT_AT": "0"}  # only the server's refusal compacts
    long_answer = " ".join(["interface"] * 3_000)
    openai_server.script([Text(long_answer)], [Text("Summary: interfaces.")], [Text("Short.")])
    code, first, stderr = ask(env, "list every interface")
    assert code == 0, stderr
    code, second, stderr = ask(env, "and briefly?", "--session", first["session"])
    if openai_server.dialect == "ollama":
        # Ollama's /v1 drops the oldest messages in silence (server/prompt.go): no
        # refusal to act on, and the same warning as on Ollama's own API.
        assert code == 0 and second["answer"] == "Summary: interfaces."
        assert second["context"]["truncated"]
        return
    assert code == 0, stderr
    assert second["answer"] == "Short."
    assert second["context"]["compactions"] == 1
    # The summary request and the retry came after the refusal, and the retry fit.
    assert len(openai_server.requests) == 4
    assert openai_server.seen[3].requested_tokens <= 4_200


# Ollama's /v1 never refuses: it truncates (the test above).
@pytest.mark.parametrize("openai_server", REFUSE_WHEN_TOO_LONG, indirect=True)
def test_a_request_that_cannot_fit_fails_in_one_line_naming_the_window_and_rolls_back(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    openai_server.context_lengths["qwen3:8b"] = 4_000
    code, answer, _ = ask(openai_env, "interface " * 5_000)
    assert code == 1
    assert answer["status"] == "failed"
    # Refused before asking (issue 25, item 5): the window is the server's own.
    assert "the context window (4,000 tokens) cannot hold one turn" in answer["error"]
    assert openai_server.requests == []
    assert answer["kept"] is False  # a new session whose only turn failed is not kept


@pytest.mark.parametrize("moment", ["prefill", "answer"])
def test_ctrl_c_rolls_back_and_closes_the_stream_when_the_server_notices(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, moment: str
) -> None:
    prefill = 3.0 if moment == "prefill" else 0.0
    openai_server.script(
        [Delay(prefill), Text("one two three four five six seven eight", chunk_delay=0.5)]
    )
    process = start(openai_env, "ask", "which sites?", "--json")
    try:
        openai_server.wait_for_requests(1, timeout=90)
        time.sleep(0.8)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert json.loads(stdout)["status"] == "cancelled"
    if moment == "prefill" and not openai_server.stops_during_prefill:
        # LM Studio and Ollama finish processing the prompt first (facts, section 4):
        # the hang-up is noticed only when the first token goes out.
        assert openai_server.disconnects == []
        openai_server.wait_for_disconnects(1, timeout=5)
    else:
        openai_server.wait_for_disconnects(1, timeout=1.5)


# Only vLLM and SGLang start with tool calling off.
@pytest.mark.parametrize("openai_server", ["vllm", "sglang"], indirect=True)
def test_tools_refused_or_left_in_the_text_name_the_servers_flags(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    openai_server.tool_parser = False
    openai_server.script([OFFLINE])
    code, answer, _ = ask(openai_env, "which devices are offline?")
    assert code == 1 and answer["status"] == "failed"
    flag = (
        "--enable-auto-tool-choice --tool-call-parser"
        if openai_server.dialect == "vllm"
        else "--tool-call-parser"
    )
    assert flag in answer["error"]
    assert SERVER_NAMES[openai_server.dialect] in answer["error"]


def test_doctor_names_the_server_its_version_the_model_reasoning_and_window(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    openai_server.script([Thinking("Say OK."), Text("OK")])
    result = invoke(["doctor"], env=openai_env)
    lines = result.stdout.splitlines()
    server = next(line for line in lines if line.startswith("✓ model server"))
    assert SERVER_NAMES[openai_server.dialect] in server
    versions = {"llama.cpp": "b7000", "vllm": "0.33.0", "sglang": "0.5.23", "ollama": "0.12.0"}
    if openai_server.dialect in versions:
        assert f"version {versions[openai_server.dialect]}" in server
    else:  # LM Studio says none
        assert "version" not in server
    model = next(line for line in lines if line.startswith("✓ model:"))
    assert (
        "qwen3:8b" in model and f"returns reasoning in `{openai_server.reasoning_field}`" in model
    )
    assert any(line.startswith("✓ context window: 40,960 tokens") for line in lines)


@pytest.mark.parametrize("openai_server", ["sglang"], indirect=True)
@pytest.mark.parametrize("path", ["/server_info", "/get_server_info"])
def test_doctor_reads_sglangs_version_under_either_name(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, path: str
) -> None:
    """A release with only one of the two names (before the rename, or after the
    deprecated one goes) still shows its version."""
    openai_server.retired = {path}
    openai_server.script([Text("OK")])
    result = invoke(["doctor"], env=openai_env)
    server = next(line for line in result.stdout.splitlines() if "model server" in line)
    assert server == f"✓ model server: SGLang at {openai_server.base_url} (version 0.5.23)"


@pytest.mark.parametrize("openai_server", ["vllm"], indirect=True)
def test_doctor_names_vllms_tool_flags(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    openai_server.tool_parser = False
    result = invoke(["doctor"], env=openai_env)
    assert result.exit_code == 1
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("✗ model:")]
    assert "--enable-auto-tool-choice --tool-call-parser" in line


SWITCHED = {"llama.cpp", "vllm", "sglang"}
"""The servers that pass `chat_template_kwargs` to the template (Qwen3's switch)."""
THINK = {
    # (model, setting): what the user is told, and what each server reads.
    ("gpt-oss:20b", "high"): (None, lambda dialect: "high"),
    ("gpt-oss:20b", "off"): (
        "gpt-oss:20b cannot stop thinking; it thinks as little as it can (low)",
        lambda dialect: "low",
    ),
    ("qwen3:8b", "high"): (
        "qwen3:8b takes no thinking levels; thinking on",
        lambda dialect: True if dialect in SWITCHED else None,
    ),
    ("qwen3:8b", "on"): (None, lambda dialect: True if dialect in SWITCHED else None),
    ("qwen3:8b", "off"): (None, lambda dialect: False),
    ("gemma:2b", "high"): (
        "the model server did not say whether gemma:2b can think; leaving it to the model",
        lambda dialect: None,
    ),
}


@pytest.mark.parametrize(("model", "setting"), list(THINK), ids=[f"{m}-{s}" for m, s in THINK])
def test_each_thinking_setting_reaches_each_server_in_the_fields_it_reads(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, model: str, setting: str
) -> None:
    """gpt-oss takes levels and cannot stop (as on Ollama's own API), Qwen3 is
    switched on or off, a model of no known family is left to itself: worded as
    `reasoning_effort` for every server, and as the template's own switch where
    the server passes `chat_template_kwargs` (models/openai.py thinking_fields)."""
    env = {
        **openai_env,
        "NETBOX_CHAT_MODEL": model,
        "NETBOX_CHAT_THINK": setting,
        "NETBOX_CHAT_CONTEXT_WINDOW": "16384",
    }
    openai_server.script([Thinking("Sites: ask NetBox."), Text("Three sites.")])
    code, answer, stderr = ask(env, "how many sites?")
    assert code == 0, stderr
    note, expected = THINK[(model, setting)]
    assert (note in stderr) if note else ("netbox-chat: " not in stderr), stderr
    asked = expected(openai_server.dialect)
    assert openai_server.thinking_asked[0] == asked
    sent = openai_server.requests[0]
    if asked in ("low", "high") and openai_server.dialect == "llama.cpp":
        assert sent["chat_template_kwargs"] == {"reasoning_effort": asked}
    if openai_server.dialect in ("lmstudio", "ollama"):
        assert "chat_template_kwargs" not in sent  # they have none
    assert (answer["thinking"] is None) == (asked is False)


@pytest.mark.parametrize("openai_server", ["vllm"], indirect=True)
def test_the_key_goes_only_to_the_base_url_configured_with_it(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI, tmp_path: Path
) -> None:
    secret = "sk-test-0123456789abcdef"
    env = {**openai_env, "NETBOX_CHAT_API_KEY_ENV": "MY_SERVER_KEY", "MY_SERVER_KEY": secret}
    openai_server.script([Text("Three sites.")])
    code, _, stderr = ask(env, "how many sites?")
    assert code == 0, stderr
    assert set(openai_server.authorizations) == {f"Bearer {secret}"}
    shown = invoke(["config"], env=env).stdout
    assert "set (from MY_SERVER_KEY)" in shown and secret not in shown
    assert secret.encode() not in b"".join(
        p.read_bytes() for p in Path(env["NETBOX_CHAT_SESSIONS"]).iterdir()
    )

    # The file names a key for its base_url; a --base-url typed over it gets none.
    config = Path(env["XDG_CONFIG_HOME"]) / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'provider = "openai"\nbase_url = "http://10.9.9.9:8000/v1"\napi_key_env = "MY_SERVER_KEY"\n'
    )
    env = {k: v for k, v in env.items() if not k.startswith("NETBOX_CHAT_API_KEY_ENV")}
    env.pop("NETBOX_CHAT_BASE_URL")
    openai_server.authorizations.clear()
    openai_server.script([Text("Three sites.")])
    result = invoke(["ask", "how many sites?", "--base-url", openai_server.base_url], env=env)
    assert result.exit_code == 0, result.output
    assert "no key is sent" in result.stderr
    assert f"Bearer {secret}" not in openai_server.authorizations


def test_the_flags_alone_chat_against_the_server(
    chat_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    """The issue's "done when": --provider, --base-url and --model on the command line."""
    openai_server.script([Text("Three sites.")])
    result = invoke(
        [
            "ask",
            "how many sites?",
            "--provider",
            "openai",
            "--base-url",
            openai_server.base_url,
            "--model",
            "qwen3:8b",
        ],
        env=chat_env,
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Three sites."
    assert openai_server.requests[0]["model"] == "qwen3:8b"


def test_config_shows_the_server_settings_and_where_they_came_from(
    chat_env: dict[str, str],
) -> None:
    config = Path(chat_env["XDG_CONFIG_HOME"]) / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'provider = "openai"\n'
        "[profiles.gpu]\n"
        'base_url = "http://gpu.example:8000/v1"\n'
        'api_key_env = "GPU_KEY"\n'
        "context_window = 32768\n"
    )
    env = {**chat_env, "GPU_KEY": "sk-gpu-secret-0123456789"}
    shown = invoke(["config", "--profile", "gpu"], env=env).stdout
    rows = {line.split()[0]: line for line in shown.splitlines() if line.strip()}
    assert rows["provider"].split()[1:] == ["openai", "file"]
    assert rows["base_url"].split()[1:] == ["http://gpu.example:8000/v1", "profile", "gpu"]
    assert "32768" in rows["context_window"] and "profile gpu" in rows["context_window"]
    assert "set (from GPU_KEY)" in rows["api_key"]
    assert "sk-gpu-secret" not in shown


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("NETBOX_CHAT_BASE_URL", "http://127.0.0.1:8000", "must be an http(s) URL ending in /v1"),
        ("NETBOX_CHAT_API_KEY_ENV", "sk-a-key-pasted-here", "must name an environment variable"),
        ("NETBOX_CHAT_PROVIDER", "vllm", "must be one of ollama, openai"),
    ],
)
def test_a_wrong_server_setting_is_one_line_and_exit_1(
    chat_env: dict[str, str], variable: str, value: str, words: str
) -> None:
    result = invoke(["ask", "hi"], env={**chat_env, variable: value})
    assert result.exit_code == 1
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "sk-a-key" not in result.stderr or variable != "NETBOX_CHAT_API_KEY_ENV"


@pytest.mark.parametrize("openai_server", ["lmstudio"], indirect=True)
def test_lm_studio_gets_reasoning_back_in_the_field_it_wrote(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    """LM Studio writes `reasoning` for gpt-oss and `reasoning_content` for R1-style
    models (api-changelog 0.3.9, 0.3.23): the field it wrote is the one sent back."""
    openai_server.reasoning_field = "reasoning"
    openai_server.script([Thinking("Ask NetBox."), OFFLINE], [Text("One.")])
    code, answer, stderr = ask(openai_env, "which devices are offline?")
    assert code == 0, stderr
    assert answer["thinking"].startswith("Ask NetBox.")
    (called,) = [m for m in openai_server.requests[1]["messages"] if m.get("tool_calls")]
    assert called["reasoning"] == "Ask NetBox." and "reasoning_content" not in called


def test_a_server_that_is_not_there_is_one_line_and_nothing_is_kept(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    env = {
        **chat_env,
        "NETBOX_CHAT_PROVIDER": "openai",
        "NETBOX_CHAT_BASE_URL": "http://127.0.0.1:9/v1",
    }
    result = invoke(["ask", "how many sites?"], env=env)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "netbox-chat: cannot reach http://127.0.0.1:9/v1 ([Errno 111] Connection refused); "
        "nothing was kept"
    ]
    assert not list(sessions_dir.glob("*.sqlite"))


@pytest.mark.parametrize("openai_server", ["vllm"], indirect=True)
def test_the_repl_shows_the_servers_reasoning_dimmed_and_think_off_stops_it(
    openai_env: dict[str, str], openai_server: ScriptedOpenAI
) -> None:
    from tests.drive.pty import DIM, PROMPT, leave, plain, spawn

    openai_server.script(
        [
            # Long enough to span several of the live area's draws on a loaded
            # machine: a thinking that ends between two draws is only ever shown
            # collapsed ("thought for"), which is right, but not what this checks.
            Thinking("The user wants the sites.", chunk_delay=0.25),
            Text("Three sites.", chunk_delay=0.05),
        ],
        [Thinking("never shown"), Text("Still three.")],
    )
    child = spawn(openai_env)
    child.sendline("list the sites")
    child.expect(DIM + r"\s*The user wants")  # vLLM's `reasoning`, shown dimmed
    child.expect(r"thought for \d+\.\ds")
    child.expect(r"([\s\S]*?)tokens [\d,]+ in")
    assert "Three sites." in plain(child.match.group(1))
    assert "The user wants" not in child.match.group(1)
    child.expect(PROMPT)
    child.sendline("/think off")
    child.expect("thinking off for the rest of this session")
    child.expect(PROMPT)
    child.sendline("and now?")
    child.expect("Still three.")
    child.expect(PROMPT)
    leave(child)
    assert "reasoning_effort" not in openai_server.requests[0]
    assert openai_server.requests[1]["reasoning_effort"] == "none"
