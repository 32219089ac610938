"""planner.timeline: relative time expressions in turns resolved against each turn's own time,
held in the turn cache as derived data (recomputed after `rebuild`), and used by the planner for
questions that name a period or ask when."""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem import Memory
from tiermem.planner import timeline
from tiermem.planner.dates import query_windows
from tiermem.planner.timeline import asks_when, told_closeness, told_span

# Monday 8 May 2023, 13:56 UTC: early in a week and in a month, so "last"/"this" periods differ.
MONDAY = float(calendar.timegm((2023, 5, 8, 13, 56, 0)))
# Saturday 13 May 2023, 09:00 UTC: "last Saturday" on a Saturday is a week back.
SATURDAY = float(calendar.timegm((2023, 5, 13, 9, 0, 0)))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).date().isoformat()


def told(text: str, created: float = MONDAY) -> tuple[str, str] | None:
    """The told period as (first day, day after the last) ISO dates, or None."""
    span = told_span(text, created)
    return None if span is None else (_iso(span[0]), _iso(span[1]))


@pytest.mark.parametrize(("text", "created", "expected"), [
    # the day before the message's own day, not the wall clock's
    ("Lost my job yesterday, so I'm starting my own business.", MONDAY, ("2023-05-07", "2023-05-08")),
    # the message's day itself
    ("I signed up for a pottery class today!", MONDAY, ("2023-05-08", "2023-05-09")),
    ("The concert is tonight", MONDAY, ("2023-05-08", "2023-05-09")),
    ("We talked last night", MONDAY, ("2023-05-07", "2023-05-08")),
    ("My interview is tomorrow", MONDAY, ("2023-05-09", "2023-05-10")),
    # the latest Saturday strictly before Monday 8 May
    ("Last Saturday we went to the beach", MONDAY, ("2023-05-06", "2023-05-07")),
    # on a Saturday, "last Saturday" is the one a week back
    ("last Saturday was fun", SATURDAY, ("2023-05-06", "2023-05-07")),
    # the first Friday strictly after the message's day
    ("see you next Friday", MONDAY, ("2023-05-12", "2023-05-13")),
    # the calendar week two back (Monday 24 April to Monday 1 May)
    ("I started running two weeks ago", MONDAY, ("2023-04-24", "2023-05-01")),
    # the weekend before the message's week, and the one before that
    ("We went camping last weekend", MONDAY, ("2023-05-06", "2023-05-08")),
    ("a quiet time after we went camping two weekends ago", MONDAY, ("2023-04-29", "2023-05-01")),
    # the calendar periods after the message's
    ("We're moving next month", MONDAY, ("2023-06-01", "2023-07-01")),
    ("the festival is next week", MONDAY, ("2023-05-15", "2023-05-22")),
    ("I lost my job at the store this month", MONDAY, ("2023-05-01", "2023-06-01")),
    # 2..5 days back, both ends included
    ("a few days ago I painted a sunset", MONDAY, ("2023-05-03", "2023-05-07")),
    # vague counts and seasons, against the message's own day (Monday 8 May 2023)
    ("I started pottery a couple of weeks ago", MONDAY, ("2023-04-17", "2023-05-01")),
    ("We adopted her a few months ago", MONDAY, ("2022-12-01", "2023-04-01")),
    ("Last summer we drove to the coast", MONDAY, ("2022-06-01", "2022-09-01")),
    ("We met last Christmas", MONDAY, ("2022-12-25", "2022-12-26")),
    # a duration up to now in the present perfect tells when it began (the unit that many back)
    ("I've had them for 3 years now and they bring me joy", MONDAY, ("2020-01-01", "2021-01-01")),
    ("We have been friends for two months now", MONDAY, ("2023-03-01", "2023-04-01")),
    ("She has been teaching for fifteen years", MONDAY, ("2008-01-01", "2009-01-01")),
    ("I've lived here since 2019", MONDAY, ("2019-01-01", "2020-01-01")),
    # a duration that is not up to now, or not after a perfect in the same sentence: nothing
    ("I'm away for two weeks", MONDAY, None),
    ("It took 3 years to finish", MONDAY, None),
    ("I have a dog. For 3 years I wanted one", MONDAY, None),
    ("I have been waiting for 2 hours", MONDAY, None),  # not a unit the days are counted in
    # an absolute date is kept as it is
    ("the race was on 2 April 2023", MONDAY, ("2023-04-02", "2023-04-03")),
    # of two periods the narrowest wins: "yesterday" says more than "this month"
    ("This month has been busy; yesterday I finally finished the mural", MONDAY, ("2023-05-07", "2023-05-08")),
    # across a year boundary: Sunday 1 January 2023, "last month" is December 2022
    ("I got the tattoo last month", float(calendar.timegm((2023, 1, 1, 10, 0, 0))), ("2022-12-01", "2023-01-01")),
    # abbreviated weekdays that are no English word (Sat and Sun are, so they are not read)
    ("Last Fri I took my kids to a workshop", MONDAY, ("2023-05-05", "2023-05-06")),
    ("I joined a new group last Tues.", MONDAY, ("2023-05-02", "2023-05-03")),
    ("see you next thurs!", MONDAY, ("2023-05-11", "2023-05-12")),
    ("I last sat there years ago", MONDAY, None),
    # "this <weekday>": that day of the message's week, before or after the message's day
    ("I'm meeting him this Friday", MONDAY, ("2023-05-12", "2023-05-13")),
    ("This Thursday I went out", SATURDAY, ("2023-05-11", "2023-05-12")),
    # a bare weekday: behind the message, unless its sentence speaks of what is to come
    ("I won my fourth tournament on Friday! It was awesome.", MONDAY, ("2023-05-05", "2023-05-06")),
    ("Saturday night we danced", SATURDAY, ("2023-05-06", "2023-05-07")),
    ("I'm going to a gig on Friday", MONDAY, ("2023-05-12", "2023-05-13")),
    ("We'll talk on Monday. I went out on Friday.", SATURDAY, ("2023-05-12", "2023-05-13")),
    ("I love Saturdays", MONDAY, None),  # a habit, not a day
    # recency words, read only when nothing more precise is told, and not in a question:
    # "just" done is within 3 days of the message, "recently" / "lately" within 30
    ("I just launched an ad campaign for my store", MONDAY, ("2023-05-05", "2023-05-09")),
    ("I've been painting a lot recently", MONDAY, ("2023-04-08", "2023-05-09")),
    ("I just got back from Rome last Saturday", MONDAY, ("2023-05-06", "2023-05-07")),
    ("I just wanted to say hi", MONDAY, None),  # a verb of mind is no event
    ("It's just that I'm tired", MONDAY, None),
    ("Have you made any art lately?", MONDAY, None),  # asked, not told
    ("the other day I saw a deer", MONDAY, ("2023-05-01", "2023-05-08")),  # the week before
    # "over the weekend": the latest weekend begun before the message's day, or the next one
    ("I went hiking over the weekend", MONDAY, ("2023-05-06", "2023-05-08")),
    ("I'll go hiking over the weekend", MONDAY, ("2023-05-13", "2023-05-15")),
    # a month without a year: the latest one up to the message's month, or the next one ahead;
    # "last" is strictly before the message's month, "this" is the message's year's
    ("I went to Paris in March", MONDAY, ("2023-03-01", "2023-04-01")),
    ("We visited in early June", MONDAY, ("2022-06-01", "2022-07-01")),
    ("We're going to Rome in June!", MONDAY, ("2023-06-01", "2023-07-01")),
    ("I started a job in May", MONDAY, ("2023-05-01", "2023-06-01")),
    ("Last May I ran a marathon", MONDAY, ("2022-05-01", "2022-06-01")),
    ("this December we will travel", MONDAY, ("2023-12-01", "2024-01-01")),
    ("This may help you", MONDAY, None),  # "may" and "march" count only as "May", "March"
    ("in May 2022 we met", MONDAY, ("2022-05-01", "2022-06-01")),  # with its year: planner.dates
    # a day of a month without a year: the latest up to the message's day, or the next ahead
    ("I had an interview on May 3rd", MONDAY, ("2023-05-03", "2023-05-04")),
    ("We met on the 14th of June", MONDAY, ("2022-06-14", "2022-06-15")),
    ("I'll see you on Sept. 3rd!", MONDAY, ("2023-09-03", "2023-09-04")),
    ("We married on 2nd April", MONDAY, ("2023-04-02", "2023-04-03")),
    ("On February 30 nothing happened", MONDAY, None),  # no such day
    ("Give me 3 of June's apples", MONDAY, None),  # a possessive names no day
    # vague or unanchored: nothing
    ("a while ago I saw a deer", MONDAY, None),
    ("I love Saturdays", MONDAY, None),
    ("in May we'll see", MONDAY, ("2023-05-01", "2023-06-01")),  # ahead, and May is the message's month
    ("", MONDAY, None),
    # a timestamp outside the years planner.dates accepts, or NaN: nothing, no error
    ("yesterday", float("nan"), None),
    ("yesterday", 1e300, None),
])
def test_told_span(text: str, created: float, expected: tuple[str, str] | None) -> None:
    assert told(text, created) == expected


