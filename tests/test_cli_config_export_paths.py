"""`tiermem config --export FILE` writes its path settings absolute, so FILE loads back to
the same directories wherever it lies. A relative path from `--data-dir` or env is the
working directory's, but one in a config file is read against the file's own directory:
exported as given (`data_dir = "../t8/d"` into `sub/exp.toml`), the file named another
directory, where `history` found no database and an `append` would have started a new
store. Real console script run in a working directory of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.config_sections import flatten, read_file

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120

# (global options, env, the setting, its directory relative to the working directory
# `work`) -- each way a relative path reaches the effective config
CASES: list[tuple[list[str], dict[str, str], str, str]] = [
    (["--data-dir", "../store"], {}, "data_dir", "../store"),  # the review's: --data-dir with ..
    ([], {"TIERMEM_DATA_DIR": "../store"}, "data_dir", "../store"),  # the same from env
    (["--data-dir", "../store"], {"TIERMEM_EMBEDDING_CACHE_DIR": "relcache"}, "embedding_cache_dir", "relcache"),
    (["--config", "conf/base.toml"], {}, "data_dir", "conf/fromfile"),  # a file's: read against conf/ (worked)
    (["--data-dir", "{abs}"], {}, "data_dir", "../store"),  # absolute already: written as given
]


@pytest.mark.parametrize(("options", "env", "key", "where"), CASES,
                         ids=["data-dir-option", "data-dir-env", "cache-dir-env", "from-a-file", "absolute"])
def test_an_exported_config_names_the_same_directories(tmp_path: Path, options: list[str], env: dict[str, str],
                                                      key: str, where: str) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "conf").mkdir()
    (work / "conf" / "base.toml").write_text('[storage]\ndata_dir = "fromfile"\n', encoding="utf-8")
    store = tmp_path / "store"
    opts = [o.replace("{abs}", str(store)) for o in options]
    r = subprocess.run([TIERMEM, *opts, "config", "--export", "sub/exp.toml"], cwd=work, capture_output=True,
                       text=True, timeout=RUN_TIMEOUT_S, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    written = flatten(read_file(work / "sub" / "exp.toml"))[key]
    assert os.path.isabs(written), written
    loaded = getattr(Config.load(work / "sub" / "exp.toml"), key)
    assert os.path.realpath(loaded) == os.path.realpath(work / where)


def test_the_exported_file_reads_the_same_store(tmp_path: Path) -> None:
    """The review's run: history through the exported file finds what --data-dir holds."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    with Memory(Config(data_dir=tmp_path / "store"), hot=False, background_indexing=False) as mem:
        mem.append("c0", {"role": "user", "content": "in the store"})
    r = subprocess.run([TIERMEM, "--data-dir", "../store", "config", "--export", "sub/exp.toml"], cwd=work,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([TIERMEM, "--config", "sub/exp.toml", "history", "c0", "--json"], cwd=work,
                       capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0 and "in the store" in r.stdout, r.stderr
