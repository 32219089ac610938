"""The benchmarks' list options are checked while their arguments are parsed
(`bench.int_list`, the one type of every comma-separated integer option; recall_rounds'
--budgets builds on it): a value that is not a list of whole numbers, one of 0 or below,
or one with no number at all is a usage error naming the option and the limit (exit 2),
before anything is built. bench_sweep --conversations, bench_turncache_load --turns and
huge_store's --turns (the two-sided benchmarks' command line: bench_pending_seek,
bench_session_fresh, bench_pin_candidates) parsed with a bare int() after the arguments,
a traceback ('2k'); bench_service_load's --processes 0 stopped with ZeroDivisionError and
an empty --processes or --clients ran nothing and said so with exit 0.

Every refused row fails on the code before (a traceback, a run of the benchmark, an exit
0; bench_service_load's 'abc', which its old type refused already, named no limit), and
so does every int_list row (new); the --budgets reading passes before and after."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from tiermem.evals import bench_pending_seek, bench_service_load, bench_sweep, bench_turncache_load

MAINS: dict[str, Callable[[list[str]], int]] = {
    "bench_sweep": bench_sweep.main, "bench_turncache_load": bench_turncache_load.main,
    "huge_store": bench_pending_seek.main, "bench_service_load": bench_service_load.main,
}

# characters of a refusal besides its limits: its words and the value's echo (tiers.errors.shown)
MAX_MESSAGE_PAST_LIMITS = 150

# (benchmark, option, value, the limit the error states)
REFUSED = [
    ("bench_sweep", "--conversations", "2k", "of at least 1"),  # the report's case: int()'s traceback
    ("bench_sweep", "--conversations", "0", "of at least 1"),  # an empty store: nothing to sweep
    ("bench_sweep", "--conversations", "2000,x", "of at least 1"),  # one bad item among good ones
    ("bench_turncache_load", "--turns", "abc", "of at least 1"),
    ("bench_turncache_load", "--turns", "-5", "of at least 1"),
    ("huge_store", "--turns", "20000;60000", "of at least 1"),  # a wrong separator
    ("huge_store", "--turns", "1e5", "of at least 1"),  # a float's spelling
    ("bench_service_load", "--processes", "0", "of at least 1"),  # ZeroDivisionError before
    ("bench_service_load", "--processes", ",", "of at least 1"),  # no run at all, exit 0 before
    ("bench_service_load", "--clients", ",", "of at least 1"),
    ("bench_service_load", "--processes", "abc", "of at least 1"),  # refused before too, by int()
]


@pytest.mark.parametrize(("bench", "option", "value", "limit"), REFUSED)
def test_a_bad_list_is_a_usage_error(capsys: pytest.CaptureFixture[str], bench: str, option: str, value: str,
                                     limit: str) -> None:
    with pytest.raises(SystemExit) as exc:
        MAINS[bench]([option, value])
    assert exc.value.code == 2  # a usage error, not a traceback or a run
    err = capsys.readouterr().err
    assert f"argument {option}:" in err and limit in err and repr(value) in err, err
    assert "Traceback" not in err


# (text, the limits, what it reads as)
@pytest.mark.parametrize(("text", "limits", "want"), [
    ("20000,60000", {}, [20000, 60000]),
    ("60000, 20000", {}, [60000, 20000]),  # the order given: the order the runs go in
    ("5,,7,", {}, [5, 7]),  # blank items skipped
    ("1", {}, [1]),  # the least
    ("2000000", {"maximum": 2_000_000}, [2_000_000]),  # the most, when there is one
])
def test_int_list_reads_a_good_list(text: str, limits: dict[str, int], want: list[int]) -> None:
    # imported here: new with the check, so the rest of the file runs on the code before
    from tiermem.evals.bench import int_list

    assert int_list(unit="things", **limits)(text) == want


@pytest.mark.parametrize(("text", "limits", "words"), [
    ("2000001", {"maximum": 2_000_000}, "from 1 to 2,000,000 (tokens)"),  # past the most
    ("1", {"minimum": 2}, "of at least 2 (tokens)"),  # below the least
    ("9" * 5000, {}, "of at least 1 (tokens)"),  # past Python's 4,300 digits: int()'s own ValueError
])
def test_int_list_refuses_outside_its_limits(text: str, limits: dict[str, int], words: str) -> None:
    from tiermem.evals.bench import int_list

    with pytest.raises(argparse.ArgumentTypeError) as exc:
        int_list(unit="tokens", **limits)(text)
    assert words in str(exc.value)
    assert len(str(exc.value)) <= len(words) + MAX_MESSAGE_PAST_LIMITS  # the value's echo is bounded


def test_the_budgets_keep_their_reading() -> None:
    # --budgets builds on int_list and keeps parse_budgets' reading: sorted, once each
    from tiermem.evals.recall_rounds import budget_list

    assert budget_list("2000, 500,2000") == [500, 2000]
