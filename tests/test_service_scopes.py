"""Hierarchical tenancy over HTTP: a token is bound to a namespace prefix, a request names
its namespace in `X-Tiermem-Namespace`, and nothing outside the prefix can be read,
written or sensed (DESIGN invariant 10; issue 13, "Scopes").

Tokens: `acme` (a tenant's backend), `acme/alice` (one of its users), `globex` (another
tenant). Real HTTP to uvicorn serving the real app on a real SQLite file.

The rule tested for probing: for a namespace outside the token's prefix, every answer
is a function of the request alone (the same for a namespace full of data as for one
that never existed), and for conversation routes it is the answer of a missing
conversation, body included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_ALICE, TOKEN_GLOBEX, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service import NAMESPACE_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder

ACME_CONV = "acme-ops"  # in acme
ALICE_CONV = "alice-trip"  # in acme/alice
GLOBEX_CONV = "globex-plan"  # in globex
NEVER = "never-was"
SECRET = "the vault code is 7-4-1"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("scopes") / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        with httpx.Client(base_url=u, timeout=60) as c:
            for token, ns, conv in ((TOKEN_ACME, "acme", ACME_CONV), (TOKEN_ALICE, "acme/alice", ALICE_CONV),
                                    (TOKEN_GLOBEX, "globex", GLOBEX_CONV)):
                for text in (f"{ns}: {SECRET}", f"{ns}: the launch is Friday"):
                    r = c.post(f"/v1/conversations/{conv}/messages", headers=bearer(token, ns),
                               json={"role": "user", "content": text})
                    assert r.status_code == 201, r.text
        yield u


@pytest.fixture
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=60) as c:
        yield c


def conv_probes(c: str) -> list[tuple[str, str, Any]]:
    """Every conversation route, with bodies valid and invalid."""
    return [
        ("GET", f"/v1/conversations/{c}/history", None),
        ("GET", f"/v1/conversations/{c}/active", None),
        ("GET", f"/v1/conversations/{c}/facts", None),
        ("POST", f"/v1/conversations/{c}/messages", {"role": "user", "content": "mine now"}),
        ("POST", f"/v1/conversations/{c}/messages", {"role": "nobody"}),  # an invalid body: still 404
        ("POST", f"/v1/conversations/{c}/messages:batch", {"messages": [{"role": "user", "content": "m"}]}),
        ("POST", f"/v1/conversations/{c}/context", {"query": "vault code?", "budget": 500}),
        ("POST", f"/v1/conversations/{c}/fork", {"up_to": 0, "new_id": "stolen"}),
        ("POST", f"/v1/conversations/{c}/pins", {"position": 0}),
        ("DELETE", f"/v1/conversations/{c}/pins/0", None),
        ("POST", f"/v1/conversations/{c}/checkpoints", {"summary": "hijack", "position": 0}),
        ("DELETE", f"/v1/conversations/{c}", None),
        ("GET", f"/v1/search?q=vault&conversation_id={c}", None),
    ]


NS_PROBES: list[tuple[str, str, Any]] = [
    ("GET", "/v1/conversations", None),
    ("GET", "/v1/search?q=vault", None),
    ("GET", "/v1/stats", None),
    ("POST", "/v1/prune", {"older_than_seconds": 0}),
    ("DELETE", "/v1/namespace", None),
]

# (token, an outside namespace that holds data, an outside namespace that never existed)
OUTSIDE = [
    (TOKEN_ALICE, "acme", "acme/bob"),  # a user's token: neither its parent nor a sibling
    (TOKEN_ALICE, "globex", "initech"),  # nor another tenant
    (TOKEN_GLOBEX, "acme", "acme2"),  # another tenant's; acme2 shares the prefix string, not the scope
    (TOKEN_GLOBEX, "acme/alice", "acme/carol"),
    (TOKEN_ACME, "globex", "acmeish"),  # a tenant token does not reach past its own prefix
]


def _answer(r: httpx.Response) -> tuple[int, str, list[str]]:
    return r.status_code, r.text, sorted(k for k in r.headers if k not in ("date", "content-length"))


@pytest.mark.parametrize(("token", "full", "empty"), OUTSIDE)
def test_outside_the_prefix_a_conversation_answers_like_a_missing_one(
    http: httpx.Client, token: str, full: str, empty: str
) -> None:
    owned = {"acme": ACME_CONV, "acme/alice": ALICE_CONV, "globex": GLOBEX_CONV}[full]
    before = {c: http.get(f"/v1/conversations/{c}/history", headers=bearer(t, ns)).json()
              for t, ns, c in ((TOKEN_ACME, "acme", ACME_CONV), (TOKEN_ALICE, "acme/alice", ALICE_CONV),
                               (TOKEN_GLOBEX, "globex", GLOBEX_CONV))}
    for (method, path, body), (_, never_path, _) in zip(conv_probes(owned), conv_probes(NEVER), strict=True):
        theirs = http.request(method, path, json=body, headers=bearer(token, full))
        never = http.request(method, never_path, json=body, headers=bearer(token, full))
        nowhere = http.request(method, path, json=body, headers=bearer(token, empty))
        assert theirs.status_code == 404, (method, path, theirs.text)
        assert theirs.json() == {"detail": f"conversation {owned!r} not found"}
        # an id that exists there answers as one that does not, and as a namespace that does not
        assert _answer(theirs)[0::2] == _answer(never)[0::2] == _answer(nowhere)[0::2]
        assert theirs.text.replace(owned, "ID") == never.text.replace(NEVER, "ID") and theirs.text == nowhere.text
        assert "7-4-1" not in theirs.text
    # nothing was written anywhere
    for t, ns, c in ((TOKEN_ACME, "acme", ACME_CONV), (TOKEN_ALICE, "acme/alice", ALICE_CONV),
                     (TOKEN_GLOBEX, "globex", GLOBEX_CONV)):
        assert http.get(f"/v1/conversations/{c}/history", headers=bearer(t, ns)).json() == before[c]
    assert http.get("/v1/conversations/stolen/history", headers=bearer(TOKEN_ACME, "acme")).status_code == 404


def test_the_outside_answer_is_the_answer_of_a_missing_conversation_inside(http: httpx.Client) -> None:
    """The 404 outside the prefix is byte for byte what a missing id inside answers."""
    for method, path, body in conv_probes(ACME_CONV):
        if method == "DELETE" or "messages" in path or "fork" in path:
            continue  # inside, these create or erase: no missing-conversation answer to compare with
        outside = http.request(method, path, json=body, headers=bearer(TOKEN_ALICE, "acme"))
        inside = http.request(method, path.replace(ACME_CONV, "nothing-here"), json=body,
                              headers=bearer(TOKEN_ALICE, "acme/alice"))
        assert (outside.status_code, outside.text.replace(ACME_CONV, "ID")) == (
            inside.status_code, inside.text.replace("nothing-here", "ID")), (path, outside.text, inside.text)


@pytest.mark.parametrize(("token", "full", "empty"), OUTSIDE)
def test_outside_the_prefix_a_namespace_route_answers_403_the_same_for_every_namespace(
    http: httpx.Client, token: str, full: str, empty: str
) -> None:
    for method, path, body in NS_PROBES:
        theirs = http.request(method, path, json=body, headers=bearer(token, full))
        nowhere = http.request(method, path, json=body, headers=bearer(token, empty))
        assert theirs.status_code == nowhere.status_code == 403, (path, theirs.text)
        assert theirs.json() == {"detail": f"namespace {full!r} is outside this token's scope"}
        assert theirs.text.replace(full, "NS") == nowhere.text.replace(empty, "NS")
        assert _answer(theirs)[2] == _answer(nowhere)[2]
    # the prune and erase attempts erased nothing
    for t, ns, c in ((TOKEN_ACME, "acme", ACME_CONV), (TOKEN_ALICE, "acme/alice", ALICE_CONV),
                     (TOKEN_GLOBEX, "globex", GLOBEX_CONV)):
        assert len(http.get(f"/v1/conversations/{c}/history", headers=bearer(t, ns)).json()["messages"]) >= 2


def test_a_token_acts_on_its_prefix_and_below(http: httpx.Client) -> None:
    # no header: the token's own prefix
    r = http.get("/v1/conversations", headers=bearer(TOKEN_ACME))
    assert r.json() == {"namespace": "acme", "conversations": [ACME_CONV], "next_after": None}
    # the tenant token reaches its user's namespace by naming it
    r = http.get(f"/v1/conversations/{ALICE_CONV}/history", headers=bearer(TOKEN_ACME, "acme/alice"))
    assert r.status_code == 200 and "7-4-1" in r.text
    # ... and a deeper one it creates on the fly
    r = http.post("/v1/conversations/deep-1/messages", headers=bearer(TOKEN_ALICE, "acme/alice/travel"),
                  json={"role": "user", "content": "a sub-scope of alice"})
    assert r.status_code == 201, r.text
    r = http.get("/v1/conversations", headers=bearer(TOKEN_ACME, "acme/alice/travel"))
    assert r.json() == {"namespace": "acme/alice/travel", "conversations": ["deep-1"], "next_after": None}
    # a namespace lists only its own conversations, never its children's
    assert http.get("/v1/conversations", headers=bearer(TOKEN_ACME, "acme")).json()["conversations"] == [ACME_CONV]
    # the stats of a namespace count only it
    s = http.get("/v1/stats", headers=bearer(TOKEN_ALICE)).json()
    assert s["namespace"] == "acme/alice" and s["cold"]["conversations"] == 1
    # but the conversation is in its namespace only: the right id in the wrong scope is missing
    r = http.get(f"/v1/conversations/{ALICE_CONV}/history", headers=bearer(TOKEN_ACME, "acme"))
    assert r.status_code == 404


# (header value, what the 422 says) -- malformed namespaces are refused naming the header
BAD_HEADERS = [
    ("", "must not be empty"),
    ("acme/", "ids joined by '/'"),
    ("/acme", "ids joined by '/'"),
    ("acme//alice", "ids joined by '/'"),
    ("acme/../globex", "ids joined by '/'"),
    ("acme/a b", "ids joined by '/'"),
    ("/".join(["a"] * 9), "levels"),
    ("a" * 300, "characters"),
]


@pytest.mark.parametrize(("value", "says"), BAD_HEADERS)
def test_a_malformed_namespace_header_is_refused_naming_it(http: httpx.Client, value: str, says: str) -> None:
    for method, path, body in [("GET", f"/v1/conversations/{ACME_CONV}/history", None), *NS_PROBES]:
        r = http.request(method, path, json=body, headers={**bearer(TOKEN_ACME), NAMESPACE_HEADER: value})
        assert r.status_code == 422, (path, r.text)
        (item,) = r.json()["detail"]
        assert item["loc"] == ["header", NAMESPACE_HEADER] and says in item["msg"], item


# /v1 routes that act in no namespace: the limits are the same for every tenant
NAMESPACELESS_PATHS = {"/v1/limits"}


def test_the_namespace_header_is_in_the_openapi_spec(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    n = 0
    for path, ops in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, op in ops.items():
            params = {p["name"]: p for p in op.get("parameters", []) if p["in"] == "header"}
            if path in NAMESPACELESS_PATHS:
                assert NAMESPACE_HEADER not in params, (method, path)  # it would promise a scope
                continue
            assert NAMESPACE_HEADER in params, (method, path)
            assert "prefix" in params[NAMESPACE_HEADER]["description"]
            n += 1
    assert n >= 16  # every /v1 operation (facts included) was checked
    erase = spec["paths"]["/v1/namespace"]["delete"]
    assert "403" in erase["responses"] and "required" in erase["description"].lower()


def test_no_auth_serves_any_namespace(tmp_path_factory: pytest.TempPathFactory,
                                      embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path_factory.mktemp("noauth") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, auth=False, namespace="local") as u, httpx.Client(base_url=u) as c:
        for ns in ("acme", "acme/alice", "globex"):
            r = c.post("/v1/conversations/n-1/messages".replace("n-1", f"c-{ns.replace('/', '-')}"),
                       headers={NAMESPACE_HEADER: ns}, json={"role": "user", "content": ns})
            assert r.status_code == 201, r.text
        assert c.get("/v1/conversations", headers={NAMESPACE_HEADER: "acme/alice"}).json()["conversations"] == [
            "c-acme-alice"]
        # without the header: the server's --namespace
        r = c.post("/v1/conversations/mine/messages", json={"role": "user", "content": "x"})
        assert r.status_code == 201
        assert c.get("/v1/conversations").json() == {"namespace": "local", "conversations": ["mine"], "next_after": None}