@pytest.mark.parametrize(("query", "expected"), [
    ("When did Jo start the new job?", True),  # the usual form
    ("when is the festival?", True),  # any tense
    ("What date was the race?", True),  # asks for a date
    ("In which month did they move?", True),
    ("How long ago did we talk about it?", True),  # "how long ago" anywhere
    ("How long has Jo had her dog?", True),  # a duration up to now: when it began
    ("How long have they been friends?", True),
    # a preposition or "around" before the question word
    ("In what year did Jo move?", True),
    ("On which day did they meet?", True),
    ("During which month did they meet?", True),
    ("Around when did Jo move?", True),
    ("Since when has Jo been painting?", True),
    ("Which weekend did they go camping?", True),
    ("What was the date of the party?", True),
    ("How many years ago did Jo move?", True),
    ("Which season does Jo love?", False),  # a preference, not a time
    ("At what age did Jo start?", False),
    ("How long did the trip take?", False),  # a duration, not anchored to now
    ("What did Jo do when she moved?", False),  # "when" inside a clause asks no time
    ("What activities does Jo do?", False),
])
def test_asks_when(query: str, expected: bool) -> None:
    assert asks_when(query) is expected


def test_told_closeness_credits_overlap_and_fades() -> None:
    day = 86_400.0
    april = query_windows("what happened in April 2023?", MONDAY)
    assert len(april) == 1
    w = april[0]
    start = np.array([w.start + 3 * day, w.end + day, w.end + 10 * day, np.nan])
    end = start + day
    got = told_closeness(start, end, 4, april)
    # inside: full credit; a day after: less than half; ten days after and unknown: none
    assert got[0] == 1.0
    assert 0.0 < got[1] < 0.5
    assert got[2] == 0.0 and got[3] == 0.0


