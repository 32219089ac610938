"""A call under way when its process drops an erased conversation's copies does not put
the erased text back into a cache.

A sibling conversation's context shows an erased conversation's turns by namespace
recall. Another process erases that conversation while the context is being built, and
another thread of this process (the indexer's idle check, another request) reads the
erasure, or this process erases it itself, before the context saves its epoch state.
Before, the saved state (and the memos the call filled after the drop) brought the text
back into the process, and the process's mark had already moved past the erasure:
nothing dropped it again. Now each call that can fill a cache drops again, before it
returns, the copies of what was erased while it ran (tiermem.memory
`Memory._erasures_during`), and a shared epoch state whose writer finds a shown
conversation erased goes from the writer's process too (planner.epoch `RedisEpochs.put`).

The interleavings are forced by a hook in the call (the epoch put, the turn cache's load
of the erased conversation's turns); a walk over every object reachable in this process
(tests/erasure_child.py `held`) finds the canary. A real SQLite file, the real model;
the shared cases on the real embedded Redis.

The twelve walked cases run in one child process (this file run as a script), once per
module, one after another as they ran in a test worker: a walk costs time in proportion
to the heap it searches, and a worker holds the whole suite's (~6-8 s a walk on a loaded
runner); a bare child with the model loaded walks in about a second. Each case asserts
on its own row of the child's report.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from erasure_child import held

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

# each test's canary is its own: a case that fails leaves its text in the process-wide
# memos, which must not fail the next case's walk
CANARY_PREFIX = "zq7canary-"
NS = "acme/alice"
QUESTION = "What was the vault code I told you in the other session?"
BUDGET = 1500
# the child's cases: a model load and twelve walks, two minutes at most on a loaded runner
CHILD_S = 300.0


class Pair:
    """The process under test (`mem`) and another one on the same store (`other`)."""

    def __init__(self, config: Config, embedder: Embedder, *, shared: bool) -> None:
        self.mem = Memory(config, embedder=embedder, hot=shared, background_indexing=False)
        self.other = Memory(config, embedder=embedder, hot=shared, background_indexing=False)

    def close(self) -> None:
        self.other.close()
        self.mem.close()


# the process's epoch states: its own, or shared on the embedded Redis
EPOCHS: list[tuple[str, bool]] = [("process-epochs", False), ("shared-epochs", True)]


@pytest.fixture
def canary() -> str:
    return CANARY_PREFIX + uuid.uuid4().hex


def _write(mem: Memory, canary: str) -> None:
    mem.append("sibling", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
               namespace=NS)
    mem.append("doomed", {"role": "user", "content": f"Remember: the vault code is {canary}, keep it safe."},
               namespace=NS)
    mem.append("doomed", {"role": "assistant", "content": "Noted, I will keep it safe."}, namespace=NS)
    mem.catch_up(namespace=NS)
    mem.append("sibling", {"role": "user", "content": QUESTION}, namespace=NS)
    mem.turns.drop()  # the sibling's context loads the erased conversation's turns itself


def _sibling_context_shows(mem: Memory, canary: str) -> bool:
    """The in-flight call; its answer is not kept (the walk would find it)."""
    return canary in json.dumps(mem.context("sibling", QUESTION, BUDGET, namespace=NS).messages)


def _in_thread(fn: Callable[[], object]) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


# who drops this process's copies while the sibling's context is under way
DROPPERS: list[tuple[str, Callable[[Pair], None]]] = [
    # another process erases; another thread of this one (the indexer's idle check, a
    # request) reads the erasure: the reviewer's case
    ("other-process-then-this-thread", lambda p: (p.other.delete_conversation("doomed", namespace=NS),
                                                  _in_thread(p.mem._catch_erasures))),
    # another thread of this process erases it itself: its own drop moves no mark
    ("this-process-erases", lambda p: _in_thread(lambda: p.mem.delete_conversation("doomed", namespace=NS))),
]


def _hook(p: Pair, drop: Callable[[Pair], None], obj: Any, name: str, doomed_only: bool) -> Callable[[], bool]:
    """Drop the copies once, right after `obj.name` answered (for the erased conversation
    only, when `doomed_only`); returns whether it did."""
    doomed = p.mem.cold.key_of(NS, "doomed")
    done: list[bool] = []
    real = getattr(obj, name)

    def hooked(conversation_id: str, *args: Any, **kwargs: Any) -> Any:
        got = real(conversation_id, *args, **kwargs)
        if not done and (conversation_id == doomed or not doomed_only):
            done.append(True)
            drop(p)
        return got

    setattr(obj, name, hooked)
    return lambda: bool(done)


def _hook_put(p: Pair, drop: Callable[[Pair], None]) -> Callable[[], bool]:
    """Just before the call saves its epoch state (the state's put, wrapped: the drop
    runs before the real one)."""
    epochs: Any = p.mem.planner._epochs
    done: list[bool] = []
    put = epochs.put

    def hooked(conversation_id: str, state: object) -> None:
        if not done:
            done.append(True)
            drop(p)
        put(conversation_id, state)

    epochs.put = hooked
    return lambda: bool(done)


# where in the call the drop lands: (the hook, whether the context shows the text: a drop
# before the call reads the rows it shows leaves it nothing to show)
HOOKS: list[tuple[str, Callable[[Pair, Callable[[Pair], None]], Callable[[], bool]], bool]] = [
    ("before-epoch-put", _hook_put, True),
    # namespace recall read the erased turns' rows (before the erasure's commit): the call
    # counts, shows and saves them after the drop
    ("after-text-read", lambda p, d: _hook(p, d, p.mem.cold, "get", True), True),
    # the turn cache read the erased conversation's turns: it keeps no table loaded across
    # a drop (tiers.turncache), and the call reads the rows it shows after the commit
    ("after-turn-load", lambda p, d: _hook(p, d, p.mem.cold, "turn_facts", True), False),
]


def _under_way(root: Path, embedder: Embedder, shared: bool, drop: Callable[[Pair], None],
               hook: Callable[[Pair, Callable[[Pair], None]], Callable[[], bool]]) -> dict[str, Any]:
    """In the child: one case, walked while the pair is still open."""
    config = Config(data_dir=root / "data")
    p = Pair(config, embedder, shared=shared)
    try:
        canary = CANARY_PREFIX + uuid.uuid4().hex
        _write(p.mem, canary)
        dropped = hook(p, drop)
        shown = _sibling_context_shows(p.mem, canary)
        return {"shows": shown, "dropped": dropped(), "key_gone": p.mem.cold.key_of(NS, "doomed") is None,
                "held": held(canary)}
    finally:
        p.close()
        if shared:
            EmbeddedRedis(config.data_dir).stop()


def _row(epochs: str, who: str, where: str) -> str:
    return f"{epochs}/{who}/{where}"


def _run_each(root: Path) -> dict[str, dict[str, Any]]:
    from tiermem.tiers.embed_onnx import build_embedder

    embedder = build_embedder()
    embedder.query_session = "never"  # as the suite's session embedder (conftest)
    embedder.embed(["warm-up"])  # loaded: as the suite's session embedder
    report: dict[str, dict[str, Any]] = {}
    for n, ((epochs, shared), (who, drop), (where, hook, _)) in enumerate(itertools.product(EPOCHS, DROPPERS, HOOKS)):
        try:
            report[_row(epochs, who, where)] = _under_way(root / str(n), embedder, shared, drop, hook)
        except Exception:  # reported as the case's failure, the rest still run
            report[_row(epochs, who, where)] = {"error": traceback.format_exc()}
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("inflight-fill")
    done = subprocess.run([sys.executable, __file__, str(root)], capture_output=True, text=True, timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    got: dict[str, dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return got


@pytest.mark.parametrize(("where", "shows"), [(h[0], h[2]) for h in HOOKS], ids=[h[0] for h in HOOKS])
@pytest.mark.parametrize("who", [d[0] for d in DROPPERS])
@pytest.mark.parametrize("epochs", [e[0] for e in EPOCHS])
def test_a_call_under_way_keeps_no_erased_text_once_it_returns(
        report: dict[str, dict[str, Any]], epochs: str, who: str, where: str, shows: bool) -> None:
    row = report[_row(epochs, who, where)]
    assert "error" not in row, row["error"]
    # the premise: the call read the text before the erasure, which committed during it
    assert row["shows"] is shows
    assert row["dropped"] and row["key_gone"]
    assert row["held"] == []


def test_a_shared_state_refused_for_an_erased_shown_conversation_leaves_no_local_copy(
        tmp_path: Path, embedder: Embedder, canary: str) -> None:
    """Another process erases during the put and nothing in this process has read it yet:
    the writer's own check (`live`) deletes the shared state, and now its local copy too,
    before the call returns (not only at this process's next call)."""
    config = Config(data_dir=tmp_path / "data")
    p = Pair(config, embedder, shared=True)
    try:
        _write(p.mem, canary)
        _hook_put(p, lambda q: q.other.delete_conversation("doomed", namespace=NS))
        assert _sibling_context_shows(p.mem, canary)
        sibling = p.mem.cold.key_of(NS, "sibling")
        assert sibling is not None
        epochs: Any = p.mem.planner._epochs
        assert epochs.tier.client.get(epochs.key(sibling)) is None  # the shared one went (before too)
        assert epochs.local.get(sibling) is None
    finally:
        p.close()
        EmbeddedRedis(config.data_dir).stop()


if __name__ == "__main__":
    print(json.dumps(_run_each(Path(sys.argv[1]))))
