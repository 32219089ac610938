"""`tune --write-config NAME` (TOML by its name) with a null TOML cannot say: refused before
anything is run, exit 2, as the other up-front checks are.

A candidate's config may hold a null whose default is not null (`pricing.min_prefix_tokens`,
from the base file or `--grid`); TOML has no null. Found only when the best one was
written, the whole tune ran (73 s on the demo), then the command exited 1 without printing
its results. Every candidate is checked, since any may be the best; a `.json` name keeps
the null and is let through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")

NULL_BASE = {"pricing": {"min_prefix_tokens": None}}
# (base file's settings, --grid specs, the output's name, the candidate the error names)
REFUSED = [
    (NULL_BASE, [], "best.toml", "c0"),  # the finding: the base's null
    ({}, ["pricing.min_prefix_tokens=2048,null"], "best.toml", "c1"),  # the grid's, its 2nd candidate
    (NULL_BASE, ["retrieval.k=4,6"], "best", "c0"),  # no suffix: TOML too
    ({}, ["hot.budget_tokens=900,1200", "pricing.min_prefix_tokens=null"], "best.cfg", "c0"),  # every one
]


def _tune(tmp_path: Path, base_data: dict[str, object], grid: list[str], name: str,
          *more: str) -> tuple[int, str, Path]:
    base, data_dir = tmp_path / "base.json", tmp_path / "data"
    base.write_text(json.dumps(base_data), encoding="utf-8")
    out = tmp_path / name
    args = ["--data-dir", str(data_dir), "tune", "--budgets", "500", "--config", str(base),
            "--write-config", str(out), *(a for g in grid for a in ("--grid", g)), *more]
    res = CliRunner().invoke(cli, args, obj=CliState())
    return res.exit_code, res.output, out


@pytest.mark.parametrize(("base_data", "grid", "name", "candidate"), REFUSED)
def test_refused_before_the_run(tmp_path: Path, base_data: dict[str, object], grid: list[str], name: str,
                                candidate: str) -> None:
    code, output, out = _tune(tmp_path, base_data, grid, name)
    assert code == 2, output  # a usage error, before the run (it was 1, after it)
    text = " ".join(output.split())
    assert "--write-config" in text and "pricing.min_prefix_tokens" in text and ".json" in text
    assert f"candidate {candidate}" in text and "nothing was run" in text
    assert not out.exists()
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*tune*"))  # no result kept


def test_a_json_name_passes_the_check(tmp_path: Path) -> None:
    # a .json name keeps the null: the command goes on to its next check (an unknown
    # conversation, refused before the run, exit 1), not the null's refusal
    code, output, _ = _tune(tmp_path, NULL_BASE, [], "best.json", "--conversation", "no-such")
    assert code == 1, output
    assert "no conversation 'no-such'" in output and "TOML" not in output
