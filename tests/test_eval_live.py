"""Live tier for `netbox-chat eval`: the question builder against a real
NetBox 4.7.3, and every expected answer recomputed here another way: the
whole listing fetched unfiltered with plain httpx, NetBox's filters applied in
this file by field, so a harness filter NetBox ignored (it answers with the
unfiltered list) or a wrong field would show as a different answer.

    eval "$(grep '^export ' /tmp/nb_up.log)"; .venv/bin/pytest -m live tests/test_eval_live.py
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from netbox_chat.eval.questions import Question, build_questions
from netbox_chat.eval.truth import TruthClient
from tests.doubles.live_netbox import URL, _need_a_real_netbox, auth
from tests.drive.process import cli

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]
__all__ = ["_need_a_real_netbox"]  # its autouse fixture skips (or fails in CI) without NetBox

# Which field of a row each filter the templates use compares, as NetBox's
# filter sets define them (dcim/filtersets.py and friends, 4.7).
FILTER_FIELDS = {
    "site_id": "site.id",
    "role_id": "role.id",
    "tenant_id": "tenant.id",
    "rack_id": "rack.id",
    "device_id": "device.id",
    "vrf_id": "vrf.id",
    "cluster_id": "cluster.id",
    "provider_id": "provider.id",
    "power_panel_id": "power_panel.id",
    "status": "status.value",
    "vid": "vid",
    "user_name": "user_name",
    "changed_object_type": "changed_object_type",
    "changed_object_id": "changed_object_id",
    "address": "address",
    "cable_id": "cable.id",
    "platform_id": "platform.id",
    "circuit_id": "circuit.id",
    "term_side": "term_side",
}
_listings: dict[str, list[dict[str, Any]]] = {}


def listing(path: str) -> list[dict[str, Any]]:
    """Every row of `path`, unfiltered, by `next` links (a different way from the harness)."""
    if path not in _listings:
        rows: list[dict[str, Any]] = []
        url: str | None = f"{URL.rstrip('/')}/api/{path}/?limit=200"
        while url:
            reply = httpx.get(url, headers=auth(), timeout=60)
            reply.raise_for_status()  # a NetBox error says so, not as a missing key
            page = reply.json()
            rows += page["results"]
            url = page["next"]
        _listings[path] = rows
    return _listings[path]


def field(row: Any, dotted: str) -> Any:
    """A dotted field; a choice field (`{"value": ..., "label": ...}`) as its value."""
    for part in dotted.split("."):
        row = row.get(part) if isinstance(row, dict) else None
    return row["value"] if isinstance(row, dict) and {"value", "label"} <= row.keys() else row


def filtered(row: dict[str, Any], key: str, value: str) -> bool:
    """One NetBox filter, applied here to a row of the unfiltered listing."""
    if key == "tag":  # the slug of any tag the object carries
        return any(tag["slug"] == value for tag in row.get("tags") or [])
    if key == "parent":  # the address's host inside the prefix, whatever its VRF
        host = ipaddress.ip_interface(row["address"]).ip
        return host in ipaddress.ip_network(value)
    if key == "interface_id":  # a VLAN the interface carries, untagged or tagged
        (port,) = [i for i in listing("dcim/interfaces") if str(i["id"]) == value]
        carried = [port["untagged_vlan"], *port["tagged_vlans"]]
        return row["id"] in {vlan["id"] for vlan in carried if vlan}
    if key == "site_id" and "a_terminations" in row:  # a cable: where its ends are
        return value in cable_sites(row)
    return str(field(row, FILTER_FIELDS[key])) == value


def cable_sites(cable: dict[str, Any]) -> set[str]:
    """The sites of a cable's ends: an interface's device's site, a circuit
    termination's site (when it terminates at one)."""
    sites = set()
    for end in cable["a_terminations"] + cable["b_terminations"]:
        if end["object_type"] == "dcim.interface":
            (port,) = [i for i in listing("dcim/interfaces") if i["id"] == end["object_id"]]
            (device,) = [d for d in listing("dcim/devices") if d["id"] == port["device"]["id"]]
            sites.add(str(device["site"]["id"]))
        elif end["object_type"] == "circuits.circuittermination":
            (term,) = [t for t in listing("circuits/circuit-terminations")
                       if t["id"] == end["object_id"]]  # fmt: skip
            if term["termination_type"] == "dcim.site":
                sites.add(str(term["termination_id"]))
    return sites


