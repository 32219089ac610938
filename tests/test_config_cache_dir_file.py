"""`embedding_cache_dir` naming an existing regular file, or a path below one, is refused
when the config is read, naming the setting and the path, as `data_dir` is. Before, it was
accepted and only warned at the first embedding ("fast embedding runtime unavailable
(FileExistsError: ...); using sentence-transformers"): every process then ran the slower
torch pipeline, and `tiermem config --check` passed the file."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (how it is given, the path below tmp_path, the setting as the error names it) -- each accepted before
REFUSED = [
    ("kwargs", "a-file", "embedding_cache_dir"),  # the report's case: a regular file
    ("kwargs", "a-file/sub", "embedding_cache_dir"),  # below a file: the export's mkdir fails the same way
    ("file", "a-file", "embedding.cache_dir"),  # named as written, in its section
    ("env", "a-file", "embedding_cache_dir"),  # TIERMEM_EMBEDDING_CACHE_DIR
]


@pytest.mark.parametrize(("how", "below", "named"), REFUSED)
def test_a_cache_dir_that_is_a_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                               below: str, named: str) -> None:
    (tmp_path / "a-file").write_text("x")
    given = tmp_path / below
    path, kwargs = None, {}
    if how == "file":
        path = tmp_path / "c.toml"
        path.write_text(f'[embedding]\ncache_dir = "{given}"\n')
    elif how == "env":
        monkeypatch.setenv("TIERMEM_EMBEDDING_CACHE_DIR", str(given))
    else:
        kwargs = {"embedding_cache_dir": given}
    with pytest.raises(pydantic.ValidationError) as info:
        Config.load(path, data_dir=tmp_path / "d", **kwargs)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]
    assert str(tmp_path / "a-file") in str(info.value) and "must be a directory" in str(info.value)
    assert (tmp_path / "a-file").read_text() == "x"


@pytest.mark.parametrize("below", [
    "cache",           # an existing directory
    "new/deeper",      # missing: the first export creates it
])
def test_a_directory_or_a_missing_path_is_fine(tmp_path: Path, below: str) -> None:
    (tmp_path / "cache").mkdir()
    assert Config(data_dir=tmp_path, embedding_cache_dir=tmp_path / below).embedding_cache_dir == tmp_path / below


def test_config_check_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    f = tmp_path / "c.toml"
    f.write_text(f'[embedding]\ncache_dir = "{tmp_path / "a-file"}"\n')
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "config", "--check", str(f)],
                             obj=CliState())
    assert res.exit_code == 1 and "embedding.cache_dir" in res.output and "Traceback" not in res.output, res.output
    assert str(tmp_path / "a-file") in res.output
