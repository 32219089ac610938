"""/v1/stats shows the consolidation scheduler's lag of the caller's namespace only.

The scheduler's `lag_turns` / `lag_seconds` are the largest lag among the stale views of
every namespace; /v1/stats showed them as they were, so a tenant's stats went from 0 to
37 turns when another tenant wrote 37 turns (its write activity leaked). Each case writes
through the HTTP API, runs the scheduler once (as its interval job would), and reads every
namespace's stats: each shows the lag of its own conversations only, over the namespace
itself as the cold counts of the same response are (not the namespaces below it), while
/metrics (the operator's, a metrics token) keeps the process-wide figure. Every case
with another namespace's writes fails on the code before (it showed the global figure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_ALICE, TOKEN_GLOBEX, TOKEN_METRICS, bearer

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_TURNS_BEHIND = 5  # warm views more turns behind than this are over budget (the scheduler picks them)
# the namespace each token acts in by default
TOKEN_OF = {"acme": TOKEN_ACME, "acme/alice": TOKEN_ALICE, "globex": TOKEN_GLOBEX}

# (writes: (namespace, conversation, turns) appended in order, erased: (namespace, conversation)
#  erased after the scheduler's run, the lag_turns each namespace's /v1/stats must show)
CASES = [
    # another tenant's 37 turns: acme's stats stay at 0 (they showed 37)
    ([("globex", "g1", 37)], [], {"acme": 0, "acme/alice": 0, "globex": 37}),
    # each tenant its own largest lag, not the largest of all (acme showed globex's 37)
    ([("acme", "a1", 9), ("globex", "g1", 37)], [], {"acme": 9, "acme/alice": 0, "globex": 37}),
    # a user below the tenant: counted in her namespace, not in acme's (as the cold counts are)
    ([("acme/alice", "diary", 12)], [], {"acme": 0, "acme/alice": 12, "globex": 0}),
    # nothing over budget anywhere: every namespace shows 0
    ([("acme", "a1", MAX_TURNS_BEHIND), ("globex", "g1", 2)], [], {"acme": 0, "acme/alice": 0, "globex": 0}),
    # a conversation erased since the run is in no namespace: its lag is nobody's
    ([("acme", "a1", 7), ("globex", "g1", 37)], [("globex", "g1")], {"acme": 7, "acme/alice": 0, "globex": 0}),
]


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS, metrics_tokens=[TOKEN_METRICS],
                 warm_max_turns_behind=MAX_TURNS_BEHIND)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def scraped_lag_turns(c: TestClient) -> float:
    r = c.get("/metrics", headers=bearer(TOKEN_METRICS))
    assert r.status_code == 200, r.text
    return next(s.value for fam in text_string_to_metric_families(r.text) for s in fam.samples
                if s.name == "tiermem_scheduler_lag_turns")


@pytest.mark.parametrize(("writes", "erased", "want"), CASES)
def test_each_namespace_sees_its_own_lag(mem: Memory, writes: list[tuple[str, str, int]],
                                         erased: list[tuple[str, str]], want: dict[str, int]) -> None:
    app = create_app(mem.config, mem, start_scheduler=False)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        sched = app.state.runtime.scheduler = mem.make_scheduler()  # what the lifespan does, not started
        for ns, conv, n in writes:
            r = c.post(f"/v1/conversations/{conv}/messages:batch", headers=bearer(TOKEN_OF[ns]),
                       json={"messages": [{"role": "user", "content": f"{ns} line {i}"} for i in range(n)]})
            assert r.status_code in (200, 201), r.text
        sched.run_once()
        for ns, conv in erased:
            assert c.delete(f"/v1/conversations/{conv}", headers=bearer(TOKEN_OF[ns])).status_code == 200
        for ns, turns in want.items():
            r = c.get("/v1/stats", headers=bearer(TOKEN_OF[ns]))
            assert r.status_code == 200, r.text
            lag = r.json()["scheduler"]
            assert lag["lag_turns"] == turns, (ns, lag)
            assert (lag["lag_seconds"] == 0.0) == (turns == 0), (ns, lag)
        # the operator's figure stays the largest of all, as of the last run
        assert scraped_lag_turns(c) == max((n for _ns, _c, n in writes if n > MAX_TURNS_BEHIND), default=0)


def test_no_scheduler_no_lag(mem: Memory) -> None:
    # without a scheduler (start_scheduler=False) the stats say so: no scheduler part at all
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as c:
        r = c.get("/v1/stats", headers=bearer(TOKEN_ACME))
        assert r.status_code == 200 and r.json()["scheduler"] is None
