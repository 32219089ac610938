"""Env TIERMEM_CONFIG set but empty (an unset shell variable in `TIERMEM_CONFIG="$CFG"`) is
refused by the library as the CLI refuses it, and both say why.

The CLI refused it (exit 2) while `Config()` and `Config.load()` read it as "no config
file" and ran on the defaults: an embedding application, or the service built in Python,
silently dropped the operator's config (its data_dir, its limits, its auth tokens). A path
given to `Config.load` is still read: env is consulted only without one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import EMPTY_CONFIG_ENV_TEXT, Config

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# (what env holds, how the library is asked) -- each read no file before and ran on defaults
REFUSED = [
    ("", lambda: Config()),  # `Config()`: the file env names
    ("", lambda: Config.load()),  # `Config.load()` without a path
    ("  ", lambda: Config()),  # blank: no path either
    ("\t", lambda: Config.load(None)),  # a tab from a template
]


@pytest.mark.parametrize(("value", "build"), REFUSED)
def test_the_library_refuses_it(monkeypatch: pytest.MonkeyPatch, value: str, build: object) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", value)
    with pytest.raises(ValueError, match="TIERMEM_CONFIG is set but empty") as caught:
        build()  # type: ignore[operator]
    assert str(caught.value) == EMPTY_CONFIG_ENV_TEXT
    assert "refused rather than read as no config file" in str(caught.value)


def test_a_path_given_is_still_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIERMEM_CONFIG", "")
    (tmp_path / "c.toml").write_text("[retrieval]\nk = 7\n")
    assert Config.load(tmp_path / "c.toml").retrieval_k == 7


def test_unset_reads_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIERMEM_CONFIG", raising=False)
    assert Config().retrieval_k == Config.model_fields["retrieval_k"].default


def test_the_cli_says_the_same(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "conversations"], obj=CliState(),
                             env={"TIERMEM_CONFIG": ""})
    assert res.exit_code == 2, res.output
    assert EMPTY_CONFIG_ENV_TEXT in " ".join(res.stderr.split()), res.stderr
