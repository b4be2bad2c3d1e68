"""Filter validation against the shipped NetBox 4.7.3 table: no I/O, no NetBox.

Every rejected case is one NetBox 4.7.3 would silently ignore (answering with the
whole list); tests/test_netbox_live.py proves that against a real NetBox.
"""

from __future__ import annotations

import json
import time
from importlib import resources

import pytest

from netbox_chat.netbox.object_types import FilterTable, UnknownObjectType, shipped_table
from netbox_chat.netbox.schema import derive_table
from netbox_chat.netbox.validation import (
    ALLOWED_LOOKUPS,
    FilterRejected,
    build_params,
    check_fields,
    check_ordering,
    coerce_filters,
)

T = shipped_table()


def params(object_type: str, filters: dict) -> list[tuple[str, str]]:
    return build_params(T.resolve(object_type), filters, T)


def rejected(object_type: str, filters: dict) -> str:
    with pytest.raises(FilterRejected) as ei:
        params(object_type, filters)
    return str(ei.value)


# ------------------------------------------------------------------ accepted


@pytest.mark.parametrize(
    ("object_type", "filters", "expected"),
    [
        ("dcim.device", {"site": "dm-akron", "status": "offline"}, [("site", "dm-akron"), ("status", "offline")]),
        ("dcim.device", {"id": [1, 2]}, [("id", "1"), ("id", "2")]),
        ("dcim.device", {"site": ["dm-akron", "dm-columbus"]}, [("site", "dm-akron"), ("site", "dm-columbus")]),
        ("dcim.device", {"name__ic": "akron"}, [("name__ic", "akron")]),
        ("dcim.device", {"status__n": "active"}, [("status__n", "active")]),
        ("dcim.device", {"id__gte": 3, "id__lt": 9}, [("id__gte", "3"), ("id__lt", "9")]),
        ("dcim.device", {"serial__empty": True}, [("serial__empty", "true")]),
        ("dcim.device", {"tag__any": ["core", "monitored"]}, [("tag__any", "core"), ("tag__any", "monitored")]),
        ("dcim.device", {"q": "akron"}, [("q", "akron")]),
        ("dcim.interface", {"enabled": False}, [("enabled", "false")]),
        ("dcim.interface", {"enabled": "True"}, [("enabled", "true")]),
        ("dcim.interface", {"mgmt_only": "no"}, [("mgmt_only", "false")]),
        ("ipam.prefix", {"within_include": "10.10.0.0/16"}, [("within_include", "10.10.0.0/16")]),
        ("ipam.vlan", {"vid": 100, "site_id": 1}, [("vid", "100"), ("site_id", "1")]),
        ("core.objectchange", {"changed_object_type": "dcim.device", "action": "update"},
         [("changed_object_type", "dcim.device"), ("action", "update")]),
        ("core.job", {"created__after": "2026-01-01"}, [("created__after", "2026-01-01")]),
    ],
)  # fmt: skip
def test_accepted_filters_become_query_params(object_type, filters, expected):
    assert params(object_type, filters) == expected


def test_no_filters_is_no_params():
    assert params("dcim.device", {}) == []


# ------------------------------------------------------------------ rejected: what NetBox ignores


