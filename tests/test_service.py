"""The HTTP service through httpx against a real `tiermem serve` (uvicorn) on loopback.

One server per module (its startup loads the embedding model), on a fresh data dir
with an embedded Redis and two tokens bound to two namespaces.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ports import free_port

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TOKEN_A = "tokA-alice-0123456789abcdef"
TOKEN_B = "tokB-bob-0123456789abcdef"
A = {"Authorization": f"Bearer {TOKEN_A}"}
B = {"Authorization": f"Bearer {TOKEN_B}"}
TOKEN_METRICS = "tokM-scraper-0123456789abcdef"
M = {"Authorization": f"Bearer {TOKEN_METRICS}"}
STARTUP_TIMEOUT_S = 180.0
TIERMEM = str(Path(sys.executable).with_name("tiermem"))



class Server:
    def __init__(self, data_dir: Path, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{port}"
        self.proc = proc
        self.log = log

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("service")
    data = root / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(
        {
            "TIERMEM_AUTH_TOKENS": json.dumps({TOKEN_A: "alice", TOKEN_B: "bob"}),
            "TIERMEM_METRICS_TOKENS": json.dumps([TOKEN_METRICS]),
            "TIERMEM_SCHEDULER_INTERVAL_S": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    log = root / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [TIERMEM, "--data-dir", str(data), "serve", "--port", str(port), "--log-level", "warning"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    srv = Server(data, port, proc, log)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tiermem serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(srv.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"tiermem serve did not come up:\n{log.read_text()}")
            time.sleep(0.25)
        yield srv
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        EmbeddedRedis(data).stop()
    # a clean shutdown: the lifespan closed Memory and the scheduler without a traceback
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def append(http: httpx.Client, headers: dict[str, str], conv: str, content: str, role: str = "user") -> int:
    r = http.post(
        f"/v1/conversations/{conv}/messages", json={"role": role, "content": content}, headers=headers
    )
    assert r.status_code == 201, r.text
    return int(r.json()["position"])


def count(http: httpx.Client, headers: dict[str, str], conv: str) -> int:
    r = http.get(f"/v1/conversations/{conv}/history", headers=headers)
    if r.status_code == 404:
        return 0
    assert r.status_code == 200, r.text
    return len(r.json()["messages"])


# -- health, auth ----------------------------------------------------------------------------------


def test_healthz_needs_no_token_and_reports_tiers(http: httpx.Client) -> None:
    r = http.get("/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert body["tiers"]["cold"] == "ok"
    assert body["tiers"]["hot"] == "ok"  # the embedded Redis started


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN_A}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN_A}x"},
        {"Authorization": "Bearer tökén".encode("latin-1")},  # type: ignore[dict-item]
    ],
)
def test_no_or_bad_token_is_401(http: httpx.Client, headers: dict[str, Any]) -> None:
    calls = [
        ("GET", "/v1/stats", None),
        ("GET", "/v1/conversations", None),
        ("GET", "/v1/search?q=x", None),
        ("POST", "/v1/conversations/auth-probe/messages", {"role": "user", "content": "hi"}),
        ("POST", "/v1/prune", {"older_than_seconds": 0}),
    ]
    for method, url, body in calls:
        r = http.request(method, url, json=body, headers=headers)
        assert r.status_code == 401, (method, url, r.text)
        assert r.headers.get("www-authenticate") == "Bearer"
    assert count(http, A, "auth-probe") == 0


# -- the main flow -----------------------------------------------------------------------------------------


def test_append_context_fork_flow(http: httpx.Client) -> None:
    conv = "trip-1"
    assert append(http, A, conv, "Hi, please call me Dani.") == 0
    r = http.post(
        f"/v1/conversations/{conv}/messages:batch",
        headers=A,
        json={
            "session_id": "s1",
            "messages": [
                {"role": "assistant", "content": "Hello Dani!"},
                {"role": "user", "content": "I'm allergic to tree nuts; keep it in mind for restaurants."},
                {"role": "assistant", "content": "Noted: no tree nuts, ever."},
                {"role": "user", "content": "My budget for Lisbon is 2000 euros. And no red-eye flights."},
                {"role": "assistant", "content": "Got it: 2000 euros, no red-eyes."},
            ],
        },
    )
    assert r.status_code == 201, r.text
    assert {k: v for k, v in r.json().items() if k != "incarnation"} == {"conversation_id": conv,
                                                                     "positions": [1, 2, 3, 4, 5]}
    for i in range(12):
        append(http, A, conv, f"Filler question {i} about the weather in Lisbon in May?")
        append(http, A, conv, f"Filler answer {i}: mild, around 22 degrees.", role="assistant")
    last = append(http, A, conv, "Which restaurant should we book, given my allergy?")

    r = http.post(
        f"/v1/conversations/{conv}/context",
        headers=A,
        json={"query": "Which restaurant should we book, given my allergy?", "budget": 500},
    )
    assert r.status_code == 200, r.text
    ctx = r.json()
    assert 0 < ctx["tokens"] <= 500
    assert ctx["plan"]["budget"] == 500 and ctx["plan"]["query_class"]
    assert ctx["explain"].startswith(f"context for {conv!r}")
    texts = [m.get("content") for m in ctx["messages"]]
    assert "Which restaurant should we book, given my allergy?" in texts  # the latest user turn, verbatim
    assert any("tree nuts" in str(t) for t in texts), texts  # from far back, under 500 tokens

    r = http.post(f"/v1/conversations/{conv}/fork", headers=A, json={"up_to": 5, "new_id": "trip-1-alt"})
    assert r.status_code == 201, r.text
    assert r.json() == {"conversation_id": "trip-1-alt", "parent_id": conv, "up_to": 5}
    fork_hist = http.get("/v1/conversations/trip-1-alt/history", headers=A).json()["messages"]
    assert [m["position"] for m in fork_hist] == list(range(6))
    assert fork_hist[2]["message"] == {
        "role": "user",
        "content": "I'm allergic to tree nuts; keep it in mind for restaurants.",
    }
    assert fork_hist[2]["session_id"] == "s1"
    assert count(http, A, conv) == last + 1  # the parent is unchanged
    assert append(http, A, "trip-1-alt", "Actually, make it Porto instead.") == 6
    r = http.post(
        "/v1/conversations/trip-1-alt/context", headers=A, json={"query": "where to?", "budget": 200}
    )
    assert r.status_code == 200 and r.json()["tokens"] <= 200

    # pins, a checkpoint, the active view, search, the namespace listing
    r = http.post(f"/v1/conversations/{conv}/pins", headers=A, json={"position": 2, "priority": 90})
    assert r.status_code == 200 and r.json()["pinned"] is True
    r = http.delete(f"/v1/conversations/{conv}/pins/2", headers=A)
    assert r.status_code == 200 and r.json()["pinned"] is False
    r = http.post(
        f"/v1/conversations/{conv}/checkpoints",
        headers=A,
        json={"summary": "Dani: tree-nut allergy, 2000 euros, no red-eyes.", "position": 5},
    )
    assert r.status_code == 201, r.text
    assert r.json()["position"] == 5
    # the scheduler (every second here) may have folded further since: the boundary is >= 5
    active = http.get(f"/v1/conversations/{conv}/active", headers=A).json()
    boundary = active["checkpoint"]["position"]
    assert boundary >= 5
    assert [m["position"] for m in active["messages"]] == list(range(boundary + 1, last + 1))
    hits = http.get(
        "/v1/search", headers=A, params={"q": "tree nuts", "conversation_id": conv, "k": 3}
    ).json()
    assert hits["hits"] and hits["hits"][0]["conversation_id"] == conv
    assert any("tree nuts" in h["text"] for h in hits["hits"])
    convs = http.get("/v1/conversations", headers=A).json()
    assert convs["namespace"] == "alice" and {"trip-1", "trip-1-alt"} <= set(convs["conversations"])


# -- tenancy -------------------------------------------------------------------------------------------------


def test_other_namespace_is_404_exactly_like_missing(http: httpx.Client) -> None:
    conv = "secret-plans"
    append(http, A, conv, "Alice's secret: the launch code is 7-4-1.")
    append(http, A, conv, "Stored.", role="assistant")

    def probes(c: str) -> list[tuple[str, str, Any]]:
        return [
            ("GET", f"/v1/conversations/{c}/history", None),
            ("GET", f"/v1/conversations/{c}/active", None),
            ("POST", f"/v1/conversations/{c}/context", {"query": "launch code?", "budget": 500}),
            ("POST", f"/v1/conversations/{c}/fork", {"up_to": 0}),
            ("POST", f"/v1/conversations/{c}/pins", {"position": 0, "priority": 10}),
            ("DELETE", f"/v1/conversations/{c}/pins/0", None),
            ("POST", f"/v1/conversations/{c}/checkpoints", {"summary": "hijack", "position": 0}),
            ("GET", f"/v1/search?q=launch&conversation_id={c}", None),
        ]

    for (method, url, body), (_, missing_url, _) in zip(probes(conv), probes("never-existed"), strict=True):
        theirs = http.request(method, url, json=body, headers=B)
        missing = http.request(method, missing_url, json=body, headers=B)
        assert theirs.status_code == missing.status_code == 404, (url, theirs.text)
        assert theirs.json() == {"detail": f"conversation {conv!r} not found"}
        assert missing.json() == {"detail": "conversation 'never-existed' not found"}
        assert "alice" not in theirs.text
        assert sorted(theirs.headers.keys()) == sorted(missing.headers.keys())

    # ids are per namespace (issue 13 item 2; the old code answered 409 here, and 422
    # "already exists" to the fork): B's append to the same id is B's own conversation,
    # and a fork of B's onto that id is refused only because B itself now has it
    r = http.post(
        f"/v1/conversations/{conv}/messages", json={"role": "user", "content": "mine now"}, headers=B
    )
    assert r.status_code == 201 and r.json()["position"] == 0 and "alice" not in r.text
    append(http, B, "bob-1", "Bob's own conversation.")
    r = http.post("/v1/conversations/bob-1/fork", json={"up_to": 0, "new_id": "bob-fork"}, headers=B)
    assert r.status_code == 201, r.text
    r = http.post("/v1/conversations/bob-1/fork", json={"up_to": 0, "new_id": conv}, headers=B)
    assert r.status_code == 422 and "alice" not in r.text
    assert [m["message"]["content"] for m in http.get(f"/v1/conversations/{conv}/history", headers=B).json()["messages"]] \
        == ["mine now"]
    for c in (conv, "bob-fork"):  # leave B with one conversation for the checks below
        assert http.delete(f"/v1/conversations/{c}", headers=B).status_code in (200, 204)

    # namespace-wide search, listing and stats never see A's data
    r = http.get("/v1/search", params={"q": "launch code secret"}, headers=B)
    assert r.status_code == 200
    assert all(h["conversation_id"] == "bob-1" for h in r.json()["hits"])
    assert "launch" not in r.text
    assert http.get("/v1/conversations", headers=B).json() == {"namespace": "bob", "conversations": ["bob-1"], "next_after": None}
    stats_b = http.get("/v1/stats", headers=B).json()
    assert stats_b["namespace"] == "bob"
    assert stats_b["cold"]["conversations"] == 1 and stats_b["cold"]["messages"] == 1
    assert "alice" not in json.dumps(stats_b)
    stats_a = http.get("/v1/stats", headers=A).json()
    assert stats_a["cold"]["conversations"] >= 1 and stats_a["cold"]["messages"] >= 2
    # B's prune removes B's conversations only
    r = http.post("/v1/prune", json={"older_than_seconds": 0}, headers=B)
    assert r.status_code == 200 and r.json()["conversation_ids"] == ["bob-1"]
    assert count(http, A, conv) == 2


# -- bad input ----------------------------------------------------------------------------------------------


def test_invalid_input_is_422_naming_the_field_and_writes_nothing(http: httpx.Client) -> None:
    conv = "strict-1"
    append(http, A, conv, "hello")
    url = f"/v1/conversations/{conv}"
    cases: list[tuple[str, str, Any, list[Any]]] = [
        ("POST", url + "/messages", {"role": "wizard", "content": "x"}, ["body", "role"]),
        ("POST", url + "/messages", {"role": "user", "content": "x", "colour": "red"}, ["body", "colour"]),
        (
            "POST",
            url + "/messages",
            {"role": "user", "content": "x", "session_id": ""},
            ["body", "session_id"],
        ),
        ("POST", url + "/messages", {"role": "user", "content": "é" * 600_000}, ["body", "content"]),
        (
            "POST",
            url + "/messages",
            {"role": "user", "content": "x", "metadata": {"k": "v" * 20_000}},
            ["body", "metadata"],
        ),
        (
            "POST",
            url + "/messages:batch",
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 7}]},
            ["body", "messages", 1, "content"],
        ),
        ("POST", url + "/messages:batch", {"messages": []}, ["body", "messages"]),
        (
            "POST",
            "/v1/conversations/bad%20id/messages",
            {"role": "user", "content": "x"},
            ["path", "conversation_id"],
        ),
        (
            "POST",
            "/v1/conversations/%E2%80%AEevil/messages",
            {"role": "user", "content": "x"},
            ["path", "conversation_id"],
        ),
        (
            "POST",
            "/v1/conversations/" + "a" * 300 + "/messages",
            {"role": "user", "content": "x"},
            ["path", "conversation_id"],
        ),
        ("POST", url + "/context", {"query": "x", "budget": 0}, ["body", "budget"]),
        ("POST", url + "/context", {"query": "x", "budget": 10**12}, ["body", "budget"]),
        ("POST", url + "/context", {"query": "x", "budget": "lots"}, ["body", "budget"]),
        ("POST", url + "/fork", {"up_to": -1}, ["body", "up_to"]),
        ("POST", url + "/fork", {"up_to": 99}, ["body", "up_to"]),
        ("POST", url + "/fork", {"up_to": 0, "new_id": "../etc/passwd"}, ["body", "new_id"]),
        ("POST", url + "/pins", {"position": 0, "priority": 101}, ["body", "priority"]),
        ("POST", url + "/pins", {"position": 5}, ["body", "position"]),
        ("DELETE", url + "/pins/7", None, ["path", "position"]),
        ("POST", url + "/checkpoints", {"summary": "", "position": 0}, ["body", "summary"]),
        ("POST", url + "/checkpoints", {"summary": "s", "position": 3}, ["body", "position"]),
        # stored as text: PostgreSQL refuses NUL there (a raw DataError, a 500), so both engines do
        ("POST", url + "/checkpoints", {"summary": "a\u0000b", "position": 0}, ["body", "summary"]),
        ("POST", "/v1/prune", {"older_than_seconds": -5}, ["body", "older_than_seconds"]),
        ("GET", "/v1/search?q=x&k=0", None, ["query", "k"]),
        ("GET", "/v1/search?q=x&k=100000", None, ["query", "k"]),
        ("GET", "/v1/search", None, ["query", "q"]),
    ]
    for method, target, body, loc in cases:
        r = http.request(method, target, json=body, headers=A)
        assert r.status_code == 422, (
            target,
            body if not isinstance(body, dict) else list(body),
            r.text[:300],
        )
        detail = r.json()["detail"]
        assert isinstance(detail, list) and detail, r.text
        assert detail[0]["loc"][: len(loc)] == loc, (target, detail)
        assert detail[0]["msg"]
    # nothing was written anywhere
    assert count(http, A, conv) == 1
    assert http.get(f"/v1/conversations/{conv}/active", headers=A).json()["checkpoint"] is None
    assert "bad id" not in json.dumps(http.get("/v1/conversations", headers=A).json())


def test_hostile_bodies(http: httpx.Client) -> None:
    conv = "hostile-1"
    append(http, A, conv, "hello")
    url = f"/v1/conversations/{conv}/messages"
    json_headers = {**A, "content-type": "application/json"}
    bodies = {
        "invalid utf-8": b'{"role": "user", "content": "\xff\xfe"}',
        "lone surrogate": b'{"role": "user", "content": "\\ud800"}',
        "lone surrogate in a key": b'{"role": "user", "content": "x", "metadata": {"\\udfff": 1}}',
        "NaN": b'{"role": "user", "content": "x", "created_at": NaN}',
        "Infinity": b'{"role": "user", "content": "x", "created_at": Infinity}',
        "huge float": b'{"role": "user", "content": "x", "created_at": 1e400}',
        "year 10000": b'{"role": "user", "content": "x", "created_at": 1e300}',
        "deep nesting": b'{"role": "user", "content": "x", "metadata": '
        + b'{"a": ' * 5000
        + b"1"
        + b"}" * 5001,
        "deep array": b"[" * 100_000 + b"]" * 100_000,
        "truncated": b'{"role": "user", "content": "x"',
        "not an object": b'"just a string"',
        "empty": b"",
        "null": b"null",
    }
    for name, raw in bodies.items():
        r = http.post(url, content=raw, headers=json_headers)
        assert r.status_code in (400, 422), (name, r.status_code, r.text[:200])
        assert "detail" in r.json(), name
    # the same checks apply to the other write endpoints
    r = http.post(
        f"/v1/conversations/{conv}/context",
        content=b'{"query": "\\udcff", "budget": 100}',
        headers=json_headers,
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "query"]
    # search syntax and odd strings are data, not syntax
    for q in [
        '"',
        "NEAR",
        "*",
        "-",
        ":",
        "a OR b",
        "x AND (",
        "'; DROP TABLE messages; --",
        "\x00",
        "{tm:x}",
        "redis.call('FLUSHALL')",
        "🙂" * 50,
    ]:
        r = http.get("/v1/search", params={"q": q, "conversation_id": conv}, headers=A)
        assert r.status_code == 200, (q, r.text)
    for content in ["redis.call('FLUSHALL')", "{tm:hostile-1}", "\x00\x01\x7f", "]]--[[", "a" * 10_000]:
        append(http, A, conv, content)
    r = http.post(
        f"/v1/conversations/{conv}/context", json={"query": "FLUSHALL", "budget": 50_000}, headers=A
    )
    assert r.status_code == 200 and "]]--[[" in r.text
    assert count(http, A, conv) == 6


def test_oversized_body_is_413_and_writes_nothing(http: httpx.Client, server: Server) -> None:
    conv = "big-1"
    append(http, A, conv, "hello")
    limit = Config().max_body_bytes
    big = json.dumps({"role": "user", "content": "x" * (limit + 10)}).encode()
    r = http.post(
        f"/v1/conversations/{conv}/messages", content=big, headers={**A, "content-type": "application/json"}
    )
    assert r.status_code == 413, r.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts the stream
        yield b'{"role": "user", "content": "'
        for _ in range(limit // 65536 + 2):
            yield b"y" * 65536
        yield b'"}'

    r = http.post(
        f"/v1/conversations/{conv}/messages",
        content=chunks(),
        headers={**A, "content-type": "application/json"},
    )
    assert r.status_code == 413, r.text
    assert count(http, A, conv) == 1


# -- ops ----------------------------------------------------------------------------------------------------


def test_metrics_has_latency_histograms_and_tier_state(http: httpx.Client) -> None:
    append(http, A, "metrics-1", "hello")
    http.post("/v1/conversations/metrics-1/context", json={"query": "hi", "budget": 100}, headers=A)
    r = http.get("/metrics", headers=M)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert "# TYPE tiermem_http_request_duration_seconds histogram" in text
    assert (
        'tiermem_http_request_duration_seconds_bucket{le="0.1",method="POST",'
        'route="/v1/conversations/{conversation_id}/messages",status="201"}'
    ) in text
    assert 'route="/v1/conversations/{conversation_id}/context"' in text
    assert "metrics-1" not in text  # ids never become labels
    assert 'tiermem_tier_up{tier="cold"} 1.0' in text
    assert 'tiermem_tier_up{tier="hot"} 1.0' in text
    for name in (
        "tiermem_hot_evictions_total",
        "tiermem_salvaged_rows_total",
        "tiermem_scheduler_running",
        "tiermem_messages",
    ):
        assert name in text, name


def test_openapi_describes_every_operation(http: httpx.Client) -> None:
    r = http.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    paths = spec["paths"]
    expected = {
        ("post", "/v1/conversations/{conversation_id}/messages"),
        ("post", "/v1/conversations/{conversation_id}/messages:batch"),
        ("post", "/v1/conversations/{conversation_id}/context"),
        ("get", "/v1/conversations/{conversation_id}/history"),
        ("get", "/v1/conversations/{conversation_id}/active"),
        ("post", "/v1/conversations/{conversation_id}/fork"),
        ("post", "/v1/conversations/{conversation_id}/pins"),
        ("delete", "/v1/conversations/{conversation_id}/pins/{position}"),
        ("post", "/v1/conversations/{conversation_id}/checkpoints"),
        ("post", "/v1/prune"),
        ("get", "/v1/conversations"),
        ("get", "/v1/search"),
        ("get", "/v1/stats"),
        ("get", "/healthz"),
        ("get", "/metrics"),
    }
    assert expected <= {(m, p) for p, item in paths.items() for m in item}
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "MessageIn" in spec["components"]["schemas"] and "ContextOut" in spec["components"]["schemas"]
    for m, p in expected:
        if p.startswith("/v1/"):
            assert paths[p][m].get("security"), (m, p)


def test_no_request_reached_the_catch_all(http: httpx.Client) -> None:
    text = http.get("/metrics", headers=M).text
    assert "tiermem_http_unhandled_errors_total 0.0" in text
    assert 'status="500"' not in text


# -- in process: the no-auth mode ----------------------------------------------------------------------------


def test_no_auth_mode_serves_one_namespace(tmp_path: Path, embedder: FastEmbedder) -> None:
    from fastapi.testclient import TestClient

    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("theirs", {"role": "user", "content": "other namespace"}, namespace="someone")
        app = create_app(cfg, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.post("/v1/conversations/mine/messages", json={"role": "user", "content": "hi"})
            assert r.status_code == 201
            assert mem.cold.namespace_of("mine") == "default"
            assert c.get("/v1/conversations").json()["conversations"] == ["mine"]
            assert c.get("/v1/conversations/theirs/history").status_code == 404
            assert "security" not in c.get("/openapi.json").json()["paths"]["/v1/stats"]["get"]


def test_auth_without_tokens_refuses_to_build() -> None:
    from tiermem.service import ServiceConfigError

    with pytest.raises(ServiceConfigError, match="no tokens"):
        create_app(Config(auth_tokens={}))
    with pytest.raises(ServiceConfigError, match="namespace"):
        create_app(Config(auth_tokens={"a-long-enough-token-123": "bad namespace!"}))
