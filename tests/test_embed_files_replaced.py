"""Files replaced by copies that keep their mtime are seen as changed.

The cache remembers two things under the files' stat: the model directory's digest
(`model_fingerprint`: which export, and the identity stored vectors record) and a passed
load check of an export (`checked/`). Both were keyed by size and mtime (and the
export's inode) only, so other bytes of the same size copied in with their mtime kept
(`cp -p` onto the file, `rsync -a`, a restored backup: a fine-tune of the same
architecture has weights of exactly the same size) were taken for the old files: the
fast runtime served the old model's vectors for the new model (cosine 0.89 to the
pipeline's), stores kept the old vectors as the new model's, and an export corrupted
that way skipped its probe check and served wrong vectors.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from export_cache import block_exports, copy_export_cache, perturb_feed_forward

from tiermem.tiers.embed import SentenceTransformerEmbedder, bundled_model_path
from tiermem.tiers.embed_onnx import (
    MODEL_FILE,
    FastEmbedder,
    export_dir,
    model_fingerprint,
)
from tiermem.tiers.errors import EmbeddingRuntimeError

TEXTS = ["where did we land on the airline?", "my cat is called Tom"]
# the weights of a fine-tune of the same architecture: this far from the bundled ones
WEIGHT_NOISE = 1.0  # times the word embeddings' spread


def copy_keeping_mtime_in_place(src: Path, dst: Path) -> None:
    """`cp -p src dst` onto an existing file: same inode, the old mtime."""
    st = dst.stat()
    shutil.copyfile(src, dst)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def copy_keeping_mtime_by_rename(src: Path, dst: Path) -> None:
    """`rsync -a`: a temporary file with the source's mtime, renamed over the target."""
    st = dst.stat()
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, dst)


@pytest.mark.parametrize("replace", [
    copy_keeping_mtime_in_place,  # cp -p, shutil.copy2 onto the file
    copy_keeping_mtime_by_rename,  # rsync -a, a restored backup
])
def test_a_file_replaced_with_its_mtime_kept_changes_the_digest(
        tmp_path: Path, replace: Callable[[Path, Path], None]) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"a" * 4096)
    (model / "config.json").write_text("{}")
    cache = tmp_path / "cache"
    before = model_fingerprint(model, cache)
    other = tmp_path / "other.bin"
    other.write_bytes(b"b" * 4096)  # the same size
    replace(other, model / "weights.bin")
    assert model_fingerprint(model, cache) != before


def test_two_directories_with_the_same_names_sizes_and_mtimes_have_their_own_digests(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    digests = []
    for name, byte in (("one", b"a"), ("two", b"b")):
        model = tmp_path / name
        model.mkdir()
        (model / "weights.bin").write_bytes(byte * 4096)
        os.utime(model / "weights.bin", ns=(10**18, 10**18))  # as a tarball's extraction sets them
        digests.append(model_fingerprint(model, cache))
    assert digests[0] != digests[1]


def test_weights_replaced_with_their_mtime_kept_are_exported_anew(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)  # the same files: the shared export serves it
    cache = copy_export_cache(tmp_path)
    old = FastEmbedder(model, runtime="onnx", cache_dir=cache)
    old.embed(TEXTS)
    old_identity = old.model_identity()
    weights = model / "model.safetensors"
    tensors = load_file(str(weights))
    name = next(n for n in tensors if "word_embeddings" in n)
    noise = np.random.default_rng(0).standard_normal(tensors[name].shape) * tensors[name].std() * WEIGHT_NOISE
    tensors[name] = (tensors[name] + noise).astype(np.float32)
    tuned = tmp_path / "tuned.safetensors"
    save_file(tensors, str(tuned), metadata={"format": "pt"})
    assert tuned.stat().st_size == weights.stat().st_size
    copy_keeping_mtime_in_place(tuned, weights)

    new = FastEmbedder(model, runtime="onnx", cache_dir=cache)
    got = new.embed(TEXTS)
    want = SentenceTransformerEmbedder(model).embed(TEXTS)
    assert float(np.min(np.sum(got * want, axis=1))) > 0.9999
    assert new.model_identity() != old_identity  # stores re-embed with the new model


def test_an_export_replaced_with_its_mtime_kept_is_checked_again(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    first = FastEmbedder(runtime="onnx", cache_dir=cache)
    first.embed(TEXTS)
    assert first.load_check in ("probes", "remembered")  # a passed check is now remembered
    graph = export_dir(bundled_model_path(), cache) / MODEL_FILE
    corrupted = tmp_path / "corrupted.onnx"
    shutil.copyfile(graph, corrupted)
    perturb_feed_forward(corrupted)
    assert corrupted.stat().st_size == graph.stat().st_size
    copy_keeping_mtime_in_place(corrupted, graph)
    block_exports(cache)  # else it is exported again (tests/test_export_damaged.py)
    with pytest.raises(EmbeddingRuntimeError, match="probe vectors"):
        FastEmbedder(runtime="onnx", cache_dir=cache).embed(TEXTS)
