"""Cutting a message into statements takes time linear in its length.

Invariants:
- statement_spans (and through it supersession's reading of a turn's clauses, its facts
  and its assertive part) reads a message in time linear in its length, whatever runs of
  spaces or conjunctions it holds. Before, a join (",?\\s+and\\s+") was searched from each
  space of a run and backtracked over the rest of it, and the clause left of each "and"
  was read again whole, both n squared: "My flight is on the 12th, can you" then 16,000
  spaces then "check?" took 18 s to append with its correction (80 ms at 2,000
  characters, 1.4 s at 8,000).
- Nothing here times anything: each input is 200,000 characters, read in a child process
  that must finish within linear_child.CHILD_TIMEOUT_S. Linear, all of them take well under a second;
  n squared, one takes many minutes.
- The spans are the same as before for what is not adversarial (the last case).
"""

from __future__ import annotations

import pytest
from linear_child import finishes

from tiermem.consolidation.statements import statement_spans

ADVERSARIAL_CHARS = 200_000  # each input's length: n squared on it is minutes, linear is milliseconds

# (an input built in the child as a Python expression, what it exercises)
INPUTS = [
    # the reported turn: a request, then a run of spaces (the join backtracked over the run)
    ("'My flight is on the 12th, can you' + ' ' * N + 'check?'", "spaces"),
    # a run of tabs and newlines the same way
    ("'Actually my flight is on the 14th, and' + '\\t\\n' * (N // 2) + 'x.'", "whitespace"),
    # conjunctions with no verb on their right: the clause left of each was read again whole
    ("'x and ' * (N // 6)", "conjunctions"),
    # the same after commas
    ("'I moved, and ' + 'y, but ' * (N // 7)", "comma-conjunctions"),
    # joins that do cut: statements up to MAX_STATEMENTS, then one tail
    ("'I am here and ' * (N // 14)", "cut-joins"),
]

CHILD = """
import sys
from tiermem.consolidation.statements import statement_spans
from tiermem.consolidation.supersede import assertive_text, may_revise
N = {n}
text = {expr}
statement_spans(text)
assertive_text(text)
may_revise("Actually my flight is on the 14th.", text)
may_revise(text, "My flight is on the 12th.")
print("ok")
"""


@pytest.mark.parametrize(("expr", "what"), INPUTS)
def test_a_long_adversarial_message_is_read_in_linear_time(expr: str, what: str) -> None:
    code = CHILD.format(n=ADVERSARIAL_CHARS, expr=expr)
    finishes(code, f"{what}: reading {ADVERSARIAL_CHARS} characters")


# (a text, its statements): the cut itself is unchanged
SPANS = [
    # two clauses, each with a verb: two statements
    ("My flight is LH 1172 and my hotel is the Tivoli.", ["My flight is LH 1172", "my hotel is the Tivoli."]),
    # a comma before the conjunction stays out of both
    ("I moved to Denver, but my office is in Boulder.", ["I moved to Denver", "my office is in Boulder."]),
    # a run of spaces around the conjunction
    ("I moved to Denver   and   my office is in Boulder.", ["I moved to Denver", "my office is in Boulder."]),
    # no verb on the right: one statement
    ("Book the flight and the hotel.", ["Book the flight and the hotel."]),
    # a verb only left of the second "and": cut there, not at the first
    ("Tea and cake is what I want and I am hungry.", ["Tea and cake is what I want", "I am hungry."]),
]


@pytest.mark.parametrize(("text", "statements"), SPANS)
def test_the_statements_are_cut_as_before(text: str, statements: list[str]) -> None:
    assert [text[a:b] for a, b in statement_spans(text)] == statements
