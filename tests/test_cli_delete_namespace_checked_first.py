"""`tiermem delete-namespace NAME` checks NAME before it asks for confirmation.

Before, `tiermem delete-namespace default/../x` asked "Erase every conversation of
'default/../x' and the namespaces below it? [y/N]", and only a user who answered yes
learnt that the name was not a namespace (exit 1). Now the name is checked while the
arguments are parsed: a usage error (exit 2) naming the argument, no question asked,
nothing opened; a valid name is still asked about. Its length is checked against what any
config allows (MAX_ID_CHARS_LIMIT), not the config's max_id_chars: a namespace made before
that was lowered must stay erasable (tests/test_id_limit_lowered.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem import Config, Memory
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_NAMESPACE_DEPTH

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

QUESTION = "Erase every conversation of"
MAX_ID_CHARS = 24  # the config's, lowered: a name past it is still erasable (a 9-level name fits in it)

# (the name, what the refusal says)
BAD_NAMES = [
    ("default/../x", "must be ids joined by '/'"),  # a path's parent step
    ("a//b", "must be ids joined by '/'"),  # an empty level
    (".hidden", "must be ids joined by '/'"),  # an id starting with '.'
    ("a b", "must be ids joined by '/'"),  # a space
    ("x" * (MAX_ID_CHARS_LIMIT + 1), f"limit of {MAX_ID_CHARS_LIMIT}"),  # longer than any config allows
    ("/".join("n" * (MAX_NAMESPACE_DEPTH + 1)), "levels"),  # deeper than a namespace may be
]


@pytest.fixture
def stored(tmp_path: Path, embedder: FastEmbedder) -> Path:
    with Memory(Config(data_dir=tmp_path / "data", max_id_chars=MAX_ID_CHARS), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hello"}, namespace="acme")
    return tmp_path


@pytest.mark.parametrize(("name", "says"), BAD_NAMES)
def test_a_bad_name_is_refused_before_the_question(stored: Path, embedder: FastEmbedder, name: str, says: str) -> None:
    res = tm(stored, embedder, f"[limits]\nmax_id_chars = {MAX_ID_CHARS}\n", "delete-namespace", name)
    assert res.exit_code == 2, res.output  # before: 1, after the question
    assert QUESTION not in res.output, res.output
    assert "Invalid value for 'NAMESPACE'" in res.stderr and says in res.stderr, res.stderr


def test_a_valid_name_is_still_asked_about(stored: Path, embedder: FastEmbedder) -> None:
    res = tm(stored, embedder, "", "delete-namespace", "acme")  # no answer: no
    assert QUESTION in res.output and res.exit_code == 1, res.output  # click's Abort
    with Memory(Config(data_dir=stored / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        assert len(mem.history("c1", namespace="acme")) == 1  # nothing erased
