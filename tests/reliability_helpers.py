"""Shared machinery of the reliability suite (tests/test_reliability_*.py).

- `start_server`: a real `tiermem serve` process on loopback (one per test file; its
  startup loads the embedding model, ~10 s on a loaded 2-core machine).
- `Zygote`: for the crash test, a process that loads the model once and then forks real
  server processes on demand, so that a SIGKILL + restart costs a second, not the model
  load; the forked child runs the same app (`create_app` + uvicorn) as `tiermem serve`.
- `load_worker`: a client process (multiprocessing spawn, httpx only) that appends and
  reads for T seconds (or until told to stop) and records every acknowledged append and
  every "maybe" (an append whose answer never came back: it may or may not have
  committed); `run_load` starts the load when every client says it is ready, and
  counts acknowledged appends as they come (`ack_counter`), for a `during` that acts on them.
- `check_log`: every acknowledged append is in the log exactly once at its position,
  positions are contiguous, nothing appears that nobody sent.
- `record_figure`: prints a measured figure and, with TIERMEM_RELIABILITY_OUT set, adds it
  as a JSON line to that file (evals/reliability.py reads it).

This module imports only the standard library and httpx at the top, so spawned client
processes start fast; pytest and tiermem are imported where needed.

Soak runs: TIERMEM_SOAK=1 (and `-m soak`, as `make soak` does) selects the long versions;
the `soak` marker is registered in pyproject.toml and deselected by default.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from ports import free_port

TOKEN_A = "tokA-alice-reliability-0123456789"
TOKEN_B = "tokB-bob-reliability-0123456789"
A = {"Authorization": f"Bearer {TOKEN_A}"}
B = {"Authorization": f"Bearer {TOKEN_B}"}
TOKENS = {TOKEN_A: "alice", TOKEN_B: "bob"}
TOKEN_METRICS = "tok-metrics-reliability-0123456789"
M = {"Authorization": f"Bearer {TOKEN_METRICS}"}  # /metrics counts every namespace: not a tenant's token
SOAK = os.environ.get("TIERMEM_SOAK", "") not in ("", "0")
STARTUP_TIMEOUT_S = 240.0
TIERMEM = str(Path(sys.executable).with_name("tiermem"))
MARKER = "soak: long reliability runs (TIERMEM_SOAK=1, `make soak`)"


def record_figure(name: str, value: float | int | str, unit: str = "", command: str = "") -> None:
    """Print a measured figure; with TIERMEM_RELIABILITY_OUT set, append it there as JSON."""
    print(f"[reliability] {name} = {value} {unit}".rstrip(), flush=True)
    out = os.environ.get("TIERMEM_RELIABILITY_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"name": name, "value": value, "unit": unit, "command": command}) + "\n")



def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(
        {
            "TIERMEM_AUTH_TOKENS": json.dumps(TOKENS),
            "TIERMEM_METRICS_TOKENS": json.dumps([TOKEN_METRICS]),
            "TIERMEM_SCHEDULER_INTERVAL_S": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
        }
    )
    if "TIERMEM_RELIABILITY_OUT" in os.environ:
        env["TIERMEM_RELIABILITY_OUT"] = os.environ["TIERMEM_RELIABILITY_OUT"]
    env.update(extra or {})
    return env


@dataclass
class Server:
    data_dir: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    pid: int | None = None  # the server process (the Popen's, or a zygote's child)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)


def wait_ready(url: str, alive: Any, log: Path, timeout: float = STARTUP_TIMEOUT_S) -> None:
    """Poll /healthz until 200; `alive()` False means the server died."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise RuntimeError(f"tiermem serve exited:\n{_tail(log)}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"tiermem serve did not come up:\n{_tail(log)}")
        time.sleep(0.1)


def _tail(log: Path, n: int = 6000) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def start_server(data_dir: Path, log: Path, *, port: int | None = None, env: dict[str, str] | None = None) -> Server:
    """A real `tiermem serve` on loopback, ready to answer."""
    port = port or free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [TIERMEM, "--data-dir", str(data_dir), "serve", "--port", str(port), "--log-level", "warning"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env(env),
        )
    srv = Server(data_dir, port, log, proc, proc.pid)
    try:
        wait_ready(srv.url, lambda: proc.poll() is None, log)
    except BaseException:
        stop_server(srv)
        raise
    return srv


