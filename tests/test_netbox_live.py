"""Live tier: the NetBox tools against a real NetBox 4.7.3 (scripts/netbox_up.sh).

    eval "$(scripts/netbox_up.sh | grep ^export)"
    .venv/bin/pytest -m live

Every filter the tools reject is shown here, with a raw request, to be one NetBox
really ignores (it answers with the unfiltered list), so the test documents why we
reject it. Counts are those of scripts/netbox_seed.py's data.

Without NETBOX_URL/NETBOX_TOKEN the tier is skipped, loudly; with
NETBOX_CHAT_REQUIRE_LIVE=1 (CI) every live test fails instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

import httpx
import pytest

from netbox_chat.netbox import (
    NetBoxAuthError,
    NetBoxBadRequest,
    NetBoxClient,
    NetBoxNoEndpoint,
    NetBoxNotFound,
)
from netbox_chat.netbox.object_types import shipped_table
from netbox_chat.netbox.schema import derive_table
from netbox_chat.netbox.tools import DEFAULT_FIELDS, build_netbox_tools
from netbox_chat.netbox.validation import FilterRejected, build_params, check_ordering
from tests.doubles.filter_tables import CUSTOM, CUSTOM_IGNORED, DEVICE_UPDATES, HONOURED, IGNORED
from tests.doubles.live_netbox import TOKEN, URL, Counting, _need_a_real_netbox, auth
from tests.drive.runner import invoke

__all__ = ["_need_a_real_netbox"]  # its autouse fixture skips (or fails in CI) without NetBox

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

TOKEN_V1 = os.environ.get("NETBOX_TOKEN_V1", "")


T = shipped_table()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def raw(path: str, params: Sequence[tuple[str, str]] = ()) -> httpx.Response:
    """What a naive client would get: the query sent as-is."""
    return httpx.get(
        f"{URL.rstrip('/')}/api/{path}/", params=list(params), headers=auth(), timeout=30
    )


def raw_count(path: str, params: Sequence[tuple[str, str]] = ()) -> int:
    r = raw(path, params)
    assert r.status_code == 200, (path, params, r.status_code, r.text[:300])
    return int(r.json()["count"])


def raw_ids(path: str, params: Sequence[tuple[str, str]] = ()) -> list[int]:
    r = raw(path, [*params, ("limit", "1000"), ("brief", "true")])
    assert r.status_code == 200, r.text[:300]
    return [o["id"] for o in r.json()["results"]]


async def call(tool: str, args: dict[str, Any], **client_kw: Any) -> tuple[str, Counting]:
    counting = Counting()
    client = NetBoxClient(URL, client_kw.pop("token", TOKEN), transport=counting, **client_kw)
    tools = {t.name: t for t in build_netbox_tools(client)}
    await tools["netbox_get_objects"].ainvoke({"object_type": "dcim.region"})  # warm: status check
    counting.sent.clear()
    out = await tools[tool].ainvoke(args)
    await client.aclose()
    return out, counting


def get_objects(args: dict[str, Any]) -> tuple[str, Counting]:
    return run(call("netbox_get_objects", args))


# ------------------------------------------------------------------ filters NetBox ignores

PATHS = {ot: T.resolve(ot).path for ot in ("dcim.device", "dcim.interface", "dcim.site", "ipam.ipaddress", "ipam.prefix", "ipam.vlan")}  # fmt: skip


@pytest.mark.parametrize(
    ("object_type", "filters", "must_say", "naive"),
    IGNORED,
    ids=[json.dumps(c[1]) for c in IGNORED],
)
def test_ignored_filter_is_rejected_and_netbox_really_ignores_it(
    object_type, filters, must_say, naive
):
    path = PATHS.get(object_type) or T.resolve(object_type).path
    everything = raw_count(path)
    # why we reject: NetBox answers the naive query with the whole list
    assert raw_count(path, naive) == everything, f"NetBox no longer ignores {naive}"
    out, counting = get_objects({"object_type": object_type, "filters": filters})
    assert out.startswith("Error: ") and "\n" not in out, out
    assert must_say in out, out
    assert counting.sent == [], "a rejected filter reached NetBox"


def test_single_value_filter_with_a_list_keeps_only_the_last():
    path = PATHS["dcim.interface"]
    only_false = raw_count(path, [("enabled", "false")])
    only_true = raw_count(path, [("enabled", "true")])
    assert only_false != only_true
    assert raw_count(path, [("enabled", "false"), ("enabled", "true")]) == only_true  # 'false' lost
    out, counting = get_objects(
        {"object_type": "dcim.interface", "filters": {"enabled": [False, True]}}
    )
    assert "takes a single value" in out and counting.sent == []
    dev = PATHS["dcim.device"]
    assert raw_count(dev, [("q", "akron"), ("q", "columbus")]) == raw_count(
        dev, [("q", "columbus")]
    )
    out, counting = get_objects(
        {"object_type": "dcim.device", "filters": {"q": ["akron", "columbus"]}}
    )
    assert "takes a single value" in out and counting.sent == []


def test_booleans_are_normalized_to_what_netbox_reads():
    path = PATHS["dcim.interface"]
    assert raw_count(path, [("enabled", "0")]) == raw_count(path)  # NetBox ignores '0' ...
    out, counting = get_objects({"object_type": "dcim.interface", "filters": {"enabled": "0"}})
    assert (
        json.loads(out)["count"] == raw_count(path, [("enabled", "false")]) == 11
    )  # ... we send false
    assert counting.sent[0].url.params["enabled"] == "false"


def test_unknown_ordering_is_rejected_and_netbox_really_ignores_it():
    path = PATHS["dcim.device"]
    default_order = raw_ids(path)
    assert raw_ids(path, [("ordering", "bogus")]) == default_order
    assert raw_ids(path, [("ordering", "primary_ip")]) == default_order  # a property, not a column
    assert raw_ids(path, [("ordering", "-name")]) != default_order
    for bad in ("bogus", "primary_ip"):
        out, counting = get_objects({"object_type": "dcim.device", "ordering": bad})
        assert out.startswith("Error: Cannot order dcim.device") and counting.sent == []


def test_unknown_fields_are_rejected_and_netbox_really_drops_them():
    r = raw(PATHS["dcim.device"], [("fields", "name,hostname"), ("limit", "1")])
    assert r.status_code == 200 and set(r.json()["results"][0]) == {"name"}
    out, counting = get_objects({"object_type": "dcim.device", "fields": ["name", "hostname"]})
    assert "Unknown field(s) for dcim.device: 'hostname'" in out and counting.sent == []


def test_unknown_object_type_names_the_closest():
    out, counting = get_objects({"object_type": "dcim.devce"})
    assert out.startswith("Error: Unknown object_type 'dcim.devce'") and "dcim.device" in out
    assert counting.sent == []


# ------------------------------------------------------------------ filters NetBox honours


@pytest.mark.parametrize(
    ("object_type", "filters", "expected"), HONOURED, ids=[json.dumps(c[1]) for c in HONOURED]
)
def test_valid_filter_is_sent_and_honoured(object_type, filters, expected):
    ot = T.resolve(object_type)
    params = build_params(ot, filters, T)
    assert raw_count(ot.path, params) == expected < raw_count(ot.path)
    out, counting = get_objects({"object_type": object_type, "filters": filters})
    assert json.loads(out)["count"] == expected, out
    assert len(counting.sent) == 1 and counting.sent[0].method == "GET"


def test_bad_value_for_a_real_filter_is_refused_with_its_values_or_netboxs_400_in_one_line():
    # NetBox's own 400 names no valid value; the table's choices do, before any request.
    assert raw("dcim/devices", [("status", "broken")]).status_code == 400
    out, counting = get_objects({"object_type": "dcim.device", "filters": {"status": "broken"}})
    assert out.startswith("Error: 'status': 'broken' is not a value of dcim.device's status")
    assert "Its values: offline, active, planned" in out and counting.sent == []
    out, _ = get_objects({"object_type": "dcim.device", "filters": {"created__gte": "yesterday"}})
    assert out == (
        "Error: NetBox answered 400: 'created__gte' 'yesterday' refused by NetBox: "
        "Enter a valid date/time."
    )

    async def go():
        async with NetBoxClient(URL, TOKEN) as c:
            with pytest.raises(NetBoxBadRequest) as ei:
                await c.get("dcim/devices", [("site", "dm-nowhere")])
            return ei.value

    err = run(go())
    assert err.status == 400 and "site" in err.detail


# ------------------------------------------------------------------ results


def test_pagination_walks_every_interface_once():
    total = raw_count(PATHS["dcim.interface"])
    assert total == 33
    ids: list[int] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        out, _ = get_objects(
            {"object_type": "dcim.interface", "limit": 10, "offset": offset, "ordering": "id"}
        )
        page = json.loads(out)
        assert page["count"] == total and page["offset"] == offset
        ids += [r["id"] for r in page["results"]]
        offset = page["next_offset"]
        pages += 1
    assert pages == 4 and len(ids) == len(set(ids)) == total and ids == sorted(ids)


def test_default_limit_and_cap():
    out, counting = get_objects({"object_type": "dcim.interface"})
    page = json.loads(out)
    assert page["returned"] == 10 and page["next_offset"] == 10 and page["count"] == 33
    out, counting = get_objects({"object_type": "dcim.interface", "limit": 5000})
    page = json.loads(out)
    assert counting.sent[0].url.params["limit"] == "100" and page["note"] == "limit capped at 100"
    assert page["returned"] == 33


def test_brief_fields_and_default_fields():
    out, _ = get_objects({"object_type": "dcim.device", "brief": True, "limit": 2})
    for r in json.loads(out)["results"]:
        assert set(r) <= {"id", "display", "name", "description"}
    out, _ = get_objects({"object_type": "dcim.device", "fields": ["name", "status"], "limit": 2})
    for r in json.loads(out)["results"]:
        assert set(r) == {"id", "name", "status"}
    out, _ = get_objects(
        {"object_type": "dcim.device", "limit": 1, "filters": {"name": "dmi01-akron-sw02"}}
    )
    d = json.loads(out)["results"][0]
    assert d["status"] == "offline" and d["site"]["slug"] == "dm-akron" and "url" not in d


@pytest.mark.parametrize("object_type", sorted(DEFAULT_FIELDS))
def test_default_field_sets_are_accepted_by_netbox(object_type):
    ot = T.resolve(object_type)
    r = raw(ot.path, [("fields", ",".join(DEFAULT_FIELDS[object_type])), ("limit", "1")])
    assert r.status_code == 200, r.text[:300]


def test_object_by_id_and_both_404s():
    out, _ = run(call("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 2}))
    assert json.loads(out)["object"]["name"] == "dmi01-akron-sw02"
    out, _ = run(
        call("netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 999999})
    )
    assert out == (
        "Error: No such object (/api/dcim/devices/999999/): "
        "NetBox says 'No Device matches the given query.'."
    )
    # the two kinds of 404, as NetBox sends them
    r = raw("dcim/devices/999999")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    r = raw("dcim/no-such-endpoint")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")

    async def go():
        async with NetBoxClient(URL, TOKEN) as c:
            with pytest.raises(NetBoxNotFound):
                await c.get("dcim/devices/999999")
            with pytest.raises(
                NetBoxNoEndpoint, match="no API endpoint /api/dcim/no-such-endpoint/"
            ):
                await c.get("dcim/no-such-endpoint")

    run(go())


def test_search():
    out, counting = run(call("netbox_search_objects", {"query": "akron"}))
    s = json.loads(out)
    assert s["results"]["dcim.device"]["count"] == 5
    assert s["results"]["dcim.site"]["results"][0]["display"] == "DM-Akron"
    assert all(r.method == "GET" and r.url.params["q"] == "akron" for r in counting.sent)
    out, _ = run(
        call("netbox_search_objects", {"query": "10.20.100", "object_types": ["ipam.ipaddress"]})
    )
    assert json.loads(out)["results"]["ipam.ipaddress"]["count"] == 3
    out, counting = run(call("netbox_search_objects", {"query": "  "}))
    assert out.startswith("Error: query is empty") and counting.sent == []


def test_changelog():
    out, _ = run(
        call(
            "netbox_get_changelogs",
            {"filters": {"changed_object_type": "dcim.device", "action": "update"}, "limit": 20},
        )
    )
    c = json.loads(out)
    assert c["count"] == c["returned"] == DEVICE_UPDATES
    taken_offline = [e for e in c["results"] if "status" in e["changes"]]
    assert {e["object_repr"] for e in taken_offline} == {
        "dmi01-akron-sw02",
        "dmi01-akron-sw03",
        "dmi01-columbus-sw02",
    }
    assert all(e["changes"]["status"] == ["active", "offline"] for e in taken_offline)
    assert all(set(e["changes"]) == {"platform"} for e in c["results"] if e not in taken_offline)
    out, _ = run(call("netbox_get_changelogs", {"limit": 3}))
    c = json.loads(out)
    assert c["returned"] == 3 and c["next_offset"] == 3 and c["count"] > 50
    out, counting = run(call("netbox_get_changelogs", {"filters": {"object_type": "dcim.device"}}))
    assert "'object_type' is not a core.objectchange filter" in out and counting.sent == []


# ------------------------------------------------------------------ refusals lead to answers

# Issue 14, section 2: a refused filter, and how many objects the seed has for what it
# meant. The refusal's first suggestion, sent as it is, must give that count.
MEANT = [
    ("ipam.ipaddress", {"ip": "10.10.100.1/24"}, 1),
    ("ipam.vlan", {"vlan_id": 100}, 3),
    ("ipam.prefix", {"vid": 100}, 2),
    ("ipam.prefix", {"vlan__vid": 100}, 2),
    ("dcim.interface", {"device_name": "dmi01-akron-sw01"}, 3),
    ("dcim.device", {"site__region__slug": "ohio"}, 11),
    ("dcim.device", {"hostname": "dmi01-akron-sw01"}, 1),
    ("dcim.device", {"site_name": "dm-akron"}, 5),
]


@pytest.mark.parametrize(
    ("object_type", "filters", "count"), MEANT, ids=[json.dumps(m[1]) for m in MEANT]
)
def test_the_first_suggestion_gives_the_right_answer(object_type, filters, count):
    ((_, value),) = filters.items()
    out, counting = get_objects({"object_type": object_type, "filters": filters})
    assert out.startswith("Error: ") and counting.sent == [], out
    found = re.search(r"(?:Closest: |own filter )([a-z_]+)", out)
    assert found, out
    again, _ = get_objects({"object_type": object_type, "filters": {found.group(1): value}})
    assert json.loads(again)["count"] == count, (out, again)


def test_changes_to_devices_by_the_suggested_filter():
    out, _ = run(call("netbox_get_changelogs", {"object_type": "dcim.device", "action": "update"}))
    assert "changed_object_type" in out.split("Closest:")[1].split(",")[0], out
    again, _ = run(
        call("netbox_get_changelogs", {"changed_object_type": "dcim.device", "action": "update"})
    )
    assert json.loads(again)["count"] == DEVICE_UPDATES


@pytest.mark.parametrize(
    ("object_type", "term"),
    [("ipam.ipaddress", "assigned_object"), ("core.objectchange", "changed_object"),
     ("core.objectchange", "postchange_data_clean")],
)  # fmt: skip
def test_ordering_netbox_cannot_sort_by_is_refused_before_it_500s(object_type, term):
    path = T.resolve(object_type).path
    assert raw(path, [("ordering", term), ("limit", "1")]).status_code == 500
    out, counting = get_objects({"object_type": object_type, "ordering": term})
    assert out.startswith(f"Error: Cannot order {object_type} by '{term}'") and counting.sent == []


def test_a_flattened_filter_is_applied_by_the_real_netbox():
    out, counting = get_objects(
        {"object_type": "dcim.device", "site": "dm-akron", "status": "offline"}
    )
    answer = json.loads(out)
    assert (
        answer["count"]
        == 2
        == raw_count(PATHS["dcim.device"], [("site", "dm-akron"), ("status", "offline")])
    )
    assert "site, status (given at the top level) read as filters" in answer["note"]
    assert ("site", "dm-akron") in counting.sent[0].url.params.multi_items()


def test_a_capitalised_filter_is_sent_as_netboxs_name():
    """NetBox ignores ``Status`` (all devices); the tools send ``status``."""
    path = PATHS["dcim.device"]
    assert raw_count(path, [("Status", "offline")]) == raw_count(path)
    out, _ = get_objects({"object_type": "dcim.device", "filters": {"Status": "offline"}})
    assert json.loads(out)["count"] == raw_count(path, [("status", "offline")]) == 3


# ------------------------------------------------------------------ the user's own NetBox


@pytest.mark.parametrize(
    ("filters", "raw_query", "count"), CUSTOM, ids=[json.dumps(c[0]) for c in CUSTOM]
)
def test_custom_field_filters_are_honoured(filters, raw_query, count):
    path = PATHS["dcim.site"]
    assert raw_count(path, raw_query) == count != raw_count(path)  # NetBox really filters
    out, _ = get_objects({"object_type": "dcim.site", "filters": filters})
    assert json.loads(out)["count"] == count, out


@pytest.mark.parametrize(
    ("filters", "must_say"),
    CUSTOM_IGNORED,
)
def test_custom_field_filters_netbox_ignores_are_refused(filters, must_say):
    ((key, value),) = filters.items()
    path = PATHS["dcim.site"]
    naive = [(key, "true" if value is True else str(value))]
    assert raw_count(path, naive) == raw_count(path), f"NetBox no longer ignores {naive}"
    out, counting = get_objects({"object_type": "dcim.site", "filters": filters})
    sent = [r.url.path for r in counting.sent]
    assert sent == ["/api/extras/custom-fields/"], sent  # what the tools read, nothing else
    assert out.startswith("Error: ") and must_say in out, out


def test_a_plugin_object_type_is_learned_from_the_servers_schema():
    """tests/netbox/plugin/netbox_chat_demo: not in the shipped table, read from this
    NetBox's /api/schema/ and named as NetBox names it (/api/core/object-types/)."""
    assert "netbox_chat_demo.widget" not in T.types
    path = "plugins/chat-demo/widgets"
    out, _ = get_objects({"object_type": "netbox_chat_demo.widget", "colour": "red"})
    answer = json.loads(out)
    assert answer["count"] == 2 == raw_count(path, [("colour", "red")])
    assert {r["name"] for r in answer["results"]} == {"w-red-1", "w-red-2"}
    out, _ = get_objects({"object_type": "widgets", "filters": {"size__gte": 2}})
    assert json.loads(out)["count"] == 2
    # still refusing what it would ignore
    assert raw_count(path, [("color", "red")]) == raw_count(path) == 3
    out, counting = get_objects({"object_type": "netbox_chat_demo.widget", "color": "red"})
    assert out.startswith("Error: 'color' is not a netbox_chat_demo.widget filter")
    assert "colour" in out and counting.sent == []
    found, _ = run(
        call(
            "netbox_search_objects", {"query": "blue", "object_types": ["netbox_chat_demo.widget"]}
        )
    )
    assert json.loads(found)["results"]["netbox_chat_demo.widget"]["count"] == 1


