"""Start-up benchmark: each command as a fresh process, against a baseline checkout.

    python -m tiermem.evals.bench_startup [--runs 5] [--baseline-ref REF | --baseline-src DIR | --no-baseline]
                                  [--turns 1000] [--json PATH] [--markdown] [--skip-inprocess]

What it measures, for this tree and the baseline (by default the commit before the fast
start work, unpacked with `git archive` into a temporary dir), interleaved run by run so
both see the same machine load:

- wall time and peak RSS (`ru_maxrss` from `wait4`, the figure `/usr/bin/time -v`
  prints) of `tiermem --help`, `python -c "import tiermem"`, `tiermem append` (a plain
  and a load-bearing message: the latter made the old code search by meaning, i.e. load
  the model), `tiermem history`, `tiermem context` on a `--turns`-turn conversation, and
  a Python process that opens `Memory` and asks for its first `context()`;
- `tiermem serve` to its first `/healthz` 200, and (this tree) to `"embedder": "ready"`;
- `python -X importtime -c "import tiermem"`: the cumulative import time;
- in this process: query embedding latency and bulk embedding throughput of the ONNX
  runtime against the sentence-transformers pipeline on LoCoMo texts, and the worst
  cosine between their vectors.

One warm-up run per case is discarded (page cache warm, and the bytecode written: the
processes keep it under a temporary `PYTHONPYCACHEPREFIX`, as an installed package has
its own, whatever PYTHONDONTWRITEBYTECODE says; `--no-bytecode` measures processes that
compile every module from source instead); then `--runs` runs, of which
the median and p99 (nearest rank: with 5 runs, the slowest) are printed, with the
baseline/new ratio (above 1: this tree is faster). The load average is printed before
and after: the machine is shared, read the figures with it. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiermem.evals.bench import bounded, dist, load_average, machine_speed, output_file, ratio, say

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE_REF = "e22d172"  # main before the fast-start branch
DEFAULT_DATA = ROOT.parent.parent / "shared" / "data" / "locomo-dev.json"
CONV = "bench"
QUERY = "When did Caroline go to the LGBTQ support group?"
HEALTHZ_POLL_S = 0.02
WARM_QUERIES_S = 1.0  # in-process query latency: the warm-up lasts at least this long
QUERY_ROUNDS = 3  # in-process query latency: the sides take turns, this many rounds each
PLAIN_QUERY_SIDE = "onnx, plain query graph"  # the query session before the fused graph and spinning
SERVE_TIMEOUT_S = 180.0
MB = 1024.0  # ru_maxrss is in KiB on Linux


def _texts(data: Path, n: int) -> list[str]:
    """`n` turn texts of LoCoMo (repeated if it has fewer), or made-up ones without it."""
    out: list[str] = []
    if data.is_file():
        for sample in json.loads(data.read_text("utf-8")):
            conv = sample.get("conversation", {})
            for key in sorted(k for k in conv if re.fullmatch(r"session_\d+", k)):
                out += [str(t.get("text") or "") for t in conv[key] if t.get("text")]
    if not out:
        out = [f"turn {i}: we talked about trips, hotels and the budget for {i % 17} days" for i in range(n)]
    return [out[i % len(out)] for i in range(n)]


def _questions(data: Path, n: int) -> list[str]:
    qs: list[str] = []
    if data.is_file():
        for sample in json.loads(data.read_text("utf-8")):
            qs += [str(q["question"]) for q in sample.get("qa", []) if q.get("question")]
    return (qs or [QUERY])[:n] if len(qs) >= n else [(qs or [QUERY])[i % max(1, len(qs))] for i in range(n)]


# Where the measured processes keep their bytecode (None: none is written, every process
# compiles every module it imports from source, as under PYTHONDONTWRITEBYTECODE=1).
_BYTECODE: dict[str, Path | None] = {"dir": None}


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    env.setdefault("OMP_NUM_THREADS", "1")  # as the tests and `make bench` run the model
    if _BYTECODE["dir"] is not None:
        # an installed package has its bytecode (pip compiles at install): the processes
        # write theirs under a prefix of the run's own (both sides alike, the source trees
        # untouched), so the warm-up run compiles and the measured ones read it
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(_BYTECODE["dir"])
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one fresh process; raises if it fails."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}: {err[-2000:]}")
    return wall, usage.ru_maxrss / MB


def _model_files() -> list[Path]:
    """The files a model load reads: the bundled model and this tree's ONNX export."""
    from tiermem.tiers.embed import bundled_model_path
    from tiermem.tiers.embed_onnx import default_cache_dir

    files = [p for p in bundled_model_path().rglob("*") if p.is_file()]
    return files + [p for p in default_cache_dir().rglob("*") if p.is_file()]


