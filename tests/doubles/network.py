"""Loopback ports: where nothing listens (a server that is down), or free for a
server a test starts."""

from __future__ import annotations

import socket

# Each port handed out stays bound, never listening, for the life of the test
# process: a connection to it is refused, and no other test's server (xdist
# runs several at once) can be given it. A port merely free a moment ago was
# sometimes taken by another worker's server, which then answered 404.
_HELD: list[socket.socket] = []


def closed_port_number() -> int:
    """A loopback port where nothing answers: connections to it are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return int(sock.getsockname()[1])


def free_port_number() -> int:
    """A loopback port free a moment ago, for a server a test starts to bind."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> str:
    """The URL of a server that is down."""
    return f"http://127.0.0.1:{closed_port_number()}"