def _seed(mem: Memory) -> int:
    """Three sessions on 10, 20 and 25 May 2023 (none within planner.rank.DATE_SLACK_DAYS of April); the second one's turn tells of April. Returns its position."""
    may1 = float(calendar.timegm((2023, 5, 1, 10, 0, 0)))
    fillers = ["How are things going?", "Pretty good, busy at work.", "Nice, anything new?",
               "Not much, just the usual.", "Cool, talk soon!", "Sure, bye for now."]
    target = -1
    for s, day in enumerate((9, 19, 24)):
        batch: list[dict[str, object]] = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f,
             "created_at": may1 + day * 86_400 + i * 60} for i, f in enumerate(fillers)]
        if s == 1:
            batch.insert(3, {"role": "user", "content": "We moved into the new flat last month.",
                             "created_at": may1 + day * 86_400 + 150})
        positions = mem.append_many("c", batch, session_id=f"s{s}")
        if s == 1:
            target = positions[3]
    return target


def test_turn_cache_holds_told_periods_and_rebuild_recomputes_them(cold_memory: Memory) -> None:
    target = _seed(cold_memory)
    table = cold_memory.turns.get("c")
    assert table.told_start is not None and table.told_end is not None
    i = table.index_of(target)
    assert i is not None
    # sent 20 May 2023, "last month" is April 2023
    assert (_iso(table.told_start[i]), _iso(table.told_end[i])) == ("2023-04-01", "2023-05-01")
    # the fillers tell of no time
    assert int((~np.isnan(table.told_start)).sum()) == 1
    before = (table.told_start.copy(), table.told_end.copy())
    cold_memory.rebuild()
    assert cold_memory.turns.stats()["conversations"] == 0  # the derived copy was dropped...
    again = cold_memory.turns.get("c")  # ...and is recomputed from the log alone
    assert again.told_start is not None and again.told_end is not None
    np.testing.assert_array_equal(again.told_start, before[0])
    np.testing.assert_array_equal(again.told_end, before[1])


