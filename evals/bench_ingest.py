"""Bulk-ingest benchmark: LoCoMo conversations through `Memory.append_many` (what
`tiermem import` does) and the deferred embedding catch-up, beside the writes (`tiermem
import --index`) or after them, against a baseline run in the same process.

    python -m tiermem.evals.bench_ingest [--data PATH] [--rounds 3] [--batch 1000]
                                         [--no-embed] [--baseline legacy|serial]
                                         [--new overlapped|sequential]
                                         [--idle-estimate] [--json PATH]

Each round, in a fresh data dir, for each mode (interleaved round by round, so that both
modes see the same machine load):

- write: `import_dataset` (append_outcome in chunks of `--batch`, each under its
  idempotency key, the hot tier off, as `tiermem import` runs): turns/s, and each
  chunk's latency;
- index: the catch-up that embeds every pending turn (`tiermem index`), through one
  embedder loaded once for the whole run (its load is reported apart; its memo of recent
  texts, and the classifier's, are cleared before every round, so no round is served by
  an earlier one);
- total: turns / (write + index), the "bulk ingest with embeddings" figure.

`--new overlapped` (the default): the new mode runs `tiermem.ingest.import_and_index`, the
catch-up in a thread beside the writes (each pool read once a whole pool of finished
conversations is committed, cut as after the import); its "write" is
the time to the last chunk's commit (the catch-up running meanwhile) and its "index" the
catch-up's time after that, so only their sum compares with the baseline's.
`--new sequential`: the import, then the catch-up, as the baseline.

Modes: `new` is the embedder the config builds (tiers/embed_onnx.py: texts tokenized
once, grouped by token count into batches of at most `BULK_MAX_TOKENS` padded tokens,
run on one worker thread per CPU); `baseline` the bulk path before that
(`evals.bench_embed_bulk.LegacyEmbedder`: the same graph on onnxruntime's default
threads, batches of 64 sorted by characters); `--baseline serial`: this embedder with the
catch-up's steps one after another (no pipeline, no hook texts embedded with the pool:
tiers/catchup.py, the code before it). Both read `INDEX_POOL_BATCHES` batches at
once (`--baseline-pool 1`: the baseline reads one batch at a time in log order, as
before the pooling). Both must record exactly the same supersession (compared pair by
pair) and embed every turn, or the run fails. Medians and p99s (nearest rank) over the rounds; the ratio is
new/baseline for throughputs (above 1: faster). The load average is printed with every
figure: the machine is shared, and read the figures with it; `--idle-estimate` adds
what each run would take on an idle machine with this process's CPUs
(evals/idle_estimate.py), the figure to compare on a loaded one. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.evals.bench import bounded, dist, load_average, machine_speed, output_file, ratio, say
from tiermem.evals.idle_estimate import IdleClock
from tiermem.memory import MAX_BATCH_MESSAGES
from tiermem.tiers.embed_onnx import usable_cpus
from tiermem.tiers.store import INDEX_POOL_BATCHES

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent.parent / "shared" / "data" / "locomo-dev.json"
NAMESPACE = "bench"
MODES = ("new", "baseline")
BASELINES = ("legacy", "serial")
# what the `new` mode runs (--new)
NEWS = {"overlapped": "import with the catch-up beside the writes (tiermem import --index, tiermem/ingest.py)",
        "sequential": "import, then the catch-up (tiermem import, then tiermem index)"}


def _superseded(mem: Any) -> set[tuple[str, int, int]]:
    """Every (conversation, old position, superseding position) the log records."""
    out: set[tuple[str, int, int]] = set()
    for key in mem.cold.all_keys():
        named = mem.cold.name_of(key)
        name = named[1] if named else key  # keys differ between data dirs, names do not
        for r in mem.cold.turns(key):
            if r.superseded_by is not None:
                out.add((name, r.position, r.superseded_by))
    return out


def _round(data: Any, embedder: Any, pool_batches: int | None, batch: int, embed: bool, *,
           pipeline_depth: int | None = None, idle_cores: int | None = None,
           overlapped: bool = False) -> dict[str, Any]:
    def clock() -> Any:
        return IdleClock(idle_cores) if idle_cores else contextlib.nullcontext()

    from tiermem.config import Config
    from tiermem.evals.conversations import import_dataset
    from tiermem.memory import Memory

    tmp = Path(tempfile.mkdtemp(prefix="tiermem-ingest-"))
    try:
        cfg = Config(data_dir=tmp / "data")
        clear = getattr(embedder, "clear_memo", None)
        if callable(clear):
            clear()
        with contextlib.suppress(ImportError):  # and the classifier's (a baseline may have none)
            from tiermem.consolidation.classify import clear_memo

            clear_memo()
        with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
            if pipeline_depth == 0:  # the catch-up before tiers/catchup.py: one step after another
                mem.cold.pipeline_depth = 0  # type: ignore[attr-defined]  # SQLite's
                mem.cold.texts_ahead = None
            chunks: list[float] = []
            last = [time.perf_counter()]

            def tick(n: int) -> None:
                now = time.perf_counter()
                if n:
                    chunks.append((now - last[0]) * 1000.0)
                last[0] = now

            load_before = load_average()
            t0 = time.perf_counter()
            if overlapped and embed:  # `tiermem import --index`: the catch-up beside the writes
                from tiermem.ingest import import_and_index

                with clock() as c_all:
                    report, embedded = import_and_index(mem, data, namespace=NAMESPACE, batch=batch, progress=tick)
                # the writes end at the last chunk's commit; what follows is the catch-up alone
                write_s = last[0] - t0
                out: dict[str, Any] = {"turns": report.appended, "write_s": write_s, "chunk_ms": chunks,
                                       "load_before": load_before, "index_s": time.perf_counter() - last[0],
                                       "embedded": embedded, "pending_after": mem.cold.pending_embeddings()}
                if idle_cores and c_all.estimate_s is not None:
                    out["idle_s"] = c_all.estimate_s
                embed = False  # measured above
            else:
                with clock() as c_write:
                    report = import_dataset(mem, data, namespace=NAMESPACE, batch=batch, progress=tick)
                write_s = time.perf_counter() - t0
                out = {"turns": report.appended, "write_s": write_s, "chunk_ms": chunks, "load_before": load_before}
            if embed:
                t1 = time.perf_counter()
                with clock() as c_index:
                    embedded = mem.cold.index_pending(batch=cfg.embedding_batch_size,
                                                      pool_batches=pool_batches or INDEX_POOL_BATCHES)
                out["index_s"] = time.perf_counter() - t1
                if idle_cores and c_write.estimate_s is not None and c_index.estimate_s is not None:
                    out["idle_s"] = c_write.estimate_s + c_index.estimate_s
                out["embedded"] = embedded
                out["pending_after"] = mem.cold.pending_embeddings()
            out["superseded"] = sorted(_superseded(mem))
            out["load_after"] = load_average()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _summary(rounds: list[dict[str, Any]], embed: bool) -> dict[str, Any]:
    s: dict[str, Any] = {
        "write_turns_per_s": dist([r["turns"] / r["write_s"] for r in rounds], 1),
        "chunk_ms": dist([c for r in rounds for c in r["chunk_ms"]], 1),
    }
    if embed:
        s["index_turns_per_s"] = dist([r["turns"] / r["index_s"] for r in rounds], 1)
        s["total_turns_per_s"] = dist([r["turns"] / (r["write_s"] + r["index_s"]) for r in rounds], 1)
        if all("idle_s" in r for r in rounds):
            s["idle_equivalent_turns_per_s"] = dist([r["turns"] / r["idle_s"] for r in rounds], 1)
    return s


def run(data_path: Path, *, rounds: int, batch: int, embed: bool, baseline_pool: int | None = None,
        baseline: str = "legacy", idle_cores: int | None = None, new: str = "overlapped") -> dict[str, Any]:
    from tiermem.config import Config
    from tiermem.evals.bench_embed_bulk import LegacyEmbedder
    from tiermem.evals.conversations import FIX_HINT, read_conversations
    from tiermem.tiers.embed_onnx import build_embedder

    cfg = Config()
    data = read_conversations(data_path, max_content_bytes=cfg.max_content_bytes,
                              max_metadata_bytes=cfg.max_metadata_bytes, max_id_chars=cfg.max_id_chars,
                              strict=True, conversation_id=None, hint=FIX_HINT)
    embedder = build_embedder(cfg.embedding_model, runtime=cfg.embedding_runtime,
                              batch_size=cfg.embedding_batch_size, cache_dir=cfg.embedding_cache_dir)
    t0 = time.perf_counter()
    runtime = embedder.load()
    load_s = time.perf_counter() - t0
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    if new not in NEWS:
        raise ValueError(f"new must be one of {', '.join(NEWS)}, not {new!r}")
    # legacy: the embedder before the bulk path; serial: this embedder, with the catch-up's
    # steps one after another (no pipeline, tiers/catchup.py), as before it
    before = LegacyEmbedder(cfg.embedding_batch_size) if baseline == "legacy" else embedder
    before_name = before.load() if baseline == "legacy" else f"{runtime}, catch-up unpipelined"
    embedders = {"new": (embedder, None, None), "baseline": (before, baseline_pool, 0 if baseline == "serial" else None)}
    new_name = NEWS[new]
    say(f"{data.n_messages} messages in {len(data.conversations)} conversations; embedder {runtime} "
        f"loaded in {load_s:.2f} s ({getattr(embedder, 'workers', 1)} workers); new: {new_name}; "
        f"baseline {before_name}; load average {load_average()}")
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for i in range(rounds):
        # alternate which mode goes first, so neither always meets the warmer cache
        order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
        for mode in order:
            emb, pool, depth = embedders[mode]
            speed = machine_speed()
            r = _round(data, emb, pool, batch, embed, pipeline_depth=depth, idle_cores=idle_cores,
                       overlapped=mode == "new" and new == "overlapped")
            r["machine_speed"] = speed
            results[mode].append(r)
            say(f"round {i + 1}/{rounds} {mode}: write {r['turns'] / r['write_s']:.0f} turns/s"
                + (f", index {r['turns'] / r['index_s']:.1f} turns/s" if embed else "")
                + f"; load average {r['load_before']} -> {r['load_after']}; machine {speed} GFLOP/CPU-s")
    for mode, rs in results.items():
        for r in rs:
            if embed and r["pending_after"] != 0:
                raise SystemExit(f"{mode}: {r['pending_after']} turns left unembedded")
    sup = {mode: [tuple(x) for x in rs[0]["superseded"]] for mode, rs in results.items()}
    if embed and sup["new"] != sup["baseline"]:
        diff = set(sup["new"]) ^ set(sup["baseline"])
        raise SystemExit(f"supersession differs between the modes: {sorted(diff)[:10]}")
    summary = {mode: _summary(rs, embed) for mode, rs in results.items()}
    out: dict[str, Any] = {
        "data": str(data_path), "turns": data.n_messages, "rounds": rounds, "batch": batch,
        "embedder": {"runtime": runtime, "load_s": round(load_s, 3), "workers": getattr(embedder, "workers", 1),
                     "new": new_name, "new_mode": new, "baseline": before_name, "baseline_pool_batches": baseline_pool or INDEX_POOL_BATCHES},
        "load_average": {"first": results["new"][0]["load_before"], "last": results["new"][-1]["load_after"]},
        # evals.bench.machine_speed before each round: the machine's own pace, which the load does not show
        "machine_speed": sorted(r["machine_speed"] for rs in results.values() for r in rs),
        "superseded_pairs": len(sup["new"]),
        "rounds_raw": {m: [{k: v for k, v in r.items() if k != "superseded"} for r in rs] for m, rs in results.items()},
        "summary": summary,
        "ratio": {k: ratio(summary["new"][k]["p50"], summary["baseline"][k]["p50"])
                  for k in summary["new"] if k.endswith("_per_s")},
    }
    return out


def _speed_range(rep: dict[str, Any]) -> str:
    speeds = rep.get("machine_speed") or []
    return f"{speeds[0]}-{speeds[-1]}" if speeds else "not measured"


def markdown(rep: dict[str, Any]) -> str:
    la = rep["load_average"]
    lines = [
        f"{rep['turns']} turns (LoCoMo), {rep['rounds']} rounds per mode, append_many chunks of {rep['batch']}; "
        f"embedder {rep['embedder']['runtime']} (loaded once, {rep['embedder']['load_s']} s, "
        f"{rep['embedder'].get('workers', 1)} workers; new: {rep['embedder'].get('new')}; "
        f"baseline: {rep['embedder'].get('baseline')}, pools of "
        f"{rep['embedder'].get('baseline_pool_batches')} batches); load average "
        f"{la['first']} -> {la['last']} (2 cores, shared); machine speed {_speed_range(rep)} GFLOP per CPU-second "
        f"(evals.bench.machine_speed); {rep['superseded_pairs']} supersession pairs, identical in both modes",
        "",
        "| what | new p50 | new p99 | baseline p50 | baseline p99 | new/baseline |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    overlapped = rep["embedder"].get("new_mode") == "overlapped"
    names = {"write_turns_per_s": "write path (append_many, embedding deferred), turns/s"
             + (" (new: until its last commit, beside the catch-up)" if overlapped else ""),
             "index_turns_per_s": "embedding catch-up, turns/s"
             + (" (new: turns / the catch-up's time after the last commit)" if overlapped else ""),
             "total_turns_per_s": "bulk ingest with embeddings (write + catch-up), turns/s",
             "idle_equivalent_turns_per_s": "bulk ingest with embeddings, idle-equivalent (evals/idle_estimate.py), "
                                            "turns/s",
             "chunk_ms": f"one append_many of {rep['batch']} turns, ms"}
    for k, label in names.items():
        if k not in rep["summary"]["new"]:
            continue
        n, b = rep["summary"]["new"][k], rep["summary"]["baseline"][k]
        r = rep["ratio"].get(k, ratio(b["p50"], n["p50"]))  # latencies: baseline/new
        lines.append(f"| {label} | {n['p50']} | {n['p99']} | {b['p50']} | {b['p99']} | {r}x |")
    lines += ["", "The write path is the same code in both modes (only the embedder differs): its ratio shows "
              "how much the load moved between runs. Per round: "
              + "; ".join(f"{m} " + ", ".join(f"{r['turns'] / r['index_s']:.1f}" for r in rep["rounds_raw"][m])
                          + " turns/s caught up" for m in rep["rounds_raw"] if "index_s" in rep["rounds_raw"][m][0])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo file (or any import format)")
    ap.add_argument("--rounds", type=bounded(1, unit="rounds"), default=3)
    # an append_many takes at most MAX_BATCH_MESSAGES: a larger chunk of a long conversation failed
    ap.add_argument("--batch", type=bounded(1, maximum=MAX_BATCH_MESSAGES, unit="messages"), default=1000,
                    help="messages per append_many (tiermem import: 1000)")
    ap.add_argument("--no-embed", action="store_true", help="the write path only")
    ap.add_argument("--baseline-pool", type=bounded(1, unit="batches"), default=None,
                    help="batches the baseline reads at once (default: the store's; 1: log order, as before pooling)")
    ap.add_argument("--baseline", choices=BASELINES, default="legacy",
                    help="legacy: the embedder before the bulk path; serial: this one, the catch-up unpipelined")
    ap.add_argument("--new", choices=list(NEWS), default="overlapped",
                    help="overlapped: `tiermem import --index` (the catch-up beside the writes); "
                         "sequential: the import, then the catch-up (`tiermem import`, then `tiermem index`)")
    ap.add_argument("--idle-estimate", action="store_true",
                    help="also estimate each run's time on an idle machine with this process's CPUs "
                         "(evals/idle_estimate.py): for a shared machine")
    ap.add_argument("--json", type=output_file(), default=None, help="write the full report here")
    args = ap.parse_args(argv)
    from tiermem.tiers.errors import DataFileError

    try:
        rep = run(args.data, rounds=args.rounds, batch=args.batch, embed=not args.no_embed,
                  baseline_pool=args.baseline_pool, baseline=args.baseline, new=args.new,
                  idle_cores=usable_cpus() if args.idle_estimate else None)
    except DataFileError as exc:  # a file `tiermem import` would refuse too: one line, exit 1
        raise SystemExit(f"error: {exc}") from None
    if args.json is not None:
        args.json.write_text(json.dumps(rep, indent=2))
    print(markdown(rep))


if __name__ == "__main__":
    main()
