"""Real models as they were recorded behaving (docs/facts/real-models.md), played
by the scripted Ollama through the real CLI, the real deepagents graph and the real
ChatOllama, with the NetBox double behind the real tools: what the user sees, what the
ledger records and what the next request carries."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.inspect_session import turn_row
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import (
    GFK_LIST,
    HARMONY_SUFFIX,
    RACK_BY_NAME,
    STATUS_IN_DISPLAY_CASE,
    TENANT_AS_PROVIDER,
    TENANT_BY_DISPLAY_NAME,
    CutOff,
    ScriptedOllama,
    Text,
    Thinking,
    ToolCall,
    repeated,
    tool_call_as_text,
)
from tests.drive.runner import ask, ask_json

SITES_CALL = {"object_type": "dcim.site"}
ANSWER = "Three sites: DM-Akron, DM-Columbus, DM-Dayton."


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def sites_asked(netbox: NetBoxDouble) -> int:
    return sum(1 for path in netbox.requests if path.startswith("/api/dcim/sites/"))


# --- items 3 and 4: a tool call written as text, a mangled tool name ----------------


@pytest.mark.parametrize(
    "reply",
    [
        tool_call_as_text("netbox_get_objects", SITES_CALL),
        tool_call_as_text("netbox_get_objects", SITES_CALL, fenced=True),
        tool_call_as_text("", SITES_CALL),  # only the arguments: one tool takes them
    ],
    ids=["name-and-arguments", "fenced", "arguments-only"],
)
def test_a_tool_call_written_as_the_answer_is_run_and_the_turn_goes_on(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    sessions_dir: Path,
    reply: Text,
) -> None:
    ollama.script([reply], [Text(ANSWER)])
    result = ask(chat_env, "list the sites", "--stream-json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    final = lines[-1]
    assert final["status"] == "done" and final["answer"] == ANSWER
    # The JSON was held back as it streamed, then dropped: never shown as words.
    shown = "".join(line["text"] for line in lines if line["type"] == "text_delta")
    assert shown == ANSWER
    assert [call["name"] for call in final["tool_calls"]] == ["netbox_get_objects"]
    assert sites_asked(netbox) == 1
    # The model is told how its reply was read, next to the call's result.
    (carried,) = tool_results(ollama.requests[1])
    assert '"object_type":"dcim.site"' in carried
    assert "your reply was the text of a netbox_get_objects call" in carried
    row = turn_row(sessions_dir, final["session"], 1)
    assert row["status"] == "done" and row["answer"] == ANSWER
    assert json.loads(row["tool_calls"])[0]["name"] == "netbox_get_objects"


@pytest.mark.parametrize(
    "description",
    [
        '{"filters": {"user_name": "admin"}, "limit": 100}',  # netbox_get_changelogs's
        '{"object_type": "dcim.site"}',  # netbox_get_objects's required arguments
        '{"name": "netbox_get_objects", "arguments": {"object_type": "dcim.site"}}',
    ],
    ids=["arguments-of-a-tool-that-requires-none", "required-arguments", "named-call"],
)
def test_netbox_text_the_model_quotes_is_the_answer_never_a_call(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, description: str
) -> None:
    """Issue 32, item 6 (s13): a device description quoted as the whole reply, as small
    models answer "what is the description?", ran as a call; the user never saw it."""
    netbox.data["dcim/devices"][0] = {**netbox.data["dcim/devices"][0], "description": description}
    by_id = ToolCall("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 1})
    ollama.script([by_id], [Text(description)], [Text("Not this.")])
    result = ask_json(chat_env, "What exactly is the description of device 1? Quote it.")
    assert result["answer"] == description
    assert [call["name"] for call in result["tool_calls"]] == ["netbox_get_object_by_id"]
    assert len(ollama.requests) == 2
    assert not [p for p in netbox.requests if p.startswith(("/api/core/", "/api/dcim/sites/"))]


def test_bare_arguments_of_a_tool_that_requires_none_are_an_answer(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Any JSON object of netbox_get_changelogs's keys would run it: bare arguments
    are read as a call only when they hold a tool's required ones."""
    text = '{"limit": 5}'
    ollama.script([Text(text)], [Text("Not this.")])
    result = ask_json(chat_env, "what is the JSON for a limit of five?")
    assert result["answer"] == text and result["tool_calls"] == []
    assert not [p for p in netbox.requests if p.startswith("/api/core/")]


