"""`tiermem context --timezone`: the context planned in the user's zone for this call (the
dentist's heading is Friday in Los Angeles, with its offset; Saturday without one in the
config's UTC), and a zone that is not an IANA name is a usage error (exit 2) naming the
option, with nothing opened or written. Before, the command had no such option."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import tm
from zone_helpers import BAD_ZONE, BUDGET, HEADINGS, LA, QUESTION, headings, seed

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

USAGE_EXIT = 2


@pytest.fixture
def data_dir(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Path]:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        seed(mem, "c")
        mem.append("c", {"role": "user", "content": QUESTION})
    yield data
    EmbeddedRedis(data).stop()  # `context` opens the hot tier


@pytest.mark.parametrize("zone", [
    LA,  # --timezone America/Los_Angeles: Friday evening, with its offset
    None,  # no option: the config's zone (UTC), as before
])
def test_context_is_planned_in_the_given_zone(tmp_path: Path, embedder: FastEmbedder, data_dir: Path,
                                              zone: str | None) -> None:
    args = ["context", "c", "-q", QUESTION, "--budget", str(BUDGET), "--json"]
    r = tm(tmp_path, embedder, "", *args, *(["--timezone", zone] if zone else []))
    assert r.exit_code == 0, r.output
    assert HEADINGS[zone] in headings(m["content"] for m in json.loads(r.stdout)["messages"])


@pytest.mark.parametrize("zone", [
    BAD_ZONE,  # not an IANA name
    "",  # empty
    "../../etc/passwd",  # a path, not a zone key
])
def test_a_bad_zone_is_a_usage_error_naming_the_option(tmp_path: Path, embedder: FastEmbedder, zone: str) -> None:
    r = tm(tmp_path, embedder, "", "context", "c", "-q", QUESTION, "--timezone", zone)
    assert r.exit_code == USAGE_EXIT, r.output
    assert "'--timezone'" in r.stderr and "IANA" in r.stderr and "Traceback" not in r.output, r.output
    assert not (tmp_path / "data").exists()  # refused before the data dir was opened
