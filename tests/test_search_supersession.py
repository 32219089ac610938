"""A search hit says whether its message still holds: `status` "current", "superseded"
(a later turn of its conversation replaced or retracted all of it: `superseded_by` and
`until`, as `facts()`) or "superseded_in_part" (some of its statements), read past a
popped correction (it supersedes nothing), in a conversation's scope and a namespace's,
on SQLite and PostgreSQL, through the library, HTTP (its answer and OpenAPI schema), the
client (against a real `tiermem serve` child; a service before these fields: None), MCP
(in process) and the CLI. A search stays a lookup: the hits keep the order the ranking gives them (a
superseded one is marked, not moved), and the states are read for all the hits at once.

On the code before (a git archive copy of 241b7b6) every case here fails: a `SearchHit`
had no `status` ("My budget for the trip is 3000 dollars." came back after "now 5000"
as a bare hit), the HTTP hit had no `status` or `valid_until`, nor the store
`superseded_statements_many`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import tm
from mcp import Client as McpClient
from pg_server import memory_on
from service_helpers import serve_open

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.client import Client, _hits
from tiermem.tiers.embed import Embedder
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE

# the statuses as the API spells them (tiers.models HIT_STATUSES), written out: they are
# what callers compare with
HIT_CURRENT, HIT_SUPERSEDED, HIT_SUPERSEDED_IN_PART = "current", "superseded", "superseded_in_part"
T0 = 1_777_600_000.0  # 2026-05-01 01:46 UTC
HOUR = 3600.0  # seconds between two turns
CONV = "trip"
QUERY = "What is my budget for the trip?"
K = 10  # more than a case's turns: every turn of the conversation is a hit
SETTLE_S = 60.0  # how long the served case waits for supersession at append (the model's first load)

BUDGET = [("user", "My budget for the trip is 3000 dollars."), ("assistant", "Got it, a 3000 dollar budget."),
          ("user", "Actually, my budget for the trip is now 5000 dollars."), ("assistant", "Updated to 5000.")]
UNCORRECTED = [("user", "My budget for the trip is 3000 dollars."), ("assistant", "Got it, a 3000 dollar budget."),
               ("user", "I would also like to see Florence."), ("assistant", "Noted, Florence too.")]
TWO_FACTS = [("user", "My budget for the trip is 3000 dollars and my hotel is the Tivoli Oriente."),
             ("assistant", "Both saved."),
             ("user", "Actually the hotel is now the Pestana Palace."), ("assistant", "Updated.")]

# (case id, the conversation's turns, pop its #2 after them, #0's status, #0's superseded_by)
CASES: list[tuple[str, list[tuple[str, str]], bool, str, int | None]] = [
    # wholly superseded: "now 5000" replaced the whole turn, #2 from T0 + 2 h
    ("wholly", BUDGET, False, HIT_SUPERSEDED, 2),
    # in part: the hotel was corrected, the budget holds; the turn has no superseded_by
    ("in-part", TWO_FACTS, False, HIT_SUPERSEDED_IN_PART, None),
    # the correction popped: it supersedes nothing, #0 is current again
    ("correction-popped", BUDGET, True, HIT_CURRENT, None),
    # nothing corrected (control)
    ("not-superseded", UNCORRECTED, False, HIT_CURRENT, None),
]
SCOPES = ["conversation", "namespace"]  # Memory.search(CONV, ...) and Memory.search(None, ...)


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with memory_on(request, tmp_path, embedder) as m:
        yield m


def _messages(turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"role": r, "content": t, "created_at": T0 + n * HOUR} for n, (r, t) in enumerate(turns)]


def _fill(mem: Memory, conv: str, turns: list[tuple[str, str]], pop: bool) -> None:
    mem.append_many(conv, _messages(turns))
    if pop:
        mem.append(conv, {"type": RETRACT_TYPE, "position": 2})
    mem.catch_up(conv)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize(("case", "turns", "pop", "status", "by"), CASES, ids=[c[0] for c in CASES])
def test_each_hit_says_whether_it_still_holds(mem: Memory, scope: str, case: str, turns: list[tuple[str, str]],
                                              pop: bool, status: str, by: int | None) -> None:
    _fill(mem, CONV, turns, pop)
    hits = {h.position: h for h in mem.search(CONV if scope == "conversation" else None, QUERY, K)}
    assert set(hits) == {0, 1, 2, 3} - ({2} if pop else set())  # a popped correction is never a hit
    first = hits[0]
    assert (first.status, first.superseded_by) == (status, by)
    assert first.until == (T0 + 2 * HOUR if by is not None else None)  # the correction's time, as facts()
    # the assistant's echo of a replaced value goes with it (consolidation.supersede); its
    # last turn holds
    echo = hits[1]
    assert (echo.status, echo.superseded_by) == ((HIT_SUPERSEDED, 2) if status == HIT_SUPERSEDED else (HIT_CURRENT, None))
    assert hits[3].status == HIT_CURRENT and hits[3].superseded_by is None and hits[3].until is None
    if not pop:
        assert hits[2].status == HIT_CURRENT  # the correction itself holds


def test_a_search_ranks_as_before_and_reads_once_for_all_hits(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # three conversations with a correction each, searched across the namespace
    convs = ["a", "b", "c"]
    for conv in convs:
        _fill(mem, conv, BUDGET, False)
    raw = mem.cold.search
    order: list[list[tuple[str, int]]] = []

    def recording(*args: Any, **kw: Any) -> Any:
        got = raw(*args, **kw)
        order.append([(h.conversation_id, h.position) for h in got])
        return got

    calls = {"turns_at_many": 0, "superseded_statements_many": 0, "turns_at": 0, "superseded_statements": 0}
    for name in calls:
        real = getattr(mem.cold, name)

        def counted(*args: Any, _name: str = name, _real: Any = real, **kw: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kw)
        monkeypatch.setattr(mem.cold, name, counted)
    monkeypatch.setattr(mem.cold, "search", recording)
    hits = mem.search(None, QUERY, K)
    assert len(hits) == K
    # one read of the rows and one of the statements for the 10 hits of 3 conversations,
    # the superseding turns' times in one more; none per hit or per conversation
    assert calls == {"turns_at_many": 2, "superseded_statements_many": 1, "turns_at": 0, "superseded_statements": 0}
    # the ranking's order, superseded hits where it put them (not ranked down)
    keys = {mem.cold.key_of("default", c): c for c in convs}
    assert [(keys[c], p) for c, p in order[-1]][:K] == [(h.conversation_id, h.position) for h in hits]
    assert {h.status for h in hits if h.position == 0} == {HIT_SUPERSEDED}
    assert any(h.position == 0 for h in hits[:3])  # the stale statement still ranks near the top


def test_mcp_and_cli_answer_the_state(tmp_path: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        _fill(m, CONV, BUDGET, False)

        async def on_mcp() -> Any:
            async with McpClient(build_server(m.namespaced("default"))) as client:
                r = await client.call_tool("search", {"query": QUERY, "conversation_id": CONV})
                assert not r.is_error, r.content
                return r.structured_content
        tool = {h["position"]: h for h in asyncio.run(on_mcp())["hits"]}
    assert tool[0]["status"] == HIT_SUPERSEDED
    assert tool[0]["valid_until"] == {"position": 2, "time": T0 + 2 * HOUR, "superseded_by": 2}
    assert (tool[2]["status"], tool[2]["valid_until"]) == (HIT_CURRENT, None)
    got = tm(tmp_path, embedder, "", "search", QUERY, "-c", CONV, "--json")
    assert got.exit_code == 0, got.output
    rows = {h["position"]: h for h in json.loads(got.stdout)}
    assert rows[0]["status"] == HIT_SUPERSEDED
    assert rows[0]["valid_until"] == {"position": 2, "time": T0 + 2 * HOUR, "superseded_by": 2}
    assert (rows[2]["status"], rows[2]["valid_until"]) == (HIT_CURRENT, None)
    text = tm(tmp_path, embedder, "", "search", QUERY, "-c", CONV)
    assert text.exit_code == 0, text.output
    assert "(superseded by #2) My budget" in " ".join(text.stdout.split())
    assert "(superseded by #2) Actually" not in " ".join(text.stdout.split())


# -- the service and the client -----------------------------------------------------------


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_open(tmp_path_factory.mktemp("search-supersession")) as served:
        yield served


def _settled(client: Client, conv: str, status: str, count: int) -> list[Any]:
    """The conversation's hits once #0 has `status` and all `count` turns are hits (the
    served model may load after the append: supersession waits for the turn's vector, and
    a turn sharing no word with the query is found by meaning only)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        hits = client.search(conv, QUERY, k=K)
        done = len(hits) == count and any(h.position == 0 and h.status == status for h in hits)
        if done or time.monotonic() > deadline:
            return list(hits)
        time.sleep(0.5)


