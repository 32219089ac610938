"""Derived state belongs to an incarnation (DESIGN invariant 9) and ids are unique per
namespace (invariant 10): a conversation pruned or erased and created again under the
same id shares nothing with its predecessor, whoever creates it.

Each test names the break of issue 13 it covers; on the code before incarnations each
of them failed (the warm summary came back from Redis, B's append answered
NamespaceMismatch, `prune()` emptied every namespace, the view leaked `consolidate`).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

import tiermem
from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.schema import schema_version
from tiermem.tiers.tokens import BpeTokenCounter

CANARY = "078-05-1120"
LEGACY_DB = Path(__file__).parent / "data" / "legacy-v12.db.gz"  # made by the code before m013


def _seed_secret(mem: Memory, ns: str, conv: str = "reuse-1") -> None:
    turns = [{"role": "user", "content": f"Ticket note {i}: the printer on floor {i} jams on A3 paper."}
             for i in range(29)]
    turns.insert(7, {"role": "user", "content": f"My social security number is {CANARY}, keep it on file."})
    mem.append_many(conv, turns, namespace=ns)


def _all_text(ctx: tiermem.Context) -> str:
    return "\n".join(str(m.get("content")) for m in ctx.messages) + ctx.plan.explain()


def test_pruned_summary_is_not_served_to_the_next_owner_of_its_id(memory: Memory) -> None:
    """Break 1 (critical): A's rolling view, cached in Redis, came back in B's context."""
    _seed_secret(memory, "tenant-a")
    assert memory.consolidate("reuse-1", namespace="tenant-a") >= 1
    ctx = memory.context("reuse-1", "what is on file?", 2000, namespace="tenant-a")
    assert CANARY in _all_text(ctx)  # the view and its Redis cache exist
    assert memory.prune(0, namespace="tenant-a").conversation_ids == ["reuse-1"]
    with pytest.raises(tiermem.ConversationNotFound):
        memory.history("reuse-1", namespace="tenant-a")
    # B takes the id; then A takes it again: neither sees a byte of the pruned one
    for ns in ("tenant-b", "tenant-a"):
        for i in range(26):
            memory.append("reuse-1", {"role": "user", "content": f"{ns} fresh line {i} about invoices"}, namespace=ns)
        memory.consolidate("reuse-1", namespace=ns)
        ctx = memory.context("reuse-1", "what is my social security number?", 2000, namespace=ns)
        assert CANARY not in _all_text(ctx), ns
        assert all(CANARY not in h.text for h in memory.search(None, "social security number", 20, namespace=ns))


def test_same_id_in_two_namespaces_is_two_conversations(cold_memory: Memory) -> None:
    """Break 2: ids were global (409 on append, 422 on fork to a used id)."""
    a, b = cold_memory.namespaced("acme"), cold_memory.namespaced("globex")
    a.append("session-1", {"role": "user", "content": "acme's first line"})
    assert b.append("session-1", {"role": "user", "content": "globex's first line"}) == 0
    b.append("other", {"role": "user", "content": "globex other"})
    assert b.fork("other", 0, new_id="session-2") == "session-2"
    assert a.fork("session-1", 0, new_id="session-2") == "session-2"  # free in acme too
    assert [m.text for m in a.history("session-1")] == ["acme's first line"]
    assert [m.text for m in b.history("session-1")] == ["globex's first line"]
    assert [m.text for m in a.history("session-2")] == ["acme's first line"]
    assert a.conversations() == ["session-1", "session-2"]
    assert b.conversations() == ["other", "session-1", "session-2"]
    # a fork onto an id the caller's own namespace holds is refused
    with pytest.raises(tiermem.ValidationError, match="new_id"):
        b.fork("other", 0, new_id="session-1")


def test_prune_without_a_namespace_prunes_only_default(cold_memory: Memory) -> None:
    """Break 3: `Memory.prune()` with no namespace deleted every namespace."""
    cold_memory.append("d", {"role": "user", "content": "default's"})
    cold_memory.append("t", {"role": "user", "content": "tenant's"}, namespace="tenant")
    assert cold_memory.prune(0).conversation_ids == ["d"]
    assert cold_memory.conversations("tenant") == ["t"]
    cold_memory.append("d", {"role": "user", "content": "default's again"})
    assert sorted(cold_memory.prune(0, all_namespaces=True).conversation_ids) == ["d", "t"]
    with pytest.raises(tiermem.ValidationError, match="namespace"):
        cold_memory.prune(0, namespace="tenant", all_namespaces=True)


def test_namespaced_view_confines_every_method_and_does_not_close_its_parent(cold_memory: Memory) -> None:
    """Break 4: `consolidate` ran unconfined, `close` closed the Memory, `with` failed."""
    cold_memory.append("a-only", {"role": "user", "content": "A's conversation"}, namespace="a")
    with cold_memory.namespaced("b") as view:
        with pytest.raises(tiermem.ConversationNotFound):
            view.consolidate("a-only")
        with pytest.raises(AttributeError):
            view.cold  # noqa: B018  (no pass-through to Memory's parts)
        view.close()
    # the parent still works after the view's close and its `with` block
    assert [m.text for m in cold_memory.history("a-only", namespace="a")] == ["A's conversation"]
    sub = cold_memory.namespaced("acme").namespaced("alice")
    assert sub.namespace == "acme/alice"


def test_a_stale_key_never_reaches_the_next_incarnation(cold: ColdStore) -> None:
    """Break 5: ownership was checked outside the write; a prune and a reuse of the id in
    between could mix them. Keys are never reused, so a write with the old key misses."""
    cold.append("c", cold_msg("first owner"), namespace="x")
    old = cold.key_of("x", "c")
    assert old is not None
    cold.prune(float("inf"), namespace="x")
    cold.append("c", cold_msg("second owner"), namespace="y")
    new = cold.key_of("y", "c")
    assert new is not None and new != old
    with pytest.raises(tiermem.ConversationNotFound):
        cold.checkpoint(old, "written with a stale key", 0)
    with pytest.raises(tiermem.ConversationNotFound):
        cold.set_pin(old, 0, 90)
    with pytest.raises(tiermem.ConversationNotFound):
        cold.store_plan(old, "{}")
    with pytest.raises(tiermem.ConversationNotFound):
        cold.fork(old, 0)
    assert cold.latest_checkpoint(new) is None and cold.pinned_turns(new) == []


@pytest.mark.parametrize("recreate_in", [
    "x",  # the same owner reuses its id
    "y",  # another namespace takes the id
])
def test_keys_are_never_issued_twice(cold: ColdStore, recreate_in: str) -> None:
    keys = set()
    for _ in range(3):
        cold.append("same", cold_msg("hello"), namespace=recreate_in if keys else "x")
        key = cold.key_of(recreate_in if keys else "x", "same")
        assert key is not None and key not in keys
        keys.add(key)
        cold.prune(float("inf"), all_namespaces=True)
    assert len(keys) == 3


def cold_msg(text: str) -> tiermem.Message:
    return tiermem.Message(role="user", content=text)


def test_a_database_from_before_incarnations_migrates_with_nothing_lost(
    tmp_path: Path, counter: BpeTokenCounter, embedder: FastEmbedder
) -> None:
    """A file made by the code before m013 (global ids): every message, pin, checkpoint
    and view is still there under the same ids; the ids become per namespace, and the id
    of a conversation pruned before the upgrade is not handed out as a key again."""
    db = tmp_path / "data" / "tiermem.db"
    db.parent.mkdir(mode=0o700)
    with gzip.open(LEGACY_DB) as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    store = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        assert store.version == schema_version()
        assert store.list_names("default") == ["trip-1"] and store.list_names("acme") == ["acme-1"]
        trip = store.key_of("default", "trip-1")
        assert trip == "trip-1"  # the key is the old id: nothing was rewritten
        assert next(m.text for m in store.history(trip)) == "Never book me on red-eye flights."
        assert len(store.history(trip)) == 3 and len(store.history("acme-1")) == 12
        assert [r.position for r in store.pinned_turns(trip) if r.pinned_priority == 80] == [2]
        assert store.latest_checkpoint(trip) is not None
        assert store._read("SELECT COUNT(*) FROM summaries WHERE conversation_id = 'acme-1'")[0][0] >= 1
        # gone-1 was pruned before the upgrade but had a load-bearing turn (a pin version row)
        store.append("gone-1", cold_msg("a new gone-1"))
        assert store.key_of("default", "gone-1") != "gone-1"
        # the same id in another namespace is another conversation now
        store.append("trip-1", cold_msg("acme's trip"), namespace="acme")
        assert len(store.history(trip)) == 3
    finally:
        store.close()


@pytest.mark.parametrize(("reader", "recall_on", "sees"), [
    ("acme/alice", True, True),  # the same user's other session: recalled
    ("acme/alice", False, False),  # namespace_recall = false switches it off
    ("acme/bob", True, False),  # a sibling namespace: never
    ("acme", True, False),  # the parent (the tenant): never
    ("acme/alice/work", True, False),  # a namespace below: never
])
def test_cross_conversation_recall_stays_in_exactly_one_namespace(
    tmp_path: Path, embedder: FastEmbedder, reader: str, recall_on: bool, sees: bool
) -> None:
    cfg = tiermem.Config(data_dir=tmp_path / "data", namespace_recall=recall_on)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("s1", [{"role": "user", "content": "The gym locker code is 4471, remember it."},
                               {"role": "assistant", "content": "Noted the locker code."}], namespace="acme/alice")
        mem.append("s2", {"role": "user", "content": "What was my gym locker code again?"}, namespace=reader)
        ctx = mem.context("s2", "What was my gym locker code again?", 2000, namespace=reader)
        assert ("4471" in str(ctx.messages)) is sees
        assert any(it.conversation_id == "s1" for it in ctx.plan.items) is sees


def test_a_namespaces_hot_stats_name_no_other_tenant(memory: Memory) -> None:
    """A namespace's stats leave out process-wide facts (the last Redis error may name
    any tenant's conversation; the rebuild count is everyone's activity)."""
    memory.append("theirs", {"role": "user", "content": "x"}, namespace="a")
    memory.append("mine", {"role": "user", "content": "y"}, namespace="b")
    hot = memory.stats(namespace="b")["hot"]
    assert "last_error" not in hot and "rebuilds" not in hot and "theirs" not in str(hot)
    assert hot["members"] == 1
    assert "rebuilds" in memory.stats()["hot"]  # the operator's view keeps them
