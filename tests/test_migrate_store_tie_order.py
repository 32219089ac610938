"""`migrate-store` keeps the order of exact search ties. Both engines break a tie (equal
vectors: an equal text written again, a fork's copies of its parent's rows; equal keyword
scores) by the message's internal id, and the copy writes one conversation at a time, in
key order. On the code before, the target numbered the copied rows itself in that order,
so two tied rows of different conversations came in the other order when the later
conversation's key sorted first: a namespace search on the migrated store gave the ranks
(and so the fused scores, and which rows make the k best) to other rows than the source
did. tests/test_engines_differential.py's migrated-store property found it
(`--hypothesis-seed=255221620872418863551643101133550103616`): a retracted row tied with
visible ones took another rank after the copy, so theirs moved. The copy now keeps each
message's source id (plus the offset past a non-empty target's own ids) and moves the
target's numbering past them (tiers/migrate_store.py's docstring).

Real SQLite files, a real PostgreSQL (tests/pg_server.py), the stores built and read
through `Memory`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.tokens import BpeTokenCounter

NS = "acme"
TIED = "peanut garden"  # written in several conversations: equal vectors, equal keyword scores
OTHER = "ticket river"
NO_MATCH_QUERY = "zqxv"  # no stored word: the order is the vectors' alone
K = 20  # a search's k: every row of the namespace

Step = tuple[Any, ...]

CASES: list[tuple[str, list[Step]]] = [
    # the later conversation's key sorts first: the copy wrote it first
    ("later-key-first", [("append", "b", TIED), ("append", "a", TIED)]),
    # the conversations' rows interleave: no order of whole conversations keeps them
    ("interleaved", [("append", "b", TIED), ("append", "a", OTHER), ("append", "a", TIED), ("append", "b", TIED)]),
    # a fork's copies of its parent's rows, under a name that sorts before the parent's
    ("fork", [("append", "z", TIED), ("append", "z", OTHER), ("fork", "z", 1, "m")]),
    # the property's example: a hidden (retracted) row tied with visible ones still takes
    # its rank, so which rank each visible row gets depends on where the hidden one fell
    ("retracted-tie", [("append", "b", TIED), ("retract", "b", 0), ("append", "a", TIED), ("append", "a", TIED)]),
]


def _config(where: Path, pg: str | None, schema: str) -> Config:
    if pg is None:
        return Config(data_dir=where)
    return Config(data_dir=where, cold_url=pg, cold_schema=schema)


@contextmanager
def _memory(config: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def _build(mem: Memory, steps: list[Step]) -> None:
    for step in steps:
        if step[0] == "append":
            mem.append(step[1], {"role": "user", "content": step[2]}, namespace=NS)
        elif step[0] == "retract":
            mem.append(step[1], {"type": RETRACT_TYPE, "position": step[2]}, namespace=NS)
        else:
            mem.fork(step[1], step[2], new_id=step[3], namespace=NS)
    mem.catch_up()


def _hits(mem: Memory, query: str) -> list[tuple[Any, ...]]:
    # the scores too where only vectors rank: equal on both engines; a keyword score is
    # the engine's own (tests/test_engines_differential.py), its rank is not
    return [(h.conversation_id, h.position, h.text, h.ranks) + ((round(h.score, 9),) if query == NO_MATCH_QUERY
                                                                 else ()) for h in mem.search(None, query, K, namespace=NS)]


def _reads(mem: Memory) -> dict[str, list[tuple[Any, ...]]]:
    return {q: _hits(mem, q) for q in (NO_MATCH_QUERY, "peanut")}


@pytest.mark.parametrize("to_postgres", [
    True,  # SQLite -> PostgreSQL
    False,  # PostgreSQL -> SQLite
], ids=["to-postgres", "to-sqlite"])
@pytest.mark.parametrize("steps", [s for _n, s in CASES], ids=[n for n, _s in CASES])
def test_ties_come_in_the_source_order_after_the_copy(tmp_path: Path, embedder: FastEmbedder, pg_url: str,
                                                     counter: BpeTokenCounter, steps: list[Step],
                                                     to_postgres: bool) -> None:
    src_schema, dst_schema = fresh_schema(), fresh_schema()
    src_cfg = _config(tmp_path / "src", None if to_postgres else pg_url, src_schema)
    dst_cfg = _config(tmp_path / "dst", pg_url if to_postgres else None, dst_schema)
    with _memory(src_cfg, embedder) as mem:
        _build(mem, steps)
        before = _reads(mem)
    migrate_store(tmp_path / "src" if to_postgres else pg_url, pg_url if to_postgres else tmp_path / "dst",
                  tokens=counter, source_schema=src_schema, target_schema=dst_schema)
    with _memory(dst_cfg, embedder) as mem:
        assert _reads(mem) == before
        # an append after the copy is the newest row: its tie comes last, as on the source
        mem.append("0-new", {"role": "user", "content": TIED}, namespace=NS)
        mem.catch_up()
        after = _hits(mem, NO_MATCH_QUERY)
    assert [h[:3] for h in after if h[2] == TIED][-1] == ("0-new", 0, TIED)


def test_copied_rows_come_after_the_targets_own(tmp_path: Path, embedder: FastEmbedder, pg_url: str,
                                                counter: BpeTokenCounter) -> None:
    """Into a non-empty target (--into-non-empty): its own rows are older than the copied
    ones, which keep the source's order among themselves."""
    schema = fresh_schema()
    with _memory(_config(tmp_path / "src", None, schema), embedder) as mem:
        _build(mem, [("append", "b", TIED), ("append", "a", TIED)])
        before = [h[:2] for h in _hits(mem, NO_MATCH_QUERY)]
    with _memory(_config(tmp_path / "dst", pg_url, schema), embedder) as mem:
        _build(mem, [("append", "own", TIED)])
    migrate_store(tmp_path / "src", pg_url, tokens=counter, target_schema=schema, into_non_empty=True)
    with _memory(_config(tmp_path / "dst", pg_url, schema), embedder) as mem:
        after = [h[:2] for h in _hits(mem, NO_MATCH_QUERY)]
    assert after == [("own", 0), *before]
