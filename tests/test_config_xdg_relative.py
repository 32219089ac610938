"""A relative XDG_DATA_HOME / XDG_CACHE_HOME is ignored (`tiers.xdg.xdg_base`).

The XDG spec says a relative path there is invalid and to be ignored. It was read against
the working directory: each directory a command ran in had a store of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.config import Config
from tiermem.tiers.embed_onnx import default_cache_dir

pytestmark = pytest.mark.usefixtures("clean_env")

# (value of the variable, or None for unset; the base expected: "{home}" / "{tmp}" filled in)
CASES = [
    ("rel", "{home}/{fallback}"),  # relative: ignored (the finding)
    ("./rel", "{home}/{fallback}"),  # relative, dotted
    ("", "{home}/{fallback}"),  # empty: ignored, as before
    (None, "{home}/{fallback}"),  # unset
    ("{tmp}/xdg", "{tmp}/xdg"),  # absolute: used
]
# (variable, the fallback under home, how the default is read, what it adds under the base)
DIRS = [
    ("XDG_DATA_HOME", ".local/share", lambda: Config().data_dir, "tiermem"),
    ("XDG_CACHE_HOME", ".cache", default_cache_dir, "tiermem/onnx"),
]


@pytest.mark.parametrize(("variable", "fallback", "read", "under"), DIRS)
@pytest.mark.parametrize(("value", "expected"), CASES)
def test_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, fallback: str,
                     read: object, under: str, value: str | None, expected: str) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    if value is None:
        monkeypatch.delenv(variable, raising=False)
    else:
        monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    base = expected.format(home=home, tmp=tmp_path, fallback=fallback)
    assert read() == Path(base) / under  # type: ignore[operator]
