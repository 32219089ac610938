"""Salvage on every read path (issue 13, break 7): a stored row of valid JSON but the
wrong shape (a `tool_calls` that is a string) is checked by the message model on every
read, so context, search, namespace recall, fork, warm refresh and hot rebuild skip it
like `history` does. On the code before, `context` raised AttributeError ('str' object
has no attribute 'get') for this conversation and, through namespace recall, for the
other conversations of its namespace; `fork` copied the row."""

from __future__ import annotations

import pytest
from test_cold_salvage import corrupt

from tiermem import Memory

BAD_BODIES = [
    # tool_calls a string: the row the attack planted
    """'{"role":"assistant","content":"shipping label printed","tool_calls":"not-a-list"}'""",
    # a tool call without a function
    """'{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function"}]}'""",
    # a content part of no known type
    """'{"role":"user","content":[{"type":"hologram","text":"shipping label printed"}]}'""",
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=["tool_calls-string", "call-without-function", "unknown-part"])
def test_a_wrong_shaped_row_is_skipped_on_every_read_path(memory: Memory, body: str) -> None:
    ns = "shop"
    memory.append_many("bad", [{"role": "user", "content": f"Order {i}: the shipping label printed twice."}
                               for i in range(6)], namespace=ns)
    memory.append_many("neighbour", [{"role": "user", "content": "Where is my shipping label?"}], namespace=ns)
    key = memory.cold.key_of(ns, "bad")
    assert key is not None
    corrupt(memory.cold.path, key, 3, "body", body.replace('"role":"user"', '"role":"user"'))
    memory.turns.drop()
    if '"role":"assistant"' in body:  # the row's role column must agree, or it is a different break
        from cold_helpers import raw
        with raw(memory.cold.path) as conn:
            (trig,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_no_update'").fetchone()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DROP TRIGGER messages_no_update")
            conn.execute("UPDATE messages SET role = 'assistant' WHERE conversation_id = ? AND position = 3", (key,))
            conn.execute(trig)
            conn.execute("COMMIT")

    assert [m.position for m in memory.history("bad", namespace=ns)] == [0, 1, 2, 4, 5]
    ctx = memory.context("bad", "shipping label printed", 2000, namespace=ns)
    assert "not-a-list" not in str(ctx.messages)
    other = memory.context("neighbour", "shipping label printed twice", 2000, namespace=ns)
    assert other.tokens <= 2000
    hits = memory.search("bad", "shipping label printed", 20, namespace=ns)
    assert 3 not in [h.position for h in hits] and hits
    assert all(h.position != 3 or h.conversation_id != "bad"
               for h in memory.search(None, "shipping label printed", 20, namespace=ns))
    child = memory.fork("bad", 5, new_id="bad-copy", namespace=ns)
    assert [m.position for m in memory.history(child, namespace=ns)] == [0, 1, 2, 4, 5]
    with memory.cold._lock:
        copied = memory.cold._conn.execute(
            "SELECT COUNT(*) FROM messages WHERE conversation_id = ? AND position = 3",
            (memory.cold.key_of(ns, child),)).fetchone()[0]
    assert copied == 0
    assert memory.consolidate("bad", namespace=ns) >= 1
    assert memory.hot is not None
    memory.hot.rebuild_all()
    assert memory.context("bad", None, 500, namespace=ns).tokens <= 500


def test_a_namespace_counts_only_its_own_salvaged_rows(cold_memory: Memory) -> None:
    """A tenant's stats must not show another namespace's bad rows (DESIGN invariant 10:
    no count depends on another namespace's contents); the count was global before."""
    cold_memory.append_many("bad", [{"role": "user", "content": f"line {i}"} for i in range(3)], namespace="shop")
    cold_memory.append("fine", {"role": "user", "content": "all good here"}, namespace="other")
    key = cold_memory.cold.key_of("shop", "bad")
    assert key is not None
    corrupt(cold_memory.cold.path, key, 1, "body", BAD_BODIES[0].replace("assistant", "user"))
    assert [m.position for m in cold_memory.history("bad", namespace="shop")] == [0, 2]
    assert cold_memory.stats(namespace="shop")["cold"]["salvaged_rows"] == 1
    assert cold_memory.stats(namespace="other")["cold"]["salvaged_rows"] == 0
