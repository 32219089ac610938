"""`bench_cold.run` and `bench_context.run`, the library entries of the two benchmarks that
run the model over a LoCoMo-derived corpus, refuse a turn count below 1 as their command
line's --turns does (`bench.bounded`) and as `bench_scale.resolve_counts` does: a
ValidationError naming the parameter and the limit, before anything is read or built.
They read 0 as "the default" (`search_turns or ...`, `turns or ...`: `run(turns=0)` built
the 10k-turn conversation), and a negative count went on to the build.

Each row passes a LoCoMo file the corpus reader refuses (`[{`): on the code before, a count
it took is followed by that refusal at once (a LocomoError, not the ValidationError
expected) rather than by a build of minutes. Every row fails on the code before (a git
archive copy of HEAD)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tiermem.errors import ValidationError
from tiermem.evals import bench_cold, bench_context

pytestmark = pytest.mark.usefixtures("clean_env")

RUNS: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
    "bench_cold": (bench_cold.run, "search_turns"),
    "bench_context": (bench_context.run, "turns"),
}

# (the benchmark, quick, the count given, the words of the limit)
CASES: list[tuple[str, bool, int, str]] = [
    # 0 read as the default: the 10k-turn conversation
    ("bench_cold", False, 0, "at least 1, got 0"),
    # ... with --quick: its 300 turns
    ("bench_cold", True, 0, "at least 1, got 0"),
    # a negative went on to the build
    ("bench_cold", True, -5, "at least 1, got -5"),
    ("bench_context", False, 0, "at least 1, got 0"),
    ("bench_context", True, 0, "at least 1, got 0"),
    ("bench_context", True, -1, "at least 1, got -1"),
]


@pytest.mark.parametrize(("bench", "quick", "turns", "words"), CASES,
                         ids=[f"{c[0]}-{c[2]}{'-quick' if c[1] else ''}" for c in CASES])
def test_run_refuses_turns_below_one(tmp_path: Path, bench: str, quick: bool, turns: int, words: str) -> None:
    run, field = RUNS[bench]
    data = tmp_path / "bad.json"
    data.write_text("[{", encoding="utf-8")  # the code before stops here, after taking the count
    with pytest.raises(ValidationError) as exc:
        run(quick, data=data, torch_threads=None, **{field: turns})
    assert exc.value.field == field
    assert words in str(exc.value), str(exc.value)


def test_none_is_still_the_default() -> None:
    # the reading both runs share: None is the default, --quick's where quick; a count given is kept
    assert bench_cold.resolve_turns("turns", None, True) == bench_cold.QUICK_TURNS
    assert bench_cold.resolve_turns("turns", None, False) == bench_cold.FULL_TURNS
    assert bench_cold.resolve_turns("turns", 1, False) == 1
