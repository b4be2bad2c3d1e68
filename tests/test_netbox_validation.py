"""Filter validation against the shipped NetBox 4.7.3 table: no I/O, no NetBox.

Every rejected case is one NetBox 4.7.3 would silently ignore (answering with the
whole list); tests/test_netbox_live.py proves that against a real NetBox.
"""

from __future__ import annotations

import json
import re
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
        ("dcim.interface", {"device__site_id": 1}, "own filter site_id"),
        ("dcim.device", {"site__name": "DM-Akron"}, "own filter site (Site name (slug))"),
        ("dcim.interface", {"device__name__ic": "akron"}, "cannot follow relations"),
        ("ipam.prefix", {"vlan__vid": 100}, "own filter vlan_vid (VLAN number (1-4094))"),
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
    assert "\n" not in msg and len(msg) < 400, msg
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


# ------------------------------------------------------------------ suggestions by meaning

# Issue 14, section 2: what was sent, and the filter that gives the right answer, which
# must be the first suggestion (the model takes it).
SUGGESTIONS = [
    ("ipam.ipaddress", {"ip": "10.10.100.1/24"}, "address"),
    ("ipam.vlan", {"vlan_id": 100}, "vid"),
    ("dcim.interface", {"vid": 100}, "vlan"),
    ("ipam.prefix", {"vid": 100}, "vlan_vid"),
    ("core.objectchange", {"object_type": "dcim.device"}, "changed_object_type"),
    ("core.objectchange", {"since": "2026-01-01"}, "time_after"),
    ("dcim.interface", {"device_name": "dmi01-akron-sw01"}, "device"),
    ("dcim.device", {"site__region__slug": "ohio"}, "region"),
    ("ipam.prefix", {"vlan__vid": 100}, "vlan_vid"),
    ("ipam.vlan", {"group__slug": "ohio-vlans"}, "group"),
    ("dcim.interface", {"device__site_id": 1}, "site_id"),
    ("dcim.device", {"hostname": "dmi01-akron-sw01"}, "name"),
    ("dcim.device", {"site_name": "dm-akron"}, "site"),
]


def first_suggestion(message: str) -> str | None:
    found = re.search(r"(?:Closest: |own filter )([a-z_]+)", message)
    return found.group(1) if found else None


@pytest.mark.parametrize(
    ("object_type", "filters", "right"), SUGGESTIONS, ids=[json.dumps(c[1]) for c in SUGGESTIONS]
)
def test_the_first_suggestion_is_the_filter_that_answers(object_type, filters, right):
    msg = rejected(object_type, filters)
    assert first_suggestion(msg) == right, msg
    assert f"{right} (" in msg or f"{{'{right}'" in msg, "a suggestion says what it means"


def test_a_filter_the_type_lacks_points_elsewhere_never_at_id():
    """``vid`` on devices: ``id=100`` would answer 0 rows without an error."""
    msg = rejected("dcim.device", {"vid": 100})
    assert "Closest: none" in msg and "ipam.prefix (vlan_vid)" in msg and "ipam.vlan (vid)" in msg
    assert " id" not in msg.split("Closest:")[1]


@pytest.mark.parametrize(
    ("object_type", "key", "right"),
    [("ipam.vlan", "VID", "vid"), ("dcim.device", "SITE_ID", "site_id"),
     ("dcim.device", "TENANT", "tenant"), ("dcim.device", "Status", "status"),
     ("dcim.device", "NAME__IC", "name__ic")],
)  # fmt: skip
def test_capitals_are_read_as_netboxs_lower_case_names(object_type, key, right):
    notes: list[str] = []
    sent = build_params(T.resolve(object_type), {key: "active"}, T, notes)  # a status too
    assert sent == [(right, "active")]
    assert notes == [f"filter '{key}' read as '{right}'"]


def test_ordering_suggestions_by_meaning_and_terms_netbox_cannot_sort_by():
    with pytest.raises(FilterRejected, match=r"'ip' \(closest: address\)"):
        check_ordering(T.resolve("ipam.ipaddress"), "ip")
    # NetBox 4.7.3 answers 500 for these (probed live: tests/netbox/probe_ordering.py)
    for object_type, term in [
        ("ipam.ipaddress", "assigned_object"),
        ("core.objectchange", "changed_object"),
        ("core.objectchange", "postchange_data_clean"),
        ("dcim.site", "device_count"),
    ]:
        with pytest.raises(FilterRejected, match="NetBox would ignore it"):
            check_ordering(T.resolve(object_type), term)


def test_refusals_are_short():
    """No preamble, and the list of valid fields is capped (it was 815 characters)."""
    fields = check_fields_message("dcim.device", ["hostname"])
    assert "(closest: name)" in fields and "and 34 more" in fields and len(fields) < 300
    assert not rejected("dcim.device", {"foo": 1}).startswith("Rejected")


def check_fields_message(object_type: str, fields: list[str]) -> str:
    with pytest.raises(FilterRejected) as e:
        check_fields(T.resolve(object_type), fields)
    return str(e.value)
