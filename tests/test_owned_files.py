"""Owner-only files through the real CLI (issue 31): a sessions folder another
user owns or can write is refused in one line; eval run folders are 0700 with
0600 files, never written through a symlink, `--resume` of a folder holding
links or a forged run.json refused in one line; no URL's `user:password@` is
printed or stored, while the password still reaches the server."""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.network import closed_port_number
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.openai_server import ScriptedOpenAI
from tests.drive import process

ROOT = Path(__file__).parent.parent
QUESTION = """
[[question]]
id = "sites"
text = "How many sites are there?"
kind = "count"
query = { path = "dcim/sites", take = "count" }
"""
OTHER, VICTIM = 65534, 1234
SECRET = "Pr0xyPassw0rd"


def cli(
    env: dict[str, str], *args: str, uid: int | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """The installed program, as `uid` when given (setpriv plays a second user)."""
    program = process.MODULE
    if uid is not None:
        as_uid = ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups")
        program = (*as_uid, *process.MODULE)
    return process.cli(
        {**env, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
        *args,
        program=program,
        cwd=cwd,
        timeout=180,
        preexec_fn=lambda: os.umask(0o022),  # the usual umask: modes must not rest on it
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder both users can reach (pytest's tmp_path is root's own, 0700)."""
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("plays two users with setpriv: run as root")
    if any(not mode(p) & 0o001 for p in (ROOT, *ROOT.parents)):
        pytest.skip(f"the second user cannot reach this checkout ({ROOT} or a folder above it)")
    folder = Path(tempfile.mkdtemp(prefix="nbc-owned-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_a_sessions_folder_of_another_user_or_open_to_others_is_refused(
    shared: Path, chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    theirs = shared / "theirs"
    theirs.mkdir(mode=0o777)
    theirs.chmod(0o777)
    os.chown(theirs, OTHER, OTHER)
    home = shared / "home"
    home.mkdir(mode=0o700)
    os.chown(home, VICTIM, VICTIM)
    env = {
        **chat_env,
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "NETBOX_CHAT_SESSIONS": str(theirs),
    }
    ollama.script([Text("Three sites.")])
    asked = cli(env, "ask", "how many sites?", uid=VICTIM)
    assert asked.returncode == 3
    assert asked.stderr.count("\n") == 1
    assert f"refusing sessions folder {theirs}: it is owned by another user" in asked.stderr
    assert f"chown {VICTIM} {theirs}" in asked.stderr  # the fix, as ssh gives it
    assert os.listdir(theirs) == []  # nothing of the conversation went there

    # The user's own folder, but others may write into it: refused too, with the fix.
    mine = home / "mine"
    mine.mkdir()
    mine.chmod(0o775)
    os.chown(mine, VICTIM, VICTIM)
    listed = cli({**env, "NETBOX_CHAT_SESSIONS": str(mine)}, "ls", uid=VICTIM)
    assert listed.returncode == 3
    assert "others can write to it (permissions 0775)" in listed.stderr
    assert f"chmod 700 {mine}" in listed.stderr

    # Only readable by others: made 0700, the session file 0600.
    mine.chmod(0o755)
    ollama.script([Text("Three sites.")])
    ok = cli({**env, "NETBOX_CHAT_SESSIONS": str(mine)}, "ask", "how many?", uid=VICTIM)
    assert ok.returncode == 0, ok.stderr
    assert mode(mine) == 0o700
    assert [mode(p) for p in mine.glob("*.sqlite")] == [0o600]


def test_a_sessions_folder_inside_a_folder_others_control_is_refused(
    shared: Path, chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """n06: the folders above the store are checked like the config file's.
    Another user who made `netbox-chat/` first in a shared data folder could
    move the victim's sessions away; a store right inside a sticky shared
    folder (/tmp) could have been made by anyone first."""
    top = shared / "data"
    top.mkdir()
    top.chmod(0o1777)  # a /tmp-like folder: XDG_DATA_HOME pointing somewhere odd
    theirs = top / "netbox-chat"
    theirs.mkdir()
    theirs.chmod(0o777)
    os.chown(theirs, OTHER, OTHER)
    home = shared / "home"
    home.mkdir(mode=0o700)
    os.chown(home, VICTIM, VICTIM)
    env = {
        **chat_env,
        **{f"XDG_{kind}_HOME": str(home / kind) for kind in ("STATE", "CACHE", "CONFIG", "DATA")},
        "HOME": str(home),
    }

    def ask_in(sessions: Path) -> subprocess.CompletedProcess[str]:
        ollama.script([Text("Three sites.")])
        return cli({**env, "NETBOX_CHAT_SESSIONS": str(sessions)}, "ask", "sites?", uid=VICTIM)

    inside = ask_in(theirs / "sessions")
    assert inside.returncode == 3 and inside.stderr.count("\n") == 1, inside.stderr
    assert (
        f"refusing sessions folder {theirs}/sessions: its folder {theirs}: it is owned by "
        "another user (nobody)" in inside.stderr
    )
    assert os.listdir(theirs) == []  # nothing made there
    doctor = cli({**env, "NETBOX_CHAT_SESSIONS": str(theirs / "sessions")}, "doctor", uid=VICTIM)
    assert f"✗ sessions folder: refusing sessions folder {theirs}/sessions" in doctor.stdout

    direct = ask_in(top / "sessions")
    assert direct.returncode == 3
    assert "is a shared folder (permissions 1777, like /tmp)" in direct.stderr
    assert f"mkdir -m 700 {top}/NAME" in direct.stderr

    mine = top / "victim"
    mine.mkdir(mode=0o700)
    os.chown(mine, VICTIM, VICTIM)
    kept = ask_in(mine / "sessions")  # the user's own folder inside the sticky one
    assert kept.returncode == 0, kept.stderr
    assert len(list((mine / "sessions").glob("*.sqlite"))) == 1

    mine.chmod(0o777)  # now others could move the sessions folder out of it
    listed = cli({**env, "NETBOX_CHAT_SESSIONS": str(mine / "sessions")}, "ls", uid=VICTIM)
    assert listed.returncode == 3
    assert f"its folder {mine}: others can write to it (permissions 0777)" in listed.stderr


@pytest.fixture
def eval_env(chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "q.toml").write_text(QUESTION)
    return {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs")}


@pytest.fixture
def proxy(netbox: NetBoxDouble) -> Iterator[str]:
    """A reverse proxy with basic auth in front of NetBox, which adds the token
    itself: the setup a `user:password@` in NETBOX_URL is for. Its URL, with
    the password."""
    wanted = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.headers.get("Authorization") != wanted:
                self.send_response(401)
                self.end_headers()
                return
            upstream = urllib.request.Request(
                netbox.url + self.path, headers={"Authorization": f"Bearer {TEST_TOKEN}"}
            )
            try:
                with urllib.request.urlopen(upstream) as answer:
                    status, body = answer.status, answer.read()
            except urllib.error.HTTPError as refused:
                status, body = refused.code, refused.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://alice:{SECRET}@127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_run_folder_is_private_and_keeps_no_netbox_password(
    eval_env: dict[str, str], ollama: ScriptedOllama, proxy: str, tmp_path: Path
) -> None:
    with_creds = proxy
    plain = proxy.replace(f"alice:{SECRET}@", "")
    ollama.script([Text("There are 3 sites.")])
    env = {**eval_env, "NETBOX_URL": with_creds}
    ran = cli(env, "eval", "--per-template", "0", "--questions", str(tmp_path / "q.toml"))
    assert ran.returncode == 0, ran.stderr
    assert f"questions from http://***@{plain[len('http://') :]}" in ran.stderr
    runs = tmp_path / "runs"
    (run,) = runs.iterdir()
    assert mode(runs) == mode(run) == mode(run / "sessions") == 0o700
    files = [p for p in run.iterdir() if p.is_file()]
    assert {p.name for p in files} >= {"run.json", "results.jsonl", "report.md", "report.json"}
    assert all(mode(p) == 0o600 for p in [*files, *(run / "sessions").glob("*.sqlite")])
    assert json.loads((run / "run.json").read_text())["netbox_url"] == plain
    again = cli(env, "eval", "--resume", run.name)
    assert again.returncode == 0, again.stderr
    for p in files:
        assert SECRET not in p.read_text()
    assert SECRET not in ran.stdout + ran.stderr + again.stdout + again.stderr


def handed_over_run(runs: Path, model: str = "qwen3:8b") -> Path:
    """A finished run as someone could hand it over: every answer in, so a
    `--resume` asks no model and only writes the report."""
    run = runs / "20260101-120000"
    run.mkdir(parents=True)
    question = {"id": "q1", "text": "How many sites?", "tier": "simple", "kind": "count",
                "domain": "sites", "expected": 3, "query": None, "universe": []}  # fmt: skip
    plan = {"models": [model], "seed": 0, "repeat": 1, "conversation": False, "judge": None,
            "netbox_url": None, "questions": [question]}  # fmt: skip
    (run / "run.json").write_text(json.dumps(plan))
    result = {"model": model, "repeat": 0, "question": "q1", "tier": "simple", "kind": "count",
              "domain": "sites", "session": "abcdefgh", "status": "done", "tool_calls": [],
              "tokens": {"in": 1, "out": 1}, "score": {"correct": True, "why": "3"}}  # fmt: skip
    (run / "results.jsonl").write_text(json.dumps(result) + "\n")
    return run


def test_resume_refuses_a_run_folder_holding_links_and_writes_through_none(
    eval_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    run = handed_over_run(runs)
    keys = tmp_path / "authorized_keys"
    keys.write_text("ssh-ed25519 AAAA victim@laptop\n")
    (run / "report.md").symlink_to(keys)
    resumed = cli(eval_env, "eval", "--resume", run.name)
    assert resumed.returncode == 1
    assert resumed.stderr.count("\n") == 1
    assert f"refusing to resume run {run.name}: {run / 'report.md'} is a symbolic link" in (
        resumed.stderr
    )
    assert keys.read_text() == "ssh-ed25519 AAAA victim@laptop\n"

    # Without the link the same run resumes: its report replaces nothing but itself.
    (run / "report.md").unlink()
    (run / "results.jsonl").chmod(0o644)  # as runs were made before they were private
    resumed = cli(eval_env, "eval", "--resume", run.name)
    assert resumed.returncode == 0, resumed.stderr
    assert mode(run / "report.md") == mode(run / "results.jsonl") == 0o600
    assert ollama.requests == []


def test_resume_reads_run_json_as_untrusted(eval_env: dict[str, str], tmp_path: Path) -> None:
    run = handed_over_run(tmp_path / "runs", model="qwen3:8b\nssh-ed25519 AAAA attacker\x1b[2J")
    resumed = cli(eval_env, "eval", "--resume", run.name)
    assert resumed.returncode == 1
    assert resumed.stderr.count("\n") == 1 and "\x1b" not in resumed.stderr
    assert "the run's run.json is not a run plan: a model is not a name" in resumed.stderr
    assert not (run / "report.md").exists()

    plan = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**plan, "models": ["m"], "repeat": "9" * 9}))
    resumed = cli(eval_env, "eval", "--resume", run.name)
    assert resumed.returncode == 1
    assert "repeat is not a whole number of at least 1: '999999999'" in resumed.stderr


def test_a_base_url_password_is_sent_but_never_shown_or_stored(chat_env: dict[str, str]) -> None:
    model = "Qwen/Qwen3-8B"
    server = ScriptedOpenAI("vllm", {model: ["completion", "tools"]}).start()
    try:
        base = server.base_url.replace("http://", f"http://alice:{SECRET}@")
        env = {
            **chat_env,
            "NETBOX_CHAT_PROVIDER": "openai",
            "NETBOX_CHAT_BASE_URL": base,
            "NETBOX_CHAT_MODEL": model,
        }
        shown = cli(env, "config")
        assert f"http://***@{server.base_url[len('http://') :]}" in shown.stdout
        server.script([Text("There are 3 sites.")])
        first = cli(env, "ask", "how many sites?", "--json")
        assert first.returncode == 0, first.stderr
        assert server.authorizations and all(
            a and a.startswith("Basic ") for a in server.authorizations
        )
        session = json.loads(first.stdout)["session"]
    finally:
        server.stop()
    # The server is gone (its port held closed, so no other test's server takes
    # it): the turn fails, and its error names the URL without the password.
    env["NETBOX_CHAT_BASE_URL"] = f"http://alice:{SECRET}@127.0.0.1:{closed_port_number()}/v1"
    failed = cli(env, "ask", "and devices?", "--session", session)
    assert failed.returncode == 1
    assert "cannot reach http://***@127.0.0.1:" in failed.stderr
    exported = cli(env, "export", session)
    for done in (shown, first, failed, exported, cli(env, "doctor")):
        assert SECRET not in done.stdout + done.stderr, done.args
