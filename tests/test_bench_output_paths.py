"""A benchmark's output file (`--json`, `--md`, `--out`) is checked while its arguments
are parsed, by the CLI's check (`tiermem.cli.output_path_problem`, as `tiermem tune
--json-out`): a path in no directory, below a file, or naming a directory is a usage error
(exit 2) naming the option, before anything is measured. Before, a bench ran for minutes
and then failed to write its output ("[Errno 2] No such file or directory"), the figures
lost. A bench that makes its output's missing directories (bench, bench_postgres,
bench_scale, bench_startup) still may: there only a file in the way is refused.

Every case fails on the code before (the bench started its work; with `--data` naming no
file it failed at once with an error that is not a usage error)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

USAGE_ERROR_EXIT = 2  # argparse's

# (the bench module, its output option, whether it makes the output's missing directories)
BENCHES = [
    ("bench", "--json", True),  # the combined table: docs/bench.json
    ("bench", "--md", True),  # and its markdown beside it
    ("bench_embed_bulk", "--json", False),
    ("bench_ingest", "--json", False),
    ("bench_postgres", "--out", True),  # make bench-postgres: the JSON and its .md beside it
    ("bench_scale", "--json", True),  # the 1M-turn run: tens of minutes lost
    ("bench_search_scope", "--json", False),  # reads sys.argv (its main takes no argv)
    ("bench_startup", "--json", True),
]


def _refused(module: str, args: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> str:
    main = importlib.import_module(f"tiermem.evals.{module}").main
    with pytest.raises(SystemExit) as info:
        if module == "bench_search_scope":
            monkeypatch.setattr(sys, "argv", [module, *args])
            main()
        else:
            main(args)
    assert info.value.code == USAGE_ERROR_EXIT
    return capsys.readouterr().err


@pytest.mark.parametrize(("module", "option", "makes_dirs"), BENCHES)
@pytest.mark.parametrize("where", [
    "below a file",    # the parent is a regular file: no bench can write there
    "a directory",     # the output names a directory itself
    "missing",         # its directory does not exist: refused unless the bench makes it
])
def test_an_unwritable_output_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], module: str, option: str,
                                               makes_dirs: bool, where: str) -> None:
    if where == "missing" and makes_dirs:
        pytest.skip("this bench makes the output's missing directories")
    monkeypatch.chdir(tmp_path)  # bench.py's other default output (docs/...) lands here
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-dir").mkdir()
    out = {"below a file": tmp_path / "a-file" / "out.json", "a directory": tmp_path / "a-dir",
           "missing": tmp_path / "no-such-dir" / "out.json"}[where]
    # --data names no file: had the option passed, the bench would fail at once another way
    args = [option, str(out), "--data", str(tmp_path / "no-such.json")]
    err = _refused(module, args, monkeypatch, capsys)
    assert f"argument {option}" in err and str(out) in err and "Traceback" not in err, err
    assert (tmp_path / "a-file").read_text() == "x" and not (tmp_path / "no-such-dir").exists()


@pytest.mark.parametrize(("module", "option"), [(m, o) for m, o, makes in BENCHES if makes])
def test_a_bench_that_makes_its_directories_may_name_a_missing_one(tmp_path: Path, module: str,
                                                                    option: str) -> None:
    # what the check returns for such a path: nothing to refuse (the bench makes it)
    from tiermem.cli import output_path_problem

    assert output_path_problem(tmp_path / "new" / "deeper" / "out.json", create_parents=True) is None
    assert output_path_problem(tmp_path / "new" / "out.json") is not None  # the CLI's: must exist
