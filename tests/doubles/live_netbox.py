"""The live NetBox of the -m live tests: its address, the token header, a loud skip without it."""

from __future__ import annotations

import os
import sys

import httpx
import pytest

URL = os.environ.get("NETBOX_URL", "")
TOKEN = os.environ.get("NETBOX_TOKEN", "")
WHY_NOT_RUN = (
    "LIVE NETBOX TIER NOT RUN: NETBOX_URL and NETBOX_TOKEN are not set. "
    "Start NetBox with scripts/netbox_up.sh and export the lines it prints."
)


@pytest.fixture(autouse=True, scope="module")
def _need_a_real_netbox() -> None:
    """Only when live tests are selected: skip loudly, or fail when CI requires them."""
    need_a_real_netbox()


def need_a_real_netbox() -> None:
    """The same, for one live test in a module of default-tier tests."""
    if URL and TOKEN:
        return
    if os.environ.get("NETBOX_CHAT_REQUIRE_LIVE") == "1":
        pytest.fail(WHY_NOT_RUN + " (NETBOX_CHAT_REQUIRE_LIVE=1)", pytrace=False)
    sys.__stderr__.write(f"\n\n!!!!! {WHY_NOT_RUN} !!!!!\n\n")
    pytest.skip(WHY_NOT_RUN)


def auth(token: str = TOKEN) -> dict[str, str]:
    scheme = "Bearer" if token.startswith("nbt_") else "Token"
    return {"Authorization": f"{scheme} {token}", "Accept": "application/json"}


class Counting(httpx.AsyncBaseTransport):
    """The real transport, counting what goes out."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
