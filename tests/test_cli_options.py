"""The chat's options are declared once (netbox_chat/cli/options.py) and
every command that takes one shows it, and reads it, the same way."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import typer

from netbox_chat.cli.app import app
from netbox_chat.cli.options import CHAT, OPTIONS, option_words
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.drive.runner import invoke

TYPERS_OWN = {"install_completion", "show_completion"}
"""The options Typer gives the app after every other."""


def commands() -> dict[str, Any]:
    """Each command's click command as Typer builds it ("" is the bare
    `netbox-chat`, the chat)."""
    group = typer.main.get_command(app)
    return {"": group, **group.commands}  # type: ignore[attr-defined]


def declared(name: str) -> tuple[list[str], list[str], str, str | None]:
    """A chat option's flags, negative flags, help and variable, as declared."""
    meta = OPTIONS[name].metadata
    flags = [declaration.partition("/") for declaration in meta["flags"]]
    primary = [flag for flag, _, _ in flags]
    return primary, [negative for _, _, negative in flags if negative], meta["help"], meta["envvar"]


def test_every_command_shows_a_chat_option_as_its_one_declaration() -> None:
    """Each chat option a command takes has the declared flags, help and
    variable, after the command's own options and in the declaration's
    order (so each --help lists them alike); no command writes one of those
    flags itself, but `eval`'s --model, which takes several models; and the
    chat, `resume` and `ask` take the same ones."""
    chat_words = {word for _, word, _ in option_words()}
    taken: dict[str, list[str]] = {}
    for command_name, command in commands().items():
        names = [param.name for param in command.params if param.name in OPTIONS]
        taken[command_name] = names
        for param in command.params:
            if param.name in OPTIONS:
                shown = (param.opts, param.secondary_opts, param.help, param.envvar)
                assert shown == declared(param.name), (command_name, param.name)
            elif command_name != "eval" or param.name != "models":
                assert not chat_words & {*param.opts, *param.secondary_opts}, param.name
        assert names == [name for name in OPTIONS if name in names], command_name
        first = [param.name for param in command.params].index(names[0])
        after = {param.name for param in command.params[first:]} - set(names)
        assert after <= TYPERS_OWN, command_name
    assert taken[""] == taken["resume"] == [name for name in OPTIONS if name in CHAT]
    assert taken["ask"] == [*taken[""], "deadline"]
    assert {name for names in taken.values() for name in names} == set(OPTIONS)


def test_no_command_declares_a_chat_option_in_its_own_signature() -> None:
    """Each command's own function takes the options as one `chat` argument:
    their Typer parameters come from the one declaration, never from it."""
    for info in [app.registered_callback, *app.registered_commands]:
        assert info is not None and info.callback is not None
        own = inspect.signature(inspect.unwrap(info.callback)).parameters
        assert "chat" in own and not set(own) & set(OPTIONS), info.callback.__name__


def test_a_typed_chat_option_means_the_same_to_every_command(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """`--sessions-dir` and `--model` typed on `ask`, `ls`, `export` and
    `config` do what they say on each; the same values from the environment
    are named as the environment's."""
    elsewhere = tmp_path / "elsewhere"
    ollama.script([Text("two sites.")])
    typed = ["--sessions-dir", str(elsewhere), "--model", "qwen2.5:7b"]
    asked = invoke(["ask", "how many sites?", "--json", *typed], env=chat_env)
    assert asked.exit_code == 0, asked.output
    session = json.loads(asked.stdout)["session"]
    assert ollama.requests[-1]["model"] == "qwen2.5:7b"

    listed = invoke(["ls", "--json", "--sessions-dir", str(elsewhere)], env=chat_env)
    assert [(s["id"], s["model"]) for s in json.loads(listed.stdout)] == [(session, "qwen2.5:7b")]
    assert json.loads(invoke(["ls", "--json"], env=chat_env).stdout) == []  # the env's folder
    exported = invoke(["export", session, "--sessions-dir", str(elsewhere)], env=chat_env)
    assert exported.exit_code == 0 and "how many sites?" in exported.stdout

    def origins(env: dict[str, str], *args: str) -> dict[str, list[str]]:
        result = invoke(["config", *args], env=env)
        assert result.exit_code == 0, result.output
        return {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()}

    shown = origins(chat_env, *typed)
    assert shown["model"] == ["qwen2.5:7b", "flag", "--model"]
    assert shown["sessions_dir"] == [str(elsewhere), "flag", "--sessions-dir"]
    from_env = origins({**chat_env, "NETBOX_CHAT_SESSIONS": str(elsewhere)})
    assert from_env["model"] == ["qwen3:8b", "env", "NETBOX_CHAT_MODEL"]
    assert from_env["sessions_dir"] == [str(elsewhere), "env", "NETBOX_CHAT_SESSIONS"]


def test_help_shows_the_value_in_force_and_where_it_came_from(tmp_path: Path) -> None:
    """`--ollama-url`'s help said `default http://127.0.0.1:11434` while the
    config file set another server: every command's --help shows the value
    in force and its source, as the command would resolve it."""
    config = tmp_path / "config" / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[profiles.lab]\nollama_url = "http://10.0.0.5:11434"\nmodel = "qwen3:14b"\n')
    config.chmod(0o600)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "COLUMNS": "300", "HOME": str(tmp_path)}
    none = {"OLLAMA_HOST": "", "NETBOX_CHAT_MODEL": "", "NETBOX_CHAT_PROFILE": ""}

    def help_line(args: list[str], flag: str, **more: str) -> str:
        shown = invoke([*args, "--help"], env={**env, **none, **more})
        assert shown.exit_code == 0, shown.output
        (found,) = [row for row in shown.stdout.splitlines() if f" {flag} " in row]
        return " ".join(found.strip("│ ").split())

    for args in (["ask"], ["doctor"], [], ["resume"], ["config"]):
        from_profile = help_line([*args, "--profile", "lab"], "--ollama-url")
        assert "(now http://10.0.0.5:11434, from ollama_url in profile lab of " in from_profile
        assert "~/config/netbox-chat/config.toml)." in from_profile
        assert "127.0.0.1" not in from_profile
    chosen_by_env = help_line(["ask"], "--model", NETBOX_CHAT_PROFILE="lab")
    assert "(now qwen3:14b, from model in profile lab of ~/config/" in chosen_by_env
    assert "(default http://127.0.0.1:11434)" in help_line(["ask"], "--ollama-url")
    assert "(now http://h:1, from OLLAMA_HOST)" in help_line(
        ["ask", "-p", "lab"], "--ollama-url", OLLAMA_HOST="h:1"
    )
    assert "(default 1800)" in help_line(["doctor"], "--deadline")
