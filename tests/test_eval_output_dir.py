"""A file an eval or `tiermem tune` writes (`--trace`, `--plot`, `--latency-plot`) whose
directory does not exist (or is a file) is a usage error naming the option, found while
the arguments are parsed. Before, `tiermem eval cost --trace /typo/t.jsonl` replayed the
whole conversation (minutes on the LoCoMo file) and then failed with "[Errno 2] No such
file or directory", the run lost; these options were plain paths where 06d0d3a had made
`tune --json-out` and `--write-config` an `OutputPath`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_LOCOMO_DATA of the runner leaks in

USAGE_ERROR_EXIT = 2  # click's: found while parsing, before any data file is read

# (the command before its output option, the option) -- each was written only after the run
CASES = [
    (["eval", "cost"], "--trace"),
    (["eval", "cost"], "--plot"),
    (["eval", "locomo"], "--plot"),
    (["eval", "locomo"], "--latency-plot"),
    (["eval", "session"], "--plot"),
    (["tune", "--budgets", "500"], "--plot"),  # the one tune option 06d0d3a left a plain path
]


@pytest.mark.parametrize(("command", "option"), CASES)
@pytest.mark.parametrize("where", ["missing", "a file"])
def test_an_output_in_no_directory_is_a_usage_error(tmp_path: Path, command: list[str], option: str,
                                                    where: str) -> None:
    (tmp_path / "a-file").write_text("x")
    parent = tmp_path / ("no-such-dir" if where == "missing" else "a-file")
    # no --data: the eval would refuse for want of it (exit 1) had the option passed
    args = [*command, option, str(parent / "out.png"), "--data-dir", str(tmp_path / "d")]
    if command[0] == "tune":
        args = ["--data-dir", str(tmp_path / "d"), *command, option, str(parent / "out.png")]
    res = CliRunner().invoke(cli, args, obj=CliState())
    assert res.exit_code == USAGE_ERROR_EXIT, res.output
    assert option in res.output and str(parent) in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "d").exists()
