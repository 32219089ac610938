"""Through `Memory`: what one namespace wrote never makes another's calls hit a cache.

Tenant B appending tenant A's recent message took a median 131 ms against 155 ms for a
fresh one (58 of 80 pairs faster, a tenancy hunt): the classifier, supersession, the
keyword stems and the token counter remembered texts process-wide. `Memory` now does
everything it does with a conversation's text within that conversation's memo scope
(`tiers.memo`), so B's calls score exactly the cache hits they score when A wrote
something else, while A's own calls on its own text still hit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.consolidation import classify, supersede
from tiermem.tiers import lexical
from tiermem.tiers.embed import Embedder

SECRET = "Actually, the Globex merger closes on the 14th of March, not the 9th: my PIN is 4111."
OTHER = "Honestly, a Zorbatech audit finishes around the 2nd of June, not the 5th: my code is 9073."


def _forget_all(mem: Memory) -> None:
    """What an erasure clears: each run starts from caches that remember nothing."""
    classify.clear_memo()
    supersede.clear_memo()
    lexical.forget_terms()
    mem.tokens.clear_memo()  # type: ignore[attr-defined]


def _hits(mem: Memory) -> int:
    """Every text cache's hits (their own counters) but the embedder's (tests/test_memo_scope.py)."""
    parses = (supersede._slots, supersede._content_items, supersede._inflected, supersede._holder,
              supersede._clauses)
    return (classify._cue_memo.hits + classify._label_memo.hits + lexical._terms.hits
            + mem.tokens.memo_hits + sum(c.cache_info().hits for c in parses))  # type: ignore[attr-defined]


@pytest.fixture
def run(tmp_path: Path, embedder: Embedder) -> Iterator[Callable[[str], tuple[int, int]]]:
    opened: list[Memory] = []

    def once(a_wrote: str) -> tuple[int, int]:
        """(hits of A's context on its own text, hits of B's calls on SECRET)."""
        mem = Memory(Config(data_dir=tmp_path / f"run{len(opened)}"), embedder=embedder, hot=False,
                     background_indexing=False)
        opened.append(mem)
        _forget_all(mem)
        mem.append("probe", {"role": "user", "content": "hello, I am new here"}, namespace="evil")
        mem.append("board", {"role": "user", "content": "Our board meets on Fridays."}, namespace="acme")
        mem.append("board", {"role": "user", "content": a_wrote}, namespace="acme")
        mem.catch_up()
        before = _hits(mem)
        mem.context("board", a_wrote, 500, namespace="acme")  # the agent asks with the message it appended
        own = _hits(mem) - before
        before = _hits(mem)
        mem.append_many("probe", [{"role": "user", "content": SECRET}], namespace="evil")
        mem.catch_up()
        mem.context("probe", SECRET, 500, namespace="evil")
        mem.search(None, SECRET, 3, namespace="evil")
        return own, _hits(mem) - before

    yield once
    for mem in opened:
        mem.close()


def test_another_namespaces_text_scores_no_hit(run: Callable[[str], tuple[int, int]]) -> None:
    own_secret, probe_after_secret = run(SECRET)  # A wrote the very text B then appends
    own_other, probe_after_other = run(OTHER)  # A wrote something else
    assert probe_after_secret == probe_after_other
    assert own_secret > 0 and own_other > 0  # the same conversation's repeat is still answered from memory
