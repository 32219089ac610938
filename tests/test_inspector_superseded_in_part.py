"""The Log page's validity column for a turn superseded in part: each superseded
statement with the turn that replaced it and its interval, never "superseded by #None"
(the turn as a whole has no superseding turn while one of its statements holds).

Invariant: a row whose turn holds in part says "superseded in part" and lists each
superseded statement's replacing turn (`Memory.facts`' statement entries); a turn
superseded whole reads as before ("superseded by #N").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from conftest import full_memory
from fastapi.testclient import TestClient
from inspector_helpers import TOKEN_ACME, TOKENS

from tiermem import Config
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HX = {"HX-Request": "true"}
CONV = "life"
DAY_S = 86_400
T0 = 1_795_000_000  # 2026-11-18 (UTC), any fixed time
INTRO = "I'm Samuel Ortiz. I live in Portland, Oregon, and I work as an ER nurse at Providence Portland Medical Center."
MOVE = "Big news: I moved to Seattle this weekend. I live in Seattle now, in Capitol Hill."
JOB = "And I changed jobs: I left Providence and I now work as a nurse practitioner at Swedish Medical Center."
BUDGET = "My budget is 400 euros."
NEW_BUDGET = "Actually my budget is 300 euros, not 400."


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedder) -> Iterator[TestClient]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS)
    with full_memory(cfg, embedder) as mem:
        msgs = []
        for i, u in enumerate([INTRO, BUDGET, MOVE, JOB, NEW_BUDGET]):
            msgs += [{"role": "user", "content": u, "created_at": T0 + i * DAY_S},
                     {"role": "assistant", "content": "Noted.", "created_at": T0 + i * DAY_S + 60}]
        mem.append_many(CONV, msgs, namespace="acme")
        with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
            assert c.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
            yield c


def _cell(html: str, position: int) -> str:
    """The validity cell (the 7th) of the row of `position`, tags removed."""
    m = re.search(rf'<tr id="turn-{position}".*?</tr>', html, re.S)
    assert m, f"no row for #{position}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", m.group(0), re.S)
    return unescape(re.sub(r"<[^>]+>", " ", cells[5]))


def test_a_turn_superseded_in_part_lists_each_statement(client: TestClient) -> None:
    r = client.get(f"/ui/c/{CONV}", params={"page": 0})
    assert r.status_code == 200
    intro = _cell(r.text, 0)
    assert "#None" not in intro  # before: "superseded by #None"
    assert "superseded in part" in intro
    # each statement with its own replacing turn: the move (#4) and the job change (#6)
    assert re.search(r"“I live in Portland, Oregon” by #4, valid .+ → ", intro), intro
    assert re.search(r"“I work as an ER nurse at Providence Portland Medical Center\.” by #6, valid", intro), intro
    # a turn superseded whole reads as before
    budget = _cell(r.text, 2)
    assert "superseded by #8" in budget and "in part" not in budget
    assert "current since" in _cell(r.text, 4)  # the move holds
