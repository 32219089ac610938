"""A one-shot consolidation whose summarizer fails says so: `tiermem consolidate` exits 1
with an `error:` line per cause and `--json` lists the view in `failures`;
`Memory.consolidate()` lists it in `Consolidated.failures` (`complete` False) and does
not count it as refreshed.

Before, the failure (recorded and backed off, the previous version kept) ended the
refresh as "unchanged" (`Swept.UNCHANGED`): against an endpoint answering HTTP 500 the
CLI logged one WARNING, printed `refreshed 1 view(s)` and exited 0, `--json` had
"failures": [], and the library answered `Consolidated(2, failures=0)`, complete. The
scheduler's periodic runs are unchanged: the view keeps its old version and is backed
off, and a summarizer failure is no error in its stats (`errors`, `last_failures`).

The CLI runs as a real process against a real local HTTP endpoint (llm_endpoint).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_endpoint import LLMEndpoint, Reply, cli_env, completion, over_budget_data, serving

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import SummarizerError

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
TURNS = 8  # past MAX_TURNS_BEHIND: the rolling and constraints views are over budget
MAX_TURNS_BEHIND = 2
LLM_TIMEOUT_S = 5.0
RUN_LIMIT_S = 120  # a CLI run that has not ended by then is a failure, not a hang
CONV = "c1"
SERVER_ERROR = 500  # retried, then the refresh fails: "HTTP 500 (3 attempts)"
FAILED_WORDS = f"summarizer llm:m failed: HTTP {SERVER_ERROR}"  # llm:<model>


class Switch:
    """The endpoint's reply: HTTP 500 while `failing`, else a summary citing turn 0."""

    def __init__(self) -> None:
        self.failing = True

    def __call__(self, _req: object) -> Reply:
        return Reply(SERVER_ERROR, b'{"error": "down"}') if self.failing else completion("Fact one [#0]")


@pytest.fixture
def switch() -> Switch:
    return Switch()


@pytest.fixture
def endpoint(switch: Switch) -> Iterator[LLMEndpoint]:
    yield from serving(switch)


def llm_config(data: Path, endpoint: LLMEndpoint) -> Config:
    return Config(data_dir=data, summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                  llm_api_key_env="", llm_timeout_s=LLM_TIMEOUT_S, warm_max_turns_behind=MAX_TURNS_BEHIND)


@pytest.fixture
def data(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    """A data dir with one conversation whose views are over budget."""
    yield from over_budget_data(tmp_path / "data", embedder, CONV, TURNS)


def tiermem(data: Path, endpoint: LLMEndpoint, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(data, endpoint, LLM_TIMEOUT_S, MAX_TURNS_BEHIND)
    return subprocess.run([TIERMEM, *args], env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S,
                          check=False)


def errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_cli_one_shot_with_a_failing_summarizer_exits_1(data: Path, endpoint: LLMEndpoint) -> None:
    r = tiermem(data, endpoint, "consolidate")
    assert r.returncode == 1, (r.stdout, r.stderr)  # before: 0
    # the constraints view needs no summarizer call: refreshed; the rolling one failed
    assert r.stdout == "refreshed 1 view(s)\n", r.stdout
    said = errors(r.stderr)
    assert len(said) == 1 and FAILED_WORDS in said[0], r.stderr  # before: no error line
    assert said[0].endswith("[1 view refresh(es) failed; 1 of 2 refreshed]"), said[0]
    assert endpoint.requests, "the summarizer was asked"


def test_cli_one_shot_json_lists_the_summarizer_failure(data: Path, endpoint: LLMEndpoint) -> None:
    r = tiermem(data, endpoint, "consolidate", "--json")
    assert r.returncode == 1, (r.stdout, r.stderr)
    report = json.loads(r.stdout)
    # before: "failures": []
    assert [(f["kind"], f["key"], FAILED_WORDS in f["error"]) for f in report["failures"]] == [("rolling", "", True)]
    assert report["errors"] == 0  # the scheduler's count of refreshes that raised: none did
    assert len(errors(r.stderr)) == 1, r.stderr


def test_cli_one_shot_with_a_succeeding_summarizer_exits_0(data: Path, endpoint: LLMEndpoint,
                                                           switch: Switch) -> None:
    switch.failing = False
    r = tiermem(data, endpoint, "consolidate", "--json")
    assert r.returncode == 0 and errors(r.stderr) == [], (r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["failures"] == [] and report["last_refreshed"] == report["last_selected"] == 2


def test_library_consolidate_lists_the_summarizer_failure(data: Path, endpoint: LLMEndpoint, switch: Switch,
                                                          embedder: FastEmbedder) -> None:
    with Memory(llm_config(data, endpoint), hot=False, background_indexing=False, embedder=embedder) as mem:
        done = mem.consolidate()  # the sweep
        # before: Consolidated(2, failures=()), complete
        assert [(f.kind, f.key) for f in done.failures] == [("rolling", "")], done
        assert isinstance(done.failures[0].error, SummarizerError) and FAILED_WORDS in str(done.failures[0].error)
        assert not done.complete and int(done) == 1 and done.picked == 2, done
        # what the endpoint answered (it may quote the turns) is not kept with the cause
        assert done.failures[0].error.excerpt == "" and done.failures[0].error.__traceback__ is None
        assert mem.warm.latest(mem._key(CONV, None)[2], "rolling") is None  # no version was written

        one = mem.consolidate(CONV)  # by name: not held back, and failing again
        assert [(f.kind, f.key) for f in one.failures] == [("rolling", "")] and not one.complete, one
        assert int(one) == 1, one  # the constraints view; the rolling one has no version

        switch.failing = False
        ok = mem.consolidate(CONV)
        assert ok.complete and ok.failures == () and int(ok) == 2, ok


def test_scheduler_run_keeps_a_summarizer_failure_out_of_its_errors(data: Path, endpoint: LLMEndpoint,
                                                                    embedder: FastEmbedder) -> None:
    with Memory(llm_config(data, endpoint), hot=False, background_indexing=False, embedder=embedder) as mem:
        sched = mem.make_scheduler()
        sched.run_once()
        # the periodic run as before: no error, the view backed off (held back next run)
        assert sched.last_failures == () and sched.stats.errors == 0
        assert [(f.kind, f.key) for f in sched.last_summarizer_failures] == [("rolling", "")]
        assert mem.views.held_back() == {(mem._key(CONV, None)[2], "rolling", "")}
        sched.run_once()
        assert sched.last_summarizer_failures == () and sched.stats.held_back == 1
