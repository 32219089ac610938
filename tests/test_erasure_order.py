"""An erasure lists its conversations (the report's tombstones, keys and names) by
namespace, then name, on both engines, and `tombstones()` lists the oldest erasure first,
each erasure's conversations in that order (tiers.dialect.ERASURE_ORDER). Both listed them
in key order, and a key's suffix is random per store: same-named conversations of two
namespaces came in either order, differently on each engine and after migrate-store
(tests/test_engines_differential.py had to compare them as sets)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem import Config, ErasureReport, Memory
from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

# created last first, so the first (unsuffixed) key is the last namespace's: key order
# then puts it first, whatever the random suffixes of the others
NAMESPACES = ("t/a", "t/b", "t/c", "t/d")
NAMES = ("x", "y")
EXPECTED = [(ns, name) for ns in NAMESPACES for name in NAMES]
# per conversation in the batched case: one fits a first batch, two do not
BATCH_TURNS = ERASE_BATCH_MESSAGES // 2 + 1
assert BATCH_TURNS <= ERASE_BATCH_MESSAGES < 2 * BATCH_TURNS

ERASURES: list[tuple[str, Callable[[Memory], ErasureReport]]] = [
    ("delete_namespace", lambda m: m.delete_namespace("t")),  # with the namespaces below it
    ("prune", lambda m: m.prune(dt.timedelta(0), all_namespaces=True)),  # age 0: every conversation
]


def _open(config: Config, embedder: Embedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def _fill(mem: Memory) -> dict[tuple[str, str], str]:
    """Each conversation's incarnation as its append answered it (a token, which the
    report's `keys` name it by), by (namespace, name)."""
    tokens: dict[tuple[str, str], str] = {}
    for ns in reversed(NAMESPACES):
        for name in reversed(NAMES):
            token = mem.append_outcome(name, [{"role": "user", "content": f"{name} in {ns}"}], namespace=ns).incarnation
            assert token is not None
            tokens[(ns, name)] = token
    return tokens


def _listed(report: ErasureReport, incarnations: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """The report's conversations, with its names and `keys` (`incarnations`: what each
    conversation's key is there, a token in Memory's report) checked in the same order."""
    names = [(t["namespace"], t["id"]) for t in report.tombstones]
    assert report.conversation_ids == [n for _ns, n in names]
    assert report.keys == [incarnations[at] for at in names]
    return names


@pytest.mark.parametrize(("how", "erase"), ERASURES, ids=[e[0] for e in ERASURES])
def test_an_erasure_lists_its_conversations_by_namespace_then_name(
        engine_config: Config, embedder: Embedder, how: str, erase: Callable[[Memory], ErasureReport]) -> None:
    with _open(engine_config, embedder) as mem:
        tokens = _fill(mem)
        assert _listed(erase(mem), tokens) == EXPECTED


def test_tombstones_list_the_oldest_erasure_first_then_by_namespace_and_name(
        engine_config: Config, embedder: Embedder) -> None:
    with _open(engine_config, embedder) as mem:
        _fill(mem)
        mem.delete_conversation("y", namespace="t/d")
        mem.append("y", {"role": "user", "content": "y again"}, namespace="t/d")  # a second incarnation
        mem.delete_namespace("t")
        stones = [(t["namespace"], t["id"]) for t in mem.cold.tombstones()]
        assert stones == [("t/d", "y"), *EXPECTED]
        # one namespace's: its first incarnation of y erased before the second
        assert [t["id"] for t in mem.cold.tombstones("t/d")] == ["y", "x", "y"]


def test_a_batched_erasure_lists_them_in_the_same_order(tmp_path: Path, counter: BpeTokenCounter) -> None:
    store = ColdStore(tmp_path / "tiermem.db", tokens=counter)
    try:
        for ns in reversed(NAMESPACES):
            for name in reversed(NAMES):
                store.append_many(name, [Message(role="user", content=f"turn {t}") for t in range(BATCH_TURNS)],
                                  namespace=ns)
        keys = {(ns, name): store.key_of(ns, name) or "" for ns in NAMESPACES for name in NAMES}
        batches: list[list[str]] = []
        report = store.delete_namespace("t", on_erased=lambda keys: batches.append(list(keys)))
        assert len(batches) > 1  # SQLite committed it in several transactions
        assert _listed(report, keys) == EXPECTED  # the store's report: its keys
    finally:
        store.close()
