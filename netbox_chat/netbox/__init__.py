"""NetBox access for netbox-chat: async client, filter validation, the agent's tools.

Importing this package does not import LangChain: the tools live in
``netbox_chat.netbox.tools`` (``build_netbox_tools``), so ``doctor`` can use the
client alone.
"""

from .client import (
    NetBoxAuthError,
    NetBoxBadRequest,
    NetBoxBadResponse,
    NetBoxClient,
    NetBoxConnectionError,
    NetBoxError,
    NetBoxNoEndpoint,
    NetBoxNotFound,
    NetBoxServerError,
    NetBoxTimeout,
)

__all__ = [
    "NetBoxAuthError",
    "NetBoxBadRequest",
    "NetBoxBadResponse",
    "NetBoxClient",
    "NetBoxConnectionError",
    "NetBoxError",
    "NetBoxNoEndpoint",
    "NetBoxNotFound",
    "NetBoxServerError",
    "NetBoxTimeout",
]
