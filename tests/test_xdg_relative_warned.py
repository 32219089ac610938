"""A relative XDG_DATA_HOME / XDG_CACHE_HOME is ignored aloud (`tiers.xdg.xdg_base`).

The spec says a relative value is to be ignored, and since 4ef3a53 it is; but silently:
the store moved from ./reldata/tiermem to ~/.local/share/tiermem with nothing said. One
WARNING per process and value names the variable, its value and the directory used.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tiermem.tiers.xdg as xdg
from tiermem.config import Config
from tiermem.tiers.embed_onnx import default_cache_dir

pytestmark = pytest.mark.usefixtures("clean_env")

# (value, or None for unset; warned?)
CASES = [
    ("reldata", True),  # the finding: relative, ignored in silence
    ("./rel/x", True),  # relative, dotted
    ("{tmp}/abs", False),  # absolute: used, nothing to say
    ("", False),  # empty: as unset, the spec's default
    (None, False),  # unset
]
# (variable, the fallback under home, how the default is read)
DIRS = [
    ("XDG_DATA_HOME", ".local/share", lambda: Config().data_dir),
    ("XDG_CACHE_HOME", ".cache", default_cache_dir),
]


@pytest.mark.parametrize(("variable", "fallback", "read"), DIRS)
@pytest.mark.parametrize(("value", "warned"), CASES)
def test_relative_warned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                              variable: str, fallback: str, read: object, value: str | None, warned: bool) -> None:
    monkeypatch.setattr(xdg, "_said", set(), raising=False)  # once a process: this test's own
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    if value is None:
        monkeypatch.delenv(variable, raising=False)
    else:
        monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    with caplog.at_level(logging.WARNING, logger="tiermem.xdg"):
        read()  # type: ignore[operator]
        read()  # type: ignore[operator]  # read again: said once
    said = [r.getMessage() for r in caplog.records if r.name == "tiermem.xdg"]
    if not warned:
        assert said == []
        return
    assert len(said) == 1 and all(r.levelno == logging.WARNING for r in caplog.records if r.name == "tiermem.xdg")
    assert f"{variable}={value}" in said[0] and str(tmp_path / "home" / fallback) in said[0]
