"""A remembered token count stays one scope lookup and one dict lookup.

b2c32da keyed the counter's memo by the memo scope and sent every remembered count
through `ScopedMemo.get` (which calls `table()`, tests for MISS and bumps a counter):
10k remembered counts took 2.9 ms against 1.2 ms before it (the planner counts thousands
of lines per `context()`). Timing is too noisy on a shared machine to assert, so the
Python calls a remembered count makes are counted instead: `table()` alone. The
figures (1.7 ms now) are in the commit.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

from tiermem.tiers.memo import remembered_for
from tiermem.tiers.tokens import LONG_MEMO_MAX_CHARS, MEMO_MAX_CHARS, BpeTokenCounter

SCOPE = "db\0c\0conv"


def _python_calls(fn: Any, arg: str) -> list[str]:
    """The Python functions `fn(arg)` calls (C functions, `dict.get` among them, not listed)."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn(arg)
    finally:
        sys.setprofile(None)
    return called[1:]  # the first is fn itself


@pytest.mark.parametrize("scope", [
    SCOPE,  # a conversation's call (the planner's, the insert's)
    None,  # no conversation: an eval, a warm-up
])
def test_a_remembered_count_makes_one_lookup_call(scope: str | None) -> None:
    counter = BpeTokenCounter()
    text = "we talked about the trip to Lisbon"
    with remembered_for(scope):
        n = counter.count(text)
        assert _python_calls(counter.count, text) == ["table"]
        assert counter.count(text) == n and counter.memo_hits == 2  # still counted, for stats and tests


def test_a_long_text_is_remembered_apart() -> None:
    # not in the memo of short texts (bounded by its entries, 100k): in the few long ones'
    counter = BpeTokenCounter()
    text = "word " * (MEMO_MAX_CHARS // 5 + 1)
    with remembered_for(SCOPE):
        assert counter.count(text) == counter.count(text) == len(counter.encode(text))
    assert len(counter._memo) == 0 and len(counter._long_memo) == 1 and counter.memo_hits == 1


def test_a_text_past_the_long_memo_is_counted_without_it() -> None:
    counter = BpeTokenCounter()
    text = "word " * (LONG_MEMO_MAX_CHARS // 5 + 1)
    with remembered_for(SCOPE):
        assert counter.count(text) == counter.count(text) == len(counter.encode(text))
    assert len(counter._memo) == len(counter._long_memo) == 0 and counter.memo_hits == 0