def _drop_from_page_cache(files: list[Path]) -> None:
    """Ask the kernel to forget these files' cached pages (POSIX_FADV_DONTNEED: only
    these files, nothing else of the shared machine's cache)."""
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthz(port: int) -> dict[str, Any] | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return json.loads(body) if resp.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None


def _serve(src: Path, data: Path, cwd: Path) -> tuple[float, float | None]:
    """(seconds to the first /healthz 200, seconds to "embedder": "ready" or None)."""
    port = _free_port()
    cmd = [sys.executable, "-c", "from tiermem.cli import main; main()", "--data-dir", str(data), "serve",
           "--no-auth", "--port", str(port), "--log-level", "warning"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=_env(src), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first: float | None = None
    ready: float | None = None
    try:
        while time.perf_counter() - started < SERVE_TIMEOUT_S:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited {proc.returncode} before answering")
            body = _healthz(port)
            if body is not None:
                now = time.perf_counter() - started
                first = now if first is None else first
                state = body.get("tiers", {}).get("embedder")
                if state in (None, "ready"):  # the old service warmed up before answering
                    ready = now
                    break
                if state == "failed":
                    break
            time.sleep(HEALTHZ_POLL_S)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if first is None:
        raise RuntimeError("serve never answered /healthz")
    return first, ready


def _import_time(src: Path, cwd: Path) -> float:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tiermem"], env=_env(src), cwd=cwd,
                         capture_output=True, text=True, check=True)
    for line in out.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "tiermem":
            return int(parts[1]) / 1e6
    raise RuntimeError("no tiermem line in -X importtime output")


def _seed(data: Path, texts: list[str], src: Path) -> None:
    """A `len(texts)`-turn conversation, embedded, written by `src`'s code: each side gets
    a database of its own schema (a baseline refuses a database newer than itself)."""
    code = (
        "import sys, json; from tiermem import Memory, Config\n"
        "texts = json.load(sys.stdin)\n"
        "with Memory(Config(data_dir=sys.argv[1]), hot=False, background_indexing=False) as m:\n"
        "    roles = ['user', 'assistant']\n"
        "    for i in range(0, len(texts), 200):\n"
        "        m.append_many(sys.argv[2], [{'role': roles[(i + j) % 2], 'content': t}\n"
        "                                    for j, t in enumerate(texts[i:i + 200])])\n"
        "    m.catch_up()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(data), CONV], input=json.dumps(texts), text=True,
                   env=_env(src), cwd=src, check=True, stdout=subprocess.DEVNULL)


def _stop_redis(data: Path) -> None:
    # this tree's launcher stops either side's Redis (a baseline may predate tiermem.tiers)
    subprocess.run([sys.executable, "-c", "import sys; from tiermem.tiers.redis_server import EmbeddedRedis; "
                    "EmbeddedRedis(sys.argv[1]).stop()", str(data)], env=_env(ROOT), cwd=ROOT,
                   capture_output=True)


