"""Erasure reaches the inspector's call history (/ui/metrics).

The history kept each context call's conversation id, time, token counts and query class
after the conversation was erased or pruned, so /ui/metrics of the namespace (and its
next owner) still named the erased conversations. Now every prune and erasure the
service's Memory does, through the HTTP routes or any other caller in the process (the
MCP tools call Memory directly), drops the calls of what it erased, and a namespace left
with none is no longer listed. Each case checks the page, the history and the list of
tracked namespaces against what was erased and what was not; every case fails on the
code before (the erased ids were still there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_GLOBEX, bearer

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
ALICE, KID = "acme/alice", "acme/alice/kid"  # a user of tenant acme, and a namespace below hers
# namespace -> its conversations, each given context calls before the erasure
SEEDED = {
    ALICE: ["divorce-lawyer-call", "groceries"],
    KID: ["homework"],
    "acme": ["team-notes"],
    "globex": ["g1"],
}
TOKEN_FOR = {"globex": TOKEN_GLOBEX}  # every other namespace is acme's


def erase_conversation(c: TestClient, mem: Memory) -> None:
    assert c.delete("/v1/conversations/divorce-lawyer-call", headers=bearer(TOKEN_ACME, ALICE)).status_code == 200


def erase_namespace(c: TestClient, mem: Memory) -> None:
    assert c.delete("/v1/namespace", headers=bearer(TOKEN_ACME, ALICE)).status_code == 200


def prune_namespace(c: TestClient, mem: Memory) -> None:
    r = c.post("/v1/prune", headers=bearer(TOKEN_ACME, ALICE), json={"older_than_seconds": 0})
    assert r.status_code == 200 and r.json()["conversations"] == 2, r.text


def erase_in_process(c: TestClient, mem: Memory) -> None:
    mem.delete_conversation("divorce-lawyer-call", namespace=ALICE)


# (how the erasure is asked for, the (namespace, conversation) pairs it erases)
CASES = [
    # DELETE /v1/conversations/{id}: that conversation's calls only
    (erase_conversation, {(ALICE, "divorce-lawyer-call")}),
    # DELETE /v1/namespace: the namespace and the namespaces below it
    (erase_namespace, {(ALICE, "divorce-lawyer-call"), (ALICE, "groceries"), (KID, "homework")}),
    # POST /v1/prune: the namespace's idle conversations (not those below it)
    (prune_namespace, {(ALICE, "divorce-lawyer-call"), (ALICE, "groceries")}),
    # Memory.delete_conversation from elsewhere in the process (what the MCP erase tool calls)
    (erase_in_process, {(ALICE, "divorce-lawyer-call")}),
]


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def metrics_page(c: TestClient, ns: str) -> str:
    assert c.post("/ui/login", json={"token": TOKEN_FOR.get(ns, TOKEN_ACME)}, headers=HX).status_code == 200
    r = c.get("/ui/metrics", params={"ns": ns})
    assert r.status_code == 200, r.text
    return r.text


@pytest.mark.parametrize(("erase", "erased"), CASES)
def test_erasure_drops_the_calls_it_erased(mem: Memory, erase: Callable[[TestClient, Memory], None],
                                           erased: set[tuple[str, str]]) -> None:
    app = create_app(mem.config, mem, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        for ns, convs in SEEDED.items():
            h = bearer(TOKEN_FOR.get(ns, TOKEN_ACME), ns)
            for conv in convs:
                r = c.post(f"/v1/conversations/{conv}/messages", headers=h,
                           json={"role": "user", "content": f"a line of {conv}"})
                assert r.status_code in (200, 201), r.text
                for budget in (100, 200):
                    assert c.post(f"/v1/conversations/{conv}/context", headers=h,
                                  json={"budget": budget}).status_code == 200
        assert "divorce-lawyer-call" in metrics_page(c, ALICE), "the page names the calls' conversations"
        erase(c, mem)
        history = app.state.plan_metrics
        for ns, convs in SEEDED.items():
            kept = [conv for conv in convs if (ns, conv) not in erased]
            assert sorted({s.conversation_id for s in history.history([ns])}) == sorted(kept), ns
            assert (ns in history.namespaces(lambda _ns: True)) == bool(kept), ns
            page = metrics_page(c, ns)
            for conv in convs:
                assert (conv in page) == (conv in kept), (ns, conv)
