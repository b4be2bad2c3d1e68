"""Every fix names where the value came from (issue 40, item 3): the flag, the
variable, or the key and its profile in the config file, in the chat, `ask`,
`eval` and `doctor` alike (config.source_of), and the first run names the
config file the quick start recommends. Through the real CLI against the
NetBox double and the scripted Ollama, with a real config file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.runner import doctor, invoke, line

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})
WRONG = "nbt_otherkey0001.notthesecret000000000000000000"


def lab_profile(env: dict[str, str], **keys: str) -> tuple[dict[str, str], str]:
    """A config file under ~/.config whose profile lab holds `keys`, and the
    environment that uses it (NETBOX_URL and NETBOX_TOKEN unset); the file
    as the fixes name it."""
    home = Path(env["XDG_CONFIG_HOME"]).parent
    path = home / ".config" / "netbox-chat" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[profiles.lab]\n" + "".join(f'{k} = "{v}"\n' for k, v in keys.items()))
    path.chmod(0o600)
    env = {k: v for k, v in env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return env, "~/.config/netbox-chat/config.toml"


def test_ask_names_the_profiles_token_env_when_netbox_refuses_the_token(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """The chat's token error said "The token is wrong" while doctor named
    NETBOX_TOKEN_LAB: `ask` names it too."""
    env, shown = lab_profile(chat_env, netbox_url=netbox.url, token_env="NETBOX_TOKEN_LAB")
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(
        ["ask", "how many sites?", "--profile", "lab"], env={**env, "NETBOX_TOKEN_LAB": WRONG}
    )
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines()[-1] == (
        "netbox-chat: answered without NetBox: NetBox refused the request (403: Invalid v2 "
        'token). The token from NETBOX_TOKEN_LAB (token_env = "NETBOX_TOKEN_LAB" in profile '
        f"lab of {shown}) is wrong, expired or disabled."
    )
    assert "notthesecret" not in result.output


def test_ask_and_doctor_name_the_profiles_netbox_url_when_netbox_is_down(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """ "is NETBOX_URL right?" when the URL came from a profile."""
    env, shown = lab_profile(chat_env, netbox_url=closed_port(), token_env="NETBOX_TOKEN_LAB")
    env.update(NETBOX_TOKEN_LAB=TEST_TOKEN, NETBOX_TIMEOUT="1")
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(["ask", "how many sites?", "--profile", "lab"], env=env)
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines()[-1].endswith(
        f"Is it running, and is netbox_url in profile lab of {shown} right?"
    )
    checked = invoke(["doctor", "--profile", "lab"], env=env)
    assert checked.exit_code == 1
    assert line(checked.stdout.splitlines(), "NetBox").endswith(
        f"→ check netbox_url in profile lab of {shown} and that NetBox is running"
    )


def test_a_flag_is_named_as_the_flag(chat_env: dict[str, str], ollama: ScriptedOllama) -> None:
    env = {**chat_env, "NETBOX_TIMEOUT": "1"}
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(["ask", "how many sites?", "--netbox-url", closed_port()], env=env)
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines()[-1].endswith("Is it running, and is --netbox-url right?")


def test_ask_names_the_profiles_ollama_url_when_ollama_is_down(
    chat_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    """ "OLLAMA_HOST right?" when the server came from a profile."""
    env, shown = lab_profile(
        chat_env, netbox_url=netbox.url, token_env="NETBOX_TOKEN_LAB", ollama_url=closed_port()
    )
    env = {k: v for k, v in env.items() if k != "OLLAMA_HOST"}
    result = invoke(["ask", "hi", "--profile", "lab"], env={**env, "NETBOX_TOKEN_LAB": TEST_TOKEN})
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "netbox-chat: turn 1 failed: cannot reach Ollama (All connection attempts failed): is "
        f"`ollama serve` running and ollama_url in profile lab of {shown} right?; nothing was kept"
    ]


def test_eval_names_the_profiles_token_env_when_netbox_refuses_the_token(
    chat_env: dict[str, str], netbox: NetBoxDouble, tmp_path: Path
) -> None:
    env, shown = lab_profile(chat_env, netbox_url=netbox.url, token_env="NETBOX_TOKEN_LAB")
    env.update(NETBOX_TOKEN_LAB=WRONG, NETBOX_CHAT_EVAL_RUNS=str(tmp_path / "runs"))
    result = invoke(["eval", "--list", "--profile", "lab"], env=env)
    assert result.exit_code == 1, result.output
    assert (
        f'check the token from NETBOX_TOKEN_LAB (token_env = "NETBOX_TOKEN_LAB" in profile lab '
        f"of {shown})" in " ".join(result.stderr.split())
    )
    assert "notthesecret" not in result.output


@pytest.mark.parametrize("command", [["ask", "how many sites?"], ["eval", "--list"]])
def test_the_first_run_names_the_config_file_of_the_quick_start(
    chat_env: dict[str, str], ollama: ScriptedOllama, command: list[str]
) -> None:
    """ "set NETBOX_URL and NETBOX_TOKEN" only, while the quick start says to
    write a profile in ~/.config/netbox-chat/config.toml."""
    home = Path(chat_env["XDG_CONFIG_HOME"]).parent
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    result = invoke(command, env=env)
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert (
        "NetBox is not configured: put netbox_url and token_env in a profile of "
        "~/.config/netbox-chat/config.toml (the README's quick start), or set NETBOX_URL and "
        "NETBOX_TOKEN (or pass --netbox-url)" in said
    ), said
    assert ollama.requests == []
    _, lines = doctor(env)
    assert "~/.config/netbox-chat/config.toml (the README's quick start)" in line(lines, "NetBox")


def test_ask_json_carries_the_same_named_fix(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    env, shown = lab_profile(chat_env, netbox_url=netbox.url, token_env="NETBOX_TOKEN_LAB")
    ollama.script([SITES], [Text("I could not read NetBox.")])
    result = invoke(
        ["ask", "sites?", "-p", "lab", "--json"], env={**env, "NETBOX_TOKEN_LAB": WRONG}
    )
    assert result.exit_code == 5
    assert f"in profile lab of {shown}) is wrong" in json.loads(result.stdout)["netbox_error"]
