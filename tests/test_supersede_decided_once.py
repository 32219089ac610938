"""A correction is decided once: the embedding catch-up that runs supersession again
for turns an import already decided by the rules (``Memory._on_embedded``) changes
nothing, and no turn is ever superseded by itself or by an earlier turn
(``consolidation/supersede.py``: chains are followed only to turns before the
correction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory, Message
from tiermem.tiers.embed_onnx import FastEmbedder

FILLER = ["What's a good podcast about volcanoes?", "Tell me a fun fact about coral reefs."]


@pytest.fixture(scope="module")
def fast() -> FastEmbedder:
    emb = FastEmbedder(runtime="onnx")
    emb.load()
    return emb


# (the standing order, the correction of it later in the same import)
@pytest.mark.parametrize(("order", "correction"), [
    # a label-shaped preference, pinned by the rules; the correction names its slot
    ("Seat preference: aisle seat, every time.", "Switch my seat preference to window seat."),
    # a plain rule, corrected with the old value named
    ("Always reply in French, please.", "Actually, reply in German instead of French."),
])
def test_a_rule_decided_correction_is_not_decided_again_by_the_catch_up(
        tmp_path: Path, fast: FastEmbedder, order: str, correction: str) -> None:
    with Memory(Config(data_dir=tmp_path), embedder=fast, hot=False, background_indexing=False) as mem:
        msgs = [Message(role="user", content=order)]
        # far more turns than one live append (a batch the rules decide without embedding)
        msgs += [Message(role=r, content=FILLER[i % 2] if r == "user" else f"Noted ({i}).")
                 for i in range(100) for r in ("user", "assistant")]
        msgs.append(Message(role="user", content=correction))
        mem.append_many("c", msgs)
        last = len(msgs) - 1
        before = {r.position: r.superseded_by for r in mem.cold.turns("c") if r.superseded_by is not None}
        assert before == {0: last}  # the rules found the pinned order at import
        mem.cold.index_pending(batch=64)  # the catch-up: supersession again, with meaning
        after = {r.position: r.superseded_by for r in mem.cold.turns("c") if r.superseded_by is not None}
        assert after == before
        assert all(new > old for old, new in after.items())
