"""`tiermem append --idempotency-key KEY` (in process on a real data dir): run twice with
one key and message, one copy is stored and the second run says it stored nothing; a
malformed key is a usage error (exit 2) naming the option, with the library's message,
before the data dir is opened; the option has its help line.

Fails on the code before: there was no such option (exit 2 "No such option" for every
case, and nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_IDEMPOTENCY_KEY_CHARS, check_idempotency_key

APPEND = ("append", "trip", "--role", "user", "--content", "Book the 9:40 to Lisbon, please.")


def test_a_key_twice_stores_once(tmp_path: Path, embedder: FastEmbedder) -> None:
    first = tm(tmp_path, embedder, "", *APPEND, "--idempotency-key", "req-1", "--json")
    again = tm(tmp_path, embedder, "", *APPEND, "--idempotency-key", "req-1")
    assert first.exit_code == again.exit_code == 0, (first.output, again.output)
    assert json.loads(first.output) == {"conversation_id": "trip", "positions": [0], "replayed": False}
    assert "nothing stored now" in again.output and "position 0" in again.output
    other = tm(tmp_path, embedder, "", "append", "trip", "--role", "user", "--content", "The 11:15.",
               "--idempotency-key", "req-1")
    assert other.exit_code != 0 and "different request" in other.output
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False) as mem:
        assert len(mem.history("trip")) == 1


@pytest.mark.parametrize("key", [
    "",  # empty
    "k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1),  # one past the limit
    "two words",  # a space
    "caf\u00e9",  # outside ASCII
])
def test_a_malformed_key_is_a_usage_error_before_the_data_dir_is_opened(tmp_path: Path, embedder: FastEmbedder,
                                                                       key: str) -> None:
    with pytest.raises(ValidationError) as library:
        check_idempotency_key(key)
    got = tm(tmp_path, embedder, "", *APPEND, "--idempotency-key", key)
    assert got.exit_code == 2 and "--idempotency-key" in got.output, got.output
    assert library.value.problem in " ".join(got.output.split())  # click wraps long lines
    assert not (tmp_path / "data").exists()


def test_the_option_has_a_help_line(tmp_path: Path, embedder: FastEmbedder) -> None:
    got = tm(tmp_path, embedder, "", "append", "--help")
    assert got.exit_code == 0 and "--idempotency-key KEY" in got.output