def named(row: dict[str, Any], dotted: str) -> Any:
    if dotted != "name" and not dotted.endswith(".name"):
        return field(row, dotted)
    owner = row if dotted == "name" else field(row, dotted.removesuffix(".name"))
    return (owner.get("name") or owner.get("display")) if isinstance(owner, dict) else None


def recompute(q: Question) -> Any:
    assert q.query is not None
    query = q.query
    kind, _, name = query.take.partition(":")
    if query.single:
        path, oid = query.path.rsplit("/", 1)
        row = httpx.get(f"{URL.rstrip('/')}/api/{path}/{oid}/", headers=auth(), timeout=60).json()
        rows = [row]
    else:
        rows = [
            row for row in listing(query.path) if all(filtered(row, k, v) for k, v in query.params)
        ]
    for where, wanted in query.where:
        negate = where.startswith("!")
        rows = [
            row
            for row in rows
            if ((field(row, where.lstrip("!")) in (None, "")) if wanted is None else
                str(field(row, where.lstrip("!"))) == wanted) != negate
        ]  # fmt: skip
    if kind == "count":
        return len(rows)
    # An object without a name (the demo's unnamed devices, here or at the far end
    # of a cable) is listed as NetBox displays it: read here from the row, not
    # through truth.label.
    values = [named(row, name) for row in rows]
    if kind == "list":
        return sorted(str(v) for v in values if v not in (None, ""))
    if kind == "distinct":
        return sorted({str(v) for v in values if v not in (None, "")})
    return str(values[0])


def as_expected(q: Question, truth: Any) -> Any:
    if q.kind == "absence":
        return None if truth in ([], 0, None) else truth
    if q.kind == "boolean":
        return {"yes": not truth, "exceptions": sorted(truth)}
    if q.kind == "explanation":
        return q.expected  # a reference built from the row; its query reads the name
    return truth


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    with TruthClient(URL, os.environ["NETBOX_TOKEN"]) as client:
        return build_questions(client, seed=11, per_template=3).questions


def test_every_expected_answer_recomputes_the_same_another_way(questions: list[Question]) -> None:
    assert len(questions) >= 20
    assert {q.tier for q in questions} == {"simple", "medium", "advanced"}
    wrong = {
        q.id: (q.expected, as_expected(q, recompute(q)))
        for q in questions
        if as_expected(q, recompute(q)) != q.expected
    }
    assert wrong == {}


def test_list_json_against_the_real_netbox_asks_no_model(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OLLAMA_HOST": "http://127.0.0.1:9",  # nothing listens: no model may be asked
        "XDG_CONFIG_HOME": str(tmp_path),
    }
    done = cli(env, "eval", "--list", "--json", "--seed", "11", timeout=300)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["questions"]
    assert all(q["query"]["text"].startswith("GET /api/") for q in listed)
    assert {"false-premise", "absence"} <= {q["trap"] for q in listed}


def test_eval_runs_end_to_end_on_the_real_netbox(tmp_path: Path) -> None:
    """`netbox-chat eval --model M` with the scripted Ollama as M and the real
    NetBox as both the agent's and the harness's: the oracle scores 100 %."""
    from tests.doubles.eval_models import MODELS, personas
    from tests.doubles.ollama_server import ScriptedOllama

    with TruthClient(URL, os.environ["NETBOX_TOKEN"]) as client:
        built = build_questions(client, seed=5, per_template=1).questions
    with ScriptedOllama(models=MODELS) as ollama:
        ollama.responder = personas(built)
        env = {
            **os.environ,
            "OLLAMA_HOST": ollama.url,
            "XDG_CONFIG_HOME": str(tmp_path),
            "NETBOX_CHAT_EVAL_RUNS": str(tmp_path / "runs"),
        }
        done = cli(
            env, "eval", "-m", "oracle", "--seed", "5", "--per-template", "1", "--json", timeout=500
        )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    scored = len([q for q in built if q.kind != "explanation"])
    assert report["models"]["oracle"]["correct"]["right"] == scored
    assert report["models"]["oracle"]["correct"]["rate"] == 1.0
