"""The inspector's per-namespace call history is bounded per token reach, not per tenant.

The history kept `MAX_NAMESPACES_PER_TENANT` namespaces per top-level namespace, so a
user's token (`acme/alice`) that made context calls in 20 namespaces below its own prefix
evicted the history of a sibling user (`acme/bob`, another token): what bob's
/ui/metrics showed depended on alice's activity. Invariant: namespaces are grouped by the
most specific configured token prefix that covers them (else their top level), and the
per-group bound evicts only namespaces of the same group, so a token's sub-namespaces
only evict each other. Real app (TestClient), real context calls through the HTTP route.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.inspector import metrics as metrics_module
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

ACME = "tok-acme-0123456789abcdef"
ALICE = "tok-acme-alice-0123456789abcdef"
BOB = "tok-acme-bob-0123456789abcdef"
TOKENS = {ACME: "acme", ALICE: "acme/alice", BOB: "acme/bob"}
HX = {"HX-Request": "true"}


def _calls(c: TestClient, token: str, ns: str | None = None) -> int:
    assert c.post("/ui/login", json={"token": token}, headers=HX).status_code == 200
    page = c.get("/ui/metrics" + (f"?ns={ns}" if ns else "")).text
    found = re.search(r'data-metric="calls">(\d+)<', page)
    assert found is not None, page[:500]
    return int(found.group(1))


def _context(c: TestClient, token: str, ns: str) -> None:
    h = {"Authorization": f"Bearer {token}", "X-Tiermem-Namespace": ns}
    assert c.post("/v1/conversations/a/messages", headers=h, json={"role": "user", "content": "hi"}).status_code == 201
    r = c.post("/v1/conversations/a/context", headers=h, json={"query": "q", "budget": 500})
    assert r.status_code == 200, r.text


def test_a_user_cannot_evict_a_sibling_users_history(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS)
    flood = metrics_module.MAX_NAMESPACES_PER_TENANT + 5
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            TestClient(create_app(cfg, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        for _ in range(3):
            _context(c, BOB, "acme/bob")
        assert _calls(c, BOB) == 3
        for i in range(flood):  # alice acts only inside her own prefix
            _context(c, ALICE, f"acme/alice/s{i}")
        assert _calls(c, BOB) == 3
        # her own namespaces are still bounded: her least recently seen went
        assert _calls(c, ALICE, "acme/alice/s0") == 0
        assert _calls(c, ALICE, f"acme/alice/s{flood - 1}") == 1
