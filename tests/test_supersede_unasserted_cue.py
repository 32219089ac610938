"""A cue word in a sentence that asserts nothing supersedes nothing: a wish ("I wish
standup were at 10 instead.", "If only ...") and an indirect question ("No wait, I meant
to ask whether ...") leave the user's fact current.

Invariants:
- A sentence opened by a wish (classify.WISH_OPENERS, part of UNASSERTED_OPENERS) asserts
  nothing (`supersede.assertive_text`): its "instead" and its value revised the real
  schedule before.
- "I meant / wanted / was going to ask whether|if|about|how ..." is a question put off,
  no self-correction (`classify._INDIRECT_QUESTION`): "i meant" and "no wait" were its cues.
- A self-correction of a request ("Sorry, I meant to ask for a window seat.") and a plain
  "No wait, ..." correction still supersede.
- Decided the same with the model loaded and by a process that only appends.

Reviewer cases n46, n71, n84, n85 (session 33, /tmp/rv_pa/cases.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from supersede_modes import MODES, opened, users_superseded

from tiermem.tiers.embed import Embedder

# (user turns, {superseded case turn: superseding case turn})
CASES = [
    # n46: a wish with "instead"
    (["The team standup is at 9:30 every morning.", "I wish standup were at 10 instead."], {}),
    # n84: a wish naming the fact's own thing
    (["My flight home is on Sunday.", "I wish my flight home were on Monday instead."], {}),
    # "if only": a wish by another opener
    (["The team standup is at 9:30 every morning.", "If only standup were at 10."], {}),
    # n71: "no wait" before an indirect question
    (["The plumber is coming Thursday at 10.", "No wait, I meant to ask whether plumbers charge for call-outs."], {}),
    # n85: "actually I meant to ask if"
    (["My dentist appointment is on March 4th at 2pm.", "Actually I meant to ask if the dentist takes my insurance."],
     {}),
    # control: "I meant to ask for" a thing corrects the request
    (["Book me an aisle seat on the Lisbon flight.", "Sorry, I meant to ask for a window seat."], {0: 1}),
    # control: "no wait" before a new value
    (["My flight home is on Sunday.", "No wait, my flight home is on Monday."], {0: 1}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("users", "expected"), CASES)
def test_a_sentence_asserting_nothing_supersedes_nothing(tmp_path: Path, embedder: Embedder, mode: str,
                                                         users: list[str], expected: dict[int, int]) -> None:
    with opened(mode, tmp_path / "d", embedder) as mem:
        assert users_superseded(mem, mode, users) == expected
