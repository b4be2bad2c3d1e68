"""What the REPL draws, through a real pty (issue 25): a long table streamed
in full under its header, a paste made while an answer streams kept for the
next prompt as one question, a cancelled answer marked as discarded with one
clean line under it."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pexpect

from tests.doubles.netbox_double import NetBoxDouble
from tests.doubles.ollama_server import ScriptedOllama, Text, ToolCall
from tests.drive.process import cli, words
from tests.drive.process import first_turn as first_session
from tests.drive.pty import PROMPT, ended, in_a_shell, leave
from tests.drive.screen import answered, chat, on_screen, until_shown


def test_a_long_table_is_drawn_whole_with_every_row_once(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    rows = "".join(f"| {n} | dm-akron-sw{n:03d} | offline |\n" for n in range(1, 61))
    table = "| # | name | status |\n|---|---|---|\n" + rows
    ollama.script([Text(f"**60 devices**:\n\n{table}\nThat is all of them.", chunk_delay=0.002)])
    child, terminal = chat(chat_env)
    host = chat_env["NETBOX_URL"].split("//")[1].rstrip("/")
    banner = terminal.lines()[0]
    assert banner.startswith("netbox-chat session ")
    assert banner.endswith(f" · NetBox {host} · model qwen3:8b")  # which NetBox, which model
    child.sendline("list them")
    child.expect("That is all of them.")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    answer = shown[shown.index("60 devices:") :]
    assert answer[1:4] == ["", "", " #   name            status"]  # the header, once
    found = [line for line in answer if "dm-akron-sw" in line]
    assert found == [f" {n:<3} dm-akron-sw{n:03d}  offline" for n in range(1, 61)]
    assert answer[answer.index(found[-1]) + 1 :][:3] == ["", "", "That is all of them."]


def long_answer(sites: tuple[str, ...], rows: int) -> str:
    """Sections under headings, each a sentence, a table and a short list."""
    parts = []
    for site in sites:
        body = "".join(f"| {n} | {site}-sw{n:03d} | offline |\n" for n in range(1, rows + 1))
        parts.append(
            f"## {site}\n\n**{rows} devices** at {site}:\n\n| # | name | status |\n"
            f"|---|---|---|\n{body}\n- {site} checked just now\n\n"
        )
    return "".join(parts) + "That is every device listed."


def test_a_long_answer_streamed_faster_than_it_is_read_is_drawn_whole_in_order_once(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """No pause between tokens: the REPL reads the lines that wait in fewer
    pieces (coalesce.py), and draws every one of them once, in order, each
    cell whole: row 100 is `100`, though the first rows (1 to 10) fixed the
    columns, where rich's own layout would draw `1…`."""
    sites = ("dm-akron", "dm-camden", "dm-nashua")
    ollama.script([Text(long_answer(sites, 120))])
    child, terminal = chat(chat_env)
    child.sendline("list every offline device")
    child.expect("That is every device listed.")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    rows = [line for line in shown if "-sw" in line]
    assert [row.split() for row in rows] == [
        [str(n), f"{site}-sw{n:03d}", "offline"] for site in sites for n in range(1, 121)
    ]
    for site in sites:
        assert sum(f"{site} checked just now" in line for line in shown) == 1
    last = [i for i, line in enumerate(shown) if "That is every device listed." in line]
    assert len(last) == 1 and last[0] > shown.index(rows[-1])


def test_ctrl_c_in_a_long_answer_streamed_faster_than_it_is_read_rolls_back(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [Text(long_answer(("dm-akron", "dm-camden", "dm-nashua"), 400), chunk_delay=0.0005)],
        [Text("Nothing was kept.")],
    )
    child, terminal = chat(chat_env)
    child.sendline("list every offline device")
    child.expect("dm-akron-sw020")  # well into the answer, long before its end
    child.sendintr()
    child.expect("will not see it")
    child.expect(PROMPT)
    time.sleep(0.3)
    child.sendcontrol("u")  # the cancelled question waits at the prompt, to edit
    answered(child, "what did you keep?", "Nothing was kept.")
    leave(child)
    shown = terminal.lines()
    assert "✗ partial answer discarded" in shown
    assert any(line.startswith("turn 1 cancelled; rolled back") for line in shown)
    assert "That is every device listed." not in "\n".join(shown)
    # The second question went to the model without the discarded answer.
    sent = [m.get("content") or "" for m in ollama.requests[-1]["messages"]]
    assert not any("dm-akron-sw" in content for content in sent)