def test_plain_ask_prints_only_the_answer_never_the_tool_json(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([tool_call_as_text("netbox_get_objects", SITES_CALL)], [Text(ANSWER)])
    assert ask(chat_env, "list the sites").stdout.strip() == ANSWER


def test_the_repl_never_shows_the_tool_json(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    from tests.drive.pty import PROMPT, leave, plain, spawn

    ollama.script(
        [tool_call_as_text("netbox_get_objects", SITES_CALL)],
        [Text("Three sites:"), Text(" DM-Akron, DM-Columbus, DM-Dayton.", chunk_delay=0.05)],
    )
    child = spawn(chat_env)
    child.logfile_read = seen = io.StringIO()  # everything the terminal was sent
    child.sendline("list the sites")
    child.expect("DM-Dayton")
    child.expect(PROMPT)
    leave(child)
    screen = plain(seen.getvalue())
    assert "netbox_get_objects" in screen  # the tool line
    assert '"arguments"' not in screen and '"name"' not in screen


def test_json_that_calls_no_tool_of_ours_is_an_answer(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    text = json.dumps({"name": "delete_everything", "arguments": {}})
    ollama.script([Text(text)])
    assert ask_json(chat_env, "what would you call?")["answer"] == text
    assert sites_asked(netbox) == 0 and len(ollama.requests) == 1


@pytest.mark.parametrize(
    "name",
    ["netbox_get_objects" + HARMONY_SUFFIX, "functions.netbox_get_objects"],
    ids=["channel-suffix", "functions-prefix"],
)
def test_a_tool_name_with_a_leaked_suffix_or_prefix_is_read_as_the_tool(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    sessions_dir: Path,
    name: str,
) -> None:
    ollama.script([ToolCall(name, SITES_CALL)], [Text(ANSWER)])
    result = ask_json(chat_env, "list the sites")
    assert result["answer"] == ANSWER
    assert [call["name"] for call in result["tool_calls"]] == ["netbox_get_objects"]
    assert sites_asked(netbox) == 1
    (carried,) = tool_results(ollama.requests[1])
    assert f"tool name {name!r} read as 'netbox_get_objects'" in carried
    assert not carried.startswith("Error")
    # What the model is shown of its own call is the tool it meant.
    sent_calls = [
        call["function"]["name"]
        for m in ollama.requests[1]["messages"]
        for call in m.get("tool_calls") or []
    ]
    assert sent_calls == ["netbox_get_objects"]
    row = turn_row(sessions_dir, result["session"], 1)
    assert json.loads(row["tool_calls"])[0]["name"] == "netbox_get_objects"


# --- item 2: the budget spent on thinking, an empty answer ---------------------------


def _first_turn(env: dict[str, str], ollama: ScriptedOllama) -> str:
    ollama.script([Text("Hello.")])
    return str(ask_json(env, "hello")["session"])


def test_a_reply_cut_at_its_length_limit_fails_the_turn_with_what_to_do(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    session = _first_turn(chat_env, ollama)
    ollama.script([Thinking("Let me summarize everything about every site. " * 40), CutOff()])
    result = ask(chat_env, "summarize everything", "--session", session, code=1)
    assert result.stdout == ""  # no answer, not even an empty one
    (line,) = [line for line in result.stderr.splitlines() if line]
    assert "turn 2 failed" in line and "output limit" in line
    assert "/think off" in line and "NETBOX_CHAT_NUM_PREDICT" in line
    row = turn_row(sessions_dir, session, 2)
    assert row["status"] == "failed" and row["answer"] is None
    assert "output limit" in row["error"] and row["rolled_back"] >= 1
    # Rolled back like any failure: the next request does not carry the turn.
    ollama.script([Text("Yes.")])
    ask_json(chat_env, "still there?", "--session", session)
    assert "summarize everything" not in json.dumps(ollama.requests[-1]["messages"])


def test_num_predict_is_sent_when_set(chat_env: dict[str, str], ollama: ScriptedOllama) -> None:
    ollama.script([Text("Hello.")])
    ask_json({**chat_env, "NETBOX_CHAT_NUM_PREDICT": "8192"}, "hello")
    assert ollama.requests[0]["options"]["num_predict"] == 8192


def test_an_empty_reply_after_tool_calls_fails_the_turn_and_keeps_nothing(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    # nemotron returned an empty answer after 9 tool calls (real-models.md).
    ollama.script(
        *(
            [ToolCall("netbox_get_objects", {"object_type": "dcim.site", "offset": n})]
            for n in range(3)
        ),
        [],
    )
    result = ask_json(chat_env, "list the sites", code=1)
    assert result["status"] == "failed" and result["answer"] == ""
    assert "ended its reply after 3 tool calls without an answer" in result["error"]
    assert "/think off" in result["error"]
    assert result["kept"] is False  # a new session with no answer is not kept
    assert not list(sessions_dir.glob("*.sqlite"))


def test_an_empty_reply_in_a_session_is_rolled_back_and_never_sent_again(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    session = _first_turn(chat_env, ollama)
    ollama.script([ToolCall("netbox_get_objects", SITES_CALL)], [])
    result = ask(chat_env, "list the sites", "--session", session, code=1)
    assert result.stdout == ""
    (line,) = [line for line in result.stderr.splitlines() if line]
    assert "turn 2 failed" in line and "without an answer" in line and "/think off" in line
    row = turn_row(sessions_dir, session, 2)
    assert row["status"] == "failed" and row["answer"] is None and row["rolled_back"] >= 1
    ollama.script([Text("Yes.")])
    ask_json(chat_env, "still there?", "--session", session)
    sent = [(m["role"], m["content"]) for m in ollama.requests[-1]["messages"][1:]]
    assert sent == [("user", "hello"), ("assistant", "Hello."), ("user", "still there?")]


# --- item 5: the same call twice in one turn ----------------------------------------


def test_an_identical_call_in_the_same_turn_is_answered_from_its_first_result(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, sessions_dir: Path
) -> None:
    # An identical ipam.prefix call was repeated in one recorded turn, about 40 s wasted
    # (real-models.md). The second spelling is the same call once read: a top-level filter.
    first = {"object_type": "dcim.site", "filters": {"status": "active"}}
    again = {"object_type": "dcim.site", "status": "active"}
    ollama.script(
        [ToolCall("netbox_get_objects", first)],
        [ToolCall("netbox_get_objects", again)],
        *repeated(ToolCall("netbox_get_objects", first), 1),
        [Text("Two active sites.")],
    )
    result = ask_json(chat_env, "which sites are active?")
    assert result["answer"] == "Two active sites."
    assert [call["name"] for call in result["tool_calls"]] == ["netbox_get_objects"] * 3
    assert sites_asked(netbox) == 1  # NetBox was asked once
    original, *again = tool_results(ollama.requests[3])
    for answer in again:
        assert answer.startswith(original)
        assert "the same call as" in answer and "NetBox was not asked again" in answer
    row = turn_row(sessions_dir, result["session"], 1)
    assert len(json.loads(row["tool_calls"])) == 3

    # Nothing is kept across turns: the next question asks NetBox again.
    ollama.script([ToolCall("netbox_get_objects", first)], [Text("Still two.")])
    ask_json(chat_env, "and now?", "--session", result["session"])
    assert sites_asked(netbox) == 2
    assert "NetBox was not asked again" not in tool_results(ollama.requests[-1])[-1]


def test_identical_calls_in_one_parallel_batch_ask_netbox_once(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    # Real models sent parallel batches of 2-4 calls (real-models.md); two identical ones.
    netbox.delays["dcim/sites"] = 0.3  # the first is still running when the second comes
    ollama.script(
        [ToolCall("netbox_get_objects", SITES_CALL), ToolCall("netbox_get_objects", SITES_CALL)],
        [Text("Three sites.")],
    )
    result = ask_json(chat_env, "sites?")
    assert len(result["tool_calls"]) == 2
    assert sites_asked(netbox) == 1
    first, second = tool_results(ollama.requests[1])
    assert second.startswith(first) and "NetBox was not asked again" in second


def test_a_call_with_other_arguments_is_asked_again(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site", "limit": 2})],
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site", "limit": 3})],
        [Text("Done.")],
    )
    ask_json(chat_env, "sites?")
    assert sites_asked(netbox) == 2


# --- item 6: names where NetBox wants slugs or ids ----------------------------------


def devices_asked(netbox: NetBoxDouble) -> list[str]:
    return [path for path in netbox.requests if path.startswith("/api/dcim/devices/")]


def one_call(
    env: dict[str, str], ollama: ScriptedOllama, call: ToolCall | dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """One turn that makes one call (a netbox_get_objects call, given its arguments);
    (result, the tool result the next request carried), once the ledger is seen to
    record the turn done and the call as the model sent it, failed if refused."""
    if not isinstance(call, ToolCall):
        call = ToolCall("netbox_get_objects", call)
    ollama.script([call], [Text("Done.")])
    result = ask_json(env, "question")
    (carried,) = tool_results(ollama.requests[-1])
    row = turn_row(Path(env["NETBOX_CHAT_SESSIONS"]), result["session"], 1)
    assert row["status"] == "done" and row["answer"] == "Done."
    (recorded,) = json.loads(row["tool_calls"])
    assert (recorded["name"], recorded["args"]) == (call.name, dict(call.args))
    assert recorded["error"] == carried.startswith("Error: ")
    return result, carried


@pytest.mark.parametrize(
    ("call", "sent_filter", "note"),
    [
        (
            TENANT_BY_DISPLAY_NAME,
            "tenant=dunder-mifflin",
            "tenant 'Dunder-Mifflin, Inc.' read as tenancy.tenant slug 'dunder-mifflin'",
        ),
        (RACK_BY_NAME, "rack_id=46", "rack_id 'DC1-R04' read as dcim.rack id 46"),
        (STATUS_IN_DISPLAY_CASE, "status=active", "status 'Active' read as 'active'"),
    ],
    ids=["display-name-as-slug", "name-as-id", "choice-in-the-wrong-case"],
)
def test_a_value_written_as_a_person_would_is_read_as_netbox_wants_it(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    call: ToolCall,
    sent_filter: str,
    note: str,
) -> None:
    """A display name where NetBox wants a slug, a name where it wants an id, a
    choice in the case it is shown in: each is sent as NetBox wants it, once,
    and the result's note tells the model how its value was read."""
    result, carried = one_call(chat_env, ollama, call)
    assert result["status"] == "done"
    (sent,) = devices_asked(netbox)
    assert sent_filter in sent
    assert note in json.loads(carried)["note"]


def test_a_name_of_several_objects_is_refused_listing_them(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "ipam.ipaddress", "filters": {"device_id": "core-sw"}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried.startswith("Error: 'device_id': 'core-sw' names 2 dcim.device objects")
    assert "id 5" in carried and "id 6" in carried and "Give the id" in carried
    assert not [p for p in netbox.requests if p.startswith("/api/ipam/")]


def test_a_name_no_object_has_is_refused_naming_the_closest(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "dcim.device", "filters": {"tenant": "Dunder Mifflin Paper"}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried.startswith("Error: 'tenant': no tenancy.tenant has the name or slug")
    assert "closest: 'Dunder-Mifflin, Inc.' (slug dunder-mifflin, id 1)" in carried
    assert devices_asked(netbox) == []


def test_a_slug_no_object_has_is_refused_naming_the_closest(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    # A slug-shaped value NetBox answers 400 for: looked up as a name after the 400 only
    args = {"object_type": "dcim.device", "filters": {"site": "dm-nowhere"}}
    result, carried = one_call(chat_env, ollama, args)
    assert result["status"] == "done"
    assert carried.startswith("Error: 'site': no dcim.site has the name or slug 'dm-nowhere' (")
    assert "(closest: 'DM-Akron' (slug dm-akron, id 1), 'DM-Dayton'" in carried
    assert carried.endswith("site takes a slug.")
    assert len(devices_asked(netbox)) == 1  # the refused request, not asked again
    assert sites_asked(netbox) == 2  # the name (q), then a page of sites to be near


def test_a_role_no_object_has_is_refused_naming_the_closest_roles(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Recorded (issue 32, item 7): role 'Core Switch' got only NetBox's 400 line.
    NetBox's schema gives the role filter no description; the device's role field
    says it is a device role."""
    args = {"object_type": "dcim.device", "filters": {"role": "Core Switch"}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried == (
        "Error: 'role': no dcim.devicerole has the name or slug 'Core Switch' (closest: "
        "'Access Switch' (slug access-switch, id 1)); role takes a slug."
    )
    assert devices_asked(netbox) == []
    _, carried = one_call(
        chat_env, ollama, {"object_type": "dcim.device", "filters": {"role": "ROUTER"}}
    )
    assert "role 'ROUTER' read as dcim.devicerole slug 'router'" in json.loads(carried)["note"]


def test_a_name_of_several_interfaces_names_each_ones_device(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Recorded: interface_id 'Vlan100' (five interfaces) listed as 'Vlan100' (id 9);
    'Vlan100' (id 3)..., which the model cannot tell apart."""
    args = {"object_type": "ipam.ipaddress", "filters": {"interface_id": "eth0"}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried == (
        "Error: 'interface_id': 'eth0' names 2 dcim.interface objects: 'eth0' (id 1, on "
        "device dmi01-akron-sw01); 'eth0' (id 4, on device dmi01-columbus-sw01). Give the id "
        "of the one you mean."
    )
    assert not [p for p in netbox.requests if p.startswith("/api/ipam/")]


def test_a_call_with_more_names_than_it_may_look_up_is_refused_before_any_lookup(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """200 tenant names in one call made 400 NetBox requests and a 34 kB refusal."""
    names = [f"Tenant Number {i}" for i in range(200)]
    _, carried = one_call(
        chat_env, ollama, {"object_type": "dcim.device", "filters": {"tenant": names}}
    )
    assert carried == (
        "Error: 200 filter values are names, not slugs (tenant='Tenant Number 0', "
        "tenant='Tenant Number 1', tenant='Tenant Number 2' and 197 more); one call looks up "
        "at most 5 names. Give the slugs (netbox_get_objects('tenancy.tenant', {'q': ...}) "
        "finds them) or ask with fewer names."
    )
    assert not [p for p in netbox.requests if p.startswith(("/api/tenancy/", "/api/dcim/"))]
    few = ["Dunder-Mifflin, Inc.", "Initech"]
    _, carried = one_call(
        chat_env, ollama, {"object_type": "dcim.device", "filters": {"tenant": few}}
    )
    assert json.loads(carried)["count"] == 3


def test_an_id_no_object_has_is_refused_without_reading_a_page(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "dcim.device", "filters": {"site_id": 99999}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried == (
        "Error: 'site_id': no dcim.site has the name, slug or id '99999' (none is close; "
        "look it up with netbox_get_objects('dcim.site', {'q': ...})); site_id takes an id."
    )
    assert sites_asked(netbox) == 1


def test_a_slug_shaped_name_netbox_refuses_is_read_as_that_objects_slug(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, sessions_dir: Path
) -> None:
    netbox.data["dcim/sites"].append({"id": 9, "name": "HQ", "slug": "dm-hq"})
    netbox.data["dcim/devices"].append(
        {"id": 9, "name": "hq-fw01", "site": {"id": 9, "slug": "dm-hq", "name": "HQ"}}
    )
    args = {"object_type": "dcim.device", "filters": {"site": ["dm-akron", "hq"]}}
    result, carried = one_call(chat_env, ollama, args)
    first, second = devices_asked(netbox)
    assert "site=dm-akron&site=hq&" in first and "site=dm-akron&site=dm-hq&" in second
    answer = json.loads(carried)
    assert answer["count"] == 4 and "site 'hq' read as dcim.site slug 'dm-hq'" in answer["note"]
    (call,) = json.loads(turn_row(sessions_dir, result["session"], 1)["tool_calls"])
    assert call["args"]["filters"] == {"site": ["dm-akron", "hq"]}  # as the model sent it


def test_netbox_400_comes_back_as_one_line_naming_the_filter(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "dcim.device", "filters": {"created__gte": "yesterday"}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried == (
        "Error: NetBox answered 400: 'created__gte' 'yesterday' refused by NetBox: "
        "Enter a valid date/time."
    )


def test_a_filter_named_like_another_apps_type_is_not_looked_up_there(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    # A device's role_id is a dcim.devicerole id (its role field says so); an IPAM role
    # of that name is no answer
    netbox.data["ipam/roles"] = [{"id": 7, "name": "Router", "slug": "router"}]
    args = {"object_type": "dcim.device", "filters": {"role_id": "Router"}}
    _, carried = one_call(chat_env, ollama, args)
    assert not [p for p in netbox.requests if p.startswith("/api/ipam/")]
    (sent,) = devices_asked(netbox)
    assert "role_id=2&" in sent
    assert "role_id 'Router' read as dcim.devicerole id 2" in json.loads(carried)["note"]


def test_a_generic_relation_is_read_as_the_filter_that_works(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    _, carried = one_call(chat_env, ollama, GFK_LIST)
    (sent,) = [p for p in netbox.requests if p.startswith("/api/ipam/ip-addresses/")]
    assert "?interface_id=66&interface_id=67&fields=" in sent  # nothing else filters
    result = json.loads(carried)
    assert result["count"] == 2
    assert "read as interface_id" in result["note"]

    args = {"object_type": "ipam.ipaddress", "filters": {"assigned_object_id": [66]}}
    _, carried = one_call(chat_env, ollama, args)
    assert carried.startswith("Error: 'assigned_object_id' with no assigned_object_type")
    assert "use interface_id" in carried and "device_id" in carried


# --- item 7: a confident "not found" ------------------------------------------------


def test_a_search_that_finds_nothing_says_which_types_hold_the_name(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    _, carried = one_call(chat_env, ollama, TENANT_AS_PROVIDER)
    result = json.loads(carried)
    assert result["results"] == {} and result["no_matches"] == ["circuits.provider"]
    assert result["found_elsewhere"] == {
        "tenancy.tenant": {"count": 1, "names": ["Dunder-Mifflin, Inc."]}
    }
    assert "but tenancy.tenant (1) do" in result["note"]


def test_a_name_filter_that_finds_nothing_says_which_types_hold_the_name(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "circuits.provider", "filters": {"name": "Initech"}}
    _, carried = one_call(chat_env, ollama, args)
    result = json.loads(carried)
    assert result["count"] == 0
    assert result["found_elsewhere"]["tenancy.tenant"]["names"] == ["Initech"]


def test_a_name_that_is_found_asks_nothing_more(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    args = {"object_type": "tenancy.tenant", "filters": {"name": "Initech"}}
    _, carried = one_call(chat_env, ollama, args)
    assert json.loads(carried)["count"] == 1 and "found_elsewhere" not in carried
    assert [p for p in netbox.requests if "q=" in p] == []


# --- item 8: refusals that lead to the working filter --------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "first"),
    [
        ("netbox_get_objects", {"object_type": "dcim.interface", "filters": {"role": "core"}},
         "device_role"),
        ("netbox_get_objects", {"object_type": "tenancy.tenant",
                                "filters": {"tenant_name": "Initech"}}, "name"),
        ("netbox_get_objects", {"object_type": "ipam.ipaddress",
                                "filters": {"prefix": "10.0.0.0/24"}}, "parent"),
        ("netbox_get_changelogs", {"filters": {"created__gte": "2026-01-01"}}, "time_after"),
    ],
    ids=["role-on-interfaces", "tenant_name-on-tenants", "prefix-on-ip-addresses",
         "created__gte-on-the-change-log"],
)  # fmt: skip
def test_a_refusal_names_the_filter_with_that_meaning_first(
    chat_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    tool: str,
    args: dict[str, Any],
    first: str,
) -> None:
    # Of 127 filters a real NetBox ignores, these 4 were refused without naming the
    # filter that does the job (issue 24, item 8).
    ollama.script([ToolCall(tool, args)], [Text("Done.")])
    ask_json(chat_env, "question")
    (carried,) = tool_results(ollama.requests[-1])
    assert carried.startswith("Error: ")
    closest = carried.split("Closest: ", 1)[1]
    assert closest.startswith(first + " ") or closest.startswith(first + ".")
    assert [p for p in netbox.requests if p != "/api/status/"] == []  # nothing was sent