@pytest.mark.parametrize(
    ("object_type", "filters", "must_say"),
    [
        # unknown filter names, with the closest valid ones named
        ("dcim.device", {"foo": "bar"}, "'foo' is not a dcim.device filter"),
        ("dcim.device", {"site_name": "DM-Akron"}, "site (Site name (slug))"),
        ("dcim.device", {"Status": "offline"}, "Closest: status"),
        ("dcim.device", {"hostname": "x"}, "is not a dcim.device filter"),
        ("ipam.prefix", {"vlan_name": "USERS"}, "vlan_id"),
        ("dcim.interface", {"is_enabled": True}, "enabled"),
        # unknown lookups
        ("dcim.device", {"name__foo": "x"}, "__foo is not a lookup NetBox knows"),
        ("dcim.device", {"name__contains": "akron"}, "use 'name__ic'"),
        ("dcim.device", {"name__icontains": "akron"}, "use 'name__ic'"),
        ("dcim.device", {"name__startswith": "dmi"}, "use 'name__isw'"),
        ("dcim.device", {"name__exact": "x"}, "use the plain key 'name'"),
        ("dcim.device", {"name__iexact": "x"}, "use 'name__ie'"),
        ("dcim.device", {"serial__isnull": True}, "use 'serial__empty'"),
        ("dcim.device", {"id__range": [1, 5]}, "id__gte and id__lte"),
        ("dcim.device", {"status__ne": "active"}, "use 'status__n'"),
        # allowlisted lookups the filter does not support
        ("dcim.device", {"site__ic": "akron"}, "has no __ic lookup"),
        ("dcim.device", {"site_id__gt": 1}, "has no __gt lookup"),
        ("dcim.device", {"tag__ic": "co"}, "has no __ic lookup"),
        # __in: every one is ignored by NetBox
        ("dcim.device", {"id__in": [1, 2]}, "pass a list as the value of the plain key: {'id': [value1, value2]}"),
        ("dcim.device", {"site__in": "dm-akron,dm-columbus"}, "{'site': [value1, value2]}"),
        ("dcim.device", {"status__in": ["offline"]}, "pass a list as the value of the plain key"),
        ("dcim.device", {"bogus__in": [1]}, "'bogus' is not a dcim.device filter"),
        # relation hops
        ("ipam.ipaddress", {"device__site_id": 1}, "netbox_get_objects('dcim.device', {'site_id': ...})"),
        ("ipam.ipaddress", {"device__site_id": 1}, "{'device_id': [id1, id2]}"),
        ("dcim.interface", {"device__site_id": 1}, "dcim.interface has its own filter 'site_id'"),
        ("dcim.device", {"site__name": "DM-Akron"}, "Or directly: site (Site name (slug))"),
        ("dcim.interface", {"device__name__ic": "akron"}, "cannot follow relations"),
        ("ipam.prefix", {"vlan__vid": 100}, "netbox_get_objects('ipam.vlan', {'vid': ...})"),
        # values NetBox drops
        ("dcim.device", {"name": ""}, "NetBox ignores empty filters"),
        ("dcim.device", {"name": "   "}, "is blank"),
        ("dcim.device", {"q": ""}, "NetBox ignores empty filters"),
        ("dcim.device", {"name": ["", "dmi01-akron-sw01"]}, "NetBox ignores empty filters"),
        ("dcim.device", {"id": []}, "empty list"),
        ("dcim.device", {"serial": None}, "serial__empty"),
        ("dcim.device", {"tenant": None}, "has no value (null). Give a value."),
        ("dcim.interface", {"enabled": "maybe"}, "takes true or false"),
        ("dcim.interface", {"enabled": "FALSE!"}, "takes true or false"),
        ("dcim.device", {"name__empty": "foo"}, "takes true or false"),
        ("dcim.device", {"has_primary_ip": "perhaps"}, "takes true or false"),
        # several values for a single-value filter: NetBox keeps only the last
        ("dcim.interface", {"enabled": [True, False]}, "takes a single value"),
        ("dcim.device", {"q": ["akron", "columbus"]}, "takes a single value"),
        # values of the wrong shape
        ("dcim.device", {"site": {"slug": "dm-akron"}}, "must be a string, number or boolean"),
        ("dcim.device", {"id": [[1, 2]]}, "must be a string, number or boolean"),
        # paging knobs that are not filters here
        ("dcim.device", {"omit": "tags"}, "'omit' is not supported"),
        ("dcim.device", {"start": 5}, "use the offset argument"),
    ],
)  # fmt: skip
def test_rejected_filters_say_what_works(object_type, filters, must_say):
    msg = rejected(object_type, filters)
    assert msg.startswith("Rejected before sending")
    assert must_say in msg, msg


def test_every_problem_is_reported_at_once():
    msg = rejected("dcim.device", {"foo": 1, "id__in": [1], "name": "", "site": "dm-akron"})
    assert "'foo'" in msg and "'id__in'" in msg and "'name'" in msg
    assert "'site'" not in msg


def test_unknown_lookup_lists_the_filters_lookups():
    msg = rejected("dcim.device", {"name__foo": "x"})
    for lk in ("name__ic", "name__isw", "name__n", "name__empty"):
        assert lk in msg


def test_allowlist_is_the_issues_list():
    issue = {"n", "ic", "nic", "isw", "nisw", "iew", "niew", "ie", "nie", "empty", "regex"}
    issue |= {"iregex", "lt", "lte", "gt", "gte"}
    assert issue == ALLOWED_LOOKUPS


def test_every_lookup_in_the_table_is_allowlisted_or_schema_only():
    seen = set()
    for ot in T.types.values():
        for lks in ot.filters.values():
            seen |= lks
    assert seen <= ALLOWED_LOOKUPS | {"any", "after", "before"}, seen - ALLOWED_LOOKUPS


# ------------------------------------------------------------------ object types


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("dcim.device", "dcim.device"),
        ("DCIM.Device", "dcim.device"),
        ("dcim/devices", "dcim.device"),
        ("/api/ipam/ip-addresses/", "ipam.ipaddress"),
        ("devices", "dcim.device"),
        ("ipaddress", "ipam.ipaddress"),
        ("ip-addresses", "ipam.ipaddress"),
        ("core.objectchange", "core.objectchange"),
    ],
)
def test_object_type_spellings(given, expected):
    assert T.resolve(given).name == expected


@pytest.mark.parametrize(
    ("given", "closest"),
    [
        ("dcim.devce", "dcim.device"),
        ("ipam.ip_address", "ipam.ipaddress"),
        ("ipam.ipaddresses", "ipam.ipaddress"),
        ("interface", "dcim.interface"),
        ("dcim.vlan", "ipam.vlan"),
        ("prefixes", "ipam.prefix"),
    ],
)
def test_unknown_object_type_names_closest(given, closest):
    try:
        got = T.resolve(given)
    except UnknownObjectType as e:
        assert closest in e.closest, (given, e.closest)
        assert closest in str(e)
    else:  # some spellings resolve outright, which is better still
        assert got.name == closest


