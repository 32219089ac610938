"""Bulk ingest with deferred indexing (issue 17): appends leave every turn unembedded, and
the catch-up that embeds them later (many batches at once, grouped by length) records
exactly the supersession that an eager process, which embedded each turn as it came,
records. A correction's meaning search looks only at the turns before it, however many
later turns already have vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

SMALL_TALK = ["What's a good podcast about volcanoes?", "Ugh, the weather here is windy again.",
              "How long should I cook potatoes for dinner tonight?", "Tell me a fun fact about coral reefs."]
# after the correction: turns on its topic that, once embedded, are nearer to it than
# the statement it corrects, and would crowd that statement out of a meaning search
# that looked at later turns too
# (cosine to the correction 0.77, the corrected statement's 0.61)
LATER_ON_TOPIC = [f"Noted: your seat preference is window seat now (note {i})." for i in range(14)]


def _conversation(mem: Memory) -> None:
    def chat(users: list[str]) -> None:
        for u in users:
            mem.append_many("c", [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])

    chat(["Seat preference: aisle seat, every time."])
    chat(SMALL_TALK * 15)
    chat(["Switch my seat preference to window seat."])
    for i, reply in enumerate(LATER_ON_TOPIC):  # the assistant's: they correct nothing themselves
        mem.append_many("c", [{"role": "user", "content": SMALL_TALK[i % 4]}, {"role": "assistant", "content": reply}])


def _superseded(mem: Memory) -> dict[int, int]:
    return {r.position: r.superseded_by for r in mem.cold.turns("c") if r.superseded_by is not None}


@pytest.fixture(scope="module")
def eager(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> dict[int, int]:
    # the model is loaded: each correction is embedded and decided before append returns
    with Memory(Config(data_dir=tmp_path_factory.mktemp("eager")), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        _conversation(mem)
        return _superseded(mem)


# (batch, pool_batches): how the catch-up is cut; each must give the eager result
@pytest.mark.parametrize(("batch", "pool_batches"), [
    (64, 16),  # the defaults: the whole conversation in one pool
    (64, 1),  # one batch at a time, in log order (the code before pooling)
    (8, 4),  # many pools, each hooked in batches of 8
])
def test_deferred_catch_up_records_the_eager_supersession(tmp_path: Path, eager: dict[int, int], batch: int,
                                                          pool_batches: int) -> None:
    correction = 2 * (1 + 60)
    assert eager == {0: correction}
    lazy = FastEmbedder()
    with Memory(Config(data_dir=tmp_path / "data"), embedder=lazy, hot=False, background_indexing=False) as mem:
        _conversation(mem)
        # user turns lie before the correction's window: the rules leave it to the meaning
        # search (Superseder.record's `final`), so nothing is decided before the catch-up
        assert not lazy.loaded and _superseded(mem) == {}
        total = mem.cold.last_position("c") + 1
        assert mem.cold.pending_embeddings("c") == total
        assert mem.cold.index_pending(batch=batch, pool_batches=pool_batches) == total
        assert mem.cold.pending_embeddings("c") == 0
        assert _superseded(mem) == eager


def test_the_hook_sees_each_batch_in_log_order(tmp_path: Path) -> None:
    lazy = FastEmbedder()
    with Memory(Config(data_dir=tmp_path / "data"), embedder=lazy, hot=False, background_indexing=False) as mem:
        mem.append_many("c", [{"role": "user", "content": f"note {i} about volcanoes"} for i in range(50)])
        seen: list[list[int]] = []
        mem.cold.on_embedded = lambda stored: seen.append([p for _c, p, _v in stored])
        assert mem.cold.index_pending(batch=8, pool_batches=4) == 50
    # pools of 32 rows (embedded together), hooked 8 at a time, in order, each turn once
    assert [len(s) for s in seen] == [8, 8, 8, 8, 8, 8, 2]
    assert [p for s in seen for p in s] == list(range(50))
