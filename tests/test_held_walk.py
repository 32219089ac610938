"""The erasure tests' walk (tests/erasure_child.py `held`) sees erased text wherever the
process holds it.

The erasure tests assert `held(canary) == []` in a process that dropped an erased
conversation's copies. The walk followed `gc.get_referents` from the collector's tracked
objects only, and CPython shows the collector the values of a dict whose keys are all
str, never its keys (a str makes no cycle): a memo keyed by caller text passed the walk
whatever it held. Each row plants the text where a process can hold it, out of every
other path (a thread's own local, an untracked container, an array), and the walk must
find it, then find nothing once the plant is dropped (so it reports no copy of its own).

Every plant and walk runs in one child process (this file run as a script), once per
module: a walk costs time in proportion to the heap it searches, and a test worker holds
the whole suite's (the model, every imported module), ~6-8 s a walk on a loaded runner
against well under a second in a bare child. The walk's code and the plants are the
same; each case asserts on its own row of the child's report.
"""

from __future__ import annotations

import array
import functools
import gc
import io
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable

import numpy as np
import pytest
from erasure_child import held

from tiermem.tiers import memo

# a plant: given the text to hold, holds it, and answers what drops it again
Plant = Callable[[str], Callable[[], None]]
JOIN_S = 10.0  # a planting thread ends at once when let go
# the child's plants and walks, all of them: seconds in a bare process, loaded runner
CHILD_S = 180.0
# the report row of the walk after every plant was dropped
ALL_DROPPED = "all-dropped"


def _kept(obj: object) -> Callable[[], None]:
    """Keep `obj` (and what it holds) until the answer is called."""
    box = [obj]
    return box.clear


def _in_thread(hold: Callable[[str], object]) -> Plant:
    """A thread that holds what `hold` makes of the text (a local of its frame) until let
    go: a running frame's locals are no object the collector tracks."""
    def plant(text: str) -> Callable[[], None]:
        ready, done = threading.Event(), threading.Event()

        def run(made: list[str]) -> None:
            held_here = hold(made.pop())  # the only reference: this frame's local
            ready.set()
            done.wait()
            del held_here

        thread = threading.Thread(target=run, args=([text],), daemon=True)
        thread.start()
        assert ready.wait(JOIN_S)

        def drop() -> None:
            done.set()
            thread.join(JOIN_S)
        return drop
    return plant


def _untracked_tuple(text: str) -> tuple[str, int]:
    made = (text, 1)
    gc.collect()  # a tuple of atoms is untracked by the collector's next pass
    assert not gc.is_tracked(made)
    return made


def _dict_key(text: str) -> Callable[[], None]:
    return _kept({text: 1})


def _memo_key(text: str) -> Callable[[], None]:
    # a memo of caller text (tiers.memo) keeps it as a key of a scope's table
    remembered: memo.ScopedMemo[str, int] = memo.ScopedMemo(8)
    with memo.remembered_for(None):
        remembered.put(text, len(text))
    return _kept(remembered)


def _unbounded_cache(text: str) -> Callable[[], None]:
    @functools.cache
    def length(s: str) -> int:
        return len(s)
    length(text)
    return _kept(length)


def _bounded_cache(text: str) -> Callable[[], None]:
    @functools.lru_cache(maxsize=8)
    def length(s: str) -> int:
        return len(s)
    length(text)
    return _kept(length)


def _thread_local(use_as_name: bool) -> Plant:
    def plant(text: str) -> Callable[[], None]:
        local = threading.local()
        ready, done = threading.Event(), threading.Event()

        def run(made: list[str]) -> None:
            setattr(local, made.pop(), 1) if use_as_name else setattr(local, "value", made.pop())
            ready.set()
            done.wait()

        thread = threading.Thread(target=run, args=([text],), daemon=True)
        thread.start()
        assert ready.wait(JOIN_S)
        keep = _kept(local)

        def drop() -> None:
            done.set()
            thread.join(JOIN_S)
            keep()
        return drop
    return plant


def _attribute_name(text: str) -> Callable[[], None]:
    class Box:
        pass
    box = Box()
    setattr(box, text, 1)
    return _kept(box)


def _slots_value(text: str) -> Callable[[], None]:
    class Slotted:
        __slots__ = ("value",)
    slotted = Slotted()
    slotted.value = text
    return _kept(slotted)


