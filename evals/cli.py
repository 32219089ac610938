"""`tiermem eval ...`: the click group that the `tiermem` CLI mounts as `eval`.

    tiermem eval locomo   --data ../shared/data/locomo-dev.json --budget 2000 [--json]
    tiermem eval cost     --data ../shared/data/locomo-dev.json --budget 2000 [--plot docs/cost.png]
    tiermem eval session  --data ../shared/data/locomo-dev.json --budget 2000 [--plot docs/session.png]
    tiermem eval pressure --seed 0 --budget 500 --budget 1000 --budget 2000 [--json]
    tiermem eval report   --locomo locomo.json --cost cost.json --pressure pressure.json

Every command runs its own Memory in `--data-dir` (default: a temporary dir, deleted
afterwards along with the embedded Redis it started), with the hot tier on. A `--data`
file is checked before `--data-dir` is created or its store opened: a file the eval
refuses leaves the data dir as it was. A file an eval writes (`--plot`, `--latency-plot`,
`--trace`) is an `OutputPath`: a directory it cannot be written in is a usage error while
the arguments are parsed, not after the run. Progress bars and warnings go to stderr; `--json`
prints exactly one JSON object on stdout.
Standalone: `python -m tiermem.evals.cli ...`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tiermem.cli import OutputPath
from tiermem.config import Config
from tiermem.evals.baselines import METHODS, OpenedMemory, close_memory, make_progress, open_memory
from tiermem.evals.conversations import checked_samples
from tiermem.evals.cost import (
    COST_METHODS,
    DEFAULT_COST_BUDGET,
    MAX_COST_INSTANCES,
    TTL_EXPIRE,
    TTL_LABELS,
    pick_sample,
)
from tiermem.evals.locomo import DEFAULT_BUDGETS, LocomoError
from tiermem.evals.pressure import DEFAULT_CONVERSATIONS, DEFAULT_PRESSURE_BUDGETS, DEFAULT_TURNS
from tiermem.evals.report import report_command
from tiermem.evals.session import SESSION_METHODS
from tiermem.memory import Memory
from tiermem.tiers.errors import DataFileError

F = TypeVar("F", bound=Callable[..., Any])


def _common(fn: F) -> F:
    fn = click.option("--quiet", is_flag=True, help="No progress bars.")(fn)
    fn = click.option(
        "--no-hot",
        is_flag=True,
        help="Run without the hot tier (eviction off). For debugging only, not for results.",
    )(fn)
    fn = click.option(
        "--data-dir",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Where the Memory lives (kept afterwards; an already-ingested LoCoMo conversation "
        "with the same turn count is reused). Default: a temporary dir, deleted afterwards.",
    )(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")(fn)
    return fn


def _data_option(fn: F) -> F:
    return click.option(
        "--data",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        envvar=DATA_ENV,
        help=f"A LoCoMo-format JSON file (env {DATA_ENV}; relative paths resolve from the current dir). Required.",
    )(fn)


DATA_ENV = "TIERMEM_LOCOMO_DATA"


def _need_data(data: Path | None) -> Path:
    """The data file, or a usage error (exit 2, as every bad command line's) that says how
    to give it (there is no default: the dev checkout's ../shared/data/locomo-dev.json
    exists nowhere else). Both were a ClickException (exit 1), an error of the run."""
    if data is None:
        raise click.UsageError(
            f"no data file: pass a LoCoMo-format JSON file with --data PATH (or env {DATA_ENV})")
    if not data.is_file():
        raise click.BadParameter(f"LoCoMo data file {data} does not exist (give --data PATH)",
                                 param_hint=f"'--data' (env {DATA_ENV})")
    return data


def _emit(result: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], Any]) -> None:
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False))
    else:
        from tiermem.cli import rich_console  # a closed stdout ends the command as every command's

        console = rich_console()
        if not console.is_terminal:
            console = rich_console(width=160)  # piped: don't squeeze the table to 80 columns
        console.print(render(result))


@click.group("eval")
def eval_group() -> None:
    """Evals: LoCoMo recall under eviction, a cost replay, an eviction-pressure suite."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _open(data_dir: Path | None, no_hot: bool, data: Path | None = None, *, sample: str | None = None,
          need_samples: bool = False) -> OpenedMemory:
    """The eval's Memory. Under `tiermem eval`, the root command's `--config` file (and an
    embedder that tests inject) are honoured; its `--data-dir` is not: an eval ingests
    into its own `--data-dir` (default: a temporary dir), never into the user's data.
    A LoCoMo file `data` is checked first (`_check_data`), so that a file the eval
    refuses neither creates `--data-dir` nor opens a store in it."""
    ctx = click.get_current_context(silent=True)
    state = ctx.find_root().obj if ctx is not None else None
    config_path = getattr(state, "config_path", None)
    embedder = getattr(state, "embedder", None)
    config = Config.load(config_path) if config_path is not None else None
    if data is not None:
        # the limits do not depend on the data dir: the Config open_memory builds has the same
        _check_data(data, config if config is not None else Config.load(), sample=sample,
                    need_samples=need_samples)
    return open_memory(data_dir, hot=not no_hot, embedder=embedder, config=config)


