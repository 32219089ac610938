"""An `embedding_model` that names no model directory is refused when the config is
checked, naming the setting and what is missing, before anything is opened.

Before, only an empty value was refused: a typo'd path passed `Config`, `tiermem config
--check` (exit 0), `Memory` and `tiermem serve`; the store was opened and written, the first
embedding failed (a traceback in the log), and every context and search of the process ranked
by keywords only (stats: embedder 'degraded'). `TIERMEM_EMBEDDING_MODEL=/tmp` made serve
hash every file under /tmp as the model's identity. Now the directory's file names are
looked at (`tiers.model_dir`): modules.json or config.json, and a Transformer's config.json
and weights where the load reads them. No model is loaded (the default, unset, is not
looked at at all), and files present but damaged are still the load's to report (a model
damaged or lost after start degrades to keyword ranking, as before).

On the code before, every refusal case fails (accepted, exit 0, the data dir written); the
accepted cases pass there too: they pin what must keep working."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("clean_env")

SERVE_TIMEOUT_S = 120  # a refused start takes a CLI cold start (~10 s on a loaded 2-core machine)
LEGACY_MODULES = [{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
                  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]


def _files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _made(files: dict[str, str]) -> Callable[[Path], str]:
    """A directory `model` under the test's directory holding `files` (name -> text)."""
    def make(tmp: Path) -> str:
        _files(tmp / "model", files)
        (tmp / "model").mkdir(exist_ok=True)
        return str(tmp / "model")
    return make


def _named(value: str) -> Callable[[Path], str]:
    return lambda _tmp: value


def _a_file(tmp: Path) -> str:
    (tmp / "model.safetensors").write_bytes(b"\0" * 64)
    return str(tmp / "model.safetensors")


# (the value as made in the test's directory, what the error says) -- each refused
REFUSED = [
    (_named("/nonexistent/model"), "does not exist"),  # the reviewer's typo
    (_named("sentence-transformers/all-MiniLM-L6-v2"), "neither looked up nor downloaded"),  # a hub name: a relative path
    (_a_file, "is a file"),  # the weights file, not its directory
    (_made({"notes.txt": "x", "data.csv": "a,b"}), "holds neither modules.json nor config.json"),  # /tmp's case
    (_made({}), "holds neither modules.json nor config.json"),  # an empty directory (a download that failed)
    (_made({"config.json": "{}", "vocab.txt": "[PAD]"}), "holds no weights"),  # the weights never copied
    (_made({"modules.json": json.dumps(LEGACY_MODULES), "1_Pooling/config.json": "{}"}),
     "has no directory 0_Transformer/"),  # modules.json's Transformer directory missing
    (_made({"modules.json": json.dumps(LEGACY_MODULES), "0_Transformer/model.safetensors": "w"}),
     "holds no 0_Transformer/config.json"),  # the Transformer without its configuration
]
# the values accepted: each has the files a load reads (none is loaded here)
ACCEPTED = [
    lambda _tmp: str(bundled_model_path()),  # the shipped package's model, named explicitly
    _made({"modules.json": json.dumps(LEGACY_MODULES), "0_Transformer/config.json": "{}",
           "0_Transformer/model.safetensors": "w"}),  # the older layout: the Transformer in 0_Transformer/
    _made({"config.json": "{}", "pytorch_model.bin": "w"}),  # a transformers model: Transformer + mean pooling
    _made({"config.json": "{}", "model.safetensors.index.json": "{}"}),  # sharded weights
    _made({"modules.json": "[{\"idx\": 0,", "config.json": "{}", "model.safetensors": "w"}),  # cut modules.json: the load's to report
]
REFUSED_IDS = ["missing", "hub-name", "a-file", "other-files", "empty", "no-weights", "no-transformer-dir",
               "no-transformer-config"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a relative value (the hub name) is read against the working directory


@pytest.mark.parametrize(("make", "says"), REFUSED, ids=REFUSED_IDS)
@pytest.mark.parametrize("how", [
    "kwargs",  # Config(embedding_model=...)
    "env",  # TIERMEM_EMBEDDING_MODEL
    "sectioned-env",  # TIERMEM_EMBEDDING__MODEL
    "file",  # [embedding] model = ... in a TOML file
])
def test_a_path_that_is_no_model_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      make: Callable[[Path], str], says: str, how: str) -> None:
    value = make(tmp_path)
    named = {"kwargs": "embedding_model", "env": "embedding_model", "sectioned-env": "embedding.model",
             "file": "embedding.model"}[how]
    with pytest.raises(pydantic.ValidationError) as info:
        if how == "kwargs":
            Config(data_dir=tmp_path / "data", embedding_model=value)
        elif how == "file":
            (tmp_path / "c.toml").write_text(f"[embedding]\nmodel = {json.dumps(value)}\n")
            Config.load(tmp_path / "c.toml", data_dir=tmp_path / "data")
        else:
            monkeypatch.setenv("TIERMEM_EMBEDDING_MODEL" if how == "env" else "TIERMEM_EMBEDDING__MODEL", value)
            Config(data_dir=tmp_path / "data")
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]
    assert says in str(info.value) and "model directory" in str(info.value)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("make", ACCEPTED, ids=["bundled", "legacy-layout", "transformers-dir", "sharded",
                                                "damaged-modules-json"])
