"""The HTTP service takes every message format as the library does: what the openai SDK
produces (nulls included) comes back equal from /history, a batch of Responses items
too, and a refused body is a 422 whose loc names the field, writing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import sdk_corpus as corpus

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder


def test_http_round_trips_every_format(tmp_path: Path, embedder: FastEmbedder) -> None:
    from fastapi.testclient import TestClient

    cfg = Config(data_dir=tmp_path / "data")
    chat, resp = corpus.chat_conversation(), corpus.responses_conversation()
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        app = create_app(cfg, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            for m in chat:  # one at a time: the single-message endpoint
                assert c.post("/v1/conversations/chat/messages", json=m).status_code == 201, m
            r = c.post("/v1/conversations/resp/messages:batch", json={"messages": resp})
            assert r.status_code == 201, r.text
            for conv, sent in (("chat", chat), ("resp", resp)):
                got = [m["message"] for m in c.get(f"/v1/conversations/{conv}/history").json()["messages"]]
                assert got == json.loads(json.dumps(sent))
            ctx = c.post("/v1/conversations/resp/context", json={"query": "book it", "budget": 4000}).json()
            corpus.valid_responses(ctx["messages"])
            # refused: the loc names the field inside the message, in a batch its index too
            bad = c.post("/v1/conversations/chat/messages", json={"role": "user", "content": "x", "colour": "r"})
            assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "colour"]
            bad = c.post("/v1/conversations/resp/messages:batch", json={"messages": [
                resp[0], {"type": "function_call_output", "output": "42"}]})
            assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "messages", 1, "call_id"]
            assert len(c.get("/v1/conversations/resp/history").json()["messages"]) == len(resp)