def terminal_paste(child: pexpect.spawn, screen: io.StringIO, text: str) -> None:
    """What a terminal sends for a paste: marked as one (bracketed) only if the
    program last asked for that (the last of `ESC[?2004h` / `ESC[?2004l` it
    wrote); otherwise the lines as if typed, each ending in Enter."""
    drawn = screen.getvalue()
    if drawn.rfind("\x1b[?2004h") > drawn.rfind("\x1b[?2004l"):
        child.send("\x1b[200~" + text + "\x1b[201~")
    else:
        child.send(text.replace("\n", "\r"))


def test_a_paste_made_while_an_answer_streams_waits_for_the_prompt_as_one_question(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [Text("one two three four five six seven eight", chunk_delay=0.15)],
        [Text("Both noted.")],
    )
    child, terminal = chat(chat_env)
    child.sendline("count to eight")
    child.expect("two")  # streaming
    terminal_paste(child, terminal.written, "which sites are active?\nand which are planned?")
    child.expect("eight")
    child.expect(PROMPT)
    child.expect("and which are planned")  # waiting at the prompt, not sent
    time.sleep(0.3)
    assert len(ollama.requests) == 1
    child.send("\r")
    child.expect("Both noted.")
    child.expect(PROMPT)
    leave(child)
    assert len(ollama.requests) == 2
    question = ollama.requests[-1]["messages"][-1]["content"]
    assert question == "which sites are active?\nand which are planned?"


