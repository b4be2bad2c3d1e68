"""`netbox-chat eval` on a NetBox that is slow or failing: the real CLI against
the NetBox double with endpoints that time out or answer 5xx (its `faults`).

A read that fails is a failure, never "no data": what needs it is left out
and said so (stderr, `--list --json`, the report's header in Markdown and
JSON); a read that recovers (a retry, a smaller page) changes nothing, so the
same seed builds the same questions under any load; 403 and 404 are "no
data", by name; a run records what data its questions came from, and
`--resume` says when that data has changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.eval_models import MODELS
from tests.doubles.netbox_double import Fault, NetBoxDouble
from tests.doubles.ollama_server import Reply, ScriptedOllama, Text, by_question
from tests.drive.runner import invoke

pytestmark = pytest.mark.timeout(300)

INTERFACE_TEMPLATES = {
    # their drafts are drawn from the interfaces
    "cable-peer", "cable-circuit", "interface-mode", "untagged-vlan", "interface-vlans",
    # their truth counts interfaces
    "device-interfaces", "cabled-interfaces",
    # its wrong names are the interfaces
    "ip-interface",
}  # fmt: skip
"""The templates that read GET /api/dcim/interfaces/ (questions.py)."""


@pytest.fixture
def eval_env(chat_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    # a short time-out, so a hanging endpoint costs the test seconds, not minutes
    return {**chat_env, "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs"), "NETBOX_TIMEOUT": "0.5"}


def listing(env: dict[str, str], *args: str) -> tuple[dict[str, Any], str]:
    result = invoke(["eval", "--list", "--json", *args], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_an_endpoint_that_keeps_timing_out_leaves_out_exactly_its_templates_and_says_so(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    clean, _ = listing(eval_env, "--seed", "3")
    assert clean["left_out"] == {}
    netbox.faults["dcim/interfaces"] = Fault()  # every request hangs
    slow, stderr = listing(eval_env, "--seed", "3")
    assert set(slow["left_out"]) == INTERFACE_TEMPLATES
    assert all(
        "/api/dcim/interfaces/" in why and "timed out" in why for why in slow["left_out"].values()
    )
    # The others are the very questions of a clean run: nothing half-built.
    kept = [q for q in clean["questions"] if q["template"] not in INTERFACE_TEMPLATES]
    assert slow["questions"] == kept
    assert not set(slow["no_data"]) & INTERFACE_TEMPLATES
    assert "left out, a read failed: " in stderr and "cable-peer" in stderr
    assert "GET /api/dcim/interfaces/ timed out" in stderr
    # A page that timed out was asked again smaller before the read was given up.
    limits = {r.split("limit=")[1].split("&")[0] for r in netbox.disconnects if "limit=" in r}
    assert {"1000", "250", "50"} <= limits


def test_reads_that_recover_build_the_same_questions_as_a_quiet_netbox(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    quiet, _ = listing(eval_env, "--seed", "5")
    netbox.faults.update(
        {
            "dcim/interfaces": Fault(above=100),  # a big page hangs, a small one is served
            "dcim/devices": Fault(status=503, times=2),  # two 503s, then served
            "ipam/vlans": Fault(status=502, times=1),
            "circuits/circuits": Fault(times=1),  # one time-out, then served
        }
    )
    loaded, stderr = listing(eval_env, "--seed", "5")
    assert loaded["left_out"] == {}
    assert loaded["questions"] == quiet["questions"]
    assert "left out" not in stderr
    assert all(f.struck for f in netbox.faults.values())


def test_a_type_netbox_refuses_or_lacks_is_no_data_by_name(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    netbox.forbidden.add("ipam/vrfs")
    del netbox.data["dcim/cables"]  # an endpoint this NetBox does not have: 404
    listed, stderr = listing(eval_env, "--seed", "0")
    assert listed["left_out"] == {}
    assert {"vrf-rd", "vrf-active-prefixes", "vrf-active-ips", "site-cables"} <= set(
        listed["no_data"]
    )
    assert "HTTP 403 (the token may not view it)" in listed["absent"]["ipam/vrfs"]
    assert "HTTP 404" in listed["absent"]["dcim/cables"]
    assert "no data for: " in stderr and "ipam/vrfs: NetBox answered" in stderr


@pytest.fixture
def models(ollama: ScriptedOllama) -> ScriptedOllama:
    ollama.models.update(MODELS)
    return ollama


def says_four(model: str, question: str, after_tool: bool) -> Reply:
    return [Text("There are 4.")]


@pytest.mark.long
def test_the_report_header_says_what_was_left_out_and_resume_says_when_data_changed(
    eval_env: dict[str, str], netbox: NetBoxDouble, models: ScriptedOllama, tmp_path: Path
) -> None:
    models.responder = by_question(says_four)
    netbox.faults["dcim/power-feeds"] = Fault(status=500)  # every try a 500
    mine = tmp_path / "mine.toml"
    mine.write_text('[[question]]\ntext = "How many sites?"\nkind = "count"\nexpected = 3\n')
    args = ["eval", "-m", "oracle", "--per-template", "1", "--questions", str(mine)]
    # A run of only the file's question still records the data it came from.
    only = invoke(
        [*args[:3], "--per-template", "0", "--questions", str(mine), "--json"], env=eval_env
    )
    assert only.exit_code == 0, only.output
    alone = json.loads(
        (tmp_path / "runs" / json.loads(only.stdout)["run"] / "run.json").read_text()
    )
    assert alone["data"]["dcim/sites"] == {"count": 3, "last_change": None}
    result = invoke([*args, "--json"], env=eval_env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    left = {"feed-panel", "panel-feeds"}
    assert set(report["left_out"]) == left
    assert "HTTP 500 (3 tries)" in report["left_out"]["feed-panel"]
    assert "2 templates left out, a read failed" in result.stderr
    run = tmp_path / "runs" / report["run"]
    header = (run / "report.md").read_text().split("\n## ")[0]
    assert "Left out, a read failed: feed-panel, panel-feeds (NetBox answered GET " in header
    plan = json.loads((run / "run.json").read_text())
    assert plan["left_out"] == report["left_out"]
    assert plan["data"]["dcim/devices"] == {"count": 6, "last_change": None}
    assert "failed" in plan["data"]["dcim/power-feeds"]
    # Resumed on the same data: nothing said; on changed data: said, truth kept.
    same = invoke(["eval", "--resume", report["run"]], env=eval_env)
    assert same.exit_code == 0, same.output
    assert "changed since" not in same.stderr
    netbox.data["dcim/devices"].append({**netbox.data["dcim/devices"][0], "id": 99, "name": "new"})
    changed = invoke(["eval", "--resume", report["run"]], env=eval_env)
    assert changed.exit_code == 0, changed.output
    assert "NetBox's data changed since this run was built (dcim/devices)" in changed.stderr
    assert json.loads((run / "run.json").read_text())["questions"] == plan["questions"]


def test_limit_asks_n_questions_spread_over_the_templates_the_same_for_the_same_seed(
    eval_env: dict[str, str], netbox: NetBoxDouble
) -> None:
    full, _ = listing(eval_env, "--seed", "2")
    requests = len(netbox.requests)
    five, _ = listing(eval_env, "--seed", "2", "--limit", "5")
    assert len(five["questions"]) == 5
    assert len({q["template"] for q in five["questions"]}) == 5  # one from each of five
    assert len(netbox.requests) - requests < requests  # only the templates needed are built
    again, _ = listing(eval_env, "--seed", "2", "--limit", "5")
    assert again["questions"] == five["questions"]
    other, _ = listing(eval_env, "--seed", "9", "--limit", "5")
    assert other["questions"] != five["questions"]
    # past the number of templates: a second question of each, then a third
    templates = {q["template"] for q in full["questions"]}
    more, _ = listing(eval_env, "--seed", "2", "--limit", str(len(templates) + 3))
    assert len(more["questions"]) == len(templates) + 3
    assert {q["template"] for q in more["questions"]} == templates
    assert all(q in full["questions"] for q in more["questions"])
