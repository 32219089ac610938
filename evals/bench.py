"""`make bench`: every benchmark in one run, one table, JSON and markdown for the README.

    python -m tiermem.evals.bench [--quick] [--json PATH] [--markdown] [--md PATH] [--data PATH]
                          [--scale-json PATH] [--no-warm] [--render-only]

Runs, in this order and in one process: the cold tier (evals.bench_cold), the hot tier
(evals.bench_hot), the warm tier (evals.bench_warm, when it imports) and `context()`
(evals.bench_context). Each reports medians and p99s against a baseline measured in the
same run, and the load average before and after (the machine has two cores and is
shared: read the figures with it). Prints one table (`--markdown`: the markdown one)
and writes `docs/bench.json` and `docs/bench.md` by default. The 1M-turn scale run is
separate (`python -m tiermem.evals.bench_scale --turns 1000000 --conversations 1000 --json
docs/bench_scale.json`, minutes); when that file exists its rows are added to the
table, marked as coming from that run; `--render-only` re-renders the table from the
saved JSON without measuring anything. Likewise the PostgreSQL rows: `make bench-postgres`
(evals.bench_postgres --out docs/bench_postgres.json) and the 1M one-conversation search rows
of `evals.bench_scale --engine postgres --json docs/bench_scale_postgres.json`, when saved.

The embedding model runs with one torch thread by default (see `set_torch_threads`).

This module also holds the small helpers the benchmarks share (percentiles, load
average, table rows, the argparse types of their options: `output_file`, `int_list`,
`bounded`; every count or duration a benchmark takes is checked while its arguments are
parsed, a bad one a usage error naming the option and the limit), so it must not import
the benchmarks at module level.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict, TypeVar

DEFAULT_JSON = Path("docs/bench.json")
DEFAULT_MARKDOWN = Path("docs/bench.md")
DEFAULT_SCALE_JSON = Path("docs/bench_scale.json")
# PostgreSQL runs, saved by `make bench-postgres` (evals.bench_postgres --out) and by
# evals.bench_scale --engine postgres --json; their rows join the table when present
DEFAULT_POSTGRES_JSON = Path("docs/bench_postgres.json")
DEFAULT_SCALE_POSTGRES_JSON = Path("docs/bench_scale_postgres.json")

Number = TypeVar("Number", int, float)  # `bounded`'s kind: a count, or a duration in seconds


# ---------------------------------------------------------------------------------------
# Shared helpers


def pct(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty sample."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def dist(samples: Sequence[float], nd: int = 3) -> dict[str, float]:
    """p50, p99, mean and count of a sample, rounded to `nd` decimals."""
    return {
        "p50": round(pct(samples, 0.50), nd),
        "p99": round(pct(samples, 0.99), nd),
        "mean": round(statistics.fmean(samples), nd),
        "n": len(samples),
    }


def ratio(a: float | None, b: float | None, nd: int = 2) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, nd)


def output_file(*, create_parents: bool = False) -> Callable[[str], Path]:
    """An argparse `type` for a file a benchmark writes when it is done: checked while the
    arguments are parsed by the CLI's check (`tiermem.cli.output_path_problem`; with
    `create_parents`, for a bench that makes the file's missing directories), so a typo is
    a usage error (exit 2) naming the option, not a run of minutes lost at its end."""

    def output(text: str) -> Path:
        from tiermem.cli import output_path_problem  # not at module level: the CLI imports click

        problem = output_path_problem(text, create_parents=create_parents)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return Path(text)

    return output


def int_list(*, minimum: int = 1, maximum: int | None = None, unit: str) -> Callable[[str], list[int]]:
    """An argparse `type` for a comma-separated list of whole numbers ('20000, 60000'; a
    blank item is skipped), in the order given: at least one, each from `minimum` to
    `maximum` (no upper limit when None), `unit` saying what they count. Anything else is
    a usage error naming the option and the limits (exit 2): a bare int() after the
    arguments were parsed stopped a benchmark with a traceback ('--turns 2k'), and 0 or a
    negative size failed inside the run. The one home of the benchmarks' and probes' list
    options (recall_rounds.budget_list builds on it)."""
    from tiermem.tiers.errors import shown  # the one bound on an echo of the value given

    limits = f"from {minimum:,} to {maximum:,}" if maximum is not None else f"of at least {minimum:,}"

    def numbers(text: str) -> list[int]:
        try:
            out = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:  # not a number, or past Python's 4,300 digits
            out = []
        if not out or min(out) < minimum or (maximum is not None and max(out) > maximum):
            raise argparse.ArgumentTypeError(f"must be comma-separated integers {limits} ({unit}), at least one, "
                                             f"got {shown(text)}")
        return out

    return numbers


def bounded(minimum: Number, *, unit: str, maximum: Number | None = None) -> Callable[[str], Number]:
    """An argparse `type` for one count or duration of a benchmark: a whole number when
    `minimum` is an int, a decimal one when it is a float (seconds), from `minimum` to
    `maximum` (no upper limit when None), `unit` saying what it counts. Anything else (nan
    and infinities too) is a usage error naming the option and the limits (exit 2): a bare
    `int` or `float` type took 0 and negatives, which failed inside the run (an empty
    percentile, a division by zero) or ran nothing. The one home of the benchmarks' single
    numeric options, as `int_list` is of their lists."""
    from tiermem.tiers.errors import shown  # the one bound on an echo of the value given

    kind = type(minimum)

    def spelled(n: Number) -> str:
        return f"{n:,}" if kind is int else f"{n:g}"

    limits = (f"from {spelled(minimum)} to {spelled(maximum)}" if maximum is not None
              else f"of at least {spelled(minimum)}")
    what = "an integer" if kind is int else "a number"

    def number(text: str) -> Number:
        try:
            value: Number | None = kind(text)
        except ValueError:  # not a number, or past Python's 4,300 digits
            value = None
        if (value is None or not math.isfinite(value) or value < minimum
                or (maximum is not None and value > maximum)):
            raise argparse.ArgumentTypeError(f"must be {what} {limits} ({unit}), got {shown(text)}")
        return value

    return number


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux/macOS
        return []


# A benchmark that times queries right after heavy work of its own (embedding a corpus,
# building a store) waits at most this long for a core to be spare again, polling this
# often: the embedder chooses its query threads by that (tiers.embed_onnx.spare_core:
# the other work on the CPUs over the last poll, or the 1-minute load average, which
# counts the build for a minute after it ended, where it cannot read the CPUs).
SETTLE_MAX_S = 120.0
SETTLE_POLL_S = 2.0


def settle_load(max_s: float = SETTLE_MAX_S) -> dict[str, Any]:
    """Wait until a core is spare (as the embedder judges it), or `max_s` passed; says
    how long it waited, the load average then, and whether it settled."""
    from tiermem.tiers.embed_onnx import spare_core, usable_cpus

    t0 = time.monotonic()
    cpus = usable_cpus()
    while not spare_core(cpus) and time.monotonic() - t0 < max_s:
        time.sleep(SETTLE_POLL_S)
    return {"waited_s": round(time.monotonic() - t0, 1), "load_avg": load_average(), "settled": spare_core(cpus)}


# The machine-speed probe: float32 matrix products at the embedding model's feed-forward
# shape (512 tokens x 384 -> 1,536), for at least this long
SPEED_PROBE_S = 0.3
SPEED_PROBE_SHAPE = (512, 384, 1536)


def machine_speed() -> float:
    """GFLOP per CPU-second of numpy's float32 matrix product at the model's shape, on
    numpy's own BLAS threads: how fast this machine is right now, relative to another run
    of this probe (not to a one-thread figure). On this project's shared 2-core VM the same
    product on one thread ran at 103-117 GFLOP/s at 03:15 UTC and at 73-80 at 03:53 on
    2026-12-02, nothing else running: a third, which no load average shows. A benchmark
    prints this beside its figures so that runs made at different times can be told apart
    from code that changed."""
    import time

    import numpy as np

    m, k, n = SPEED_PROBE_SHAPE
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    a @ b  # the first call pays for the BLAS threads' start
    done = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < SPEED_PROBE_S:
        a @ b
        done += 1
    cpu = max(time.process_time() - cpu0, 1e-9)
    return round(2.0 * m * k * n * done / cpu / 1e9, 1)


def environment() -> dict[str, Any]:
    """What the figures depend on besides the code."""
    out: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    try:
        import sqlean

        out["sqlite"] = sqlean.sqlite_version
    except ImportError:  # pragma: no cover - a declared dependency
        pass
    if "torch" in sys.modules:
        out["torch_threads"] = sys.modules["torch"].get_num_threads()
    return out


DEFAULT_TORCH_THREADS = 1


def set_torch_threads(n: int | None) -> int | None:
    """Pin torch's intra-op threads for the embedding model (None leaves torch's default).

    The default is 1: on a shared 2-core machine, torch's spinning worker threads turn
    any contention into a 5-10x slowdown (measured here under a load average of 5: one
    query embedding 37 ms with 1 thread, 300 ms with 2), which would make the figures
    measure the neighbours. `--torch-threads 0` keeps torch's own choice."""
    if n is None or n <= 0:
        return None
    import torch

    torch.set_num_threads(n)
    return int(torch.get_num_threads())


