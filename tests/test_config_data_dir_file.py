"""`data_dir` naming a file, or a path below one, is refused naming the setting when the
config is read, before anything is opened; the CLI also says where the value came from.
Before, a TOML file's `data_dir` or `TIERMEM_STORAGE__DATA_DIR` set to a file failed at the
first open with "[Errno 20] Not a directory: 'afile/tiermem.db'", naming no setting. (The
CLI's `--data-dir` and its env `TIERMEM_DATA_DIR` were already refused by click when the
path is a file, not when it is below one.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")

# (how data_dir is given, the path below tmp_path, the setting as the error names it, its source)
GIVEN = [
    ("file", "a-file", "storage.data_dir", "file"),  # the bug hunt's: data_dir in a config file
    ("env", "a-file", "storage.data_dir", "env TIERMEM_STORAGE__DATA_DIR"),  # the sectioned env name
    ("file", "a-file/sub", "storage.data_dir", "file"),  # below a file: [Errno 20] as well
    ("option", "a-file/sub", "data_dir", "--data-dir"),  # click refuses only a file itself
]


@pytest.mark.parametrize(("how", "below", "setting", "source"), GIVEN)
def test_a_data_dir_that_is_a_file_is_refused_naming_the_setting(tmp_path: Path, how: str, below: str,
                                                                 setting: str, source: str) -> None:
    (tmp_path / "a-file").write_text("x")
    given = str(tmp_path / below)
    options, env = [], {}
    conf = tmp_path / "c.toml"
    if how == "file":
        conf.write_text(f'[storage]\ndata_dir = "{given}"\n')
        options = ["--config", str(conf)]
        source = f"file {conf}"
    elif how == "env":
        env = {"TIERMEM_STORAGE__DATA_DIR": given}
    else:
        options = ["--data-dir", given]
    res = CliRunner().invoke(cli, [*options, "append", "c1", "--role", "user", "--content", "hi"],
                             obj=CliState(), env=env)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"{setting}: " in res.stderr and f"(data_dir from {source})" in res.stderr, res.stderr
    assert "Errno" not in res.stderr and "a directory" in res.stderr, res.stderr
    assert (tmp_path / "a-file").read_text() == "x"


@pytest.mark.parametrize("below", ["a-file", "a-file/sub/deeper"])
def test_the_library_refuses_it_too(tmp_path: Path, below: str) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match=r"data_dir\n.*must be a directory: .*a-file"):
        Config(data_dir=tmp_path / below)


@pytest.mark.parametrize("below", ["new", "new/deeper"])
def test_a_missing_data_dir_is_still_fine(tmp_path: Path, below: str) -> None:
    assert Config(data_dir=tmp_path / below).data_dir == tmp_path / below