# ------------------------------------------------------------------ tokens


def test_bad_token_is_403_and_reported_once():
    bad = "nbt_badkey000001.thisisnotthesecret0000000000000000000000"
    r = httpx.get(f"{URL}/api/dcim/devices/", headers=auth(bad), timeout=30)
    assert r.status_code == 403 and r.json() == {"detail": "Invalid v2 token"}

    async def go():
        client = NetBoxClient(URL, bad)
        tools = {t.name: t for t in build_netbox_tools(client)}
        outs = [
            await tools["netbox_get_objects"].ainvoke({"object_type": "dcim.device"}),
            await tools["netbox_get_object_by_id"].ainvoke(
                {"object_type": "dcim.device", "object_id": 1}
            ),
        ]
        with pytest.raises(NetBoxAuthError, match="Invalid v2 token"):
            await client.status()
        outage = client.take_outage()
        await client.aclose()
        return outs, outage

    outs, outage = run(go())
    assert outage is not None and "403: Invalid v2 token" in str(outage)
    for o in outs:
        assert o.startswith("Error: NetBox refused the request (403: Invalid v2 token)")
        assert bad not in o and "thisisnotthesecret" not in o


def test_no_token_and_a_refused_one_are_told_apart_by_netbox_s_own_words():
    async def go() -> dict[bool, str]:
        causes = {}
        for token in (None, "nbt_badkey000001.thisisnotthesecret0000000000000000000000"):
            client = NetBoxClient(URL, token)
            with pytest.raises(NetBoxAuthError) as caught:
                await client.get("dcim/devices")
            causes[token is None] = caught.value.cause
            await client.aclose()
        return causes

    assert run(go()) == {True: "missing", False: "refused"}


