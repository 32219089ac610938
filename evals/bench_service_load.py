"""The HTTP service under concurrent load: N `tiermem serve` processes, M customers.

    python -m tiermem.evals.bench_service_load [--processes 1,2] [--clients 4,16] [--seconds 60] [--json]

For each (N, M): a fresh data dir; N real `tiermem serve` processes, each on its own
port, on that one SQLite file and the embedded Redis they share (the first to start
launches it); `auth_tokens` holds one token per customer, bound to the customer's own
namespace. M customers, each a thread with a `tiermem.client.Client` per process, send
their requests round-robin over the processes as a load balancer would, for `--seconds`
(or `--turns` turns each). A turn, in one of the customer's few open conversations:
append the user's message, `context(budget=2000)` for about one turn in two
(CONTEXT_SHARE: one context per two appends), append the reply; now and then a
`search` of the namespace, a `history` of the conversation, and rarely a
`delete_conversation` (the conversation is then replaced by a new one). Clients never
retry (`retries=0`): every refusal is seen.

Printed per (N, M): requests/s, p50/p99/max (ms) per route; every non-2xx answer by
status and body; the requests slower than SLOW_S (a lock or a queue held them); and the
data check, made after the load through the service with each customer's own token:

- every conversation's history is exactly what its customer appended: the roles and
  texts in the order the acknowledgements came, at the positions they answered (nothing
  lost, nothing twice); an append whose answer never came is reported, not guessed;
- every erased conversation answers 404;
- a customer lists exactly its live conversations, and another customer's namespace
  answers 403 (its conversations 404) to its token.

The clients share this process with the servers' CPUs: the machine's load average and
core count are printed beside the figures, which measure the whole (a 2-core machine
runs clients, servers and Redis on the same two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tiermem.client import Client
from tiermem.errors import ConversationNotFound, ServiceAuthError, TiermemError
from tiermem.evals.bench import bounded, dist, int_list, load_average, say

DEFAULT_PROCESSES = (1, 2)
DEFAULT_CLIENTS = (4, 16)
DEFAULT_SECONDS = 60.0
# shortest --seconds: a shorter run measures the customers opening their conversations, not load
MIN_SECONDS = 1.0
CONTEXT_BUDGET = 2000  # tokens, what an agent sends with a turn
CONTEXT_SHARE = 0.5  # of turns: one context per two appends (a turn appends two)
SEARCH_SHARE = 0.1  # of turns
HISTORY_SHARE = 0.1  # of turns
DELETE_SHARE = 0.02  # of turns: a customer erasing a conversation on request
CONVERSATIONS_PER_CUSTOMER = 3  # open at a time
SLOW_S = 1.0  # a request waiting past this is a finding: no lock should be held that long
STARTUP_TIMEOUT_S = 240.0  # N processes loading the model on a busy 2-core machine
REQUEST_TIMEOUT_S = 60.0  # a request still unanswered after this counts as a hang
STOP_TIMEOUT_S = 30.0  # SIGTERM to exit, before SIGKILL
HEALTH_POLL_S = 0.2
BODY_EXCERPT_CHARS = 300
MAX_LISTED = 20  # of each kind of finding printed
ROUTES = ("append", "context", "search", "history", "delete", "conversations")
TOPICS = (
    "my order has not arrived and the tracking page has not moved since Tuesday",
    "the invoice lists two seats but we only bought one licence",
    "please change the delivery address to the office on Rua Augusta",
    "the refund for the returned printer still shows as pending",
    "I cannot log in since the password reset email never came",
    "can you move my appointment to Thursday afternoon",
    "the app crashes when I upload a photo larger than ten megabytes",
    "what is the warranty on the replacement battery",
)
REPLIES = (
    "I have checked the account and opened a ticket for it.",
    "Thanks, that is updated now; you will get a confirmation by email.",
    "I am sorry about that; the team will call you back today.",
    "Done. Anything else I can help with?",
)
_CONV_PATH = re.compile(r"/v1/conversations/[^/]+")


@dataclass
class Customer:
    """One customer's namespace, token and what it was told was stored."""

    index: int
    namespace: str
    token: str
    live: list[str] = field(default_factory=list)
    expected: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)  # conv -> (role, text, position)
    maybe: dict[str, list[str]] = field(default_factory=dict)  # conv -> texts whose answer never came
    erased: list[str] = field(default_factory=list)
    next_conv: int = 0

    def new_conversation(self) -> str:
        conv = f"c{self.index:03d}-{self.next_conv:04d}"  # unique over customers: a leak would show
        self.next_conv += 1
        self.live.append(conv)
        self.expected[conv] = []
        return conv


