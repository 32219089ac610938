"""A number setting in a config file must be a number: a string there is refused, naming
the setting, at every depth. pydantic's lax mode read `hot_budget_tokens = "3000"` as
3000 (and `[pricing] input_per_mtok = "2.5"` as 2.5): TOML and JSON have number types,
so a quoted number is a slip the file's reader should hear about, as a boolean setting's
`1` already is (test_config_file_booleans). Env text carries no type and still parses
(test_config_numbers_not_booleans: PARSED); so does JSON's number in a file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

SAYS = "must be a number in a config file, got a string"

# (file name, its text, the setting the error names) -- each refused
REFUSED = [
    ("c.toml", 'hot_budget_tokens = "3000"\n', "hot_budget_tokens"),  # the report's own case, by its flat name
    ("c.toml", '[hot]\nbudget_tokens = "3000"\n', "hot.budget_tokens"),  # in its section, named as written
    ("c.toml", '[service]\nport = "8080"\n', "service.port"),  # an int setting
    ("c.toml", '[hot]\neviction_bias = "0.5"\n', "hot.eviction_bias"),  # a float setting
    ("c.toml", '[pricing]\ninput_per_mtok = "2.5"\n', "pricing.input_per_mtok"),  # a nested model's float
    ("c.toml", '[slice_shares.default]\nretrieved = "0.2"\n', "slice_shares.default.retrieved"),  # a share of a class
    ("c.toml", 'llm_timeout_s = ""\n', "llm_timeout_s"),  # empty text: no number either
    ("c.json", json.dumps({"hot_budget_tokens": "3000"}), "hot_budget_tokens"),  # a JSON file is typed too
]


@pytest.mark.parametrize(("name", "text", "named"), REFUSED)
def test_a_string_for_a_number_in_a_file_is_refused(tmp_path: Path, name: str, text: str, named: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(pydantic.ValidationError) as info:
        Config.load(path, data_dir=tmp_path)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]  # before: accepted
    assert SAYS in str(info.value), info.value


# (file text, attribute, value) -- numbers written as numbers, and text settings, still load
ACCEPTED = [
    ("hot_budget_tokens = 3000\n", "hot_budget_tokens", 3000),
    ("[pricing]\ninput_per_mtok = 2.5\n", "pricing", None),  # checked below: 2.5
    ('[warm]\nllm_model = "3000"\n', "llm_model", "3000"),  # a text setting holding digits is text
]


@pytest.mark.parametrize(("text", "attr", "want"), ACCEPTED)
def test_numbers_and_text_in_a_file_still_load(tmp_path: Path, text: str, attr: str, want: object) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    cfg = Config.load(path, data_dir=tmp_path)
    if attr == "pricing":
        assert cfg.pricing.input_per_mtok == 2.5
    else:
        assert getattr(cfg, attr) == want


def test_env_text_still_parses_over_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.toml"
    path.write_text("hot_budget_tokens = 3000\n")
    monkeypatch.setenv("TIERMEM_HOT_BUDGET_TOKENS", "4000")  # env is text by nature
    assert Config.load(path, data_dir=tmp_path).hot_budget_tokens == 4000


def test_config_check_names_the_quoted_number(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[hot]\nbudget_tokens = "3000"\n')
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and "hot.budget_tokens" in res.output and SAYS in res.output, res.output