@pytest.mark.parametrize(("case", "turns", "pop", "status", "by"), CASES, ids=[c[0] for c in CASES])
def test_http_and_client_carry_the_state(url: str, case: str, turns: list[tuple[str, str]], pop: bool,
                                         status: str, by: int | None) -> None:
    conv = f"served-{case}"
    with Client(url) as client:
        client.append_many(conv, _messages(turns))
        if pop:
            client.append(conv, {"type": RETRACT_TYPE, "position": 2})
        hits = {h.position: h for h in _settled(client, conv, status, len(turns) - pop)}
        assert (hits[0].status, hits[0].superseded_by, hits[0].until) == (
            status, by, T0 + 2 * HOUR if by is not None else None)
        assert hits[3].status == HIT_CURRENT
    body = httpx.post(url + "/v1/search", json={"q": QUERY, "conversation_id": conv, "k": K}).json()
    wire = {h["position"]: h for h in body["hits"]}
    assert wire[0]["status"] == status
    assert wire[0]["valid_until"] == ({"position": by, "time": T0 + 2 * HOUR, "superseded_by": by}
                                      if by is not None else None)


def test_openapi_documents_the_fields(url: str) -> None:
    schema = httpx.get(url + "/openapi.json").json()["components"]["schemas"]["SearchHitOut"]
    assert "status" not in schema.get("required", [])  # optional: older clients never asked for it
    assert "valid_until" not in schema.get("required", [])
    statuses = schema["properties"]["status"]["anyOf"][0]["enum"]
    assert statuses == [HIT_CURRENT, HIT_SUPERSEDED, HIT_SUPERSEDED_IN_PART]


def test_client_reads_an_older_services_hits() -> None:
    # what a service before the fields answered: no status, no valid_until
    older = {"hits": [{"conversation_id": CONV, "position": 0, "score": 0.03, "ranks": {"bm25": 1},
                       "text": "My budget for the trip is 3000 dollars."}]}
    (hit,) = _hits(older)
    assert (hit.status, hit.superseded_by, hit.until) == (None, None, None)  # not known, not "current"
    assert hit.text == "My budget for the trip is 3000 dollars."
