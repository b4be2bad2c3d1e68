"""The live tier's tables of filters (scripts/netbox_seed.py's data on NetBox
4.7.3): the ones NetBox would ignore, which the tools refuse before sending,
and the ones it honours, with their counts. tests/test_netbox_live.py drives
them through the tools, tests/test_mcp_live.py through the MCP server."""

from __future__ import annotations

from typing import Any

# (object_type, filters for the tool, what the rejection says, the raw query a naive client
# would send). For every one, NetBox returns the unfiltered count.
IGNORED: list[tuple[str, dict[str, Any], str, list[tuple[str, str]]]] = [
    # unknown filter names
    ("dcim.device", {"foo": "bar"}, "'foo' is not a dcim.device filter", [("foo", "bar")]),
    ("dcim.device", {"site_name": "dm-akron"}, "site (Site name (slug))", [("site_name", "dm-akron")]),
    ("dcim.device", {"hostname": "dmi01-akron-sw01"}, "not a dcim.device filter", [("hostname", "dmi01-akron-sw01")]),
    ("ipam.prefix", {"vlan_name": "USERS"}, "vlan_id", [("vlan_name", "USERS")]),
    # unknown lookups
    ("dcim.device", {"name__foo": "dmi01-akron-sw01"}, "__foo is not a lookup", [("name__foo", "dmi01-akron-sw01")]),
    ("dcim.device", {"name__contains": "akron"}, "use 'name__ic'", [("name__contains", "akron")]),
    ("dcim.device", {"name__icontains": "akron"}, "use 'name__ic'", [("name__icontains", "akron")]),
    ("dcim.device", {"name__startswith": "dmi01-akron"}, "use 'name__isw'", [("name__startswith", "dmi01-akron")]),
    ("dcim.device", {"serial__isnull": True}, "use 'serial__empty'", [("serial__isnull", "true")]),
    ("dcim.device", {"status__ne": "active"}, "use 'status__n'", [("status__ne", "active")]),
    ("dcim.device", {"id__range": [1, 5]}, "id__gte and id__lte", [("id__range", "1,5")]),
    # allowlisted lookups the filter does not have
    ("dcim.device", {"site__ic": "akron"}, "has no __ic lookup", [("site__ic", "akron")]),
    ("dcim.device", {"site_id__gt": 1}, "has no __gt lookup", [("site_id__gt", "1")]),
    ("dcim.device", {"tag__ic": "co"}, "has no __ic lookup", [("tag__ic", "co")]),
    # __in, every form
    ("dcim.device", {"id__in": [1, 2]}, "pass a list as the value of the plain key", [("id__in", "1,2")]),
    ("dcim.device", {"status__in": ["offline", "failed"]}, "{'status': [value1, value2]}", [("status__in", "offline,failed")]),
    ("dcim.device", {"site__in": "dm-akron"}, "{'site': [value1, value2]}", [("site__in", "dm-akron")]),
    ("ipam.vlan", {"vid__in": [100, 200]}, "{'vid': [value1, value2]}", [("vid__in", "100,200")]),
    # relation hops
    ("ipam.ipaddress", {"device__site_id": 1}, "netbox_get_objects('dcim.device', {'site_id': ...})", [("device__site_id", "1")]),
    ("dcim.interface", {"device__site_id": 1}, "own filter site_id", [("device__site_id", "1")]),
    ("dcim.device", {"site__name": "DM-Akron"}, "own filter site (Site name (slug))", [("site__name", "DM-Akron")]),
    ("dcim.device", {"role__slug": "router"}, "cannot follow relations", [("role__slug", "router")]),
    ("ipam.prefix", {"vlan__vid": 100}, "own filter vlan_vid", [("vlan__vid", "100")]),
    ("dcim.interface", {"device__name__ic": "akron"}, "cannot follow relations", [("device__name__ic", "akron")]),
    # empty values
    ("dcim.device", {"name": ""}, "NetBox ignores empty filters", [("name", "")]),
    ("dcim.device", {"q": ""}, "NetBox ignores empty filters", [("q", "")]),
    ("dcim.device", {"id": []}, "empty list", []),
    # booleans NetBox does not read
    ("dcim.interface", {"enabled": "maybe"}, "takes true or false", [("enabled", "maybe")]),
    ("dcim.interface", {"mgmt_only": "FALSE!"}, "takes true or false", [("mgmt_only", "FALSE!")]),
    ("dcim.device", {"name__empty": "foo"}, "takes true or false", [("name__empty", "foo")]),
    ("dcim.device", {"has_primary_ip": "perhaps"}, "takes true or false", [("has_primary_ip", "perhaps")]),
]  # fmt: skip

