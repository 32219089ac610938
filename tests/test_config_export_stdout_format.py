"""`config --export - --format json`: stdout can say a null.

Stdout was always TOML, and TOML has no null: with a null `pricing.min_prefix_tokens` (its
default is 1,024) `config --export -` was refused, its hint "a name ending in .json", which
stdout cannot have, so no form of stdout export wrote that config. `--format` picks stdout's
format, and the refusal names it. A file's format stays its name's (how it is read back):
`--format` there must agree with the name.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

NULL = {"pricing": {"min_prefix_tokens": None}}
# (the config's settings, export arguments, exit code, the format stdout holds, or a text the error holds)
CASES = [
    (NULL, ["--export", "-", "--format", "json"], 0, "json"),  # the finding: a way to say the null
    (NULL, ["--export", "-"], 1, "--format json"),  # refused, the hint names the way (not a .json name)
    (NULL, ["--export", "-", "--format", "toml"], 1, "--format json"),  # asked TOML: the same refusal
    ({"retrieval": {"k": 7}}, ["--export", "-", "--format", "toml"], 0, "toml"),  # TOML when it can
    ({"retrieval": {"k": 7}}, ["--export", "-"], 0, "toml"),  # the default: TOML, as before
    (NULL, ["--export", "{tmp}/out.toml", "--format", "json"], 2, "read back as toml"),  # a file's name decides
    (NULL, ["--export", "{tmp}/out.json", "--format", "toml"], 2, "read back as json"),  # ... either way
    (NULL, ["--format", "json"], 2, "is for --export"),  # nothing to format
    (NULL, ["--export", "{tmp}/out.toml"], 1, "a name ending in .json"),  # a file's hint: its name
]


@pytest.mark.parametrize(("settings", "args", "code", "expect"), CASES)
def test_export_format(tmp_path: Path, settings: dict[str, object], args: list[str], code: int,
                       expect: str) -> None:
    src = tmp_path / "src.json"
    src.write_text(json.dumps({"data_dir": str(tmp_path / "d"), **settings}), encoding="utf-8")
    res = CliRunner().invoke(cli, ["--config", str(src), "config", *(a.format(tmp=tmp_path) for a in args)],
                             obj=CliState())
    assert res.exit_code == code, res.output
    if code != 0:
        assert expect in " ".join(res.output.split())
        assert not list(tmp_path.glob("out.*"))  # nothing written
        return
    out = tmp_path / f"out.{expect}"
    if expect == "json":
        json.loads(res.stdout)
    else:
        tomllib.loads(res.stdout)
    out.write_text(res.stdout, encoding="utf-8")
    # loads back to the identical Config, the null included
    assert Config.load(out).model_dump(mode="json") == Config.load(src).model_dump(mode="json")


def test_help_names_format() -> None:
    res = CliRunner().invoke(cli, ["config", "--help"], obj=CliState())
    text = " ".join(res.output.split())
    assert "--format [toml|json]" in text and "unless --format json" in text
