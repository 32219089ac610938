"""`rebuild()` and `warm_up()` learn of erasures by others before they act.

Every other public call that touches the store reads the erasure mark first
(test_erasure_check_listing_calls), but `rebuild()` and `warm_up()` did not: a Memory
with `background_indexing=False` (no indexer thread to check while idle) whose only
calls after another process erased were a rebuild or a warm-up kept its copies of the
erased text (here: the planner's epoch state, and the memos of the text) for as long as
it lived. Each now drops them first. A real SQLite file, two Memory objects on it (two
processes), the real model; a walk over every object reachable in the process
(tests/erasure_child.py `held`).

Both cases run in one child process (this file run as a script), once per module: a
walk costs time in proportion to the heap it searches, and a test worker holds the whole
suite's (~6-8 s a walk on a loaded runner, four walks here); a bare child with the model
loaded walks in about a second. Each case asserts on its own row of the child's report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from erasure_child import held

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
# the child's two cases: a model load and four walks, a minute at most on a loaded runner
CHILD_S = 240.0


# the reader's only call after the other process erased: (what, the call)
CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # recomputes every derived structure from the log: the erased conversation is gone
    # from it, but not from the copies this process kept
    ("rebuild", lambda m: m.rebuild()),
    # loads the model (loaded already by the context) and wakes the indexer: no store
    # statement of its own before
    ("warm_up", lambda m: m.warm_up()),
]


def _erase_under(config: Config, embedder: Embedder, call: Callable[[Memory], object]) -> dict[str, Any]:
    """In the child: what the reader (no hot tier, no indexer thread: the Memory that
    keeps copies) holds before another Memory erases and after its only call since."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as reader:
        canary = "zq7canary-" + uuid.uuid4().hex
        reader.append("doomed", {"role": "user", "content": f"Remember: the vault code is {canary}, keep it safe."},
                      namespace=NS)
        reader.append("kept", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
                      namespace=NS)
        reader.context("doomed", "what is the vault code?", 1500, namespace=NS)
        key = reader.cold.key_of(NS, "doomed")
        assert key is not None
        row: dict[str, Any] = {"epoch_before": reader.planner._epochs.get(key) is not None,
                               "held_before": held(canary)}
        with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
            other.delete_conversation("doomed", namespace=NS)
        call(reader)
        row |= {"epoch_after": reader.planner._epochs.get(key) is not None, "held_after": held(canary)}
        return row


def _run_each(root: Path) -> dict[str, dict[str, Any]]:
    from tiermem.tiers.embed_onnx import build_embedder

    embedder = build_embedder()
    embedder.query_session = "never"  # as the suite's session embedder (conftest)
    embedder.embed(["warm-up"])  # loaded: as the suite's session embedder
    return {what: _erase_under(Config(data_dir=root / what / "data"), embedder, call) for what, call in CALLS}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("rebuild-warm-up")
    done = subprocess.run([sys.executable, __file__, str(root)], capture_output=True, text=True, timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    got: dict[str, dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return got


@pytest.mark.parametrize("what", [c[0] for c in CALLS])
def test_rebuild_and_warm_up_drop_what_another_process_erased(report: dict[str, dict[str, Any]], what: str) -> None:
    row = report[what]
    # the premise: this process holds the text (its epoch state)
    assert row["epoch_before"] and row["held_before"] != []
    assert not row["epoch_after"]
    assert row["held_after"] == []


if __name__ == "__main__":
    print(json.dumps(_run_each(Path(sys.argv[1]))))
