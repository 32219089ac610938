"""The model directory's digest stamps (`stamps/` in the embedding cache) are pruned.

`model_fingerprint` remembers a model directory's digest under its files' signatures
(size, mtime, inode, ctime) and never removed a stamp: every change of a file, a chmod
or chown included (it moves the ctime), re-hashed the directory at the next start and
added one more stamp, for good, though an older one can never match again. A new stamp
now replaces the directory's older ones; other directories keep theirs. A change of
permissions alone still re-hashes: only the bytes tell it from a `cp -p` onto the file
(tests/test_embed_files_replaced.py), which changes the ctime the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem.tiers.embed_onnx import STAMPS_DIR, model_fingerprint

CHANGES = 5  # times a file of the model directory is changed


def make_model(path: Path, byte: bytes = b"a") -> Path:
    path.mkdir()
    (path / "weights.bin").write_bytes(byte * 4096)
    (path / "config.json").write_text("{}")
    return path


def chmod(weights: Path, i: int) -> None:
    weights.chmod(0o600 if i % 2 else 0o644)  # permissions only: same bytes, size, mtime


def rewrite(weights: Path, i: int) -> None:
    weights.write_bytes(bytes([i]) * 4096)  # other bytes


def stamps(cache: Path) -> list[str]:
    return sorted(p.read_text("ascii") for p in (cache / STAMPS_DIR).iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize("change", [
    chmod,  # a permissions-only change (ctime moves): before, one more stamp each time
    rewrite,  # new contents: before, one more stamp each time
])
def test_a_directory_keeps_one_stamp_whatever_changes(tmp_path: Path, change: Callable[[Path, int], None]) -> None:
    model, cache = make_model(tmp_path / "model"), tmp_path / "cache"
    for i in range(CHANGES):
        change(model / "weights.bin", i)
        digest = model_fingerprint(model, cache)
        assert stamps(cache) == [digest]
        assert model_fingerprint(model, cache) == digest  # the stamp answers the next start


def test_each_directory_keeps_its_own_stamp(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one, two = make_model(tmp_path / "one", b"a"), make_model(tmp_path / "two", b"b")
    digests = {model_fingerprint(one, cache), model_fingerprint(two, cache)}
    chmod(one / "weights.bin", 1)
    digests.add(model_fingerprint(one, cache))
    assert len(digests) == 2 and stamps(cache) == sorted(digests)  # two's stamp is left alone


def test_a_permissions_only_change_is_read_again(tmp_path: Path) -> None:
    model, cache = make_model(tmp_path / "model"), tmp_path / "cache"
    digest = model_fingerprint(model, cache)
    stamp = next((cache / STAMPS_DIR).iterdir())
    stamp.write_text("f" * 64, "ascii")  # what the stamp would answer
    chmod(model / "weights.bin", 1)
    # read again, not answered by the stamp: what a chmod did is what a `cp -p` onto the file does
    assert model_fingerprint(model, cache) == digest
    assert not stamp.exists()
