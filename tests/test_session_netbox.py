"""A session's rows are someone else's data (issue 21, items 2 and 14).

On the team store every teammate's role can write `session_meta`, and `copy`
brings other people's sessions into a folder. What a session remembers of its
NetBox (the URL, the profile's name) may therefore never choose where the
user's token is sent, nor which of the user's profiles (and so which token)
is used: a token goes only to the NetBox it was configured for. And a NetBox
URL with `user:password@` (a proxy's basic auth) is neither stored with a
session nor printed.

Through the real CLI (subprocess and Typer's runner), both stores, with a
NetBox double that refuses every other token and a catcher that records any
Authorization header sent to it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from netbox_chat.config import resolve_settings
from tests.conftest import TEST_TOKEN
from tests.doubles.inspect_session import fresh_connection
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.doubles.stores import StoreUnderTest
from tests.drive.process import cli
from tests.drive.runner import invoke

SITES = ToolCall("netbox_get_objects", {"object_type": "dcim.site"})
PROD_SECRET = "nbt_prodkey000001.SECRETOFTHEPRODPROFILExxxxxxxxxxxxxxxx"


class Catcher(BaseHTTPRequestHandler):
    """Any HTTP server someone could name in a row: records what it is sent."""

    seen: list[str | None]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def catcher() -> Iterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []
    handler = type("Handler", (Catcher,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def write_meta(store: StoreUnderTest, session_id: str, **values: str) -> None:
    """Change a session's remembered meta the way a teammate's role (or an
    edited file) can: straight into the table, behind netbox-chat's back."""
    if store.kind == "folder":
        with contextlib.closing(sqlite3.connect(Path(store.value, f"{session_id}.sqlite"))) as db:
            db.executemany(
                "INSERT OR REPLACE INTO session_meta(key, value) VALUES (?, ?)", values.items()
            )
            db.commit()
        return
    from netbox_chat.store import postgres as pgstore

    with contextlib.closing(pgstore.connect(store.value)) as db:
        for key, value in values.items():
            db.execute(
                "INSERT INTO session_meta(session_id, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id, key) DO UPDATE SET value = EXCLUDED.value",
                (session_id, key, value),
            )


def read_meta(store: StoreUnderTest, session_id: str) -> dict[str, str]:
    where = "" if store.kind == "folder" else " WHERE session_id = %s"
    params = () if store.kind == "folder" else (session_id,)
    with fresh_connection(store.value, session_id) as db:
        return dict(db.execute(f"SELECT key, value FROM session_meta{where}", params).fetchall())


def test_a_session_row_never_chooses_the_netbox_the_profile_or_the_token(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
    tmp_path: Path,
) -> None:
    """The user keeps NetBox in a profile (no NETBOX_URL exported). Someone
    rewrites the session's row to name another server and the user's other
    profile: the next `ask` sends nothing anywhere, runs no token command, and
    says which NetBox the session names and which one the user's is."""
    marker = tmp_path / "prod-token-command-ran"
    config = tmp_path / "config" / "netbox-chat" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        textwrap.dedent(
            f"""\
            default_profile = "lab"
            [profiles.lab]
            netbox_url = "{netbox.url}"
            token_env = "NETBOX_TOKEN_LAB"
            [profiles.prod]
            netbox_url = "http://127.0.0.1:9"
            token_command = ["sh", "-c", "touch {marker}; echo {PROD_SECRET}"]
            """
        )
    )
    config.chmod(0o600)
    env = {k: v for k, v in store_env.items() if k not in ("NETBOX_URL", "NETBOX_TOKEN")}
    env["NETBOX_TOKEN_LAB"] = TEST_TOKEN
    ollama.script([Text("Three sites.")])
    first = cli(env, "ask", "how many sites?", "--json")
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout)["session"]

    with catcher() as (evil, seen):
        for row in ({"netbox_url": evil}, {"netbox_url": evil, "profile": "prod"}):
            write_meta(store, session, **row)
            ollama.script([SITES], [Text("ok")])
            asked = len(ollama.requests)
            ran = cli(env, "ask", "list the sites", "--session", session)
            assert ran.returncode == 1, ran.stderr
            assert ran.stderr == (
                f"netbox-chat: session {session} was started against {evil}, this one talks "
                f"to {netbox.url} (profile lab); resume it with --netbox-url or --profile to "
                "go on against this one\n"
            )
            assert len(ollama.requests) == asked  # the turn never started
        assert seen == []  # nothing at all reached the row's server
    assert not marker.exists()  # the profile the row names was never used
    assert store.statuses(session) == [(1, "done")]

    # The user's own choice, typed, goes on: with the lab profile's token, to lab.
    ollama.script([SITES], [Text("Three sites, still.")])
    chosen = cli(env, "ask", "list the sites", "--session", session, "--profile", "lab", "--json")
    assert chosen.returncode == 0, chosen.stderr
    assert json.loads(chosen.stdout)["tool_calls"][0]["error"] is False
    assert f"started against {evil}" in chosen.stderr  # said, in one yellow line
    assert not marker.exists()