# The seed's updates of devices: three taken offline, and the eight given a platform
# (issue 34's platform questions), as scripts/netbox_seed.py makes them on a restore.
DEVICE_UPDATES = 11

# (object_type, filters, expected count with the seed data)
HONOURED: list[tuple[str, dict[str, Any], int]] = [
    ("dcim.device", {"site": "dm-akron", "status": "offline"}, 2),
    ("dcim.device", {"status": "offline"}, 3),
    ("dcim.device", {"status": ["offline", "failed"]}, 4),
    ("dcim.device", {"site": ["dm-akron", "dm-columbus"], "status": "offline"}, 3),
    ("dcim.device", {"status__n": "active"}, 7),
    ("dcim.device", {"name__ic": "AKRON"}, 5),
    ("dcim.device", {"name__isw": "dmi01-columbus"}, 3),
    ("dcim.device", {"serial__isw": "FOC"}, 7),
    ("dcim.device", {"tag": "core"}, 3),
    ("dcim.device", {"tag": ["core", "monitored"]}, 1),  # tag: all of them
    ("dcim.device", {"tag__any": ["core", "monitored"]}, 5),  # tag__any: any of them
    ("dcim.device", {"id__gte": 3, "id__lte": 5}, 3),
    ("dcim.device", {"q": "columbus"}, 3),
    ("dcim.interface", {"site": "dm-akron", "enabled": False}, 5),
    ("dcim.interface", {"device": "dmi01-akron-sw01"}, 3),
    ("ipam.vlan", {"vid": 100}, 3),
    ("ipam.vlan", {"vid": 100, "site": "dm-akron"}, 1),
    ("ipam.prefix", {"within_include": "10.10.0.0/16"}, 4),
    ("ipam.prefix", {"status": "container"}, 2),
    ("ipam.ipaddress", {"device": "dmi01-akron-sw01"}, 1),
    ("ipam.ipaddress", {"status": "reserved"}, 1),
    ("dcim.site", {"status": "active"}, 2),
    ("core.objectchange", {"action": "update", "changed_object_type": "dcim.device"}, DEVICE_UPDATES),
]  # fmt: skip

# The seed's custom fields on sites (scripts/netbox_seed.py): support_tier (integer,
# exact): Akron 1, Columbus 2, Dayton 2; site_owner (text, loose): netops-east twice,
# netops-west; internal_note (text, filtering disabled).
CUSTOM = [
    ({"cf_support_tier": 2}, [("cf_support_tier", "2")], 2),
    ({"cf_support_tier__gte": 1}, [("cf_support_tier__gte", "1")], 3),
    ({"cf_support_tier__empty": True}, [("cf_support_tier__empty", "true")], 1),
    ({"cf_site_owner": "east"}, [("cf_site_owner", "east")], 2),
]

# Custom-field filters NetBox ignores (the same site custom fields): what the refusal says.
CUSTOM_IGNORED: list[tuple[dict[str, Any], str]] = [
    ({"cf_internal_note": "x"}, "filtering is disabled"),
    ({"cf_site_owner__ic": "east"}, "has no __ic lookup"),
    ({"cf_site_owner__empty": True}, "has no __empty lookup"),
    ({"cf_support_tier__ic": "1"}, "has no __ic lookup"),
    ({"cf_owner": "east"}, "no custom field 'owner' on dcim.site"),
]  # fmt: skip
