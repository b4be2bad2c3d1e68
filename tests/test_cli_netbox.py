"""What `ask` says when NetBox could not help: an answer made while NetBox was
unreachable or refused the token is recorded as the turn it was, but a red
line on stderr, a `netbox_error` field and exit status 5 say it was made
without NetBox; a token the configuration names but that is not set is
refused before anything is asked, naming the variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TEST_TOKEN
from tests.doubles.inspect_session import turn_rows
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port_number as closed_port
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.runner import invoke

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})


def test_an_answer_while_netbox_is_down_says_so_and_exits_5(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    down = {**chat_env, "NETBOX_URL": f"http://127.0.0.1:{closed_port()}", "NETBOX_TIMEOUT": "1"}
    ollama.script([SITES], [Text("There are three sites.")])
    result = invoke(["ask", "how many sites?"], env=down)
    assert result.exit_code == 5, result.output
    assert result.stdout.strip() == "There are three sites."
    (line,) = result.stderr.splitlines()
    assert line.startswith("netbox-chat: answered without NetBox: Cannot reach NetBox at http")
    (path,) = sessions_dir.glob("*.sqlite")
    assert turn_rows(path) == [(1, "done")]  # recorded as it happened

    ollama.script([SITES], [Text("Still three.")])
    as_json = invoke(["ask", "and now?", "--json"], env=down)
    assert as_json.exit_code == 5
    result_json = json.loads(as_json.stdout)
    assert result_json["status"] == "done" and result_json["error"] is None
    assert result_json["netbox_error"].startswith("Cannot reach NetBox at")

    doctor = invoke(["doctor"], env=down)
    assert doctor.exit_code == 1
    lines = doctor.stdout.splitlines()
    assert "- token: skipped (NetBox unreachable)" in lines
    assert "- NetBox version: skipped (NetBox unreachable)" in lines
    usage = invoke(["export", "zzzz", "--format", "html"], env=down)
    assert usage.exit_code == 2 and "unknown format 'html'" in usage.stderr


def test_a_netbox_that_does_not_answer_in_time_is_an_outage_and_exits_5(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """A time-out was "answered" with exit 0 and `netbox_error: null`: an answer made
    without NetBox's data must say so like any other outage."""
    netbox.delays["dcim/sites"] = 5.0
    slow = {**chat_env, "NETBOX_TIMEOUT": "1"}
    ollama.script([SITES], [Text("I could not read the sites.")])
    result = invoke(["ask", "how many sites?"], env=slow)
    assert result.exit_code == 5, result.output
    assert result.stdout.strip() == "I could not read the sites."
    assert result.stderr.splitlines() == [
        "netbox-chat: answered without NetBox: NetBox did not answer within 1s "
        "(/api/dcim/sites/). Try a smaller request or try again later."
    ]
    ollama.script([SITES], [Text("Still could not.")])
    as_json = invoke(["ask", "and now?", "--json"], env=slow)
    assert as_json.exit_code == 5
    out = json.loads(as_json.stdout)
    assert out["status"] == "done" and out["error"] is None
    assert out["netbox_error"].startswith("NetBox did not answer within 1s")


def told_the_model(ollama: ScriptedOllama) -> list[str]:
    """The tool results the model was given, in the order it got them."""
    return [
        str(message.get("content"))
        for message in ollama.requests[-1]["messages"]
        if message.get("role") == "tool"
    ]


