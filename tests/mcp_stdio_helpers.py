"""What the tests of a real `tiermem mcp` child process share (test_mcp_stdio_burst,
test_mcp_stdio_reader_fault): the checkout the child imports, how long its answers and its
exit may take, the protocol version its host speaks, and its environment.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ANSWER_TIMEOUT_S = 60.0  # the child's first answer waits on its imports (1-2 s, more on a busy machine)
EXIT_TIMEOUT_S = 30.0
PROTOCOL_VERSION = "2025-06-18"


def child_env() -> dict[str, str]:
    """The child's whole environment: this checkout's tiermem, no model download, one
    thread per math library, and no Redis to start."""
    return {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, quickly
            "PATH": os.environ.get("PATH", "")}