def test_v1_token_goes_as_token_header():
    if not TOKEN_V1:
        pytest.skip("NETBOX_TOKEN_V1 not set (scripts/netbox_up.sh prints it)")
    out, counting = get_objects({"object_type": "dcim.site"})
    assert json.loads(out)["count"] == 4

    async def go():
        counting = Counting()
        async with NetBoxClient(URL, TOKEN_V1, transport=counting) as c:
            status = await c.status()
        return status, counting

    status, counting = run(go())
    assert status["netbox-version"] == "4.7.3"
    assert counting.sent[0].headers["authorization"] == f"Token {TOKEN_V1}"


def test_status_for_doctor():
    async def go():
        async with NetBoxClient(URL, TOKEN) as c:
            return await c.status()

    assert run(go())["netbox-version"] == T.netbox_version


# ------------------------------------------------------------------ the shipped table


def test_shipped_filter_table_matches_the_live_schema():
    async def go():
        async with NetBoxClient(URL, TOKEN) as c:
            return await c.schema()

    live = derive_table(run(go()), plugins=False)  # the shipped table is NetBox's own
    shipped = json.loads(resources.files("netbox_chat.netbox").joinpath("filters.json").read_text())
    assert live["netbox_version"] == shipped["netbox_version"]
    assert live["lookup_sets"] == shipped["lookup_sets"]
    assert set(live["types"]) == set(shipped["types"])
    for name, entry in shipped["types"].items():
        without_ordering = {k: v for k, v in entry.items() if k != "ordering"}
        assert live["types"][name] == without_ordering, name


