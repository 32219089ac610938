"""Ctrl-C while `migrate-store` reads a PostgreSQL source (its verify phase, a query
running): the `interrupted` line alone, exit 130. Before, psycopg's cleanup of the
connection the interrupt cut came first, three WARNING lines ("error ignored in
rollback ... another command is already in progress", "closing returned connection",
"discarding closed connection"). Real server (pg_url), real process group, real SIGINT,
sent while the server shows the command's query running (pg_stat_activity), polled on one
connection kept open: a connection opened per poll (tens of ms each on a loaded runner)
saw none of the verify's short reads in three runs now and then.

A run counts only where psycopg's cleanup did log: the CLI runs with a second handler on
the `psycopg` logger writing to a file of the test's (`SIDE_LOG`, before the CLI's own
logging setup, beside it: the CLI's filter is on its stderr handler only), so the file
shows the cleanup's records whether or not stderr hid them. The interrupt lands inside a
query in about one run of four (the query seen running has often ended by the time the
signal arrives, and a cleanup after a finished query logs nothing): counting every
interrupted run, as before, a copy with the handling broken (INTERRUPT_CLEANUP_LOGGERS
emptied, or on_sigint not setting _INTERRUPT_SEEN) passed 5 of 6 and 4 of 4 runs.

The source is written in process (the store's own append_many, 300 conversations of 10
messages): the verify reads it conversation by conversation, one query each and more, so
its queries span the SIGINT as 30,000 messages did. Written through `tiermem import` and
a `migrate-store` to PostgreSQL, the setup was most of the test's 19.6 s (85-170 s under
load)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema, opened

from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

RUN_TIMEOUT_S = 180
CONVERSATIONS = 300  # the verify reads each conversation of both sides: hundreds of queries
TURNS = 10  # 3,000 messages: a copy back of a few seconds, most of it the process's start
POLL_S = 0.001  # between two looks: each is a round trip to the server already
# runs until one whose interrupt psycopg's cleanup logged: about 1 in 4 (2 of 8 in a row
# here), 1.5-2 s each; 40 misses in a row at that rate: 1 in ~100,000
TRIES = 40
SIGINT_EXIT = 130
INTERRUPTED_LINE = "error: interrupted; what was committed stays, rerun to resume"
# the CLI as its console script runs it (tiermem.entry.main), with psycopg's records also
# written to the file argv[1] names, whatever the CLI's stderr filter lets through
SIDE_LOG = """\
import logging, sys
side = logging.FileHandler(sys.argv[1])
side.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
logging.getLogger("psycopg").addHandler(side)
from tiermem.entry import main
main(sys.argv[2:])
"""


def query_running(watcher: psycopg.Connection[tuple[int]]) -> bool:
    """Whether another session (the migration's) has a statement running on the server
    (`watcher` in autocommit: each look is a transaction of its own, a fresh view)."""
    row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                          "AND backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchone()
    return bool(row and row[0])


def test_migrate_store_interrupted_reading_postgres(tmp_path: Path, pg_url: str, counter: BpeTokenCounter) -> None:
    data = tmp_path / "data"
    schema = fresh_schema()
    with opened(("postgres", f"{pg_url}#{schema}"), counter) as store:
        for c in range(CONVERSATIONS):
            store.append_many(f"c{c}", [Message(role="user", content=f"message {i} of conversation {c}")
                                        for i in range(TURNS)])
    runs: list[str] = []  # how each run ended, for the failure's message
    for attempt in range(TRIES):
        target = tmp_path / f"back{attempt}"
        side = tmp_path / f"psycopg{attempt}.log"
        cmd = [sys.executable, "-c", SIDE_LOG, str(side), "--data-dir", str(data), "migrate-store",
               "--from", pg_url, "--from-schema", schema, "--to", str(target)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert p.stderr is not None
        for line in p.stderr:  # "copied i/n": i == n is the copy's end, the verify phase next
            i, _, n = line.removeprefix("copied ").strip().partition("/")
            if line.startswith("copied ") and i == n:
                break
        deadline = time.monotonic() + RUN_TIMEOUT_S
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            while p.poll() is None and time.monotonic() < deadline and not query_running(watcher):
                time.sleep(POLL_S)
        if p.poll() is not None:
            runs.append("finished before a query of its was seen running")
            continue
        os.killpg(p.pid, signal.SIGINT)
        _out, err = p.communicate(timeout=RUN_TIMEOUT_S)
        if p.returncode == 0:
            runs.append("finished as the interrupt came")
            continue
        # every interrupted run says the one line; one whose cleanup logged shows it was hidden
        assert p.returncode == SIGINT_EXIT, (p.returncode, err)
        assert err.splitlines() == [INTERRUPTED_LINE], err
        cleanup = side.read_text() if side.exists() else ""
        if "WARNING psycopg" in cleanup:
            return
        runs.append("interrupted between queries (psycopg's cleanup logged nothing)")
    pytest.fail(f"no interrupt of {TRIES} runs came inside a query whose cleanup logged: {runs}")