@dataclass
class Recorder:
    """Every request's route, latency and status, and each non-2xx answer's body."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[str, list[float]] = field(default_factory=dict)  # route -> seconds
    refusals: dict[tuple[str, int, str], int] = field(default_factory=dict)  # (route, status, body) -> count
    transport: dict[tuple[str, str], int] = field(default_factory=dict)  # (route, error) -> count
    slow: list[tuple[float, str, str]] = field(default_factory=list)  # (seconds, route, server)

    def hook(self, response: httpx.Response) -> None:
        """httpx response hook: keep the status and body of every non-2xx answer."""
        if response.status_code < 300:
            return
        response.read()
        route = f"{response.request.method} {_CONV_PATH.sub('/v1/conversations/{id}', response.request.url.path)}"
        key = (route, response.status_code, response.text[:BODY_EXCERPT_CHARS])
        with self.lock:
            self.refusals[key] = self.refusals.get(key, 0) + 1

    def timed(self, route: str, server: str, seconds: float) -> None:
        with self.lock:
            self.times.setdefault(route, []).append(seconds)
            if seconds > SLOW_S:
                self.slow.append((seconds, route, server))

    def failed(self, route: str, exc: BaseException) -> None:
        with self.lock:
            key = (route, type(exc).__name__)
            self.transport[key] = self.transport.get(key, 0) + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_env(tokens: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update({"TIERMEM_AUTH_TOKENS": json.dumps(tokens), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"tiermem serve exited {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"tiermem serve did not answer in {STARTUP_TIMEOUT_S} s:\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        time.sleep(HEALTH_POLL_S)


@contextmanager
def servers(data_dir: Path, n: int, tokens: dict[str, str], log_dir: Path) -> Iterator[list[str]]:
    """N `tiermem serve` processes on `data_dir` (started together), each on its own port;
    yields their URLs once each answers /healthz 200; SIGTERM after (SIGKILL past
    STOP_TIMEOUT_S), then stops the embedded Redis they shared."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    logs: list[Path] = []
    try:
        for i in range(n):
            port = _free_port()
            log = log_dir / f"serve-{i}.log"
            with log.open("wb") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "tiermem.cli", "--data-dir", str(data_dir), "serve", "--port", str(port),
                     "--log-level", "warning"], stdout=out, stderr=subprocess.STDOUT, env=_server_env(tokens)))
            urls.append(f"http://127.0.0.1:{port}")
            logs.append(log)
        for url, proc, log in zip(urls, procs, logs, strict=True):
            _wait_ready(url, proc, log)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        from tiermem.tiers.redis_server import EmbeddedRedis

        EmbeddedRedis(data_dir).stop()


class Balancer:
    """One customer's clients, one per process; each request goes to the next process."""

    def __init__(self, urls: list[str], customer: Customer, recorder: Recorder) -> None:
        self.urls = urls
        self.recorder = recorder
        self.clients = [Client(url, token=customer.token, namespace=customer.namespace, timeout_s=REQUEST_TIMEOUT_S,
                               http_client=httpx.Client(event_hooks={"response": [recorder.hook]}))
                        for url in urls]
        self._turn = 0

    def call(self, route: str, method: str, *args: Any, **kw: Any) -> Any:
        i = self._turn % len(self.clients)
        self._turn += 1
        t0 = time.perf_counter()
        try:
            return getattr(self.clients[i], method)(*args, **kw)
        except httpx.TransportError as exc:
            self.recorder.failed(route, exc)
            raise
        finally:
            self.recorder.timed(route, self.urls[i], time.perf_counter() - t0)

    def close(self) -> None:
        for c in self.clients:
            c._http.close()  # the hooks' httpx clients are ours to close


def _append(lb: Balancer, cust: Customer, conv: str, role: str, text: str) -> None:
    try:
        pos = lb.call("append", "append", conv, {"role": role, "content": text})
    except httpx.TransportError:
        cust.maybe.setdefault(conv, []).append(text)
        return
    except TiermemError:
        return  # a refusal: recorded by the hook, nothing expected stored (a 503 without written: false is
        # reported with the data check if it was stored after all)
    cust.expected[conv].append((role, text, int(pos)))


def _turn(lb: Balancer, cust: Customer, rng: random.Random, turn: int) -> None:
    conv = rng.choice(cust.live)
    topic = rng.choice(TOPICS)
    _append(lb, cust, conv, "user", f"[{conv} #{turn}] {topic}")
    try:
        if rng.random() < CONTEXT_SHARE:
            lb.call("context", "context", conv, topic, CONTEXT_BUDGET)
        _append(lb, cust, conv, "assistant", f"[{conv} #{turn}] {rng.choice(REPLIES)}")
        if rng.random() < SEARCH_SHARE:
            lb.call("search", "search", None, rng.choice(TOPICS), 5)
        if rng.random() < HISTORY_SHARE:
            lb.call("history", "history", conv)
        if rng.random() < DELETE_SHARE:
            lb.call("delete", "delete_conversation", conv)
            cust.live.remove(conv)
            cust.erased.append(conv)
            cust.new_conversation()
    except (TiermemError, httpx.TransportError):
        pass  # recorded; the turn goes on as an agent's would, next turn


