"""A latest user message past the budget is refused with advice that works: "pass
truncate_latest=True" only where a truncated message would fit; where it would not (the
least a truncated message takes is past the room too), the budget needed instead. Before,
a budget-5 context of a 4-token message advised truncate_latest=True, and that call was
refused next ("cannot hold even a truncated latest user message (at least 8 tokens ...").
Each piece of advice is followed and must work; the error reads back from its message
(`from_problem`: a service's 422), and `tiermem context` says its own option. Real
Memory (cold log), real CLI (click's runner, in process)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.tiers.errors import BudgetTooSmall

pytestmark = pytest.mark.usefixtures("clean_env")

SHORT = "hi there"  # the reviewer's few-token message
LONG = "a long question about the trip " * 20  # long enough that a truncated copy fits a small budget
NEEDED = re.compile(r"raise the budget to at least (\d+)")

# (the latest message, the budget, a system prompt, whether truncate_latest=True is advised)
CASES: list[tuple[str, int, str | None, bool]] = [
    # the reviewer's: a short message just past a tiny budget; truncating cannot make it smaller
    (SHORT, 5, None, False),
    # the same beside a system prompt that leaves less room than a truncated message takes
    (SHORT, 12, "Be terse.", False),
    # a long message and room for a truncated one: truncating helps, so it is advised
    (LONG, 40, None, True),
    # ... beside a system prompt, room still left for a truncated one
    (LONG, 60, "Be terse.", True),
]


def _refused(mem: Memory, budget: int, system: str | None, truncate: bool = False) -> BudgetTooSmall:
    with pytest.raises(BudgetTooSmall) as got:
        mem.context("c", "q", budget, system=system, truncate_latest=truncate)
    return got.value


@pytest.mark.parametrize(("latest", "budget", "system", "advised"), CASES)
def test_the_advice_works(tmp_path: Path, latest: str, budget: int, system: str | None, advised: bool) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": latest})
        exc = _refused(mem, budget, system)
        assert exc.part == exc.PART_LATEST, exc
        # read back from its message alone, as a client of the service does
        back = BudgetTooSmall.from_problem(exc.problem)
        assert back is not None and back.problem == exc.problem and back.part == exc.part, exc.problem
        if advised:
            assert exc.problem.endswith("or pass truncate_latest=True"), exc.problem
            ctx = mem.context("c", "q", budget, system=system, truncate_latest=True)
            assert ctx.tokens <= budget
            return
        assert "pass truncate_latest=True" not in exc.problem, exc.problem
        assert "truncate_latest=True cannot help" in exc.problem, exc.problem
        # what truncating would have said, and the budget the advice names, which works
        assert _refused(mem, budget, system, truncate=True).part == BudgetTooSmall.PART_TRUNCATED
        said = NEEDED.search(exc.problem)
        assert said is not None and int(said[1]) == exc.needed, exc.problem
        assert mem.context("c", "q", int(said[1]), system=system).tokens <= int(said[1])
        assert int(said[1]) - 1 < exc.needed  # the least that works: one token less is refused
        _refused(mem, int(said[1]) - 1, system)


def test_with_pending_tokens_the_budget_named_includes_them(tmp_path: Path) -> None:
    pending = 10  # the caller's tokens after the context: the budget must hold them as well
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": SHORT})
        with pytest.raises(BudgetTooSmall) as got:
            mem.context("c", "q", 5 + pending, pending_tokens=pending)
        said = NEEDED.search(got.value.problem)
        assert said is not None and "(or lower pending_tokens)" in got.value.problem, got.value.problem
        assert mem.context("c", "q", int(said[1]), pending_tokens=pending).tokens <= int(said[1]) - pending
        assert BudgetTooSmall.from_problem(got.value.problem) is not None


def test_the_cli_names_its_option(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": SHORT})
    r = CliRunner().invoke(cli, ["--data-dir", str(data), "context", "c", "-b", "5"], obj=CliState())
    assert r.exit_code != 0 and "--truncate-latest cannot help" in r.stderr, r.output
    assert "truncate_latest=True" not in r.stderr and "raise the budget to at least" in r.stderr, r.stderr