def test_without_a_netbox_of_their_own_a_session_row_is_not_used_as_one(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """NETBOX_TOKEN exported but no NETBOX_URL: the session's remembered URL
    used to fill the gap, so a row chose where NETBOX_TOKEN went."""
    ollama.script([Text("Three sites.")])
    first = cli(store_env, "ask", "how many sites?", "--json")
    session = json.loads(first.stdout)["session"]
    with catcher() as (evil, seen):
        write_meta(store, session, netbox_url=evil)
        env = {k: v for k, v in store_env.items() if k != "NETBOX_URL"}
        ran = cli(env, "ask", "list the sites", "--session", session)
        assert ran.returncode == 1
        assert ran.stderr == (
            f"netbox-chat: session {session} was started against {evil}, and no NetBox is "
            "configured here (NETBOX_URL, --netbox-url, a profile)\n"
        )
        assert seen == []


def test_a_token_goes_only_to_the_netbox_it_was_configured_for(tmp_path: Path) -> None:
    """NETBOX_TOKEN with NETBOX_URL; a profile's token with that profile's
    netbox_url (or the top level's); a --netbox-url typed now takes any. Any
    other pairing withholds the token and says why, before a command runs."""
    home = tmp_path / "config"
    path = home / "netbox-chat" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        'netbox_url = "http://top.example"\n'
        '[profiles.lab]\nnetbox_url = "http://lab.example/"\ntoken_env = "LAB_TOKEN"\n'
        '[profiles.bare]\ntoken_env = "BARE_TOKEN"\n'
    )
    path.chmod(0o600)
    base = {"XDG_CONFIG_HOME": str(home), "LAB_TOKEN": "lab", "BARE_TOKEN": "bare"}
    lab = resolve_settings(env=base, profile="lab")
    assert (lab.netbox_url, lab.netbox_token, lab.token_refused) == (
        "http://lab.example",
        "lab",
        None,
    )
    bare = resolve_settings(env=base, profile="bare")  # inherits the top level's NetBox
    assert (bare.netbox_url, bare.netbox_token) == ("http://top.example", "bare")
    typed = resolve_settings(env=base, profile="lab", netbox_url="http://typed.example")
    assert typed.netbox_token == "lab"

    env_url = resolve_settings(env={**base, "NETBOX_URL": "http://other.example"}, profile="lab")
    assert env_url.netbox_token is None
    assert env_url.token_refused == (
        "the NetBox token (profile lab, token_env LAB_TOKEN) is sent only to the netbox_url "
        "of profile lab (http://lab.example), not to http://other.example (env NETBOX_URL): "
        "configure that NetBox's own token with it, or pass --netbox-url to send this one there"
    )
    env_token = resolve_settings(env={**base, "NETBOX_TOKEN": "env"}, profile="lab")
    assert env_token.netbox_token is None
    assert "sent only to NETBOX_URL, which is not set" in str(env_token.token_refused)

    ran = invoke(["config", "-p", "lab"], env={**base, "NETBOX_URL": "http://other.example"})
    assert ran.exit_code == 1
    # After the shadowing warning (--profile lab under NETBOX_URL), the refusal.
    assert ran.stderr.splitlines()[-1] == f"netbox-chat: {env_url.token_refused}"


def test_netbox_url_credentials_are_never_stored_or_printed(
    store: StoreUnderTest,
    store_env: dict[str, str],
    ollama: ScriptedOllama,
    netbox: NetBoxDouble,
) -> None:
    """`https://user:password@host` (a proxy's basic auth) works, but the
    password reaches no row, no `ls`, `ls --json`, `config` or message; a
    session written with one before (or by someone else) does not show it."""
    secret = "Pr0xyPassw0rd"
    with_creds = netbox.url.replace("http://", f"http://alice:{secret}@")
    env = {**store_env, "NETBOX_URL": with_creds}
    ollama.script([Text("Three sites.")])
    ran = cli(env, "ask", "how many sites?", "--json")
    assert ran.returncode == 0, ran.stderr
    session = json.loads(ran.stdout)["session"]
    assert read_meta(store, session)["netbox_url"] == netbox.url  # stored without them
    listing = cli(env, "ls", "--json")
    assert json.loads(listing.stdout)[0]["netbox_url"] == netbox.url
    shown = cli(env, "config")
    assert f"http://***@{netbox.url[len('http://') :]}" in shown.stdout
    outputs = [ran, listing, shown, cli(env, "ls"), cli(env, "export", session)]

    # A row holding credentials (an older release wrote them; or a teammate):
    # shown without them, and compared without them.
    write_meta(store, session, netbox_url=with_creds)
    outputs += [cli(env, "ls"), cli(env, "ls", "--json")]
    ollama.script([Text("Still three.")])
    again = cli({**env, "NETBOX_URL": netbox.url}, "ask", "and now?", "--session", session)
    assert again.returncode == 0, again.stderr
    other = cli({**env, "NETBOX_URL": "http://127.0.0.1:9"}, "ask", "x", "--session", session)
    assert other.returncode == 1 and f"started against {netbox.url}," in other.stderr
    outputs += [again, other]
    for done in outputs:
        assert secret not in done.stdout + done.stderr, done.args
