"""`rebuild` rewrites the derived rows in batches of messages (SQLite), the store's lock
free between them: one transaction held SQLite's write lock for the whole rewrite (43 s
for 26.6k messages), stalling every other tenant of the process and failing other
processes' appends past their busy timeout. Every message keeps its turn and FTS rows at
every commit, so readers mid-way read correctly; a process killed mid-way leaves a store
that reads correctly, whose next catch-up re-embeds every turn and whose next rebuild
finishes. Real files, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import tiermem.tiers.cold as cold_module
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 400
BATCH = 100  # REBUILD_BATCH_MESSAGES here: small, so a few hundred messages take several batches
CANARY = "zq9canary-rebuild-sloe"


def fill(store: ColdStore) -> str:
    texts = [f"turn {t} of the long ticket about the boiler" for t in range(TURNS)]
    texts[TURNS - 5] += f" code {CANARY}"  # in the last batch: still found before it is rewritten
    store.append_many("long", [Message(role="user", content=t) for t in texts], namespace="acme")
    store.append("mine", Message(role="user", content="my own ticket about the radiator"), namespace="other")
    store.index_pending()
    return store.key_of("acme", "long") or ""


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[ColdStore]:
    monkeypatch.setattr(cold_module, "REBUILD_BATCH_MESSAGES", BATCH, raising=False)
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=embedder)
    try:
        yield s
    finally:
        s.close()


def test_the_lock_is_free_between_its_batches_and_readers_find_every_message(store: ColdStore) -> None:
    key = fill(store)
    mine = store.key_of("other", "mine") or ""
    seen: list[dict[str, object]] = []

    def step(name: str) -> None:
        if name != "rebuild:batch":
            return
        out: dict[str, object] = {}

        def other_tenant() -> None:
            # another thread's calls get the store between two batches; every message
            # has its turn and FTS rows (the old ones or the new), so reads find them
            out["appended"] = store.append("mine", Message(role="user", content="and the boiler"), namespace="other")
            out["counts"] = store.integrity()
            out["found"] = [h[1] for h in store.search_bm25(CANARY, 3, conversation_id=key)]
            out["turns"] = len(store.turns(key))

        t = threading.Thread(target=other_tenant)
        t.start()
        t.join(30)
        out["ran"] = not t.is_alive()
        seen.append(out)

    store._fault = step
    report = store.rebuild()
    store._fault = None
    # before: one transaction, no step between its batches
    assert len(seen) >= 2
    for s in seen:
        counts = s["counts"]
        assert s["ran"] and s["found"] == [TURNS - 5] and s["turns"] == TURNS
        assert counts["turns"] == counts["fts"] == counts["messages"]  # type: ignore[index]
    # the other tenant's appends went in, and were rebuilt with the rest
    assert [m.text for m in store.history(mine)][1:] == ["and the boiler"] * len(seen)
    total = TURNS + 1 + len(seen)
    # (the append after its last batch has its rows from the append; every turn is embedded)
    assert report == {"turns": total - 1, "embedded": total}
    assert store.integrity() == {"messages": total, "turns": total, "fts": total, "vectors": total}
    assert [h.position for h in store.search(CANARY, 3, conversation_id=key)][:1] == [TURNS - 5]


CHILD = f"""
import sys, time
from pathlib import Path
import tiermem.tiers.cold as cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import build_embedder
from tiermem.tiers.tokens import BpeTokenCounter

cold.REBUILD_BATCH_MESSAGES = {BATCH}
catch_up = sys.argv[2] == "1"
def step(name):
    if name == "rebuild:batch":
        if catch_up:  # this process's catch-up runs between two batches (makes the vector table again)
            store.index_pending()
        print("REBUILDING", flush=True)
        time.sleep(600)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter(), embedder=build_embedder() if catch_up else None)
store._fault = step
store.rebuild(embed=False)
print("NOT KILLED", flush=True)
"""


# whether the killed process ran a catch-up between its batches (it made the vector table
# again: no turn may be left marked embedded without its vector)
@pytest.mark.parametrize("catch_up", [False, True], ids=["plain", "catch-up mid-way"])
def test_a_kill_mid_rebuild_leaves_a_store_that_reads_and_catches_up(tmp_path: Path, counter: BpeTokenCounter,
                                                                       embedder: Embedder, catch_up: bool) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter, embedder=embedder)
    key = fill(store)
    before = [(t.position, t.tokens, t.content_hash, t.intent) for t in store.turns(key)]
    store.close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(int(catch_up))], stdout=subprocess.PIPE,
                             text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "REBUILDING"  # killed after its first batch
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    store = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        # it reads as before: every turn, its keyword index, the same counts and labels
        counts = store.integrity()
        assert counts["turns"] == counts["fts"] == counts["messages"] == TURNS + 1
        assert [(t.position, t.tokens, t.content_hash, t.intent) for t in store.turns(key)] == before
        assert [h[1] for h in store.search_bm25(CANARY, 3, conversation_id=key)] == [TURNS - 5]
        # its vectors were dropped: the next catch-up embeds every turn again, unless the
        # killed process's catch-up did (finding the table gone, it marked every turn)
        done = TURNS + 1 if catch_up else 0
        assert store.index_pending() == TURNS + 1 - done
        assert store.integrity()["vectors"] == TURNS + 1
        assert [h.position for h in store.search(CANARY, 3, conversation_id=key)][:1] == [TURNS - 5]
        # and a rerun finishes it
        assert store.rebuild() == {"turns": TURNS + 1, "embedded": TURNS + 1}
    finally:
        store.close()
