"""The model of each turn, as the ledger records it: after `/model NAME`, `ls`,
`export` and `resume` name the model the session goes on with, not its first;
`/new` keeps the model switched to; a session written before the ledger kept
a turn's model (by that release's own code) opens, migrates and keeps its
model; a model name in the store that is not one is never used.

Real parts: the REPL in a pty and the CLI in subprocesses, against the
scripted Ollama server (whose requests say which model was asked), on both
stores where the store matters."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from netbox_chat.store import migrations
from netbox_chat.store import postgres as pgstore
from tests.doubles.old_releases import BEFORE_TURN_MODEL, release, release_argv
from tests.doubles.ollama_server import ScriptedOllama, Text
from tests.doubles.stores import StoreUnderTest, scratch_database, with_url
from tests.drive.process import cli, first_turn
from tests.drive.pty import leave, resume, spawn
from tests.drive.screen import answered

FIRST = "qwen3:8b"  # chat_env's NETBOX_CHAT_MODEL
OTHER = "qwen2.5:7b"  # another model the scripted Ollama has


def without_model(env: dict[str, str]) -> dict[str, str]:
    """`env` with no model named: a resumed session then goes on with its own."""
    return {key: value for key, value in env.items() if key != "NETBOX_CHAT_MODEL"}


def banner(recap: str) -> str:
    """The line `resume` starts its recap with (which names the model)."""
    (line,) = [line for line in recap.splitlines() if line.startswith("resumed session ")]
    return line


def ls_row(env: dict[str, str], session_id: str) -> str:
    listed = cli(env, "ls")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(session_id)]
    return row


def resumed_asks(
    env: dict[str, str],
    session_id: str,
    ollama: ScriptedOllama,
    model: str,
    question: str,
    answer: str,
) -> str:
    """`resume` with `env` asks `question` of `model`, and its banner names
    that model: what a user sees of the model a session goes on with. The recap."""
    ollama.script([Text(answer)])
    child, recap = resume(env, session_id)
    assert banner(recap).endswith(f" · model {model}")
    answered(child, question, answer)
    leave(child)
    assert ollama.requests[-1]["model"] == model
    return recap


def exported(env: dict[str, str], session_id: str) -> tuple[str, dict[str, Any]]:
    markdown = cli(env, "export", session_id)
    data = cli(env, "export", session_id, "--format", "json")
    assert markdown.returncode == 0 and data.returncode == 0, markdown.stderr + data.stderr
    return markdown.stdout, json.loads(data.stdout)


def test_after_a_model_switch_ls_export_and_resume_name_the_model_it_goes_on_with(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Three sites.")], [Text("Still three.")])
    child = spawn(store_env)
    answered(child, "how many sites?", "Three sites.")
    answered(child, f"/model {OTHER}", f"model {OTHER} from the next question on")
    answered(child, "and now?", "Still three.")
    leave(child)
    session_id = store.only_session()
    assert [request["model"] for request in ollama.requests] == [FIRST, OTHER]

    row = ls_row(store_env, session_id)
    assert OTHER in row and FIRST not in row
    (summary,) = json.loads(cli(store_env, "ls", "--json").stdout)
    assert summary["model"] == OTHER

    markdown, data = exported(store_env, session_id)
    assert f"- model: {OTHER} (started with {FIRST})" in markdown
    first, second = markdown.split("## Turn 2")
    assert "· model " not in first.split("## Turn 1")[1]  # the model it started with
    assert f"· model {OTHER} ·" in second  # named where it changed
    assert (data["model"], data["model_at_start"]) == (OTHER, FIRST)
    assert [(t["model"], t["provider"]) for t in data["turns"]] == [
        (FIRST, "ollama"),
        (OTHER, "ollama"),
    ]

    # No model named: resume goes on with the latest turn's, and its banner says so.
    resumed_asks(without_model(store_env), session_id, ollama, OTHER, "sure?", "Yes, three.")

    # A model named on purpose (here the environment's) still wins, and is said.
    recap = resumed_asks(store_env, session_id, ollama, FIRST, "once more?", "Three.")
    assert (
        f"session {session_id} last asked {OTHER}; going on with {FIRST} (env NETBOX_CHAT_MODEL)"
        in " ".join(recap.split())
    )
    assert json.loads(cli(store_env, "ls", "--json").stdout)[0]["model"] == FIRST


def test_new_after_a_model_switch_asks_the_model_switched_to(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Three sites.")], [Text("Two devices.")])
    child = spawn(store_env)
    answered(child, f"/model {OTHER}", f"model {OTHER} from the next question on")
    answered(child, "how many sites?", "Three sites.")
    child.sendline("/new")
    child.expect(r"session \w+ saved")
    child.expect(
        r"session (?:\x1b\[[0-9;]*m)*(\w+)(?:\x1b\[[0-9;]*m)* · NetBox \S+ · model ([\w.:]+)"
    )
    second, banner_model = child.match.group(1), child.match.group(2)
    child.expect(r"netbox\S*>")
    answered(child, "how many devices?", "Two devices.")
    leave(child)
    assert banner_model == OTHER
    assert [request["model"] for request in ollama.requests] == [OTHER, OTHER]
    assert "how many sites?" not in str(ollama.requests[-1]["messages"])  # a fresh session
    assert OTHER in ls_row(store_env, second)


def test_a_model_name_in_the_ledger_that_is_not_one_is_never_used(
    store: StoreUnderTest, store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Anyone with access to the store writes its rows: a turn's model that is
    no model name (terminal control here) is neither shown nor asked for; the
    session's own model stands in for it."""
    session_id = first_turn(store_env, ollama)
    hostile = "\x1b]0;owned\x07qwen3:8b\x1b[2J"
    if store.kind == "folder":
        with contextlib.closing(sqlite3.connect(Path(store.value, f"{session_id}.sqlite"))) as db:
            db.execute("UPDATE turns SET model = ?", (hostile,))
            db.commit()
    else:
        with contextlib.closing(pgstore.connect(store.value)) as pg:
            pg.execute("UPDATE turns SET model = %s WHERE session_id = %s", (hostile, session_id))

    listed = cli(store_env, "ls")
    assert "\x1b" not in listed.stdout and FIRST in ls_row(store_env, session_id)
    markdown, data = exported(store_env, session_id)
    assert "owned" not in markdown and data["turns"][0]["model"] == FIRST
    ollama.script([Text("Still three.")])
    asked = cli(without_model(store_env), "ask", "again?", "--session", session_id)
    assert asked.returncode == 0, asked.stderr
    assert "\x1b" not in asked.stderr + asked.stdout
    assert ollama.requests[-1]["model"] == FIRST