def test_shipped_ordering_terms_are_honoured():
    """Ordering is not in the schema (it came from NetBox itself): spot-check it."""
    path = PATHS["dcim.device"]
    default_order = raw_ids(path)
    ot = T.resolve("dcim.device")
    for term in ("name", "-name", "serial", "-id", "site", "status", "interface_count"):
        check_ordering(ot, term)
    assert raw_ids(path, [("ordering", "-id")]) == sorted(default_order, reverse=True)
    assert raw_ids(path, [("ordering", "serial")]) != default_order
    with pytest.raises(FilterRejected):
        check_ordering(ot, "primary_ip")


# ------------------------------------------------------------------ real models (issue 24)


def test_a_display_name_where_netbox_wants_a_slug_or_id_is_resolved():
    """Recorded: tenant 'Dunder-Mifflin, Inc.' (NetBox 400). Naive: 400; the tool: the slug."""
    assert raw("dcim/devices", [("tenant", "Globex Corp.")]).status_code == 400
    out, counting = get_objects({"object_type": "dcim.device", "filters": {"tenant": "GLOBEX"}})
    result = json.loads(out)
    assert result["count"] == raw_count("dcim/devices", [("tenant", "globex")]) == 3
    assert "tenant 'GLOBEX' read as tenancy.tenant slug 'globex'" in result["note"]
    assert [r.url.params.get("tenant") for r in counting.sent][-1] == "globex"
    akron = raw_ids("dcim/sites", [("name", "DM-Akron")])[0]
    out, _ = get_objects({"object_type": "dcim.device", "filters": {"site_id": "DM-Akron"}})
    assert json.loads(out)["count"] == raw_count("dcim/devices", [("site_id", str(akron))])


