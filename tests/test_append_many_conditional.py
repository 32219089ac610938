"""`Memory.append_many(expect_position=, expect_incarnation=)` (and `append`'s, and a
namespaced view's): a conditional batch, as `append_outcome`'s, on both engines: the
whole batch is written only where the conversation goes on at the position expected
(and is still the incarnation named), else `PositionMismatch` naming both positions and
nothing of the batch is written. Two processes appending a batch conditionally at one
position at the same moment: one batch lands, the other process gets `PositionMismatch`,
nothing is written twice.

Fails on the code before: `append_many` and `append` took no `expect_position`
(TypeError: a caller appending a batch could not make it conditional)."""

from __future__ import annotations

import multiprocessing
import queue
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from pg_server import fresh_schema

from tiermem.config import Config
from tiermem.errors import PositionMismatch, ValidationError
from tiermem.memory import Memory

NS = "acme"
BATCH_MESSAGES = 20  # a batch long enough that the racing writers' transactions overlap
START_TIMEOUT_S = 120.0  # each racing process opened its Memory (imports, migrations) by then
RESULT_TIMEOUT_S = 120.0


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """Both engines: the check is each store's own, in its write transaction."""
    extra: dict[str, str] = {}
    if request.param == "postgres":
        extra = {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return Config(data_dir=tmp_path / "data", **extra)  # type: ignore[arg-type]


@pytest.fixture
def mem(config: Config) -> Memory:
    m = Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False)
    yield m  # type: ignore[misc]
    m.close()