def _object_array(text: str) -> Callable[[], None]:
    made = np.empty(1, dtype=object)
    made[0] = text
    return _kept(made)


def _stream(text: str) -> Callable[[], None]:
    written = io.BytesIO()
    written.write(text.encode())  # into a buffer of its own, not the caller's bytes
    return _kept(written)


def _bytes_view(text: str) -> Callable[[], None]:
    return _kept(memoryview(array.array("b", text.encode())))


CASES: list[tuple[str, Plant]] = [
    # a str only as a key of a dict whose keys are all str: missed before
    ("dict-key", _dict_key),
    # the same in the product's own memo of caller text (a scope's table): missed before
    ("memo-key", _memo_key),
    # functools.cache of one str argument files it as a str key: missed before
    ("functools-cache", _unbounded_cache),
    # a bounded lru_cache's links are its referents: seen before too
    ("lru-cache", _bounded_cache),
    # a str in a running thread's frame, and in an untracked tuple there: missed before
    ("thread-frame-str", _in_thread(lambda text: text)),
    ("thread-frame-untracked-tuple", _in_thread(_untracked_tuple)),
    # a thread-local's attribute named by the text: missed before; its value: seen before
    ("thread-local-name", _thread_local(use_as_name=True)),
    ("thread-local-value", _thread_local(use_as_name=False)),
    # an attribute name (an instance's keys live in its type's shared keys): missed before
    ("attribute-name", _attribute_name),
    # a __slots__ value is a referent of its object: seen before too
    ("slots-value", _slots_value),
    # a str in an untracked tuple, in a frozenset (always tracked) and in a set, each in
    # a list: seen before too
    ("untracked-tuple", lambda text: _kept([_untracked_tuple(text)])),
    ("frozenset", lambda text: _kept([frozenset({text})])),
    ("set", lambda text: _kept([{text}])),
    # a str in a numpy object array (not a type the collector traverses): missed before
    ("numpy-object-array", _object_array),
    # a numpy str array and byte array hold no Python str at all: missed before
    ("numpy-str-array", lambda text: _kept(np.array([text]))),
    ("numpy-byte-array", lambda text: _kept(np.frombuffer(text.encode(), dtype=np.uint8).copy())),
    # the bytes of an array.array, through a memoryview of it: missed before
    ("memoryview-of-array", _bytes_view),
    # a socket's read buffer (redis-py's parser reads into an io.BytesIO): missed before
    ("bytesio", _stream),
]


def _walk_each() -> dict[str, dict[str, list[str]]]:
    """In the child: each case's plant walked for (its hits), then every plant at once,
    walked for before and after they are all dropped. A plant that fails reports its
    error instead."""
    report: dict[str, dict[str, list[str]]] = {}
    for case, plant in CASES:
        canary = f"zq7held-{uuid.uuid4().hex}"
        try:
            drop = plant(f"the vault code is {canary}.")
            try:
                report[case] = {"held": held(canary)}
            finally:
                drop()
        except Exception as exc:  # reported as the case's failure, the rest still run
            report[case] = {"error": [repr(exc)]}
    canary = f"zq7held-{uuid.uuid4().hex}"
    drops = [plant(f"the vault code is {canary}.") for _, plant in CASES]
    planted = held(canary)
    for drop in drops:
        drop()
    report[ALL_DROPPED] = {"planted": planted, "held": held(canary)}
    return report


@pytest.fixture(scope="module")
def walked() -> dict[str, dict[str, list[str]]]:
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    report: dict[str, dict[str, list[str]]] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_the_walk_sees_the_text_wherever_it_is_held(walked: dict[str, dict[str, list[str]]], case: str) -> None:
    row = walked[case]
    assert "error" not in row, row
    assert row["held"] != [], case


def test_the_walk_finds_nothing_once_every_plant_is_dropped(walked: dict[str, dict[str, list[str]]]) -> None:
    """No copy of the walk's own (a frame's locals, an array's elements, an instance's
    dict it asked for) is reported: one walk over every case planted then dropped."""
    row = walked[ALL_DROPPED]
    assert row["planted"] != []
    assert row["held"] == []


if __name__ == "__main__":
    print(json.dumps(_walk_each()))
