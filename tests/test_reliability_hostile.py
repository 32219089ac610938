"""Hostile input through HTTP against a real `tiermem serve`: every refusal is a 4xx with
a message, nothing is written (message and conversation counts unchanged), and strings
that are syntax somewhere else (FTS5, Lua, Redis keys) are plain data: searched as text,
stored and returned verbatim, never breaking the hot tier."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from reliability_helpers import A, M, Server, record_figure, serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rel-hostile")
    with serving(root / "data", root / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        r = c.post("/v1/conversations/target/messages", headers=A,
                   json={"role": "user", "content": "NEAR(alpha beta) foo*bar -minus col:val \"quoted\" zebra"})
        assert r.status_code == 201
        yield c


def _counts(http: httpx.Client) -> tuple[int, int, list[str]]:
    s = http.get("/v1/stats", headers=A).json()["cold"]
    convs = http.get("/v1/conversations", headers=A).json()["conversations"]
    return s["conversations"], s["messages"], convs


def _refused(r: httpx.Response, what: str) -> None:
    assert 400 <= r.status_code < 500, (what, r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert detail, what
    if isinstance(detail, list):
        assert detail[0]["msg"] and detail[0]["loc"], (what, detail)


BAD_IDS = [
    "..%2F..%2Fetc%2Fpasswd", "..", "%2e%2e", "a%2Fb", "a%5Cb", ".hidden", "-dash",
    "a%00b", "a%0Ab", "a%0Db", "a%09b", "a%7Fb", "a%20b",
    # Unicode look-alikes and invisibles: Cyrillic a, fullwidth a, zero-width space, RTL override
    "%D0%B0lice", "%EF%BD%81lice", "al%E2%80%8Bice", "%E2%80%AEtxt.exe",
    # Redis key and Lua syntax
    "%7Btm%3Ax%7D", "a%7Bb", "a%7Db", "a%22%5D%5D", "a%5D%5D--", "x" * 300,
]


def test_hostile_ids_are_refused_and_write_nothing(http: httpx.Client) -> None:
    before = _counts(http)
    for bad in BAD_IDS:
        for method, suffix, body in [
            ("POST", "/messages", {"role": "user", "content": "x"}),
            ("POST", "/messages:batch", {"messages": [{"role": "user", "content": "x"}]}),
            ("POST", "/context", {"query": "x", "budget": 100}),
            ("GET", "/history", None),
            ("POST", "/pins", {"position": 0}),
            ("POST", "/checkpoints", {"summary": "s", "position": 0}),
        ]:
            r = http.request(method, f"/v1/conversations/{bad}{suffix}", json=body, headers=A)
            _refused(r, f"{method} {bad}{suffix}")
        # as a fork target, in the body (JSON can carry what a URL cannot)
    for new_id in ["../x", "a\x00b", "a\nb", "{tm:x}", '"]]', "аlice", "a\u200bb", "x" * 300, "", " "]:
        r = http.post("/v1/conversations/target/fork", json={"up_to": 0, "new_id": new_id}, headers=A)
        _refused(r, f"fork new_id {new_id!r}")
    for q in ["a\x00b", "\x00"]:
        r = http.get("/v1/search", params={"q": "x", "conversation_id": q}, headers=A)
        _refused(r, f"search conversation_id {q!r}")
    assert _counts(http) == before


def test_hostile_bodies_are_refused_and_write_nothing(http: httpx.Client) -> None:
    before = _counts(http)
    url = "/v1/conversations/target/messages"
    jh = {**A, "content-type": "application/json"}
    limit = 2 * 1024 * 1024  # Config().max_body_bytes is at least this; the probe is far over
    cases: dict[str, tuple[bytes, tuple[int, ...]]] = {
        "oversized": (json.dumps({"role": "user", "content": "x" * (limit * 4)}).encode(), (413,)),
        "deep object": (b'{"role":"user","content":"x","metadata":' + b'{"a":' * 10_000 + b"1" + b"}" * 10_001,
                        (422,)),
        "deep array": (b"[" * 200_000 + b"]" * 200_000, (422,)),
        "invalid utf-8": (b'{"role":"user","content":"\xc3\x28"}', (400, 422)),
        "overlong utf-8": (b'{"role":"user","content":"\xc0\xaf"}', (400, 422)),
        "lone surrogate": (b'{"role":"user","content":"\\udc00"}', (422,)),
        "NaN": (b'{"role":"user","content":"x","created_at":NaN}', (422,)),
        "duplicate junk": (b'{"role":"user","content":"x"}{"role":"user"}', (422,)),
        "bad content-length": (b'{"role":"user","content":"x"}', (400, 413, 422)),
    }
    for name, (raw, statuses) in cases.items():
        headers = dict(jh)
        if name == "bad content-length":
            r = _raw_request(http, url, raw, {**headers, "content-length": "-5"})
            assert r is None or r.status_code in statuses, (name, r.status_code if r else None)
            continue
        r = http.post(url, content=raw, headers=headers)
        assert r.status_code in statuses, (name, r.status_code, r.text[:200])
        assert "detail" in r.json(), name

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts the stream
        yield b'{"role": "user", "content": "'
        for _ in range(limit * 4 // 65536):
            yield b"y" * 65536
        yield b'"}'

    r = http.post(url, content=chunks(), headers=jh)
    assert r.status_code == 413, r.text
    for budget in [-1, 0, -(10**9), 10**12, 2**63, 1.5, "1e9", True, None]:
        r = http.post("/v1/conversations/target/context", json={"query": "x", "budget": budget}, headers=A)
        _refused(r, f"budget {budget!r}")
        assert r.json()["detail"][0]["loc"] == ["body", "budget"], (budget, r.text)
    for k in ["-1", "0", "99999999999999999999", "abc"]:
        r = http.get("/v1/search", params={"q": "x", "k": k}, headers=A)
        _refused(r, f"k {k}")
    for pos in [-1, 2**63, 10**30]:
        r = http.post("/v1/conversations/target/pins", json={"position": pos}, headers=A)
        _refused(r, f"pin position {pos}")
    assert _counts(http) == before


def _raw_request(http: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response | None:
    try:
        return http.post(url, content=body, headers=headers)
    except (httpx.LocalProtocolError, httpx.RemoteProtocolError):
        return None  # the client or the server's HTTP parser refused it outright: nothing reached a handler


FTS = ['"', '""', '"unterminated', "NEAR(", "NEAR(alpha beta)", "NEAR(a b, -1)", "*", "foo*", "-", "-minus",
       ":", "col:val", "messages_fts:zebra", "^zebra", "zebra OR", "AND", "(", ")", "{", "}", '"]]', "\x00",
       "a\nb", "'; DROP TABLE messages; --", "\\", "%", "_", "🙂" * 100, "x" * 20_000]


def test_fts_syntax_is_searched_as_text(http: httpx.Client) -> None:
    before = _counts(http)
    for q in FTS:
        for params in ({"q": q, "conversation_id": "target"}, {"q": q}):
            r = http.get("/v1/search", params=params, headers=A)
            assert r.status_code in (200, 422), (q[:40], r.status_code, r.text[:200])
            if r.status_code == 422:  # only for limits, with the field named
                assert r.json()["detail"][0]["loc"] == ["query", "q"], r.text
    # the planted text is found by its literal tokens, syntax characters and all
    for q in ["NEAR(alpha beta)", "foo*bar", "-minus", "col:val", '"quoted"']:
        hits = http.get("/v1/search", params={"q": q, "conversation_id": "target"}, headers=A).json()["hits"]
        assert hits and hits[0]["position"] == 0, q
    assert _counts(http) == before


LUA_AND_KEYS = ["{", "}", "{tm:target}", "\n", "\x00", '"]]', "]]--[[", "]=]", "redis.call('FLUSHALL')",
                "\\x00\\", "KEYS[1]", "\r\n*1\r\n$8\r\nFLUSHALL\r\n", "a" * 100_000]


def test_lua_and_redis_key_syntax_in_content_is_plain_data(http: httpx.Client, server: Server) -> None:
    conv = "luakeys"
    positions: list[int] = []
    for content in LUA_AND_KEYS:
        r = http.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "content": content,
                      "session_id": content[:128] if content.isprintable() else "s", "metadata": {content[:64]: content[:64]}}, headers=A)
        assert r.status_code == 201, (content[:40], r.text)
        positions.append(r.json()["position"])
    assert positions == list(range(len(LUA_AND_KEYS)))
    hist = http.get(f"/v1/conversations/{conv}/history", headers=A).json()["messages"]
    assert [m["message"]["content"] for m in hist] == LUA_AND_KEYS
    r = http.post(f"/v1/conversations/{conv}/context", json={"query": "FLUSHALL", "budget": 200_000}, headers=A)
    assert r.status_code == 200
    plan: dict[str, Any] = r.json()["plan"]
    assert not plan["degraded"], plan  # the hot tier took all of it
    texts = [m.get("content") for m in r.json()["messages"]]
    for content in LUA_AND_KEYS[:-1]:
        assert content in texts, content
    stats = http.get("/v1/stats", headers=A).json()
    assert stats["hot"]["healthy"]
    # what the hot tier holds (after eviction under its budget) is byte-identical to the log
    from tiermem.tiers.hot import HotTier, make_client
    from tiermem.tiers.redis_server import EmbeddedRedis

    client = make_client(EmbeddedRedis(server.data_dir).url)
    try:
        hs = HotTier(client, budget_tokens=10**6, head_protect=0, tail_protect=0, eviction_bias=0.5).read(conv)
    finally:
        client.close()
    assert hs is not None and hs.last_position == len(LUA_AND_KEYS) - 1 and len(hs.turns) >= 3
    for t in hs.turns:
        assert json.loads(t.payload) == hist[t.position]["message"], t.position
    # the other conversation's hot set was not touched by any of it
    r = http.post("/v1/conversations/target/context", json={"query": "zebra", "budget": 500}, headers=A)
    assert r.status_code == 200 and not r.json()["plan"]["degraded"]


def test_no_5xx_anywhere(http: httpx.Client) -> None:
    metrics = http.get("/metrics", headers=M).text
    assert "tiermem_http_unhandled_errors_total 0.0" in metrics
    assert 'status="500"' not in metrics and 'status="503"' not in metrics
    record_figure("hostile input: 5xx answers", 0, "", "pytest tests/test_reliability_hostile.py")