def say(msg: str) -> None:
    """Progress on stderr, so that stdout stays a table or JSON."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Row(TypedDict):
    """One line of the combined table."""

    bench: str
    operation: str
    p50: float | None
    p99: float | None
    unit: str  # µs, ms, /s (a throughput: p50 holds it, p99 is empty), MB
    baseline: str
    baseline_p50: float | None
    ratio: float | None
    target: str
    ok: bool | None


def row(bench: str, operation: str, p50: float | None, p99: float | None, unit: str, *,
        baseline: str = "", baseline_p50: float | None = None, ratio_: float | None = None,
        target: str = "", ok: bool | None = None) -> Row:
    if ratio_ is None and baseline_p50 is not None and p50 is not None:
        ratio_ = ratio(p50, baseline_p50)
    return Row(bench=bench, operation=operation, p50=p50, p99=p99, unit=unit, baseline=baseline,
               baseline_p50=baseline_p50, ratio=ratio_, target=target, ok=ok)


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "µs" and value >= 1000:
        return f"{value / 1000:.2f} ms"
    if unit in ("µs", "ms"):
        return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"
    if unit.startswith("/"):
        return f"{value:,.0f}{unit}"
    return f"{value:,.1f} {unit}"


def _cells(r: Row) -> list[str]:
    base = r["baseline"]
    if r["baseline_p50"] is not None:
        base = f"{base}: {fmt(r['baseline_p50'], r['unit'])}"
    ratio_s = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
    target = r["target"]
    if r["ok"] is not None:
        target = f"{target} ({'ok' if r['ok'] else 'MISSED'})"
    return [r["bench"], r["operation"], fmt(r["p50"], r["unit"]), fmt(r["p99"], r["unit"]), base, ratio_s, target]


HEADER = ["bench", "operation", "p50", "p99", "baseline (same run)", "ratio", "target"]


def text_table(rows: Sequence[Row]) -> str:
    body = [HEADER, *[_cells(r) for r in rows]]
    widths = [max(len(line[i]) for line in body) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in body)


def markdown_table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Rows for the benchmarks this package does not own (their modules format their own text)


def hot_rows(r: dict[str, Any]) -> list[Row]:
    ping = r["ping_p50_us"]
    return [
        row("hot", "admit (steady state, evicting)", r["admit_p50_us"], r["admit_p99_us"], "µs",
            baseline="redis-py pipeline ZADD+HSET", baseline_p50=r["pipeline_zadd_hset_p50_us"],
            target="p50 <= 400 µs", ok=r.get("admit_p50_ok")),
        row("hot", f"read of a {r['read_2k_tokens']}-token hot set", r["read_2k_p50_us"], r["read_2k_p99_us"],
            "µs", baseline="PING", baseline_p50=ping),
        row("hot", "rebuild, 10k turns (median of runs)", r["rebuild_10k_ms"], None, "ms",
            target="<= 200 ms", ok=r.get("rebuild_10k_ok")),
    ]


def warm_rows(r: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    for kind, f in r["refresh_ms_per_100_turns"].items():
        if isinstance(f, dict) and "incremental" in f:
            out.append(row("warm", f"refresh {kind} view, per +100 turns", f["incremental"], None, "ms",
                           baseline="initial refresh per 100 turns", baseline_p50=f["initial"]))
    a = r["append_latency"]
    base, loaded = a["without_scheduler"], a["with_scheduler"]
    out.append(row("warm", "append while the scheduler refreshes", loaded["p50_ms"] * 1000,
                   loaded["p99_ms"] * 1000, "µs", baseline="append without scheduler",
                   baseline_p50=base["p50_ms"] * 1000))
    return out


# ---------------------------------------------------------------------------------------
# The combined run


def run(quick: bool = False, *, data: Path | None = None, embedder: Any = None,
        include_warm: bool = True) -> dict[str, Any]:
    """Run every benchmark; returns {"meta", "results", "rows", "errors"}."""
    from tiermem.evals import bench_cold, bench_context, bench_hot

    if embedder is None:
        from tiermem.tiers.embed_onnx import build_embedder

        embedder = build_embedder()  # the default runtime, as Memory() builds it
    started = time.time()
    meta: dict[str, Any] = {"started": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
                            "quick": quick, "load_avg_start": load_average()}
    results: dict[str, Any] = {}
    rows: list[Row] = []
    errors: dict[str, str] = {}
    skipped: dict[str, str] = {}

    def part(name: str, fn: Callable[[], dict[str, Any]], to_rows: Callable[[dict[str, Any]], list[Row]]) -> None:
        say(f"{name}: running (load average {load_average()})")
        la0 = load_average()
        t0 = time.perf_counter()
        try:
            res = fn()
        except Exception as exc:  # one broken bench must not hide the others' figures
            errors[name] = f"{type(exc).__name__}: {exc}"
            say(f"{name}: FAILED {errors[name]}")
            return
        res.setdefault("load_avg", {"start": la0, "end": load_average()})
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        results[name] = res
        rows.extend(to_rows(res))
        say(f"{name}: done in {res['wall_s']} s")

    cold_kw: dict[str, Any] = {"embedder": embedder}
    if data is not None:
        cold_kw["data"] = data
    part("cold", lambda: bench_cold.run(quick, **cold_kw), bench_cold.rows)
    part("hot", lambda: bench_hot.run(quick=quick), hot_rows)
    if include_warm:
        try:
            from tiermem.evals import bench_warm
        except ImportError as exc:
            skipped["warm"] = f"evals.bench_warm does not import: {exc}"
        else:
            # a quick run is a smoke run: the warm bench without the model takes seconds, not a minute
            part("warm", lambda: bench_warm.run(quick, embeddings=not quick), warm_rows)
    part("context", lambda: bench_context.run(quick, **cold_kw), bench_context.rows)
    meta["load_avg_end"] = load_average()
    meta["wall_s"] = round(time.time() - started, 1)
    meta["environment"] = environment()
    return {"meta": meta, "results": results, "rows": rows, "errors": errors, "skipped": skipped}


def scale_rows_from(path: Path) -> tuple[list[Row], dict[str, Any] | None]:
    """Rows of a saved scale run (evals.bench_scale --json), if the file exists."""
    if not path.is_file():
        return [], None
    from tiermem.evals import bench_scale

    saved = json.loads(path.read_text())
    return bench_scale.rows(saved), saved


def postgres_rows_from(path: Path, scale_path: Path) -> tuple[list[Row], list[str]]:
    """Rows of the saved PostgreSQL runs (evals.bench_postgres --out, evals.bench_scale
    --engine postgres --json), each with a line naming the command and its load."""
    rows: list[Row] = []
    notes: list[str] = []
    if path.is_file():
        from tiermem.evals import bench_postgres

        saved = json.loads(path.read_text())
        rows.extend(bench_postgres.rows(saved))
        la = saved.get("load_avg") or {}
        notes.append(f"PostgreSQL rows: `{saved.get('command', 'python -m tiermem.evals.bench_postgres')}` "
                     f"(load average {la.get('start')} -> {la.get('end')}).")
    if scale_path.is_file():
        from tiermem.evals import bench_scale

        saved = json.loads(scale_path.read_text())
        for r in bench_scale.rows(saved):
            if "one conversation" in r["operation"]:
                r["bench"] = "postgres"  # beside the other PostgreSQL rows, apart from SQLite's scale rows
                rows.append(r)
        la = saved.get("load_avg") or {}
        notes.append(f"PostgreSQL scale rows (one conversation's search): `{saved.get('command')}` "
                     f"({saved.get('turns'):,} turns in {saved.get('conversations'):,} conversations; load average "
                     f"{la.get('start')} -> {la.get('end')}).")
    return rows, notes


def _load_line(meta: dict[str, Any], results: dict[str, Any]) -> str:
    parts = [f"start {meta['load_avg_start']}", f"end {meta['load_avg_end']}"]
    for name, res in results.items():
        la = res.get("load_avg") or {}
        if la:
            parts.append(f"{name} {la.get('start')} -> {la.get('end')}")
    return "load average (1/5/15 min): " + "; ".join(parts)


def render_markdown(report: dict[str, Any], rows: Sequence[Row], scale: dict[str, Any] | None,
                    notes: Sequence[str] = ()) -> str:
    meta = report["meta"]
    env = meta.get("environment", {})
    lines = [
        "<!-- generated by `python -m tiermem.evals.bench`; do not edit by hand -->",
        f"Benchmarks, {meta['started']}{' (quick)' if meta['quick'] else ''}: {env.get('cpus')} CPUs, "
        f"Python {env.get('python')}, SQLite {env.get('sqlite', '?')}, torch threads "
        f"{env.get('torch_threads', '?')}. {_load_line(meta, report['results'])}.",
        "",
        markdown_table(rows),
        "",
        "Ratios divide the p50 by the baseline's p50, both measured in the same run (for a throughput, "
        "ours over the baseline's). "
        "Rerun: `make bench` (or `python -m tiermem.evals.bench`).",
    ]
    if scale is not None:
        la = scale.get("load_avg") or {}
        lines.append(
            f"Scale rows: `{scale.get('command', 'python -m tiermem.evals.bench_scale')}` "
            f"({scale.get('turns'):,} turns in {scale.get('conversations'):,} conversations, namespaces of "
            f"{scale.get('namespace_size')}; load average {la.get('start')} -> {la.get('end')}); its vectors are "
            "synthetic (random unit vectors) and its queries carry a vector, so no query embedding is included; "
            "its baseline is the same operations when the database held its first namespace only.")
    lines.extend(notes)
    missing = {**report.get("skipped", {}), **report["errors"]}
    if missing:
        lines.append("")
        lines.extend(f"- {name}: not measured ({why})" for name, why in missing.items())
    return "\n".join(lines) + "\n"


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    if hasattr(x, "item"):  # numpy scalars
        return x.item()
    return str(x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run (seconds, not minutes)")
    # the defaults are text, so that argparse checks them as it checks a value given
    parser.add_argument("--json", type=output_file(create_parents=True), default=str(DEFAULT_JSON),
                        help=f"where to write JSON (default {DEFAULT_JSON})")
    parser.add_argument("--markdown", action="store_true",
                        help="print the markdown table on stdout instead of the plain one")
    parser.add_argument("--md", type=output_file(create_parents=True), default=str(DEFAULT_MARKDOWN),
                        help=f"where to write the markdown table (default {DEFAULT_MARKDOWN})")
    parser.add_argument("--data", type=Path, default=None,
                        help="LoCoMo-format file (default ../shared/data/locomo-dev.json)")
    parser.add_argument("--scale-json", type=Path, default=DEFAULT_SCALE_JSON,
                        help="a saved `evals.bench_scale --json` result to include in the table, if it exists")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-tier benchmark")
    parser.add_argument("--postgres-json", type=Path, default=DEFAULT_POSTGRES_JSON,
                        help="a saved `evals.bench_postgres --out` result to include, if it exists")
    parser.add_argument("--scale-postgres-json", type=Path, default=DEFAULT_SCALE_POSTGRES_JSON,
                        help="a saved `evals.bench_scale --engine postgres --json` result to include, if it exists")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: re-render the table from the --json file (e.g. after a scale run)")
    args = parser.parse_args(argv)
    if args.render_only:
        report = json.loads(args.json.read_text())
        report.pop("scale", None)
        report["rows"] = [r for r in report["rows"] if r["bench"] != "scale"]
    else:
        report = run(args.quick, data=args.data, include_warm=not args.no_warm)
    scale_rows, scale = scale_rows_from(args.scale_json)
    pg_rows, pg_notes = postgres_rows_from(args.postgres_json, args.scale_postgres_json)
    rows = [*report["rows"], *scale_rows, *pg_rows]
    if scale is not None:
        report["scale"] = scale
    md = render_markdown(report, rows, scale, pg_notes)
    print(md if args.markdown else text_table(rows))
    if not args.markdown:
        print(_load_line(report["meta"], report["results"]))
        for name, why in {**report.get("skipped", {}), **report["errors"]}.items():
            print(f"{name}: not measured ({why})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(_jsonable(report), indent=2) + "\n")
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(md)
    say(f"wrote {args.json} and {args.md}")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
