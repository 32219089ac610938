"""A process that exits while onnxruntime works in one of tiermem's threads exits cleanly
(rc 0): the threads that build a session are not daemons, so the interpreter waits for
them, and an exit stops and waits for the background indexer of a Memory not closed.

A daemon thread inside onnxruntime's session construction at interpreter exit aborts
the whole process ("terminate called without an active exception", rc 134, sometimes
a segfault): a CLI command, a script or a server shutting down would report a crash
after its work was done. Each case exits at a moment the build is in flight; on the
code with daemon threads these failed in most runs (3 of 4, and 5 of 6 at 0.1-0.2 s;
the unclosed Memory 7 of 7).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import child_env

QUERY_SESSION = """
from tiermem.tiers.embed_onnx import FastEmbedder
e = FastEmbedder(runtime="onnx")
for q in ("where did we go on holiday?", "what is my budget?", "and the dog?"):
    e.embed([q])
"""

MODEL_LOAD = """
import time
from tiermem.memory import load_in_background
from tiermem.tiers.embed_onnx import FastEmbedder
load_in_background(FastEmbedder(runtime="onnx"))
time.sleep(%s)
"""

UNCLOSED_MEMORY = """
import sys
from tiermem import Config, Memory
m = Memory(Config(data_dir=sys.argv[1]))
for i in range(60):
    m.append("c1", {"role": "user", "content": f"message {i} about the garden, the dog and the trip to Lisbon"})
m.context("c1", "what about the dog?", budget=500)
for i in range(60):
    m.append("c1", {"role": "user", "content": f"another message {i} about the cat and the holiday in Porto"})
"""

CASES = [
    (QUERY_SESSION, "exit just after the second one-text call starts the two-thread query session"),
    (MODEL_LOAD % "0.1", "exit 0.1 s into a background model load (session construction)"),
    (MODEL_LOAD % "0.15", "exit 0.15 s into it"),
    (MODEL_LOAD % "0.2", "exit 0.2 s into it"),
    (UNCLOSED_MEMORY, "exit without close() while the background indexer embeds the appends"),
]


@pytest.mark.parametrize(("code", "when"), CASES, ids=[c[1] for c in CASES])
def test_an_exit_during_model_work_is_clean(code: str, when: str, tmp_path: Path) -> None:
    env = child_env()
    env.pop("OMP_NUM_THREADS", None)  # it disables the two-thread query session
    for i in range(2):  # the race: two tries per moment
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"data{i}")], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{when}: rc {out.returncode}\n{out.stderr[-2000:]}"
        assert "terminate called" not in out.stderr, when