def _check_data(data: Path, config: Config, *, sample: str | None, need_samples: bool) -> None:
    """The refusals of the eval's reader that depend on the file alone, made before the
    data dir is touched (bad input writes nothing): every turn checked as `tiermem import`
    checks it under `config`'s limits, the `--sample` that `eval cost` replays found, a
    file of no samples refused where the eval needs one. `run_locomo`, `run_cost` and
    `run_session` check the file again for a library caller (about 65 ms on the 2,080
    turns of locomo-dev.json)."""
    try:
        samples = checked_samples(data, config)
        if need_samples and not samples:
            raise LocomoError(f"{data} holds no samples")
        if sample is not None:
            pick_sample(samples, sample)
    except (LocomoError, DataFileError) as exc:  # a data file it cannot use: one line, exit 1
        raise click.ClickException(str(exc)) from None


@eval_group.command("locomo")
@_data_option
@click.option(
    "--budget",
    "budgets",
    type=click.IntRange(min=1),
    multiple=True,
    help=f"Context budget in tokens; repeat for several. Default: {', '.join(map(str, DEFAULT_BUDGETS))}.",
)
@click.option(
    "--limit-questions",
    type=click.IntRange(min=1),
    default=None,
    help="Only the first K questions of each sample.",
)
@click.option("--limit-samples", type=click.IntRange(min=1), default=None, help="Only the first S samples.")
@click.option(
    "--method",
    "methods",
    type=click.Choice(METHODS),
    multiple=True,
    help="Methods to run (repeat); default all.",
)
@click.option(
    "--plot",
    type=OutputPath(),
    default=None,
    help="Write a recall-vs-budget PNG here (e.g. docs/recall.png).",
)
@click.option(
    "--latency-plot",
    type=OutputPath(),
    default=None,
    help="Write a latency histogram PNG here (largest budget).",
)
@_common
def locomo_command(
    data: Path | None,
    budgets: tuple[int, ...],
    limit_questions: int | None,
    limit_samples: int | None,
    methods: tuple[str, ...],
    plot: Path | None,
    latency_plot: Path | None,
    as_json: bool,
    data_dir: Path | None,
    no_hot: bool,
    quiet: bool,
) -> None:
    """Evidence recall and answer coverage on LoCoMo at fixed token budgets, against baselines."""
    from tiermem.evals.locomo import run_locomo, table

    data = _need_data(data)
    opened = _open(data_dir, no_hot, data, need_samples=True)
    try:
        with make_progress(not quiet) as progress:
            run = run_locomo(
                opened.memory,
                data,
                budgets or DEFAULT_BUDGETS,
                limit_samples=limit_samples,
                limit_questions=limit_questions,
                methods=methods or METHODS,
                hot=opened.hot,
                progress=progress,
            )
    except (LocomoError, DataFileError) as exc:  # a data file it cannot use: one line, exit 1
        raise click.ClickException(str(exc)) from None
    finally:
        close_memory(opened)
    if plot is not None:
        from tiermem.evals.plots import recall_vs_budget

        recall_vs_budget(run.result, plot)
    if latency_plot is not None:
        from tiermem.evals.plots import latency_histogram

        top = max(run.latencies)
        latency_histogram(run.latencies[top], latency_plot, title=f"LoCoMo context latency at {top:,} tokens")
    _emit(run.result, as_json, table)


_ttl_option = click.option(
    "--ttl", type=click.Choice(list(TTL_LABELS)), default=TTL_EXPIRE, show_default=True,
    help="Which cache-lifetime assumption the top-level bills, goals and plot use: "
         + "; ".join(f"{k}: {v}" for k, v in TTL_LABELS.items())
         + " (both are reported: by_ttl in the JSON, the other beside them in the text).")


@eval_group.command("cost")
@_data_option
@click.option("--sample", default="0", show_default=True, help="Sample index or sample_id.")
@click.option("--budget", type=click.IntRange(min=1), default=DEFAULT_COST_BUDGET, show_default=True)
@click.option("--turns", type=click.IntRange(min=1), default=None, help="Replay only the first T turns.")
@click.option("--method", "methods", type=click.Choice(COST_METHODS), multiple=True)
@click.option(
    "--plot",
    type=OutputPath(),
    default=None,
    help="Write cumulative billed tokens vs turn as a PNG here (e.g. docs/cost.png).",
)
@click.option("--trace", type=OutputPath(), default=None,
              help="Write one JSON line per tiermem context here (class, retrieval, stable tokens, epoch reason).")
@click.option("--instances", type=click.IntRange(1, MAX_COST_INSTANCES), default=1, show_default=True,
              help="Memory objects on the same data dir and Redis that serve the contexts in turn "
                   "(the processes of one deployment behind a load balancer).")
