"""`tune --budgets` over the most a budget may be (MAX_BUDGET_TOKENS, what context()
takes) is a usage error (exit 2) naming the option and the limit, before anything runs.
Before, it passed the parse, the run began ("tuning on the bundled demo ...") and the
first context() call ended it with exit 1 (review r_cli 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.tiers.models import MAX_BUDGET_TOKENS

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


@pytest.mark.parametrize("budgets", [
    str(MAX_BUDGET_TOKENS + 1),  # one over
    f"500,{10**11}",  # the review's 99999999999-size value beside a good one
])
def test_a_budget_over_the_max_is_a_usage_error(tmp_path: Path, budgets: str) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "tune", "--budgets", budgets],
                             obj=CliState())
    assert res.exit_code == 2, res.output
    assert "'--budgets'" in res.stderr and str(MAX_BUDGET_TOKENS) in res.stderr, res.stderr
    assert "tuning on" not in res.output  # nothing ran
    assert not (tmp_path / "data").exists()
