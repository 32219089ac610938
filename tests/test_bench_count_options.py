"""The benchmarks' counts and durations are checked while their arguments are parsed
(`bench.bounded`, the one type of every single numeric option, beside `int_list` for the
lists): a value that is not a number, or one below the option's least (0 or a negative
count, a duration of no time, nan), is a usage error naming the option and the limit
(exit 2), before anything is built. They were bare `int`/`float` types: `--rounds 0`,
`--calls 0`, `--seconds 0`, bench_service_load's `--turns 0` and the like failed inside
the run (an empty percentile, a median of nothing) or ran nonsense (a run of no time, a
0 read as "the default").

A row whose bad value the code before accepted, and whose benchmark would then be built
for minutes, is followed by `then`: a later option that code refuses while parsing, so
that on it the row fails at once (the error names that later option, not the one under
test) rather than starting the run. Every refused row fails on the code before (the
value accepted, or refused by a check after parsing that names no limit), and so does
every `bounded` row (new)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tiermem.evals import (
    bench_ab,
    bench_cold,
    bench_embed_bulk,
    bench_exit,
    bench_hot,
    bench_idempotency,
    bench_ingest,
    bench_langchain_sync,
    bench_pending_seek,
    bench_postgres,
    bench_scale,
    bench_service_load,
    bench_startup,
    bench_supersede,
    bench_sweep,
    bench_turncache_load,
)

pytestmark = pytest.mark.usefixtures("clean_env")

MAINS: dict[str, Callable[[list[str]], Any]] = {
    "bench_ab": bench_ab.main, "bench_cold": bench_cold.main, "bench_embed_bulk": bench_embed_bulk.main,
    "bench_exit": bench_exit.main, "bench_hot": bench_hot.main, "bench_idempotency": bench_idempotency.main,
    "bench_ingest": bench_ingest.main, "bench_langchain_sync": bench_langchain_sync.main,
    "huge_store": bench_pending_seek.main, "bench_postgres": bench_postgres.main, "bench_scale": bench_scale.main,
    "bench_service_load": bench_service_load.main, "bench_startup": bench_startup.main,
    "bench_supersede": bench_supersede.main, "bench_sweep": bench_sweep.main,
    "bench_turncache_load": bench_turncache_load.main,
}

# characters of a refusal besides its limits: its words and the value's echo (tiers.errors.shown)
MAX_MESSAGE_PAST_LIMITS = 150
MISSING_DIR_JSON = "{tmp}/missing/out.json"  # output_file refuses it while parsing (its directory)

# (benchmark, option, value, the limit the error states, then: later arguments, see the docstring)
REFUSED: list[tuple[str, str, str, str, list[str]]] = [
    ("bench_ab", "--rounds", "0", "of at least 1 (rounds)", ["--quick"]),  # no round: nothing measured
    ("bench_cold", "--turns", "0", "of at least 1 (turns)", ["--torch-threads", "x"]),
    ("bench_cold", "--torch-threads", "-1", "of at least 0 (threads", ["--turns", "x"]),  # 0 is torch's default
    ("bench_embed_bulk", "--sample", "-1", "of at least 0 (texts", ["--json", MISSING_DIR_JSON]),  # 0: all
    ("bench_embed_bulk", "--rounds", "0", "of at least 1 (rounds)", []),  # refused after parsing, no limit named
    ("bench_exit", "--chat", "0", "of at least 1 (turns)", ["--reps", "x"]),
    ("bench_exit", "--long", "-5", "of at least 1 (texts)", ["--reps", "x"]),
    ("bench_exit", "--reps", "0", "of at least 1 (runs)", []),  # the median of no run: StatisticsError
    ("bench_exit", "--settle", "-1", "of at least 0 (seconds)", ["--reps", "x"]),
    ("bench_exit", "--settle", "nan", "of at least 0 (seconds)", ["--reps", "x"]),  # float() takes 'nan'
    ("bench_hot", "--n", "0", "of at least 1 (samples)", []),  # the percentile of no sample
    ("bench_idempotency", "--calls", "0", "of at least 1 (calls)", []),
    ("bench_ingest", "--rounds", "0", "of at least 1 (rounds)", []),  # refused after parsing, no limit named
    ("bench_ingest", "--batch", "10001", "from 1 to 10,000 (messages)", ["--json", MISSING_DIR_JSON]),
    ("bench_ingest", "--baseline-pool", "0", "of at least 1 (batches)", ["--json", MISSING_DIR_JSON]),  # read as the default
    ("bench_langchain_sync", "--rounds", "-2", "of at least 1 (syncs)", []),  # its own type named no unit
    ("bench_postgres", "--turns", "0", "of at least 1 (turns)", ["--queries", "x"]),
    ("bench_postgres", "--appends", "0", "of at least 1 (appends)", ["--turns", "x"]),
    ("bench_postgres", "--queries", "0", "of at least 1 (queries)", ["--turns", "x"]),
    ("bench_postgres", "--writer-appends", "-1", "of at least 1 (appends per writer)", ["--turns", "x"]),
    ("bench_postgres", "--bulk", "0", "of at least 1 (turns)", ["--turns", "x"]),
    ("bench_scale", "--turns", "-5", "of at least 1 (turns)", ["--queries", "x"]),
    ("bench_scale", "--conversations", "0", "of at least 1 (conversations)", ["--turns", "x"]),  # read as 1000
    ("bench_scale", "--namespace-size", "0", "of at least 1 (conversations)", ["--turns", "x"]),  # read as 1
    ("bench_scale", "--queries", "0", "of at least 1 (queries)", ["--turns", "x"]),  # read as the default
    ("bench_scale", "--appends", "-3", "of at least 1 (appends)", ["--turns", "x"]),
    ("bench_service_load", "--seconds", "0", "of at least 1 (seconds)", ["--processes", ","]),  # a run of no time
    ("bench_service_load", "--seconds", "-10", "of at least 1 (seconds)", ["--processes", ","]),
    ("bench_service_load", "--seconds", "inf", "of at least 1 (seconds)", ["--processes", ","]),  # never ends
    ("bench_service_load", "--turns", "0", "of at least 1 (turns per customer)", ["--processes", ","]),
    ("bench_startup", "--runs", "0", "of at least 1 (runs)", []),  # refused after parsing, no limit named
    ("bench_startup", "--turns", "0", "of at least 1 (turns)", ["--runs", "x"]),
    ("bench_supersede", "--messages", "0", "of at least 1 (messages)", ["--reps", "x"]),
    ("bench_supersede", "--reps", "0", "of at least 1 (runs)", ["--messages", "x"]),
    ("bench_sweep", "--rounds", "0", "of at least 1 (rounds)", ["--conversations", "0"]),
    ("bench_turncache_load", "--rounds", "-1", "of at least 1 (rounds)", ["--turns", "0"]),
    ("huge_store", "--calls", "0", "of at least 1 (calls)", ["--turns", "0"]),  # bench_pending_seek's
    ("huge_store", "--calls", "2k", "of at least 1 (calls)", []),  # int() refused it, naming no limit
]


@pytest.mark.parametrize(("bench", "option", "value", "limit", "then"), REFUSED)
def test_a_bad_count_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], bench: str, option: str,
                                      value: str, limit: str, then: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        MAINS[bench]([option, value, *[a.format(tmp=tmp_path) for a in then]])
    assert exc.value.code == 2  # a usage error, not a traceback or a run
    err = capsys.readouterr().err
    assert f"argument {option}:" in err and limit in err and repr(value) in err, err
    assert "Traceback" not in err


# (minimum, maximum, text, what it reads as)
@pytest.mark.parametrize(("minimum", "maximum", "text", "want"), [
    (1, None, "30", 30),
    (1, None, "1", 1),  # the least
    (0, None, "0", 0),  # a least of 0 (0: all, or torch's default)
    (1, 10_000, "10000", 10_000),  # the most, when there is one
    (1.0, None, "2.5", 2.5),  # a duration takes a decimal
    (0.0, None, "0", 0.0),
])
def test_bounded_reads_a_good_value(minimum: float, maximum: float | None, text: str, want: float) -> None:
    # imported here: new with the check, so the rest of the file runs on the code before
    from tiermem.evals.bench import bounded

    got = bounded(minimum, maximum=maximum, unit="things")(text)
    assert got == want and type(got) is type(want)


# (minimum, maximum, text, the words of the refusal)
@pytest.mark.parametrize(("minimum", "maximum", "text", "words"), [
    (1, None, "2.5", "an integer of at least 1 (things)"),  # a count is whole
    (1, 10_000, "10001", "an integer from 1 to 10,000 (things)"),  # past the most
    (1, None, "9" * 5000, "an integer of at least 1 (things)"),  # past Python's 4,300 digits: int()'s ValueError
    (1.0, None, "0.5", "a number of at least 1 (things)"),
    (0.0, None, "-inf", "a number of at least 0 (things)"),
    (0.0, None, "nan", "a number of at least 0 (things)"),  # nan compares false with any limit
])
def test_bounded_refuses_outside_its_limits(minimum: float, maximum: float | None, text: str, words: str) -> None:
    from tiermem.evals.bench import bounded

    with pytest.raises(argparse.ArgumentTypeError) as exc:
        bounded(minimum, maximum=maximum, unit="things")(text)
    assert str(exc.value).startswith(f"must be {words}, got ")
    assert len(str(exc.value)) <= len(words) + MAX_MESSAGE_PAST_LIMITS  # the value's echo is bounded
