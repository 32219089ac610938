"""Unanswered questions: a user's question that no reply followed carries no facts.

Recall ranks turns by how close they are to the query, and a user's earlier question on
the same subject is about as close as a turn can be ("What did Caroline paint?" against
"What did Caroline paint in May?"), yet it holds nothing that answers it: the answer is
in the reply after it, which its neighbour score already lifts. When no reply followed
(the next turn is the user's again: questions asked one after another, or a message
that was never answered), the question only takes room from turns that say something.
On a long QA session (evals.session) such turns took about 40% of the retrieved room.

Invariants:
- Only a user turn labeled `question` whose next turn in the log is also the user's is
  flagged; a question with any reply after it, and every other turn, keep their score.
  (None of the 224 user questions in the LoCoMo dev histories is flagged: their speakers
  alternate, so the standard LoCoMo eval ranks as before.)
- Flagged turns stay eligible (an explicit "did I ask about X?" can still reach them);
  they sink by `UNANSWERED_QUESTION_PENALTY`, below the turns that carry content.
- Reads: one turn-index read of the rows after the user questions among the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiermem.tiers.models import TurnRow
from tiermem.tiers.store import ColdLog

# On the scale of planner.rank's scores (z-score sums; the best turns of a conversation
# score about 5-20): enough to sink a close question below the turns around the answer.
# Chosen on three of the four LoCoMo dev conversations in the session eval (see README).
UNANSWERED_QUESTION_PENALTY = 6.0
USER_ROLE = "user"
QUESTION_INTENT = "question"


def unanswered(cold: ColdLog, conv: str, rows: Mapping[int, TurnRow]) -> set[int]:
    """Of `rows` (position -> row), the user questions whose next turn is the user's too
    (a question just before the latest user message counts: the user asked again without
    a reply; the newest turn, with nothing after it yet, does not)."""
    asks = sorted(p for p, r in rows.items() if r.role == USER_ROLE and r.intent == QUESTION_INTENT)
    if not asks:
        return set()
    nexts = {r.position: r for r in cold.turns_at(conv, [p + 1 for p in asks])}
    return {p for p in asks if (n := nexts.get(p + 1)) is not None and n.role == USER_ROLE}