def say(label: str, n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{label} {i}"} for i in range(n)]


def contents(mem: Memory, conv: str = "c") -> list[str]:
    return [m.body["content"] for m in mem.history(conv, namespace=NS)] if conv in mem.conversations(NS) else []


def test_a_batch_is_written_where_expected_and_chains_by_incarnation(mem: Memory) -> None:
    assert mem.append_many("c", say("a", 2), namespace=NS, expect_position=0) == [0, 1]
    key = mem.append_outcome("c", say("b", 1), namespace=NS, expect_position=2).incarnation
    assert mem.append_many("c", say("c", 3), namespace=NS, expect_position=3, expect_incarnation=key) == [3, 4, 5]
    assert mem.append("c", {"role": "user", "content": "d"}, namespace=NS, expect_position=6,
                      expect_incarnation=key) == 6
    view = mem.namespaced(NS)
    assert view.append_many("c", say("e", 2), expect_position=7, expect_incarnation=key) == [7, 8]
    assert view.append("c", {"role": "user", "content": "f"}, expect_position=9) == 9
    assert contents(mem) == ["a 0", "a 1", "b 0", "c 0", "c 1", "c 2", "d", "e 0", "e 1", "f"]


# (id, messages stored first, the position expected, the position found)
MISMATCHES: list[tuple[str, int, int, int]] = [
    ("behind", 3, 2, 3),  # another writer appended since
    ("ahead", 3, 5, 3),  # the caller counted messages that are not there
    ("missing_conversation", 0, 4, 0),  # nothing stored: not created by the refused batch
    ("exists_but_new_expected", 2, 0, 2),
]


@pytest.mark.parametrize(("stored", "expected", "found"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
@pytest.mark.parametrize("via", ["memory", "view"])
def test_a_mismatch_writes_none_of_the_batch(mem: Memory, stored: int, expected: int, found: int, via: str) -> None:
    if stored:
        mem.append_many("c", say("old", stored), namespace=NS)
    with pytest.raises(PositionMismatch, match=rf"'c' was expected to go on at position {expected} but goes on at "
                       rf"position {found}; nothing was written") as err:
        if via == "memory":
            mem.append_many("c", say("new", 5), namespace=NS, expect_position=expected)
        else:
            mem.namespaced(NS).append_many("c", say("new", 5), expect_position=expected)
    assert (err.value.field, err.value.expected, err.value.found) == ("expect_position", expected, found)
    assert contents(mem) == [f"old {i}" for i in range(stored)]


def test_a_gone_incarnation_refuses_the_batch(mem: Memory) -> None:
    seen = mem.append_outcome("c", say("a", 2), namespace=NS).incarnation
    mem.delete_conversation("c", namespace=NS)
    mem.append_many("c", say("b", 2), namespace=NS)  # written again by another writer, as long
    with pytest.raises(PositionMismatch, match=rf"expected to be incarnation '{seen}', going on at position 2, but "
                       r"its incarnation is '[0-9a-f]{32}'; nothing was written"):
        mem.append_many("c", say("new", 3), namespace=NS, expect_position=2, expect_incarnation=seen)
    assert contents(mem) == ["b 0", "b 1"]


# (id, keywords, the field named): bad values, refused before anything is read or written
BAD: list[tuple[str, dict[str, object], str]] = [
    ("negative", {"expect_position": -1}, "expect_position"),
    ("a bool", {"expect_position": True}, "expect_position"),
    ("a string", {"expect_position": "3"}, "expect_position"),
    ("incarnation alone", {"expect_incarnation": "c"}, "expect_incarnation"),
    ("incarnation not a string", {"expect_position": 0, "expect_incarnation": 3}, "expect_incarnation"),
]


@pytest.mark.parametrize(("kwargs", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
@pytest.mark.parametrize("call", ["append_many", "append"])
def test_bad_expectations_are_refused_naming_the_field(mem: Memory, kwargs: dict[str, object], field: str,
                                                       call: str) -> None:
    with pytest.raises(ValidationError) as err:
        if call == "append_many":
            mem.append_many("c", say("a", 2), namespace=NS, **kwargs)  # type: ignore[arg-type]
        else:
            mem.append("c", say("a", 1)[0], namespace=NS, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
    assert "c" not in mem.conversations(NS)


def _conditional_appender(config: Config, label: str, at: int, incarnation: str | None, ready: Any, go: Any,
                          results: Any) -> None:
    """A racing process: its own Memory, one conditional batch once `go` is set."""
    try:  # several processes open a fresh schema at once: its migrations wait on each other
        mem = Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False)
    except Exception as exc:  # the failure itself is the answer the test reports
        ready.put(repr(exc))
        return
    with mem:
        ready.put(True)
        go.wait()
        try:
            positions = mem.append_many("shared", say(label, BATCH_MESSAGES), namespace=NS, expect_position=at,
                                        expect_incarnation=incarnation)
        except PositionMismatch as exc:
            results.put((label, "mismatch", exc.expected, exc.found))
        except Exception as exc:  # the failure itself is the answer the test reports
            results.put((label, repr(exc)))
        else:
            results.put((label, "written", positions))


def _race(config: Config, at: int, incarnation: str | None) -> list[Any]:
    ctx = multiprocessing.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_conditional_appender, args=(config, label, at, incarnation, ready, go, results))
             for label in ("x", "y")]
    for p in procs:
        p.start()
    try:
        opened = [ready.get(timeout=START_TIMEOUT_S) for _ in procs]
        go.set()
        assert opened == [True, True], opened
        return sorted((results.get(timeout=RESULT_TIMEOUT_S) for _ in procs), key=lambda r: r[1])
    except queue.Empty:
        pytest.fail("a racing process did not answer")
    finally:
        for p in procs:
            p.join(timeout=RESULT_TIMEOUT_S)
            if p.is_alive():
                p.kill()


@pytest.mark.parametrize("existing", [False, True], ids=["new_conversation", "existing_conversation"])
def test_two_processes_one_batch_lands(config: Config, existing: bool) -> None:
    before, incarnation = 0, None
    if existing:
        with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
            out = mem.append_outcome("shared", say("first", 3), namespace=NS)
            before, incarnation = len(out.positions), out.incarnation
    [loser, winner] = _race(config, before, incarnation)  # "mismatch" sorts before "written"
    assert winner[1:] == ("written", list(range(before, before + BATCH_MESSAGES))), winner
    assert loser[1:] == ("mismatch", before, before + BATCH_MESSAGES), loser
    with Memory(config, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        assert contents(mem, "shared") == [f"first {i}" for i in range(before)] + \
            [f"{winner[0]} {i}" for i in range(BATCH_MESSAGES)]
