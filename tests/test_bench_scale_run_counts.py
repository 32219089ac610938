"""`bench_scale.run`, the library entry of the scale benchmark, refuses a count below 1 as
its command line does (`bench.bounded`): a ValidationError naming the parameter and the
limit, before anything is read or built. It read 0 as "the default" (`turns or
1_000_000`: `run(turns=0)` started the 1M-turn build, `n_queries=0` measured 200
queries) and `namespace_size=0` as 1; a negative turns or conversations was a ValueError
naming neither. Fewer turns than conversations, which no option alone refuses, is a
usage error of the command now (it was a traceback after parsing).

Each row passes a LoCoMo file the corpus reader refuses (`[{`): on the code before, a
count it took is followed by that refusal at once (a LocomoError, not the ValidationError
expected) rather than by a build of minutes. Every row fails on the code before (a git
archive copy of HEAD)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem.errors import ValidationError
from tiermem.evals import bench_scale

pytestmark = pytest.mark.usefixtures("clean_env")

# (the counts given to run, the parameter refused, the words of the limit)
CASES: list[tuple[dict[str, Any], str, str]] = [
    # 0 read as the default: the full 1M-turn build
    ({"turns": 0}, "turns", "at least 1, got 0"),
    # ... with --quick: its 20k turns
    ({"quick": True, "turns": 0}, "turns", "at least 1, got 0"),
    # a negative: a ValueError naming no parameter
    ({"turns": -5, "conversations": 2}, "turns", "at least 1, got -5"),
    # 0 conversations read as the default 1,000
    ({"turns": 100, "conversations": 0}, "conversations", "at least 1, got 0"),
    ({"turns": 100, "conversations": -1}, "conversations", "at least 1, got -1"),
    # read as 1
    ({"quick": True, "namespace_size": 0}, "namespace_size", "at least 1, got 0"),
    # read as the default 200 (30 with --quick)
    ({"quick": True, "n_queries": 0}, "n_queries", "at least 1, got 0"),
    ({"quick": True, "n_queries": -2}, "n_queries", "at least 1, got -2"),
    # read as the default 500 (100 with --quick)
    ({"quick": True, "n_appends": 0}, "n_appends", "at least 1, got 0"),
    # fewer turns than conversations: a ValueError naming neither
    ({"turns": 5, "conversations": 10}, "turns", "at least one per conversation (10), got 5"),
]


@pytest.mark.parametrize(("counts", "field", "words"), CASES,
                         ids=[f"{c[1]}={c[0][c[1]]}{'-quick' if c[0].get('quick') else ''}" for c in CASES])
def test_run_refuses_a_count_below_one(tmp_path: Path, counts: dict[str, Any], field: str, words: str) -> None:
    data = tmp_path / "bad.json"
    data.write_text("[{", encoding="utf-8")  # the code before stops here, after taking the count
    built = tmp_path / "db"
    built.mkdir()
    with pytest.raises(ValidationError) as exc:
        bench_scale.run(directory=built, data=data, **counts)
    assert exc.value.field == field
    assert words in str(exc.value), str(exc.value)
    assert list(built.iterdir()) == []  # nothing built


def test_the_command_refuses_fewer_turns_than_conversations(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_scale.main(["--turns", "5", "--conversations", "10", "--data", "/nonexistent/bad.json"])
    assert exc.value.code == 2  # a usage error, before anything is built
    err = capsys.readouterr().err
    assert "turns: must be at least one per conversation (10), got 5" in err, err
    assert "Traceback" not in err
