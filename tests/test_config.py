"""The config file (issue 15, item 1): profiles, the precedence flag > env >
profile > file defaults > built-in, token_env and token_command, the
`netbox-chat config` listing with origins, one-line errors with line numbers,
and ssh's rule for files others can read or write.

Precedence is checked on `resolve_settings` with an explicit environment and a
real file in a temporary XDG_CONFIG_HOME, and through the real CLI where the
user sees it (`config`, `ask` against two NetBox doubles)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from netbox_chat.config import ConfigError, resolve_settings
from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.process import cli
from tests.drive.runner import invoke

ROOT = Path(__file__).parent.parent
SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})


def write_config(home: Path, text: str, mode: int = 0o600) -> Path:
    path = home / "netbox-chat" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    path.chmod(mode)
    return path


LAYERED = """\
    model = "file-model"
    num_ctx = 4096
    request_timeout = 30
    default_profile = "lab"

    [profiles.lab]
    netbox_url = "http://lab.example:8000/"
    model = "profile-model"
    num_ctx = 8192
    token_env = "NETBOX_TOKEN_LAB"

    [profiles.prod]
    netbox_url = "https://netbox.example.com"
    token_command = "printf 'prod-token'"
    """


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "config"


def test_each_layer_wins_over_the_ones_below_it(home: Path) -> None:
    write_config(home, LAYERED)
    env = {"XDG_CONFIG_HOME": str(home), "NETBOX_CHAT_MODEL": "env-model"}
    flagged = resolve_settings(env=env, model="flag-model")
    assert flagged.model == "flag-model" and flagged.origins["model"] == "flag --model"
    from_env = resolve_settings(env=env)
    assert from_env.model == "env-model" and from_env.origins["model"] == "env NETBOX_CHAT_MODEL"
    plain = resolve_settings(env={"XDG_CONFIG_HOME": str(home)})
    assert (plain.model, plain.origins["model"]) == ("profile-model", "profile lab")
    assert (plain.num_ctx, plain.origins["num_ctx"]) == (8192, "profile lab")
    assert (plain.request_timeout, plain.origins["request_timeout"]) == (30.0, "file")
    assert (plain.netbox_timeout, plain.origins["netbox_timeout"]) == (15.0, "default")
    assert plain.netbox_url == "http://lab.example:8000"  # trailing slash dropped
    no_file = resolve_settings(env={})
    assert (no_file.model, no_file.origins["model"]) == ("qwen3:8b", "default")
    assert no_file.config_file is None


def test_the_profile_comes_from_the_flag_then_the_environment_then_default_profile(
    home: Path,
) -> None:
    write_config(home, LAYERED)
    env = {"XDG_CONFIG_HOME": str(home)}
    assert resolve_settings(env=env).profile == "lab"
    assert resolve_settings(env={**env, "NETBOX_CHAT_PROFILE": "prod"}).profile == "prod"
    chosen = resolve_settings(env={**env, "NETBOX_CHAT_PROFILE": "prod"}, profile="lab")
    assert chosen.profile == "lab" and chosen.origins["profile"] == "--profile"
    with pytest.raises(ConfigError, match=r"no profile 'stage' \(from --profile\).*lab, prod"):
        resolve_settings(env=env, profile="stage")


def test_a_profile_asked_for_but_overridden_by_the_environment_says_so(home: Path) -> None:
    write_config(home, LAYERED)
    env = {
        "XDG_CONFIG_HOME": str(home),
        "NETBOX_URL": "http://lab.example:8000",
        "NETBOX_TOKEN": "lab-token",
    }
    asked = resolve_settings(env=env, profile="prod")
    assert asked.netbox_url == "http://lab.example:8000"  # env > profile, as documented
    assert asked.warnings == (
        "warning: profile prod: NETBOX_URL overrides its netbox_url; "
        "NETBOX_TOKEN overrides its token_command",
    )
    assert resolve_settings(env=env).warnings == ()  # default_profile: nothing was asked


def test_the_token_comes_from_netbox_token_then_the_profile_then_the_file(home: Path) -> None:
    write_config(home, 'token_env = "TOP_TOKEN"\n' + LAYERED)
    env = {"XDG_CONFIG_HOME": str(home), "NETBOX_TOKEN_LAB": "lab-token", "TOP_TOKEN": "top"}
    assert resolve_settings(env=env).netbox_token == "lab-token"
    with_env = {**env, "NETBOX_TOKEN": "env-token", "NETBOX_URL": "http://env.example"}
    assert resolve_settings(env=with_env).netbox_token == "env-token"
    write_config(home, 'token_env = "TOP_TOKEN"\nmodel = "m"\n')
    assert resolve_settings(env=env).netbox_token == "top"


def test_config_lists_every_setting_with_its_origin_and_never_the_token(
    home: Path, tmp_path: Path
) -> None:
    write_config(home, LAYERED)
    env = {
        "XDG_CONFIG_HOME": str(home),
        "NETBOX_CHAT_SESSIONS": str(tmp_path / "s"),
        "NETBOX_TOKEN": "",
        "NETBOX_URL": "",
        "NETBOX_CHAT_MODEL": "",
        "NETBOX_CHAT_PROFILE": "",
        "COLUMNS": "200",
    }
    shown = invoke(["config", "--model", "flag-model"], env=env)
    assert shown.exit_code == 0, shown.output
    lines = {line.split()[0]: line.split(None, 1)[1] for line in shown.stdout.splitlines()}
    assert lines["profile"].split() == ["lab", "from", "default_profile"]
    assert lines["model"].split() == ["flag-model", "flag", "--model"]
    assert lines["num_ctx"].split() == ["8192", "profile", "lab"]
    assert lines["request_timeout"].split() == ["30.0", "file"]
    assert lines["sessions_dir"].split() == [str(tmp_path / "s"), "env", "NETBOX_CHAT_SESSIONS"]
    assert lines["ollama_url"].split() == ["http://127.0.0.1:11434", "default"]
    assert lines["netbox_token"].startswith("missing (NETBOX_TOKEN_LAB is not set)")

    prod = invoke(["config", "--profile", "prod"], env=env)
    assert prod.exit_code == 0, prod.output
    assert "set (from token_command)" in prod.stdout and "prod-token" not in prod.output


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('model = "a"\nwindow = 3\n', "config.toml line 2: unknown key 'window' in the top level"),
        (
            '[profiles.lab]\nnetbox_url = "http://x"\nnetbox_token = "nbt_x.y"\n',
            "config.toml line 3: unknown key 'netbox_token' in [profiles.lab]",
        ),
        ('model = "a"\nnum_ctx = \n', "config.toml: Invalid value (at line 2, column 11)"),
        ('[profiles.lab]\nnum_ctx = "lots"\n', "config.toml line 2: num_ctx must be a number"),
        ('default_profile = "prod"\n', "config.toml line 1: default_profile 'prod' is not a"),
        (
            '[profiles.lab]\ntoken_command = "pass show \'x"\n',
            "config.toml line 2: token_command: No closing quotation",
        ),
    ],
    ids=["unknown-key", "token-in-file", "malformed", "bad-value", "no-such-default", "quote"],
)
def test_a_bad_file_is_one_line_with_its_line_number_and_exit_1(
    text: str, says: str, home: Path, tmp_path: Path
) -> None:
    write_config(home, text)
    env = {"XDG_CONFIG_HOME": str(home), "NETBOX_CHAT_SESSIONS": str(tmp_path / "s")}
    for command in (["config"], ["ls"]):
        ran = invoke(command, env=env)
        assert ran.exit_code == 1
        assert ran.stderr.count("\n") == 1 and says in ran.stderr, ran.stderr
    assert not (tmp_path / "s").exists()


def test_a_token_command_in_a_file_others_can_read_is_warned(home: Path, tmp_path: Path) -> None:
    env = {
        "XDG_CONFIG_HOME": str(home),
        "NETBOX_CHAT_SESSIONS": str(tmp_path / "s"),
        "NETBOX_TOKEN": "",
    }
    path = write_config(home, LAYERED, mode=0o644)
    readable = invoke(["config"], env=env)
    assert readable.exit_code == 0
    assert f"warning: permissions 0644 for {path} are too open" in readable.stderr
    assert f"chmod 600 {path}" in readable.stderr
    path.write_text('model = "m"\n')  # no token command: nothing secret to read
    assert invoke(["config"], env=env).stderr == ""


def test_a_config_someone_else_could_write_is_refused_whatever_it_holds(
    chat_env: dict[str, str], home: Path, tmp_path: Path, ollama: ScriptedOllama
) -> None:
    """ssh's StrictModes (issue 21, item 11): a file, or a folder above it,
    that group or others can write, or that another user owns (root aside),
    is refused by every command with one line naming the path and the fix,
    exit 1, before anything in it is used. A sticky folder (/tmp) is fine."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    marker = tmp_path / "token-command-ran"
    path = write_config(
        home,
        f"""\
        netbox_url = "http://127.0.0.1:9"
        token_command = ["sh", "-c", "touch {marker}; echo nbt_x.yyyyyyyyyyyy"]
        """,
    )
    env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}

    def refused(problem: str, fix: str) -> None:
        for command in (["ls"], ["config"], ["ask", "sites?"]):
            ran = invoke(command, env=env)
            assert ran.exit_code == 1, (command, ran.output)
            assert ran.stderr == (
                f"netbox-chat: refusing {path}: {problem}, who could change where your "
                f"NetBox token goes; {fix}\n"
            )
        assert not marker.exists() and ollama.requests == []

    path.chmod(0o666)
    refused("it can be written by others (permissions 0666)", f"chmod go-w {path}")
    path.chmod(0o620)
    refused("it can be written by others (permissions 0620)", f"chmod go-w {path}")
    path.chmod(0o600)
    home.chmod(0o777)
    refused(f"its folder {home} can be written by others (permissions 0777)", f"chmod go-w {home}")
    home.chmod(0o1777)  # sticky: nobody else can replace netbox-chat/ inside it
    assert invoke(["ls"], env=env).exit_code == 0
    if os.getuid() == 0:  # only root can give a file away
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
        refused(
            f"it is owned by another user (uid {nobody.pw_uid})",
            f"chown {pwd.getpwuid(os.getuid()).pw_name} {path} (or move the file)",
        )
        os.chown(path, os.getuid(), os.getgid())
    link = tmp_path / "elsewhere" / "config.toml"  # a symlink: its target's folders count
    link.parent.mkdir(mode=0o777)
    link.parent.chmod(0o777)
    path.rename(link)
    path.symlink_to(link)
    refused(
        f"its folder {link.parent} can be written by others (permissions 0777)",
        f"chmod go-w {link.parent}",
    )


