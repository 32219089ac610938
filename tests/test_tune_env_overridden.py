"""`tiermem tune --grid KEY=...` over a bad value of KEY in the environment: every candidate
sets KEY from the grid, so the environment's value is never used and is not refused; the
result is kept in the data dir for the inspector as on any run. A bad value the grid does
not override is refused before the run, naming the setting, nothing written.

Before, the candidates were built fine (the grid's value wins over the environment), the
whole run went through, and then the data dir for the inspector's copy was read from the
config without the grid: `error: invalid configuration: retrieval_k: ...`, exit 1, at the
end, after --json-out had been written and without the inspector's copy.

Real CLI (click's runner, in process), a real conversations file, the real embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from convo_fixtures import support_lines, write_jsonl

from tiermem.cli import CliState, cli
from tiermem.config import LAST_TUNE_FILENAME
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # only the TIERMEM_* settings a case gives

BUDGET = "1500"  # holds the whole conversation: one replay a candidate
GRID_K = (3, 5)  # the grid's retrieval.k values
PROGRESS = "replay"  # what the run prints as it replays a candidate


def _tune(tmp_path: Path, embedder: FastEmbedder, env: dict[str, str], grid: str) -> tuple[Result, Path, Path]:
    data = write_jsonl(tmp_path / "s.jsonl", support_lines())
    out, data_dir = tmp_path / "tune.json", tmp_path / "data"
    r = CliRunner().invoke(cli, ["--data-dir", str(data_dir), "tune", str(data), "--budgets", BUDGET, "--grid", grid,
                                 "--json-out", str(out)], obj=CliState(embedder=embedder), env=env)
    return r, out, data_dir


# (the environment's bad value, a grid that overrides it)
OVERRIDDEN = [
    ({"TIERMEM_RETRIEVAL_K": "bad"}, "retrieval.k"),  # not a number; the grid's dotted name
    ({"TIERMEM_RETRIEVAL_K": "0"}, "retrieval.k"),  # a number below the setting's least
    ({"TIERMEM_RETRIEVAL_K": "bad"}, "retrieval_k"),  # the grid's flat name
]


@pytest.mark.parametrize(("env", "key"), OVERRIDDEN)
def test_an_env_value_the_grid_overrides_is_not_refused(tmp_path: Path, embedder: FastEmbedder,
                                                        env: dict[str, str], key: str) -> None:
    r, out, data_dir = _tune(tmp_path, embedder, env, f"{key}={','.join(map(str, GRID_K))}")
    assert r.exit_code == 0, r.output
    result = json.loads(out.read_text())
    assert [c["config"]["retrieval_k"] for c in result["candidates"]] == list(GRID_K)
    # the inspector's copy, in the data dir as on any run (was: exit 1 before it was written)
    assert json.loads((data_dir / LAST_TUNE_FILENAME).read_text())["candidates"] == result["candidates"]


def test_an_env_value_the_grid_leaves_is_refused_before_the_run(tmp_path: Path, embedder: FastEmbedder) -> None:
    r, out, data_dir = _tune(tmp_path, embedder, {"TIERMEM_RETRIEVAL_K": "bad"}, "planner.layer_shares.tail=0.1,0.2")
    assert r.exit_code == 1, r.output
    assert "retrieval_k" in r.stderr and PROGRESS not in r.output, r.output  # named, before any replay
    assert not out.exists() and not data_dir.exists()  # nothing written
