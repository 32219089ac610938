"""LocomoError, the eval harness's refusal of a LoCoMo data file it cannot use, is one of
tiermem's exceptions: defined in `tiers.errors`, exported by `tiermem.errors` as the very
class `evals.locomo` raises, a TiermemError and a ValueError (the data is at fault, as
DataFileError's). It subclassed bare Exception in `evals.locomo`, so a library caller of
`load_samples` or `run_locomo` could catch it only by importing the harness module, and not
as ValueError. On the code before, every test here fails but the command's one line (which
passes before and after: each CLI catches the class by name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import tiermem.errors
import tiermem.evals.locomo
from tiermem.cli import cli
from tiermem.evals.locomo import load_samples

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def test_the_harness_raises_the_public_class() -> None:
    assert tiermem.evals.locomo.LocomoError is tiermem.errors.LocomoError
    assert issubclass(tiermem.errors.LocomoError, tiermem.errors.TiermemError)
    assert issubclass(tiermem.errors.LocomoError, ValueError)


def test_a_malformed_file_is_caught_as_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "lo.json"
    path.write_text('{"sample_id": "a"}', encoding="utf-8")  # an object, not a list of samples
    with pytest.raises(ValueError) as exc:
        load_samples(path)
    assert isinstance(exc.value, tiermem.errors.LocomoError)
    assert str(exc.value) == f"{path}: is not a JSON list of LoCoMo samples"
    assert (exc.value.problem, exc.value.path) == ("is not a JSON list of LoCoMo samples", str(path))


def test_the_command_still_prints_one_line(tmp_path: Path) -> None:
    path = tmp_path / "lo.json"
    path.write_text("[]", encoding="utf-8")  # no samples: the eval's own LocomoError
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "eval", "locomo", "--data", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.strip()]
    assert line == f"Error: {path} holds no samples", result.output
    assert not (tmp_path / "d").exists()  # refused before the data dir is touched
