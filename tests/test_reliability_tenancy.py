"""Tenancy: token B can never read, search, fork, pin, checkpoint or learn of namespace A's
conversations: for every endpoint, an id that exists in A answers B exactly as an id that
never existed (status and body, the id itself aside). The database and its sidecars are
0600; the embedded Redis has no TCP port and its socket lives in a 0700 directory."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from reliability_helpers import A, B, Server, record_figure, serving

from tiermem.tiers.redis_server import EmbeddedRedis

SECRET = "secret-conv"
NEVER = "never-existed"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rel-tenancy")
    with serving(root / "data", root / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        for i, text in enumerate(["Alice's launch code is 7-4-1, keep it secret.", "Stored, Alice.",
                                  "Also: the kumquat project ships Friday."]):
            r = c.post(f"/v1/conversations/{SECRET}/messages", headers=A,
                       json={"role": "user" if i % 2 == 0 else "assistant", "content": text})
            assert r.status_code == 201
        assert c.post(f"/v1/conversations/{SECRET}/pins", json={"position": 0}, headers=A).status_code == 200
        r = c.post(f"/v1/conversations/{SECRET}/checkpoints", json={"summary": "launch code", "position": 1},
                   headers=A)
        assert r.status_code == 201
        r = c.post("/v1/conversations/bob-own/messages", json={"role": "user", "content": "Bob's note"}, headers=B)
        assert r.status_code == 201
        yield c


def _probes(c: str) -> list[tuple[str, str, Any]]:
    return [
        ("GET", f"/v1/conversations/{c}/history", None),
        ("GET", f"/v1/conversations/{c}/active", None),
        ("POST", f"/v1/conversations/{c}/context", {"query": "launch code?", "budget": 500}),
        ("POST", f"/v1/conversations/{c}/context", {"query": None, "budget": 1}),
        ("POST", f"/v1/conversations/{c}/fork", {"up_to": 0}),
        ("POST", f"/v1/conversations/{c}/fork", {"up_to": 99}),
        ("POST", f"/v1/conversations/{c}/fork", {"up_to": 0, "new_id": "bob-fork"}),
        ("POST", f"/v1/conversations/{c}/pins", {"position": 0, "priority": 10}),
        ("POST", f"/v1/conversations/{c}/pins", {"position": 99}),
        ("DELETE", f"/v1/conversations/{c}/pins/0", None),
        ("DELETE", f"/v1/conversations/{c}/pins/99", None),
        ("POST", f"/v1/conversations/{c}/checkpoints", {"summary": "hijack", "position": 0}),
        ("POST", f"/v1/conversations/{c}/checkpoints", {"summary": "hijack", "position": 99}),
        ("GET", f"/v1/search?q=launch&conversation_id={c}", None),
        ("GET", f"/v1/search?q=launch&conversation_id={c}&k=0", None),
    ]


def test_an_id_of_another_namespace_answers_like_a_missing_one(http: httpx.Client) -> None:
    b_stats = http.get("/v1/stats", headers=B).json()
    a_hist = http.get(f"/v1/conversations/{SECRET}/history", headers=A).json()
    n = 0
    for (method, url, body), (_, missing_url, _) in zip(_probes(SECRET), _probes(NEVER), strict=True):
        theirs = http.request(method, url, json=body, headers=B)
        missing = http.request(method, missing_url, json=body, headers=B)
        assert theirs.status_code == missing.status_code, (method, url, theirs.text, missing.text)
        assert 400 <= theirs.status_code < 500
        assert theirs.text.replace(SECRET, "ID") == missing.text.replace(NEVER, "ID"), (url, theirs.text)
        assert sorted(theirs.headers.keys()) == sorted(missing.headers.keys())
        for leak in ("alice", "launch", "7-4-1", "kumquat"):
            assert leak not in theirs.text.lower().replace("launch code?", ""), (url, theirs.text)
        n += 1
    # nothing B did changed A's conversation or B's view
    assert http.get(f"/v1/conversations/{SECRET}/history", headers=A).json() == a_hist
    active = http.get(f"/v1/conversations/{SECRET}/active", headers=A).json()
    assert active["checkpoint"]["summary"] == "launch code"
    after = http.get("/v1/stats", headers=B).json()
    for key in ("conversations", "messages"):
        assert after["cold"][key] == b_stats["cold"][key], (key, after, b_stats)
    record_figure("tenancy: probes where another namespace's id differs from a missing id", 0, f"of {n}",
                  "pytest tests/test_reliability_tenancy.py")


def test_namespace_wide_views_never_show_another_namespace(http: httpx.Client) -> None:
    for q in ["launch code", "kumquat", "secret", "Alice", SECRET]:
        r = http.get("/v1/search", params={"q": q, "k": 50}, headers=B)
        assert r.status_code == 200
        assert all(h["conversation_id"] == "bob-own" for h in r.json()["hits"]), r.text
        assert "kumquat" not in r.text and "7-4-1" not in r.text
    assert http.get("/v1/conversations", headers=B).json() == {"namespace": "bob", "conversations": ["bob-own"], "next_after": None}
    stats = http.get("/v1/stats", headers=B).json()
    assert stats["namespace"] == "bob"
    assert stats["cold"]["conversations"] == 1 and stats["cold"]["messages"] == 1
    assert stats["hot"] is None or stats["hot"]["members"] <= 1
    assert SECRET not in json.dumps(stats) and "alice" not in json.dumps(stats)
    # B's context with namespace recall never retrieves A's turns
    r = http.post("/v1/conversations/bob-own/context", json={"query": "what is the launch code?", "budget": 2000,
                  "namespace_recall": True}, headers=B)
    assert r.status_code == 200 and "7-4-1" not in r.text and "kumquat" not in r.text
    # B's prune touches only B
    r = http.post("/v1/prune", json={"older_than_seconds": 0}, headers=B)
    assert r.status_code == 200 and SECRET not in r.text
    assert len(http.get(f"/v1/conversations/{SECRET}/history", headers=A).json()["messages"]) == 3


def test_unauthenticated_endpoints_name_no_conversation(http: httpx.Client) -> None:
    for path in ("/healthz", "/openapi.json"):
        r = http.get(path)
        assert r.status_code == 200
        assert SECRET not in r.text and "alice" not in r.text and "bob-own" not in r.text, path
    # /metrics counts every namespace: neither anonymous callers nor a tenant token read it
    assert http.get("/metrics").status_code == 401
    r = http.get("/metrics", headers=B)
    assert r.status_code == 403 and "tiermem_messages" not in r.text


def test_append_to_an_id_of_another_namespace_names_nothing(http: httpx.Client) -> None:
    """Ids are per namespace (issue 13, item 2; on the old code this answered 409 "taken
    by another namespace"): B appending to A's id creates B's own conversation, with the
    status and body any fresh id gets, and A's conversation is untouched."""
    for url, body in [(f"/v1/conversations/{SECRET}/messages", {"role": "user", "content": "mine"}),
                      (f"/v1/conversations/{SECRET}/messages:batch", {"messages": [{"role": "user", "content": "m"}]})]:
        r = http.post(url, json=body, headers=B)
        assert r.status_code == 201, r.text
        assert "alice" not in r.text and "launch" not in r.text
    assert len(http.get(f"/v1/conversations/{SECRET}/history", headers=A).json()["messages"]) == 3
    mine = http.get(f"/v1/conversations/{SECRET}/history", headers=B).json()["messages"]
    assert [m["position"] for m in mine] == [0, 1] and "launch" not in json.dumps(mine)
    # and the first append's position was 0, as on any fresh id
    fresh = http.post("/v1/conversations/never-used-anywhere/messages", json={"role": "user", "content": "x"},
                      headers=B)
    assert fresh.status_code == 201 and fresh.json()["position"] == 0


def test_files_are_private_and_redis_has_no_tcp_port(server: Server, http: httpx.Client) -> None:
    db = server.data_dir / "tiermem.db"
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        assert path.exists(), path
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == 0o600, (path, oct(mode))
    emb = EmbeddedRedis(server.data_dir)
    sock_dir = emb.socket_path.parent
    assert stat.S_IMODE(sock_dir.stat().st_mode) == 0o700, oct(sock_dir.stat().st_mode)
    assert stat.S_ISSOCK(emb.socket_path.stat().st_mode)
    with redis.Redis.from_url(emb.url) as r:
        assert r.config_get("port") == {"port": "0"}
        unixsocketperm = r.config_get("unixsocketperm")["unixsocketperm"]
        assert int(unixsocketperm, 8) & 0o077 == 0, unixsocketperm
    # and nothing of it listens on TCP: its pid holds no listening inet socket
    pid = emb.pid
    assert pid is not None
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink()
        except OSError:
            continue
        if str(target).startswith("socket:["):
            inodes.add(str(target)[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            assert not (cols[3] == "0A" and cols[9] in inodes), f"redis-server listens on TCP: {line}"
    record_figure("tenancy: db/-wal/-shm modes; redis TCP port", "0600; 0 (unix socket, 0700 dir)", "",
                  "pytest tests/test_reliability_tenancy.py")
