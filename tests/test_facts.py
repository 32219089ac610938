"""`facts`: what the agent believes now and what held before, with validity intervals,
from the library, over HTTP and from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

T0 = 1_777_600_000.0
CHAT = [
    {"role": "user", "content": "My total budget for the trip is 2,000 EUR.", "created_at": T0},
    {"role": "assistant", "content": "Got it, 2,000 EUR all-in.", "created_at": T0 + 60},
    {"role": "user", "content": "Actually, update: the total budget is now 3,200 EUR for both of us.",
     "created_at": T0 + 120},
    {"role": "user", "content": "What is my total budget now?", "created_at": T0 + 180},
]


def test_facts_over_http(tmp_path: Path, embedder: FastEmbedder) -> None:
    from fastapi.testclient import TestClient

    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("trip", CHAT)
        mem.append("theirs", {"role": "user", "content": "I work at Acme."}, namespace="someone")
        app = create_app(cfg, mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            got = c.get("/v1/conversations/trip/facts").json()
            by = {f["position"]: f for f in got["facts"]}
            assert by[0]["status"] == "superseded"
            assert by[0]["valid_from"] == {"position": 0, "time": T0}
            assert by[0]["valid_until"] == {"position": 2, "time": T0 + 120, "superseded_by": 2}
            assert by[1]["valid_until"]["superseded_by"] == 2  # the echo ends with its source
            assert by[2]["status"] == "current" and by[2]["valid_until"] is None
            assert 3 not in by  # a question is not a fact
            # another namespace's conversation is missing, not forbidden
            assert c.get("/v1/conversations/theirs/facts").status_code == 404
            assert "/v1/conversations/{conversation_id}/facts" in c.get("/openapi.json").json()["paths"]


def test_facts_from_the_cli(tmp_path: Path, embedder: FastEmbedder) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("trip", CHAT)
    res = CliRunner().invoke(cli, ["--data-dir", str(data), "facts", "trip", "--json"], obj=CliState(embedder=embedder))
    assert res.exit_code == 0, res.output
    got = {f["position"]: f for f in json.loads(res.stdout)}
    assert got[0]["valid_until"]["superseded_by"] == 2 and got[0]["current_position"] == 2
    table = CliRunner().invoke(cli, ["--data-dir", str(data), "facts", "trip"], obj=CliState(embedder=embedder))
    assert table.exit_code == 0 and "superseded" in table.output and "#2" in table.output