# --- a session from the release before the ledger kept a turn's model ------------------------


def old_ask(
    code: Path, env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """That release's own CLI (tests/doubles/old_releases.py)."""
    return cli(env, *args, program=release_argv(code), cwd=cwd, timeout=180)


def file_schema(path: Path) -> tuple[int, list[str], list[str]]:
    """A session file's schema version, its ledger's columns and its recorded migrations."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        (version,) = db.execute(
            "SELECT value FROM session_meta WHERE key = 'schema_version'"
        ).fetchone()
        columns = [row[1] for row in db.execute("PRAGMA table_info(turns)")]
        applied = [  # schema 8 keeps them in session_meta, an earlier one in a table
            row[0]
            for row in db.execute(
                "SELECT name FROM session_migrations"
                if db.execute(
                    "SELECT 1 FROM sqlite_schema WHERE name = 'session_migrations'"
                ).fetchone()
                else f"SELECT substr(key, {len(migrations.RECORD_PREFIX) + 1}) FROM session_meta "
                f"WHERE key LIKE '{migrations.RECORD_PREFIX}%'"
            )
        ]
    return int(version), columns, applied


def asked_by_the_release_before(
    code: Path, env: dict[str, str], cwd: Path, ollama: ScriptedOllama
) -> str:
    """The id of a session that release started with OTHER: one turn,
    answered, whose row names no model."""
    ollama.script([Text("Three sites.")])
    asked = old_ask(
        code, {**env, "NETBOX_CHAT_MODEL": OTHER}, cwd, "ask", "how many sites?", "--json"
    )
    assert asked.returncode == 0, asked.stderr
    return str(json.loads(asked.stdout)["session"])


def test_a_session_file_from_the_release_before_migrates_and_keeps_its_model(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path, tmp_path: Path
) -> None:
    """Started with OTHER by the release before; its rows name no model."""
    with release(BEFORE_TURN_MODEL) as code:
        if code is None:
            pytest.skip("no git history to take the release from")
        session_id = asked_by_the_release_before(code, chat_env, tmp_path, ollama)
    path = sessions_dir / f"{session_id}.sqlite"
    version, columns, _ = file_schema(path)
    m005 = [step.__name__ for step in migrations.MIGRATIONS].index("m005_turn_model")
    assert version == m005 and "model" not in columns

    # Read as it is (ls and export never write a session)...
    before = path.read_bytes()
    assert OTHER in ls_row(chat_env, session_id)
    markdown, data = exported(chat_env, session_id)
    assert f"- model: {OTHER}\n" in markdown and "· model " not in markdown
    assert data["schema_version"] == version
    assert [(t["model"], t["provider"]) for t in data["turns"]] == [(OTHER, None)]
    assert path.read_bytes() == before

    # ...and migrated by the first open, which goes on with its model.
    resumed_asks(without_model(chat_env), session_id, ollama, OTHER, "and now?", "Still three.")
    version, columns, applied = file_schema(path)
    assert version == migrations.schema_version() and "m005_turn_model" in applied
    _, data = exported(chat_env, session_id)
    assert [(t["model"], t["provider"]) for t in data["turns"]] == [
        (OTHER, None),
        (OTHER, "ollama"),
    ]


@pytest.mark.postgres
def test_a_team_store_from_the_release_before_migrates_and_keeps_its_model(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    """A database whose schema that release made: refused until `doctor
    --init-store` migrates it, then its sessions show and go on with their model."""
    with scratch_database() as url:
        env = with_url({k: v for k, v in chat_env.items() if k != "NETBOX_CHAT_SESSIONS"}, url)
        with release(BEFORE_TURN_MODEL) as code:
            if code is None:
                pytest.skip("no git history to take the release from")
            made = old_ask(code, env, tmp_path, "doctor", "--init-store")
            assert made.returncode == 0, made.stderr
            session_id = asked_by_the_release_before(code, env, tmp_path, ollama)

        refused = cli(env, "ls")
        assert refused.returncode == 3
        assert refused.stderr.strip().endswith(
            "has schema 2: migrate it with `netbox-chat doctor --init-store`"
        )
        migrated = cli(env, "doctor", "--init-store")
        assert migrated.returncode == 0, migrated.stderr

        assert OTHER in ls_row(env, session_id)
        ollama.script([Text("Still three.")])
        again = cli(without_model(env), "ask", "and now?", "--session", session_id)
        assert again.returncode == 0, again.stderr
        assert ollama.requests[-1]["model"] == OTHER
        _, data = exported(env, session_id)
        assert [(t["model"], t["provider"]) for t in data["turns"]] == [
            (OTHER, None),
            (OTHER, "ollama"),
        ]
