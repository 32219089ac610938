"""A setting assigned after construction meets the rules of one given to `Config(...)`:
before, `cfg.rrf_k = float("nan")` or `cfg.hot_budget_tokens = 0` was taken as is and
reached the planner's arithmetic (NaN scores). A refused assignment leaves the value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tiermem import Config

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# (setting, a value its rule refuses)
REFUSED = [
    ("rrf_k", float("nan")),                 # not finite: NaN fusion scores
    ("rrf_k", 0),                            # below its floor of 1: a division by the rank alone
    ("hot_budget_tokens", -1),               # a negative hot budget
    ("retrieval_k", 10**9),                  # past its ceiling
    ("max_body_bytes", 10),                  # below the smallest request the service reads
    ("redis_url", "http://localhost:6379"),  # not a Redis URL
    ("metrics_public", True),                # an open /metrics on a non-loopback host (set below)
]


@pytest.mark.parametrize(("name", "value"), REFUSED)
def test_an_assignment_is_checked_and_a_refused_one_changes_nothing(name: str, value: Any) -> None:
    cfg = Config(http_host="0.0.0.0")
    before = getattr(cfg, name)
    with pytest.raises(ValidationError) as err:
        setattr(cfg, name, value)
    assert name in str(err.value)
    assert getattr(cfg, name) == before


def test_a_good_assignment_takes() -> None:
    cfg = Config()
    cfg.rrf_k = 30
    cfg.hot_budget_tokens = 4096
    assert (cfg.rrf_k, cfg.hot_budget_tokens) == (30, 4096)
