"""`tiermem consolidate --watch` whose run outlasts the interval (a slow summarizer) lets
it finish and goes on after it, saying so in one WARNING line for that run ("the previous
run is still going", how long it has run, the interval); each tick it outlasted is
counted in `overlapped` (`--json`), not logged.

Before: APScheduler logged a WARNING per tick that found the run still going
('Execution of job "tiermem-consolidation ..." skipped: maximum number of running
instances reached (1)'): ten lines for a 2 s run every 0.2 s, and nothing said which run
or for how long.

The CLI runs as a real process (its embedded Redis, a real SQLite file) against a real
local chat-completions endpoint (llm_endpoint) that holds the first summary request until
the test lets it go, so the first run lasts as long as the test says."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llm_endpoint import FirstHeld, LLMEndpoint, cli_env, over_budget_data, serving

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
CONV = "c1"
TURNS = 8  # past MAX_TURNS_BEHIND: the rolling view is over budget and asks the summarizer
MAX_TURNS_BEHIND = 2
INTERVAL_S = 0.2  # the CLI's floor is 0.1 s (MIN_WATCH_INTERVAL_S)
# each wait below is on what the CLI says (the summary request, its --json reports), not
# on a fixed time: a loaded 2-core runner may take many seconds for any of them, and a
# wait ends at once when its condition holds. Past this, or once the CLI has exited, fails
WAIT_S = 120.0
POLL_S = 0.05
LLM_TIMEOUT_S = 60.0  # past llm_endpoint.HOLD_S (30 s): the held request is answered, never timed out
RUN_LIMIT_S = 60  # the CLI's stop after SIGINT; longer is a hang
OVERRUN_WORDS = "the previous run is still going"
APSCHEDULER_WORDS = "maximum number of running instances reached"
MIN_OVERLAPPED = 3  # ticks the held run is held for (counted, so reported), whatever the load


@pytest.fixture
def held() -> FirstHeld:
    return FirstHeld("Fact one [#0]")


@pytest.fixture
def endpoint(held: FirstHeld) -> Iterator[LLMEndpoint]:
    yield from serving(held)


@pytest.fixture
def data(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    """A data dir with one conversation whose views are over budget."""
    yield from over_budget_data(tmp_path / "data", embedder, CONV, TURNS)


def test_a_run_longer_than_the_interval_is_said_once(data: Path, endpoint: LLMEndpoint, held: FirstHeld,
                                                    tmp_path: Path) -> None:
    env = cli_env(data, endpoint, LLM_TIMEOUT_S, MAX_TURNS_BEHIND)
    err_path = tmp_path / "stderr"  # a file: read once the CLI has exited, by nobody else
    with err_path.open("w") as err_file:
        proc = subprocess.Popen([TIERMEM, "consolidate", "--watch", "--json", "--interval", str(INTERVAL_S)],
                                env=env, stdout=subprocess.PIPE, stderr=err_file, text=True)
    out: list[str] = []  # its --json reports (one per interval), read as they come
    reader = threading.Thread(target=lambda: out.extend(proc.stdout or ()), daemon=True)
    reader.start()

    def wait_for(what: str, holds: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not holds():
            assert proc.poll() is None, f"the CLI exited ({proc.returncode}) before {what}: {err_path.read_text()}"
            assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}; {out[-1:]}"
            time.sleep(POLL_S)

    def last(field: str) -> int:
        return int(json.loads(out[-1])[field]) if out else 0

    try:
        wait_for("the first run asked the summarizer", held.asked.is_set)
        # the first run outlasts several intervals: held until the CLI has counted them
        wait_for(f"{MIN_OVERLAPPED} ticks found the run going", lambda: last("overlapped") >= MIN_OVERLAPPED)
        held.gate.set()
        wait_for("a run after the held one", lambda: last("runs") >= 2)  # the watch went on
        proc.send_signal(signal.SIGINT)  # Ctrl-C: how a watch is stopped
        proc.wait(timeout=RUN_LIMIT_S)
        reader.join(RUN_LIMIT_S)
    finally:
        if proc.poll() is None:  # never left running, whatever failed above
            proc.kill()
            proc.wait()
    err = err_path.read_text()
    assert proc.returncode == 0, err[-2000:]
    assert APSCHEDULER_WORDS not in err, err[-2000:]  # was one WARNING per tick it outlasted
    said = [line for line in err.splitlines() if OVERRUN_WORDS in line]
    assert len(said) == 1, err[-2000:]  # was none of its own
    assert said[0].startswith("WARNING") and f"interval {INTERVAL_S:g} s" in said[0], said[0]
    last_report = json.loads(out[-1])  # the watch's last report
    assert last_report["overlapped"] >= MIN_OVERLAPPED, last_report  # the ticks it outlasted, counted
    # the held run finished (both views refreshed) and the watch went on after it
    assert last_report["refreshed_total"] == 2 and last_report["runs"] >= 2, last_report
    assert len(endpoint.requests) == 1  # the held request was the only summary asked for