def _baseline_src(args: argparse.Namespace, tmp: Path) -> Path | None:
    if args.no_baseline:
        return None
    if args.baseline_src is not None:
        return Path(args.baseline_src).resolve()
    dest = tmp / "baseline"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline_ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def _cases(data: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-c", "from tiermem.cli import main; main()", "--data-dir", str(data)]
    first_context = ("import sys; from tiermem import Memory, Config\n"
                     "with Memory(Config(data_dir=sys.argv[1])) as m:\n"
                     f"    m.context({CONV!r}, {QUERY!r}, 2000)\n")
    return {
        "tiermem --help": [*cli, "--help"],
        "import tiermem": [sys.executable, "-c", "import tiermem"],
        "append (plain)": [*cli, "append", CONV, "--role", "assistant", "--content", "Sure, I can help with that."],
        "append (load-bearing)": [*cli, "append", CONV, "--role", "user", "--content", "No red-eyes, please."],
        "history --limit 20": [*cli, "history", CONV, "--limit", "20"],
        "context (1k turns)": [*cli, "context", CONV, "-q", QUERY, "--budget", "2000"],
        "Memory() + first context()": [sys.executable, "-c", first_context, str(data)],
    }


def measure_processes(new_src: Path, base_src: Path | None, runs: int, turns: int, data_file: Path,
                      tmp: Path, only: list[str] | None = None) -> dict[str, Any]:
    sides = {"new": new_src} | ({"baseline": base_src} if base_src is not None else {})
    data = {name: tmp / f"data-{name}" for name in sides}
    say(f"seeding a {turns}-turn conversation")
    texts = _texts(data_file, turns)
    for name, src in sides.items():
        _seed(data[name], texts, src)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        case_names = [c for c in _cases(data["new"]) if not only or any(o in c for o in only)]
        for case in case_names:
            say(f"{case}: 1 warm-up + {runs} runs per side")
            for i in range(runs + 1):
                for name, src in sides.items():
                    wall, rss = _run(_cases(data[name])[case], _env(src), tmp)
                    if i:  # the first run warms the page cache
                        r = results.setdefault(case, {}).setdefault(name, {"wall": [], "rss": []})
                        r["wall"].append(wall)
                        r["rss"].append(rss)
        if not only or any(o in "context (model files not in the page cache)" for o in only):
            say("context with the model files dropped from the page cache: 1 run per side")
            for name, src in sides.items():
                _drop_from_page_cache(_model_files())
                wall, rss = _run(_cases(data[name])["context (1k turns)"], _env(src), tmp)
                results.setdefault("context (model files not in the page cache)", {})[name] = {
                    "wall": [wall], "rss": [rss]}
        serve_runs = runs + 1 if not only or any(o in "serve" for o in only) else 0
        if serve_runs:
            say(f"serve to /healthz: 1 warm-up + {runs} runs per side")
        for i in range(serve_runs):
            for name, src in sides.items():
                first, ready = _serve(src, data[name], tmp)
                if i:
                    r = results.setdefault("serve: first /healthz 200", {}).setdefault(name, {"wall": []})
                    r["wall"].append(first)
                    if ready is not None:
                        results.setdefault("serve: embedder ready", {}).setdefault(
                            name, {"wall": []})["wall"].append(ready)
        for i in range(runs + 1 if not only or any(o in "importtime" for o in only) else 0):
            for name, src in sides.items():
                t = _import_time(src, tmp)
                if i:
                    results.setdefault("-X importtime: tiermem", {}).setdefault(name, {"wall": []})["wall"].append(t)
    finally:
        for name in sides:
            _stop_redis(data[name])
    return {case: {name: {k: dist(v) for k, v in m.items()} for name, m in by.items()}
            for case, by in results.items()}


def measure_in_process(data_file: Path, n_queries: int = 100, n_turns: int = 1024,
                       rounds: int = QUERY_ROUNDS) -> dict[str, Any]:
    """The ONNX runtime against the pipeline, in this process: the same texts, memo off.
    Queries are also asked of the ONNX runtime as it was before the fused query graph
    (`fused_queries=False`, `query_spin=False`), the sides taking turns round by round.
    Both ONNX sides answer from their query session, as on an idle machine: this
    benchmark's own processes may keep the machine near the line above which a query
    stays on the one-thread session (tiers.embed_onnx.spare_core), and a side measured
    on one path and the other on the other would compare nothing."""
    import numpy as np

    from tiermem.tiers.embed import SentenceTransformerEmbedder
    from tiermem.tiers.embed_onnx import FastEmbedder

    queries = _questions(data_file, n_queries)
    texts = _texts(data_file, n_turns)
    out: dict[str, Any] = {}
    vecs = {}
    before = FastEmbedder(runtime="onnx", fused_queries=False)
    before.query_spin = False
    sides: dict[str, Any] = {"onnx": FastEmbedder(runtime="onnx"), PLAIN_QUERY_SIDE: before,
                             "torch pipeline": SentenceTransformerEmbedder()}
    embed_q: dict[str, Callable[[list[str]], Any]] = {}
    for name, emb in sides.items():
        started = time.perf_counter()
        emb.embed(["warm-up"])
        out[name] = {"load_s": round(time.perf_counter() - started, 3)}
        emb.memo_size = 0
        if isinstance(emb, FastEmbedder):
            emb.prepare_query_graph()  # its query session built now, not during the timed queries
        embed_q[name] = getattr(emb, "embed_query", emb.embed)
        # a warm process: at least 10 queries and one second of them (what a process
        # builds after its first queries, such as the ONNX runtime's query session, is up)
        warm_until = time.perf_counter() + WARM_QUERIES_S
        for i in range(10 ** 6):
            embed_q[name]([queries[i % len(queries)]])
            if i >= 9 and time.perf_counter() >= warm_until:
                break
    lat: dict[str, list[float]] = {name: [] for name in sides}
    onnx_sides = [emb for emb in sides.values() if isinstance(emb, FastEmbedder)]
    for emb in onnx_sides:
        emb.query_session = "always"
    for _ in range(rounds):
        for name in sides:
            for q in queries:
                t = time.perf_counter()
                embed_q[name]([q])
                lat[name].append((time.perf_counter() - t) * 1000)
    # the query vectors themselves, fused graph against the stored vectors' (one text each)
    fused = np.stack([sides["onnx"].embed_query([q])[0] for q in queries])
    for emb in onnx_sides:
        emb.query_session = "spare"
    for name, emb in sides.items():
        out[name]["query_ms"] = dist(lat[name], 2)
        if isinstance(emb, FastEmbedder):
            out[name]["query_graph"] = emb.query_graph
        if name == PLAIN_QUERY_SIDE:
            continue
        t = time.perf_counter()
        vecs[name] = np.concatenate([emb.embed(texts[i:i + 64]) for i in range(0, len(texts), 64)])
        out[name]["bulk_turns_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    out["cosine_min"] = round(float(np.min(np.sum(vecs["onnx"] * vecs["torch pipeline"], axis=1))), 7)
    stored = np.stack([sides["onnx"].embed([q])[0] for q in queries])
    out["query_cosine_min"] = round(float(np.min(np.sum(fused * stored, axis=1))), 7)
    return out


def render(report: dict[str, Any]) -> str:
    code = ("modules read from bytecode (compiled by the warm-up run, as an installed package's)"
            if report.get("bytecode", True) else "every module compiled from source in every process")
    speed = (f"; machine speed {report['speed_before']} -> {report['speed_after']} GFLOP per CPU-second "
             "(evals.bench.machine_speed)" if "speed_before" in report else "")
    lines = [f"load average before {report['load_before']}, after {report['load_after']} "
             f"({os.cpu_count()} cores, shared){speed}; {report['runs']} runs per case, medians and p99; {code}",
             "",
             "| what (fresh process) | new p50 | new p99 | baseline p50 | baseline p99 | speed-up | "
             "new peak RSS | baseline peak RSS |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case, by in report["processes"].items():
        new, base = by.get("new", {}), by.get("baseline", {})
        nw, bw = new.get("wall", {}), base.get("wall", {})
        unit = "s"

        def cell(d: dict[str, Any], k: str, unit: str = unit) -> str:
            return f"{d[k]:.2f} {unit}" if d else "-"

        sp = ratio(bw.get("p50"), nw.get("p50"))
        lines.append(f"| {case} | {cell(nw, 'p50')} | {cell(nw, 'p99')} | {cell(bw, 'p50')} | {cell(bw, 'p99')} | "
                     f"{f'{sp:g}x' if sp else '-'} | {cell(new.get('rss', {}), 'p50', 'MiB')} | "
                     f"{cell(base.get('rss', {}), 'p50', 'MiB')} |")
    inproc = report.get("in_process")
    if inproc:
        lines += ["", "| in one warm process | onnx | torch pipeline | speed-up |", "|---|---:|---:|---:|"]
        o, t = inproc["onnx"], inproc["torch pipeline"]
        lines.append(f"| query embedding p50 / p99 | {o['query_ms']['p50']:.2f} / {o['query_ms']['p99']:.2f} ms | "
                     f"{t['query_ms']['p50']:.2f} / {t['query_ms']['p99']:.2f} ms | "
                     f"{ratio(t['query_ms']['p50'], o['query_ms']['p50'])}x |")
        plain = inproc.get(PLAIN_QUERY_SIDE)
        if plain:
            lines.append(f"| query embedding p50 / p99, onnx before (plain graph, no spinning) | "
                         f"{plain['query_ms']['p50']:.2f} / {plain['query_ms']['p99']:.2f} ms | - | "
                         f"{ratio(plain['query_ms']['p50'], o['query_ms']['p50'])}x |")
        lines.append(f"| bulk embedding (LoCoMo turns, batches of 64) | {o['bulk_turns_per_s']:g} turns/s | "
                     f"{t['bulk_turns_per_s']:g} turns/s | {ratio(o['bulk_turns_per_s'], t['bulk_turns_per_s'])}x |")
        lines.append(f"| model load in the process | {o['load_s']:.2f} s | {t['load_s']:.2f} s | "
                     f"{ratio(t['load_s'], o['load_s'])}x |")
        lines.append(f"\nworst cosine between the two runtimes' vectors over those turns: {inproc['cosine_min']}")
        if "query_cosine_min" in inproc:
            lines.append(f"worst cosine between a query's vector ({o.get('query_graph')}) and the same text's "
                         f"stored one: {inproc['query_cosine_min']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=bounded(1, unit="runs"), default=5, help="measured runs per case and side (after one warm-up)")
    ap.add_argument("--turns", type=bounded(1, unit="turns"), default=1000, help="turns of the conversation context() reads")
    ap.add_argument("--baseline-ref", default=DEFAULT_BASELINE_REF, help="git ref of the baseline")
    ap.add_argument("--baseline-src", default=None, help="a directory with the baseline's source instead")
    ap.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON for the texts")
    ap.add_argument("--skip-inprocess", action="store_true", help="skip the in-process runtime comparison")
    ap.add_argument("--json", type=output_file(create_parents=True), default=None, help="write the report here")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="measure processes that compile every module from source (no bytecode kept)")
    ap.add_argument("--only", action="append", default=None,
                    help="only the cases whose name contains this (repeatable), e.g. --only context")
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"runs": args.runs, "load_before": load_average(), "speed_before": machine_speed()}
    with tempfile.TemporaryDirectory(prefix="tiermem-startup-") as tmp_s:
        tmp = Path(tmp_s)
        _BYTECODE["dir"] = None if args.no_bytecode else tmp / "pycache"
        report["bytecode"] = not args.no_bytecode
        base = _baseline_src(args, tmp)
        report["baseline"] = None if base is None else (args.baseline_src or args.baseline_ref)
        report["processes"] = measure_processes(ROOT, base, args.runs, args.turns, args.data, tmp, args.only)
    if not args.skip_inprocess:
        say("in-process: query latency and bulk throughput, onnx vs the torch pipeline")
        report["in_process"] = measure_in_process(args.data)
    report["load_after"] = load_average()
    report["speed_after"] = machine_speed()
    text = render(report)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