def test_interface_is_ambiguous_and_says_so():
    with pytest.raises(UnknownObjectType) as ei:
        T.resolve("interfaces")
    assert "dcim.interface" in ei.value.closest


# ------------------------------------------------------------------ fields and ordering


def test_unknown_fields_rejected_with_closest():
    ot = T.resolve("dcim.device")
    assert check_fields(ot, ["name", "status"]) == ["name", "status"]
    assert check_fields(ot, "name, site") == ["name", "site"]
    with pytest.raises(FilterRejected, match="'hostname'"):
        check_fields(ot, ["name", "hostname"])
    with pytest.raises(FilterRejected, match="closest: primary_ip"):
        check_fields(ot, ["primary_ipv4"])


def test_ordering_only_on_fields_netbox_honours():
    ot = T.resolve("dcim.device")
    assert check_ordering(ot, "-name") == "-name"
    assert check_ordering(ot, ["site", "-id"]) == "site,-id"
    # primary_ip is a serializer field, but a model property: NetBox ignores ordering by it
    with pytest.raises(FilterRejected, match="primary_ip"):
        check_ordering(ot, "primary_ip")
    with pytest.raises(FilterRejected, match="bogus"):
        check_ordering(ot, "bogus")
    assert check_ordering(ot, None) is None


def test_coerce_filters_accepts_json_text_and_rejects_other_shapes():
    assert coerce_filters('{"site": "dm-akron"}') == {"site": "dm-akron"}
    assert coerce_filters(None) == {}
    with pytest.raises(FilterRejected):
        coerce_filters("site=dm-akron")
    with pytest.raises(FilterRejected):
        coerce_filters(["site"])


# ------------------------------------------------------------------ the table itself


def test_shipped_table_is_netbox_473_and_loads_fast():
    assert T.netbox_version == "4.7.3"
    assert len(T.types) > 130
    text = resources.files("netbox_chat.netbox").joinpath("filters.json").read_text()
    t0 = time.perf_counter()
    FilterTable(json.loads(text))
    assert time.perf_counter() - t0 < 0.25
    t0 = time.perf_counter()
    for _ in range(1000):
        params(
            "dcim.device", {"site": "dm-akron", "status": ["offline", "failed"], "name__ic": "sw"}
        )
    assert time.perf_counter() - t0 < 0.5  # well under a millisecond a call


def test_table_knows_the_usual_filters():
    dev = T.resolve("dcim.device")
    for f in ("site", "site_id", "status", "role", "tenant", "tag", "name", "q", "serial"):
        assert f in dev.filters
    assert "ic" in dev.filters["name"] and "n" in dev.filters["status"]
    assert "enabled" in T.resolve("dcim.interface").boolean
    assert "q" in dev.single
    assert T.resolve("core.objectchange").path == "core/object-changes"
    assert dev.ordering and "name" in dev.ordering and "primary_ip" not in dev.ordering


def test_derive_table_from_a_schema_excerpt():
    """derive_table reads filter names, lookups, kinds and fields from OpenAPI params."""
    schema = {
        "info": {"version": "9.9.9 (9.9)"},
        "paths": {
            "/api/dcim/sites/": {
                "get": {
                    "parameters": [
                        {"in": "query", "name": "name", "schema": {"type": "array"}},
                        {"in": "query", "name": "name__ic", "schema": {"type": "array"}},
                        {"in": "query", "name": "name__empty", "schema": {"type": "boolean"}},
                        {"in": "query", "name": "q", "schema": {"type": "string"}},
                        {"in": "query", "name": "cabled", "schema": {"type": "boolean"}},
                        {"in": "query", "name": "limit", "schema": {"type": "integer"}},
                        {"in": "query", "name": "site", "description": "Site (slug)", "schema": {"type": "array"}},
                    ],
                    "responses": {"200": {"content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/PaginatedSiteList"}}}}},
                }
            },
            "/api/status/": {"get": {"responses": {"200": {}}}},
        },
        "components": {"schemas": {
            "PaginatedSiteList": {"properties": {"results": {"items": {"$ref": "#/components/schemas/Site"}}}},
            "Site": {"properties": {"id": {}, "name": {}}},
        }},
    }  # fmt: skip
    raw = derive_table(schema)
    assert raw["netbox_version"] == "9.9.9"
    t = FilterTable(raw)
    site = t.resolve("dcim.site")
    assert set(site.filters) == {"name", "q", "cabled", "site"}
    assert site.filters["name"] == {"ic", "empty"}
    assert site.single == {"q", "cabled"} and site.boolean == {"cabled"}
    assert site.fields == ("id", "name") and site.ordering is None
    assert site.hints == {"site": "Site (slug)"}
