"""`EmbeddingRuntimeError` is one of tiermem's errors, defined in the one errors module.

It was defined in tiers/embed_onnx.py as a bare RuntimeError: not importable from
`tiermem.errors` (nor `tiers.errors`) with the others, and not a TiermemError, so a
caller that catches tiermem's own failures (`except TiermemError`) let a broken export
through. It lives in tiers.errors now (a TiermemError and a RuntimeError, as before),
and embed_onnx re-exports it.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

import tiermem.errors
import tiermem.tiers.embed_onnx
import tiermem.tiers.errors
from tiermem.tiers.embed_onnx import MANIFEST, read_manifest
from tiermem.tiers.errors import EmbeddingRuntimeError, TiermemError


@pytest.mark.parametrize("module", [
    tiermem.tiers.errors,  # the one errors module
    tiermem.errors,  # the public home of every error
    tiermem.tiers.embed_onnx,  # where importers have always found it
])
def test_it_is_one_class_wherever_it_is_imported_from(module: ModuleType) -> None:
    assert module.EmbeddingRuntimeError is EmbeddingRuntimeError


@pytest.mark.parametrize("base", [
    TiermemError,  # caught with tiermem's other errors
    RuntimeError,  # the nearest built-in, as it was
])
def test_a_runtime_refusal_is_caught_as(tmp_path: Path, base: type[Exception]) -> None:
    # a real refusal: an export directory without its manifest
    with pytest.raises(base) as caught:
        read_manifest(tmp_path / "model", tmp_path)
    err = caught.value
    assert isinstance(err, EmbeddingRuntimeError) and err.damaged
    assert err.model_path == tmp_path / "model" and str(tmp_path / MANIFEST) in err.problem
    assert str(err).startswith(f"ONNX embedding runtime for {tmp_path / 'model'}: ")
