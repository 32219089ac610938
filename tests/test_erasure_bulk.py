"""An erasure of turns written in batches (an import, `append_many` of a history) merges
the FTS index before secure-deleting them: FTS5's 'secure-delete' rewrites the pages of
their long doclists in every segment for each row (~1.6-2.5 ms a row: 4.7-7.3 s for a
3,000-turn namespace, every tenant of the process waiting on the store's lock
meanwhile), against ~0.13 ms a row on one merged segment and ~7 us per indexed row for
the merge. No erased term is left in the files either way."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_trace import traced

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

WORDS = ("router refund invoice billing password shipping warranty printer battery screen keyboard "  # noqa: SIM905
         "subscription renewal payment receipt address ticket escalate laptop tablet network").split()
BIG_CONVERSATIONS, BIG_TURNS = 10, 150  # one batch per conversation, as an import writes them
OPTIMIZE = "VALUES ('optimize')"


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdStore]:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    yield s
    s.close()


def _turns(rnd: random.Random, n: int, canary: str) -> list[Message]:
    texts = [" ".join(rnd.choice(WORDS) for _ in range(25)) for _ in range(n)]
    texts[n // 2] += f" my code is {canary}"
    return [Message(role="user" if i % 2 == 0 else "assistant", content=t) for i, t in enumerate(texts)]


def _left(db: Path, terms: list[str]) -> list[str]:
    files = [p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists()]
    # 6 bytes: longer than a page key that only tells "zq" from the words before it
    return [t for t in terms if any(t[:6].encode() in f for f in files)]


def test_a_namespace_written_in_batches_is_merged_before_it_is_secure_deleted(store: ColdStore) -> None:
    rnd = random.Random(11)
    canaries = [f"zq{c:02d}" + "".join(rnd.choice("abcdefghijklmnopqrstuvwxy") for _ in range(8))
                for c in range(BIG_CONVERSATIONS)]
    for c, canary in enumerate(canaries):
        store.append_many(f"c{c}", _turns(rnd, BIG_TURNS, canary), namespace="big")
    kept = "zqkeptzzzvalue"
    for t in range(20):  # another tenant, one append at a time
        store.append("mine", Message(role="user", content=f"turn {t} about the router" + (f" {kept}" if t == 7 else "")),
                     namespace="other")
    statements = traced(store, lambda: store.delete_namespace("big"))
    commit = statements.index("COMMIT")
    # before: every one of the 1,500 rows secure-deleted across the batches' segments,
    # in the transaction (seconds under the lock); a merge, if any, only after it
    assert any(OPTIMIZE in s for s in statements[:commit])
    assert _left(store.path, canaries) == []
    with store.reading() as conn:
        assert conn.execute("SELECT v FROM messages_fts_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    assert store.search_bm25(kept, 5, conversation_id="mine")
