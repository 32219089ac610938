"""Without a query vector, a narrow query class still retrieves its strong keyword hits.

Outside the recall classes only turns of cosine >= STRONG_COSINE to the message are
eligible (planner.candidates). With the embedding model lost (`context` degraded to
keyword ranking) there is no cosine, so such a message retrieved nothing at all, though a
keyword search finds the turn it is about. Now, without a query vector, a keyword hit is
eligible when its BM25 score is at least STRONG_KEYWORD_SHARE of the best hit's: the
turn the message is about comes back, one that shares a single common word does not.
The model is a real copy of the bundled one under tmp_path, removed; real SQLite.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from export_cache import copy_export_cache

from tiermem import Config, Memory
from tiermem.planner.plan import Context
from tiermem.tiers.embed import bundled_model_path

# a question put to the assistant, now: the `default` class, narrow retrieval
QUERY = "Do you think the Lisbon flight from gate B12 will be delayed?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
WEAK = "The flight attendant course was dull."  # one word in common: not clearly related
OTHER = "The Lisbon flight from gate B12 was moved to 11:15."  # the namespace's other conversation
FILLER = [f"The tomatoes in bed {i} need water and the roses need pruning." for i in range(60)]
BUDGET = 600  # tokens: the flight is out of the recent tail, found by retrieval only


def retrieved(ctx: Context) -> list[tuple[str | None, int]]:
    return [(it.conversation_id, p) for it in ctx.plan.items if it.slice == "retrieved" for p in it.positions]


def test_a_narrow_class_retrieves_its_strong_keyword_hits_without_a_vector(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=copy_export_cache(tmp_path))
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": t} for t in [FLIGHT, WEAK, *FILLER]])
        mem.append_many("c2", [{"role": "user", "content": OTHER}])
        mem.catch_up()
    model.rename(tmp_path / "away")
    with Memory(config, hot=False, background_indexing=False) as mem:
        ctx = mem.context("c1", query=QUERY, budget=BUDGET)
        assert ctx.plan.tiers["embedder"] == "degraded" and ctx.plan.query_class == "default"
        got = retrieved(ctx)
        assert ("c1", 0) in got  # before: nothing retrieved
        assert ("c1", 1) not in got  # a single common word is no strong hit
        assert ("c2", 0) in got  # the namespace's other conversation, by the same rule
        assert "keyword" in ctx.plan.retrieval and "cosine" not in ctx.plan.retrieval
