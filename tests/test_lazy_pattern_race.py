"""A lazy pattern is compiled once, however many threads reach its first use together.

Supersession asks which pattern matched by identity (``m.re is X.compiled()``); two compiles
of one pattern on a miss of ``re``'s cache are two objects, so a thread whose method was bound
to the other compile would read its match as another pattern's.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from tiermem import lazyre

THREADS = 4
COMPILE_DELAY_S = 0.05  # long enough that every thread reaches the first use before one sets it


def test_threads_racing_the_first_use_share_one_compiled_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    real_compile = re.compile

    def slow_uncached_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
        # the first use as it is on a miss of re's cache: slow, and a fresh object each time
        time.sleep(COMPILE_DELAY_S)
        re.purge()
        return real_compile(pattern, flags)

    monkeypatch.setattr(lazyre.re, "compile", slow_uncached_compile)
    lazy = lazyre.LazyPattern(r"\bcall(?:ed)? off\b", re.I)
    start = threading.Barrier(THREADS)
    matches: list[re.Match[str] | None] = [None] * THREADS

    def use(i: int) -> None:
        start.wait()
        matches[i] = lazy.search("we called off the trip")

    workers = [threading.Thread(target=use, args=(i,)) for i in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    monkeypatch.undo()
    assert all(m is not None for m in matches)
    assert all(m.re is lazy.compiled() for m in matches if m is not None)
