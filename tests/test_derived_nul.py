"""Derived and diagnostic text holds a space where its source has a NUL, on both engines
(tiers.dialect.without_nul): PostgreSQL text cannot hold NUL, and it dropped it from a
turn's speaker and a view's refresh error, while SQLite kept both, so the engines read
"ab" and "a\\x00b". Found by tests/test_engines_differential.py; the warm fold's own
case is tests/test_warm_fold_nul.py."""

from __future__ import annotations

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

SPEAKER = "an\x00a"
ERROR = "summarizer failed on a\x00b"


def _open(config: Config, embedder: Embedder) -> Memory:
    return Memory(config, embedder=embedder, hot=False, background_indexing=False)


def _key(mem: Memory) -> str:
    key = mem.cold.key_of("default", "c")
    assert key is not None
    return key


def test_a_speakers_name_reads_the_same_on_both_engines(engine_config: Config, embedder: Embedder) -> None:
    with _open(engine_config, embedder) as mem:
        mem.append("c", {"role": "user", "name": SPEAKER, "content": "the gate code is green"})
        facts = mem.cold.turn_facts(_key(mem))
        assert [f[6] for f in facts] == ["an a"]
        assert mem.history("c")[0].body["name"] == SPEAKER  # the message itself keeps its NUL


def test_a_refresh_error_reads_the_same_on_both_engines(engine_config: Config, embedder: Embedder) -> None:
    with _open(engine_config, embedder) as mem:
        mem.append("c", {"role": "user", "content": "the gate code is green"})
        key = _key(mem)
        mem.warm.record_error(key, "rolling", "", ERROR)
        assert [e for e, _at in mem.warm.errors(key, "rolling")] == ["summarizer failed on a b"]
