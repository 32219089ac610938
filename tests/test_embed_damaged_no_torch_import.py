"""Weights cut off are said without importing torch, with the load's own error.

A model copy whose `model.safetensors` stopped mid-file changes the model's identity, so
the default runtime (`auto`) exported it again: the export imported torch first (5-20 s
on a 2-core machine, 6.3 s of a 16 s degraded CLI run), only for sentence-transformers
to fail on the weights, and its fallback the same. Now the load checks the weights with
safetensors' own header and size check first (`tiers.embed.check_weights`), where that
is what decides the outcome: the same EmbeddingModelUnreadable, its detail the
SafetensorError's text, as the library's load raised (its `safe_open` too). Where another
file the load reads is damaged as well, or the weights pass, the load decides as before.

Real processes for the runs (the test worker may have imported torch already); a real
copy of the bundled model under tmp_path, damaged as each row says.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from safetensors import SafetensorError, safe_open

from tiermem.tiers.embed import SAFETENSORS_WEIGHTS, bundled_model_path, check_weights
from tiermem.tiers.errors import EmbeddingModelUnreadable

RUN_TIMEOUT_S = 120  # a bare interpreter importing tiermem, on a loaded 2-core machine
CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tiermem.tiers.embed_onnx import build_embedder
    embedder = build_embedder(Path(sys.argv[1]), runtime=sys.argv[2], cache_dir=Path(sys.argv[3]))
    try:
        embedder.embed(["hello"])
        raised = ""
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"raised": raised, "imported": sorted(m for m in ("sentence_transformers", "torch")
                                                             if m in sys.modules)}))
""")


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    return model


def _cut(model: Path) -> None:
    weights = model / SAFETENSORS_WEIGHTS
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)  # a copy that stopped mid-file


def _bad_header(model: Path) -> None:
    with open(model / SAFETENSORS_WEIGHTS, "r+b") as f:
        f.write((1 << 62).to_bytes(8, "little"))  # a header length no file holds


def _library_error(model: Path) -> str:
    """What safetensors says of the weights: the detail the load's error carries."""
    with pytest.raises(SafetensorError) as got, safe_open(str(model / SAFETENSORS_WEIGHTS), framework="np"):
        pass
    return f"SafetensorError: {got.value}"


@pytest.mark.parametrize("runtime", [
    "auto",   # the export's retry imported torch first, then the fallback's load
    "torch",  # the pipeline's own load
])
def test_cut_weights_raise_before_torch_is_imported(tmp_path: Path, runtime: str) -> None:
    model = _model(tmp_path)
    _cut(model)
    done = subprocess.run([sys.executable, "-c", CHILD, str(model), runtime, str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["raised"] == (f"EmbeddingModelUnreadable: embedding model {model} cannot be loaded "
                             f"({_library_error(model)})")
    assert got["imported"] == []


@pytest.mark.parametrize(("damage", "decides"), [
    (_cut, True),                         # weights cut off: safetensors' size check fails
    (_bad_header, True),                  # the header's length past the file: its header check fails
    (lambda m: None, False),              # intact: the load goes on
    # weights cut and config.json no JSON: the load reads the config first and says that
    (lambda m: (_cut(m), (m / "config.json").write_text("{")), False),
    # weights cut and modules.json damaged: the load says what its parser found there
    (lambda m: (_cut(m), (m / "modules.json").write_text("[")), False),
    # weights cut and the tokenizer's JSON damaged (read after the weights, but the check
    # leaves every case of another damaged JSON file to the load)
    (lambda m: (_cut(m), (m / "tokenizer.json").write_text("{")), False),
    # torch weights instead of safetensors: not checked here
    (lambda m: (m / SAFETENSORS_WEIGHTS).rename(m / "pytorch_model.bin"), False),
])
def test_check_weights_decides_only_the_weights(tmp_path: Path, damage: Callable[[Path], object],
                                               decides: bool) -> None:
    model = _model(tmp_path)
    damage(model)
    if not decides:
        check_weights(model)  # nothing raised: the load decides
        return
    with pytest.raises(EmbeddingModelUnreadable) as got:
        check_weights(model)
    assert str(got.value) == f"embedding model {model} cannot be loaded ({_library_error(model)})"
    assert isinstance(got.value.__cause__, SafetensorError)