def test_a_query_naming_a_period_retrieves_the_turn_that_tells_of_it(cold_memory: Memory) -> None:
    target = _seed(cold_memory)
    query = "What happened in April 2023?"  # shares no word with the turn; no turn was sent in April
    cold_memory.append("c", {"role": "user", "content": query})
    ctx = cold_memory.context("c", query, budget=300)
    retrieved = sorted((i for i in ctx.plan.items if i.slice == "retrieved"), key=lambda i: -i.score)
    assert retrieved and target in retrieved[0].positions  # the best retrieved turn
    assert "tells when" in retrieved[0].reason


def test_a_when_question_prefers_the_turn_that_says_when(cold_memory: Memory) -> None:
    target = _seed(cold_memory)
    query = "When did they do it?"  # no period named: the turn that says when ranks up
    cold_memory.append("c", {"role": "user", "content": query})
    ctx = cold_memory.context("c", query, budget=300)
    items = {p: i for i in ctx.plan.items if i.slice == "retrieved" for p in i.positions}
    assert target in items
    assert "tells when" in items[target].reason


# The phrases the turn rules look for, and words that hold a weekday's or a month's first
# letters without naming one ("friend", "maybe", "decided").
_TOLD_FRAGMENTS = ["this morning", "tonight", "last night", "tomorrow", "next week", "next month", "next year",
                   "last Friday", "last Fri", "next Tues", "this thurs", "this past Sunday", "on Friday",
                   "Saturday night", "on Fridays", "last weekend", "this weekend", "two weekends ago",
                   "over the weekend", "in May", "last March", "this June", "since August", "May 3rd",
                   "the 14th of June", "Sept. 3", "in May 2022", "I just joined", "I just wanted", "the other day",
                   "recently", "lately", "we will", "I'll", "going to", "friend", "maybe", "decided", "march", "?",
                   ".", "!"]
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOLD_FRAGMENTS), max_size=12), st.sampled_from([MONDAY, SATURDAY]))
def test_word_gates_only_skip_patterns_that_cannot_match(parts: list[str], created: float) -> None:
    # each turn pattern runs only when its words are among the text's: the same span as with
    # every pattern always run, for any mix of the words they look for
    text = " ".join(parts)

    class EveryWord(frozenset[str]):
        """Every word is in it: no gate skips its pattern."""
        def __contains__(self, _word: object) -> bool:
            return True

        def isdisjoint(self, _other: Iterable[object]) -> bool:
            return False

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timeline, "_words", lambda _text: EveryWord())
        ungated = told_span(text, created)
    assert told_span(text, created) == ungated