def test_a_name_no_object_has_is_refused_naming_the_closest():
    out, counting = get_objects({"object_type": "dcim.device", "filters": {"tenant": "Acme Inc."}})
    assert out.startswith("Error: 'tenant': no tenancy.tenant has the name or slug 'Acme Inc.'")
    assert "closest: 'Acme' (slug acme, id 1)" in out
    assert not any(r.url.path.endswith("/dcim/devices/") for r in counting.sent)


def test_a_role_no_object_has_is_refused_naming_the_closest_roles():
    """Recorded (issue 32, item 7): NetBox's 400 alone for role 'Core Switch'."""
    assert raw("dcim/devices", [("role", "Core Switch")]).status_code == 400
    out, counting = get_objects({"object_type": "dcim.device", "filters": {"role": "Core Switch"}})
    assert out.startswith("Error: 'role': no dcim.devicerole has the name or slug 'Core Switch'")
    assert "closest: 'Access Switch' (slug access-switch, id " in out
    assert not any(r.url.path.endswith("/dcim/devices/") for r in counting.sent)


def test_interfaces_sharing_a_name_are_listed_with_their_devices():
    """Recorded: interface_id 'Vlan100' listed as 'Vlan100' (id 9); 'Vlan100' (id 3)..."""
    out, _ = get_objects({"object_type": "ipam.ipaddress", "filters": {"interface_id": "Vlan100"}})
    assert out.startswith("Error: 'interface_id': 'Vlan100' names ")
    for device in ("dmi01-akron-sw01", "dmi01-akron-rtr01", "dmi01-dayton-sw01"):
        assert f", on device {device})" in out


