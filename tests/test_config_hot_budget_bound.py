"""`hot_budget_tokens` has an upper bound (tiermem.config.MAX_HOT_BUDGET_TOKENS), and the
hot tier refuses a budget its Lua cannot store (tiers.hot).

The budget is written into each hot set's meta by Lua, which prints numbers with %.14g:
from 10**14 on it stores `1e+14`, which no read parses back. On the code before
(audit_hot, finding 3) Config accepted any int >= 64; with 10**17 every rebuild ended in
"dropped during rebuild" and every context() ran degraded from the log.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from tiermem import Config, Memory
from tiermem.config import MAX_HOT_BUDGET_TOKENS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

# (how the budget is given, the value): each refused, naming the setting as given
REFUSED = [
    pytest.param("hot_budget_tokens", 10**17, id="1e17"),  # the audit's: hot tier degraded for good
    pytest.param("hot_budget_tokens", 2**63 - 1, id="int64-max"),
    pytest.param("hot_budget_tokens", MAX_HOT_BUDGET_TOKENS + 1, id="just-over"),
    pytest.param("hot.budget_tokens", 10**14, id="sectioned-1e14"),  # where %.14g stops printing integers
]


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_a_budget_over_the_bound_is_refused_naming_the_field(tmp_path: Path, name: str, value: int) -> None:
    section, _, key = name.rpartition(".")
    given = {section: {key: value}} if section else {name: value}
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data", **given)
    (err,) = info.value.errors()
    assert ".".join(str(p) for p in err["loc"]) == name and err["type"] == "less_than_equal"


def test_the_bound_itself_works(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", hot_budget_tokens=MAX_HOT_BUDGET_TOKENS)
    try:
        with Memory(cfg, embedder=embedder, background_indexing=False) as mem:
            for i in range(4):
                mem.append("c", {"role": "user", "content": f"message {i}"})
            ctx = mem.context("c", None, 500)
            assert ctx.plan.tiers["hot"] == "ok" and not ctx.plan.degraded
            assert mem.hot is not None and mem.hot.healthy and mem.hot.rebuilds == 0
            hs = mem.hot.tier.read("c")
            assert hs is not None and hs.budget == MAX_HOT_BUDGET_TOKENS and len(hs.turns) == 4
    finally:
        EmbeddedRedis(cfg.data_dir).stop()
