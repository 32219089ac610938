"""No float setting takes inf, nan or an absurdly large value (tiermem.config:
`allow_inf_nan=False` on Config and its nested models, and finite upper bounds), and the
error names the setting.

On the code before (audit_hot, finding 5) settings bounded only below (`gt=0`) took inf
and 1e308: `scheduler_interval_s=inf` passed the config check, and `serve` then ran with
no scheduler (APScheduler overflowed converting it); warm_max_seconds_behind=inf made
views never stale by time, llm_timeout_s=inf let a hung endpoint block forever, and an
infinite price made every cost report inf.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tiermem import Config, Memory
from tiermem.config import MAX_SCHEDULER_INTERVAL_S
from tiermem.tiers.embed_onnx import FastEmbedder

INF, NAN = math.inf, math.nan

# (setting as given, value, the error's location): each refused
REFUSED = [
    pytest.param({"scheduler_interval_s": INF}, "scheduler_interval_s", id="scheduler-inf"),  # serve ran no scheduler
    pytest.param({"scheduler_interval_s": 1e308}, "scheduler_interval_s", id="scheduler-1e308"),  # so did this
    pytest.param({"scheduler": {"interval_s": NAN}}, "scheduler.interval_s", id="scheduler-nan-sectioned"),
    pytest.param({"warm_max_seconds_behind": INF}, "warm_max_seconds_behind", id="warm-seconds-inf"),
    pytest.param({"warm_max_seconds_behind": 1e308}, "warm_max_seconds_behind", id="warm-seconds-1e308"),
    pytest.param({"llm_timeout_s": INF}, "llm_timeout_s", id="llm-timeout-inf"),
    pytest.param({"llm_timeout_s": 1e12}, "llm_timeout_s", id="llm-timeout-huge"),
    pytest.param({"pricing": {"input_per_mtok": INF}}, "pricing.input_per_mtok", id="price-inf"),
    pytest.param({"pricing": {"input_per_mtok": 1e300}}, "pricing.input_per_mtok", id="price-huge"),
    pytest.param({"pricing": {"cached_input_ratio": NAN}}, "pricing.cached_input_ratio", id="ratio-nan"),
    pytest.param({"redis_idle_timeout_s": NAN}, "redis_idle_timeout_s", id="redis-idle-nan"),
    pytest.param({"hot_idle_ttl_s": NAN}, "hot_idle_ttl_s", id="hot-ttl-nan"),
    pytest.param({"eviction_bias": NAN}, "eviction_bias", id="bias-nan"),
    pytest.param({"slice_shares": {"default": {"retrieved": NAN}}}, "slice_shares.default.retrieved", id="share-nan"),
    pytest.param({"layer_shares": {"summary": NAN}}, "layer_shares.summary", id="layer-share-nan"),
]


@pytest.mark.parametrize(("given", "loc"), REFUSED)
def test_a_non_finite_or_huge_float_is_refused_naming_the_field(tmp_path: Path, given: dict[str, Any],
                                                                 loc: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data", **given)
    assert [".".join(str(p) for p in e["loc"]) for e in info.value.errors()] == [loc]


def test_env_inf_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_SCHEDULER_INTERVAL_S", "inf")
    with pytest.raises(pydantic.ValidationError, match="scheduler_interval_s"):
        Config(data_dir=tmp_path / "data")


def test_the_largest_interval_runs_a_scheduler(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", scheduler_interval_s=MAX_SCHEDULER_INTERVAL_S)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hi"})
        scheduler = mem.start_scheduler()
        try:
            assert scheduler.running and scheduler.interval_s == MAX_SCHEDULER_INTERVAL_S
        finally:
            scheduler.shutdown()
