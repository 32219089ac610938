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
import time
from collections.abc import Iterator
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
HELD_S = 1.5  # the first run waits this long on the summarizer: ~7 ticks find it going
AFTER_S = 1.5  # then the watch goes on: a few quick runs after it
ASKED_WAIT_S = 60.0  # the CLI's start (Redis, the store) until its first summary request
LLM_TIMEOUT_S = 20.0  # past HELD_S: the held request is answered, not timed out
RUN_LIMIT_S = 60  # the CLI's stop after SIGINT; longer is a hang
OVERRUN_WORDS = "the previous run is still going"
APSCHEDULER_WORDS = "maximum number of running instances reached"
MIN_OVERLAPPED = 3  # ticks the held run certainly outlasts (1.5 s / 0.2 s, with slack for a slow host)


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


def test_a_run_longer_than_the_interval_is_said_once(data: Path, endpoint: LLMEndpoint, held: FirstHeld) -> None:
    env = cli_env(data, endpoint, LLM_TIMEOUT_S, MAX_TURNS_BEHIND)
    proc = subprocess.Popen([TIERMEM, "consolidate", "--watch", "--json", "--interval", str(INTERVAL_S)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert held.asked.wait(ASKED_WAIT_S), "the first run never asked the summarizer"
        time.sleep(HELD_S)  # the first run outlasts several intervals
        held.gate.set()
        time.sleep(AFTER_S)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: how a watch is stopped
        out, err = proc.communicate(timeout=RUN_LIMIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert APSCHEDULER_WORDS not in err, err[-2000:]  # was one WARNING per tick (~7 here)
    said = [line for line in err.splitlines() if OVERRUN_WORDS in line]
    assert len(said) == 1, err[-2000:]  # was none of its own
    assert said[0].startswith("WARNING") and f"interval {INTERVAL_S:g} s" in said[0], said[0]
    last = json.loads(out.splitlines()[-1])  # the watch's last report
    assert last["overlapped"] >= MIN_OVERLAPPED, last  # the ticks it outlasted, counted
    # the held run finished (both views refreshed) and the watch went on after it
    assert last["refreshed_total"] == 2 and last["runs"] >= 2, last
    assert len(endpoint.requests) == 1  # the held request was the only summary asked for
