"""A real TCP proxy between a client and a real server, for the failures only a network
makes: an append is forwarded (the server stores it) and then its answer never reaches
the client, as when a proxy, a load balancer or a killed worker drops it after COMMIT.

`flaky_proxy(upstream, fault, times)` serves on loopback (HTTP/1.1, keep-alive, one
thread per connection) and forwards every request to `upstream`; the first `times`
appends (`POST .../messages` or `.../messages:batch`) are forwarded and then answered
with `fault` instead of the server's answer:

- `CLOSE`: the connection is closed without a byte of answer (httpx:
  `RemoteProtocolError`, "Server disconnected without sending a response");
- `HOLD`: nothing is answered until the client hangs up (httpx: `ReadTimeout`);
- `BAD_GATEWAY` / `GATEWAY_TIMEOUT`: the proxy answers 502 / 504 itself.

`hide`: fields dropped from `GET /v1/limits` answers (an older server that did not say
them). `Proxy.appends` records each forwarded append's `Idempotency-Key` header (None
when absent), so a test sees what was sent again and under which key.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import httpx

Fault = Literal["close", "hold", "bad_gateway", "gateway_timeout"]
CLOSE: Fault = "close"
HOLD: Fault = "hold"
BAD_GATEWAY: Fault = "bad_gateway"
GATEWAY_TIMEOUT: Fault = "gateway_timeout"
_GATEWAY_STATUS = {BAD_GATEWAY: 502, GATEWAY_TIMEOUT: 504}
UPSTREAM_TIMEOUT_S = 30.0
HOLD_LIMIT_S = 60.0  # a held answer is given up on after this, whatever the client does
MAX_HEAD_BYTES = 65536  # of a request's line and headers
# hop-by-hop headers, and what httpx has already undone (the body is re-framed here)
_NOT_FORWARDED = frozenset({"host", "connection", "keep-alive", "content-length", "transfer-encoding",
                            "content-encoding", "accept-encoding"})


@dataclass
class Proxy:
    url: str
    appends: list[str | None] = field(default_factory=list)


def _is_append(method: str, path: str) -> bool:
    return method == "POST" and path.split("?")[0].endswith(("/messages", "/messages:batch"))


@contextmanager
def flaky_proxy(upstream: str, fault: Fault, times: int = 1, *, hide: tuple[str, ...] = ()) -> Iterator[Proxy]:
    """A proxy to `upstream` whose first `times` appends meet `fault`; yields it."""
    lock = threading.Lock()
    left = [times]
    http = httpx.Client(base_url=upstream, timeout=UPSTREAM_TIMEOUT_S)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while True:
                request = self._read()
                if request is None:
                    return
                method, target, headers, body = request
                sent = [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED]
                answer = http.request(method, target, headers=sent, content=body)
                if _is_append(method, target):
                    with lock:
                        proxy.appends.append(answer.request.headers.get("idempotency-key"))
                        faulty = left[0] > 0
                        left[0] -= faulty
                    if faulty:
                        if fault in _GATEWAY_STATUS:
                            self._write(_GATEWAY_STATUS[fault], [("content-type", "text/plain")], b"upstream lost")
                            continue
                        if fault == HOLD:  # until the client gives up and hangs up
                            self.request.settimeout(HOLD_LIMIT_S)
                            try:
                                while self.request.recv(MAX_HEAD_BYTES):
                                    pass
                            except OSError:
                                pass
                        return  # CLOSE, or HOLD once the client left: the connection ends unanswered
                content = answer.content
                if hide and target.split("?")[0] == "/v1/limits" and answer.status_code == 200:
                    content = json.dumps({k: v for k, v in answer.json().items() if k not in hide}).encode()
                self._write(answer.status_code,
                            [(k, v) for k, v in answer.headers.items() if k.lower() not in _NOT_FORWARDED], content)

        def _read(self) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
            line = self.rfile.readline(MAX_HEAD_BYTES)
            if not line.strip():
                return None
            method, target, _version = line.decode("latin-1").split()
            headers: list[tuple[str, str]] = []
            while (h := self.rfile.readline(MAX_HEAD_BYTES).decode("latin-1").rstrip("\r\n")):
                k, _, v = h.partition(":")
                headers.append((k.strip(), v.strip()))
            length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
            return method, target, headers, self.rfile.read(length) if length else b""

        def _write(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            head = [f"HTTP/1.1 {status} {httpx.codes.get_reason_phrase(status)}",
                    *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(body)}"]
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            self.wfile.flush()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    proxy = Proxy(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        http.close()
        thread.join(timeout=UPSTREAM_TIMEOUT_S)