def stop_server(srv: Server) -> None:
    """SIGTERM, then SIGKILL after 20 s; always reaps."""
    proc = srv.proc
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_redis(data_dir: Path) -> None:
    from tiermem.tiers.redis_server import EmbeddedRedis

    EmbeddedRedis(data_dir).stop()


@contextmanager
def serving(data_dir: Path, log: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """start_server ... stop_server and stop the embedded Redis of `data_dir`."""
    srv = start_server(data_dir, log, env=env)
    try:
        yield srv
    finally:
        stop_server(srv)
        stop_redis(data_dir)


# -- the zygote: one model load, many real server processes ----------------------------------------

_ZYGOTE_CODE = r"""
import os, sys, signal, json
os.environ.setdefault("OMP_NUM_THREADS", "1")
data_dir, port = sys.argv[1], int(sys.argv[2])
from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import build_embedder
emb = build_embedder()  # the runtime `tiermem serve` builds (the ONNX export)
emb.embed(["warm-up"])
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    while True:  # reap children killed by the test
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    if cmd == "start":
        pid = os.fork()
        if pid == 0:
            try:
                import uvicorn
                from tiermem.service import create_app
                cfg = Config(data_dir=data_dir, http_port=port)
                mem = Memory(cfg, embedder=emb)
                app = create_app(cfg, mem)
                uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
            finally:
                os._exit(0)
        print(pid, flush=True)
    elif cmd == "exit":
        break
"""


class Zygote:
    """Loads the model once; `start()` forks a real server process (returns its pid)."""

    def __init__(self, data_dir: Path, log: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log = log
        self._log_f = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE_CODE, str(data_dir), str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_f,
            env=server_env(),
            text=True,
            cwd=str(Path(__file__).resolve().parent.parent),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise RuntimeError(f"zygote failed: {line!r}\n{_tail(log)}")
        self.server = Server(data_dir, self.port, log)

    def start(self) -> Server:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("start\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        self.server.pid = pid
        wait_ready(self.server.url, lambda: _pid_alive(pid), self.log)
        return self.server

    def kill9(self) -> None:
        if self.server.pid is not None:
            try:
                os.kill(self.server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            # wait until the port is free of the dead server: connections are refused
            deadline = time.monotonic() + 10
            while _pid_alive(self.server.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.server.pid = None

    def close(self) -> None:
        self.kill9()
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("exit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.proc.kill()
                self.proc.wait()
        self._log_f.close()


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


# -- load -----------------------------------------------------------------------------------------------


@dataclass
class WorkerResult:
    acked: list[tuple[str, int, str]] = field(default_factory=list)  # (conv, position, content)
    maybe: list[tuple[str, str]] = field(default_factory=list)  # (conv, content): no answer came back
    refused: list[tuple[str, str, int, str]] = field(default_factory=list)  # answered, not 201
    context_ms: list[float] = field(default_factory=list)
    context_status: dict[str, int] = field(default_factory=dict)
    context_degraded: int = 0
    context_errors: list[str] = field(default_factory=list)  # transport errors (server down)
    appends_s: float = 0.0


def conv_ids(n: int) -> list[str]:
    return [f"load-{i:03d}" for i in range(n)]


LOAD_CONTEXT = multiprocessing.get_context("spawn")  # client processes: a fresh interpreter, httpx only
WORKERS_READY_TIMEOUT_S = 120.0  # every client spawned and its imports done, on a loaded machine
WORKER_ALIVE_POLL_S = 0.01


def ack_counter() -> Any:
    """A count of acknowledged appends, shared with the load's client processes (pass it as
    `run_load(acks=...)`): `during` reads `.value` to act on the load as it goes."""
    return LOAD_CONTEXT.Value("q", 0)


def load_worker(
    url: str, token: str, convs: list[str], seconds: float, wid: int, out: str, read_share: float,
    ready: Any, go: Any, stop: Any, acks: Any,
) -> None:
    """Append and read from the moment `go` is set for `seconds` or until `stop` is set;
    write a WorkerResult as JSON to `out`. Counts itself in `ready` once it can send (so
    the load starts when every client can, not after a guessed delay) and each
    acknowledged append in `acks`. Never retries an append: an answer that did not come
    back is a 'maybe'."""
    rng = random.Random(wid)
    res = WorkerResult()
    headers = {"Authorization": f"Bearer {token}"}
    seq = 0
    with httpx.Client(base_url=url, timeout=30.0, headers=headers) as c:
        with ready.get_lock():
            ready.value += 1
        if not go.wait(WORKERS_READY_TIMEOUT_S + seconds):
            return  # run_load gave up waiting for the others: it fails and kills this process
        t_start = time.time()
        end = t_start + seconds
        while time.time() < end and not stop.is_set():
            conv = rng.choice(convs)
            if rng.random() < read_share:
                t0 = time.perf_counter()
                try:
                    r = c.post(f"/v1/conversations/{conv}/context", json={"query": "what did we decide?", "budget": 300})
                except httpx.TransportError as exc:
                    res.context_errors.append(type(exc).__name__)
                    time.sleep(0.05)
                    continue
                res.context_ms.append((time.perf_counter() - t0) * 1000)
                key = str(r.status_code)
                res.context_status[key] = res.context_status.get(key, 0) + 1
                if r.status_code == 200 and r.json()["plan"].get("degraded"):
                    res.context_degraded += 1
                continue
            content = f"w{wid}-{seq} note about topic {seq % 17}"
            seq += 1
            try:
                r = c.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "content": content})
            except httpx.ConnectError:
                # refused before anything was sent: certainly not committed
                res.refused.append((conv, content, 0, "connect"))
                time.sleep(0.05)
                continue
            except httpx.TransportError:
                res.maybe.append((conv, content))
                time.sleep(0.05)
                continue
            if r.status_code == 201:
                res.acked.append((conv, int(r.json()["position"]), content))
                with acks.get_lock():
                    acks.value += 1
            else:
                res.refused.append((conv, content, r.status_code, r.text[:200]))
    res.appends_s = time.time() - t_start
    Path(out).write_text(json.dumps(res.__dict__))


def run_load(
    url: str, convs: list[str], seconds: float, workers: int, tmp: Path, *, token: str = TOKEN_A,
    during: Any = None, read_share: float = 0.3, acks: Any = None, stop_after_during: float | None = None,
) -> list[WorkerResult]:
    """`workers` spawned client processes for `seconds` from the moment all of them are
    ready; `during(start_at)` runs in this process meanwhile (kills, restarts). With
    `stop_after_during`, the load ends that many seconds after `during` returns (`seconds`
    is then only a cap). `acks` (`ack_counter()`): counts the acknowledged appends as they
    come. Returns the clients' results."""
    acks = acks if acks is not None else ack_counter()
    ready = LOAD_CONTEXT.Value("i", 0)
    go, stop = LOAD_CONTEXT.Event(), LOAD_CONTEXT.Event()
    outs = [tmp / f"worker-{i}.json" for i in range(workers)]
    procs = [
        LOAD_CONTEXT.Process(target=load_worker,
                             args=(url, token, convs, seconds, i, str(o), read_share, ready, go, stop, acks))
        for i, o in enumerate(outs)
    ]
    for p in procs:
        p.start()
    try:
        deadline = time.monotonic() + WORKERS_READY_TIMEOUT_S
        while ready.value < workers:  # a signal from each client, not a guessed spawn time
            dead = [p.exitcode for p in procs if not p.is_alive()]
            assert not dead, f"a load worker exited before it was ready: {dead}"
            assert time.monotonic() < deadline, f"{ready.value} of {workers} load workers ready"
            time.sleep(WORKER_ALIVE_POLL_S)
        start_at = time.time()
        go.set()
        if during is not None:
            during(start_at)
            if stop_after_during is not None:
                time.sleep(stop_after_during)
                stop.set()
        for p in procs:
            p.join(timeout=seconds + 120)
    finally:
        stop.set()
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    results = []
    for p, o in zip(procs, outs, strict=True):
        assert p.exitcode == 0, f"load worker exited with {p.exitcode}"
        results.append(WorkerResult(**json.loads(o.read_text())))
    return results


@dataclass
class LogCheck:
    acked: int
    maybe: int
    maybe_committed: int
    lost: list[tuple[str, int, str]]
    duplicated: list[str]
    misplaced: list[tuple[str, int, str, list[int]]]
    phantoms: list[str]
    gaps: list[str]
    refused_but_present: list[str]


def check_log(http: httpx.Client, headers: dict[str, str], convs: list[str], results: list[WorkerResult],
              seeded: dict[str, list[str]]) -> LogCheck:
    """Compare every conversation's history with what the clients were told."""
    acked = [a for r in results for a in r.acked]
    maybe = {(c, m) for r in results for c, m in r.maybe}
    refused = {(x[0], x[1]) for r in results for x in r.refused}
    lost: list[tuple[str, int, str]] = []
    dup: list[str] = []
    misplaced: list[tuple[str, int, str, list[int]]] = []
    phantoms: list[str] = []
    gaps: list[str] = []
    refused_present: list[str] = []
    maybe_committed = 0
    where: dict[tuple[str, str], list[int]] = {}
    for conv in convs:
        r = http.get(f"/v1/conversations/{conv}/history", headers=headers)
        assert r.status_code == 200, r.text
        msgs = r.json()["messages"]
        positions = [m["position"] for m in msgs]
        if positions != list(range(len(positions))):
            gaps.append(f"{conv}: {positions[:5]}...{positions[-5:]} (n={len(positions)})")
        for m in msgs:
            where.setdefault((conv, m["message"]["content"]), []).append(m["position"])
    acked_keys = set()
    for conv, pos, content in acked:
        acked_keys.add((conv, content))
        got = where.get((conv, content), [])
        if not got:
            lost.append((conv, pos, content))
        elif len(got) > 1:
            dup.append(f"{conv}:{content} at {got}")
        elif got[0] != pos:
            misplaced.append((conv, pos, content, got))
    for (conv, content), got in where.items():
        if (conv, content) in acked_keys or content in seeded.get(conv, []):
            continue
        if (conv, content) in maybe:
            maybe_committed += 1
            if len(got) > 1:
                dup.append(f"{conv}:{content} at {got} (maybe)")
        elif (conv, content) in refused:
            refused_present.append(f"{conv}:{content}")
        else:
            phantoms.append(f"{conv}:{content}")
    return LogCheck(len(acked), len(maybe), maybe_committed, lost, dup, misplaced, phantoms, gaps, refused_present)


def assert_log_ok(chk: LogCheck) -> None:
    assert not chk.lost, f"acknowledged appends lost: {chk.lost[:10]}"
    assert not chk.duplicated, f"appends duplicated: {chk.duplicated[:10]}"
    assert not chk.misplaced, f"acknowledged at one position, found at another: {chk.misplaced[:10]}"
    assert not chk.phantoms, f"messages nobody sent: {chk.phantoms[:10]}"
    assert not chk.gaps, f"positions not contiguous: {chk.gaps[:10]}"
    assert not chk.refused_but_present, f"refused appends were written: {chk.refused_but_present[:10]}"


def seed(http: httpx.Client, headers: dict[str, str], convs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for conv in convs:
        content = f"seed of {conv}: we decided on the blue plan"
        r = http.post(f"/v1/conversations/{conv}/messages", json={"role": "user", "content": content}, headers=headers)
        assert r.status_code == 201, r.text
        out[conv] = [content]
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def poll(fn: Any, timeout: float, interval: float = 0.05) -> tuple[bool, float]:
    """Call fn() until it returns truthy or timeout; (ok, seconds waited)."""
    t0 = time.monotonic()
    while True:
        if fn():
            return True, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            return False, time.monotonic() - t0
        time.sleep(interval)
