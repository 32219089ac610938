"""`tiermem.client` is for an agent's process, which talks to `tiermem serve` and runs
no model and no server: importing it loads neither an embedding runtime (torch,
sentence-transformers, onnxruntime) nor the service's web stack (FastAPI, uvicorn).

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ["torch", "sentence_transformers", "transformers", "onnxruntime", "fastapi", "uvicorn"]
CODE = f"""
import sys
import tiermem.client
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_importing_the_client_loads_no_model_runtime_and_no_server() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ""
