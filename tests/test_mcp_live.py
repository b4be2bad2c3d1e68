"""Live tier: `netbox-chat mcp`'s tools against a real NetBox 4.7.3, through the
SDK's client (issue 42). The live tool tests' own tables: every filter NetBox
would ignore is refused and never reaches it, every one it honours gives the
seed's count, as in tests/test_netbox_live.py but as an MCP client sees it.

    eval "$(grep '^export ' /tmp/srv/nb.log)"; .venv/bin/pytest -m live tests/test_mcp_live.py
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client

from netbox_chat.mcp.server import build_server
from netbox_chat.netbox.client import NetBoxClient
from netbox_chat.netbox.tools import build_netbox_tools
from tests.doubles.filter_tables import CUSTOM, CUSTOM_IGNORED, HONOURED, IGNORED
from tests.doubles.live_netbox import TOKEN, URL, Counting, _need_a_real_netbox

__all__ = ["_need_a_real_netbox"]  # its autouse fixture skips (or fails in CI) without NetBox

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


def through_mcp(object_type: str, filters: dict[str, Any]) -> tuple[Any, list[str]]:
    """netbox_get_objects called by an MCP client; its result and the paths the
    server sent to NetBox for it (after a first call that reads NetBox's version)."""

    async def go() -> tuple[Any, list[str]]:
        counting = Counting()
        async with (
            NetBoxClient(URL, TOKEN, transport=counting) as nb,
            Client(build_server(build_netbox_tools(nb)), mode="legacy") as client,
        ):
            await client.call_tool("netbox_get_objects", {"object_type": "dcim.region"})
            counting.sent.clear()
            args = {"object_type": object_type, "filters": filters}
            result = await client.call_tool("netbox_get_objects", args)
            return result, [r.url.path for r in counting.sent]

    return anyio.run(go)


@pytest.mark.parametrize(
    ("object_type", "filters", "must_say", "naive"),
    IGNORED,
    ids=[json.dumps(c[1]) for c in IGNORED],
)
def test_a_filter_netbox_would_ignore_never_reaches_it(object_type, filters, must_say, naive):
    del naive
    result, sent = through_mcp(object_type, filters)
    (said,) = [block.text for block in result.content]
    assert result.is_error and said.startswith("Error: ") and must_say in said, said
    assert sent == [], "a refused filter reached NetBox"


@pytest.mark.parametrize(
    ("object_type", "filters", "expected"), HONOURED, ids=[json.dumps(c[1]) for c in HONOURED]
)
def test_a_filter_netbox_honours_gives_the_right_count(object_type, filters, expected):
    result, sent = through_mcp(object_type, filters)
    assert not result.is_error, result.content
    assert result.structured_content["count"] == expected
    assert len(sent) == 1


@pytest.mark.parametrize(
    ("filters", "raw_query", "count"), CUSTOM, ids=[json.dumps(c[0]) for c in CUSTOM]
)
def test_custom_field_filters_give_the_right_count(filters, raw_query, count):
    del raw_query
    result, _ = through_mcp("dcim.site", filters)
    assert result.structured_content["count"] == count


@pytest.mark.parametrize(("filters", "must_say"), CUSTOM_IGNORED)
def test_custom_field_filters_netbox_ignores_are_refused(filters, must_say):
    result, sent = through_mcp("dcim.site", filters)
    assert result.is_error and must_say in result.content[0].text
    assert sent == ["/api/extras/custom-fields/"], sent  # what the tools read, nothing else