def test_a_model_directory_is_accepted_unloaded(tmp_path: Path, make: Callable[[Path], str]) -> None:
    value = make(tmp_path)
    assert Config(data_dir=tmp_path / "data", embedding_model=value).embedding_model == Path(value)
    (tmp_path / "c.toml").write_text(f"[embedding]\nmodel = {json.dumps(value)}\n")
    assert Config.load(tmp_path / "c.toml").embedding_model == Path(value)


@pytest.mark.parametrize(("make", "says"), REFUSED, ids=REFUSED_IDS)
@pytest.mark.parametrize("command", [
    ["config", "--json"],  # `tiermem config`: before, exit 0
    ["append", "c1", "--role", "user", "--content", "hello"],  # before: the data dir written
], ids=["config", "append"])
def test_the_cli_refuses_it_in_one_line_writing_nothing(tmp_path: Path, make: Callable[[Path], str], says: str,
                                                        command: list[str]) -> None:
    value = make(tmp_path)
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *command], obj=CliState(),
                             env={"TIERMEM_EMBEDDING_MODEL": value})
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "embedding_model: " in res.stderr and says in res.stderr, res.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("make", "says"), REFUSED[:4], ids=REFUSED_IDS[:4])
def test_config_check_refuses_the_file(tmp_path: Path, make: Callable[[Path], str], says: str) -> None:
    (tmp_path / "m.toml").write_text(f"[embedding]\nmodel = {json.dumps(make(tmp_path))}\n")
    res = CliRunner().invoke(cli, ["config", "--check", str(tmp_path / "m.toml")], obj=CliState())
    assert res.exit_code == 1 and "embedding.model: " in res.stderr and says in res.stderr, res.output


def test_serve_refuses_to_start_writing_nothing(tmp_path: Path) -> None:
    # a real process: `tiermem serve` with the reviewer's TIERMEM_EMBEDDING_MODEL=/tmp (here a
    # directory of other files); before, it started, opened the store and hashed every file
    other = _made({"notes.txt": "x", "sub/more.txt": "y"})(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env |= {"TIERMEM_EMBEDDING_MODEL": other, "TIERMEM_DATA_DIR": str(tmp_path / "data")}
    try:
        r = subprocess.run([sys.executable, "-m", "tiermem.cli", "serve", "--port", str(port)], env=env,
                           capture_output=True, text=True, timeout=SERVE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail("tiermem serve started with an embedding_model that is no model")
    finally:
        if (tmp_path / "data").exists():  # only where it started (the code before)
            EmbeddedRedis(tmp_path / "data").stop()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "embedding_model: " in r.stderr and "holds neither modules.json nor config.json" in r.stderr
    assert not (tmp_path / "data").exists()


def test_the_check_loads_no_model(tmp_path: Path) -> None:
    # config validation stays cheap (a CLI append starts in about a second and never embeds):
    # naming the bundled model imports neither sentence-transformers nor torch
    code = ("import sys; from tiermem import Config; "
            f"Config(data_dir={str(tmp_path / 'data')!r}, embedding_model={str(bundled_model_path())!r}); "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SERVE_TIMEOUT_S)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