def test_a_token_copied_with_bearer_is_accepted():
    """NetBox >= 4.5 shows a v2 token as 'Bearer nbt_...' on its token page."""

    async def go():
        async with NetBoxClient(URL, f"Bearer {TOKEN}") as c:
            return await c.status()

    assert run(go())["netbox-version"] == T.netbox_version


def test_a_choice_in_the_wrong_case_is_read_and_a_400_is_one_line():
    assert raw("dcim/devices", [("status", "Active")]).status_code == 400  # recorded: 400
    out, _ = get_objects({"object_type": "dcim.device", "filters": {"status": "Active"}})
    result = json.loads(out)
    assert result["count"] == raw_count("dcim/devices", [("status", "active")])
    assert "status 'Active' read as 'active'" in result["note"]


def test_a_slug_or_id_no_object_has_is_refused_naming_the_closest():
    """NetBox answers 400 "Select a valid choice" for both; the tool looks the value up
    as a name after that 400 only, and names the closest sites."""
    assert raw("dcim/devices", [("site", "dm-nowhere")]).status_code == 400
    assert raw("dcim/devices", [("site_id", "99999")]).status_code == 400
    out, counting = get_objects({"object_type": "dcim.device", "filters": {"site": "dm-nowhere"}})
    assert out.startswith("Error: 'site': no dcim.site has the name or slug 'dm-nowhere' (")
    assert "closest: 'DM-Cleveland' (slug dm-cleveland, id 4), 'DM-Akron'" in out
    assert [r.url.path for r in counting.sent].count("/api/dcim/devices/") == 1
    out, _ = get_objects({"object_type": "dcim.device", "filters": {"site_id": 99999}})
    assert out.startswith("Error: 'site_id': no dcim.site has the name, slug or id '99999'")
    assert "look it up with netbox_get_objects('dcim.site', {'q': ...})" in out


