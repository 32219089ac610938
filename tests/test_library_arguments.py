"""The library's own arguments are checked at the edge like a message: a position that
is not an integer in range, text that is not valid Unicode or not a string. On the code
before (an audit, 2026-12-03) each case below either wrote a garbage row (a pin at
position 1.5, a checkpoint at 1.5, a pin at True) or raised a non-tiermem exception
(TypeError, OverflowError, UnicodeEncodeError, AttributeError) from deep inside."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder

TABLES = ("messages", "pins", "checkpoints", "conversations")


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        m.append("c", {"role": "user", "content": "hello"})
        m.append("c", {"role": "assistant", "content": "hi"})
        m.append("c", {"role": "user", "content": "book Lisbon"})
        yield m


def _counts(mem: Memory) -> dict[str, int]:
    with mem.cold.reading() as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


CASES: list[tuple[str, Callable[[Memory], Any], str]] = [
    ("pin at 1.5 (stored a row)", lambda m: m.pin("c", 1.5), "position"),  # type: ignore[arg-type]
    ("pin at True (stored a row)", lambda m: m.pin("c", True), "position"),
    ("unpin at '0' (TypeError)", lambda m: m.unpin("c", "0"), "position"),  # type: ignore[arg-type]
    ("checkpoint at 1.5 (stored a row)", lambda m: m.checkpoint("c", "a summary", 1.5), "position"),  # type: ignore[arg-type]
    ("checkpoint summary with a lone surrogate", lambda m: m.checkpoint("c", "sum \ud800", 0), "summary"),
    ("history after 2**70 (OverflowError)", lambda m: m.history("c", after=2**70), "after"),
    ("fork up to 2**70 (refused before too, by the store)", lambda m: m.fork("c", 2**70), "up_to"),
    ("fork with an empty new id (named conversation_id)", lambda m: m.fork("c", 1, new_id=""), "new_id"),
    ("search with a lone surrogate", lambda m: m.search("c", "hi \ud800"), "query"),
    ("context query with a lone surrogate", lambda m: m.context("c", "hi \ud800", 500), "query"),
    ("context system with a lone surrogate", lambda m: m.context("c", "q", 500, system="s \ud800"), "system"),
    ("context system not a string (AttributeError)", lambda m: m.context("c", "q", 500, system=123), "system"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_argument_is_a_validation_error_naming_it_and_writes_nothing(
        mem: Memory, call: Callable[[Memory], Any], field: str) -> None:
    before = _counts(mem)
    with pytest.raises(ValidationError) as err:
        call(mem)
    assert err.value.field == field
    assert _counts(mem) == before


def test_good_arguments_still_work(mem: Memory) -> None:
    mem.pin("c", 0)
    mem.unpin("c", 0)
    assert mem.checkpoint("c", "greeted", 1).position == 1
    assert [m.position for m in mem.history("c", after=0, limit=1)] == [1]
    assert mem.context("c", "where to?", 500, system="You are a travel agent.").tokens <= 500


@pytest.mark.parametrize(("call", "field"), [
    (lambda m: m.append("ab\n", {"role": "user", "content": "x"}), "conversation_id"),  # a trailing newline
    (lambda m: m.append("ab", {"role": "user", "content": "x"}, namespace="acme\n"), "namespace"),
    (lambda m: m.history("c", namespace="default\n"), "namespace"),
], ids=["id", "namespace on append", "namespace on read"])
def test_an_id_or_namespace_ending_in_a_newline_is_refused(mem: Memory, call: Callable[[Memory], Any],
                                                           field: str) -> None:
    # the patterns end in $, which also matches before a final newline: "ab\n" was an id
    before = _counts(mem)
    with pytest.raises(ValidationError) as err:
        call(mem)
    assert err.value.field == field
    assert _counts(mem) == before
