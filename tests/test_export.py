"""`netbox-chat export`: a transcript with tool calls and tokens per turn, with
cancelled/failed/interrupted and rewound turns marked and history edits noted;
read-only, and never the token. Sessions are made by the real CLI against the
scripted Ollama server and the NetBox double."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from netbox_chat.store.sessions import SessionFile, SessionStore
from tests.conftest import TEST_TOKEN
from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, StreamError, Text, ToolCall
from tests.drive.runner import invoke


def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = invoke(list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout, result.stderr


def folder_hash(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def build_session(env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path) -> str:
    """Turn 1 done with a tool call, turn 2 failed mid-stream, turn 3 done, then
    a rewind to turn 1 (turn 3 set aside) and an interrupted turn 4."""
    ollama.script(
        [ToolCall("get_objects", {"object_type": "dcim.device", "filters": {"site": "dm-akron"}})],
        [Text("Three devices at **DM-Akron**.")],
    )
    code, out, err = run(env, "ask", "devices at Akron?", "--json")
    assert code == 0, err
    sid = str(json.loads(out)["session"])
    ollama.script([Text("Half an"), StreamError("model crashed")])
    assert run(env, "ask", "and Columbus?", "--session", sid)[0] == 1
    ollama.script([Text("Three sites.")])
    assert run(env, "ask", "how many sites?", "--session", sid)[0] == 0
    # a rewind and a crashed turn, recorded the way the REPL and a kill -9 leave them
    with SessionFile.open(SessionStore(sessions_dir), sid) as session:
        session.mark_rewound(1)
        session.record_edit(
            "rewind", after_turn=1, message_count=4, messages_before=6, set_aside=[3]
        )
        session.begin_turn("left running", base_checkpoint_id=None, base_message_count=0)
    return sid


def test_markdown_transcript(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    sid = build_session(chat_env, ollama, sessions_dir)
    before = folder_hash(sessions_dir)
    code, md, err = run(chat_env, "export", sid[:4])
    assert code == 0, err
    assert folder_hash(sessions_dir) == before  # export never writes the session
    assert md.startswith(f"# netbox-chat session {sid}\n")
    assert "**Question:** devices at Akron?" in md
    assert "Three devices at **DM-Akron**." in md
    assert '`get_objects` `{"filters": {"site": "dm-akron"}, "object_type": "dcim.device"}`' in md
    assert "chars," in md
    turn2 = md[md.index("## Turn 2") : md.index("## Turn 3")]
    assert "FAILED" in turn2 and "rolled back" in turn2 and "model crashed" in turn2
    turn3 = md[md.index("## Turn 3") : md.index("## Turn 4")]
    assert "REWOUND" in turn3
    assert "RUNNING" in md[md.index("## Turn 4") :]
    # the rewind is noted where it happened: after turn 3, before turn 4
    assert md.index("## Turn 3") < md.index("rewound to turn 1") < md.index("## Turn 4")
    assert "history edit" in md and "rewound to turn 1" in md and "turn 3 set aside" in md
    assert TEST_TOKEN not in md and TEST_TOKEN.split(".")[1] not in md


def test_json_transcript_has_tokens_per_turn(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    sid = build_session(chat_env, ollama, sessions_dir)
    code, out, err = run(chat_env, "export", sid, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["session"] == sid and data["model"] == "qwen3:8b"
    statuses = [(t["number"], t["status"], t["seen_by_model"]) for t in data["turns"]]
    assert statuses == [
        (1, "done", True),
        (2, "failed", False),
        (3, "rewound", False),
        (4, "running", False),
    ]
    first = data["turns"][0]
    assert first["tokens"]["in"] > 0 and first["tokens"]["out"] > 0
    assert first["tool_calls"][0]["name"] == "get_objects"
    assert first["tool_calls"][0]["result_chars"] > 0
    assert data["turns"][1]["rolled_back_messages"] >= 1
    assert data["totals"]["tokens_in"] == sum(t["tokens"]["in"] for t in data["turns"])
    assert data["edits"] == [
        {
            "kind": "rewind",
            "at": data["edits"][0]["at"],
            "after_turn": 1,
            "message_count": 4,
            "messages_before": 6,
            "set_aside": [3],
        }
    ]


def test_export_to_a_file_and_the_errors(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path, tmp_path: Path
) -> None:
    sid = build_session(chat_env, ollama, sessions_dir)
    target = tmp_path / "out.json"
    code, out, err = run(chat_env, "export", sid, "-f", "json", "-o", str(target))
    assert code == 0 and out == "" and f"wrote {target}" in err
    assert json.loads(target.read_text())["session"] == sid
    assert target.stat().st_mode & 0o777 == 0o600

    assert run(chat_env, "export", sid, "--format", "pdf")[0] == 2  # a usage error
    assert run(chat_env, "export", "zzzzzzzz")[0] == 1
    code, _, err = run(chat_env, "export", sid, "-o", str(tmp_path / "no" / "such" / "dir.md"))
    assert code == 1 and "No such file or directory" in err


def test_export_over_an_existing_file_or_symlink_writes_a_new_0600_file(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path, tmp_path: Path
) -> None:
    """Issue 21, item 16: a file readable by everyone before is 0600 after,
    and a symlink is replaced, not written through to where it points."""
    sid = build_session(chat_env, ollama, sessions_dir)
    folder = tmp_path / "out"
    folder.mkdir()
    existing = folder / "transcript.md"
    existing.write_text("old")
    existing.chmod(0o644)
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("someone else's file")
    elsewhere.chmod(0o644)
    link = folder / "link.md"
    link.symlink_to(elsewhere)
    for target in (existing, link):
        code, _, err = run(chat_env, "export", sid, "-o", str(target))
        assert code == 0 and f"wrote {target}" in err
        assert not target.is_symlink() and target.stat().st_mode & 0o777 == 0o600
        assert "devices at Akron?" in target.read_text()
    assert elsewhere.read_text() == "someone else's file"
    assert elsewhere.stat().st_mode & 0o777 == 0o644
    code, _, err = run(chat_env, "export", sid, "-o", str(folder))
    assert code == 1 and f"cannot write {folder}: not a regular file" in err
    assert sorted(p.name for p in folder.iterdir()) == ["link.md", "transcript.md"]


def test_export_masks_a_token_even_if_one_got_into_the_ledger(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    """Belt and braces: the token never reaches a session, but if a tool's
    arguments ever carried it, the export still would not show it."""
    ollama.script([Text("ok")])
    code, out, _ = run(chat_env, "ask", "hi", "--json")
    sid = str(json.loads(out)["session"])
    conn = sqlite3.connect(sessions_dir / f"{sid}.sqlite")
    conn.execute("UPDATE turns SET question = ?", (f"my token is {TEST_TOKEN}",))
    conn.commit()
    conn.close()
    for fmt in ("md", "json"):
        code, text, _ = run(chat_env, "export", sid, "--format", fmt)
        assert code == 0 and TEST_TOKEN not in text and TEST_TOKEN.split(".")[1] not in text
        assert "my token is ***" in text


# --- --tool-results: what each call returned, as /show reads it -------------------------

HOSTILE_SITE = "Evil\x1b]0;pwned\x07 | `x` <b>"


def test_tool_results_are_exported_as_tables_and_errors_readable_and_inert(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble, sessions_dir: Path
) -> None:
    """Issue 25, item 11: `export --tool-results` shows what NetBox returned, a
    list as a Markdown table, an error as text; a site named by someone hostile
    cannot forge a cell, a row or a terminal sequence."""
    netbox.data["dcim/sites"].append(
        {"id": 9, "name": HOSTILE_SITE, "slug": "evil", "status": {"value": "active"}}
    )
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [ToolCall("get_objects", {"object_type": "dcim.site"})],  # no such tool: an error
        [Text("Four sites.")],
    )
    code, out, err = run(chat_env, "ask", "which sites?", "--json")
    assert code == 0, err
    sid = str(json.loads(out)["session"])

    code, plain, _ = run(chat_env, "export", sid)
    assert code == 0 and "Tool results:" not in plain  # only when asked for

    code, md, err = run(chat_env, "export", sid, "--tool-results")
    assert code == 0, err
    lines = md.splitlines()
    first = lines.index('1. `netbox_get_objects` `{"object_type": "dcim.site"}`')
    assert lines[first + 2 : first + 9] == [
        "| id | name | slug | status |",
        "| --- | --- | --- | --- |",
        "| 1 | DM-Akron | dm-akron | active |",
        "| 2 | DM-Columbus | dm-columbus | active |",
        "| 3 | DM-Dayton | dm-dayton | planned |",
        "| 9 | Evil\\x1b\\]0;pwned\\x07 \\| \\`x\\` \\<b> | evil | active |",
        "",
    ]
    assert lines[first + 9] == "_4 rows_"
    second = lines.index('2. `get_objects` `{"object_type": "dcim.site"}` **(error)**')
    assert lines[second + 2] == "```text"
    assert "get_objects is not a valid tool" in lines[second + 3]
    assert "\x1b" not in md and "\x07" not in md and TEST_TOKEN not in md
    # read-only and lock-free: the same while the session is open elsewhere
    with SessionFile.open(SessionStore(sessions_dir), sid):
        before = folder_hash(sessions_dir)
        assert run(chat_env, "export", sid, "--tool-results") == (0, md, "")
        assert folder_hash(sessions_dir) == before

    code, out, err = run(chat_env, "export", sid, "--tool-results", "--format", "json")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    (turn,) = json.loads(out)["turns"]
    listing, failure = turn["tool_results"]
    assert listing["name"] == "netbox_get_objects" and listing["error"] is False
    assert listing["args"] == {"object_type": "dcim.site"}
    assert [site["name"] for site in listing["result"]["results"]] == [
        "DM-Akron",
        "DM-Columbus",
        "DM-Dayton",
        HOSTILE_SITE,
    ]
    assert failure["name"] == "get_objects" and failure["error"] is True
    assert "not a valid tool" in failure["result"]


def test_tool_results_from_either_store_and_none_for_a_rolled_back_turn(
    store_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """From a folder and from PostgreSQL alike, read-only: a rolled-back turn's
    calls are listed from the ledger, and said to have no results kept."""
    ollama.script(
        [
            ToolCall(
                "netbox_get_objects",
                {"object_type": "dcim.device", "filters": {"site": "dm-akron"}},
            )
        ],
        [Text("Three devices.")],
    )
    code, out, err = run(store_env, "ask", "devices at Akron?", "--json")
    assert code == 0, err
    sid = str(json.loads(out)["session"])
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Text("Half an"), StreamError("model crashed")],
    )
    assert run(store_env, "ask", "and the sites?", "--session", sid)[0] == 1

    code, out, err = run(store_env, "export", sid, "-f", "json", "--tool-results")
    assert code == 0, err
    done, failed = json.loads(out)["turns"]
    (devices,) = done["tool_results"]
    assert [row["name"] for row in devices["result"]["results"]] == [
        "dmi01-akron-sw01",
        "dmi01-akron-sw02",
        "dmi01-akron-rtr01",
    ]
    assert failed["status"] == "failed" and failed["tool_calls"]
    assert failed["tool_results"] is None

    code, md, err = run(store_env, "export", sid, "--tool-results")
    assert code == 0, err
    assert "| 3 | dmi01-akron-rtr01 |" in md
    turn2 = md[md.index("## Turn 2") :]
    assert "Tool results: not kept (the turn was rolled back)." in turn2


def test_netbox_text_in_an_exported_table_stays_text_in_a_markdown_viewer(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Issue 32, item 16 (s15): a site description `![x](http://...)` became an image
    every Markdown viewer fetches when the transcript is opened, and `[text](url)` a
    link whose text lies about where it goes."""
    from markdown_it import MarkdownIt  # rich's own Markdown parser

    description = (
        "![status](http://tracker.example/p.png?site=dm-akron) "
        "[netbox.internal/dcim/sites/1](http://phish.example/login) *x* ~~y~~ &amp; <b> "
        "_z_ a_b"
    )
    netbox.data["dcim/sites"][0] = {**netbox.data["dcim/sites"][0], "description": description}
    ollama.script([ToolCall("netbox_get_objects", {"object_type": "dcim.site"})], [Text("Three.")])
    code, out, err = run(chat_env, "ask", "which sites?", "--json")
    assert code == 0, err
    code, md, err = run(chat_env, "export", json.loads(out)["session"], "--tool-results")
    assert code == 0, err
    html = MarkdownIt().enable(["table", "strikethrough"]).render(md)
    assert "<img" not in html and "<a " not in html
    (row,) = [line for line in html.splitlines() if "tracker.example" in line]
    assert row == (
        "<td>![status](http://tracker.example/p.png?site=dm-akron) "
        "[netbox.internal/dcim/sites/1](http://phish.example/login) *x* ~~y~~ &amp;amp; "
        "&lt;b&gt; _z_ a_b</td>"
    )
