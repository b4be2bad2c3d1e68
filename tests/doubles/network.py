"""Loopback addresses where nothing listens, for the paths where a server is down."""

from __future__ import annotations

import socket


def closed_port_number() -> int:
    """A loopback port that was free a moment ago: nothing answers there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> str:
    """The URL of a server that is down."""
    return f"http://127.0.0.1:{closed_port_number()}"
