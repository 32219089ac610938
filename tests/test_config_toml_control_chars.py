"""A TOML export escapes every character TOML needs escaped (`config_sections._toml_string`).

TOML's basic strings take every character raw but `"`, `\\` and the control characters
other than tab, DEL (U+007F) among them. The writer used JSON's escapes, which leave DEL
raw: a data_dir holding one was exported to a file that did not parse.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.config_sections import to_toml

pytestmark = pytest.mark.usefixtures("clean_env")

TEXTS = [
    "a\x7fb",  # DEL: the finding, written raw
    "".join(map(chr, range(0x20))),  # every C0 control, tab included
    "\x80\x9f\u2028\ufeff é",  # C1 controls and separators: raw is valid TOML
    '"\\',  # quote and backslash
]


@pytest.mark.parametrize("text", TEXTS)
def test_value_and_key_parse_back(text: str) -> None:
    data = {"v": text, "t": {text: text}}
    assert tomllib.loads(to_toml(data)) == data


def test_exported_data_dir_with_del_loads_back(tmp_path: Path) -> None:
    data_dir = tmp_path / "odd\x7fdir"
    out = tmp_path / "c.toml"
    res = CliRunner().invoke(cli, ["--data-dir", str(data_dir), "config", "--export", str(out)], obj=CliState())
    assert res.exit_code == 0, res.output
    assert Config.load(out).data_dir == data_dir
