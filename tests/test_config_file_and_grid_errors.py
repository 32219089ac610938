"""Two errors that named nothing (audit_input2, finding 10): `tiermem tune` with grid keys
that overlap (`hot_budget_tokens=1000` and `hot_budget_tokens.x=2`) failed with a TypeError,
and a config file holding an integer of more than 4,300 digits, or nested past the
parser's recursion, failed with an error that did not name the file (a bare ValueError of
Python's integer limit; a RecursionError). Now: a ValidationError naming the grid keys, and
an error naming the file, from the library and from the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli
from tiermem.evals.tune import parse_grid
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

# (the --grid specs, what the error must name) -- each a TypeError or a silent overwrite before
GRID_REFUSED = [
    (["hot_budget_tokens=1000", "hot_budget_tokens.x=2"], "'hot_budget_tokens' and 'hot_budget_tokens.x'"),  # TypeError
    (["slice_shares.default.retrieved=0.05", "slice_shares.default=1"], "'slice_shares.default' and "
                                                                        "'slice_shares.default.retrieved'"),  # overwrote it
    (["slice_shares..retrieved=0.05"], "'slice_shares..retrieved'"),  # an empty part
]


@pytest.mark.parametrize(("specs", "named"), GRID_REFUSED)
def test_overlapping_grid_keys_are_refused_naming_them(specs: list[str], named: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_grid(specs)
    assert info.value.field == "grid" and named in str(info.value)


def test_the_cli_names_them(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "tune", "--grid", "hot_budget_tokens=1000",
                                   "--grid", "hot_budget_tokens.x=2"], obj=CliState())
    assert res.exit_code != 0 and "hot_budget_tokens.x" in res.output and "TypeError" not in res.output, res.output


def test_disjoint_dotted_keys_still_combine() -> None:
    assert parse_grid(["layer_shares.tail=0.2,0.3", "slice_shares.default.retrieved=0.05"]) == {
        "layer_shares.tail": [0.2, 0.3], "slice_shares.default.retrieved": [0.05]}


# (file name, content, what the error must say besides the file) -- each named no file before
FILES = [
    ("big.json", '{"retrieval_k": ' + "9" * 5000 + "}", "4300 digits"),  # Python's bare ValueError
    ("big.toml", "retrieval_k = " + "9" * 5000 + "\n", "4300 digits"),
    ("deep.json", '{"slice_shares": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),  # RecursionError
    ("deep.toml", "slice_shares = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
]


@pytest.mark.parametrize(("name", "content", "says"), FILES)
def test_a_config_file_error_names_the_file(tmp_path: Path, name: str, content: str, says: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(ValueError) as info:
        Config.load(f, data_dir=tmp_path / "data")
    assert str(f) in str(info.value) and says in str(info.value) and "set_int_max_str_digits" not in str(info.value)
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "config", "--check", str(f)],
                             obj=CliState())
    assert res.exit_code == 1 and name in res.stderr and "Traceback" not in res.output, res.output
