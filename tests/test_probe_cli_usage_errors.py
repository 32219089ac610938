"""The LoCoMo probes refuse a bad option while their arguments are parsed: a usage error
(exit 2) naming the option, before any sample is read or ingested and before --data-root
is made. `python -m tiermem.evals.recall_rounds --budgets abc` stopped with int()'s
traceback; `--budgets 0` failed in the first context() after every sample was ingested;
`--json-out` into a directory that does not exist (or onto a directory) was a traceback
at the end of the run, its result lost; a `--variant` value that is not a number was
float()'s traceback. The same options of fusion_probe, query_paths, recall_misses (built
by recall_rounds.add_recall_args) and second_model's --json-out likewise. Every refused
case fails on the code before; the kept readings pass before and after."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from locomo_mini import question, sample, write

from tiermem.evals import fusion_probe, query_paths, recall_misses, recall_rounds, second_model

pytestmark = pytest.mark.usefixtures("clean_env")

TEXTS = ["I adopted a grey cat named Pixel.", "Nice! How old is Pixel?", "She is two."]
PROBES: dict[str, Callable[[Sequence[str] | None], int]] = {
    "recall_rounds": recall_rounds.main, "fusion_probe": fusion_probe.main,
    "query_paths": query_paths.main, "recall_misses": recall_misses.main,
}

# (the option's arguments, the option the error names) -- {tmp} is the test's directory
REFUSED = [
    (["--budgets", "abc"], "--budgets"),  # the report's own case: int()'s traceback
    (["--budgets", "500,x"], "--budgets"),  # one bad item among good ones
    (["--budgets", "0"], "--budgets"),  # no context has 0 tokens: failed after the ingest
    (["--budgets", "-500"], "--budgets"),
    (["--budgets", ","], "--budgets"),  # no budget at all: the run measured nothing
    (["--budgets", "3000000"], "--budgets"),  # past MAX_BUDGET_TOKENS (2,000,000)
    (["--json-out", "{tmp}/missing/out.json"], "--json-out"),  # its directory does not exist
    (["--json-out", "{tmp}"], "--json-out"),  # a directory, not a file
    (["--json-out", "{tmp}/data.json/out.json"], "--json-out"),  # below a file
]


def _data(tmp_path: Path) -> Path:
    return write(tmp_path / "data.json", [sample("s", TEXTS, [question("What?", "Pixel", ["D1:1"])])])


def _refused(main: Callable[[Sequence[str] | None], int], argv: list[str], tmp_path: Path,
             capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2  # a usage error, not a traceback
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not (tmp_path / "root").exists()  # nothing made
    return err


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize(("args", "option"), REFUSED)
def test_a_bad_option_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], probe: str,
                                       args: list[str], option: str) -> None:
    argv = ["--data", str(_data(tmp_path)), "--data-root", str(tmp_path / "root"),
            *[a.format(tmp=tmp_path) for a in args]]
    err = _refused(PROBES[probe], argv, tmp_path, capsys)
    assert f"argument {option}:" in err, err


@pytest.mark.parametrize("probe", ["recall_rounds", "recall_misses"])
@pytest.mark.parametrize(("variant", "words"), [
    ("hop:hop=high", "must be a number"),  # float()'s traceback
    ("nocolon", "is not NAME:KEY=V"),  # parse_variant's own refusal, a traceback too
    ("x:nosuch=1", "keys are"),
])
def test_a_bad_variant_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], probe: str,
                                        variant: str, words: str) -> None:
    argv = ["--data", str(_data(tmp_path)), "--data-root", str(tmp_path / "root"), "--variant", variant]
    err = _refused(PROBES[probe], argv, tmp_path, capsys)
    assert "argument --variant:" in err and words in err, err


def test_second_model_json_out_is_checked_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # before: the run ended in a traceback at the write, its result lost
    err = _refused(second_model.main, ["--data", str(_data(tmp_path)), "--json-out",
                                       str(tmp_path / "missing" / "out.json")], tmp_path, capsys)
    assert "argument --json-out:" in err and "does not exist" in err, err


def test_the_module_prints_one_usage_line(tmp_path: Path) -> None:
    # the report's command as typed: no traceback, exit 2, the option and the value named
    res = subprocess.run([sys.executable, "-m", "tiermem.evals.recall_rounds", "--data", str(_data(tmp_path)),
                          "--data-root", str(tmp_path / "root"), "--budgets", "abc"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "argument --budgets:" in res.stderr and "'abc'" in res.stderr
    assert not (tmp_path / "root").exists()


# (text, budgets) -- what a good --budgets still reads as
@pytest.mark.parametrize(("text", "want"), [
    ("2000", [2000]),
    ("500, 2000,500", [500, 2000]),  # spaces, a repeat: sorted, once each
    ("1,2000000", [1, 2_000_000]),  # both ends of the range
])
def test_good_budgets_parse(text: str, want: list[int]) -> None:
    # imported here: new with the check, so the rest of the file runs on the code before
    from tiermem.evals.recall_rounds import budget_list

    assert budget_list(text) == want
