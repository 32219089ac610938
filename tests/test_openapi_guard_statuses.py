"""Every status the guard middleware answers (tiermem.service.guard) is declared, with the
media type it is sent in, for every route of the OpenAPI document: a foreign Origin (403)
or Host (421), a header sent twice (400), no token on /v1 (401), a body that never
arrives (408), too large (413), not JSON (415) or not valid JSON (422). The routes are
the document's own, so a route added later is checked too.

Fails on the code before (review of the HTTP contract, 2026-12-07): no route declared
403 for a foreign Origin where it had no 403 of its own, none 408 or 421, and /v1/limits
and /metrics declared no 400, 413, 415 or 422 (/v1/limits only 401). Since 1be59d0's
follow-up each GET has a HEAD twin (tiermem.service.head), probed as well.

The real app served by uvicorn, real sockets (a request whose body never comes)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, raw_request, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

BODY_TIMEOUT_S = 0.5  # http_body_timeout_s of the served app: the 408 comes this soon
MAX_BODY_BYTES = 65_536  # max_body_bytes of the served app (max_content_bytes: half)
FOREIGN = "evil.example"
# a concrete value for each path parameter the document names
PATH_VALUES = {"{conversation_id}": "trip", "{position}": "0"}
UNCHECKED_HOST_PATHS = {"/healthz"}  # probes name whatever host they like (guard.HOST_UNCHECKED_PATHS)


@dataclass
class Answer:
    status: int
    content_type: str


@dataclass
class Served:
    url: str
    spec: dict[str, Any]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("guard-statuses") / "data", auth_tokens={TOKEN_ACME: "acme"},
                 metrics_tokens=[TOKEN_METRICS], http_body_timeout_s=BODY_TIMEOUT_S, max_body_bytes=MAX_BODY_BYTES,
                 max_content_bytes=MAX_BODY_BYTES // 2)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield Served(url, httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json())


def _token(path: str) -> str:
    return TOKEN_METRICS if path == "/metrics" else TOKEN_ACME


def _httpx(served: Served, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Answer:
    r = httpx.request(method, served.url + path, headers=headers, content=body or None, timeout=READ_TIMEOUT_S)
    return Answer(r.status_code, r.headers.get("content-type", ""))


def _origin(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {"Authorization": f"Bearer {_token(path)}", "Origin": f"http://{FOREIGN}"})


def _host(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {"Authorization": f"Bearer {_token(path)}", "Host": FOREIGN})


def _no_token(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {})


def _twice(served: Served, method: str, path: str) -> Answer:
    status, headers, _ = raw_request(served.url, method, path, [
        ("Authorization", f"Bearer {_token(path)}"), ("Content-Type", "application/json"),
        ("Content-Type", "application/json")], b"{}")
    return Answer(status, headers.get("content-type", ""))


def _never_arrives(served: Served, method: str, path: str) -> Answer:
    host, port = served.url.removeprefix("http://").split(":")
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {_token(path)}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")  # 99 bytes never sent
    with socket.create_connection((host, int(port)), timeout=READ_TIMEOUT_S) as s:
        s.sendall(head.encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    status_line, *lines = raw.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return Answer(int(status_line.split()[1]), headers.get("content-type", ""))


def _too_large(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {"Authorization": f"Bearer {_token(path)}",
                                         "Content-Type": "application/json"}, b"[" + b"0," * MAX_BODY_BYTES + b"0]")


def _not_json(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {"Authorization": f"Bearer {_token(path)}", "Content-Type": "text/plain"},
                  b"hello")


def _invalid_json(served: Served, method: str, path: str) -> Answer:
    return _httpx(served, method, path, {"Authorization": f"Bearer {_token(path)}",
                                         "Content-Type": "application/json"}, json.dumps({"x": 1})[:-1].encode())


Probe = Callable[[Served, str, str], Answer]
# each case: what is sent, the status the guard answers, whether /healthz is exempt (no
# Host or Origin check there), whether only /v1 routes check it (the bearer token)
CASES: list[tuple[str, Probe, int, bool, bool]] = [
    ("origin", _origin, 403, True, False),  # a page of another origin (DNS rebinding, CSRF)
    ("host", _host, 421, True, False),  # a Host that is none of the service's names
    ("twice", _twice, 400, False, False),  # Content-Type sent twice
    ("no-token", _no_token, 401, False, True),  # /v1 without a bearer token (declared before: control)
    ("never-arrives", _never_arrives, 408, False, False),  # a body of 100 bytes of which 1 comes
    ("too-large", _too_large, 413, False, False),  # a body over max_body_bytes
    ("not-json", _not_json, 415, False, False),  # Content-Type text/plain
    ("invalid-json", _invalid_json, 422, False, False),  # a body cut short
]


def _routes(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    out = []
    for template, item in spec["paths"].items():
        path = template
        for name, value in PATH_VALUES.items():
            path = path.replace(name, value)
        out.extend((method.upper(), template, path) for method in item)
    return out


@pytest.mark.parametrize(("probe", "status", "host_exempt", "v1_only"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_every_route_declares_what_the_guard_answers(served: Served, probe: Probe, status: int, host_exempt: bool,
                                                     v1_only: bool) -> None:
    routes = _routes(served.spec)
    assert ("GET", "/v1/limits", "/v1/limits") in routes and ("GET", "/metrics", "/metrics") in routes
    probed = [(method, template, path) for method, template, path in routes
              if not ((host_exempt and path in UNCHECKED_HOST_PATHS) or (v1_only and not path.startswith("/v1/")))]
    # all routes at once, each on its own connection: a body that never arrives is answered
    # after BODY_TIMEOUT_S, so one route after another waited that long per route (~15 s)
    with ThreadPoolExecutor(max_workers=len(probed)) as pool:
        answers = list(pool.map(lambda r: probe(served, r[0], r[2]), probed))
    undeclared = []
    for (method, template, path), answer in zip(probed, answers, strict=True):
        assert answer.status == status, (method, path, answer)
        declared = served.spec["paths"][template][method.lower()]["responses"].get(str(status))
        # a HEAD answer has no body, nor its declaration: its Content-Type is its GET twin's
        media = declared if method != "HEAD" else served.spec["paths"][template]["get"]["responses"].get(str(status))
        if declared is None or media is None:
            undeclared.append(f"{method} {template}: {status} not declared")
        elif answer.content_type.split(";")[0] not in media.get("content", {}):
            undeclared.append(f"{method} {template}: {status} sent as {answer.content_type}, declared "
                              f"{sorted(media.get('content', {}))}")
    assert undeclared == []
