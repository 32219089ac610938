"""A lost embedding model is said without importing sentence-transformers (torch).

The torch pipeline (`SentenceTransformerEmbedder`, the default runtime's fallback)
imported sentence-transformers before it checked that the model directory exists, so a
process whose model was lost paid that import (5-20 s of torch and transformers on a
2-core machine) only to raise the same FileNotFoundError: every `tiermem search` or
`context` run on a degraded store (test_cli_embed_degraded_one_line: ~20 s of its ~30 s
a run was that import, measured with `python -X importtime`). Now the directory is checked
first; the error is the same.

A real process for each row (the test worker has imported torch already), a path that
does not exist, the real runtimes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUN_TIMEOUT_S = 120  # a bare interpreter importing tiermem, on a loaded 2-core machine
# the child: load the embedder `runtime` builds on the missing model, then say what the
# load raised and whether the heavy libraries were imported for it
CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tiermem.tiers.embed_onnx import build_embedder
    embedder = build_embedder(Path(sys.argv[1]), runtime=sys.argv[2])
    try:
        embedder.embed(["hello"])
        raised = ""
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"raised": raised, "imported": sorted(m for m in ("sentence_transformers", "torch")
                                                             if m in sys.modules)}))
""")


@pytest.mark.parametrize("runtime", [
    "auto",  # the default: the fast runtime fails on the path, then its fallback did the import
    "torch",  # the pipeline itself
])
def test_a_missing_model_directory_raises_before_torch_is_imported(tmp_path: Path, runtime: str) -> None:
    missing = tmp_path / "model"
    done = subprocess.run([sys.executable, "-c", CHILD, str(missing), runtime], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["raised"] == f"FileNotFoundError: embedding model directory {missing} does not exist"
    assert got["imported"] == []