def _customer_loop(urls: list[str], cust: Customer, recorder: Recorder, go: threading.Event,
                   end_at: list[float], turns: int | None, done_turns: list[int]) -> None:
    rng = random.Random(cust.index)
    lb = Balancer(urls, cust, recorder)
    try:
        go.wait()
        turn = 0
        while (turns is None and time.monotonic() < end_at[0]) or (turns is not None and turn < turns):
            _turn(lb, cust, rng, turn)
            turn += 1
        done_turns[cust.index] = turn
    finally:
        lb.close()


def check_data(urls: list[str], customers: list[Customer]) -> dict[str, Any]:
    """The data check of the module docstring, through the service; returns what it found."""
    problems: list[str] = []
    maybes = 0
    checked = 0
    for cust in customers:
        url = urls[cust.index % len(urls)]
        with Client(url, token=cust.token, namespace=cust.namespace, timeout_s=REQUEST_TIMEOUT_S) as c:
            for conv, want in cust.expected.items():
                if conv in cust.erased:
                    try:
                        c.history(conv)
                        problems.append(f"{cust.namespace}/{conv}: erased, still answers")
                    except ConversationNotFound:
                        pass
                    continue
                try:
                    got = _whole_history(c, conv)
                except ConversationNotFound:
                    got = []
                unsure = set(cust.maybe.get(conv, ()))
                maybes += len(unsure)
                rows = [(m.role, m.text, m.position) for m in got if m.text not in unsure]
                checked += len(rows)
                if rows != want:
                    problems.append(f"{cust.namespace}/{conv}: history differs from what was acknowledged: "
                                    f"{_diff(want, rows)}")
            listed = set(c.conversations())
            live = {conv for conv in cust.live if cust.expected[conv] or conv in cust.maybe}
            if listed != live:
                problems.append(f"{cust.namespace}: lists {sorted(listed - live)} it should not, "
                                f"misses {sorted(live - listed)}")
            other = customers[(cust.index + 1) % len(customers)]
            if other is not cust:
                try:
                    c.conversations(other.namespace)
                    problems.append(f"{cust.namespace}'s token lists {other.namespace}")
                except ServiceAuthError:
                    pass
                for conv in other.live[:1]:
                    try:
                        c.history(conv)
                        problems.append(f"{cust.namespace} reads {other.namespace}'s {conv}")
                    except ConversationNotFound:
                        pass
    return {"ok": not problems, "messages_checked": checked, "maybe": maybes,
            "erased": sum(len(c.erased) for c in customers), "problems": problems}


def _whole_history(c: Client, conv: str) -> list[Any]:
    out: list[Any] = []
    after: int | None = None
    while True:
        page, after = c.history_page(conv, after=after)
        out += page
        if after is None:
            return out


def _diff(want: list[tuple[str, str, int]], got: list[tuple[str, str, int]]) -> str:
    for i, (w, g) in enumerate(zip(want, got, strict=False)):
        if w != g:
            return f"first difference at row {i}: acknowledged {w}, stored {g}"
    return f"acknowledged {len(want)} rows, stored {len(got)} (extra: {got[len(want):][:3]}, missing: {want[len(got):][:3]})"


