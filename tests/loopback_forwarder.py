"""A loopback TCP forwarder standing between a client and a real server, for the failures
only a network path makes: a server that moves (a host name repointed), one that accepts
and never answers, connections that all end at once (a restart).

`Forwarder` listens on 127.0.0.1 (`port`); each connection it accepts is relayed to the
server `_connect_upstream` reaches at that moment, so repointing it moves new connections
and leaves those already made where they were. While `silent`, a connection is accepted
and held with no answer (`held` is set): a stopped server's or a silent proxy's
behaviour. `drop_all()` ends every connection made so far; `close()` also stops
listening. Every socket it made is kept referenced until then, so a held connection is
never closed behind the test's back. Subclasses name the server:

- `PostgresForwarder(url)`: the server's Unix socket; `url` reaches it through the port;
- `RedisForwarder(port)`: a TCP port on loopback, `target`, which the test may change.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import socket
import threading

from psycopg.conninfo import conninfo_to_dict, make_conninfo

CHUNK_BYTES = 65536  # one relay read
ACCEPT_BACKLOG = 16  # connections waiting to be accepted: far more than a test opens at once
DEFAULT_PG_PORT = 5432  # the port a URL naming none means (and its Unix socket's name)


def shut(*sockets: socket.socket) -> None:
    """End each connection both ways, so a thread blocked reading it wakes up."""
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:  # already ended
            pass


class Forwarder:
    """127.0.0.1:`port` relayed to the server `_connect_upstream` reaches; see the module."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=ACCEPT_BACKLOG)
        self.port: int = self.listener.getsockname()[1]
        self.silent = False
        self.held = threading.Event()
        self.relayed: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _connect_upstream(self) -> socket.socket:
        raise NotImplementedError

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self.relayed.append(client)
            if self.silent:
                self.held.set()
                continue
            server = self._connect_upstream()
            with self._lock:
                self.relayed.append(server)
            threading.Thread(target=self._upstream, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        """What the client sends, to the server: relayed as is (a subclass may withhold it)."""
        self._pipe(client, server)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(CHUNK_BYTES):
                b.sendall(data)
        except OSError:
            pass
        finally:
            shut(a, b)

    def drop_all(self) -> None:
        """End every connection made so far, as a server restart (or the address's loss) does."""
        with self._lock:
            relayed, self.relayed = self.relayed, []
        shut(*relayed)
        for s in relayed:
            s.close()

    def close(self) -> None:
        self.listener.close()
        self.drop_all()


class PostgresForwarder(Forwarder):
    """A PostgreSQL server's Unix socket (as `url` names it) on a loopback port; `url` is
    the same conninfo with the forwarder's host and port."""

    def __init__(self, url: str) -> None:
        params = conninfo_to_dict(url)
        self.target = f"{params['host']}/.s.PGSQL.{params.get('port') or DEFAULT_PG_PORT}"
        super().__init__()
        self.url = make_conninfo(url, host="127.0.0.1", port=str(self.port))

    def _connect_upstream(self) -> socket.socket:
        server = socket.socket(socket.AF_UNIX)
        server.connect(self.target)
        return server


class RedisForwarder(Forwarder):
    """A loopback port standing for a host name: each connection it accepts goes to the
    loopback port `target` names at that moment (what a lookup at connect time gives)."""

    def __init__(self, target: int) -> None:
        self.target = target
        super().__init__()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _connect_upstream(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.target))