def test_a_failing_token_command_is_one_line_with_its_own_error_and_config_shows_the_rest(
    chat_env: dict[str, str], home: Path, ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    write_config(
        home,
        """\
        [profiles.prod]
        netbox_url = "http://127.0.0.1:9"
        token_command = ["sh", "-c", "echo half-a-secret; printf 'x\\noops \\\\033[31mred\\n' >&2; exit 3"]
        """,
    )
    env = {key: value for key, value in chat_env.items() if key not in ("NETBOX_TOKEN",)}
    env["NETBOX_URL"] = ""  # the profile's
    ran = invoke(["ask", "sites?", "--profile", "prod"], env=env)
    assert ran.exit_code == 1
    assert ran.stderr == (
        "netbox-chat: token_command of profile prod failed: sh exited 3: oops \\x1b[31mred\n"
    )
    assert "half-a-secret" not in ran.output
    assert ollama.requests == [] and not sessions_dir.exists()

    shown = invoke(["config", "--profile", "prod"], env=env)
    assert shown.exit_code == 1
    rows = {line.split()[0]: line.split()[1] for line in shown.stdout.splitlines()}
    assert rows["netbox_url"] == "http://127.0.0.1:9"  # the rest is still shown
    (token,) = [line for line in shown.stdout.splitlines() if line.startswith("netbox_token")]
    assert token.split()[1:3] == ["failed", "(token_command;"]
    assert shown.stderr == ran.stderr and "half-a-secret" not in shown.output


def test_a_profile_per_netbox_and_the_token_command_output_stays_secret(
    chat_env: dict[str, str], home: Path, ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Two NetBoxes, two profiles: each question reaches its own NetBox with
    its own token (the doubles refuse any other), one token from token_env and
    one from token_command; the command's token is in no file, no output."""
    prod_token = "nbt_prodkey000001.SECRETFROMTHECOMMANDxxxxxxxxxxxxxxxxxx"
    with NetBoxDouble(token=prod_token) as prod, NetBoxDouble(token=TEST_TOKEN) as lab:
        secret_file = home.parent / "prod-token"
        secret_file.write_text(prod_token + "\nsecond line is not the token\n")
        write_config(
            home,
            f"""\
            default_profile = "lab"
            [profiles.lab]
            netbox_url = "{lab.url}"
            token_env = "NETBOX_TOKEN_LAB"
            [profiles.prod]
            netbox_url = "{prod.url}"
            token_command = "cat {secret_file}"
            """,
        )
        env = {k: v for k, v in chat_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
        env["NETBOX_TOKEN_LAB"] = TEST_TOKEN
        outputs = []
        answers = {}
        for profile in ("lab", "prod"):
            ollama.script([SITES], [Text(f"Three sites in {profile}.")])
            ran = cli(env, "ask", "sites?", "-p", profile, "--json", timeout=120)
            assert ran.returncode == 0, ran.stderr
            outputs += [ran.stdout, ran.stderr]
            answers[profile] = json.loads(ran.stdout)
            assert answers[profile]["tool_calls"][0]["error"] is False
        assert any("dcim/sites" in request for request in lab.requests)
        assert any("dcim/sites" in request for request in prod.requests)
        assert len(lab.requests) == len(prod.requests)  # neither saw the other's question

        # Continued without -p, the session does not pick its profile (a row
        # anyone with access to the store can write): default_profile's lab
        # is another NetBox, so it is refused, naming both and the profile.
        prod_requests, lab_requests = len(prod.requests), len(lab.requests)
        session = answers["prod"]["session"]
        refused = invoke(["ask", "again?", "--session", session], env=env)
        assert refused.exit_code == 1
        assert refused.stderr == (
            f"netbox-chat: session {session} was started against {prod.url}, this one talks "
            f"to {lab.url} (profile lab); resume it with --netbox-url or --profile to go on "
            "against this one; your profile for it: --profile prod\n"
        )
        assert (len(prod.requests), len(lab.requests)) == (prod_requests, lab_requests)
        ollama.script([SITES], [Text("Still three in prod.")])
        again = invoke(["ask", "again?", "--session", session, "-p", "prod", "--json"], env=env)
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["tool_calls"][0]["error"] is False
        assert len(prod.requests) > prod_requests
        outputs += [again.output]

        listing = invoke(["ls"], env={**env, "COLUMNS": "200"})
        by_id = {line.split()[0]: line for line in listing.stdout.splitlines()[1:]}
        assert " prod " in by_id[answers["prod"]["session"]]
        assert " lab " in by_id[answers["lab"]["session"]]
        shown = invoke(["config", "-p", "prod"], env=env)
        export = invoke(["export", answers["prod"]["session"]], env=env)
        outputs += [listing.output, shown.output, export.output]
    secret = prod_token.split(".", 1)[1]
    for text in outputs:
        assert secret not in text
    for path in sessions_dir.iterdir():
        assert secret.encode() not in path.read_bytes(), path
    assert stat_mode(sessions_dir) == 0o700


def stat_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_the_readme_command_needs_nothing_but_the_environment(
    chat_env: dict[str, str], ollama: ScriptedOllama, home: Path
) -> None:
    """With a config file whose default profile names another NetBox, the
    environment's NETBOX_URL and NETBOX_TOKEN still win (env > profile)."""
    write_config(
        home,
        """\
        default_profile = "elsewhere"
        [profiles.elsewhere]
        netbox_url = "http://127.0.0.1:9"
        token_command = "false"
        """,
    )
    ollama.script([SITES], [Text("Three sites.")])
    ran = invoke(["ask", "sites?", "--json"], env=chat_env)
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["tool_calls"][0]["error"] is False
