"""Integer settings have upper bounds (tiermem.config: MAX_RRF_K, MAX_CONTEXT_TOKENS, ...),
and a value past one is refused when the config is built, naming the setting and the bound.

On the code before (audit_input2, finding 6) these took any size: `rrf_k = 10**309` and
`tool_trim_tokens = 2**63` passed `tiermem config --check`, then `search` / `context`
failed with an OverflowError naming no setting (under the service: /search and /context
answered 500)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli
from tiermem.config import (
    MAX_BODY_BYTES_LIMIT,
    MAX_CONTENT_BYTES_LIMIT,
    MAX_CONTEXT_TOKENS,
    MAX_METADATA_BYTES_LIMIT,
    MAX_PROTECT_TURNS,
    MAX_RRF_K,
    MAX_VIEWS_PER_RUN,
    MAX_WARM_TURNS_BEHIND,
)
from tiermem.memory import MAX_BUDGET_TOKENS

pytestmark = pytest.mark.usefixtures("clean_env")

BIG = 2**63  # one past SQLite's and a C long's integers
HUGE = 10**309  # past a float

# (the setting as a sectioned file names it, its bound) -- each was unbounded above
BOUNDS = [
    ("retrieval.rrf_k", MAX_RRF_K),  # 10**309: search's OverflowError
    ("planner.tool_trim_tokens", MAX_CONTEXT_TOKENS),  # 2**63: context's OverflowError
    ("hot.head_protect", MAX_PROTECT_TURNS),
    ("hot.tail_protect", MAX_PROTECT_TURNS),
    ("warm.max_turns_behind", MAX_WARM_TURNS_BEHIND),
    ("warm.summary_target_tokens", MAX_CONTEXT_TOKENS),
    ("scheduler.max_views_per_run", MAX_VIEWS_PER_RUN),
    ("limits.max_content_bytes", MAX_CONTENT_BYTES_LIMIT),
    ("limits.max_metadata_bytes", MAX_METADATA_BYTES_LIMIT),
    # 10**15 was accepted: the service's guard then read any body whole into memory
    ("limits.max_body_bytes", MAX_BODY_BYTES_LIMIT),
]


def _flat(dotted: str) -> str:
    from tiermem.config_sections import SECTIONS

    section, key = dotted.split(".")
    return SECTIONS[section][key]


@pytest.mark.parametrize("over", [1, BIG, HUGE], ids=["just-over", "2**63", "10**309"])
@pytest.mark.parametrize(("name", "bound"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_a_value_over_the_bound_is_refused_naming_the_field_and_bound(tmp_path: Path, name: str, bound: int,
                                                                       over: int) -> None:
    value = bound + 1 if over == 1 else over
    flat = _flat(name)
    for given, loc in (({flat: value}, flat), ({name.split(".")[0]: {name.split(".")[1]: value}}, name)):
        with pytest.raises(pydantic.ValidationError) as info:
            Config(data_dir=tmp_path / "data", **given)
        (err,) = info.value.errors()
        assert ".".join(str(p) for p in err["loc"]) == loc and err["type"] == "less_than_equal"
        assert f"{bound}" in err["msg"]


@pytest.mark.parametrize(("name", "bound"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_the_bound_itself_is_accepted(tmp_path: Path, name: str, bound: int) -> None:
    flat = _flat(name)
    assert getattr(Config(data_dir=tmp_path / "data", **{flat: bound}), flat) == bound


def test_config_check_refuses_the_audit_values(tmp_path: Path) -> None:
    """`tiermem config --check` said OK to these; the commands after it failed."""
    for line, named in (("rrf_k = " + str(HUGE), "rrf_k"), ("tool_trim_tokens = " + str(BIG), "tool_trim_tokens")):
        f = tmp_path / "c.toml"
        f.write_text(line + "\n")
        res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
        assert res.exit_code == 1 and named in res.stderr and "less than or equal" in res.stderr, res.output


def test_the_context_bound_is_the_largest_budget() -> None:
    # config cannot import tiermem.memory (memory imports config): the copy must agree
    assert MAX_CONTEXT_TOKENS == MAX_BUDGET_TOKENS