def test_a_generic_relation_is_sent_as_the_filter_that_works():
    interfaces = ["3", "6"]
    out, counting = get_objects(
        {
            "object_type": "ipam.ipaddress",
            "filters": {"assigned_object_type": "dcim.interface", "assigned_object_id": interfaces},
        }
    )
    result = json.loads(out)
    expected = raw_count("ipam/ip-addresses", [("interface_id", i) for i in interfaces])
    assert result["count"] == expected == 2
    assert counting.sent[-1].url.params.get_list("interface_id") == interfaces


def test_nothing_found_says_where_the_name_is():
    """Recorded: a tenant's name searched as a circuit provider, then 'not found'."""
    out, _ = run(
        call("netbox_search_objects", {"query": "Globex", "object_types": ["circuits.provider"]})
    )
    result = json.loads(out)
    assert result["results"] == {}
    assert result["found_elsewhere"]["tenancy.tenant"] == {"count": 1, "names": ["Globex"]}
    out, _ = get_objects({"object_type": "circuits.provider", "filters": {"name": "Acme"}})
    assert json.loads(out)["found_elsewhere"]["tenancy.tenant"]["names"] == ["Acme"]


def ask_through_the_cli(tmp_path, ollama, *replies) -> list[str]:
    """One `ask --json` through the real CLI and agent, the scripted Ollama playing
    `replies`, against the real NetBox: the tool results its last request carried."""
    ollama.script(*replies)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETBOX_CHAT", "OLLAMA"))}
    env.update(
        NETBOX_CHAT_SESSIONS=str(tmp_path / "s"), OLLAMA_HOST=ollama.url,
        NETBOX_CHAT_MODEL="qwen3:8b", XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
    )  # fmt: skip
    result = invoke(["ask", "question", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answer"] == "Done."
    return [m["content"] for m in ollama.requests[-1]["messages"] if m["role"] == "tool"]


def test_the_same_call_twice_in_a_turn_asks_netbox_once(tmp_path, ollama):
    """Item 5 through the real CLI and agent against the real NetBox: the second,
    identical call is answered from the first, with a note."""
    from tests.doubles.ollama_server import Text, ToolCall

    args = {"object_type": "ipam.prefix", "filters": {"status": "active"}}
    first, second = ask_through_the_cli(
        tmp_path,
        ollama,
        [ToolCall("netbox_get_objects", args)],
        [ToolCall("netbox_get_objects", {"object_type": "ipam.prefix", "status": "active"})],
        [Text("Done.")],
    )
    assert json.loads(first)["count"] == raw_count("ipam/prefixes", [("status", "active")])
    assert "NetBox was not asked again" in second


def test_names_where_netbox_wants_slugs_through_the_cli(tmp_path, ollama):
    """Item 6 through the real CLI: a display name read as its slug, a slug no site has
    refused naming the closest."""
    from tests.doubles.ollama_server import Text, ToolCall

    by_name = {"object_type": "dcim.device", "filters": {"tenant": "GLOBEX"}}
    no_site = {"object_type": "dcim.device", "filters": {"site": "dm-nowhere"}}
    read, refused = ask_through_the_cli(
        tmp_path,
        ollama,
        [ToolCall("netbox_get_objects", by_name), ToolCall("netbox_get_objects", no_site)],
        [Text("Done.")],
    )
    assert json.loads(read)["count"] == raw_count("dcim/devices", [("tenant", "globex")])
    assert "tenant 'GLOBEX' read as tenancy.tenant slug 'globex'" in read
    assert refused.startswith("Error: 'site': no dcim.site has the name or slug 'dm-nowhere'")
    assert "'DM-Akron' (slug dm-akron, id 1)" in refused


def test_not_found_says_where_the_name_is_through_the_cli(tmp_path, ollama):
    """Item 7 through the real CLI: a tenant searched as a circuit provider."""
    from tests.doubles.ollama_server import Text, ToolCall

    search = {"query": "Globex", "object_types": ["circuits.provider"]}
    (found,) = ask_through_the_cli(
        tmp_path, ollama, [ToolCall("netbox_search_objects", search)], [Text("Done.")]
    )
    assert json.loads(found)["found_elsewhere"]["tenancy.tenant"]["names"] == ["Globex"]
