"""An erasure costs what it erases, not what the database holds (while it runs every
tenant waits for the write lock): its statements reach the erased rows through indexes,
and FTS5's 'secure-delete' removes the erased terms at the delete, so the whole index is
merged ('optimize') only when a page key of the segment index still spells part of an
erased term. Checked on real files: no erased term is left in them either way."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from store_trace import traced

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

WORDS = ("router refund invoice billing password shipping warranty printer battery screen keyboard "  # noqa: SIM905
         "subscription renewal payment receipt address ticket escalate laptop tablet network").split()
OPTIMIZE = "VALUES ('optimize')"


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdStore]:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=HashEmbedder())  # type: ignore[arg-type]
    yield s
    s.close()


# A plan step that walks a whole table of the database (not a temp table of the erased
# keys or text): one of these makes the erasure's cost grow with every tenant's data.
def _walks_a_table(step: str) -> bool:
    m = re.match(r"SCAN (\S+)(.*)", step)
    if m is None:
        return False
    table, rest = m.group(1), m.group(2)
    if table in ("k", "erase_keys", "erase_ids", "temp.erase_fts", "temp.erase_fts_terms", "sqlite_master",
                 "prune_guard",
                 # the detached conversations whose rows are still owed: empty but for
                 # an erasure that was cut off
                 "erase_owed",
                 # the segment index: a row per index page holding a term, not per row
                 "messages_fts_idx"):
        return False
    if table == "messages_vec":
        # vec0's idxStr starts with its plan: '1' full scan, '2' point lookup, '3' KNN
        return not re.search(r"VIRTUAL TABLE INDEX \d+:[23]", rest)
    if table in ("messages_fts", "f"):
        return rest.endswith("INDEX 0:")  # FTS5: no constraint used (a rowid lookup says '=')
    return True


ERASURES: list[tuple[str, Callable[[ColdStore], object]]] = [
    ("delete_conversation", lambda s: s.delete_conversation(s.key_of("acme", "c1") or "")),
    # the namespace with the ones below it: a range of the namespace index, not substr()
    ("delete_namespace", lambda s: s.delete_namespace("acme")),
    ("prune", lambda s: s.prune(2**40, namespace="acme/alice")),
]


@pytest.mark.parametrize("name,erase", ERASURES, ids=[e[0] for e in ERASURES])
def test_erasure_statements_use_indexes(store: ColdStore, name: str, erase: Callable[[ColdStore], object]) -> None:
    for ns in ("acme", "acme/alice", "acme2", "other"):
        for c in range(3):
            store.append_many(f"c{c}", [Message(role="user", content=f"{ns} turn {t}") for t in range(3)],
                              namespace=ns)
    store.index_pending()
    statements = traced(store, lambda: erase(store))
    walks = []
    for sql in statements:
        if sql.split()[0].upper() in ("SELECT", "INSERT", "DELETE", "UPDATE", "WITH"):
            walks += [(sql, step[-1]) for step in store._read("EXPLAIN QUERY PLAN " + sql) if _walks_a_table(step[-1])]
    assert walks == []


def test_erased_terms_are_gone_without_merging_every_time(store: ColdStore) -> None:
    rnd = random.Random(7)
    canaries: dict[str, list[str]] = {}
    for c in range(40):
        # unique rare terms, as codes and names are: the ones an erasure must not leave
        mine = ["zq" + "".join(rnd.choice("abcdefghijklmnopqrstuvwxy") for _ in range(8)) for _ in range(3)]
        canaries[f"c{c}"] = mine
        turns = [" ".join(rnd.choice(WORDS) for _ in range(25)) for _ in range(20)]
        for i, term in enumerate(mine):
            turns[3 + 5 * i] += f" my code is {term}"
        store.append_many(f"c{c}", [Message(role="user", content=t) for t in turns], namespace=f"t{c % 4}")
    store.index_pending()
    db = store.path
    merged = 0
    erased: list[str] = []
    for c in range(0, 40, 2):
        merged += any(OPTIMIZE in s for s in traced(store, lambda c=c: store.delete_conversation(f"c{c}")))
        erased += canaries[f"c{c}"]
        files = [db.read_bytes()] + [p.read_bytes() for p in (Path(f"{db}-wal"),) if p.exists()]
        # 6 bytes: longer than a page key that only tells "zq" from the words before it
        left = [t for t in erased if any(t[:6].encode() in f for f in files)]
        assert left == [], f"after erasing c{c}"
    # the merge is the exception (a page key that is part of an erased term), not the rule
    assert merged < 5
    # the live conversations' terms are still found
    assert store.search_bm25(canaries["c1"][0], 5, conversation_id="c1")