def test_a_cancelled_answer_stays_struck_through_with_one_line_under_it(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Alpha bravo charlie delta echo foxtrot golf hotel", chunk_delay=0.3)])
    child, terminal = chat(chat_env, columns=60)  # narrower than the outcome line
    child.sendline("spell it")
    child.expect("charlie")
    child.sendintr()
    child.expect("will not see it")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    mark = shown.index("✗ partial answer discarded")
    assert shown[mark - 1].startswith("Alpha bravo charlie")
    assert terminal.struck("Alpha bravo charlie")
    assert shown[mark + 1 : mark + 3] == [  # wrapped between words, by us
        "turn 1 cancelled; rolled back (1 message removed); the model",
        "will not see it",
    ]
    assert not any("cancelling" in line for line in shown)


def test_a_discarded_answers_finished_paragraphs_are_struck_through_too(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """Issue 40, item 8: the first paragraph, printed whole before the
    cancel, stayed as if it were a valid answer; only the one being written
    was struck through."""
    ollama.script(
        [Text("First paragraph done.\n\nSecond one still being written when", chunk_delay=0.3)]
    )
    child, terminal = chat(chat_env)
    child.sendline("two paragraphs")
    child.expect("being")
    child.send("\x1b")  # Esc: as Ctrl-C
    child.expect("will not see it")
    child.expect(PROMPT)
    leave(child)
    assert terminal.struck("First paragraph done.")
    assert terminal.struck("Second one still being")
    shown = terminal.lines()
    assert shown.count("First paragraph done.") == 1  # struck in its place, not printed again


def test_the_chat_without_a_terminal_refuses_with_a_hint_and_writes_no_control_codes(
    chat_env: dict[str, str], sessions_dir: Path
) -> None:
    ran = cli(chat_env, stdin="how many sites?\n", timeout=60)
    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr.strip() == (
        "netbox-chat: the chat needs a terminal (stdin and stdout); in a script or a pipe, "
        'use `netbox-chat ask "QUESTION"`'
    )
    assert not list(sessions_dir.glob("*.sqlite"))  # no session made


def test_history_from_an_earlier_session_tab_completion_and_the_ways_to_leave(
    chat_env: dict[str, str], ollama: ScriptedOllama, tmp_path: Path
) -> None:
    ollama.script([Text("Three sites.")], [Text("Still three.")])
    child, _ = chat(chat_env)
    answered(child, "how many sites?", "Three sites.")
    child.sendline("exit")  # typed alone, it leaves; it is not a question
    child.expect("saved; `netbox-chat resume")
    child.expect(pexpect.EOF)
    assert ended(child) == 0 and len(ollama.requests) == 1
    history = tmp_path / "state" / "netbox-chat" / "history"
    assert history.stat().st_mode & 0o777 == 0o600
    assert history.parent.stat().st_mode & 0o777 == 0o700

    child, terminal = chat(chat_env)  # a new session
    child.sendintr()  # Ctrl-C at the empty prompt
    child.expect_exact("(exit or Ctrl-D to leave)")
    child.expect(PROMPT)
    time.sleep(0.3)
    child.send("\x1b[A\x1b[A")  # ↑ ↑: past `exit`, the question typed in the other session
    child.expect_exact("how many sites?")
    child.send("\r")
    child.expect("Still three.")
    child.expect(PROMPT)
    time.sleep(0.3)
    child.send("/hist\t")
    until_shown(child, terminal, "> /history")  # completed by Tab
    child.send("\r")
    child.expect(r"1 +how many sites\?")
    child.expect(PROMPT)
    leave(child)
    assert ollama.requests[-1]["messages"][-1]["content"] == "how many sites?"


def test_a_model_ollama_does_not_have_is_said_at_the_prompt_before_any_question(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    child, terminal = chat({**chat_env, "NETBOX_CHAT_MODEL": "nosuch:1b"})
    child.expect_exact("Ollama answered 404: model 'nosuch:1b' not found")
    child.expect_exact("`netbox-chat doctor` checks the setup")
    assert ollama.requests == []  # no question was asked
    time.sleep(0.3)
    assert any(
        line == "Ollama answered 404: model 'nosuch:1b' not found · `netbox-chat doctor` "
        "checks the setup"
        for line in terminal.lines()
    )
    leave(child)


def test_show_prints_the_last_turns_tool_calls_with_their_results_as_a_table(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Text("Three sites.")],
    )
    child, terminal = chat(chat_env)
    answered(child, "which sites?", "Three sites.")
    child.sendline("/show")
    child.expect("DM-Dayton")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    start = shown.index("turn 1: 1 tool call")
    assert shown[start + 1 : start + 6] == [
        '  → netbox_get_objects(object_type="dcim.site")',
        "id  name         slug         status",
        "1   DM-Akron     dm-akron     active",
        "2   DM-Columbus  dm-columbus  active",
        "3   DM-Dayton    dm-dayton    planned",
    ]


def test_show_leads_with_the_fields_filtered_on_and_cited_and_names_the_rest(
    chat_env: dict[str, str], ollama: ScriptedOllama, netbox: NetBoxDouble
) -> None:
    """Issue 32, item 9: a full device in NetBox's field order has status past its
    first eight fields, so /show of the evidence for "offline devices" had no
    status column; the fields it left out were not named."""
    fields = ("display", "device_type", "role", "tenant", "platform", "asset_tag", "site")
    netbox.data["dcim/devices"] = [
        {"id": n, "name": f"sw0{n}", **{f: f"{f[:3]}{n}" for f in fields}, "serial": f"FOC{n}",
         "status": {"value": status}}
        for n, status in ((1, "active"), (2, "offline"))
    ]  # fmt: skip
    call = {"object_type": "dcim.device", "filters": {"status": "offline"}}
    ollama.script([ToolCall("netbox_get_objects", call)], [Text("sw02 (serial FOC2) is down.")])
    child, terminal = chat(chat_env)
    answered(child, "which devices are offline?", "is down.")
    child.sendline("/show")
    child.expect("other fields")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    start = shown.index("turn 1: 1 tool call")
    assert shown[start + 2 : start + 5] == [
        "id  name  status   serial  display  device_type  role  tenant",
        "2   sw02  offline  FOC2    dis2     dev2         rol2  ten2",
        "other fields (in export --format json): platform, asset_tag, site",
    ]
    (session,) = (p.stem for p in Path(chat_env["NETBOX_CHAT_SESSIONS"]).glob("*.sqlite"))
    exported = cli(chat_env, "export", session, "--tool-results", check=True).stdout.splitlines()
    assert "| id | name | status | serial | display | device_type | role | tenant |" in exported
    assert "_1 row; other fields (in --format json): platform, asset_tag, site_" in exported


def narrow(env: dict[str, str], question: str, answer: str, command: str) -> list[str]:
    """The screen of a 60-column terminal after `question` was answered and
    `command` drew a table too wide for it."""
    child, terminal = chat(env, columns=60)
    answered(child, question, answer)
    child.sendline(command)
    child.expect("not shown at this width")
    child.expect(PROMPT)
    leave(child)
    return terminal.lines()


def test_show_in_a_narrow_terminal_wraps_cells_and_names_the_columns_left_out(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """At 60 columns a device list's eight columns do not fit whole: cells wrap
    inside their columns, the last columns give way (named under the table),
    and no cell is cut."""
    filters = {"site": "dm-akron", "status": "offline"}
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.device", "filters": filters})],
        [Text("One is offline.")],
    )
    shown = narrow(chat_env, "which devices at DM-Akron are offline?", "One is offline.", "/show")
    start = shown.index("id  name              site      status   role         tenant")
    table = shown[start : shown.index("not shown at this width: primary_ip4, rack")]
    assert table == [
        "id  name              site      status   role         tenant",
        "2   dmi01-akron-sw02  DM-Akron  offline  Access",
        "                                         Switch",
    ]
    assert "…" not in "".join(shown[start:])


def test_tokens_in_a_narrow_terminal_keeps_the_meter_whole(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """/tokens at 60 columns cut its last column, the context meter, mid-number:
    the counts the totals sum up give way first, named under the table."""
    ollama.script([Text("Three sites.")])
    shown = narrow(chat_env, "which sites?", "Three sites.", "/tokens")
    start = shown.index("netbox> /tokens")
    header, row = shown[start + 1].split(), shown[start + 2]
    assert header[:3] == ["turn", "status", "in"] and header[-2:] == ["last", "request"]
    assert re.search(r"context [\d.]+k / 16k \(\d+%\)$", row), row
    assert "not shown at this width: " in shown[start + 4]


def test_a_tool_line_keeps_its_size_and_time_on_its_own_line_in_a_narrow_terminal(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    filters = {"site": "dm-akron", "status": "offline", "role": "access-switch", "q": "sw"}
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.device", "filters": filters})],
        [Text("None offline.")],
    )
    child, terminal = chat(chat_env, columns=72)
    answered(child, "which switches at DM-Akron are offline?", "None offline.")
    leave(child)
    (line,) = [shown for shown in terminal.lines() if "→ netbox_get_objects(" in shown]
    assert line.endswith("s") and " B  " in line  # size and time end the same line
    assert "…)" in line and len(line) <= 72  # the arguments gave way


def test_show_after_compact_still_shows_what_an_early_turn_returned(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """/show N reads turn N's messages where the turn ended, not the head's
    list, which /compact rewrote into a summary and the last exchanges."""
    ollama.script(
        [ToolCall("netbox_get_objects", {"object_type": "dcim.site"})],
        [Text("Three sites.")],
        [Text("Yes, three.")],
        [Text("Still three.")],
        [Text("A summary: three sites.")],
    )
    child, terminal = chat(chat_env)
    for question, answer in [
        ("which sites?", "Three sites."),
        ("sure?", "Yes, three."),
        ("really?", "Still three."),
    ]:
        child.sendline(question)
        child.expect(answer)
        child.expect(PROMPT)
        time.sleep(0.3)
    child.sendline("/compact")
    child.expect("compacted")
    child.expect(PROMPT)
    time.sleep(0.3)
    child.sendline("/show 1")
    child.expect("DM-Dayton")
    child.expect(PROMPT)
    leave(child)
    shown = terminal.lines()
    start = shown.index("turn 1: 1 tool call")
    assert shown[start + 1] == '  → netbox_get_objects(object_type="dcim.site")'
    assert shown[start + 5].startswith("3   DM-Dayton")


def test_model_switches_the_model_for_the_next_questions_and_refuses_one_ollama_lacks(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    ollama.script([Text("Three sites.")], [Text("Still three.")])
    child, _ = chat(chat_env)
    answered(child, "how many sites?", "Three sites.")
    answered(
        child,
        "/model nosuch:1b",
        "Ollama answered 404: model 'nosuch:1b' not found; still qwen3:8b",
    )
    answered(child, "/model qwen2.5:7b", "model qwen2.5:7b from the next question on")
    child.sendline("and now?")
    child.expect("Still three.")
    child.expect(PROMPT)
    leave(child)
    assert [request["model"] for request in ollama.requests] == ["qwen3:8b", "qwen2.5:7b"]
    assert "how many sites?" in str(ollama.requests[-1]["messages"])  # the same conversation


def test_new_leaves_the_session_saved_and_goes_on_in_a_fresh_one(
    chat_env: dict[str, str], ollama: ScriptedOllama, sessions_dir: Path
) -> None:
    ollama.script([Text("Three sites.")], [Text("Two devices.")])
    child, _ = chat(chat_env)
    answered(child, "how many sites?", "Three sites.")
    child.sendline("/new")
    child.expect(r"session (\w+) saved")
    first = child.match.group(1)
    child.expect(r"netbox-chat(?:\x1b\[[0-9;]*m)* session (?:\x1b\[[0-9;]*m)*(\w+)")
    second = child.match.group(1)
    child.expect(PROMPT)
    time.sleep(0.3)
    child.sendline("how many devices?")
    child.expect("Two devices.")
    child.expect(PROMPT)
    leave(child)
    assert first != second
    assert sorted(path.stem for path in sessions_dir.glob("*.sqlite")) == sorted([first, second])
    assert "how many sites?" not in str(ollama.requests[-1]["messages"])  # a fresh conversation


def test_keys_typed_before_the_prompt_is_up_appear_once_at_it_and_are_sent_as_typed(
    chat_env: dict[str, str], ollama: ScriptedOllama
) -> None:
    """`resume --at` rewinds before its prompt, which waits seconds for the
    agent. What is typed meanwhile is not echoed above the recap by the
    terminal: it appears once, at the prompt, and Enter sends it as typed.
    The terminal is given back as it was (echo, line editing) when the chat
    ends, and when a chat is refused before it starts."""
    session_id = first_session(chat_env, ollama)
    ollama.script([Text("Two devices.")])
    chat = words("resume", session_id, "--at", "1")
    child, terminal = on_screen(
        {**chat_env, "COLUMNS": "100", "LINES": "30"},
        *("-c", f"{chat}; stty -a"),
        program=("sh",),
        columns=100,
        lines=30,
        timeout=30,
    )
    assert child.waitnoecho(timeout=30)  # the chat holds the keys from its start
    child.expect(pexpect.TIMEOUT, timeout=0.3)  # what it drew so far, onto the screen
    assert not any(PROMPT.search(line) for line in terminal.lines()), "the prompt was up"
    typed = "and the Devices?"
    child.send(typed)
    child.expect(PROMPT)
    time.sleep(1)  # the recap drawn above the prompt, and the typed keys at it
    child.send("\r")
    child.expect("Two devices.")
    child.expect(PROMPT)
    time.sleep(0.3)
    child.sendcontrol("d")
    child.expect("speed")  # stty -a, run after the chat in the same terminal
    child.expect(pexpect.EOF)
    shown = terminal.lines()
    assert [line for line in shown if typed in line] == [f"netbox> {typed}"]
    questions = [m for m in ollama.requests[-1]["messages"] if m["role"] == "user"]
    assert questions[-1]["content"] == typed
    modes = terminal.written.getvalue().split()
    assert "echo" in modes and "icanon" in modes and "-echo" not in modes

    refused = in_a_shell(
        {k: v for k, v in chat_env.items() if k != "NETBOX_URL"},
        f"{words()}; stty -a",
        columns=80,
        lines=24,
        timeout=30,
    )
    refused.expect(pexpect.EOF)
    assert "NetBox is not configured" in (refused.before or "")
    modes = (refused.before or "").split()
    assert "echo" in modes and "icanon" in modes and "-echo" not in modes
