"""The background consolidation's reads of the turn index leave out a row they cannot use,
as the foreground reads do (tests/test_turn_index_rows.py). Before (a review, 2026-12-06),
`turn_times`, `turn_created_at` and `unlabeled_tail` converted `position` and
`created_at` with bare `int()`/`float()`, and the turn census the first turn's id: a
`created_at` SQLite held as text made `Memory.consolidate` raise ValueError and every run
of the consolidation scheduler log a failed refresh (or die in its sweep), retried each
interval; a text id on the first turn made `Memory.context` raise. A NaN time (text
'nan' converts) went through as a time.

Now each goes through `turn_problem`: the row is left out as a turn not indexed yet,
counted once in `salvaged_rows` as a "turn" row. Real SQLite; rows rewritten with SQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cold_helpers import sql_behind

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "background"
SESSION = "s1"
TURNS = 6
BAD = 4  # the position whose turn-index row is rewritten (unlabeled tail, session scan)

# (id, column, SQL value, position) -- what SQLite keeps in the turn index's typed columns
CASES = [
    ("created-text", "created_at", "'yesterday'", BAD),  # float('yesterday') in turn_times
    ("created-nan-text", "created_at", "'nan'", BAD),  # converts: a time of no instant
    ("created-text-first", "created_at", "'yesterday'", 0),  # the sweep's first uncovered turn
    ("tokens-text", "tokens", "'abc'", BAD),  # the index cannot use the row: left out here too
    ("id-text-first", "id", "'first'", 0),  # int('first') in the turn census
]


def _messages(n: int = TURNS) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the shipping label printed"}
            for i in range(n)]


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


@pytest.mark.parametrize(("column", "value", "position"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_consolidation_leaves_the_row_out(tmp_path: Path, embedder: FastEmbedder, column: str, value: str,
                                          position: int) -> None:
    cfg = Config(data_dir=tmp_path / "data", warm_max_turns_behind=1)
    with _open(cfg, embedder) as m:
        m.append_many(CONV, _messages(), session_id=SESSION)
        key = m.cold.key_of("default", CONV)
    assert key is not None
    sql_behind(cfg, f"UPDATE turns SET {column} = {value} WHERE conversation_id = ? AND position = ?",
               (key, position))
    with _open(cfg, embedder) as m:
        sched = m.make_scheduler()
        for _ in range(2):  # a row met on every run is still one row
            sched.run_once()
            m.consolidate(CONV)
        assert sched.stats.errors == 0
        assert m.context(CONV, "shipping label", 5_000).messages
        assert m.warm.latest(key, "rolling") is not None
        assert m.warm.latest(key, "session", SESSION) is not None
        assert m.stats(namespace="default")["cold"]["salvaged_rows"] == 1
