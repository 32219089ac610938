"""`pricing.min_prefix_tokens` is at least the shortest prefix any provider caches
(tiermem.config.MIN_PREFIX_TOKENS_FLOOR, the least `min_prefix` of
planner.cache_rules.PROVIDERS: OpenAI's and Anthropic's 1,024): a smaller value is refused
naming the setting and the bound, in Python and in the CLI (one line, exit 1, no data dir
made).

Fails on the code before (d45244b): the bound was 1, and a middle eviction's kept head is
the fewest leading messages that reach the setting, so at 1 nearly every call evicted from
the middle keeping a 7-token head that no provider caches, the rebuilt rest billed in full.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

from tiermem import Config
from tiermem.planner.cache_rules import PROVIDERS

pytestmark = pytest.mark.usefixtures("clean_env")

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
# the shortest prefix any provider of the cost model caches (rendered tokens)
FLOOR = min(r.min_prefix for r in PROVIDERS.values())
CLI_TIMEOUT_S = 60


def test_the_floor_is_the_providers_least_minimum() -> None:
    from tiermem.config import MIN_PREFIX_TOKENS_FLOOR  # config does not import the planner (numpy)

    assert MIN_PREFIX_TOKENS_FLOOR == FLOOR == 1024


@pytest.mark.parametrize("value", [
    1,  # the old bound: a 7-token head kept at nearly every call
    128,  # OpenAI's step past its minimum, not a minimum
    FLOOR - 1,  # just under
])
def test_under_the_floor_is_refused_naming_the_setting_and_bound(tmp_path: Path, value: int) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data", pricing={"min_prefix_tokens": value})
    (err,) = info.value.errors()
    assert ".".join(str(p) for p in err["loc"]) == "pricing.min_prefix_tokens"
    assert err["type"] == "greater_than_equal" and err["ctx"] == {"ge": FLOOR}


@pytest.mark.parametrize("value", [
    FLOOR,  # OpenAI's and most Claude models' (the default)
    2048,  # Claude Haiku's
    4096,  # some newer Claude models'
    None,  # no minimum: every epoch starts at 0.54 of the budget
])
def test_a_provider_minimum_or_none_is_taken(tmp_path: Path, value: int | None) -> None:
    assert Config(data_dir=tmp_path / "data", pricing={"min_prefix_tokens": value}).pricing.min_prefix_tokens == value


def test_the_cli_says_the_setting_and_bound_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "tiermem.toml"
    config.write_text("[pricing]\nmin_prefix_tokens = 1\n")
    data = tmp_path / "data"
    r = subprocess.run([TIERMEM, "--config", str(config), "--data-dir", str(data), "stats"],
                       capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert r.returncode == 1, r
    assert r.stderr.splitlines() == [
        f"error: invalid configuration: pricing.min_prefix_tokens: Input should be greater than or equal to {FLOOR}"]
    assert not data.exists()  # refused before anything was made
