"""An erasure reaches every process that serves the store, not only the one that erased.

Before, an erasure dropped the erasing process's memos, turn cache and epoch states
only: another process serving the same store (a second `tiermem serve` worker, a worker
beside a CLI) kept the erased text in memory until its bounds evicted it, where a heap
dump would show it. Each process now reads the tombstones committed since its last
check at the start of its next call (and its indexer's thread while it is idle) and
drops its copies (tiermem.memory `_catch_erasures`).

Process A (a child: tests/erasure_child.py) warms every cache of caller text on a
conversation holding a marker, and shows it in a sibling's context by namespace recall;
this test's process, B, erases it; A's next call must leave no object in A that holds
the marker (a walk over every object reachable from the gc). A real SQLite file or
PostgreSQL schema (whose append reads the erasures in passing: one statement still),
the real embedded Redis both processes share, the real model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.memory import INDEXER_WAKE_S
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

CHILD = Path(__file__).with_name("erasure_child.py")
NS = "acme/alice"  # the child's namespace (erasure_child.NS)
ANSWER_TIMEOUT_S = 180.0  # the child loads the model and opens the store before its first answer
# the idle child's indexer looks for erasures every INDEXER_WAKE_S; this much more for a loaded machine
IDLE_MARGIN_S = 3.0


class Child:
    """Process A: one command per line, one JSON answer per line (erasure_child.py)."""

    def __init__(self, config: Config, marker: str) -> None:
        store = [config.cold_url, config.cold_schema] if config.cold_url is not None else []
        self.proc = subprocess.Popen([sys.executable, str(CHILD), str(config.data_dir), marker[::-1], *store],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.answer()["ready"]

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the child exited (code {self.proc.wait(ANSWER_TIMEOUT_S)})"
        got: dict[str, Any] = json.loads(line)
        return got

    def ask(self, command: str) -> list[str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        held: list[str] = self.answer()["held"]
        return held

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(ANSWER_TIMEOUT_S)


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Config]:
    """Both processes' store: a SQLite file, or a fresh PostgreSQL schema."""
    from pg_server import fresh_schema

    cfg = Config(data_dir=tmp_path / "data")
    if request.param == "postgres":
        cfg = Config(data_dir=tmp_path / "data", cold_url=request.getfixturevalue("pg_url"),
                     cold_schema=fresh_schema())
    yield cfg
    EmbeddedRedis(cfg.data_dir).stop()  # the server both processes shared


@pytest.fixture
def marker() -> str:
    return f"qz{uuid.uuid4().hex[:12]}"


@pytest.fixture
def child(config: Config, marker: str) -> Iterator[Child]:
    a = Child(config, marker)  # first: it creates the store and starts the Redis B shares
    yield a
    a.close()


# A's next call after the erasure
NEXT_CALLS = [
    "call",  # a read naming a conversation (history)
    "append",  # an append: on PostgreSQL its one statement reads the erasures in passing
]
ERASURES: list[tuple[str, Callable[[Memory], object]]] = [
    # the erasure a user asks for, of the conversation that held the text
    ("delete_conversation", lambda m: m.delete_conversation("doomed", namespace=NS)),
    # a user's erasure: every conversation of the namespace, the sibling's epoch too
    ("delete_namespace", lambda m: m.delete_namespace(NS)),
]


@pytest.mark.parametrize("next_call", NEXT_CALLS)
@pytest.mark.parametrize("erase", [e[1] for e in ERASURES], ids=[e[0] for e in ERASURES])
def test_the_next_call_of_another_process_holds_no_erased_text(config: Config, embedder: Embedder, child: Child,
                                                               erase: Callable[[Memory], object],
                                                               next_call: str) -> None:
    assert child.ask("warm")  # the probe sees what A's caches hold
    with Memory(config, embedder=embedder, background_indexing=False) as b:
        erase(b)
    assert child.ask(next_call) == []


def test_an_idle_process_drops_erased_text_by_itself(config: Config, embedder: Embedder, child: Child) -> None:
    assert child.ask("warm")
    with Memory(config, embedder=embedder, background_indexing=False) as b:
        b.delete_conversation("doomed", namespace=NS)
    # no call: A's indexer thread looks for erasures when it wakes with nothing to embed
    assert child.ask(f"wait {INDEXER_WAKE_S + IDLE_MARGIN_S}") == []