def run_one(processes: int, clients: int, *, seconds: float = DEFAULT_SECONDS, turns: int | None = None,
            work_dir: Path | None = None) -> dict[str, Any]:
    """One load run: `processes` servers, `clients` customers, `seconds` (or `turns` turns
    each); returns the figures, the refusals and the data check."""
    with ExitStack() as stack:
        root = work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tm-load-")))
        data_dir = root / f"data-{processes}x{clients}"
        customers = [Customer(i, f"cust-{i:03d}", f"tok-load-{i:03d}-{secrets.token_hex(12)}") for i in range(clients)]
        for cust in customers:
            for _ in range(CONVERSATIONS_PER_CUSTOMER):
                cust.new_conversation()
        say(f"{processes} process(es), {clients} clients: starting")
        urls = stack.enter_context(servers(data_dir, processes, {c.token: c.namespace for c in customers}, root))
        recorder = Recorder()
        go = threading.Event()
        end_at = [0.0]
        done_turns = [0] * clients
        threads = [threading.Thread(target=_customer_loop, args=(urls, c, recorder, go, end_at, turns, done_turns),
                                    daemon=True) for c in customers]
        for t in threads:
            t.start()
        load_before = load_average()
        t0 = time.monotonic()
        end_at[0] = t0 + seconds
        go.set()
        for t in threads:
            t.join(timeout=None if turns is not None else seconds + REQUEST_TIMEOUT_S * 2)
        hung = sum(t.is_alive() for t in threads)
        elapsed = time.monotonic() - t0
        load_after = load_average()
        say(f"{processes} process(es), {clients} clients: {elapsed:.1f} s of load, checking the data")
        check = check_data(urls, customers)
        logs = [(root / f"serve-{i}.log").read_text(errors="replace") for i in range(processes)]
    routes = {r: {**dist([s * 1000 for s in recorder.times[r]]), "max": round(max(recorder.times[r]) * 1000, 1),
                  "per_s": round(len(recorder.times[r]) / elapsed, 1)}
              for r in ROUTES if recorder.times.get(r)}
    return {
        "processes": processes, "clients": clients, "seconds": round(elapsed, 1), "turns": sum(done_turns),
        "hung_clients": hung, "load_before": load_before, "load_after": load_after, "cpus": os.cpu_count(),
        "routes": routes,
        "requests_per_s": round(sum(len(v) for v in recorder.times.values()) / elapsed, 1),
        "non_2xx": [{"route": r, "status": s, "body": b, "count": n}
                    for (r, s, b), n in sorted(recorder.refusals.items())],
        "transport_errors": [{"route": r, "error": e, "count": n} for (r, e), n in sorted(recorder.transport.items())],
        "slow": [{"route": r, "seconds": round(s, 2), "server": u}
                 for s, r, u in sorted(recorder.slow, reverse=True)],
        "tracebacks": sum(log.count("Traceback") for log in logs),
        "check": check,
    }


def render(r: dict[str, Any]) -> str:
    lines = [f"## {r['processes']} process(es), {r['clients']} clients: {r['seconds']} s, {r['turns']} turns, "
             f"{r['requests_per_s']} requests/s; load {r['load_before']} -> {r['load_after']} on {r['cpus']} CPUs",
             "", "| route | requests/s | p50 ms | p99 ms | max ms | n |", "|---|---|---|---|---|---|"]
    for route, d in r["routes"].items():
        lines.append(f"| {route} | {d['per_s']} | {d['p50']:.1f} | {d['p99']:.1f} | {d['max']:.1f} | {d['n']} |")
    lines.append("")
    lines.append(f"non-2xx: {sum(x['count'] for x in r['non_2xx'])}; transport errors: "
                 f"{sum(x['count'] for x in r['transport_errors'])}; over {SLOW_S} s: {len(r['slow'])}; "
                 f"hung clients: {r['hung_clients']}; tracebacks in the servers' logs: {r['tracebacks']}")
    for x in r["non_2xx"][:MAX_LISTED]:
        lines.append(f"- {x['count']} x {x['route']} {x['status']}: {x['body']}")
    for x in r["transport_errors"][:MAX_LISTED]:
        lines.append(f"- {x['count']} x {x['route']}: {x['error']}")
    for x in r["slow"][:MAX_LISTED]:
        lines.append(f"- slow: {x['route']} {x['seconds']} s ({x['server']})")
    c = r["check"]
    lines.append(f"data check: {'ok' if c['ok'] else 'FAILED'} ({c['messages_checked']} messages, "
                 f"{c['erased']} erased conversations, {c['maybe']} unanswered appends)")
    lines += [f"- {p}" for p in c["problems"][:MAX_LISTED]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.bench_service_load",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int_list(unit="server processes"), default=list(DEFAULT_PROCESSES),
                    help="server processes (list)")
    ap.add_argument("--clients", type=int_list(unit="concurrent customers"), default=list(DEFAULT_CLIENTS),
                    help="concurrent customers (list)")
    ap.add_argument("--seconds", type=bounded(MIN_SECONDS, unit="seconds"), default=DEFAULT_SECONDS, help="load duration of each run")
    ap.add_argument("--turns", type=bounded(1, unit="turns per customer"), default=None, help="turns per customer instead of a duration")
    ap.add_argument("--keep", type=Path, default=None, help="keep data dirs and server logs under this directory")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args(argv)
    results = []
    for n in args.processes:
        for m in args.clients:
            work = None
            if args.keep is not None:
                work = args.keep / f"{n}x{m}"
                work.mkdir(parents=True, exist_ok=True)
            r = run_one(n, m, seconds=args.seconds, turns=args.turns, work_dir=work)
            results.append(r)
            if not args.json:
                print(render(r) + "\n", flush=True)
    if args.json:
        print(json.dumps(results, indent=1))
    bad = any(not r["check"]["ok"] or r["hung_clients"] or any(x["status"] >= 500 for x in r["non_2xx"])
              for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
