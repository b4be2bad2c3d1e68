"""The chat checks NetBox and the token as it starts (issue 40, item 2), in
the background as it checks the model server: a NetBox that is down or
refuses the token is said in one line above the prompt, with the fix for
where the URL or the token came from, before the first answer, and neither
the prompt nor the keys wait for the check. Through the real CLI on a pty,
against the NetBox double and the scripted Ollama, with a real config file."""

from __future__ import annotations

import time
from pathlib import Path

import pexpect

from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.drive.pty import PROMPT
from tests.drive.screen import Terminal, chat, until_shown

WRONG = "nbt_otherkey0001.notthesecret000000000000000000"
DOCTOR = "· `netbox-chat doctor` checks the setup"


def lab_profile(env: dict[str, str], **keys: str) -> dict[str, str]:
    """The environment of a user whose profile lab (the default) holds
    `keys`, in ~/.config/netbox-chat/config.toml; NETBOX_URL and
    NETBOX_TOKEN unset."""
    home = Path(env["XDG_CONFIG_HOME"]).parent
    path = home / ".config" / "netbox-chat" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        'default_profile = "lab"\n[profiles.lab]\n'
        + "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    )
    path.chmod(0o600)
    env = {k: v for k, v in env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return env


def said(terminal: Terminal) -> str:
    """The screen as one text, the lines a long one wrapped into joined again."""
    return "".join(
        line.rstrip() + (" " if len(line.rstrip()) < 140 else "") for line in terminal.lines()
    )


def leave(child: pexpect.spawn) -> None:
    time.sleep(0.3)
    child.sendcontrol("u")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()


def test_a_refused_token_is_said_at_start_naming_the_profiles_token_env(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Nothing typed: the line comes above the prompt, naming the variable
    the profile's token_env names, in the file where it is."""
    env = lab_profile(chat_env, netbox_url=netbox.url, token_env="NETBOX_TOKEN_LAB")
    child, terminal = chat({**env, "NETBOX_TOKEN_LAB": WRONG}, columns=140)
    until_shown(child, terminal, "checks the setup")
    assert (
        "NetBox refused the request (403: Invalid v2 token). The token from NETBOX_TOKEN_LAB "
        '(token_env = "NETBOX_TOKEN_LAB" in profile lab of ~/.config/netbox-chat/config.toml) '
        f"is wrong, expired or disabled. {DOCTOR}"
    ) in said(terminal)
    assert "notthesecret" not in said(terminal)
    assert netbox.requests == ["/api/status/"] and ollama.requests == []  # nothing asked
    leave(child)


def test_a_netbox_that_is_down_is_said_at_start_naming_the_profiles_netbox_url(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    env = lab_profile(chat_env, netbox_url=closed_port(), token_env="NETBOX_TOKEN_LAB")
    child, terminal = chat({**env, "NETBOX_TOKEN_LAB": TEST_TOKEN}, columns=140)
    until_shown(child, terminal, "checks the setup")
    assert (
        "(connection refused after 1 attempt). Is it running, and is netbox_url in profile lab "
        f"of ~/.config/netbox-chat/config.toml right? {DOCTOR}"
    ) in said(terminal)
    assert "Cannot reach NetBox at http://127.0.0.1:" in said(terminal)
    leave(child)


def test_the_line_comes_before_the_first_answer_and_the_keys_never_wait(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """A NetBox slow to answer the check: what is typed meanwhile shows at
    once, and a question asked at once is answered only after the line."""
    netbox.delays["status"] = 30.0  # longer than NETBOX_TIMEOUT: the check times out
    ollama.script([Text("Three sites, I believe.")])
    child, terminal = chat({**chat_env, "NETBOX_TIMEOUT": "3"}, columns=140)
    started = time.monotonic()
    child.send("how many sites?")
    until_shown(child, terminal, "how many sites?", timeout=5)
    typed_in = time.monotonic() - started
    assert typed_in < 2, typed_in  # not held by the check (under load, still well below 3 s)
    child.send("\r")
    until_shown(child, terminal, "Three sites, I believe.")
    screen = said(terminal)
    line = (
        "NetBox did not answer within 3s (/api/status/). Try a smaller request or try again later."
    )
    assert line in screen
    assert screen.index(line) < screen.index("Three sites, I believe.")
    leave(child)


def test_a_netbox_that_answers_is_not_mentioned(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    ollama.script([Text("Three sites.")])
    child, terminal = chat(chat_env, columns=140)
    deadline = time.monotonic() + 10
    while netbox.requests != ["/api/status/"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert netbox.requests == ["/api/status/"]  # the check, with the token (the double's 200)
    child.sendline("hi")
    child.expect_exact("Three sites.")
    child.expect(PROMPT)
    assert "checks the setup" not in said(terminal)
    leave(child)
