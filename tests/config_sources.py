"""The ways a setting reaches `Config`, shared by the config validation tests: a file, an
environment variable, and `tiermem config --check` of a file.

- `load_from(tmp_path, monkeypatch, how, given)`: `how` is "file" (`given` is the text of a
  TOML file written under tmp_path) or "env" (`given` is (variable, value), set for the
  test only); returns `Config.load` of it, so a refused value raises as the user sees it.
- `error_names(err)`: the settings a `ValidationError` names, dotted as the user wrote them
  (`warm.llm_model`); `refused_names(...)`: those of the error `load_from(...)` must raise.
- `config_check(tmp_path, text)`: `tiermem config --check` of a TOML file saying `text`,
  run in-process through click; the result has the exit code and the output.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner, Result

from tiermem.cli import CliState, cli
from tiermem.config import Config

CONFIG_FILE_NAME = "c.toml"  # TOML, the format the refused settings' cases write


def load_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
              given: str | tuple[str, str]) -> Config:
    path = None
    if how == "file":
        assert isinstance(given, str)
        path = tmp_path / CONFIG_FILE_NAME
        path.write_text(given)
    else:
        monkeypatch.setenv(*given)
    return Config.load(path, data_dir=tmp_path)


def error_names(err: pydantic.ValidationError) -> list[str]:
    return [".".join(map(str, e["loc"])) for e in err.errors()]


def refused_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                  given: str | tuple[str, str]) -> list[str]:
    with pytest.raises(pydantic.ValidationError) as info:
        load_from(tmp_path, monkeypatch, how, given)
    return error_names(info.value)


def config_check(tmp_path: Path, text: str) -> Result:
    f = tmp_path / CONFIG_FILE_NAME
    f.write_text(text)
    return CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