def test_a_netbox_reply_past_the_byte_limit_is_cut_off_and_the_turn_goes_on(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """A reply that never ends grew `ask` to 1.5 GB (n03): it is read only
    to NETBOX_MAX_BYTES, the model is told in one line, and answers."""
    netbox.endless["dcim/sites"] = 0.0
    ollama.script([SITES], [Text("NetBox's answer was too big to read.")])
    result = invoke(["ask", "how many sites?"], env={**chat_env, "NETBOX_MAX_BYTES": "1000000"})
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "NetBox's answer was too big to read."
    (said,) = told_the_model(ollama)
    assert "NetBox's reply to /api/dcim/sites/ is over 1,000,000 bytes (NETBOX_MAX_BYTES)" in said


def test_a_netbox_reply_that_trickles_for_ever_meets_the_whole_reply_deadline(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Each piece comes within NETBOX_TIMEOUT, so only a deadline for the
    whole reply ends it: 4 x NETBOX_TIMEOUT, said as an outage (exit 5)."""
    netbox.endless["dcim/sites"] = 0.2
    ollama.script([SITES], [Text("I could not read the sites.")])
    result = invoke(["ask", "how many sites?"], env={**chat_env, "NETBOX_TIMEOUT": "0.5"})
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines() == [
        "netbox-chat: answered without NetBox: NetBox's reply to /api/dcim/sites/ took over "
        "2s in all (4 x NETBOX_TIMEOUT), so it was cut off. Try a smaller request or try "
        "again later."
    ]
    (said,) = told_the_model(ollama)
    assert "took over 2s in all" in said


def test_a_refused_token_is_worded_by_its_cause_and_exits_5(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    wrong = {**chat_env, "NETBOX_TOKEN": "nbt_otherkey0001.notthesecret000000000000000000"}
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(["ask", "how many sites?", "--json"], env=wrong)
    assert result.exit_code == 5, result.output
    error = json.loads(result.stdout)["netbox_error"]
    assert error == (
        "NetBox refused the request (403: Invalid v2 token). "
        "The token from NETBOX_TOKEN is wrong, expired or disabled."
    )
    assert "notthesecret" not in result.output


@pytest.mark.parametrize("copied", ["Bearer ", "bearer  ", "Token "])
def test_a_token_copied_with_its_scheme_word_is_sent_as_the_token(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, copied: str
) -> None:
    """NetBox >= 4.5's token page shows ``Bearer nbt_...``; pasted whole into
    NETBOX_TOKEN it was sent as ``Token Bearer nbt_...`` and refused (403)."""
    env = {**chat_env, "NETBOX_TOKEN": copied + TEST_TOKEN}
    ollama.script([SITES], [Text("There are three sites.")])
    result = invoke(["ask", "how many sites?", "--json"], env=env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["netbox_error"] is None
    assert out["tool_calls"][0]["error"] is False
    assert any(path.startswith("/api/dcim/sites/") for path in netbox.requests)
    assert TEST_TOKEN.split(".")[1] not in result.output


def test_a_profile_token_env_that_is_not_set_is_refused_before_asking(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, tmp_path: Path
) -> None:
    config = tmp_path / "config" / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[profiles.lab]\nnetbox_url = "{netbox.url}"\ntoken_env = "LAB_TOKEN"\n')
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    result = invoke(["ask", "how many sites?", "--profile", "lab"], env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f'netbox-chat: no NetBox token: LAB_TOKEN (token_env = "LAB_TOKEN" in profile lab of '
        f"{config}) is not set; `netbox-chat config` shows where settings come from"
    ]
    assert ollama.requests == [] and netbox.requests == []

    doctor = invoke(["doctor", "--profile", "lab"], env=env)
    (token,) = [line for line in doctor.stdout.splitlines() if line.startswith("✗ token")]
    assert "Authentication credentials were not provided." in token
    assert token.endswith(
        f'→ set LAB_TOKEN (token_env = "LAB_TOKEN" in profile lab of {config}) to an API '
        "token (NetBox → your profile → API tokens)"
    )


def test_the_repl_refuses_a_profile_token_env_that_is_not_set_before_any_prompt(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, tmp_path: Path
) -> None:
    """The chat checks the token as `ask` does: one line naming the variable
    the profile names, exit 1, no prompt, no session, nothing sent."""
    from tests.drive.pty import run_in_pty

    config = tmp_path / "config" / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[profiles.lab]\nnetbox_url = "{netbox.url}"\ntoken_env = "LAB_TOKEN"\n')
    config.chmod(0o600)
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    status, screen = run_in_pty(env, "--profile", "lab")
    assert status == 1
    said = "".join(screen.split())  # wrapped to the terminal, a long path inside a word
    assert said.startswith(
        "".join(
            f'netbox-chat: no NetBox token: LAB_TOKEN (token_env = "LAB_TOKEN" in profile lab of '
            f"{config}) is not set;".split()
        )
    )
    assert ollama.requests == [] and netbox.requests == []
    assert not Path(env["NETBOX_CHAT_SESSIONS"]).exists() or not any(
        Path(env["NETBOX_CHAT_SESSIONS"]).glob("*.sqlite")
    )


def test_no_token_at_all_is_said_first_and_the_403_says_none_was_sent(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    env = {k: v for k, v in chat_env.items() if k != "NETBOX_TOKEN"}
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(["ask", "how many sites?"], env=env)
    assert result.exit_code == 5, result.output
    first, last = result.stderr.splitlines()
    assert first == (
        "netbox-chat: no NetBox token: NETBOX_TOKEN is not set and no profile names a token: "
        "only a NetBox that lets anyone read will answer"
    )
    assert last == (
        "netbox-chat: answered without NetBox: NetBox refused the request (403: Authentication "
        "credentials were not provided.). No token was sent: set NETBOX_TOKEN (or a profile's "
        "token_env or token_command)."
    )


def test_the_repl_says_after_the_turn_that_netbox_could_not_be_reached(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    from tests.drive.pty import leave, plain, spawn

    down = {**chat_env, "NETBOX_URL": f"http://127.0.0.1:{closed_port()}", "NETBOX_TIMEOUT": "1"}
    ollama.script([SITES], [Text("There are three sites.")])
    child = spawn(down)
    child.sendline("how many sites?")
    child.expect(r"answered without NetBox: Cannot reach NetBox at http://127\.0\.0\.1:\d+")
    before = plain(child.before or "")
    assert "turn 1 · tokens" in before
    # NetBox's reply was an error: the count the model gave is not in it.
    assert "There are three sites\u2020." in before
    assert "\u2020 1 not in NetBox's replies: three sites" in before
    leave(child)


def test_the_repl_says_in_red_that_netbox_did_not_answer_in_time(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    from tests.drive.pty import leave, spawn

    netbox.delays["dcim/sites"] = 5.0
    ollama.script([SITES], [Text("I could not read the sites.")])
    child = spawn({**chat_env, "NETBOX_TIMEOUT": "1"})
    child.sendline("how many sites?")
    child.expect(r"answered without NetBox: NetBox did not answer within 1s")
    assert (child.before or "").endswith("\x1b[1;31m")  # bold red, like every outage
    leave(child)
