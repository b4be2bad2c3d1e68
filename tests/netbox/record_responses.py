"""Record real NetBox answers for the default (offline) test tier.

Runs SCENARIOS through the real tools against the live tier's NetBox
(scripts/netbox_up.sh), with a transport that records every request and response,
and writes tests/netbox/recorded.json:

    {"netbox_version": "4.7.3",
     "exchanges": [{"method": "GET", "target": "/api/dcim/devices/?site=dm-akron&...",
                    "status": 200, "content_type": "application/json", "body": "..."}],
     "scenarios": [{"name": ..., "tool": ..., "args": {...}, "result": "<tool output>"}],
     "raw": {"name": {"target": ..., "status": ..., ...}}}

tests/test_netbox_tools.py replays the exchanges through httpx.MockTransport and
checks each scenario gives the recorded result. Run it again after changing the
seed or the tools' requests:

    NETBOX_URL=... NETBOX_TOKEN=... .venv/bin/python tests/netbox/record_responses.py

Given scenario names, it runs only those and merges them into the recording (their
results replaced, the exchanges it lacks added, the rest kept as recorded), so a
changed tool re-records what it changed without churning the rest:

    ... record_responses.py bad_slug_400 no_such_site_id_400

No token is written: requests are stored as method + path + query only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from netbox_chat.netbox.client import NetBoxClient  # noqa: E402
from netbox_chat.netbox.tools import build_netbox_tools  # noqa: E402

OUT = Path(__file__).with_name("recorded.json")

# (name, tool, args): each is replayed offline and must give the same result.
SCENARIOS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "offline_at_akron",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"site": "dm-akron", "status": "offline"}},
    ),
    (
        "offline_at_akron_flattened",
        "netbox_get_objects",
        {"object_type": "dcim.device", "site": "dm-akron", "status": "offline"},
    ),
    (
        "custom_field_filter",
        "netbox_get_objects",
        {"object_type": "dcim.site", "filters": {"cf_support_tier": 2}, "fields": ["name"]},
    ),
    (
        "custom_field_loose_text",
        "netbox_get_objects",
        {"object_type": "dcim.site", "filters": {"cf_site_owner": "east"}, "fields": ["name"]},
    ),
    (
        "offline_anywhere",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"status": "offline"}},
    ),
    (
        "status_list_is_or",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"status": ["offline", "failed"]}, "brief": True},
    ),
    (
        "page_1",
        "netbox_get_objects",
        {"object_type": "dcim.device", "limit": 4, "ordering": "name"},
    ),
    (
        "page_2",
        "netbox_get_objects",
        {"object_type": "dcim.device", "limit": 4, "offset": 4, "ordering": "name"},
    ),
    (
        "page_3",
        "netbox_get_objects",
        {"object_type": "dcim.device", "limit": 4, "offset": 8, "ordering": "name"},
    ),
    ("brief", "netbox_get_objects", {"object_type": "ipam.prefix", "brief": True, "limit": 3}),
    (
        "fields",
        "netbox_get_objects",
        {"object_type": "ipam.ipaddress", "fields": ["address", "dns_name", "status"], "limit": 20},
    ),
    (
        "name_ic",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"name__ic": "COLUMBUS"}, "fields": ["name"]},
    ),
    (
        "disabled_interfaces_at_akron",
        "netbox_get_objects",
        {
            "object_type": "dcim.interface",
            "filters": {"site": "dm-akron", "enabled": False},
            "limit": 3,
        },
    ),
    (
        "vlans_default_fields",
        "netbox_get_objects",
        {"object_type": "ipam.vlan", "filters": {"vid": 100}},
    ),
    (
        "bad_choice_400",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"status": "broken"}},
    ),
    (
        "bad_slug_400",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"site": "dm-nowhere"}},
    ),
    (
        "no_such_site_id_400",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"site_id": 99999}},
    ),
    (
        "bad_date_400",
        "netbox_get_objects",
        {"object_type": "dcim.device", "filters": {"created__gte": "yesterday"}},
    ),
    ("device_by_id", "netbox_get_object_by_id", {"object_type": "dcim.device", "object_id": 2}),
    (
        "device_by_id_fields",
        "netbox_get_object_by_id",
        {"object_type": "dcim.device", "object_id": 2, "fields": ["name", "status", "site"]},
    ),
    ("no_such_object", "netbox_get_object_by_id", {"object_type": "dcim.site", "object_id": 99999}),
    ("search_akron", "netbox_search_objects", {"query": "akron"}),
    (
        "search_ip",
        "netbox_search_objects",
        {"query": "10.20.100", "object_types": ["ipam.ipaddress"]},
    ),
    (
        "search_nothing",
        "netbox_search_objects",
        {"query": "no-such-thing-anywhere", "object_types": ["dcim.device"]},
    ),
    ("changelog_recent", "netbox_get_changelogs", {"limit": 5}),
    (
        "changelog_device_updates",
        "netbox_get_changelogs",
        {"filters": {"changed_object_type": "dcim.device", "action": "update"}},
    ),
]

# Raw requests the tools never send, kept to show what NetBox does (both 404 kinds, 403).
RAW: dict[str, tuple[str, str | None]] = {
    "no_such_endpoint": ("/api/dcim/no-such-endpoint/", "token"),
    "no_such_object": ("/api/dcim/devices/99999/", "token"),
    "bad_token": (
        "/api/dcim/devices/?limit=1",
        "nbt_badkey000001.thisisnotthesecret0000000000000000000000",
    ),
    "ignored_unknown_filter": ("/api/dcim/devices/?foo=bar&brief=true&limit=1", "token"),
    "ignored_in_lookup": ("/api/dcim/devices/?id__in=1,2&brief=true&limit=1", "token"),
}


class Recorder(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        body = await resp.aread()
        target = request.url.raw_path.decode("ascii")
        self.exchanges.append(
            {
                "method": request.method,
                "target": target,
                "status": resp.status_code,
                "content_type": resp.headers.get("content-type", ""),
                "body": body.decode("utf-8"),
            }
        )
        return httpx.Response(resp.status_code, headers=resp.headers, content=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def main() -> int:
    url = os.environ.get("NETBOX_URL")
    token = os.environ.get("NETBOX_TOKEN")
    if not url or not token:
        print("set NETBOX_URL and NETBOX_TOKEN (scripts/netbox_up.sh prints them)", file=sys.stderr)
        return 2
    only = set(sys.argv[1:])
    unknown = only - {name for name, _, _ in SCENARIOS}
    if unknown:
        print(f"no such scenario: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    rec = Recorder()
    client = NetBoxClient(url, token, transport=rec)
    tools = {t.name: t for t in build_netbox_tools(client)}
    scenarios = []
    for name, tool, args in SCENARIOS:
        if only and name not in only:
            continue
        result = await tools[tool].ainvoke(args)
        scenarios.append({"name": name, "tool": tool, "args": args, "result": result})
        print(f"{name}: {result[:100]}")
    await client.aclose()
    if only:
        return write(merged(json.loads(OUT.read_text(encoding="utf-8")), rec, scenarios), token)

    raw = {}
    async with httpx.AsyncClient(base_url=url) as http:
        for name, (target, tok) in RAW.items():
            t = token if tok == "token" else tok
            scheme = "Bearer" if t and t.startswith("nbt_") else "Token"
            r = await http.get(
                target, headers={"Authorization": f"{scheme} {t}", "Accept": "application/json"}
            )
            body = r.text
            if "html" in r.headers.get("content-type", ""):
                body = body[:2000]
            raw[name] = {
                "target": target,
                "status": r.status_code,
                "content_type": r.headers.get("content-type", ""),
                "body": body,
            }
    version = json.loads(next(e["body"] for e in rec.exchanges if e["target"] == "/api/status/"))[
        "netbox-version"
    ]
    data = {
        "netbox_version": version,
        "exchanges": rec.exchanges,
        "scenarios": scenarios,
        "raw": raw,
    }
    return write(data, token)


def merged(data: dict[str, Any], rec: Recorder, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """The recording with these scenarios' results, in SCENARIOS' order, and the
    exchanges it lacks (one already recorded is kept: the other scenarios replay it)."""
    known = {(e["method"], e["target"]) for e in data["exchanges"]}
    data["exchanges"] += [e for e in rec.exchanges if (e["method"], e["target"]) not in known]
    by_name = {s["name"]: s for s in data["scenarios"]} | {s["name"]: s for s in scenarios}
    data["scenarios"] = [by_name[name] for name, _, _ in SCENARIOS if name in by_name]
    return data


def write(data: dict[str, Any], token: str) -> int:
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    assert token not in text and token.split(".")[-1] not in text, "token leaked into the recording"
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes, {len(data['exchanges'])} exchanges)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
