"""A TCP proxy between netbox-chat and PostgreSQL that drops the connection at
the COMMIT of a finished turn, the way a network failure can (issue 21, item
5: a connection lost at the COMMIT).

It reads PostgreSQL's frontend protocol (a startup packet, then messages of
one type byte and a 4-byte length) from the client, watches for the extended-
query Bind that sets a turn's status to `done`, and at the COMMIT after it:

- `forward=True`: sends the COMMIT on, waits for the server to commit, then
  closes the client's side: the server has committed, its answer never arrives;
- `forward=False`: closes both sides instead: the server never sees the COMMIT
  and rolls the transaction back when it notices its client is gone.

With `refuse_after=True` it then stops accepting connections, so a client
that asks the store again cannot reach it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from urllib.parse import urlsplit, urlunsplit

SSL_OR_GSS_REQUEST = (80877103, 80877104)


class CommitCutter:
    def __init__(self, url: str, *, forward: bool, refuse_after: bool) -> None:
        self.target = urlsplit(url)
        self.forward = forward
        self.refuse_after = refuse_after
        self.cut = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        port = self.listener.getsockname()[1]
        netloc = f"{self.target.username}:{self.target.password}@127.0.0.1:{port}"
        self.url = urlunsplit(self.target._replace(netloc=netloc))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            if self.cut.is_set() and self.refuse_after:
                client.close()
                self.listener.close()
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        server = socket.create_connection((self.target.hostname, self.target.port))
        buffer, started, state = b"", False, 0  # 0 idle, 1 saw the UPDATE, 2 its 'done'
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [])
                if server in ready:
                    data = server.recv(65536)
                    if not data:
                        return
                    client.sendall(data)
                if client not in ready:
                    continue
                data = client.recv(65536)
                if not data:
                    return
                buffer += data
                out, commit = b"", False
                while True:
                    if not started:  # the startup packet: a length, then a code
                        if len(buffer) < 8:
                            break
                        length, code = struct.unpack("!II", buffer[:8])
                        if len(buffer) < length:
                            break
                        out, buffer = out + buffer[:length], buffer[length:]
                        started = code not in SSL_OR_GSS_REQUEST
                        continue
                    if len(buffer) < 5:
                        break
                    length = struct.unpack("!I", buffer[1:5])[0] + 1
                    if len(buffer) < length:
                        break
                    message, buffer = buffer[:length], buffer[length:]
                    if b"UPDATE turns SET status" in message:
                        state = 1
                    elif state == 1 and message[:1] == b"B":
                        state = 2 if b"done" in message else 0
                    elif state == 2 and b"COMMIT" in message and not self.cut.is_set():
                        commit = True
                        if not self.forward:
                            break  # neither this nor anything after it is sent
                    out += message
                server.sendall(out)
                if commit:
                    if self.forward:
                        time.sleep(0.5)  # the server commits; its answer is not passed on
                    self.cut.set()
                    return
        finally:
            for side in (client, server):
                with contextlib.suppress(OSError):
                    side.close()
