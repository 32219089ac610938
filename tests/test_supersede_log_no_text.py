"""A retraction's noun phrase is a stored turn's words: when the embedder fails, the
warning of `KindCheck` (telling a booking's kind, finding a noun's other names) gives the
phrase's length, never the phrase (README, "Logs": logs hold no content). Before, both
logged it with %r ("could not embed 'cnrysecretdiner' to tell its kind")."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from tiermem.consolidation.supersede import KindCheck

WORD = "cnrysecretdiner"  # a noun phrase no message of the code holds


class FailingEmbedder:
    """An embedder whose model is gone: every call raises, naming no text."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("embedding model unavailable")


@pytest.mark.parametrize(("call", "answer", "chars"), [
    # the kind of what "Book a table at Nong's" booked: a failure answers no
    (lambda check: check(WORD, "Book a table at Nong's for Friday."), False, len(WORD)),
    # another name in "Buy tickets for the new Dune film" for the phrase's head: a failure answers None
    (lambda check: check.synonym_in(f"the {WORD}", "Buy tickets for the new Dune film."), None, len(WORD) + 4),
])
def test_embed_failure_logs_length_not_phrase(caplog: pytest.LogCaptureFixture, call: Callable[[KindCheck], object],
                                              answer: object, chars: int) -> None:
    check = KindCheck(FailingEmbedder())
    with caplog.at_level("WARNING", logger="tiermem"):
        assert call(check) is answer
    warnings = [r for r in caplog.records if "could not embed" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert WORD not in warnings[0].getMessage()
    assert f"a {chars}-character noun phrase" in warnings[0].getMessage()
    assert WORD not in caplog.text  # the traceback's lines too
