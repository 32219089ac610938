"""Inputs at the edges that once reached the catch-all (500): each is now a 4xx that
names what is wrong, and writes nothing. Found by an audit of the service, the inspector
and the message formats (2026-12-03); every case here answered 500 on the code before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

C = "/v1/conversations/c"
HUGE_INT = "1" + "0" * 4400  # past Python's 4,300-digit limit for int()
COUNTS = ("messages", "pins", "checkpoints", "conversations")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory,
           embedder: FastEmbedder) -> Iterator[tuple[TestClient, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("edges") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello there"})
        mem.append("c", {"role": "assistant", "content": "hi"})
        app = create_app(cfg, mem, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            yield client, mem


def _counts(mem: Memory) -> dict[str, int]:
    with mem.cold.reading() as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in COUNTS}


CASES: list[tuple[str, str, dict[str, Any], str]] = [
    # a content part's type that is a list: an unhashable set lookup in the format check
    ("POST", f"{C}/messages", {"json": {"role": "user", "content": [{"type": ["text"], "text": "hi"}]}}, "type"),
    # the same as an object, in a batch
    ("POST", f"{C}/messages:batch",
     {"json": {"messages": [{"role": "user", "content": [{"type": {"t": 1}, "text": "hi"}]}]}}, "type"),
    # an integer of 4,400 digits: json.loads raises a plain ValueError (Python's digit limit)
    ("POST", f"{C}/context", {"content": '{"query": "x", "budget": ' + HUGE_INT + "}",
                              "headers": {"content-type": "application/json"}}, "digits"),
    # the same inside a control row
    ("POST", f"{C}/messages", {"content": '{"type": "tiermem.retract", "position": ' + HUGE_INT + "}",
                               "headers": {"content-type": "application/json"}}, "digits"),
    # inspector: a position past SQLite's 64-bit integers
    ("GET", "/ui/c/c/turns?positions=9223372036854775808", {}, "positions"),
    # inspector: a view version past 64 bits
    ("GET", "/ui/c/c/views?kind=rolling&version=9223372036854775808", {}, "version"),
    # inspector: a stored plan's turn past 64 bits
    ("GET", "/ui/c/c/plans?turn=9223372036854775808", {}, "turn"),
]


@pytest.mark.parametrize(("method", "url", "kw", "named"), CASES, ids=[c[1] + " " + c[3] for c in CASES])
def test_an_edge_input_is_refused_with_a_4xx_and_writes_nothing(served: tuple[TestClient, Memory], method: str,
                                                                url: str, kw: dict[str, Any], named: str) -> None:
    client, mem = served
    before = _counts(mem)
    r = client.request(method, url, **kw)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert named in r.text
    assert _counts(mem) == before


def test_the_part_type_is_refused_in_the_library_too(tmp_path: Path, embedder: FastEmbedder) -> None:
    from tiermem import ValidationError

    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        with pytest.raises(ValidationError, match="type"):
            mem.append("c", {"role": "user", "content": [{"type": ["text"], "text": "hi"}]})
        assert mem.conversations() == []


@pytest.mark.parametrize("budget", [1, 5])
def test_a_budget_too_small_even_to_truncate_does_not_advise_truncating(served: tuple[TestClient, Memory],
                                                                        budget: int) -> None:
    # the advice to pass truncate_latest=True was given to a call that had passed it
    client, _mem = served
    r = client.post(f"{C}/context", json={"query": "x", "budget": budget, "truncate_latest": True})
    assert r.status_code == 422, r.text
    assert "truncate_latest" not in r.text and "truncated" in r.text