@_ttl_option
@_common
def cost_command(
    data: Path | None,
    sample: str,
    budget: int,
    turns: int | None,
    methods: tuple[str, ...],
    plot: Path | None,
    trace: Path | None,
    instances: int,
    ttl: str,
    as_json: bool,
    data_dir: Path | None,
    no_hot: bool,
    quiet: bool,
) -> None:
    """Input tokens billed over a replayed conversation, with prompt caching."""
    from tiermem.evals.cost import run_cost, table

    data = _need_data(data)
    opened = _open(data_dir, no_hot, data, sample=sample)
    traced: list[dict[str, Any]] = []
    others: list[Memory] = []
    try:
        first = opened.memory
        # the other processes of the deployment: the same store and Redis; the embedder
        # and tokenizer are shared only to load them once (neither keeps per-call state)
        for _ in range(instances - 1):
            others.append(Memory(first.config, embedder=first.embedder, tokens=first.tokens, hot=opened.hot,
                                 background_indexing=False))
        with make_progress(not quiet) as progress:
            run = run_cost(
                opened.memory,
                data,
                sample=sample,
                budget=budget,
                turns=turns,
                methods=methods or COST_METHODS,
                hot=opened.hot,
                progress=progress,
                trace=traced if trace is not None else None,
                others=others,
                ttl=ttl,
            )
    except (LocomoError, DataFileError) as exc:  # a data file it cannot use: one line, exit 1
        raise click.ClickException(str(exc)) from None
    finally:
        for m in others:
            m.close()
        close_memory(opened)
    if trace is not None:
        trace.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traced), encoding="utf-8")
    if plot is not None:
        from tiermem.evals.plots import cost_curves

        r = run.result
        cost_curves(run.series, plot, title=f"Input tokens billed, {r['sample']}, budget {r['budget']:,}")
    _emit(run.result, as_json, table)


@eval_group.command("session")
@_data_option
@click.option("--budget", "budgets", type=click.IntRange(min=1), multiple=True,
              help="Context budget in tokens; repeat for several (each replays the session). Default: 2000.")
@click.option("--limit-samples", type=click.IntRange(min=1), default=None, help="Only the first S samples.")
@click.option("--limit-questions", type=click.IntRange(min=1), default=None,
              help="Only the first K questions of each sample.")
@click.option("--method", "methods", type=click.Choice(SESSION_METHODS), multiple=True)
@click.option("--plot", type=OutputPath(), default=None,
              help="Write recall against billed cost as a PNG here (e.g. docs/session.png).")
@_ttl_option
@_common
def session_command(
    data: Path | None,
    budgets: tuple[int, ...],
    limit_samples: int | None,
    limit_questions: int | None,
    methods: tuple[str, ...],
    plot: Path | None,
    ttl: str,
    as_json: bool,
    data_dir: Path | None,
    no_hot: bool,
    quiet: bool,
) -> None:
    """A long-history QA session: every question asked in one chained conversation; recall and billed cost."""
    from tiermem.evals.session import DEFAULT_SESSION_BUDGETS, run_session, table

    data = _need_data(data)
    opened = _open(data_dir, no_hot, data)
    try:
        with make_progress(not quiet) as progress:
            run = run_session(opened.memory, data, budgets=budgets or DEFAULT_SESSION_BUDGETS,
                              methods=methods or SESSION_METHODS, limit_samples=limit_samples,
                              limit_questions=limit_questions, progress=progress, ttl=ttl)
    except (LocomoError, DataFileError) as exc:  # a data file it cannot use: one line, exit 1
        raise click.ClickException(str(exc)) from None
    finally:
        close_memory(opened)
    if plot is not None:
        from tiermem.evals.plots import recall_vs_cost

        recall_vs_cost(run.result, plot)
    _emit(run.result, as_json, table)


@eval_group.command("pressure")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--budget",
    "budgets",
    type=click.IntRange(min=1),
    multiple=True,
    help=f"Default: {', '.join(map(str, DEFAULT_PRESSURE_BUDGETS))}.",
)
@click.option(
    "--turns",
    type=click.IntRange(min=60),
    default=DEFAULT_TURNS,
    show_default=True,
    help="Messages per generated conversation.",
)
@click.option("--conversations", type=click.IntRange(min=1), default=DEFAULT_CONVERSATIONS, show_default=True)
@click.option("--method", "methods", type=click.Choice(METHODS), multiple=True)
@_common
def pressure_command(
    seed: int,
    budgets: tuple[int, ...],
    turns: int,
    conversations: int,
    methods: tuple[str, ...],
    as_json: bool,
    data_dir: Path | None,
    no_hot: bool,
    quiet: bool,
) -> None:
    """Planted constraints, distractors, corrections and retractions: retention and leakage."""
    from tiermem.evals.pressure import run_pressure, table

    opened = _open(data_dir, no_hot)
    try:
        with make_progress(not quiet) as progress:
            run = run_pressure(
                opened.memory,
                seed=seed,
                budgets=budgets or DEFAULT_PRESSURE_BUDGETS,
                turns=turns,
                conversations=conversations,
                methods=methods or METHODS,
                hot=opened.hot,
                progress=progress,
            )
    finally:
        close_memory(opened)
    _emit(run.result, as_json, table)


eval_group.add_command(report_command)


if __name__ == "__main__":  # pragma: no cover
    eval_group()
