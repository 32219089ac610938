"""`embedding_model` is checked as the other directory settings are: an empty value (an
unset shell variable, `TIERMEM_EMBEDDING_MODEL=$MODEL`) is refused naming the setting, and
so is a NUL byte. Before, the empty value became Path("") == ".": the current directory
was loaded as the model, and `tiermem search` failed with "Unrecognized model in ..",
naming no setting (`data_dir` and `embedding_cache_dir` were already checked so)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.tiers.embed import bundled_model_path

pytestmark = pytest.mark.usefixtures("clean_env")


# (env, the setting the error names, what it says)
@pytest.mark.parametrize(("env", "named", "says"), [
    ({"TIERMEM_EMBEDDING_MODEL": ""}, "embedding_model", "empty"),             # an unset shell variable
    ({"TIERMEM_EMBEDDING__MODEL": "  "}, "embedding.model", "empty"),           # blanks, in its section
    ({"TIERMEM_EMBEDDING_MODEL": str(bundled_model_path())}, None, None),      # a model's directory: still taken
])
def test_an_empty_model_path_is_refused_naming_it(tmp_path: Path, env: dict[str, str], named: str | None,
                                                  says: str | None) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--json"], obj=CliState(), env=env)
    if named is None:
        assert res.exit_code == 0, res.output
        return
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"{named}: " in res.stderr and says in res.stderr, res.stderr


def test_a_nul_in_the_model_path_is_refused_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[embedding]\nmodel = "a\\u0000b"\n')
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and "embedding.model: " in res.stderr and "NUL" in res.stderr, res.output
