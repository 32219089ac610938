"""A property over random sequences of append / consolidate / prune / erase / recreate /
context / search across two namespaces (issue 13): no context, search, history or
summary ever shows text of another namespace or of an erased or pruned incarnation.

Every appended text carries a marker (`mk<n>x`) unique to its incarnation; the model
below knows which markers are live where, and every read's markers must be live in the
reader's own namespace (namespace recall may bring the namespace's other conversations).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator

import pytest
from conftest import full_memory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

MARKER = re.compile(r"mk\d+x")
NAMESPACES = ("t1/u", "t2/u")
CONVERSATIONS = ("s-1", "s-2")

OPS = st.lists(
    st.tuples(st.sampled_from(["append", "append", "consolidate", "prune", "erase", "context", "search"]),
              st.integers(0, 1), st.integers(0, 1)),
    min_size=3, max_size=12)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("prop") / "data", hot_budget_tokens=300, warm_max_turns_behind=2)
    with full_memory(cfg, embedder) as mem:
        yield mem


_run = itertools.count()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=OPS)
def test_no_read_shows_another_namespace_or_a_dead_incarnation(shared: Memory, ops: list[tuple[str, int, int]]) -> None:
    run = next(_run)
    # each example gets namespaces of its own, so examples cannot see each other either
    nss = [f"{ns}{run}" for ns in NAMESPACES]
    live: dict[tuple[str, str], set[str]] = {}
    dead: set[str] = set()
    counter = itertools.count()

    def check(ns: str, text: str) -> None:
        allowed = set().union(*[m for (n, _c), m in live.items() if n == ns]) if live else set()
        seen = set(MARKER.findall(text))
        assert not seen & dead, f"erased text came back: {seen & dead}"
        assert seen <= allowed, f"{ns} saw {seen - allowed}"

    for op, n, c in ops:
        ns, conv = nss[n], CONVERSATIONS[c]
        exists = (ns, conv) in live
        if op == "append":
            marks = [f"mk{next(counter)}x" for _ in range(3)]
            shared.append_many(conv, [{"role": "user", "content": f"Remember {m}: the {conv} code word."}
                                      for m in marks], namespace=ns)
            live.setdefault((ns, conv), set()).update(marks)
        elif op == "consolidate" and exists:
            shared.consolidate(conv, namespace=ns)
        elif op == "prune":
            for key in [k for k in live if k[0] == ns]:
                dead |= live.pop(key)
            shared.prune(0, namespace=ns)
        elif op == "erase" and exists:
            dead |= live.pop((ns, conv))
            shared.delete_conversation(conv, namespace=ns)
        elif op == "erase":
            with pytest.raises(tiermem.ConversationNotFound):
                shared.delete_conversation(conv, namespace=ns)
        elif op == "context" and exists:
            ctx = shared.context(conv, "what was the code word?", 800, namespace=ns)
            check(ns, json.dumps(ctx.messages) + ctx.plan.explain())
        elif op == "search":
            check(ns, " ".join(h.text for h in shared.search(None, "code word", 30, namespace=ns)))
        # every live conversation's history is exactly its own incarnation's markers
        for (lns, lconv), marks in live.items():
            got = set(MARKER.findall(" ".join(m.text for m in shared.history(lconv, namespace=lns))))
            assert got == marks
            view = shared.warm.latest(shared.cold.key_of(lns, lconv) or "", "rolling")
            if view is not None:
                assert set(MARKER.findall(view.text())) <= marks
