"""Supersession: which earlier turns does a correction or retraction replace?

``find_superseded`` is called with a new user turn and the earlier user turns of the same
conversation (most recent last).  It returns the positions the new turn supersedes, each with a
reason, and returns nothing unless the turn carries a correction or retraction cue *and* an earlier
turn plausibly matches.  An opener that announces a correction ("Sorry,", "Correction:",
"Update:") is a cue where what follows asserts a typed value ("Sorry, the store opens at
10am."); an apology that states none ("Sorry, I was busy.") is not, nor its reason, what
the speaker was doing ("Sorry, I was waiting 20 minutes for a bus.").  Precision matters more than recall here: a wrong supersession unpins and
marks stale a constraint that is still live, which is worse than leaving an outdated one pinned.

Matching, in order of strength:

1. the old value named in the correction ("not Lisbon", "instead of Postgres") appears in a turn;
2. shared content words and entities ("Acme", "hotel", "budget"), entities weighted double;
   where a correction names the slot it gives a value of ("the wifi password at the cabin
   is now cedar77", "switch my seat preference to ..."), a turn matched by no more than one
   shared word and no value of the same type must mention that slot's head noun, or name
   it by its verb ("I prefer aisle seats." for a seat preference), or hold a modifier of
   it in the speaker's own choice or habit ("I like aisle seats on flights.")
   (`_named_slot`, `_slot_mentioned`; the meaning search's shared word too): "The cabin
   was freezing last night." shares only the password's place, and is no target, nor is
   "The seat on the bus was broken today." (a seat's state, no preference); a prohibition's
   verb ("Never book me on red-eye flights.") is no word an order with "instead" shares
   with it ("In this branch, book Porto instead."): that order gives what the user wants
   in place of what the rule rules out or of another thing, and the rule stands unless the
   order names what it is about, by a word or a value ("book me on red-eyes instead",
   "call me after 10pm instead"; `_without_prohibited_verbs`). A rule to do ("Always seat
   me by the window.") is revised by its verb as before ("seat me on the aisle instead");
3. a slot-style correction ("make it Wednesday") matches the most recent turn holding a value of
   the same slot type (weekday, time, a routine's part of the day, date, money, number with its
   unit, place, size, e-mail, phone, language);
4. embedding similarity, when both sides have an embedding, breaks ties and can match alone
   above ``min_similarity`` (``SIMILARITY_ALONE_MIN_COSINE``). The ``Superseder``'s meaning
   search takes an update at a weaker cosine only where it asserts a new value of the
   target's kind; a retraction, which asserts none, takes a turn that shares no word or
   value with it only above the cosine unrelated turns reach (``RETRACTION_ALONE_MIN_COSINE``:
   "forget the restaurant" is not the hotel booking at 0.32, "forget the spending limit I
   gave you" is the budget at 0.40), and never one that lacks a place or a time the
   retraction's clause names after its object: that is an errand of its own sharing a
   word ("drop the kids at the pool at 5pm" is not "pick up the kids from school at
   3pm"; `_errand_of_its_own`), unless another update cue ("instead") is said too;
5. a bare retraction ("scratch that", "never mind"), or one whose words match nothing,
   takes back the user's previous turn (the assistant's reply to it passed over) where
   that is a request or a load-bearing statement, and nothing where it was a question or
   small talk: never a turn further back (`_just_said`; "Never mind." after "What's the
   weather like in Rome?" leaves "I'm allergic to peanuts" current), nor, for a bare one,
   the end of a chain or a turn near in meaning. One that names what it drops by a noun
   no turn holds ("Forget the restaurant.", "Never mind the restaurant.") takes back the
   latest recent request naming a place by its name alone ("Book a table at Nong's"),
   where the noun is that request's kind by meaning (`KindCheck`: the restaurant, the
   dinner; never the hotel, the flight, the password or the weather), and nothing else:
   not a request naming its own kind ("Book the Altis hotel"), nor a fact ("I'm allergic
   to peanuts"; `_named_venue`). A noun naming a thing by the act that arranged it
   ("the reservation", "the appointment", "the booking"; "the order":
   `ARRANGEMENT_NOUNS`) takes back the latest recent request of that act, whatever was
   booked or ordered ("Book me a flight", "Order a pizza"; `_arrangement`), or the latest
   statement of the user's own such thing that stands ("I have a dentist appointment on
   Friday."; `_states_arrangement`; never "I had ...", "I have to make ...", another
   person's), never one of the other act, another fact or a question; its plural ("the
   reservations") each of them. A request's kind is its own noun's for what it books
   ("a table" the restaurant's; `_booked_thing`), never its hour's or its name's. Only
   the retraction's noun phrase names what it takes back (`_RETRACTED_OBJECT`): a day or
   an hour after it ("Never mind the movie tonight.", "Forget the pharmacy, I'll go
   tomorrow.") is no evidence of a target, no new value and no part of its meaning search
   (`_without_times`, `_meaning_text`); it only narrows among the turns the noun names
   ("Forget the restaurant tomorrow." takes tomorrow's table over a later one).
   A correction or retraction that revises nothing is no pin (`Superseder._demote`,
   derived labels): a bare one drops to small talk; one carrying a new fact, once the
   meaning search had its say too, to the label it has as an ordinary turn, unless a clause of it is the user's own ("Actually I live in
   Porto, not Lisbon." still states where the user lives; "Never mind the restaurant."
   is no standing order as an ordinary turn). At 90 it filled the pinned share and pushed
   out the very fact it no longer retracts;
6. an order that calls off a plan by its name ("Cancel the haircut.", "Call off the
   concert.", `_PLAN_RETRACTION`) takes the latest earlier request that names it (a content
   word shared after the request's verb), never a statement of fact but the user's own
   arrangement (below): "Cancel my subscription." after "My Netflix subscription is $15
   a month." corrects nothing. One
   that names its thing by a kind no turn holds a word of, the whole turn ("Cancel the
   dinner.", `_KIND_CALL_OFF`), takes back what "Forget the restaurant." would: the
   latest recent request naming a place by its name alone, of the noun's kind by the same
   check ("Cancel the flight." takes no table back); "Cancel my gym membership,
   I'm moving." names the user's own thing and tells more, and takes back nothing.
   "Cancel the reservation." / "Cancel my order." take back what "Forget the
   reservation." would: "my" is the user's own booking there. "Cancel the dentist
   appointment." takes back "I have a dentist appointment on March 12." as it would the
   request that booked it. A reminder and an alarm are named by their act too ("Cancel the
   reminder." / "Delete that reminder." after "Remind me to call mum at 6." or "Set a
   reminder to ..."). A plan told to be off, its noun the subject ("The movie tonight is
   off.", "The picnic's cancelled.", `_OFF_STATE`), is such a call-off, and so are "Cancel
   breakfast.", "Don't bother with the flowers."; a bare "off" only of an event's noun
   (`EVENT_NOUNS`: dinner, trip, picnic, movie, ...) or of the thing a booking booked
   ("The spa day is off.", `_off_fits`), or of a kind of business where a booking named
   its place by its name alone ("The restaurant is off." after "Book a table at Nong's",
   `VENUE_KINDS`, by the kind check): of a device or a thing a reminder or an order
   merely mentions it is a state ("The heating is off now." leaves "Remind me to turn off
   the heating at 10pm.", "The light is off." any booking); an outing told by "go" and
   its -ing form ("We're going hiking on Saturday.") is named by its noun ("The hike is
   off.", `_go_outings`); tickets at a place named by its name alone are for a show
   ("Never mind the movie tonight." after "Get two tickets at the Odeon for tonight.",
   `SHOW_NOUNS`, `ADMISSION_NOUNS`). A request told to be needed no more ("No need to
   remind me about mum.", `_NO_NEED`) takes back the latest recent request of that verb
   that its object names as a whole, by its words or its head noun's other name (`_not_needed`;
   "No need to thank me." names no request; "mum's number", "the rent increase" name
   another thing than "call mum", "pay the rent"; "twice", "again", "so often" complain
   of the reminding); a plan of the user's own told with its
   day ("Let's plan a picnic on Sunday.", `_own_plan`) is called off as a request is. A meal
   is told by its hour (`MEAL_HOURS`: "the lunch" is no sushi for 8pm, "the dinner" no
   "table for lunch"), on every path that takes a turn back for a noun (the kind check,
   another name, a shared word, the meaning search: `_meal_fits`, `_retracted_noun`), and
   a request may name the thing by another word ("the movie" /
   "the new Dune film", `KindCheck.synonym_in`), or through "it" the user's turn before it
   ("Get two tickets at the Odeon for it."). A worry waved off ("Forget about it, it's
   fine.", `_DISMISSAL`) takes nothing back.

Among equal scores the most recent turn wins, and load-bearing turns are preferred.
Only the single best turn is returned: one correction revises one earlier turn (the
``Superseder`` then decides which of its statements), except a retraction that names its
topic ("Forget what I said about the spa."), which takes back every turn holding it of
the best one's kind, a request for a request, a statement for a statement
(`_rest_of_topic`).

``Superseder`` is the one place that decides supersession for a conversation (live
appends, batches, and the replay of ``rebuild``), over the cold store, the embedder and
the turn classifier through their public methods. Its invariants:

- Only assertions supersede. Only a user turn's assertive sentences (its questions
  removed; of a sentence that asserts and then asks after a comma, "my flight is on the
  14th, can you rebook?", only what comes before the request) can supersede; a question, small talk, a tool result or an assistant turn
  never does. A turn is superseded by what it asserts too: one labelled a question that
  states a fact in a sentence of its own ("My flight is on the 12th. What time is
  check-in?") takes the label of its assertive sentences as a target, and only those
  are its statements. Such a sentence is superseded the same way: its statement is the part
  before the request ("my flight is on the 12th, can you check it?" is a request, not a
  question, to the classifier, as with a period). A part before the request that opens
  with a condition or a hedge ("if my flight is on the 14th, ...", "maybe ...", "I'm not
  sure ...": classify.UNASSERTED_OPENERS) asserts nothing: the sentence is read whole
  (classify.request_tail, the one reading of both). An attachment's bracketed description ("[image: a photo of ...]") asserts
  nothing: it neither supersedes nor is superseded. A cue word inside an idiom that
  revises nothing ("I'll never forget it", "from scratch", "drop by") is no cue, and
  joining something new ("I joined a running group") adds, where joining a named place
  ("I joined Globex") changes. A turn with update words ("now", "actually", "change") supersedes by
  meaning only when it asserts a value (a typed slot value or a name) for the same slot
  or topic as its target; a routine told by "I / we / she ... now <verb>" ("I now go to
  the gym on weekday mornings") only where it shares a content word with its target too.
- Whose fact and about what (`may_revise`): a clause revises a clause of the same
  holder (someone else's change never revises the user's own fact, nor another named
  person's; a possessive is "'s" or a plural's "'", "my parents' address", and a party
  is the same in the singular and the plural, "my kid's" / "my kids'"; the person of "my
  best friend", "my older sister", "my ex-husband" is the noun after the modifiers,
  `_PARTY_MODIFIERS`) and about the same thing: where both state a value of a named thing (the noun
  phrase before a verb of state, "my work laptop has ...", "Anna lives ...", or before a
  present-tense verb with a value, a plural's without its -s, "the gym classes start at
  6", or with a bare object before it, "the nurses change shifts at 7pm", or with a
  frequency, "my dog eats twice a day": a routine, no event), the same head noun, in the
  singular or the plural ("my yoga class" / "my yoga classes", "the nurse" / "the nurses":
  one stem, `_stem`), picked by the same words where both pick one ("my cat
  is 5 now" never revises "my dog is 3", nor "my home laptop" "my work laptop", nor "Maria lives" "Anna
  lives"), or one's head is the other's possessor ("Theo's practice" / "Theo"), or the
  new one's head picks out the old one ("Order's been changed" / "my order number"; where
  both tell a kind, not by a plain adjective of the whole: "my car is blue now" is not "the
  car seat is black"), or
  the old one's head picks out the new one where both tell a kind and the old one's is a
  treatment of the whole, told by a participle, or a typed value that names it ("the
  kitchen walls are green" / "the kitchen is painted blue", "the phone number is wrong"
  / "my phone is 555-0142"; never a place, time, amount or identity: "the car seat cost
  $300" is not the car's price; nor a plain adjective: "the car seat is black" is not the
  car's colour, "my car is red"). The user changing a thing "to" a value ("I changed my
  personal email to ...", `_changed_object`) is about that thing: never "my work email".
  A head followed by a purpose ("my budget for the trip is") is the
  subject. A correction whose typed values its target already holds all ("Actually, it's
  raining in Oslo now." / "I live in Oslo.") revises nothing of it (`_holds_every_value`),
  and one naming a replaced value no turn holds ("Instead of flowers, ...") nothing at all,
  however strong its match. A
  clause that names no such thing (I/we, a pronoun, an order, an action on an object)
  may revise any, the meaning search included; but a thing acting on an object ("my cat
  knocked a glass over", "my cat broke a glass": the verb is read by the article,
  possessive or object pronoun after it, whatever its form) tells an event, no value of
  that thing, and a statement of its state ("my cat is 5") never revises it.
- What a correction leaves standing: one that drops some items of a list and not all
  ("I'm not allergic to latex after all." / "I'm allergic to penicillin and latex.": a
  negation or a removal, holding no list of its own, `names_part_of_list`) supersedes
  nothing of that statement, by any path (the rules, a chain, the meaning search): it
  stays current beside the correction, the lesser harm than hiding the penicillin
  allergy. Who a correction reports ("Linda said the offsite is moved ...") is no word
  it shares with a statement naming them ("My manager is Linda."), nor, where that is
  all the two share, a target by meaning (`_reporter_alone`). A value of a noun for a
  thing ("My budget for the new phone is $700.") revises no statement of that noun
  qualified otherwise that never names the thing ("... for the new laptop", "the grocery
  budget": `_other_purpose`). What a party eats, drinks or smokes is the party's own
  ("my dad doesn't eat beef anymore" is his, no change of the user's diet).
- What kind of the user's fact (`fact_kinds`, closed word classes): where they live,
  where they work, what they eat, what they are called. A correction revises only a turn,
  and of a turn only a statement, of a kind it tells too where both tell one (the rules,
  the meaning search, a chain's head): "I now work as a nurse at Swedish Medical Center in
  Seattle" is no move though it names the city the user moved to, "I moved to Seattle"
  ends no job beside "I live in Portland", "I moved jobs" is no move. A state change of a
  kind revises the latest statement of that kind held by the same party, as "make it
  Wednesday" the latest weekday: "I'm vegetarian now" / "I went vegan" / "I don't eat
  fish anymore" (`_DIET_CHANGE`) revise "I eat fish and chicken", never "my sister eats
  fish"; a name given anew with the one it replaces ("call me Sam, not Samuel",
  `_NAME_CHANGE`) revises the statement that gave that name, a greeting's ("Hi! I'm
  Samuel Ortiz.") too, never another name. A statement of none of these kinds fits any.
- Restatements go with what they restate: a correction supersedes every current earlier
  user turn that says again what it revises (`_restates`: the same words, or the same
  holder giving the same value of the same kind of fact), not only the one it matched
  best: "I live in Oslo." said twice, then "Actually I moved to Bergen.", leaves neither
  saying current, also where one saying opens with a lead-in ("Remember, ...", "As I
  said, ...", "Note that ...": `_OPENER`, whose holder is what follows it). Never a
  value superseded before, another kind, holder or thing, nor another occasion or time:
  the same values both ways and the same time qualifiers (`_occasion`: "My flight is at
  9am today." is no saying of tomorrow's, "I lived in Oslo in 2019." / "I used to live
  in Oslo." none of "I live in Oslo.").
- Acknowledgements follow their source: an assistant turn shortly after a superseded
  statement that restates its value (the same slot value or name) is superseded by the
  same turn, so the echo is never presented as current either.
- Whose voice (`voices_may_revise`): where a message names its speaker (its ``name``, a
  group chat's "alice"), that name holds its "I" and "my". Of two different named
  speakers, a first-person clause of one never revises one of the other ("I moved to
  Lisbon" by Bob is not Alice's "I live in Porto"), nor does one's bare retraction take
  back the other's turn; a clause of nobody in particular revises across speakers as
  within one ("Actually the meeting is at 5" by Bob). A message that names nobody may be
  anyone's, as in a chat of one user whose client names the speaker on some messages only.
- Supersession is derived: ``turns.superseded_by`` in the turn index, rebuildable from
  the log by replaying it (``replay``), never an edit of a message. The pairs and the
  labels a correction inherits are written in one transaction, which reports the log's
  pin changes it made (``Recorded.moved``), so the hot set applies them as its own
  rather than being rebuilt for them (tiers.hot, pin versions). A superseded
  statement's validity interval (``Validity``: valid from its own position and time
  until the superseding turn's) is read from that column and the turn times, so it
  needs no storage of its own.
- Supersession targets statements (``consolidation/statements.py``): where the target
  turn states several facts, each statement of the correction revises the target's
  statement it matches best; the others stay current. Those are recorded as statement
  rows (``tiers/statements.py``: character spans of the stored text), not in
  ``superseded_by``, which is set only once none of the turn's statements holds. A
  turn current in part is matched by what still holds of it.
- Chains are followed whatever the steps share: a correction that matches only a
  superseded value revises the end of its chain, and an elliptical replacement ("make
  it Le Meurice") with nothing in common revises the latest value being changed. The
  new value of a load-bearing statement is labelled load-bearing too.
- Work per batch is bounded: candidates are read once per batch (pins and a window of
  recent turns), earlier turns of the batch are kept in memory, the rules decide first,
  and only the corrections they leave unresolved, at most ``MAX_MEANING_LOOKUPS`` of a
  batch, are embedded for the meaning search.
- A correction searched by meaning while a turn before it had no vector (the background
  indexer held it, the model call of the check's own catch-up failed, more than
  INLINE_INDEX_ROWS turns were pending) and that revised nothing is not final: it is
  recorded (`supersession_rechecks`, derived) and searched again, once, in log order, when
  every turn before it has its vector (`Superseder.recheck`, run by the catch-up after
  its pool's hooks; it never waits), and is no idle correction (`_demote`) until then.
  The statement it revises would otherwise stay current for good: its own check looks
  back only. Where no turn was pending, nothing more is read or written.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tiermem.consolidation.classify import (
    CLASSIFY_MAX_CHARS,
    DAY_NAMES,
    PRIORITY,
    after_wish,
    correction_cue,
    normalize,
    request_tail,
)
from tiermem.consolidation.statements import remaining_text, statement_spans
from tiermem.lazyre import LazyPattern, lazy_compile
from tiermem.tiers.embed import cosine_from_l2
from tiermem.tiers.memo import memo_scope, remembered_for, scoped_cache
from tiermem.tiers.models import speaker_name
from tiermem.tiers.statements import NOTHING_HIDDEN, Hidden, StatementRow, read_hidden
from tiermem.tiers.vectors import row_dots

if TYPE_CHECKING:
    from tiermem.consolidation.classify import TurnClassifier
    from tiermem.tiers.embed import Embedder
    from tiermem.tiers.models import TurnRow
    from tiermem.tiers.store import ColdLog
    from tiermem.tiers.turncache import TurnCache, TurnTable

__all__ = ["NOT_SUPERSEDABLE", "UPDATE_CUE", "Appended", "Candidate", "KindCheck", "Superseder", "Validity",
           "assertive_text", "detect_slots", "find_superseded"]

log = logging.getLogger("tiermem")


@dataclass(frozen=True)
class Candidate:
    """An earlier user turn that a correction might supersede."""

    position: int
    text: str
    intent: str
    load_bearing: bool
    embedding: np.ndarray | None = None
    # who said it, where the message names its speaker ("alice" in a group chat): the
    # holder of its "I" and "my" (`voices_may_revise`)
    speaker: str | None = None


# Turns that state nothing a correction could revise, and that never revise anything.
NOT_SUPERSEDABLE = frozenset({"question", "chitchat", "tool_result"})

# --------------------------------------------------------------------------------------------------
# Cues
# --------------------------------------------------------------------------------------------------

# A value that went up or down to a number ("we're down to 9 seats", "the rent went up to
# $2,100") or moves to one ("the sessions move to 7am"; not "moving to the next item").
_VALUE_MOVE = (r"(?:(?:is|are|'s|'re|was|were|went|goes|go|has gone|have gone|dropped|fell|rose|came) (?:down|up)"
               r"|moves?|shifts?|is moving|are moving|will move) to (?=[$€£]?\d)")
# A change from a named time on ("from next week ...", "starting Monday ...", "as of today ..."),
# as "from now on" is; not a span of days.
_DAY = rf"(?:{DAY_NAMES})"
_FROM_THEN_ON = (rf"^(?:from|starting|as of|beginning) (?:next \w+|this (?:week|month|year|weekend|{_DAY})|tomorrow"
                 rf"|today|{_DAY})\b(?! (?:to|through|till|until|and)\b|-)")  # "from Monday to Friday" is a range
# State changes that revise a fact without a correction word: "I moved to Seattle", "I joined Globex".
_STATE_CHANGE = lazy_compile(
    # ("joined a ..." adds a membership, "joined Globex" changes an employer)
    r"\b(?:i|we|she|he|they|it)(?:'ve| have)? switched (?:the |my |our |its |their )?\w+(?: \w+)? to\b"
    r"|\b(?:i|we|she|he|they|it)(?:'ve| have)? (?:moved to|switched to|joined(?! (?:a|an|another|some)\b)|left|quit|"
    r"changed(?! (?:my|our) minds?\b)|started at|"
    r"now work|now live|got a new|no longer)\b|\b(?:changed(?! (?:my|our) minds?\b)|moved)\b.{0,30}\b(?:to|now)\b|\b(?:my|our|the) new \w+(?: \w+)? (?:is|are)\b"
    # "switch to English instead": a change of value ordered without naming the slot
    r"|^(?:please |ok,? |okay,? )?(?:switch|change|move|go) (?:back |over )?to\b"
    # "we're down to 9 seats", "the sessions move to 7am": a value moved
    r"|\b" + _VALUE_MOVE + r"|" + _FROM_THEN_ON +
    # "on second thought, the client should be aiohttp": a revision announced, not named
    r"|^(?:(?:hmm+|oh|ok(?:ay)?|well|no)[,.!]?\s+)?on (?:second thoughts?|reflection)\b"
    # "the phone number is wrong: it's ...", "sorry, it's 4 nights": a wrong value replaced
    r"|\b(?:is|was) wrong[,:;.!]+\s*(?:it's|it is|it should be|the right one is|should be)\b"
    r"|^(?:sorry|oops|my mistake|my bad)[,.!:]?\s+(?:it's|it is|it should be|that should be|i meant)\b"
)
# A diet is a closed class of terms (classify's personal constraints know them too): "I'm
# vegetarian now", "I went vegan", "I stopped eating meat", "I don't eat fish anymore" change
# what the user eats, as "I moved to Seattle" changes where they live.
DIET_TERMS = (r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|keto|paleo|kosher|halal|carnivore"
              r"|plant[- ]based|gluten[- ]free|dairy[- ]free|lactose[- ]free")
_DIET_CHANGE = (
    rf"\b(?:i|we|she|he|they)(?:'m|'re|'s| am| are| is)(?: (?:now|fully|strictly|completely|mostly|a|an))* "
    rf"(?:{DIET_TERMS})(?: \w+)? (?:now|these days|from now on)\b"
    rf"|\b(?:i|we|she|he|they)(?:'m|'re|'s| am| are| is) now (?:(?:fully|strictly|completely|mostly|a|an) )*"
    rf"(?:{DIET_TERMS})\b"
    rf"|\b(?:went|gone|going|turned|became|become|becoming|switched to|changed to) (?:(?:fully|strictly|completely"
    rf"|mostly|a|an) )*(?:{DIET_TERMS})\b"
    r"|\b(?:stopped|quit|quitting|gave up|giving up) eating\b"
    r"|\b(?:don't|do not|doesn't|does not|no longer|never) eat\b[^.!?;]*\b(?:anymore|any more|these days|now)\b"
)
# A name given anew with the one it replaces ("call me Sam, not Samuel", "I go by Sam now,
# not Samuel", "I'm Sam, not Samuel"): a name-giving pattern, then the old name after
# "not" / "instead of" (`_old_values`), which the target must hold (`_NAME_PATTERN`).
_NAME_GIVING = r"(?:call me|i go by|i'm called|i am called|my name is|my name's|i'm|i am)"
_NAME_CHANGE = (rf"\b{_NAME_GIVING} [a-z][\w'-]*(?: now)?,? (?:not|instead of|rather than) [a-z]")
_STATE_CHANGE = lazy_compile(_STATE_CHANGE.pattern + "|" + _DIET_CHANGE + "|" + _NAME_CHANGE)

# --------------------------------------------------------------------------------------------------
# Kinds of a person's facts
# --------------------------------------------------------------------------------------------------

# What a statement about a person tells, of the few kinds a life update changes on its own
# (closed word classes; `fact_kinds`): where they live, where they work, what they eat, what
# they are called. A change revises only a statement of the same kind where both tell one:
# "I now work as a nurse at Swedish Medical Center in Seattle" is no move, though it names
# the city the user moved to, and "I moved to Seattle" ends no job. A statement of none of
# these kinds fits any (the other rules decide, as before).
HOME = "home"
WORK = "work"
DIET = "diet"
NAME = "name"
_MOVE_NOT_HOME = (rf"jobs?|compan(?:y|ies)|teams?|employers?|roles?|positions?|departments?|desks?|offices?|"
                  rf"on|forward|ahead|up|down|over|it|them|(?:to|up to|back to) (?:[$€£]?\d|{DAY_NAMES}|"
                  rf"the (?:next|other)\b)")
_KIND_PATTERNS: tuple[tuple[str, LazyPattern], ...] = (
    (HOME, lazy_compile(
        r"\b(?:live[sd]?|living) (?:in|at|on|near|with|by|outside|downtown|abroad|alone|here|there|"
        r"close to|next to|just)\b"
        r"|\b(?:i|we|he|she|they|family)(?:'ve| have| had| just| recently| finally| also| now)* "
        r"(?:moved|relocated|move|am moving|'m moving|are moving|'re moving)\b(?! (?:" + _MOVE_NOT_HOME + r")\b)"
        r"|\b(?:my|our|his|her|their) (?:new |old |current |home )?address\b"
        # the same fact in other words, so that a restatement of it is one (`_restates`):
        # "I reside in Oslo", "I'm based in Oslo", "My home is in Oslo" (not "my company is
        # based in ...": only the speaker's own "I'm / we're based")
        r"|\b(?:reside[sd]?|residing) (?:in|at|near)\b"
        r"|\b(?:i|we)(?:'m|'re| am| are)(?: now| currently)? based (?:in|at|near|out of)\b"
        r"|\b(?:my|our) (?:new |current )?home is (?:in|at|near|now)\b", re.IGNORECASE)),
    (WORK, lazy_compile(
        r"\bwork(?:s|ed|ing)? (?:as|at|for|in|from|with|remotely|part[- ]time|full[- ]time|nights|days|shifts)\b"
        r"|\b(?:jobs?|employer|employed|hired|career|profession|occupation|promoted)\b", re.IGNORECASE)),
    (DIET, lazy_compile(
        rf"\b(?:{DIET_TERMS}|diet|meat)\b"
        r"|\b(?:eat|eats|eating|ate|eaten)\b(?! (?:out|in|at|with|together|lunch|dinner|breakfast|early|late)\b)",
        re.IGNORECASE)),
    # a name given: "my name is ...", "call me ...", "I go by ...", or "I'm" before a
    # capitalised word that ends the clause or is followed by another ("I'm Samuel Ortiz.")
    (NAME, lazy_compile(
        r"\b(?i:my (?:first |last |full |nick)?name(?: is|'s)|call me|i go by|(?:i'm|i am) called)\s+\w"
        r"|\b(?i:i'm|i am) [A-Z][a-z'-]+(?= [A-Z]|\s*[,.!;:)]|\s*$)")),
)


# the user's own name, whatever opens the clause ("By the way, call me Sam")
_OWN_NAME = lazy_compile(r"\b(?i:call me|my (?:first |last |full |nick)?name(?: is|'s))\b")


def fact_kinds(text: str) -> frozenset[str]:
    """The kinds of a person's fact `text` (as written, capitals kept) tells (`_KIND_PATTERNS`)."""
    return frozenset(kind for kind, pat in _KIND_PATTERNS if pat.search(text))


def _held_kinds(text: str) -> frozenset[tuple[str, str]]:
    """(kind, holder) of each clause of `text` that tells a kind of a person's fact and
    names whose it is (`_holder`): "I eat fish" is the user's diet, "my sister eats
    fish" nobody's the rules can tell, so no diet of the user's."""
    out: set[tuple[str, str]] = set()
    for a, e in statement_spans(text):
        for clause in _CLAUSE_CUT.split(text[a:e]):
            kinds = fact_kinds(clause)
            holder = _holder(clause) if kinds else None
            if holder is None and NAME in kinds and _OWN_NAME.search(clause):
                holder = SELF_HOLDER  # "By the way, call me Sam": an order, of the user's own name
            if holder is not None:
                out.update((k, holder) for k in kinds)
    return frozenset(out)


def _kinds_fit(new: AbstractSet[str], old: AbstractSet[str]) -> bool:
    """Whether a statement of kinds `new` may revise one of kinds `old`: the same kind, or
    either tells none."""
    return not new or not old or bool(new & old)


# A change of mind ("I changed my mind about the trip to Porto, let's skip it.", "I changed
# my mind, I want a window seat."): a choice revised, no change of the speaker's state, so
# not a `_STATE_CHANGE` ("I changed jobs" is one). Where it says what it is about (`obj`:
# "about the trip", "about the refund"), it revises a request, the choice itself, or a turn
# that mentions that thing (`_choice_fits`): "I live in Porto" is no trip.
_CHANGED_MIND = lazy_compile(r"\b(?:i|we)(?:'ve| have)?(?: just)? changed (?:my|our) minds?\b"
                           r"(?: about (?:the |my |our |that |this )?(?P<obj>[a-z][\w'-]*(?: [a-z][\w'-]*)?))?")
# A value given for "it" or "that", nothing named: the thing the user just spoke of ("Sorry,
# it's the 14th." after "My flight is on the 12th.", "Oops, that's 4 nights.")
_IT_VALUE = lazy_compile(r"^(?:(?:sorry|oops|whoops|no|wait|actually|my (?:mistake|bad))[,.!:]?\s+)*"
                       r"(?:it's|it is|that's|that is|it should be|that should be) (?!not\b)")
# A correction that says only the value it replaces ("Instead of Lisbon", the part of "Instead
# of Lisbon, can you find flights from Porto?" before its request, `assertive_text`):
# what replaces it is asked for, so it revises a request, never a fact ("I moved to Lisbon").
_ONLY_OLD_VALUE = lazy_compile(r"^(?:(?:oh|ok(?:ay)?|so|and|but|actually|hmm+|um+|wait)[,.!]?\s+)*"
                             r"(?:instead of|rather than|in place of) [^,;:.!?]+[,;:.!?]*")
_BARE_RETRACTION = lazy_compile(
    r"^(?:(?:hmm+|oh|ok(?:ay)?|wait|no|sorry|actually|um+)[,.!]?\s+)*"
    r"(?:scratch that|never ?mind|nvm|forget (?:it|that|what i (?:just )?said)|ignore (?:that|"
    r"my last (?:message|request))|"
    r"disregard (?:that|my last (?:message|request))|undo (?:that|it|the last (?:change|one)))"
    r"(?:[,.!]?\s*(?:please|sorry|thanks))?[,.!]*"
)
# A worry waved off ("Forget about it, it's fine.", "Don't worry about it, no problem."):
# "it" is what the other party is sorry for, no plan of the user's; the turn takes nothing
# back, nor is searched by meaning for something to take back.
_DISMISSAL = lazy_compile(
    r"^(?:(?:oh|ah|hey|no|ok(?:ay)?)[,.!]?\s+)*(?:forget (?:about )?it|don't worry(?: about it)?)[,.!]?\s+"
    r"(?:(?:it's|it is|that's|that is|all) (?:fine|ok(?:ay)?|alright|all right|good|no (?:problem|big deal|worries))"
    r"|no (?:problem|worries|harm done|big deal))\b[^,;:?]*[.!]*$"
)
_RETRACTION_OPENER = lazy_compile(r"^(?:\w+[,.!]?\s+)?(?:scratch that|never ?mind)\b")
# An order that calls off a plan by its name, opening the turn ("Cancel the haircut.",
# "Call off the concert on Friday.", "Scratch the landlord call, something came up."): its
# object is a noun phrase of up to PLAN_OBJECT_WORDS words, then a mark, the end, or a time
# or place after "for", "on", "at" ("drop the kids at school" and "drop the plants off"
# are errands: "drop" is no call-off here). It retracts an earlier request that names the
# same thing (`_called_off`), never a fact: "cancel my subscription" after "my Netflix
# subscription is $15 a month" orders a cancellation, it corrects nothing said.
PLAN_OBJECT_WORDS = 3
# the words that call a plan off before its object: "cancel", "delete that reminder",
# "remove the alarm", "don't bother with the flowers", "no need for the taxi"
_CALL_OFF_VERBS = r"cancel|call off|scratch|delete|remove|don't bother with|no need for"
# what "cancel" may be followed by that names no plan of its own, where the object comes
# without "the" ("Cancel breakfast.", "Call off lunch on Friday." name a meal): a pronoun,
# a quantifier, a determiner of another's thing
_NO_PLAN_WORDS = r"it|this|that|them|everything|anything|all|any|some|a|an|his|her|their|your"
# the words that open a time after a thing called off ("the movie tonight", "the table on
# Friday", "the dentist at 10am", "the laundry for now"): the thing's phrase ends there
_WHEN_WORDS = "tonight|today|tomorrow|this|next|on|for|at|by|in"
# the slots (`detect_slots`) of a time: a day, a date, an hour
_WHEN_SLOTS = frozenset(("weekday", "date", "time"))
_PLAN_RETRACTION = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|hmm+|so|actually|sorry|wait|no|and)[,.!]?\s+)*(?:please |just )?"
    rf"(?:(?:{_CALL_OFF_VERBS}) (?:the|my|our|that)|(?:cancel|call off)(?= (?!(?:{_NO_PLAN_WORDS})\b)))"
    rf" (?P<obj>[a-z][\w'-]*(?: (?!(?:{_WHEN_WORDS}|is|are|was|were)\b)[a-z][\w'-]*){{0,{PLAN_OBJECT_WORDS - 1}}})"
    rf"(?: (?:{_WHEN_WORDS})\b[^,.;:!?]*)?(?:\s*[,.;:!]|$)"
)
# A plan told to be off, its thing the subject ("The movie tonight is off.", "The picnic's
# cancelled.", "Dinner on Friday is off, I'm ill."): a call-off as "Cancel the movie." is,
# its object the subject's noun phrase (no pronoun: "It's off." names nothing, and "I'm off
# work" no plan), then a time, then "off" or "cancelled" ending the clause. A place or
# thing after "off" is a state of something else ("The lights are off in the kitchen."),
# and a past told with more after it a story ("The show was cancelled after two seasons.").
_OFF_STATE = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|hmm+|so|sorry|well|bad news|unfortunately|and)[,.!:]?\s+)*(?:(?:the|my|our|that|this) )?"
    rf"(?!(?:it|this|that|everything|all|i|we|you|he|she|they)\b)"
    rf"(?P<obj>[a-z][\w-]*(?: (?!(?:{_WHEN_WORDS}|is|are|was|were|has|have|got)\b)[a-z][\w-]*){{0,{PLAN_OBJECT_WORDS - 1}}}?)"
    rf"(?: (?:{_WHEN_WORDS})\b[^,.;:!?]*?)?"
    r"(?:'s|'re| is| are| was| were| has been| have been| got| just got)(?: now| just| all)?"
    r" (?P<how>off|cancell?ed|called off)"
    r"(?: now| then| after all| for now)?(?:\s*[,.;:!]|$)"
)
# an earlier turn a plan's call-off may retract: a request (the labels of classify.py)
_PLAN_INTENTS = frozenset(("instruction", "correction"))
# A call-off of a thing named by its kind alone, the whole turn ("Cancel the dinner.",
# "Call off that reservation, please."): "the" or "that" points at a thing already spoken
# of, so where no turn holds a word of it, it may be a place a recent request named by its
# name alone (`_named_venue`: "Get me a table for four at Chez Marie", which the dinner
# is). "my" names a thing of the user's own, which a new request may end ("Cancel my gym
# membership."), and a clause after the object tells of something else ("Cancel the gym
# membership, I'm moving."): neither takes back a booking it shares no word with. Only a
# kind the booking is, by meaning (`KindCheck`, as for `_OBJECT_RETRACTION`): "Cancel the
# flight." or "Cancel the subscription." after "Book a table at Nong's" takes nothing.
_KIND_CALL_OFF = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|hmm+|so|actually|sorry|wait|no|and)[,.!]?\s+)*(?:please |just )?"
    rf"(?:{_CALL_OFF_VERBS}) (?P<det>the|that|my|our) (?P<obj>[a-z][\w'-]*(?: [a-z][\w'-]*)?)"
    r"(?:,? (?:please|thanks))?[\s.!]*$"
)
# Nouns that name a thing arranged by the act that arranged it, not by what it is ("Cancel
# the reservation.", "Never mind the appointment.", "Cancel my order."): a closed class,
# as the words for the act are (book / reserve / schedule, order / buy), so no meaning
# check is needed or possible (a kind of business is near none of them). Each names the
# latest recent request of its act, whatever was booked or ordered (`_arrangement`):
# the booking, the reservation and the appointment a booking ("Book me a flight to
# Lisbon", "Get me a table for four at Chez Marie on Saturday"), the order an order
# ("Order a pizza from Luigi's"). A pizza ordered is no reservation, a table booked no
# order: each takes nothing of the other act. "my" is the user's own booking here
# ("Cancel my order."), as it is not for a thing of any kind ("Cancel my gym membership.").
ARRANGEMENT_NOUNS: dict[str, str] = {"booking": "booking", "reservation": "booking", "appointment": "booking",
                                     "order": "order", "reminder": "reminder", "alarm": "alarm"}
_ARRANGING_VERBS: dict[str, str] = {"book": "booking", "reserve": "booking", "schedule": "booking",
                                    "order": "order", "buy": "order", "remind": "reminder"}
# verbs that arrange a thing the noun after them names by its act ("Set a reminder to water
# the plants", "Create an alarm for 7am", "Make a reservation at Nong's"): that act
_SETTING_VERBS = frozenset(("set", "create", "add", "make", "schedule"))
# verbs that book only what they name at a place and a time ("Get me a table for four at
# Chez Marie on Saturday", "Make a reservation at Nong's for Friday"), never alone ("Get me
# a coffee", "Make a list")
_GETTING_VERBS = frozenset(("get", "make", "arrange"))
# A statement of the user's own arrangement that stands ("I have a dentist appointment on
# Friday.", "We've got a reservation at Nong's.", "My dentist appointment is on Friday at
# 3pm."), a sentence of its own: the thing the user holds now, which "Cancel the
# appointment." calls off as it would a booking asked for ("Book me a haircut"); in a
# personal assistant the user's word ends it. Never one held no more or not yet ("I had
# an appointment yesterday.", "My appointment was on Monday.", "I have to make an
# appointment.", "I have no bookings"), nor another person's ("My wife has a dentist
# appointment."), nor a noun naming another thing ("a booking question"): such a turn
# names the noun and so takes nothing back (a miss rather than a wrong retraction). One
# pattern per act, its nouns singular or plural.
#
# What may follow the noun of a stated arrangement: the clause's end, its place, its time
# or a clause of its own; never another noun it names ("a booking question", "a
# reservation number")
_ARRANGEMENT_TAIL = "on|at|for|with|in|this|next|today|tonight|tomorrow|and|but|so|that|which"
_STATED_ARRANGEMENT: dict[str, LazyPattern] = {
    act: lazy_compile(
        r"(?:^|[.!?]\s+)(?:(?:so|and|also|oh|btw|fyi),?\s+)*(?:"
        rf"(?:i|we)(?: have|'ve got| have got)(?! to\b| no\b| not\b| never\b)\b[^,.;:!?]*?\b(?:{forms})"
        rf"(?=$|[,.;:!?]| (?:{_ARRANGEMENT_TAIL})\b)"
        rf"|(?:my|our)(?: [\w'-]+){{0,2}} (?:{forms})(?: is|'s| are)\b(?! over\b| done\b| off\b| cancel))")
    for act, forms in (
        (act, "|".join(f"{n}s?" for n, its in ARRANGEMENT_NOUNS.items() if its == act))
        for act in sorted(set(ARRANGEMENT_NOUNS.values())))
}


def _arranged_act(obj: str) -> tuple[str, bool] | None:
    """The act a noun names a thing by (`ARRANGEMENT_NOUNS`: "reservation" -> "booking")
    and whether it names them all (the plural: "Cancel the reservations."), or None."""
    if obj in ARRANGEMENT_NOUNS:
        return ARRANGEMENT_NOUNS[obj], False
    if obj.endswith("s") and obj[:-1] in ARRANGEMENT_NOUNS:
        return ARRANGEMENT_NOUNS[obj[:-1]], True
    return None


def _states_arrangement(text: str, act: str) -> bool:
    """Whether `text` states an arrangement of the user's own of `act` that stands
    (`_STATED_ARRANGEMENT`: "I have a dentist appointment on Friday." for "booking")."""
    return _STATED_ARRANGEMENT[act].search(normalize(text)) is not None


# a request's verb: its first word after a politeness or a "can you" ("Could you book ...")
_REQUEST_VERB = lazy_compile(
    r"^(?:(?:ok(?:ay)?|so|also|and|then|hi|hey)[,!]?\s+)*"
    r"(?:(?:please|can you|could you|would you|will you|(?:i'd like|i need|i want)(?: you)? to|go ahead and)\s+)*"
    r"(?P<verb>[a-z]+)\b"
)
# A retraction that opens the turn and names what it drops by a noun phrase ("Forget the
# restaurant.", "Never mind the restaurant.", "Ignore my dentist thing.") and ends the turn:
# where that phrase shares no word with any turn, it may name the kind of a place a
# request named by its name alone (`_named_venue`: "Book a table at Nong's", which the
# restaurant is), where the phrase names that request's kind by meaning (`KindCheck`:
# never "the hotel", "the flight", "the password" or "the weather" for the table). A clause after it tells what the phrase was ("Forget the weather, we'll
# go anyway.": a worry, no plan); "Forget it, ..." names nothing ("it"), and "I forgot
# the restaurant's name" opens with no retraction.
_OBJECT_RETRACTION = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|hmm+|so|actually|sorry|wait|no|and)[,.!]?\s+)*(?:please |just )?"
    r"(?:forget|ignore|disregard|never ?mind) (?:about )?(?:the|my|our|that) "
    rf"(?P<obj>[a-z][\w'-]*(?: (?!(?:{_WHEN_WORDS})\b)[a-z][\w'-]*){{0,2}})"
    rf"(?P<when>(?: (?:{_WHEN_WORDS})\b[\w: ]*?)?)(?:,? (?:please|thanks))?[\s.!]*$"
)
# The same retraction's noun phrase wherever the turn goes on after it ("Never mind the
# movie tonight.", "Forget the pharmacy, I'll go tomorrow."): what it takes back is the
# thing that phrase names, never a turn that only shares a day, an hour or a word with
# what follows. The time or clause after it is the user's own plan or reason; at most it
# narrows among bookings of the kind the noun names (`_named_venue`). Not "forget that":
# "forget that I said Tuesday" names no thing.
_RETRACTED_OBJECT = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|hmm+|so|actually|sorry|wait|no|and)[,.!]?\s+)*(?:please |just )?"
    r"(?:forget|ignore|disregard|never ?mind) (?:about )?(?:the|my|our) "
    rf"(?P<obj>[a-z][\w'-]*(?: (?!(?:{_WHEN_WORDS})\b)[a-z][\w'-]*){{0,2}})(?![\w'-])"
)
# A place a request names by its name alone, after "at" or "from" ("a table at Nong's for
# Friday", "a pizza from Luigi's", "at the Ritz"): its kind is not said, so a retraction's
# noun ("the restaurant") may name it. "the Altis hotel" names its kind ("hotel"), "a
# flight to Lisbon" a thing of its own: no retraction of another kind takes them.
_NAMED_VENUE = lazy_compile(r"\b(?:at|from) (?:the )?(?P<name>[A-Z][\w'&-]*(?: [A-Z][\w'&-]*)*)(?P<after> [A-Za-z][\w'-]*)?")
# The kinds of business a name alone may stand for ("at Nong's", "from Luigi's", "at
# Serenity"): the yardstick `KindCheck` measures a retraction's noun with, never a list of
# the nouns a retraction may say ("the dinner", "the pizza", "the massage" are in none).
# Why a closed class is needed: this embedder's cosine between a short noun phrase and a
# request has no scale of its own. Measured (all-MiniLM-L6-v2, "the X" against the
# request): "the restaurant" is 0.26 from "Book a table at Nong's for Friday." and 0.41
# from "Order a pizza from Luigi's for tonight.", while "the meeting" is 0.28 and "the
# hotel" 0.22 from the table booking, so no floor separates a kind from another thing.
# Against the kinds of business it does: the kind nearest the booked thing (`KindCheck`,
# `KIND_LEAD_COSINE`) and the kind nearest the noun agree for the request's own kinds ("the
# dinner" and "the meal" the restaurant's, as "the table" is). A class of businesses is
# closed the way a part of speech is: a new kind of place is rare. A kind missing here is not harmless, though:
# a noun whose own business is missing lands on the nearest one present, which may be
# the request's. So "the groceries" (nearest "the restaurant" 0.55 while the class lacked
# the grocer's) took back a table at Nong's; with "the supermarket" it is the grocer's
# (0.75) and no table's. Of 73 everyday nouns against 12 such requests one wrong noun
# passes: "the lunch" for sushi ordered "for 8pm" (a meal of another hour, no other
# kind); the theatre for a table at 7pm, the gym for a table at The Ivy and the pharmacy
# for a session at FitZone passed while the whole request decided the kind.
VENUE_KINDS = ("restaurant", "cafe", "bar", "hotel", "spa", "salon", "theatre", "cinema", "gym", "clinic",
               "pharmacy", "store", "supermarket")
# How near (cosine) "the <word>" must be to "the <noun>" for the word to be another name
# of the thing a retraction's noun names (`KindCheck.synonym_in`). Measured: other names
# 0.87-0.95 ("movie" / "film" 0.931, "sofa" / "couch" 0.893, "mum" / "mother" 0.870, "kids"
# / "children" 0.951); other things of one kind under it ("hotel" / "motel" 0.823,
# "football" / "soccer" 0.829, "film" / "cinema" 0.786, "lunch" / "meal" 0.789, "cab" /
# "taxi" 0.768, a miss, "dinner" / "lunch" 0.685).
SYNONYM_MIN_COSINE = 0.85
# The meals, a closed class as the parts of the day are, each with the hours (24h clock,
# inclusive) a booking for it is made for: "the lunch" names no sushi ordered for 8pm, "the
# dinner" no table booked for 1pm, and neither a booking that names the other meal itself
# ("a table for lunch"). A booking with no hour or meal of its own may be either.
MEAL_HOURS: dict[str, tuple[int, int]] = {"breakfast": (6, 11), "brunch": (9, 14), "lunch": (11, 15),
                                          "dinner": (17, 23), "supper": (18, 23)}
# the hour "tonight" stands for, against the meals' hours (an evening's)
TONIGHT_HOUR = 20
# The nouns of events and plans, a closed class as the meals are (`MEAL_HOURS`, one of
# them): what a bare "off" calls off as its subject ("Dinner on Saturday is off.", "The
# movie tonight is off.", "The trip to Leeds is off."). Of anything else "off" tells a
# state: a device or a thing switched off ("The heating is off now, it's warm enough.",
# "The lights are off.", "The oven is off."), which a reminder or an order that merely
# mentions it ("Remind me to turn off the heating at 10pm.", "Order a new printer") is no
# plan of. Such a noun is an event only where an earlier booking arranged it as one, the
# thing it booked ("Book a massage at the spa ..." / "The massage is off.": `_off_fits`;
# "Book a car service ..." is a service, so "The car is off." names none). "Cancelled" and
# "called off" tell a call-off of whatever they are said of ("The picnic's cancelled.").
EVENT_NOUNS = frozenset(MEAL_HOURS) | frozenset((
    "trip", "holiday", "vacation", "getaway", "journey", "flight", "cruise", "picnic", "barbecue", "bbq", "party",
    "meeting", "appointment", "booking", "reservation", "movie", "film", "show", "concert", "gig", "play", "match",
    "game", "wedding", "visit", "tour", "outing", "plan", "event", "class", "lesson", "session", "interview",
    "call", "drink", "celebration", "reunion", "ceremony", "festival", "hike", "walk", "run", "ride", "playdate",
    "sleepover", "lecture", "workshop", "conference", "course", "practice", "rehearsal", "training", "checkup",
    "check-up", "massage", "haircut", "meetup", "get-together"))
# The events one watches (a closed class within EVENT_NOUNS) and the nouns of what admits
# to one: tickets or a pass at a place named by its name alone ("Get two tickets at the
# Odeon for tonight.") are for a show there, so "Never mind the movie tonight." or "The
# concert is off." names them, though the embedder knows neither the name nor a kind for
# tickets ("the tickets" lead the theatre by 0.04, the cinema trails the bar; joining the
# cinema and the theatre into one kind made 8 wrong retractions of 73 nouns). Seats are
# no admission: a restaurant has them too.
SHOW_NOUNS = frozenset(("movie", "film", "show", "concert", "gig", "play", "match", "game", "musical", "opera",
                        "ballet", "performance", "screening", "premiere", "recital", "comedy"))
ADMISSION_NOUNS = frozenset(("ticket", "tickets", "pass", "passes"))
# the words that end an event noun's phrase before what it is of or with ("the trip to
# Leeds", "dinner with Jo", "the lunch at Pret"): the head noun is the word before them
_HEAD_END = frozenset(("to", "with", "at", "from", "of", "for", "in", "on", "by", "near", "about", "and"))
# how far (cosine) a retraction's noun may trail the request's nearest kind of business
# and still name it, and the booked thing's kind the noun's nearest: "the meal" is level
# with the restaurant for the table at Nong's, while the nearest wrong kind measured
# trails by 0.02 ("the hotel" for a table for four at Chez Marie)
KIND_MARGIN_COSINE = 0.01
# How far (cosine) the booked thing's nearest kind of business must lead its second for
# the thing to be of that kind at all. The request's own noun for what it books decides
# its kind, never the whole request: the request's cosine to the kinds is swayed by its
# hour and its name, which this embedder reads as nothing ("Book a table at Nong's for
# Friday at 7pm." is 0.255 from the restaurant and 0.250 from the theatre, for the
# evening; "Reserve a table at The Ivy for tomorrow." nearest the gym, 0.23, for the
# ivy; "Book me a session at FitZone on Monday." nearest the pharmacy), while the thing
# alone leads clearly: "the table" the restaurant by 0.086, "the seats" the theatre by
# 0.041, "the sushi" the restaurant by 0.048, "the massage" the spa by 0.057, "the room"
# the hotel by 0.095. A thing of many kinds leads by nothing ("the session": the bar
# 0.454, the clinic 0.452, a gym's, a spa's or a therapist's alike): it has no kind, and
# no noun of a kind takes it back (a miss rather than a wrong retraction).
KIND_LEAD_COSINE = 0.02
# the words that end a request's phrase for what it books: a place, a time, a party
# ("a table for four at Chez Marie", "two seats at the Globe", "sushi from Sakura")
_BOOKED_THING_END = lazy_compile(r"\b(?:at|from|for|on|in|to|with|by|this|next|tonight|tomorrow|today)\b")


def _booked_thing(request: str) -> str | None:
    """The request's own noun for what it books or orders, lower case: the last lower-case
    word after its verb and before a place, a time or a party ("Book a table at Nong's for
    Friday." -> "table", "Get two seats at the Globe" -> "seats", "Pick up my prescription
    from Boots." -> "prescription", "Book me a 60-minute massage ..." -> "massage"). None
    where it names none: the place alone ("Book Nong's for Friday": a name, capitalised,
    is no noun of its kind) or the act ("Make a reservation at Nong's":
    `ARRANGEMENT_NOUNS`)."""
    _verb, rest = _request_verb(request)
    phrase = _BOOKED_THING_END.split(rest, maxsplit=1)[0]
    words = re.findall(r"(?<![\w'-])[a-z][\w'-]*", phrase)
    if not words or words[-1] in _STOP or words[-1] in ARRANGEMENT_NOUNS:
        return None
    return words[-1]


class KindCheck:
    """Whether a retraction's noun phrase ("restaurant", "dinner") may name what a request
    naming a place by its name alone was for ("Book a table at Nong's for Friday."), by
    meaning, against the kinds of business ``VENUE_KINDS`` (the reasons there). The
    request's own noun for what it booked decides its kind (`_booked_thing`: "the table"
    the restaurant's), where that kind leads the thing's second by ``KIND_LEAD_COSINE``;
    then the kind nearest "the <noun>" must be it, and "the <noun>" as near the request as
    the request's nearest kind is, each within ``KIND_MARGIN_COSINE``. The booked thing's
    own word names it ("the table"). A request naming no thing, or one of no clear kind
    ("a session"), is of no kind: no noun takes it. ``embedder`` needs only ``embed``; the
    kinds are embedded once. An embedder that fails answers no (a miss rather than a wrong
    retraction)."""

    def __init__(self, embedder: _Embeds) -> None:
        self.embedder = embedder
        self._kinds: np.ndarray | None = None

    def __call__(self, obj: str, request: str) -> bool:
        thing = _booked_thing(request)
        if thing is None:
            return False
        if obj == thing:
            return True
        if not _meal_fits(obj, request):
            return False  # "the lunch" and sushi for 8pm: a meal of another hour
        try:
            if self._kinds is None:
                self._kinds = _unit_rows(self.embedder.embed([f"the {k}" for k in VENUE_KINDS]))
            noun, req, booked = _unit_rows(self.embedder.embed([f"the {obj}", request, f"the {thing}"]))
        except Exception:
            # its length, never the phrase: it is a stored turn's words, and logs hold no content
            log.warning("could not embed a %d-character noun phrase to tell its kind; it takes back no booking",
                        len(obj), exc_info=True)
            return False
        of_thing = np.sort(self._kinds @ booked)
        if float(of_thing[-1] - of_thing[-2]) < KIND_LEAD_COSINE:
            return False  # a thing of many kinds ("a session"): none is its
        kind = int(np.argmax(self._kinds @ booked))
        of_req, of_noun = self._kinds @ req, self._kinds @ noun
        return float(noun @ req) >= float(np.max(of_req)) - KIND_MARGIN_COSINE and \
            float(of_noun[kind]) >= float(np.max(of_noun)) - KIND_MARGIN_COSINE

    def synonym_in(self, obj: str, request: str) -> str | None:
        """A word of `request` past its verb that is another name for the head noun of
        `obj` (`SYNONYM_MIN_COSINE` between "the <noun>" and "the <word>": "the movie" and
        "the film", "the mum" and "the mother"), or None: a thing the request names by
        another word. Never a word of another thing of the same kind ("the lunch" and
        "the dinner" 0.69). An embedder that fails answers None."""
        head = obj.rsplit(None, 1)[-1]
        words = sorted({w for w in _COMMON_WORD_RE.findall(_request_verb(request)[1])
                        if w not in _STOP and w != head and len(w) >= MIN_STEM_CHARS})
        if not words:
            return None
        try:
            vecs = _unit_rows(self.embedder.embed([f"the {head}", *(f"the {w}" for w in words)]))
        except Exception:
            log.warning("could not embed a %d-character noun phrase to find its other names", len(obj),
                        exc_info=True)
            return None
        sims = vecs[1:] @ vecs[0]
        best = int(np.argmax(sims))
        return words[best] if float(sims[best]) >= SYNONYM_MIN_COSINE else None


class _KindAsked(KindCheck):
    """A `KindCheck` without a model for the rules' final decision (`Superseder.record`'s
    `final`): it answers no, and notes that a decision asked it, so that decision waits
    for the model (an answer by meaning may take another turn back, or one the rules'
    other paths pass over)."""

    def __init__(self) -> None:  # no embedder: nothing is embedded
        self.asked = False

    def __call__(self, obj: str, request: str) -> bool:
        self.asked = True
        return False

    def synonym_in(self, obj: str, request: str) -> str | None:
        self.asked = True
        return None


def _hours(text: str) -> set[int]:
    """The hours of the day (0-23) `text` names: its times ("8pm", "7:30pm", "19:00"; "at
    8", with no am or pm, both 8 and 20) and "tonight" (`TONIGHT_HOUR`)."""
    slots = _slots(text)
    hours: set[int] = set()
    for v in slots.get("time", ()):
        if v == "noon":
            hours.add(12)
            continue
        m = re.search(r"(\d{1,2})(?::\d{2})?\s*(am|pm)?", v)
        if m is None:
            continue
        h = int(m.group(1))
        if m.group(2) is None and 1 <= h < 12:
            hours.update((h, h + 12))  # "at 8": the morning's or the evening's, either meal's
            continue
        if m.group(2) == "pm" and h < 12:
            h += 12
        if m.group(2) == "am" and h == 12:
            h = 0
        if 0 <= h < 24:
            hours.add(h)
    if "tonight" in slots.get("weekday", ()):
        hours.add(TONIGHT_HOUR)
    return hours


def _head_noun(obj: str) -> str:
    """The head noun of a retraction's noun phrase, lower case: its last word before what
    it is of or with (`_HEAD_END`: "trip to leeds" -> "trip", "dentist appointment" ->
    "appointment", "lunch with jo" -> "lunch"); "" for none."""
    words = obj.lower().split()
    cut = next((i for i, w in enumerate(words) if w in _HEAD_END), len(words))
    return words[:cut][-1] if words[:cut] else ""


def _retracted_noun(cue_text: str) -> str | None:
    """The noun phrase a retraction or call-off names what it drops by, `cue_text`
    normalised (`_RETRACTED_OBJECT`: "Never mind the lunch.", `_PLAN_RETRACTION`: "Cancel
    the lunch.", `_OFF_STATE`: "Lunch is off."), or None: every path that takes a turn
    back for such a noun checks it may name the turn (`_meal_fits`)."""
    for pattern in (_RETRACTED_OBJECT, _PLAN_RETRACTION, _OFF_STATE):
        m = pattern.match(cue_text)
        if m is not None:
            return m.group("obj")
    return None


def _bare_off(m: re.Match[str]) -> bool:
    """Whether a call-off match is a bare "off" of a plan's subject (`_OFF_STATE`: "The
    heating is off."), which names an event only for an event noun (`_off_fits`)."""
    return m.re is _OFF_STATE.compiled() and m.group("how") == "off"


def _off_fits(obj: str, c: Candidate) -> bool:
    """Whether a bare "off" said of `obj` ("The massage is off.") may call off the earlier
    turn `c`: `obj` is an event noun (`EVENT_NOUNS`), `c` is a booking asked for that
    booked it (`_booked_thing`: "Book a spa day for Sunday."), or `c` is a plan of the
    user's own that goes to it (`_own_plan`: "I'm going to the gym at 6."); never a device or
    thing a reminder or an order merely names ("Remind me to turn off the heating ...")."""
    head = _head_noun(obj)
    if head in EVENT_NOUNS or (head.endswith("s") and head[:-1] in EVENT_NOUNS):
        return True
    if c.intent not in NOT_SUPERSEDABLE and _own_plan(c.text) and \
            re.search(rf"\b(?:to|at) the {re.escape(head)}\b", c.text.lower()) is not None:
        return True  # "I'm going to the gym at 6 tomorrow." / "The gym is off.": where the plan goes
    if c.intent not in _PLAN_INTENTS or _arrangement(c.text) != "booking":
        return False
    # the thing it booked ("Book a spa day ..." / "The spa day is off."), or a kind of
    # business, no device ("The restaurant is off." after "Book a table at Nong's": where
    # the booking named its place by name alone, the kind check decides, `_named_venue`)
    return _booked_thing(c.text) == head or head in VENUE_KINDS or (head.endswith("s") and head[:-1] in VENUE_KINDS)


# An outing told by "go" and its -ing form ("We're going hiking on Saturday.", "Let's go
# skiing on Sunday.", "I'm going camping this weekend."): the -ing form names the outing
# as its noun does ("The hike is off.", "The camping trip is cancelled."), where a word
# shared only as an -ing form is otherwise half a word (INFLECTION_CROSS_SHARE: "I watched
# a documentary" is no "watch").
_GO_OUTING = lazy_compile(r"\b(?:go|goes|going|went|gone)\s+([a-z]{2,})ing\b")


def _go_outings(text: str) -> frozenset[str]:
    """The stems of the outings `text` tells by "go" and an -ing form, each bare form the
    -ing form may have ("going hiking" -> "hik", "hike"; "shopping" -> "shop"; "skiing"
    -> "ski"): a call-off's noun names the outing where its stem is one of them."""
    out: set[str] = set()
    for m in _GO_OUTING.finditer(text.lower()):
        bare = m.group(1)
        out.update(_stem(f) for f in (bare, bare + "e", bare[:-1] if bare[-1] == bare[-2] else bare))
    return frozenset(out)


def _admits_to(obj: str, request: str) -> bool:
    """Whether the show `obj` names ("movie", "the concert": `SHOW_NOUNS`) may be what
    `request` got tickets for (`ADMISSION_NOUNS`, its own noun for what it books:
    "Get two tickets at the Odeon for tonight."); the caller checks the request names its
    place by its name alone."""
    return _head_noun(obj) in SHOW_NOUNS and _booked_thing(request) in ADMISSION_NOUNS


def _meal_fits(obj: str, request: str) -> bool:
    """Whether a retraction's noun `obj` may name `request` as far as meals go (`MEAL_HOURS`):
    any noun that is no meal (its head noun, `_head_noun`: "the lunch with jo" is lunch); a
    meal the request names itself ("Book dinner at Rosa's for 4pm."); a meal where the
    request names no other meal ("a table for lunch" is no dinner) and no hour outside the
    meal's ("sushi for 8pm" is no lunch)."""
    meal = _head_noun(obj)
    if meal not in MEAL_HOURS:
        return True
    words = set(re.findall(r"[a-z]+", request.lower()))
    if meal in words:
        return True  # the request names the meal itself ("Book dinner at Rosa's for 5pm")
    if any(other in words for other in MEAL_HOURS if other != meal):
        return False
    first, last = MEAL_HOURS[meal]
    hours = _hours(request)
    return not hours or any(first <= h <= last for h in hours)


class _Embeds(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


def _unit_rows(vecs: np.ndarray) -> np.ndarray:
    """`vecs` (one row each) scaled to length 1: cosines as dot products."""
    v = np.asarray(vecs, dtype=np.float32)
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return np.asarray(v / np.where(n == 0.0, 1.0, n), dtype=np.float32)
# A correction announced by its opener, then said whole ("Sorry, the store opens at 10am.",
# "Correction: my kids leave at 8:00.", "Update: my parents arrive on Saturday."): the
# opener set off by a mark, an apology's own words ("sorry to hear", "sorry I didn't")
# being none
_CORRECTION_FRAME = lazy_compile(r"^(?:(?:oh|ah|um+|hmm+|ok(?:ay)?)[,.!]?\s+)?"
                               r"(?:sorry|oops|whoops|my (?:mistake|bad)|correction|update|quick update)[,:;.!-]+\s*")


# What the speaker was doing or did, told after an apology: its reason ("Sorry, I was
# waiting 20 minutes for a bus.", "Sorry, we've been trying for an hour.", "Sorry, I missed
# it by 5 minutes."): the past or the progressive of I/we tells an event of the speaker, no
# value of a fact, whatever value it holds. A correction restates a thing's value ("Sorry,
# the store opens at 10am.") or the speaker's present state ("Sorry, I have 3 kids."). The
# clause runs to the next mark; what follows it may still correct ("Sorry, I was wrong,
# it's 10am.").
_SPEAKER_EVENT = lazy_compile(
    r"(?:i|we)(?:'m|'re| am| are| was| were|'ve been| have been|'d been| had been)(?: \w+ly| just| still)? \w+ing\b"
    r"|(?:i|we)(?: just| only| really| still| also)? (?:was|were|had|got|\w{2,}ed)\b"
)
_APOLOGY_REASON = lazy_compile(rf"(?:{_SPEAKER_EVENT.pattern})[^,;:.!?]*")


def _framed_correction(norm: str) -> str | None:
    """The opener of a correction announced by it (`_CORRECTION_FRAME`), when what follows
    asserts a typed value ("10am", "44821", "saturday"): an apology states none ("Sorry,
    I was busy."), nor a question ("Sorry, what time is it?"), nor the apology's reason,
    what the speaker was doing (`_APOLOGY_REASON`: "Sorry, I was waiting 20 minutes")."""
    m = _CORRECTION_FRAME.match(norm)
    if m is None or norm.rstrip(" \"')").endswith("?"):
        return None
    said = norm[m.end():]
    reason = _APOLOGY_REASON.match(said)
    if not _slots(said[reason.end():] if reason else said):
        return None
    return m.group(0).strip(" ,:;.!-")
# The value being replaced, when the correction names it: "not Lisbon", "instead of Postgres",
# "forget about the hotel", "I don't work at Acme anymore".
# (Case-insensitive cue words, but the optional second word of the value must be capitalised:
# "Fly.io", "Harcourt Road", not "Acme anymore".)
_OLD_VALUE = lazy_compile(
    r"\b(?i:not|instead of|rather than|no longer|anymore at|about|forget(?: about)?(?: the)?|"
    r"(?:don't|do not|doesn't|does not|no longer) \w+ (?:at|for|in|with|on))"
    r"\s+(?i:the |a |an |my )?([\w:$.@'-]+(?: [A-Z][\w'-]+)?)"
)

# --------------------------------------------------------------------------------------------------
# Slot detectors
# --------------------------------------------------------------------------------------------------

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
# a capitalised day or month is a time, no place's name ("from Friday to Monday")
_TIME_NAME = lazy_compile(rf"(?:{DAY_NAMES}|{_MONTHS})s?\b", re.IGNORECASE)
# number words a slot value may hold, with their digits: an echo in words is the same
# value as in digits ("Four nights." for "4 nights")
_NUMBER_VALUES = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
                  "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15",
                  "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100"}
_NUMBER_WORDS = "|".join(_NUMBER_VALUES)
_LANGUAGES = (
    "english|french|spanish|german|italian|portuguese|dutch|russian|chinese|mandarin|cantonese|japanese|korean|"
    "arabic|hindi|turkish|polish|swedish|norwegian|danish|finnish|greek|hebrew|vietnamese|thai|indonesian"
)
_SLOT_PATTERNS: dict[str, LazyPattern] = {
    "email": lazy_compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),  # "a@b.com." closing a sentence is "a@b.com"
    "phone": lazy_compile(r"\b(?:\+?\d{1,3}[ -])?(?:\(?\d{3}\)?[ -])?\d{3}-\d{4}\b"),
    # the value ends at a digit: "$500." closing a sentence is "$500", as in "$500 a month"
    "money": lazy_compile(r"[$€£]\s?\d+(?:[,.]\d+)*|\b\d+(?:[,.]\d+)*\s?(?:dollars|euros|pounds|usd|eur|gbp|bucks)\b"),
    "time": lazy_compile(
        r"\b\d{1,2}(?::\d\d)?\s?(?:am|pm)\b|\b\d{1,2}:\d\d\b|\bnoon\b|\bmidnight\b"
        # "at 6", "by 10": a bare hour after a time preposition, unless a unit follows ("to 6 people")
        r"|\b(?:at|by|until) (?:[1-9]|1[0-2])\b(?![-/.:]\d|\s?(?:am|pm))"
        r"(?! (?:people|nights|days|km|miles|degrees|kids|guests|percent|%))"
    ),
    "date": lazy_compile(
        rf"\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)\b"
        r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
    ),
    "weekday": lazy_compile(
        rf"\b(?:{DAY_NAMES}|weekday|weekend|tomorrow|tonight)s?\b"
    ),
    # a part of the day as a routine's time ("on Tuesday evenings", "every morning", "early
    # in the morning", "at night"), not one day's ("this morning", "last night"); "nights"
    # alone counts stays ("4 nights")
    "daypart": lazy_compile(
        r"\b(?:mornings|afternoons|evenings)\b|\b(?:every|each) (?:morning|afternoon|evening|night)\b"
        r"|\b(?:(?:early|late) )?in the (?:morning|afternoon|evening)\b|\bat night\b"
    ),
    "size": lazy_compile(
        r"\b(?:size (?:xs|s|m|l|xl|xxl|\d+)|extra[- ]small|extra[- ]large|small|medium|large|xs|xl|xxl)\b"
    ),
    "language": lazy_compile(rf"\b(?:{_LANGUAGES})\b"),
    # a code of digits and letters ("room 4b", "gate b12", "seat 14c"), not an ordinal or a unit
    "code": lazy_compile(r"\b(?=[a-z]*\d)(?=\d*[a-z])(?!\d+(?:st|nd|rd|th|am|pm|s|k|m|km|kg|g|h|x)\b)[a-z0-9]{2,8}\b"),
    "number": lazy_compile(rf"\b(?:\d+(?:\.\d+)?|{_NUMBER_WORDS})\b"),
}
# Place: a capitalised name after a locative preposition, or a street address.
# ("work at Acme" names an employer, not a place.)
_PLACE = lazy_compile(
    r"(?<!work )(?<!working )(?<!study )"
    r"\b(?:in|to|at|from|near|into|visit(?:ing)?|around)\s+((?:[A-Z][\w'-]+)(?:[ ,]+[A-Z][\w'-]+)*)"
    r"|\b\d+\s+[A-Z][\w'-]+\s+(?:Road|Rd|Street|St|Avenue|Ave|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Place|Pl)\b"
)
_EMAIL_RUN_START = lazy_compile(r"(?<![\w.+-])" + _SLOT_PATTERNS["email"].pattern)  # see _emails
# Where a money value can start (see _money): a currency sign, or the whole of a chain of digit
# runs joined by single commas or dots ("1,000.50"), read from its first digit
_MONEY_START = lazy_compile(r"[$€£]|(?<!\d)(?<!\d[,.])\d++(?:[,.]\d++)*+")
_CHAIN_SECOND = lazy_compile(r"\d++[,.](?=\d)")  # a chain's first digit run and its mark: where its second run starts
_UNIT = lazy_compile(r"\s*+([a-z]{2,})")  # the word after a number, its unit ("4 people")
_NOT_PLACE = lazy_compile(
    rf"^(?:the|a|an|my|our|i|it|{DAY_NAMES}|"
    rf"{_MONTHS}|{_LANGUAGES})$",
    re.I,
)


def detect_slots(text: str) -> dict[str, set[str]]:
    """Typed values in ``text``: {"weekday": {"tuesday"}, "time": {"9am"}, "number": {"4 people"}, ...}.

    Numbers carry the following word as a unit ("4 people", "68 degrees") so that "make it 6 people"
    matches a party size rather than any number.  Values already claimed by a more specific slot
    (a time, a date, money) are not repeated as plain numbers.  Time linear in the text's
    length: a candidate turn is read whole, with no length cap.
    """
    return {k: set(v) for k, v in _slots(text).items()}


# The parses below are remembered per text, found again only in the memo scope they were
# computed in (tiers.memo: a text another tenant wrote is never answered faster).
TEXT_MEMO_MAX_ENTRIES = 4096


def clear_memo() -> None:
    """Forget what the text-keyed caches below remember (and so the texts), of every
    scope: an erasure leaves no copy of erased text in this process."""
    for cached in (_slots, _content_items, _inflected, _holder, _clauses, _not_first_person):
        cached.cache_clear()


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _slots(text: str) -> dict[str, frozenset[str]]:
    # Cached: the same earlier turns are scanned again for every new correction.
    low = normalize(text)
    found: dict[str, set[str]] = {}
    # claimed[i] is set when position i lies in a value already taken: a match is skipped when
    # its first or its last character does. Checking each match against a list of every value
    # taken so far was n squared ("1 " repeated: 8,000 numbers, 7 s at 16,000 characters).
    claimed = bytearray(len(low))
    for slot, pat in _SLOT_PATTERNS.items():
        for m in _SCANS[slot](low) if slot in _SCANS else pat.finditer(low):
            if claimed[m.start()] or claimed[m.end() - 1]:
                continue
            value = m.group(0).strip()
            if slot == "number":
                # matched in place: a copy of the rest of the text per number was n squared too
                unit = _UNIT.match(low, m.end())
                if unit and unit.group(1) not in _STOP:
                    value = f"{value} {unit.group(1)}"
            found.setdefault(slot, set()).add(value)
            claimed[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    for m in _PLACE.finditer(text):
        name = (m.group(1) or m.group(0)).strip(" ,")
        first = name.split()[0].strip(",")
        if not _NOT_PLACE.match(first):
            found.setdefault("place", set()).add(name.lower())
    return {k: frozenset(v) for k, v in found.items()}


def _emails(low: str) -> Iterator[re.Match[str]]:
    """_SLOT_PATTERNS["email"].finditer(low), in time linear in its length.

    The address's first part runs to the end of its run of [\\w.+-], so it matches from a
    position in a run if and only if from the run's start: searched from each position of a
    long run with no "@" ("a-a-a-..."), it read to the run's end from each, n squared. Past a
    failure only a run's start is tried (_EMAIL_RUN_START); the position right after a match
    is tried as finditer tries it, though it may lie inside a run ("a@b.c+d@e.f").
    """
    pat, pos = _SLOT_PATTERNS["email"], 0
    while pos < len(low):
        m = pat.match(low, pos) or _EMAIL_RUN_START.search(low, pos + 1)
        if m is None:
            return
        yield m
        pos = m.end()


def _money(low: str) -> Iterator[re.Match[str]]:
    """_SLOT_PATTERNS["money"].finditer(low), in time linear in its length.

    A number with a unit word ("1,000 dollars") ends where its chain of digit runs joined by
    a comma or a dot ends, the same end from wherever in the chain it starts, and the unit
    can follow only there: so it matches from one of the chain's runs if and only if from
    the first the pattern may start at (the chain's first digit, or its second run when the
    first digit sits inside a word, "a1,000 dollars"). Searched from each run of a long chain
    with no unit ("1.1.1...."), it read to the chain's end from each, n squared (2 s at 16,000
    characters). Here a chain is tried there and then passed whole; a currency sign is tried
    where it stands.
    """
    pat, pos = _SLOT_PATTERNS["money"], 0
    while (start := _MONEY_START.search(low, pos)) is not None:
        m = pat.match(low, start.start())
        if m is None and (second := _CHAIN_SECOND.match(low, start.start())) is not None:
            m = pat.match(low, second.end())
        if m is None:
            pos = start.end()
            continue
        yield m
        pos = m.end()


_SCANS = {"email": _emails, "money": _money}  # the slots searched in linear time by a scanner of their own


def _unit(value: str) -> str:
    parts = value.split(" ", 1)
    return _stem(parts[1]) if len(parts) == 2 else ""


# --------------------------------------------------------------------------------------------------
# Lexical overlap
# --------------------------------------------------------------------------------------------------

# fmt: off
_STOP = frozenset(
    (
        "a", "an", "the", "and", "or", "but", "so", "if", "then", "than", "that", "this", "these", "those",
        "it", "its", "it's", "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "our",
        "us", "you", "your", "yours", "he", "she", "him", "her", "his", "they", "them", "their", "is", "are",
        "was", "were", "be", "been", "being", "am", "do", "does", "did", "done", "have", "has", "had", "will",
        "would", "shall", "should", "can", "could", "may", "might", "must", "to", "of", "in", "on", "at",
        "for", "from", "by", "with", "without", "about", "into", "onto", "over", "under", "up", "down", "out",
        "off", "as", "just", "also", "too", "very", "really", "please", "thanks", "thank", "ok", "okay",
        "yes", "no", "not", "nope", "yeah", "hmm", "oh", "um", "wait", "sorry", "actually", "instead",
        "rather", "anymore", "longer", "never", "mind", "scratch", "forget", "ignore", "disregard", "undo",
        "meant", "mean", "said", "say", "tell", "told", "make", "made", "change", "changed", "switch",
        "moved", "move", "new", "now", "still", "after", "all", "what", "which", "who", "when", "where",
        "why", "how", "there", "here", "some", "any", "one", "want", "need", "like", "get", "got", "go",
        "going", "take", "put", "keep", "set", "add", "use", "using", "let", "let's", "lets", "don't", "dont",
        "doesn't", "isn't", "aren't", "can't", "won't", "wrong", "mistake", "correction", "back", "again",
        "fine", "better", "sure", "maybe", "only", "know", "think", "guess", "come", "came", "around", "last",
        "next", "week", "month", "year", "today", "tomorrow", "tonight",
    )
)
# fmt: on


# The endings before which a plural takes "-es" (the sibilants: "classes", "boxes",
# "churches"); where a singular ends in one and an "e" ("nurse", "size", "niche"), the
# plural's "-es" and the singular's "e" are dropped alike: "nurses" and "nurse", "sizes"
# and "size" share a stem, as "nursed" and "nursing" do
_SIBILANTS = ("s", "x", "z", "ch", "sh")
MIN_STEM_CHARS = 3  # a stem shorter than this is no stem ("us" of "uses"): the word stays longer


def _stem(word: str) -> str:
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    for suf in ("ing", "ed", "es", "s"):
        if suf == "es" and not w.endswith(tuple(e + "es" for e in _SIBILANTS)):
            continue  # "airlines" -> "airline" like "airline", not "airlin"
        if suf == "s" and w.endswith("ss"):
            break  # "-ss" is no plural's ending: "class" stays "class", as "classes" is
        if w.endswith(suf) and len(w) - len(suf) >= MIN_STEM_CHARS:
            w = w[: -len(suf)]
            if suf in ("ing", "ed") and len(w) >= MIN_STEM_CHARS and w[-1] == w[-2] and not w.endswith("ss"):
                w = w[:-1]  # cancelling -> cancel; but passed -> pass, as "pass" is
            break
    else:
        if w.endswith(tuple(e + "e" for e in _SIBILANTS)) and len(w) - 1 >= MIN_STEM_CHARS:
            w = w[:-1]  # "nurse" -> "nurs", as "nurses" -> "nurs"
    return w


def _content(text: str) -> dict[str, float]:
    """Content-word stems with a weight: capitalised words inside a sentence (entities) count double.

    A sentence's first word is capitalised anyway, so it counts once; a name there still matches at
    full weight when the other side mentions it mid-sentence (the pair takes the larger weight).
    """
    return dict(_content_items(text))


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _content_items(text: str) -> tuple[tuple[str, float], ...]:
    out: dict[str, float] = {}
    for sent in re.split(r"(?<=[.!?])\s+", _untitled(text)):
        for i, m in enumerate(re.finditer(r"[A-Za-z][\w'-]*", sent)):
            tok = m.group(0)
            low = tok.lower()
            if low in _STOP or len(low) < 3:
                continue
            w = 2.0 if tok[0].isupper() and i > 0 else 1.0
            st = _stem(low)
            out[st] = max(out.get(st, 0.0), w)
    return tuple(out.items())


# A word shared only as a verb's -ed/-ing form on one side and its bare form on the other
# ("I watched a documentary" / "get him a Garmin watch") is often two words that share a
# stem, a verb and a noun: it counts this share of a shared word.
INFLECTION_CROSS_SHARE = 0.5


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _inflected(text: str) -> frozenset[str]:
    """Content stems that `text` holds only as -ed/-ing forms ("watched", "booking")."""
    forms: dict[str, bool] = {}
    for m in re.finditer(r"[A-Za-z][\w'-]*", text):
        low = m.group(0).lower()
        if low in _STOP or len(low) < 3:
            continue
        st = _stem(low)
        verbal = st != low.strip("'") and low.endswith(("ed", "ing"))
        forms[st] = forms.get(st, True) and verbal
    return frozenset(st for st, verbal in forms.items() if verbal)


def _shared(text: str, words: Mapping[str, float], other: str, other_words: Mapping[str, float]
            ) -> tuple[list[str], float]:
    """The content stems two texts share, and their weight: the larger side's (entities
    double), INFLECTION_CROSS_SHARE of it where one side has only the verb's -ed/-ing form."""
    shared = sorted(set(words) & set(other_words))
    mine, theirs = _inflected(text), _inflected(other)
    score = sum(max(words[w], other_words[w]) * (INFLECTION_CROSS_SHARE if (w in mine) != (w in theirs) else 1.0)
                for w in shared)
    return shared, score


# A prohibition's verb: "Never book me on red-eye flights.", "Don't call me after 9pm.", "Please
# do not ever email me." (the word after the negation, in the text's own case).
_PROHIBITED_VERB = lazy_compile(r"(?i)\b(?:never|don[\u2019']?t|do not)(?:,?\s+ever,?)?\s+([a-z][\w'-]*)")
# Words of an order that name nothing of its own ("On second thought, call me instead."):
# an order made only of these and the prohibition's own words lifts the rule
_REVERSAL_OPENER_WORDS = frozenset({"second", "thought", "actually", "now", "fine", "okay", "ok"})
# "... instead" in a correction: the order gives another thing in place of one
_INSTEAD_WORD = lazy_compile(r"\binstead\b")


def _without_prohibited_verbs(text: str) -> str:
    """`text` without the verb of any prohibition in it ("Never book me on red-eye flights."
    -> "Never me on red-eye flights."): what the prohibition names apart from its act."""
    return _PROHIBITED_VERB.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)], text)


def _old_values(text: str) -> set[str]:
    vals = set()
    for m in _OLD_VALUE.finditer(text):
        v = m.group(1)
        # a value ends with its sentence ("not Samuel. Everyone does." names "Samuel"), not
        # at a title's period ("not St. Louis")
        end = _SENTENCE.search(v)
        if end is not None and v[:end.start()].split()[-1].rstrip(".!?") not in _TITLES:
            v = v[:end.start()]
        v = v.strip(" .,!:;")
        low = v.lower()
        if low in _STOP or len(low) < 2:
            continue
        vals.add(low)
    return vals


def _contains_value(candidate: str, value: str) -> bool:
    """Whole-token containment that treats "7:40" and "7:40pm" as the same value."""
    low = normalize(candidate)
    if re.search(r"(?<![\w])" + re.escape(value) + r"(?:am|pm|s)?(?![\w])", low):
        return True
    st = _stem(value)
    return len(st) >= 3 and st in {_stem(w) for w in re.findall(r"[\w'-]+", low)}


# --------------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------------


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na = float(np.linalg.norm(a))
    nb = float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a.astype(np.float32).ravel(), b.astype(np.float32).ravel()) / (na * nb))


# The cosine at which meaning alone points at a target: a turn that shares no content word
# or value with a correction, and is checked against nothing else (a retraction asserts no
# new value: "forget the restaurant"), is its target only this close. Measured on the four
# knowledge sets' meaning searches (40 corrections, each against its 12 nearest turns): the
# 86 turns that were not the target and shared no word or value reached at most 0.45 (all
# but one at most 0.27), and the 18 targets sharing none 0.04-0.66 (median 0.36: each is
# taken on a new value of its kind, never on the cosine), so no floor on the cosine alone
# separates them; a retraction's target shared a word or value each time (0.51, 0.76).
# "Forget the restaurant." took the hotel booking at 0.32. The floor find_superseded
# applies to a similarity alone (`min_similarity`): both readings agree on it.
SIMILARITY_ALONE_MIN_COSINE = 0.6

# The cosine at which the meaning search's retraction takes a turn sharing no word or value
# with it ("forget the spending limit I gave you" / "my budget for the whole trip is
# $3,250"): the unrelated pairs' p99 that SUPERSEDE_MIN_COSINE's measurement found (0.35),
# so the cosine alone says the two are related. Not SIMILARITY_ALONE_MIN_COSINE: a
# retraction names its target by another word more often than not ("the allergy thing" /
# "I'm allergic to peanuts", 0.38-0.44; "the spending limit" / "my budget", 0.40, over the
# pressure eval's templates), and at 0.6 every such retraction superseded nothing (e00913d:
# the stale budget stayed current). "Forget the restaurant." still does not take the hotel
# booking (0.32): the nearest turn there is in the unrelated range.
RETRACTION_ALONE_MIN_COSINE = 0.35


# A list in one statement: items joined by commas and a closing "and" / "or" ("I'm allergic
# to penicillin and latex.", "eggs, milk and bread"); a comma alone joins no list ("12 Elm
# Street, Leeds" is one address). Words that open an item are skipped to reach it.
_LIST_TOKEN = lazy_compile(r"\d+(?:[.:,]\d+)*|[A-Za-z][\w'-]*|,")
_LIST_JOINS = frozenset(("and", "or"))
_ITEM_OPENERS = frozenset(("the", "a", "an", "my", "our", "some", "also"))
# words that make "x and y" no list of values: people and the user ("Sam and I")
# and words that close a range or a phrase, no value ("3.8 and up", "$50 or more")
_NOT_ITEMS = frozenset(("i", "me", "we", "us", "you", "he", "she", "they", "him", "her", "them", "it", "more", "less",
                        "up", "down", "over", "above", "below", "later", "earlier", "after", "before", "so", "on",
                        "off", "out", "then", "again", "back", "else"))


def _lists(statement: str) -> list[frozenset[str]]:
    """The item stems of each list in `statement` (the word each side of a comma or of a
    closing "and" / "or"), where it holds one."""
    toks = [t.lower() for t in _LIST_TOKEN.findall(statement)]
    out: list[frozenset[str]] = []
    for i, t in enumerate(toks):
        if t not in _LIST_JOINS or i == 0:
            continue
        j = i + 1
        while j < len(toks) and toks[j] in _ITEM_OPENERS:
            j += 1
        k = i - 1 - (toks[i - 1] == ",")  # an Oxford comma
        if j >= len(toks) or toks[j] == "," or k < 0 or toks[k] == ",":
            continue
        items = [toks[j], toks[k]]
        while k >= 2 and toks[k - 1] == "," and toks[k - 2] != ",":
            k -= 2
            items.append(toks[k])
        # a pronoun or a word of no content ("3.8 and up", "this and that") joins no values
        if any(w in _NOT_ITEMS or w in _LIST_JOINS or w in _STOP for w in items):
            continue
        out.append(frozenset(_stem(w) for w in items))
    return out


# what takes an item out of a list: a negation or a removal ("not allergic to latex", "no
# longer gluten-free", "take milk off", "remove Tom", "a false alarm"); a correction without
# one ("I moved to York with my wife." / "I live in Leeds with my wife and kids.") revises
# the statement whatever item it names
_DROPS_ITEM = lazy_compile(r"\b(?:not|no|never|anymore|off|remove|removed|drop|dropped|without|false alarm)\b|n't\b",
                           re.I)


# words a removal says besides the item it drops ("Take milk off the list.", "Latex turned
# out to be a false alarm.", "I'm not allergic to latex after all."): no value of its own
_REMOVAL_STEMS = frozenset(_stem(w) for w in (
    "take", "took", "remove", "removed", "drop", "dropped", "off", "list", "false", "alarm", "turned", "out",
    "after", "all", "anymore", "longer", "actually", "sorry", "now", "really"))


def names_part_of_list(new: str, old: str) -> bool:
    """Whether `new`, which holds no list of its own and drops something (`_DROPS_ITEM`),
    names some but not all the items of a list `old` states ("I'm not allergic to latex
    after all." / "I'm allergic to penicillin and latex."): it revises one item, and superseding the statement would hide
    the others, still true (a penicillin allergy). The old statement stays current, the
    lesser harm: the later correction is in view beside it. A correction that restates the
    list ("they're 9 and 11", "Tuesdays and Thursdays") or names every item revises it."""
    if _lists(new) or not _DROPS_ITEM.search(new):
        return False
    # a value of its own ("I don't live in Bosnia anymore, I moved to Croatia.", "I'm not a
    # nurse anymore, I'm a paramedic now", "amoxicillin, not penicillin"): a correction of
    # the statement, which this rule must not keep current
    if set(_content(new)) - set(_content(old)) - _REMOVAL_STEMS:
        return False
    said = frozenset(_stem(t.lower()) for t in _LIST_TOKEN.findall(new) if t != ",")
    return any(0 < len(items & said) < len(items) for a, e in statement_spans(old) for items in _lists(old[a:e]))


# Who a correction reports ("Linda said the offsite is moved to Tuesday.", "my boss told me
# ..."): the reporter's name is no evidence of the fact it revises ("My manager is Linda.")
_REPORTER = lazy_compile(r"\b([A-Z][a-z]+|(?i:my|our)\s+[a-z]+)\s+(?:said|says|told me|tells me|mentioned|thinks)\b")


# a report about the reporter ("Leo says he's 10 now.", "Anna told me she quit law"): the
# name is then whose fact it is, evidence as any
_ABOUT_THEMSELVES = lazy_compile(r"\s*,?\s*(?:that\s+)?(?:he|she|they)\b", re.I)


def reporters(text: str) -> set[str]:
    """The stems of who `text` reports, where the report is not about the reporter."""
    return {_stem(m.group(1).split()[-1]) for m in _REPORTER.finditer(text)
            if not _ABOUT_THEMSELVES.match(text, m.end())}


def _reporter_alone(new: str, old: str) -> bool:
    """Whether all that `new` shares with `old` in words is who `new` reports ("Linda said
    the offsite is moved to Tuesday." / "My manager is Linda."): the manager is no offsite,
    however near the two are in meaning by the name. A report about the reporter ("Leo
    says he's 10 now.") is no such report."""
    reporters_ = reporters(new)
    shared = set(_content(new)) & set(_content(old))
    return bool(reporters_) and bool(shared) and shared <= reporters_


# A thing an amount or a value is for, named after the noun that holds it ("My budget for
# the new phone is $700."): (the noun, the thing). "My budget for the new laptop is $1,200."
# is another budget's value, as "The monthly grocery budget is $600." is.
_FOR_THING = lazy_compile(
    r"\b([a-z]+)\s+for\s+(?:(?:the|my|our|a|an|this|next)\s+)?(?:(?:new|next|upcoming)\s+)?([a-z]{3,})\s+"
    r"(?:is|are|was|will be|should be|'s)\b", re.I)


def _other_purpose(new: str, old: str) -> bool:
    """Whether `new` states the value of a noun for a thing ("My budget for the new phone
    is $700.") that `old` never mentions, while `old` qualifies the same noun otherwise ("my
    budget for the new laptop", "the grocery budget"): two budgets, neither revising the
    other. A noun `old` states bare ("My budget is $1,000.") may still be revised."""
    m = _FOR_THING.search(new)
    if m is None:
        return False
    word = m.group(2).lower()
    head = _stem(m.group(1))
    things = {_stem(word), _stem(word.removesuffix("ies") + "y")}  # "groceries" is the "grocery" budget's
    old_words = [w.lower() for w in re.findall(r"[A-Za-z][\w'-]*", old)]
    stems = [_stem(w) for w in old_words]
    if things & set(stems) or head not in stems:
        return False
    at = stems.index(head)
    before = old_words[at - 1] if at > 0 else ""
    after = old_words[at + 1:at + 2]
    qualified = (after == ["for"]) or (before not in _DETERMINERS and before not in _NEUTRAL_MODIFIERS
                                       and before not in _STOP and before != "")
    return qualified


def find_superseded(
    text: str,
    candidates: Sequence[Candidate],
    *,
    embedding: np.ndarray | None = None,
    min_similarity: float = SIMILARITY_ALONE_MIN_COSINE,
    speaker: str | None = None,
    latest: bool = True,
    kind_of: KindCheck | None = None,
) -> list[tuple[int, str]]:
    """Positions of earlier turns that ``text`` corrects or retracts, each with the reason.

    ``candidates`` are the conversation's earlier user turns, most recent last; ``latest``:
    the last of them is the user's previous turn, which a retraction with nothing to go on
    ("never mind") takes back (False: they are some other selection, such as the turns a
    chain passed through, and such a retraction revises none of them). ``speaker``: the
    name of who said ``text``, where its message gives one (``voices_may_revise``).
    ``kind_of``: whether a noun no turn holds may name what a request naming a place by
    its name alone was for (`KindCheck`, by meaning; None: it never does, and "Forget the
    restaurant." takes back no such request).
    Returns ``[]`` when ``text`` has no correction or retraction cue, or when no candidate
    plausibly matches.
    """
    norm = normalize(text)
    cue = correction_cue(norm, "user")
    state = _STATE_CHANGE.search(_cue_text(norm)) or _CHANGED_MIND.search(_cue_text(norm))
    framed = _framed_correction(norm) if cue is None and state is None else None
    if _DISMISSAL.match(norm):
        return []  # "Forget about it, it's fine.": a worry waved off, no plan
    need = _NO_NEED.match(_cue_text(norm))
    if need is not None:
        not_needed = _not_needed(text, need, candidates, speaker, latest, kind_of)
        if not_needed or (cue is None and state is None and framed is None):
            return not_needed
    plan = _PLAN_RETRACTION.match(_cue_text(norm)) or _OFF_STATE.match(_cue_text(norm))
    if plan is not None:
        called_off = _called_off(text, plan.group("obj"), candidates, speaker, bare_off=_bare_off(plan)) or \
            _called_off_by_kind(text, norm, candidates, speaker, latest, kind_of)
        if called_off or (cue is None and state is None and framed is None):
            return called_off
    if cue is None and state is None and framed is None:
        return []
    cue_txt = cue[1] if cue else state.group(0) if state else framed or ""
    # whose fact and about what: someone else's change never revises the user's own, nor a
    # statement about one thing another's (may_revise)
    # what kind of the user's fact it tells (where they live, work, what they eat, their
    # name): it revises only a turn of the same kind where both tell one (`fact_kinds`)
    kinds = fact_kinds(text)
    held = _held_kinds(text) if state is not None else frozenset()
    eligible = [c for c in candidates if (c.intent not in NOT_SUPERSEDABLE or _gives_name(kinds, c))
                and _kinds_fit(kinds, fact_kinds(c.text))
                and voices_may_revise(text, speaker, c.text, c.speaker)]
    if not eligible:
        return []

    # A bare "scratch that" / "never mind" takes back what the user just said, and only that.
    if _BARE_RETRACTION.fullmatch(norm):
        return _just_said(candidates, eligible, speaker, latest, f"retraction:bare '{cue_txt}' -> previous turn")

    old_vals = _old_values(text)
    words = _content(text)
    for v in old_vals:  # the old value is evidence about the target, not content of the new value
        words.pop(_stem(v), None)
    slots = _slots(text)
    # A retraction that names its thing ("Never mind the movie tonight.", "Forget the
    # pharmacy, I'll go tomorrow."): only that phrase is evidence of its target. A day or a
    # word after it ("tonight", "tomorrow") is the user's own plan or reason: a pizza
    # ordered for tonight or a dentist booked for Tuesday shares a day with it, not a thing.
    thing = _RETRACTED_OBJECT.match(_cue_text(norm)) if cue is not None and cue[0] == "retraction" else None
    if thing is not None:
        untimed = _without_times(_cue_text(norm), thing)
        old_vals = {v for v in old_vals if _contains_value(untimed, v)}
        words = {w: wt for w, wt in _content(untimed).items() if w not in {_stem(v) for v in old_vals}}
        slots = _slots(untimed)
    # A correction that names the value it replaces ("I don't work at Acme anymore") while no
    # earlier turn holds that value is about something out of view: a single shared word or a
    # slot type is then too weak to pin it on another turn.
    orphan = bool(old_vals) and not any(_contains_value(c.text, v) for c in eligible for v in old_vals)
    for rep in reporters(text):
        words.pop(rep, None)  # who said it: not what it is about

    best: tuple[float, int, int, str] | None = None  # (score, lb, position, reason)
    retracting = cue is not None and cue[0] == "retraction"
    instead = not retracting and _INSTEAD_WORD.search(norm) is not None
    choice = _choice_only(text)
    of_it = bool(_IT_VALUE.match(norm))
    noun = _retracted_noun(_cue_text(norm))  # "the lunch": no sushi for 8pm (`_meal_fits`)
    # the occasion the correction is about ("Actually Friday's meeting is at 4pm."): it
    # revises no statement of another named occasion ("The team meeting on Monday is at 3pm."),
    # however close in words and meaning
    about = _qualifying_occasions(text)
    if about and not any(about & _named_occasions(c.text) for c in eligible):
        # no statement names that occasion: the correction moves the event there ("Actually
        # the meeting is on Tuesday at 3pm." after "... on Monday at 3pm."), not another's
        about = frozenset()
    for c in eligible:
        if not _choice_fits(choice, c.text, c.intent):
            continue  # a change of mind about the trip: not "I live in Porto"
        if about and (told := _named_occasions(c.text)) and not about & told:
            continue
        if noun is not None and not _meal_fits(noun, c.text):
            continue
        if names_part_of_list(text, c.text) or _other_purpose(text, c.text):
            continue  # one item of a list, or another thing's amount: the statement still holds
        if not retracting and _holds_every_value(slots, c.text, text):
            continue  # "Actually, it's raining in Oslo now." tells "I live in Oslo." nothing new
        why: list[str] = []
        hit_old = [v for v in old_vals if _contains_value(c.text, v)]
        old_score = 3.0 if hit_old else 0.0
        if hit_old:
            why.append(f"old value '{hit_old[0]}'")
        shared, lex_score = _shared(text, words, c.text, _content(c.text))
        if (instead and shared and not hit_old
                and not set(shared) & _content(_without_prohibited_verbs(c.text)).keys()
                and words.keys() - _content(c.text).keys() - _REVERSAL_OPENER_WORDS):
            # "Never book me on red-eye flights." / "In this branch, book Porto instead.": an
            # order with "instead" that shares only a prohibition's verb gives what the user
            # wants in place of the thing ruled out, or in place of another thing; it names
            # nothing the rule is about (its object, its time, a value of it), so the rule
            # stands. A rule stated as an order to do ("Always seat me by the window.") is
            # replaced by the same verb with another complement ("seat me on the aisle
            # instead"), and a prohibition by one naming what it rules out ("book me on
            # red-eyes instead", a slot's value: "call me after 10pm instead"); an order that
            # names nothing of its own ("Don't call me." / "Call me instead.") lifts the rule
            shared, lex_score = [], 0.0
        if shared:
            why.append("shared " + ",".join(f"'{w}'" for w in shared[:3]))
        cslots = _slots(c.text)
        same = _matching_slots(slots, cslots)
        # a bare number on one side ("the order number is 55812" against "9 Elm Street")
        # is a weak match: half a typed slot's weight
        slot_score = 0.0 if not same else 0.5 if same == ["number"] and _unitless_number(slots, cslots) else 1.0
        if same:
            why.append("slot " + "/".join(same))
        # a state change of a kind ("I'm vegetarian now", "I moved to ...") revises the
        # latest statement of that kind, as "make it Wednesday" does the latest weekday
        # (a name given anew with the one it replaces, "call me Sam, not Samuel", revises
        # only a turn that gave that name)
        # (of the same holder, named by both: "I'm vegetarian now" is no change of "my
        # sister eats fish")
        same_kind = sorted({k for k, h in held & _held_kinds(c.text) if k != NAME or hit_old or not old_vals}) \
            if held else []
        kind_score = 1.0 if same_kind else 0.0
        if same_kind:
            why.append("kind " + "/".join(same_kind))
        sim_score = 0.0
        if embedding is not None and c.embedding is not None:
            sim = _cosine(embedding, c.embedding)
            if sim >= min_similarity:
                sim_score = 1.0 + sim
                why.append(f"sim={sim:.2f}")
        score = old_score + lex_score + slot_score + sim_score + kind_score
        strong = old_score > 0 or sim_score > 0 or lex_score >= 2.0 or kind_score > 0
        if score < 1.0:
            continue
        if not strong and not same and not _slot_mentioned(text, c.text):
            # a word shared elsewhere than the slot the correction names ("Actually the wifi
            # password at the cabin is now cedar77." / "The cabin was freezing last night."):
            # the target states nothing of that slot, nor a value of its kind
            continue
        if orphan and not (strong and (retracting or _same_topic(text, c.text, old_vals))):
            # The correction names a value no earlier turn holds ("I don't work at Acme anymore"
            # with no Acme in view): one shared word or a slot type is too weak to pin it
            # elsewhere, and so, for an update, is a strong match by meaning or words about
            # another thing: "Instead of flowers, I'll bring my parents wine on Sunday." (the
            # user's) replaces flowers, not the dinner (a thing's) it shares the parents and the
            # day with. A strong match about the same thing of the same holder names its old
            # value another way ("not 2k" for "$2,000", "NYC" for "New York City", "Google LLC"
            # for "Google"). A retraction's named thing is no value it replaces but what it
            # drops: "Forget the restaurant." takes the table booked by meaning alone
            continue
        if not strong and not shared and not c.load_bearing and not (of_it and c is candidates[-1]):
            # A bare slot match ("make it Wednesday") only revises a turn worth pinning, not any
            # turn that happens to mention a day; but a new value for "it" ("Sorry, it's the
            # 14th.") is one for what the user just said ("My flight is on the 12th."), pinned
            # or not.
            continue
        # Tie-break: load-bearing first, then recency (later position wins).
        key = (score + (0.25 if c.load_bearing else 0.0), int(c.load_bearing), c.position)
        if best is None or key > best[:3]:
            best = (*key, f"correction '{cue_txt}': " + "; ".join(why))

    if best is not None:
        return [(best[2], best[3]), *_rest_of_topic(cue, old_vals, best[2], eligible)]

    if cue is None or cue[0] != "retraction":
        return []
    # "forget the restaurant": a thing named by a noun no turn holds is the kind of a place
    # a recent request named by its name alone, or nothing; never what the user just said
    # whatever it was ("I'm allergic to peanuts" / "Never mind the restaurant.")
    named = _OBJECT_RETRACTION.match(_cue_text(norm))
    if named is not None:
        return _named_venue(named.group("obj"), candidates, eligible, speaker, latest, kind_of,
                            when=_slots(named.group("when")))
    # "scratch that, keep the old name": a retraction opener whose object matched nothing.
    if _RETRACTION_OPENER.match(norm):
        return _just_said(candidates, eligible, speaker, latest, f"retraction:'{cue_txt}' -> previous turn")
    return []


def _same_topic(new: str, old: str, old_values: AbstractSet[str]) -> bool:
    """Whether some clause of `new`, which replaces `old_values` (none held by any turn
    word for word), and some clause of `old` are the same holder's statement about the
    same thing: both about a thing, and those fit (`_subjects_fit`: "my budget for the
    trip ..., not 2k"); or both about no thing ("I work at Google." / "I don't work at
    Google LLC anymore") and `old` holds a replaced value by another form of it
    (`_names_otherwise`). One about a thing and the other about none ("I'll bring my
    parents wine" / "Dinner with my parents is ..."), or both about none where `old` holds
    no form of the value ("Instead of the tour, I'll relax at the Rome hotel pool." / "My
    hotel in Rome is ..."), are not."""
    return any(a == b and (_subjects_fit(sa, sb) if sa is not None and sb is not None
                           else sa is None and sb is None and any(_names_otherwise(v, old) for v in old_values))
               for a, sa, _ta in _clauses(new) for b, sb, _tb in _clauses(old))


def _names_otherwise(value: str, text: str) -> bool:
    """Whether `text` holds `value` (lower case, as `_old_values` reads it) by another
    form: a word of it ("google llc" in "I work at Google."), or its letters some of the
    initials of capitalised words in a row ("nyc" in "I live in New York City.")."""
    words = {w.lower() for w in _ANY_WORD_RE.findall(text)}
    if any(len(w) >= MIN_VALUE_WORD_CHARS and w not in _STOP and w in words for w in value.split()):
        return True
    return value.isalpha() and len(value) > 1 and any(value in "".join(w[0] for w in run.group(0).lower().split())
                                   for run in _CAPITALISED_RUN.finditer(text))


# a word as written, any case; capitalised words in a row ("New York City"), whose
# initials are a short name of them ("NYC")
_ANY_WORD_RE = lazy_compile(r"(?<![\w'-])[A-Za-z][\w'-]*")
_CAPITALISED_RUN = lazy_compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)+")
# the shortest word of a replaced value that names it alone ("google" of "google llc"; not
# "a", "of")
MIN_VALUE_WORD_CHARS = 3


def _holds_every_value(slots: Mapping[str, AbstractSet[str]], target: str, text: str) -> bool:
    """Whether `target` already holds every typed value a correction (`text`, its typed
    values `slots`, at least one) says: then it carries no new value for that target, and
    corrects none of it ("Actually, it's raining in Oslo now." after "I live in Oslo."; a
    correction, unlike a retraction, tells a value). A restatement with more ("Oslo,
    Norway") holds one more. Each clause of the correction is compared with the target's
    clauses about the same thing (`_clause_parts`: the same subject's head and owner, or no
    subject and the same holder) where it has such: "Emma is 9" after "Emma is 7 and Liam
    is 9." and "my flight is at noon" after "My flight is at 10am and my wife's is at
    noon." carry a value new to their own clause, though another clause of the target holds
    it, and "my dentist visit is on Monday" one new to the user's visit where the target
    gives Monday only to "the kids' dentist visit"; a clause about nothing the target's
    clauses are about is compared with all of it."""
    if not slots:
        return False
    held = _slots(target)
    told = [(h, s, cs) for h, s, c in _clause_parts(text) if (cs := _slots(c))]
    if not told:
        return all(vals <= held.get(slot, frozenset()) for slot, vals in slots.items())
    theirs = [(h, s, _slots(c)) for h, s, c in _clause_parts(target)]
    for holder, subject, own in told:
        if subject is not None and any(tsub is not None and tsub.head == subject.head for _th, tsub, _ts in theirs):
            # the thing named: only its own statement, whose owner is the same ("my dentist
            # visit" is not "the kids' dentist visit"); another's alone holds no value of it
            same = [ts for _th, tsub, ts in theirs
                    if tsub is not None and tsub.head == subject.head and tsub.possessors == subject.possessors]
            if not same:
                return False
        else:
            same = [ts for th, tsub, ts in theirs if subject is None and tsub is None and holder == th]
        pool: Mapping[str, AbstractSet[str]] = held if not same else \
            {slot: frozenset().union(*(ts.get(slot, frozenset()) for ts in same)) for slot in own}
        if not all(vals <= pool.get(slot, frozenset()) for slot, vals in own.items()):
            return False
    return True


def _clause_parts(text: str) -> list[tuple[str | None, Subject | None, str]]:
    """Each clause of `text`, as `_clauses` cuts it (by statement, then by comma, colon
    or dash), with its holder and its subject: what `_holds_every_value` compares clause by
    clause."""
    plain = _untitled(text)
    out = []
    for a, e in statement_spans(plain):
        for clause in _CLAUSE_CUT.split(plain[a:e]):
            said = _OPENER.sub("", clause.strip().lstrip("\"'(-* "), count=1)
            out.append((_holder(clause), _subject(said) or _changed_object(said), clause))
    return out


def _gives_name(kinds: AbstractSet[str], c: Candidate) -> bool:
    """Whether a name given anew (`kinds` holds NAME) may revise `c` though small talk:
    a greeting that gives the user's name ("Hi! I'm Samuel Ortiz.") states it."""
    return NAME in kinds and c.intent == "chitchat" and NAME in fact_kinds(c.text)


def _without_times(cue_text: str, thing: re.Match[str]) -> str:
    """A retraction naming its thing (`cue_text` normalised, `thing` its `_RETRACTED_OBJECT`
    match) with the days, dates and hours after that phrase cut out ("never mind the movie
    tonight." -> "never mind the movie ."): what is left may name its target, by a word or
    a value ("forget my old number, it's 555-1234 now" keeps its number)."""
    rest = cue_text[thing.end():]
    for slot, vals in _slots(rest).items():
        if slot in _WHEN_SLOTS:
            for v in sorted(vals, key=len, reverse=True):  # "march 3" before "3"
                rest = re.sub(rf"(?:\b(?:{_WHEN_WORDS}) )?(?<![\w'-]){re.escape(v)}(?![\w'-])", " ", rest)
    return cue_text[:thing.end()] + re.sub(r" +(?=[ ,.;:!?]|$)", "", rest)


def _meaning_text(text: str) -> str:
    """What a correction is searched by meaning with (`Superseder._searched`): the text,
    save that a retraction naming its thing loses the days and hours after it
    (`_without_times`): "Forget the theatre on Friday." searches as "forget the theatre.",
    the day drawing it near any booking for Friday (0.39 from a table booked for Friday at
    7pm, "Forget the theatre." under RETRACTION_ALONE_MIN_COSINE), while "Never mind the
    reminder at 6pm." is still as near "Remind me to call mom at 6pm." as its noun is."""
    cues = _cue_text(normalize(text))
    thing = _RETRACTED_OBJECT.match(cues) if _RETRACTS.search(cues) else None
    if thing is None:
        return text
    untimed = _without_times(cues, thing)
    return text if untimed == cues else untimed


def _named_venue(obj: str, candidates: Sequence[Candidate], eligible: Sequence[Candidate], speaker: str | None,
                 latest: bool, kind_of: KindCheck | None, when: Mapping[str, AbstractSet[str]] | None = None
                 ) -> list[tuple[int, str]]:
    """What a retraction naming `obj`, a thing no turn holds a word of, takes back: the
    latest of the user's last ``ELLIPSIS_REACH`` turns that is a request naming a place by
    its name alone (`_NAMED_VENUE`: "Book a table at Nong's for Friday.", which "the
    restaurant" may be) and that `obj` may name by meaning (`kind_of`: "the restaurant"
    or "the dinner" that table, never "the hotel", "the flight" or "the password"), past
    requests that name their thing's kind ("Book the Altis hotel ...") or that `obj` is
    no kind of ("Forget the spa." passes over the table to the massage at Serenity);
    nothing where there is none, or no `kind_of` to tell (a miss rather than a wrong
    retraction). Only where the candidates end with the user's previous turn (`latest`),
    as for `_just_said`. The one home of the kind check: "Forget the X." and "Cancel the
    X." (`_called_off_by_kind`) both come here. A noun naming the act that arranged a
    thing ("reservation", "order": `ARRANGEMENT_NOUNS`) takes the latest recent request
    of that act (`_arrangement`) or statement of the user's own such thing that stands
    (`_states_arrangement`: "I have a dentist appointment on Friday.") instead, with no
    `kind_of` needed: it names no kind. Its plural ("the reservations") takes each of
    them. ``when``: the slots of a time said after the noun ("the restaurant on Friday"),
    which only narrows: of the turns the noun names, the latest one holding that time, else
    the latest of them (the time may be the user's own plan); it never makes a turn of
    another kind one the noun names."""
    if not latest:
        return []
    ok = {c.position for c in eligible}
    named: list[tuple[Candidate, str]] = []
    arranged = _arranged_act(obj)
    if arranged is not None:  # "the reservation": the latest booking of any kind
        act, every = arranged
        for c in reversed(candidates[-ELLIPSIS_REACH:]):
            if c.position not in ok or _other_speakers(speaker, c.speaker):
                continue
            if _arrangement(c.text) == act if c.intent in _PLAN_INTENTS else _states_arrangement(c.text, act):
                named.append((c, f"retraction: '{obj}' -> the {'' if every else 'latest '}{act}"))
        if every:  # "the reservations": each
            return [(c.position, why) for c, why in named]
    elif kind_of is not None:
        for c in reversed(candidates[-ELLIPSIS_REACH:]):
            if c.position not in ok or c.intent not in _PLAN_INTENTS or _other_speakers(speaker, c.speaker):
                continue
            if not _meal_fits(obj, c.text):
                continue  # "the lunch" by no other name: sushi for 8pm is no lunch
            same = kind_of.synonym_in(obj, _with_antecedent(c, candidates))
            if same is not None:  # "the movie": "two tickets for the new Dune film"
                named.append((c, f"retraction: '{obj}' -> '{same}', the same thing"))
                continue
            for m in _NAMED_VENUE.finditer(c.text):
                after = (m.group("after") or "").strip().lower()
                if _TIME_NAME.match(m.group("name")) is None and (not after or after in _STOP):
                    # the name alone, its kind unsaid: `obj` must be of the request's kind,
                    # or a show its tickets admit to
                    if _admits_to(obj, c.text):
                        named.append((c, f"retraction: '{obj}' -> the tickets at '{m.group('name')}'"))
                    elif kind_of(obj, c.text):
                        named.append((c, f"retraction: '{obj}' -> the place named '{m.group('name')}'"))
                    break  # one place per request: another kind of thing, an earlier request may be the one
    if not named:
        return []
    timed = [(c, why) for c, why in named if when and any(
        vals & _slots(c.text).get(slot, frozenset()) for slot, vals in when.items())]  # the same day or hour
    c, why = (timed or named)[0]  # newest first
    return [(c.position, why)]


# A plan of the user's own told with its day or hour ("Let's plan a picnic in the park on
# Sunday.", "We're having dinner with Jo on Friday.", "I'm going to the gym at 6."): an
# event the user arranged as a request arranges one, which a call-off naming it ends
# (`_called_off`: "The picnic's cancelled."). `_PLAN_TENSE` with "let's" beside it; a time
# is needed, so a habit or a state ("I'm learning Spanish") is none.
_LETS = lazy_compile(r"^(?:(?:so|ok(?:ay)?|and|also)[,!]?\s+)*let(?:'s| us) \w+")


def _own_plan(text: str) -> bool:
    """Whether `text` tells a plan of the user's own for a day or an hour (`_LETS`,
    `_PLAN_TENSE`, a time of `_WHEN_SLOTS`)."""
    low = text.lower()
    return (_LETS.match(low) is not None or _PLAN_TENSE.search(low) is not None) and \
        bool(_slots(text).keys() & _WHEN_SLOTS)


# a request about a thing the turn before named ("Get two tickets at the Odeon for it.")
_ABOUT_IT = lazy_compile(r"\b(?:for|to|of|about|on|with) (?:it|that|this|them)\b")


def _with_antecedent(c: Candidate, candidates: Sequence[Candidate]) -> str:
    """`c`'s text, and where it asks about "it" (`_ABOUT_IT`: "Get two tickets at the Odeon
    for it."), the user's turn before it, which named what "it" is ("I'd love to watch the
    new Dune film tonight."): the words a retraction's noun may name the request by."""
    if _ABOUT_IT.search(c.text.lower()) is None:
        return c.text
    before = [p for p in candidates if p.position < c.position]
    return f"{before[-1].text} {c.text}" if before else c.text


def _called_off_by_kind(text: str, norm: str, candidates: Sequence[Candidate], speaker: str | None,
                        latest: bool, kind_of: KindCheck | None) -> list[tuple[int, str]]:
    """What a call-off naming its thing by a kind no turn holds a word of takes back
    (`_KIND_CALL_OFF`: "Cancel the dinner." after "Get me a table for four at Chez Marie on
    Saturday."): the place a recent request named by its name alone, as a retraction
    naming it so ("Forget the restaurant.", `_named_venue`); nothing where a turn holds a
    word of it (`_called_off` found no request naming it: it names another thing, a fact's
    or the user's own) or where no request names a place so."""
    cues = _cue_text(norm)
    m = _KIND_CALL_OFF.match(cues) or _OFF_STATE.match(cues)
    if m is None:
        return []
    arranged = _arranged_act(m.group("obj"))
    if m.re is _KIND_CALL_OFF.compiled() and m.group("det") in ("my", "our") and arranged is None:
        return []  # "Cancel my gym membership.": the user's own thing, no booking
    bare_off = _bare_off(m)  # "The heating is off.": an event's noun, or the thing a booking booked
    words = set(_content(m.group("obj")))
    # a turn holding a word of it names it, as a request (`_called_off`) or a thing of
    # the user's own; the verb a request arranges by is no name of what it arranged
    # ("Order a pizza ..." / "Cancel my order."), and a statement of the user's own
    # arrangement is one `_named_venue` may take ("I have a dentist appointment on Friday.")
    if not words or any(words & set(_content(_past_verb(c.text) if arranged else c.text)) for c in candidates
                        if arranged is None or not _states_arrangement(c.text, arranged[0])):
        return []
    eligible = [c for c in candidates if c.intent not in NOT_SUPERSEDABLE
                and voices_may_revise(text, speaker, c.text, c.speaker)
                and (not bare_off or _off_fits(m.group("obj"), c))]
    return _named_venue(m.group("obj"), candidates, eligible, speaker, latest, kind_of)


def _request_verb(text: str) -> tuple[str, str]:
    """A request's verb, lower case, and the text after it (`_REQUEST_VERB`: "Could you
    book a table ..." -> "book", " a table ..."); ("", text) where none is read."""
    m = _REQUEST_VERB.match(text.lower())
    return (m.group("verb"), text[m.end():]) if m else ("", text)


def _past_verb(text: str) -> str:
    """`text` past its request verb, where its verb is one that arranges (`_ARRANGING_VERBS`,
    `_GETTING_VERBS`): the words that may name what it arranged."""
    verb, rest = _request_verb(text)
    return rest if verb in _ARRANGING_VERBS or verb in _GETTING_VERBS or verb in _SETTING_VERBS else text


def _arrangement(text: str) -> str | None:
    """The act a request arranges by ("booking", "order": `ARRANGEMENT_NOUNS`), or None:
    its verb's ("Book me a flight", "Could you reserve a room", "Order a pizza from
    Luigi's"), or a booking where a getting verb names a place by its name alone after
    "at" and a time ("Get me a table for four at Chez Marie on Saturday"; never "Get me a
    coffee", "Pick up my prescription from Boots")."""
    verb, rest = _request_verb(text)
    named = re.match(r"\s*(?:me |us )?(?:a|an|the|my|our) (?:new )?([a-z]+)\b", rest.lower())
    if verb in _SETTING_VERBS and named is not None and named.group(1) in ARRANGEMENT_NOUNS:
        return ARRANGEMENT_NOUNS[named.group(1)]  # "Set a reminder to ...": a reminder
    if verb in _ARRANGING_VERBS:
        return _ARRANGING_VERBS[verb]
    if verb in _GETTING_VERBS and _slots(rest).keys() & {"weekday", "date", "time"} and any(
            m.group(0).startswith("at ") and _TIME_NAME.match(m.group("name")) is None
            for m in _NAMED_VENUE.finditer(rest)):
        return "booking"
    return None


def _rest_of_topic(cue: tuple[str, str] | None, old_vals: AbstractSet[str], best: int,
                   eligible: Sequence[Candidate]) -> list[tuple[int, str]]:
    """A retraction that names its topic ("Forget what I said about the spa.") takes back
    every turn that holds it, not only the best match (`best`, which must hold it too):
    "Book the spa for Saturday afternoon." and "Also book a massage at the spa on Sunday."
    both. Only turns of the best one's kind, a request for a request and a statement for a
    statement: "forget about Porto" that takes back "Book a flight to Porto" leaves "I live
    in Porto" current. A correction with a new value revises one turn and its restatements
    (`Superseder._restated`)."""
    if cue is None or cue[0] != "retraction" or not old_vals:
        return []
    first = next(c for c in eligible if c.position == best)
    named = [v for v in old_vals if _contains_value(first.text, v)]
    if not named:
        return []
    request = first.intent in _PLAN_INTENTS
    return [(c.position, f"retraction '{cue[1]}': every turn holding '{named[0]}'") for c in eligible
            if c.position != best and (c.intent in _PLAN_INTENTS) == request
            and any(_contains_value(c.text, v) for v in named)]


_NOT_WORD = lazy_compile(r"[^\w\s]+")


def _plain(text: str) -> str:
    """`text` for comparing what two statements say: normalised, without punctuation."""
    return " ".join(_NOT_WORD.sub(" ", normalize(text)).split())


# What ties a statement to one occasion or to the past, so that two statements of the same
# value differing in it are about different things (`_restates`): a day, a date, a month
# after a preposition ("in May", not "I may"), today / tonight / tomorrow / yesterday,
# this / next / last week (month, year, weekend, morning, ...), a year.
_OCCASION = lazy_compile(
    rf"\b(?:{DAY_NAMES})s?\b|\b(?:in|on|since|until|by|from|of) (?:{_MONTHS})\b|\b(?:{_MONTHS})\.? \d{{1,2}}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:today|tonight|tomorrow|yesterday)\b"
    r"|\b(?:this|next|last|coming) (?:week|weekend|month|year|morning|afternoon|evening|night|time)\b"
    r"|\b(?:1[89]|20)\d\d\b", re.IGNORECASE)
# A past or habitual form: "I used to live in Oslo.", "I lived in Oslo.", "I grew up in
# Oslo.", "as a student", "when I was ...", "back then", "years ago" are what held then, no
# saying of what holds now ("I've lived in Oslo for years" is present: not after have / has)
_PAST = lazy_compile(
    r"\bused to\b|\bgrew up\b|\bwhen (?:i|we|he|she|they) (?:was|were)\b"
    r"|\bas an? (?:student|kid|child|teenager|teen|boy|girl)\b|\b(?:back then|back in|years ago|formerly|previously)\b"
    r"|(?<!'ve )(?<!have )(?<!has )(?<!had )\b(?:lived|worked|resided)\b", re.IGNORECASE)
_PAST_MARK = "past"  # the one qualifier every past or habitual form gives (`_occasion`)
# A negation, wish, plan or condition: "I don't want to live in Oslo forever.", "I'd like to
# live in Oslo.", "If I lived in Oslo ..." state no home, so they restate no "I live in Oslo."
_MOOD = lazy_compile(
    r"\b(?:not|never|no longer|\w+n't|cannot|want|wants|wish|hope|would|i'd|we'd|might|may|could|if|plan|"
    r"planning|someday|maybe|like to|love to)\b", re.IGNORECASE)
# the first person plural opening a statement: "We live in Oslo." is the household's fact,
# no saying again of the speaker's own "I live in Oslo." (`_restates`)
_WE = lazy_compile(r"^(?:we|we're|we've|we'd|we'll|our|ours|us)\b", re.IGNORECASE)


def _occasion(text: str) -> frozenset[str]:
    """The time qualifiers of `text` (`_OCCASION`, lower case, "Saturdays" and "tomorrow's"
    as "saturday" and "tomorrow"; any `_PAST` form as `_PAST_MARK`) and its `_MOOD` words:
    two statements of the same value with other qualifiers are about another occasion, the
    past, or no fact at all."""
    low = normalize(text).replace("\u2019", "'")
    marks = set(_named_occasions(low))
    marks |= {" ".join(m.group(0).lower().split()) for m in _MOOD.finditer(low)}
    return frozenset(marks | ({_PAST_MARK} if _PAST.search(low) else set()))


def _named_occasions(text: str) -> frozenset[str]:
    """The occasions `text` names (`_OCCASION`, lower case, "Saturdays" and "tomorrow's" as
    "saturday" and "tomorrow"): the time qualifiers of `_occasion` without mood or past."""
    low = normalize(text).replace("\u2019", "'")
    marks = {" ".join(m.group(0).lower().removesuffix("'s").split()) for m in _OCCASION.finditer(low)}
    return frozenset(m[:-1] if m.endswith("days") else m for m in marks)


# A correction that moves a thing to another occasion ("make it Wednesday", "moved to
# Friday", "on Tuesday, not Monday", "reschedule ... for tomorrow"): the occasion it names
# is then its new value, not the occasion it is about (`_qualifying_occasions`)
_OCCASION_MOVE = lazy_compile(
    r"\b(?:make it|not|instead|rather than|mov(?:e|es|ed|ing)|chang(?:e|es|ed|ing)|switch\w*|swap\w*|"
    r"reschedul\w*|push\w*|postpon\w*|bring|brought|shift\w*|to)\b")
# the slots that name an occasion (`_slots`): a correction with a value besides them (a
# time, a price, a place) names its occasion as a qualifier of that value
_OCCASION_SLOTS = frozenset(("weekday", "date"))


def _qualifying_occasions(text: str) -> frozenset[str]:
    """The occasions a correction is about, not to: "Actually Friday's meeting is at 4pm." is
    about Friday's (a possessive occasion always qualifies), so is "The meeting on Friday is
    at 4pm." (another value given, no move); "Actually make it Wednesday." and "The meeting
    moved to Friday at 4pm." name their new occasion, so none (empty)."""
    low = normalize(text).replace("\u2019", "'").lower()
    possessive = frozenset(m.group(0).removesuffix("'s") for m in _OCCASION.finditer(low) if m.group(0).endswith("'s"))
    if possessive:
        return _named_occasions(" ".join(possessive))
    if _OCCASION_MOVE.search(low) or not set(_slots(text)) - _OCCASION_SLOTS:
        return frozenset()
    return _named_occasions(low)


def _plural_self(statement: str) -> bool:
    """Whether `statement` opens in the first person plural ("We live in Oslo.")."""
    return bool(_WE.match(_OPENER.sub("", statement.strip().lstrip("\"'(-* "), count=1)))


def _restates(a: str, b: str) -> bool:
    """Whether statement `a` says again what statement `b` says: the same words, or the same
    holder ("we" is not "I") giving the same values (each one's values all in the other:
    "I live in Oslo." and "My home is in Oslo.", not "The hotel in Rome costs $200." and
    "The hotel costs $200.") with the same time qualifiers (`_occasion`: "My flight is at
    9am today." is no restatement of "... 9am tomorrow.", nor "I lived in Oslo in 2019." /
    "I used to live in Oslo." of "I live in Oslo."), of the same kind of fact where either
    tells one ("I work in Oslo." is no restatement of "I live in Oslo.", nor "I was born
    in Oslo."), else with the same words besides the value ("The meeting is at 3pm." /
    "The meeting's at 3pm.", never "The dentist is at 3pm." nor, a word more on one side,
    "The meeting with Bob is at 3pm."). A correction revises every
    current restatement of what it revises (`Superseder._restated`): said twice and then
    corrected, neither saying is current."""
    if _plain(a) == _plain(b):
        return True
    if _holder(a) != _holder(b) or _plural_self(a) != _plural_self(b) or _occasion(a) != _occasion(b):
        return False
    va, vb = _all_values(a), _all_values(b)
    # the same values both ways: {9am} is not {9am, tomorrow}, nor {$200} {$200, Rome}
    if not va or not vb or not (all(_contains_value(b, v) for _k, v in va)
                                and all(_contains_value(a, v) for _k, v in vb)):
        return False
    ka, kb = fact_kinds(a), fact_kinds(b)
    if ka or kb:
        return ka == kb
    values = [v for _k, v in va | vb]
    wa = {w for w in _content(a) if not any(w in v for v in values)}
    wb = {w for w in _content(b) if not any(w in v for v in values)}
    # both ways: a word more on one side is another thing ("the team meeting", "the
    # meeting with Bob" are not just "the meeting")
    return bool(wa) and wa == wb


def _just_said(candidates: Sequence[Candidate], eligible: Sequence[Candidate], speaker: str | None, latest: bool,
               why: str) -> list[tuple[int, str]]:
    """What a retraction with nothing else to go on ("never mind", "scratch that, keep the
    old name") takes back: the user's previous turn (`candidates[-1]` where `latest`; the
    assistant's reply to it is passed over, being no user turn: "Book a table at Nong's" /
    "Done." / "Never mind."), when that is a request or a load-bearing statement of the
    same speaker. When the previous turn was a question or small talk ("What's the weather
    in Rome?" / "Never mind."), that is what is taken back, and it revises nothing: never a
    turn further back, however load-bearing ("I'm allergic to peanuts" stays current)."""
    if not latest or not candidates:
        return []
    last = candidates[-1]
    if not any(c is last for c in eligible) or _other_speakers(speaker, last.speaker):
        return []  # a question, small talk, another person's turn: nothing of a fact taken back
    if last.load_bearing or last.intent in ("instruction", "correction"):
        return [(last.position, why)]
    return []


def _idle(gated: Mapping[int, str], b: _Batch, searched: AbstractSet[int] | Mapping[int, object]
          ) -> dict[int, str]:
    """Of the corrections `gated` (position -> assertive part), those that revise nothing in
    `b` and that nothing later may make revise: bare retractions (`_just_said` alone decides
    them) and the ones `searched` by meaning."""
    heads = b.heads
    return {p: txt for p, txt in gated.items()
            if p not in heads and (p in searched or _BARE_RETRACTION.fullmatch(normalize(txt)) is not None)}


def _called_off(text: str, obj: str, candidates: Sequence[Candidate], speaker: str | None = None, *,
                bare_off: bool = False) -> list[tuple[int, str]]:
    """The latest earlier request that the call-off `text` (`_PLAN_RETRACTION`, its object
    `obj`) names: a turn labelled a request whose words after its first, the request's verb
    ("Book a haircut ...", "Order a pizza ..."), share a content word with the object
    ("Cancel the haircut."; not "cancel the order" for "Order a pizza"), or, where the
    object is a thing arranged ("the dentist appointment": `ARRANGEMENT_NOUNS`), a
    statement of the user's own such thing that stands ("I have a dentist appointment on
    March 12.": `_states_arrangement`), whole. A meal names no request of another meal's
    hour (`_meal_fits`); a bare "off" (`bare_off`: "The heating is off.") names only an
    event, by its noun or as a booking booked it (`_off_fits`), never a thing a reminder or
    an order merely mentions."""
    words = _content(obj)
    arranged = _arranged_act(obj.rsplit(None, 1)[-1])
    for c in reversed(candidates):
        if not voices_may_revise(text, speaker, c.text, c.speaker):
            continue
        if not _meal_fits(obj, c.text) or (bare_off and not _off_fits(obj, c)):
            continue
        if c.intent in _PLAN_INTENTS:
            rest = c.text.split(None, 1)[1] if len(c.text.split(None, 1)) == 2 else ""
        elif arranged is not None and c.intent not in NOT_SUPERSEDABLE and _states_arrangement(c.text, arranged[0]):
            rest = c.text
        elif c.intent not in NOT_SUPERSEDABLE and _own_plan(c.text):
            rest = c.text  # "Let's plan a picnic in the park on Sunday." / "The picnic's cancelled."
        else:
            continue
        shared, score = _shared(obj, words, rest, _content(rest))
        if set(words) & _go_outings(rest):
            score = max(score, 1.0)  # "going hiking": the outing's own word, no verb's form
        if score >= 1.0:  # one word shared as such, not only by its -ed/-ing form
            return [(c.position, "retraction: called off '" + obj + "', shared " + (",".join(shared[:3]) or obj))]
    return []


# A request told to be needed no more, opening the turn ("No need to remind me about mum.",
# "There's no need to book the taxi.", "You don't need to order the flowers anymore."): it
# takes back the request it names (`_not_needed`), the way "Cancel the reminder." would.
# The act after it is a verb and what it is done to; a pronoun alone names nothing of its
# own ("No need to thank me.", "No need to apologise."): only a request of that very verb.
_NO_NEED = lazy_compile(
    r"^(?:(?:ok(?:ay)?|oh|so|actually|sorry|and|also|btw)[,.!]?\s+)*"
    r"(?:(?:there's|there is) )?(?:no need to|you (?:don't|do not) need to|you needn't) "
    r"(?P<verb>[a-z]+)\b(?P<obj>[^,.;:!?]*)"
)
# the words of a no-need act that name nobody's thing: its person, its "about", its end
_NO_NEED_EMPTY = frozenset(("me", "us", "it", "that", "this", "them", "him", "her", "anymore", "any", "more",
                            "about", "of", "for", "with", "now", "today", "please", "either", "after", "all"))
# an act told how often it is done ("No need to remind me twice about mum, once is
# enough.", "... again", "... so often"): a complaint about the reminding, which goes on,
# not a request called off; it takes nothing back. With its unit, when it has one ("twice
# a day"): the phrase is compared whole with the request's, so "twice" is not the "twice a
# week" of "Remind me to call mum twice a week."
_NO_NEED_FREQUENCY = lazy_compile(
    r"\b(?:twice|again|so often|that often|as often|so much|so many times|all the time|every (?:single )?time"
    r"|each time|constantly|repeatedly|over and over|more than once|(?:\d+|three|four|five|several|many|multiple)"
    r" times)(?:\s+(?:a|an|per|each|every)\s+(?:day|week|month|year|hour|minute|morning|evening|night|"
    r"fortnight|weekend)s?)?\b")
_NO_NEED_ONCE = lazy_compile(r"\bonce (?:is|was)(?: quite)? enough\b")  # said after it: "..., once is enough."
# where the act's object ends and a clause of its own begins ("about mum because she
# called", "call mum she called me"): what follows tells why, not what is called off
_NO_NEED_CLAUSE = lazy_compile(
    r"\b(?:because|since|as|cos|'cause|now that|i|i'm|i've|i'll|i'd|we|we're|we've|we'll|she|she's|he|he's|"
    r"they|they're|it's)\b")
# the verbs whose infinitive a request sets its own act to ("Remind me to call mum", "Ask
# Jo to book the table"): "No need to call mum." names the reminder as well
_INFINITIVE = lazy_compile(r"\bto ([a-z]+)\b")


def _verb_forms(stems: Mapping[str, float]) -> set[str]:
    """`stems` and the stems of their -ing and -ed forms, where `_stem` cuts those
    otherwise ("calling" -> "cal", of "call")."""
    return {f for w in stems for f in (w, _stem(w + "ing"), _stem(w + "ed"))}


def _frequencies(text: str) -> set[str]:
    """The "how often" phrases of `text` (`_NO_NEED_FREQUENCY`, each with its unit),
    whitespace collapsed."""
    return {" ".join(f.group(0).split()) for f in _NO_NEED_FREQUENCY.finditer(text)}


def _not_needed(text: str, m: re.Match[str], candidates: Sequence[Candidate], speaker: str | None,
                latest: bool, kind_of: KindCheck | None) -> list[tuple[int, str]]:
    """What a request told to be needed no more (`_NO_NEED`, its match `m`) takes back:
    the latest of the user's last ``ELLIPSIS_REACH`` turns that is a request (a plan's
    labels) whose verb, or the act it sets ("Remind me to call mum" -> "call"), is the no-
    need act's verb, and that the act's object names as a whole: each of its content words
    is the request's ("the rent" of "pay the rent on the 1st"), or its head noun alone is
    another name of a word of it (`KindCheck.synonym_in`: "mum" for "mother", by meaning).
    A thing of the request's thing is another thing ("mum's number", "mum's birthday" for
    "call mum"; "the rent increase" for "pay the rent"): it takes nothing back. An act that
    names nothing but a person ("No need to remind me.") takes only a request of that very
    verb; "No need to thank me." takes nothing where no request asked to thank. An act told
    how often (`_NO_NEED_FREQUENCY`: "twice", "again", "so often"; "once is enough") is a
    complaint about the reminding and takes nothing, unless the request says that whole
    phrase too, unit and all: "twice a day" of "Remind me to take my pills twice a day."
    names the reminder, "twice" of "No need to remind me twice about calling mum." is not
    the "twice a week" of "Remind me to call mum twice a week.". Only
    where the candidates end with the user's previous turn (`latest`), as for `_just_said`."""
    if not latest or _NO_NEED_ONCE.search(m.string):
        return []
    often = _frequencies(m.group("obj"))
    verb = _stem(m.group("verb"))
    clause = _NO_NEED_CLAUSE.search(m.group("obj"))
    said = m.group("obj")[:clause.start()] if clause is not None else m.group("obj")
    obj = " ".join(w for w in re.findall(r"[a-z][\w'-]*", said) if w not in _NO_NEED_EMPTY)
    words = _content(obj)
    for c in reversed(candidates[-ELLIPSIS_REACH:]):
        if c.intent not in _PLAN_INTENTS or not voices_may_revise(text, speaker, c.text, c.speaker):
            continue
        own, rest = _request_verb(c.text)
        if _stem(own) != verb and not (words and verb in {_stem(v) for v in _INFINITIVE.findall(rest.lower())}):
            continue
        if often - _frequencies(c.text.lower()):
            return []  # how often the reminding goes, not the request's own phrase: a complaint
        if not words:
            return [(c.position, f"retraction: no need to '{m.group('verb')}', the latest such request")]
        theirs = _content(rest)
        shared, score = _shared(obj, words, rest, theirs)
        # words of the object the request lacks, in any form ("calling" of "call")
        other = [w for w in words if w not in _verb_forms(theirs)]
        if not other and score >= 1.0:
            return [(c.position, f"retraction: no need to '{m.group('verb')}', shared " + ",".join(shared[:3]))]
        # only the head noun may be another word ("my mother" / "mum"), never a word the
        # object shares already ("the rent increase" is no other name of the rent)
        if other != [_stem(obj.rsplit(None, 1)[-1])] or kind_of is None:
            continue
        same = kind_of.synonym_in(obj, rest)
        if same is not None and _stem(same) not in shared:
            return [(c.position, f"retraction: no need to '{m.group('verb')}' '{obj}' -> '{same}', the same thing")]
    return []


def _matching_slots(new: Mapping[str, AbstractSet[str]], old: Mapping[str, AbstractSet[str]]) -> list[str]:
    """Slot types present in both; numbers only match when their units agree (or one side has none)."""
    same: list[str] = []
    for slot in new.keys() & old.keys():
        if slot == "number":
            new_units = {_unit(v) for v in new[slot]}
            old_units = {_unit(v) for v in old[slot]}
            if not (new_units & old_units) and "" not in new_units and "" not in old_units:
                continue
        same.append(slot)
    return sorted(same)


IDENTIFIER_DIGITS = 4  # a unitless number this long is an identifier (an order number), not a quantity


def _unitless_number(new: Mapping[str, AbstractSet[str]], old: Mapping[str, AbstractSet[str]]) -> bool:
    """Whether the numbers of the two sides agree only because one side's are unitless
    identifiers ("order 55812" against "9 Elm Street")."""
    new_units = {_unit(v) for v in new.get("number", ())}
    old_units = {_unit(v) for v in old.get("number", ())}
    if new_units & old_units - {""}:
        return False

    def ids_only(vals: AbstractSet[str]) -> bool:
        bare = [v for v in vals if not _unit(v)]
        return bool(bare) and all(len(re.sub(r"\D", "", v)) >= IDENTIFIER_DIGITS for v in bare)

    return ids_only(new.get("number", frozenset())) or ids_only(old.get("number", frozenset()))


# --------------------------------------------------------------------------------------------------
# The Superseder: one conversation's supersession, over the stores' public methods
# --------------------------------------------------------------------------------------------------

# Words that announce an update of something said before; with a turn close in meaning
# (and a value asserted for the same slot) they mark that turn superseded.
UPDATE_CUE = lazy_compile(
    _FROM_THEN_ON + r"|\b" + _VALUE_MOVE + r"|"
    r"\b(now|instead|from now on|from here on|going forward|(?:it )?turns out|ended up|any ?more|no longer|switch(ed)?|chang(e|ed)|moved|updated?|actually|"
    r"correction|forget|ignore|drop|scratch|never ?mind|i've decided|decided|mixed (it|that) up|"
    r"retested|not anymore|pushed (?:back |out )?to|postponed|rescheduled|(?:raise|lower|increase|reduce|bump)d? "
    r"(?:it|the|my|our))\b"
)
# A date with its month, one value of a "value then now" update (MEANING_CUE): "march 5",
# "march 5th", "the 5th of march", "5 march" (the text is lower case there)
_DATE_WORD = (rf"(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?"
              rf"|(?:the )?\d{{1,2}}(?:st|nd|rd|th)?(?: of)? (?:{_MONTHS})\b")
# The cues that may supersede by meaning alone: "now" and "actually" by themselves open
# questions and narration ("Now my phone contract ends", "Actually one more: ...") too
# often; they count only in the form of a value change ("the budget is now ...").
MEANING_CUE = lazy_compile(
    _FROM_THEN_ON + r"|\b" + _VALUE_MOVE + r"|"
    r"\b(instead|from now on|from here on|going forward|(?:it )?turns out|ended up|any ?more|no longer|switch(ed)?|chang(e|ed)|moved|updated?|"
    r"correction|forget|ignore|drop|scratch|never ?mind|i've decided|decided|mixed (it|that) up|"
    r"retested|not anymore|pushed (?:back |out )?to|postponed|rescheduled|(?:raise|lower|increase|reduce|bump)d? "
    r"(?:it|the|my|our)|(?:is|are|'s|'re) now|now (?:is|are|live|work|use|eat|prefer|take|have|at|in|on)"
    # a value then "now" ("Leo is 5 now"): the value holds from here on; an article is no
    # word of its own there ("My rent is due on the 5th now." as "... due on Friday now."),
    # nor is a date's month ("... due on March 5 now.", "... on the 5th of March now.": one
    # value, as "the 5th" is)
    r"|(?:is|are|'s|'re) (?:(?:" + _DATE_WORD + r"|(?:the |an? )?[\w$€£.,:-]+) ){1,3}now(?=[,.!;]|$)"
    r"|\d+ [a-z]+ now(?=[,.!;]|$))\b"
)
# What the speaker or a person does now, whatever the verb ("I now go to the gym on weekday
# mornings", "she now works from home on Fridays"): a routine that holds from here. It may
# supersede by meaning only a turn that shares a content word with it, the same activity
# ("go to the gym"), as well as a value of the same slot: a routine's time is the value of
# any routine's ("I now drink coffee in the evenings" is not "I take my vitamins every morning")
ROUTINE_NOW = lazy_compile(r"\b(?:i|we|he|she|they) now [a-z]+")
SUPERSEDE_MIN_COSINE = 0.3  # measured: same-topic updates median 0.46, unrelated pairs p99 0.35
SUPERSEDE_SEARCH_K = 12  # nearest earlier turns a correction may reach however far back
SUPERSEDE_PREFER_MARGIN = 0.05  # cosine a load-bearing target may trail the nearest statement by
SUPERSEDE_WINDOW = 40  # recent turns (positions) a correction may refer to, besides load-bearing ones
MAX_PIN_CANDIDATES = 64  # load-bearing earlier turns (newest first) a correction is checked against
MAX_MEANING_LOOKUPS = 16  # corrections of one batch embedded for the meaning search (the rest: rules only)
# rows before a correction's window the rules' final decision reads to find no user turn
# there (`Superseder._window_holds_all`); a log with more is left to the embedding unread
FINAL_EARLIER_ROWS = SUPERSEDE_WINDOW
INLINE_INDEX_ROWS = 64  # a batch up to this size embeds pending turns before a meaning search (larger: the
# background indexer's job; their meaning search sees the vectors already stored)
CORRECTION_PRIORITY = PRIORITY["correction"]  # what a correction that inherits a pin's place is pinned at
ELLIPSIS_REACH = 8  # user turns back an elliptical replacement ("make it X") may refer to
ECHO_SCAN_TURNS = 12  # an acknowledgement is in the reply to its source, at most this many turns after it
MIN_ECHO_VALUE_CHARS = 2  # a shared value shorter than this ("5") is no evidence of an echo
# A reply of at most this many words that shares one content word with its source is an
# acknowledgement of it ("requests it is.", "Switched to httpx."): nothing else it says
ECHO_SHORT_WORDS = 4

_SENTENCE = lazy_compile(r"(?<=[.!?])\s+")
# Words that end what they name without replacing it ("forget the allergy thing").
_RETRACTS = lazy_compile(r"\b(?:forget|ignore|drop|scratch|never ?mind|disregard)\b")
# Idioms that hold a cue word and revise nothing ("I'll never forget it", "don't forget to
# pack", "baked from scratch", "drop by", "scratch my head"): removed before the cue words
# are looked for.
_IDIOMS = lazy_compile(
    r"(?:\b(?:never|not|no)|n't)\s+(?:\w+\s+){0,2}?(?:forget|ignore)\b|\bforget-me-nots?\b|\bfrom scratch\b"
    r"|\bdrop(?:ped|ping|s)?\s+(?:by|off|in|out)\b|\bscratch(?:ed|es|ing)?\s+(?:my|his|her|our|their|the)\s+"
    r"(?:head|back|surface)\b"
    # a changed outlook ("it changed my view on helping others") and change as a cause
    # ("striving for change", "for a change") revise no value
    r"|\bchang(?:ed|es|ing)\s+(?:my|his|her|our|their|your)\s+(?:view|views|perspective|outlook|life|lives|world)\b"
    r"|\bfor\s+(?:a\s+)?change\b")
# An attachment described in brackets ("[image: a photo of a lake]"): it asserts nothing a
# correction could revise, and its words ("image", "photo") are shared by every such turn.
_ATTACHMENT = lazy_compile(r"\[(?:image|photo|picture|file|attachment|audio|video)\b[^\]]*\]", re.IGNORECASE)


def _cue_text(norm: str) -> str:
    """Normalised text with the idioms that hold a cue word but revise nothing removed."""
    return _IDIOMS.sub(" ", norm)


# --------------------------------------------------------------------------------------------------
# Whose fact: a statement's holder
# --------------------------------------------------------------------------------------------------

# A statement's holder: whose fact it states. SELF: the user's own ("I live in Berlin",
# "my phone number is ..."); a third party named by the user ("my brother moved ...", "my
# mom's number ..."): that party's word; OTHER: someone who is not the user but may be
# any other party (he/she/they, or a capitalised word opening the sentence, "Tom moved
# ...", which may as well be a thing: "Deploys moved ..."); None: nobody in particular
# ("the deadline is March 3", "actually the hotel is the Pestana"), which may be anyone's.
SELF_HOLDER = "i"
OTHER_HOLDER = "someone else"
# the holder of a clause opening with a capitalised word and a change ("Tom moved to ...",
# "Flight moved to 11am"): decided against the fact it would revise. That thing's, nobody
# in particular, when the fact writes the word in lower case ("My flight is at 9am"); the
# person's own when the fact names them mid-sentence ("I share a flat with Tom"), which
# revises only a fact of theirs; someone else otherwise
NAMED_PREFIX = "named:"
MIN_CLAUSE_WORDS = 3  # a shorter clause ("Oh", "Scratch that") names no subject of its own
# people a user speaks of as "my X": a statement with one as its subject is that person's
_PARTY_NOUNS = frozenset((
    "brother", "brothers", "sister", "sisters", "sibling", "siblings", "mom", "mum", "mother", "dad", "father",
    "parents", "wife", "husband", "partner", "son", "sons", "daughter", "daughters", "kid", "kids", "child",
    "children", "baby", "friend", "friends", "neighbour", "neighbor", "neighbours", "neighbors", "boss",
    "colleague", "colleagues", "coworker", "co-worker", "roommate", "flatmate", "cousin", "uncle", "aunt",
    "grandma", "grandpa", "grandmother", "grandfather", "grandparents", "boyfriend", "girlfriend", "fiance",
    "fiancee", "nephew", "niece", "in-laws", "teammate", "landlord", "stepson", "stepdaughter",
    "ex", "exes", "stepmom", "stepdad", "stepmother", "stepfather", "grandson", "granddaughter", "grandkids",
    "grandchildren",
))
# words English puts between "my" and the person it names ("my best friend", "my older
# sister", "my new girlfriend", "my late father"): the person is the noun after them. Read
# as the noun, "best" / "older" / "new" made the clause the user's own, and another
# person's move superseded where the user lives
_PARTY_MODIFIERS = frozenset((
    "best", "good", "close", "dear", "old", "older", "oldest", "elder", "eldest", "young", "younger", "youngest",
    "little", "big", "baby", "twin", "new", "former", "late", "future", "current", "first", "second", "third",
    "ex", "step", "half", "great",
))
# prefixes joined to the person by a hyphen ("my ex-husband", "my half-brother", "my great-aunt")
_PARTY_PREFIXES = ("ex-", "step-", "half-", "great-", "grand-")
MAX_PARTY_MODIFIERS = 2  # modifiers read before the person: "my little baby brother" is the most said
# discourse openers before a statement's subject ("Actually, ...", "Update: ...", "Oh so ...");
# any case: a statement opens capitalised ("Actually my flight ..."), a clause after a comma not
# (without IGNORECASE "Actually my flight is on Wednesday" was read as nobody's fact and revised
# "My sister's flight is on Tuesday", while "Actually, my flight ..." did not)
_OPENER = lazy_compile(r"^(?:(?:actually|oh|so|well|also|and|but|now|update|correction|sorry|ok|okay|hmm+|um+|btw|"
                     r"wait|no|yes|yeah|anyway|fyi|quick update|by the way|just so you know|heads up|"
                     # a self-correction's frame: the holder is what follows ("I meant she is 8")
                     r"i meant|i mean|"
                     # a lead-in that says a fact again or stresses it ("Remember, I live in
                     # Oslo.", "As I said, ...", "Note that ..."): the holder is what follows,
                     # else a fact said twice reads as nobody's the second time, no restatement
                     # (`_restates`), and stays current after its correction
                     r"(?:please |just )?(?:remember|note|keep in mind|bear in mind|don['\u2019]t forget)"
                     r"(?: that|(?=\s*[,:;!\u2014-]|\s+(?:i|i['\u2019]m|we|we['\u2019]re|my|our)\b))|"
                     r"(?:as|like) i(?:['\u2019]ve)? (?:said|mentioned|told you|noted|explained)"
                     r"(?: before| earlier| already)?|as (?:mentioned|noted)(?: before| earlier)?|as you know|"
                     r"for the record|for your information|(?:just )?(?:a |quick )?reminder(?=\s*[,:;!\u2014-])|just to remind you|"
                     r"(?:just )?to be clear|to reiterate)\b[,:;.!-]*\s*)+", re.IGNORECASE)
# words that may stand between a subject and its verb ("my parents just moved")
_ADVERBS = frozenset(("just", "finally", "already", "also", "recently", "now", "actually", "then", "since",
                      "has", "have", "had"))
# what follows a third party's verb when the fact is still theirs: their own thing ("his
# car"), a place they moved to ("to Munich"), a state ("is vegan", "jobs")
_THEIRS_AFTER_VERB = frozenset(("his", "her", "hers", "their", "its", "to", "in", "at", "from", "into", "back",
                                "out", "away", "home", "house", "houses", "job", "jobs", "schools", "now", "over",
                                "up", "a", "an"))
_COPULAS = frozenset(("is", "are", "was", "were", "'s", "'re", "got", "gets", "has", "have", "had", "became",
                      "becomes", "lives", "live", "works", "work", "quit", "left", "retired"))
# a named person as the subject of a change of their own state ("Tom moved to Munich")
_NAME_SUBJECT = lazy_compile(r"^([A-Z][a-z]+)(?:'s\b| (?:just |finally |recently )?(?:moved|lives|works|switched|changed|"
                           r"quit|joined|left|started|got|is now|retired|relocated|transferred))")
# a party the user names by their name too ("my son Theo has ...", "our neighbour Ana's
# dog ..."): the name is the party's, said beside it, not the verb
_PARTY_NAMED = lazy_compile(r"^(?i:my|our)\s+(?:(?i:" + "|".join(sorted(_PARTY_MODIFIERS)) + r")(?:\s+|-))*"
                          r"([A-Za-z-]+)\s+([A-Z][a-z]+)(?:'s)?\b")
_NOT_NAMES = frozenset(("the", "this", "that", "these", "those", "it", "there", "here", "what", "which", "our",
                        "my", "your", "we", "they", "he", "she", "let", "please", "make", "change", "switch",
                        "move", "from", "starting", "as", "not", "no", "on", "in", "at", "for", "after", "before"))
# the occasions a capitalised possessive may name ("Friday's meeting", "Today's call"): when
# the thing is, never whose (`_holder`: no person "Friday" holds the meeting)
_OCCASION_WORDS = frozenset((*DAY_NAMES.split("|"), "today", "tonight", "tomorrow", "yesterday"))
# a cut starts at the first space of its run, or at its mark right after the cut before (which
# took the spaces), and keeps the spaces it took: searched from each space of a long run,
# "\s*" backtracked over the rest of it, n squared (as statements._JOIN)
_CLAUSE_CUT = lazy_compile(r"(?<!\s)\s*+[,;:\u2014]\s+|[,;:\u2014]\s+|(?<!\s)\s++-\s+")
_WORD_RE = lazy_compile(r"[a-z][a-z'-]*|[^\sa-z]")
_COMMON_WORD_RE = lazy_compile(r"(?<![\w'-])[a-z][a-z'-]*")  # a word as written in lower case


def _number_forms(word: str) -> frozenset[str]:
    """`word` and its singular or plural (flight, flights; class, classes)."""
    return frozenset((word, word + "s", word + "es", word.removesuffix("s"), word.removesuffix("es")))


# auxiliaries a party's habit is negated or asserted with, and the verbs whose object is the
# party's own habit, not a thing of nobody's ("my sister eats fish", "my dad doesn't drink")
_NEGATED_AUXILIARIES = frozenset(("doesn't", "don't", "didn't", "does", "do", "did", "never", "no", "longer",
                                  "won't", "can't", "cannot", "not", "still", "usually", "always"))
_HABIT_VERBS = frozenset(("eat", "eats", "ate", "drink", "drinks", "drank", "smoke", "smokes"))


def _party_after(rest: Sequence[str], party: str) -> str | None:
    """The holder of "<party> <verb> ...": the party's own when the verb is a state or is
    followed by their thing, a preposition, a particle or a value ("moved to", "traded his
    car", "is vegan", "leave for school"); the
    user's when it acts on the user's thing ("they moved my appointment"); nobody's when
    on a thing of its own ("my boss moved the meeting")."""
    words = [w for w in rest if w not in _ADVERBS or w in _COPULAS][:3]
    if not words:
        return party
    habit = [w for w in rest if w not in _ADVERBS and w not in _NEGATED_AUXILIARIES][:1]
    if habit and habit[0] in _HABIT_VERBS:
        return party  # "my dad doesn't eat beef anymore": what he eats, his own, whatever the object
    verb, obj = words[0], words[1] if len(words) > 1 else ""
    # a preposition, a particle or a value after the verb ("leave for school", "leave at
    # 8:00", "turns 5") opens no object: what changed is still the party's own
    if verb in _COPULAS or not obj or obj in _THEIRS_AFTER_VERB or obj in _INTRANSITIVE_AFTER or not obj[:1].isalpha():
        return party
    if obj in ("my", "our", "me", "us"):
        return SELF_HOLDER
    return None


def _party_word(word: str) -> str:
    """`word` without a prefix joined by a hyphen to the person it names ("ex-husband": husband)."""
    for prefix in _PARTY_PREFIXES:
        if word.startswith(prefix) and word.removeprefix(prefix) in _PARTY_NOUNS:
            return word.removeprefix(prefix)
    return word


def _party_noun_at(words: Sequence[str]) -> int:
    """Where the person of "my [modifiers] <person>" stands in `words` (words[0] "my"): after
    up to MAX_PARTY_MODIFIERS modifiers ("my best friend", "my ex girlfriend") when a person
    follows them; at 1 otherwise ("my new phone": the user's own thing)."""
    at = found = 1
    # the last person reached: "my little baby brother" is the brother's, "my baby" the baby's
    while at < len(words) - 1 and at <= MAX_PARTY_MODIFIERS and words[at] in _PARTY_MODIFIERS:
        at += 1
        if _party_word(words[at].removesuffix("'s").removesuffix("'")) in _PARTY_NOUNS:
            found = at
    return found


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _holder(statement: str) -> str | None:
    """Whose fact one clause states (SELF_HOLDER, a third party's word, OTHER_HOLDER, or
    None: nobody in particular), from its subject."""
    text = _OPENER.sub("", statement.strip().lstrip("\"'(-* "), count=1)
    if not text:
        return None
    name = _NAME_SUBJECT.match(text)
    if name and name.group(1).lower() not in _NOT_NAMES and name.group(1).lower() not in _STOP \
            and name.group(1).lower() not in _OCCASION_WORDS:
        return NAMED_PREFIX + name.group(1).lower()  # a person, or a thing: may_revise decides
    words = _WORD_RE.findall(text.lower().replace("\u2019", "'"))
    if not words:
        return None
    first = words[0]
    if first in ("i", "i'm", "i've", "i'd", "i'll", "we", "we're", "we've", "we'd", "we'll", "me", "us"):
        return SELF_HOLDER
    if first in ("my", "our") and len(words) > 1:
        at = _party_noun_at(words)
        noun = words[at]
        # "my sister's", "my sister 's", and a plural's "my parents'" (was read as "my ...": the user's own)
        possessive = noun.endswith(("'s", "'")) or (len(words) > at + 1 and words[at + 1] == "'s")
        noun = _party_word(noun.removesuffix("'s").removesuffix("'"))
        if noun not in _PARTY_NOUNS:
            return SELF_HOLDER  # "my phone number", "our flight", "my new phone"
        named = _PARTY_NAMED.match(text)
        if not possessive and named and named.group(1).lower() == noun and \
                named.group(2).lower() not in _STOP and named.group(2).lower() not in _NOT_NAMES:
            # "my son Theo has soccer": Theo's fact, revised by what is said of Theo
            return NAMED_PREFIX + named.group(2).lower()
        return noun if possessive else _party_after(words[at + 1:], noun)
    if first in ("he", "she", "they", "he's", "she's", "they're", "his", "her", "their"):
        if first in ("his", "her", "their"):
            return OTHER_HOLDER  # "his new address is ..."
        return _party_after(words[1:], OTHER_HOLDER) if first in ("he", "she", "they") else OTHER_HOLDER
    return None


# What a clause is about: the noun phrase before its verb ("my work laptop has ...", "the
# hotel costs ...", "Anna lives ..."), where the sentence states that thing's value. Two
# statements about different things never revise each other, however much they share:
# "My cat is 5 now" is not the dog's age, "the flight costs $350" not the hotel's price,
# "Maria lives in Paris" not Anna's home (each superseded the other's fact before, by a
# shared verb and a value of the same type, or by meaning).
MAX_SUBJECT_WORDS = 3  # a noun phrase longer than this before the verb is not read as a subject
MIN_PARTICIPLE_CHARS = 4  # an -ed word longer than this is read as a verb ("moved"), not "bed", "shed"
_DETERMINERS = frozenset(("my", "our", "the", "his", "her", "their", "your"))
# verbs that state their subject's value or state ("is", "costs", "lives", "has 16 GB"):
# the subject is what the value belongs to
_STATE_VERBS = frozenset(("is", "are", "was", "were", "'s", "'re", "am", "be", "been", "being", "has", "have", "had",
                          "got", "gets", "cost", "costs", "lives", "live", "lived", "works", "work", "worked",
                          "runs", "run", "weighs", "weigh", "lasts", "last", "stays", "stay"))
# auxiliaries and adverbs between a subject and its main verb ("will be", "has just moved")
_AUXILIARIES = frozenset(("will", "would", "can", "could", "should", "must", "might", "may", "shall", "does", "do",
                          "did", "'ll", "'d", "'ve", "still", "not", "never", "always", "usually", "also", "just",
                          "finally", "already", "recently", "now", "actually", "then"))
# what follows an action verb when its subject is still what changed ("moved to Friday",
# "starts at 9"): a preposition, a particle or a value, not an object ("moved the meeting")
_INTRANSITIVE_AFTER = frozenset(("to", "at", "on", "in", "from", "until", "till", "by", "for", "into", "back", "up",
                                 "down", "over", "out", "away", "off", "again", "today", "tomorrow", "tonight"))
MIN_PRESENT_VERB_CHARS = 4  # an -s word shorter than this is no third-person verb ("is", "has" are state verbs)
# the lexical verbs of the stop list (kept out of word matching as too common or as cue
# words): a plural's verb all the same ("the dog walkers come at noon"), where the stop
# list's other words ("only", "all", "too") are none
_STOP_VERBS = frozenset(("come", "came", "go", "going", "get", "got", "take", "put", "keep", "set", "add", "use",
                         "using", "make", "made", "move", "moved", "change", "changed", "switch", "want", "need",
                         "like", "say", "said", "tell", "told", "mean", "meant", "know", "think", "guess", "let",
                         "forget", "ignore", "disregard", "undo", "scratch"))
# the endings of an -s word that is no third-person verb: "glass", "bus", "this"
_NOT_PRESENT_ENDINGS = ("ss", "us", "is", "'s")
# the forms of "be": after one, a word that is no preposition or article tells a kind
# ("is painted blue", "are green") or a value that names the thing ("is 555-0142")
_BE_FORMS = frozenset(("is", "are", "was", "were", "'s", "'re", "am", "be", "been", "being"))
_AMOUNT_SLOTS = frozenset(("money", "number"))  # an amount ("$300", "5 years") is no kind
# what opens a place, a time or another thing after "be" ("is in the garage", "is a Corolla"):
# prepositions and articles
_PLACE_OR_THING = _DETERMINERS | frozenset((
    "a", "an", "to", "at", "on", "in", "from", "until", "till", "by", "for", "into", "onto", "near", "with",
    "without", "under", "over", "inside", "outside", "behind", "between", "of", "about", "above", "below",
    "beside", "across", "through", "around", "off", "out", "away", "back", "up", "down", "here", "there"))
# words that tell a thing's state, not which thing ("my new address", "the current plan")
_NEUTRAL_MODIFIERS = frozenset(("new", "old", "current", "updated", "correct", "actual", "real", "final", "latest",
                                "previous", "original", "right", "exact", "usual", "whole", "total"))
_PHRASE_WORD = lazy_compile(r"[A-Za-z][A-Za-z'-]*|[^\sA-Za-z]+")
# what opens a verb's object ("broke a glass", "gave me a lift", "ate the fish"): an article,
# a possessive or an object pronoun, which no word of a noun phrase is followed by ("this",
# "that", "these" and "those" also open a time, "this week", or a relative clause)
_OBJECT_OPENERS = frozenset(("a", "an", "the", "my", "our", "his", "her", "their", "your", "its", "me", "him", "us",
                             "them", "it"))
# words that may stand before an article and are no verb: prepositions and subordinators
# ("the hotel near the station", "my flight after the meeting"), closed classes
_NOT_VERBS = _PLACE_OR_THING | frozenset((
    "past", "during", "against", "along", "among", "amongst", "toward", "towards", "within", "beyond", "via", "per",
    "opposite", "despite", "except", "unlike", "upon", "beneath", "amid", "plus", "minus", "versus", "than",
    "like", "unless", "though", "although", "whereas", "while", "because", "since", "once", "whether"))


@dataclass(frozen=True)
class Subject:
    """What a clause states a value of: its head noun ("laptop") and the words before it
    that pick which one ("work", a possessor "anna's" as "anna"), as stems. `event`: the
    thing acts on an object ("my cat knocked a glass over"), so the clause tells an event
    of it and states no value of it."""

    head: str
    modifiers: frozenset[str]
    event: bool = False
    # the modifiers that are possessors ("anna's", "theo's practice"): whose thing it is
    possessors: frozenset[str] = frozenset()
    # it is said to be of a kind, or to be a value that names it ("is painted blue", "are
    # green", "is 555-0142"), not in a place, at a time, of an amount or another thing
    # ("is in the garage", "cost $300", "is $300", "is a Corolla")
    quality: bool = False
    # that kind or value is the whole thing's, which a longer name of it may restate: a
    # treatment told by a participle ("is painted blue", "is carpeted"), which covers its
    # parts ("the kitchen walls"), or a typed value that names it ("my phone is 555-0142" /
    # "the phone number"); a plain adjective ("my car is red") is the thing's own kind, not
    # its parts' ("the car seat is black")
    treated: bool = False


def _subject(clause: str) -> Subject | None:
    """The thing `clause` states a value of, or None when it names none: its subject is
    I/we/he/it..., it is an order or a fragment, or it identifies ("Nguyen is my dentist
    now": either side may be the thing). A thing that acts on an object ("my boss moved
    the meeting": the meeting's value, not the boss's) is returned as an `event`."""
    words = _PHRASE_WORD.findall(clause.replace("\u2019", "'"))
    low = [w.lower() for w in words]
    i = 1 if low and low[0] in _DETERMINERS else 0
    phrase: list[str] = []
    owners: list[str] = []
    verb = -1
    for j in range(i, min(len(low), i + MAX_SUBJECT_WORDS + 1)):
        w = low[j]
        if phrase and (w in _STATE_VERBS or w in _AUXILIARIES or _participle(w) or _moves(w, low[j + 1:j + 2])
                       or _present_verb(w, low[j + 1:j + 1 + VERB_LOOKAHEAD_WORDS], low[j - 1])
                       or _verb_before_object(w, low[j + 1:j + 2], phrase)):
            verb = j
            break
        owner = w[:-2] if w.endswith("'s") else w[:-1] if w.endswith("'") else ""
        if owner and owner not in _STOP and owner not in _NOT_NAMES:
            nxt = low[j + 1] if j + 1 < len(low) else ""
            if w.endswith("'") or (nxt[:1].isalpha() and nxt not in _STOP and nxt not in _AUXILIARIES
                                   and nxt not in _STATE_VERBS and not _participle(nxt)):
                # a possessor: "my sister's flight", "Anna's flight", a plural's "my kids' school"
                phrase.append(owner)
                owners.append(owner)
                continue
            phrase.append(owner)  # "my dog's 3 now", "Budget's now $800": the verb is "'s"
            verb = j
            break
        if w in _NEUTRAL_MODIFIERS:
            continue  # "my new number": the number
        if phrase and w == "for":
            # a purpose after the head ("my budget for the trip is ..."): the head is the
            # subject, the verb after the phrase (read as no subject before, "Flights are now
            # $450" revised the budget). Only "for": a place or a time after the head ("the
            # wifi password at the cabin", "the team meeting on Monday") names which one, and
            # read as a subject without it, it no longer fit "the cabin wifi" or "Friday's meeting"
            verb = next((v for v in range(j + 1, min(len(low), j + MAX_SLOT_ADJUNCT_WORDS + 2))
                         if low[v] in _STATE_VERBS or low[v] in _AUXILIARIES), -1)
            break
        if not w[:1].isalpha() or w in _STOP or w in _NOT_NAMES or len(phrase) == MAX_SUBJECT_WORDS:
            return None
        phrase.append(w)
    if verb < 0 or not phrase:
        return None
    k = verb
    if low[verb].endswith("'s"):
        main = "'s"  # "my dog's 3 now": the verb is in the subject's word
    else:
        while k < len(low) and low[k] in _AUXILIARIES:
            k += 1
        main = low[k] if k < len(low) else ""
        if main in ("has", "have", "had", "'ve") and k + 1 < len(low) and low[k + 1].endswith(("ed", "en")):
            k, main = k + 1, low[k + 1]  # "has moved": the perfect's verb
    after = next((w for w in low[k + 1:] if w not in _AUXILIARIES), "")
    if main in _STATE_VERBS and after in _DETERMINERS:
        return None  # "Nguyen is my dentist now": an identity, either side the thing
    head, *rest = reversed([_noun_stem(w) for w in phrase])
    # a routine with its activity ("the nurses change shifts at 7pm") tells when the subject
    # does it, as "the pool opens at 7" does: no particular thing's value changes
    if main not in _STATE_VERBS and after and after[:1].isalpha() and after not in _INTRANSITIVE_AFTER \
            and not _present_verb(main, low[k + 1:k + 1 + VERB_LOOKAHEAD_WORDS], low[k - 1]):
        return Subject(head, frozenset(rest), event=True)  # acts on an object: the object's value changes
    # a kind or a value that names it: after a form of "be", no preposition or article, no amount
    quality = main in _BE_FORMS and bool(after) and after not in _PLACE_OR_THING and         not _slots(" ".join(low[k + 1:])).keys() & _AMOUNT_SLOTS
    return Subject(head, frozenset(rest), possessors=frozenset(_noun_stem(w) for w in owners), quality=quality,
                   treated=quality and (_participle(after) or bool(_slots(" ".join(low[k + 1:])))))


# verbs of an amount's move with "up" or "down" after them ("prices went up", "rent goes
# down"), irregular, no -ed to read them by: the noun before them is the subject
_MOVE_VERBS = frozenset(("went", "go", "goes", "gone", "rose", "rise", "rises", "fell", "fall", "falls", "came",
                         "come", "comes"))


def _moves(word: str, following: Sequence[str]) -> bool:
    """Whether `word` is an amount's verb of moving, "up" or "down" after it."""
    return word in _MOVE_VERBS and bool(following) and following[0] in ("up", "down")


def _noun_stem(word: str) -> str:
    """A noun's stem, the same in the singular and the plural (`_stem`: "class" and
    "classes", "nurse" and "nurses" are one thing each, once a plural subject is read)."""
    return _stem(word)


def _participle(word: str) -> bool:
    """A verb's -ed form ("moved", "changed"), not a short noun ending so ("bed", "shed")."""
    return word.endswith("ed") and len(word) > MIN_PARTICIPLE_CHARS


# A frequency, how often a routine happens ("twice a day", "every 15 minutes", "3 times a
# week", "every other Monday"): after a present-tense verb it tells when, as a preposition
# and a time do ("my dog eats twice a day at 8am" is the dog's routine, not the dog acting
# on an object "twice")
_FREQUENCY = lazy_compile(
    rf"^(?:once|twice|(?:\d+|{_NUMBER_WORDS}) times|every(?: other)?|each)"
    rf" (?:a |an |per |other |\d+ |{_NUMBER_WORDS} )?(?:minute|hour|day|night|week|month|year|morning|evening"
    rf"|afternoon|weekday|weekend|{_DAY})s?\b")
VERB_LOOKAHEAD_WORDS = 4  # words after a candidate verb read for its value ("3 times a week")


def _present_verb(word: str, following: Sequence[str], before: str) -> bool:
    """A present-tense verb after a noun, stating when or how much ("the pool opens at 7",
    "the class starts on Monday", "the plan costs $20"): an -s word whose next words, a
    preposition and its object or the value alone, hold a typed value; or, a plural's verb
    having no -s, a word of any ending after a plural noun `before` whose next words, a
    preposition and its object, hold one ("the gym classes start at 6", "my parents arrive
    on Friday", a verb of the stop list too: "the dog walkers come at noon"; not "the
    library supports Python 3.8", where the -s word is the verb, nor a function word, "the
    classes only on Monday"). A
    plural noun before a place ("the swim lessons at the Y are ...") is read as a noun, as
    is a value ("the classes Monday at 9"). A plural's verb may take a bare object, an
    activity, before the preposition ("the nurses change shifts at 7pm", `_bare_object`).
    A frequency after either verb tells when too ("my dog eats twice a day", `_FREQUENCY`).
    `following`: the next VERB_LOOKAHEAD_WORDS words.
    """
    often = bool(_FREQUENCY.match(" ".join(following)))
    if word.endswith("s"):
        if word.endswith(_NOT_PRESENT_ENDINGS) or len(word) < MIN_PRESENT_VERB_CHARS:
            return False
        if often:
            return True
        value = following[:2]
        if not value or not (value[0] in _INTRANSITIVE_AFTER or not value[0][:1].isalpha()):
            return False
    else:
        if not (_plural_noun(before) and word.isalpha() and (word not in _STOP or word in _STOP_VERBS)
                and word not in _NOT_VERBS and not _slots(word)):
            return False
        if often:
            return True
        value = following[1:3] if following and _bare_object(following[0]) else following[:2]
        if not value or value[0] not in _INTRANSITIVE_AFTER:
            return False
    return bool(_slots(" ".join(value)))


def _bare_object(word: str) -> bool:
    """A noun with no article or possessive, as a verb's object names an activity rather
    than a thing ("change shifts", "walk dogs"): a word of the open classes, no verb of
    state or auxiliary, no value ("monday")."""
    return word.isalpha() and word not in _STOP and word not in _NOT_VERBS and word not in _AUXILIARIES \
        and word not in _STATE_VERBS and not _slots(word)


def _plural_noun(word: str) -> bool:
    """A word that may be a plural noun ("classes", "parents"): an -s word, not "-ss",
    "-us", "-is" or a possessive ("glass", "bus", "this", "kids'"), of MIN_PRESENT_VERB_CHARS
    or more ("gas", "yes": no plural), no adverb or function word ("always", "perhaps" is
    no noun)."""
    return word.endswith("s") and not word.endswith(_NOT_PRESENT_ENDINGS) and len(word) >= MIN_PRESENT_VERB_CHARS \
        and word.isalpha() and word not in _STOP and word not in _AUXILIARIES and word not in _NOT_VERBS


def _verb_before_object(word: str, following: Sequence[str], phrase: Sequence[str]) -> bool:
    """A verb of any form before its object ("my cat broke a glass", "my boss gave me a
    lift"; an irregular past has no ending to read it by): a word after the noun phrase
    `phrase` that an article, a possessive or an object pronoun follows. Not a preposition
    or a subordinator ("the hotel near the station"), a possessor ("my sister's") or a
    value ("the meeting Friday the 13th"); nor after a pronoun's contraction with its verb
    ("you're making a difference", "we'll migrate it"), which names no thing."""
    if not following or following[0] not in _OBJECT_OPENERS or any("'" in w for w in phrase):
        return False
    return word.isalpha() and word not in _STOP and word not in _NOT_VERBS and not _slots(word)


def _subjects_fit(new: Subject | None, old: Subject | None) -> bool:
    """Whether two statements may be about the same thing: either names none; the same
    head, unless both pick one by words that differ ("work laptop" / "home laptop",
    "Anna's flight" / "Maria's flight"); one's head is the other's possessor ("Theo's
    practice" / "Theo"); the new one's head picks out the old one, a shorter name of it
    ("Order's been changed" / "my order number"), unless both tell a kind and the new
    one's is a plain adjective, the whole's own ("my car is blue now" / "the car seat is
    black"); or the old one's head picks out the new
    one ("the kitchen walls" / "the kitchen"), both tell a kind ("are green" / "is
    painted blue") and the old one's is a treatment of the whole or a value that names it
    (`Subject.treated`: "the phone number is wrong" / "my phone is 555-0142"): a longer
    name is a thing of its own ("the car seat" is no car), whose place, time,
    amount, identity or own kind ("is in the garage", "cost $300", "is black" after "my
    car is red") is never the other's. A thing's event ("my cat knocked a glass over") is no value of
    it: the thing's state ("my cat is 5") never revises it; the event's object may change,
    so an event revises, and is revised by, what is said of anything else."""
    if new is None or old is None or new.event:
        return True
    if old.event:
        return not _same_thing(new, old)
    if new.head == old.head:
        return _same_thing(new, old)
    if new.head in old.possessors or old.head in new.possessors:
        return True
    if new.head in old.modifiers:
        # the fact's thing by a shorter name ("Order's been changed" for "my order number"),
        # but a plain adjective of the whole is its own kind, none of a part's ("my car is
        # blue now" is not "the car seat is black"), as the other way round
        return not (new.quality and not new.treated and old.quality)
    return old.head in new.modifiers and new.quality and old.treated


def _same_thing(new: Subject, old: Subject) -> bool:
    """The same head, picked by the same words where both pick one."""
    return new.head == old.head and (not (new.modifiers and old.modifiers) or bool(new.modifiers & old.modifiers))


# A correction that names the slot it gives a value of ("the wifi password at the cabin is
# now cedar77", "switch my seat preference to a window seat"): that slot's head noun
# ("password", "preference") is what a target found by one shared word must mention, or its
# verb ("I prefer aisle seats."), or a modifier of it ("seat") in the speaker's own choice or
# habit ("I like aisle seats on flights."). A word the two share elsewhere in the correction,
# the slot's place or owner ("cabin"), or a modifier as another thing's state, is another
# thing's: "The cabin was freezing last night." and "The seat on the bus was broken today."
# state nothing of a password or a preference (`_slot_mentioned`). The verbs that give a
# named slot its new value with "to".
_SLOT_TO_VERBS = frozenset(("switch", "change", "set", "update", "move", "make", "bump", "raise", "lower", "reset"))
# prepositions between a slot's noun and its verb ("the wifi password at the cabin is ...")
_SLOT_PREPOSITIONS = frozenset(("at", "in", "on", "for", "of", "with", "from", "to"))
MAX_SLOT_ADJUNCT_WORDS = 4  # words of such a phrase before the verb ("at the old cabin" is 4)


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _named_slot(text: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
    """The stem of the head noun of the slot `text` gives a value of by name, with the
    stems of the words before it that pick it ("wifi", a possessor "cabin") and of those
    of them in its own noun phrase, no possessor ("wifi", "seat" of "my seat preference"), or None
    where it names none: a noun phrase opened by "the / my / our ..." that is the subject
    of a verb of state ("my seat preference is ...", "the cabin's wifi password is now
    ...", "the wifi password at the cabin is ...": a place or owner after a preposition is
    no head) or the object of "switch / change / set ... to" ("switch my seat preference
    to a window seat"). "I moved to the new flat", "it's 4 nights", "make it Wednesday"
    name none."""
    low = [w.lower() for w in _PHRASE_WORD.findall(text.replace("\u2019", "'"))]
    for i, w in enumerate(low):
        if w not in _DETERMINERS:
            continue
        phrase: list[str] = []
        owners: list[str] = []
        verb_in_word = False
        j = i + 1
        while j < len(low) and len(phrase) <= MAX_SUBJECT_WORDS:
            t = low[j]
            if t in _NEUTRAL_MODIFIERS:
                j += 1
                continue
            if t.endswith("'s") and j + 1 < len(low):
                nxt = low[j + 1]
                if nxt[:1].isalpha() and nxt not in _STOP and nxt not in _AUXILIARIES and nxt not in _STATE_VERBS:
                    owners.append(t[:-2])  # a possessor ("the cabin's wifi password"): the head comes after it
                    j += 1
                    continue
                phrase.append(t[:-2])  # "my dog's 3 now": the verb is in the word
                verb_in_word = True
                break
            if not t[:1].isalpha() or t in _STOP or t in _STATE_VERBS or t in _AUXILIARIES or t in _NOT_NAMES:
                break
            phrase.append(t)
            j += 1
        if not phrase or len(phrase) > MAX_SUBJECT_WORDS:
            continue
        rest = low[j:]
        slot = (_noun_stem(phrase[-1]), frozenset(_noun_stem(w) for w in (*owners, *phrase[:-1])),
                frozenset(_noun_stem(w) for w in phrase[:-1]))
        if verb_in_word:
            return slot
        if rest and rest[0] == "to" and i > 0 and low[i - 1] in _SLOT_TO_VERBS:
            return slot
        if rest and rest[0] in _SLOT_PREPOSITIONS and rest[0] != "to":
            # "the wifi password at the cabin is": the verb after a short phrase of place or owner
            rest = next((rest[k:] for k in range(1, min(len(rest), MAX_SLOT_ADJUNCT_WORDS + 2))
                         if rest[k] in _STATE_VERBS or rest[k] in _AUXILIARIES), [])
        if rest and (rest[0] in _STATE_VERBS or rest[0] in _AUXILIARIES):
            return slot
    return None


def _slot_mentioned(text: str, target: str) -> bool:
    """Whether `target` may hold the slot `text` gives a value of by name (`_named_slot`):
    it mentions that slot's head noun or names it by its verb ("I prefer aisle seats." for
    "my seat preference"), or `text` names none; or it holds a modifier of the slot in the
    speaker's own choice or habit (`_OWN_CHOICE`: "I like aisle seats on flights.") or as the
    speaker's own subject in the present tense (`_own_modifier_subject`: "My seat is an aisle
    seat."); or it tells a treatment of
    the whole the slot is part of ("The kitchen is painted blue." / "Actually the kitchen
    walls are green now.": `Subject.treated`, as `_subjects_fit` reads the pair), which
    "The cabin was freezing last night." is not."""
    slot = _named_slot(text)
    if slot is None:
        return True
    head, picks, modifiers = slot
    words = _content(target)
    if head in words or any(_names_by_verb(head, w) for w in words):
        return True
    if modifiers & words.keys() and _OWN_CHOICE.search(normalize(target).replace("\u2019", "'")):
        # the slot's own modifier in the speaker's own choice or habit ("I like aisle seats
        # on flights." / "Change my seat preference to window please."), no other thing's
        # state ("The seat on the bus was broken today.") nor a past event ("I cooked steak")
        return True
    if _own_modifier_subject(target, modifiers):
        return True  # "My seat is an aisle seat." / "Switch my seat preference to window."
    return any(sb is not None and sb.treated and sb.head in picks for _h, sb, _t in _clauses(target))


# The endings that make a noun of a verb ("preference" of "prefer", "notification" of
# "notify", "delivery" of "deliver", "payment" of "pay"), longest first: a target naming a
# slot by its verb ("I prefer aisle seats." for "my seat preference") mentions it
# (`_names_by_verb`)
_NOUN_OF_VERB_ENDINGS = ("ication", "ation", "ence", "ance", "ment", "ery", "ion", "y")
MIN_VERB_ROOT_CHARS = 4  # a shorter root matches too many words ("pay" of "payment" is let go)


def _names_by_verb(head: str, word: str) -> bool:
    """Whether the stem `word` is the verb the slot's head noun `head` is made of
    ("prefer" / "preference", "notify" / "notification", "deliver" / "delivery")."""
    for end in _NOUN_OF_VERB_ENDINGS:
        root = head.removesuffix(end)
        if root != head and len(root) >= MIN_VERB_ROOT_CHARS:
            # "notif" of "notification" and "notify"; "prefer" and "preferr" of "preferring"
            return word.startswith(root) and len(word) - len(root) <= 2 and word != head
    return False


# The speaker's own choice or habit, opening a sentence ("I prefer ...", "I'd like ...",
# "We always book ...", "I usually take ..."): a target holding the slot's modifier so
# holds the slot ("I like aisle seats on flights." is a seat preference)
_OWN_CHOICE = lazy_compile(
    r"(?:^|[.!?]\s+)(?:(?:actually|also|so|and|oh|well|yes|yeah),?\s+)*(?:i|we)(?:'d| would)?\s+"
    r"(?:(?:always|usually|normally|typically|generally|often|mostly|really|also|still|just|rather)\s+)*"
    r"(?:prefer|like|love|want|need|get|receive|take|order|use|book|choose|pick|eat|drink|have|sit|keep|"
    r"favou?r|enjoy|wear|go for|go with)s?\b", re.IGNORECASE)

# The slot's modifier as the subject the speaker holds, with a verb in the present tense:
# "my/our <modifier>" ("My seat is an aisle seat.", "My alerts go to SMS.", "My seat on
# flights is always the aisle.": a place after it only as a bare plural, a habit, never "on
# the bus"), "I'm on the <modifier>" ("I'm on the monthly plan.") or a bare plural
# ("Notifications should go to my phone."). A past tense ("My seat on the train was
# dirty."), a state or a place after the verb ("My seat is broken.", "Our room is on the
# third floor."), "I'm on the bus" (a kind word before the noun is asked: "monthly plan")
# or another noun after the modifier ("My internet provider is Comcast." for "my internet
# plan") is no statement of the slot (`_own_modifier_subject`).
_PRESENT_AFTER_SUBJECT = (r"(?:\s+(?:always|usually|normally|typically|generally|often|mostly|still|now|"
                          r"should|must|will|can)\b)*\s+(?:is|are|come|comes|go|goes|arrives?|gets?|be)\b"
                          # a state or a place, no value: "is broken", "is getting cold", "is on the third floor"
                          r"(?!\s+(?:[a-z]+ing|[a-z]+ed|broken|on|in|at|under|near|behind)\b)")
_OWN_SUBJECT = lazy_compile(
    r"(?:^|[.!?]\s+)(?:(?:actually|also|so|and|oh|well|yes|yeah),?\s+)*(?:"
    r"(?:my|our)\s+(?:(?:current|usual|regular|default)\s+)?(?P<own>[a-z]+)"
    r"(?:\s+(?:on|at|for|in|with)\s+[a-z]+s)?" + _PRESENT_AFTER_SUBJECT + r"|"
    r"(?:i'm|i am|we're|we are)\s+on\s+(?:the|a|an|my|our)\s+(?:[a-z-]+\s+){1,2}(?P<on>[a-z]+)\s*(?:[.!?,;]|$)|"
    r"(?P<bare>[a-z]+s)" + _PRESENT_AFTER_SUBJECT + r")", re.IGNORECASE)


def _own_modifier_subject(target: str, modifiers: frozenset[str]) -> bool:
    """Whether `target` states the slot's modifier (a stem of `modifiers`) as the speaker's
    own subject in the present tense (`_OWN_SUBJECT`): "My diet is keto." for "my diet
    preference", never "My diet was bad last week." nor "The seat on the bus is broken."."""
    if not modifiers:
        return False
    for m in _OWN_SUBJECT.finditer(normalize(target).replace("\u2019", "'")):
        word = m.group("own") or m.group("on") or m.group("bare")
        if word and _noun_stem(word.lower()) in modifiers:
            return True
    return False


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _clauses(text: str) -> frozenset[tuple[str | None, Subject | None, str | None]]:
    """The holder, the subject and the thing of nobody in particular (`_nobodys_thing`)
    of each of `text`'s clauses: its statements, and the parts of each a comma joins
    ("Priya left last week, the new contact is Tom Weber" is Priya's and nobody's, and
    about a contact); a clause of fewer than MIN_CLAUSE_WORDS words after its opener names
    nobody and nothing, and one that only names the value being replaced (", not a
    Toyota", ", not to Berlin": `_OLD_VALUE_CLAUSE`) is part of the clause before it. A
    title's period ends no statement ("Dr. Park")."""
    plain = _untitled(text)
    out = set()
    for a, e in statement_spans(plain):
        for clause in _CLAUSE_CUT.split(plain[a:e]):
            said = _OPENER.sub("", clause.strip().lstrip("\"'(-* "), count=1)
            if len(_OPENER.sub("", clause.strip(), count=1).split()) >= MIN_CLAUSE_WORDS \
                    and not _OLD_VALUE_CLAUSE.match(said):
                subject = _subject(said) or _changed_object(said)
                holder = _holder(clause)
                out.add((holder, subject, _nobodys_thing(said, subject) if holder is None else None))
    return frozenset(out) or frozenset(((None, None, None),))


# The user changing a thing of theirs to a new value ("I changed my personal email to
# ...", "we switched our home internet to ..."): the clause is about that object, which picks
# its target as a subject would (`_subjects_fit`). Read as the user's clause about nothing,
# "I changed my personal email to kim@proton.me." revised "My work email is kim@acme.com.",
# and "I changed my email signature to ..." revised "My email is ..."
_CHANGED_OBJECT = lazy_compile(r"^(?:i|we)(?:'ve| have)?(?: just| finally| already| now)? "
                             r"(?:changed|switched|updated|moved|set|reset|made|changing|switching|updating) "
                             r"(?:my|our|the) ((?:[a-z][\w'-]* ){0,2}[a-z][\w'-]*) to\b", re.IGNORECASE)


def _changed_object(clause: str) -> Subject | None:
    """The thing the user changes to a new value in `clause` (`_CHANGED_OBJECT`), as a
    subject: its head noun and the words that pick it ("personal" of "my personal email"),
    a word of state ("new", "current") no pick; None where the clause changes none or the
    phrase holds a function word ("my one-on-one with Priya": a preposition, no noun
    phrase read here)."""
    m = _CHANGED_OBJECT.match(clause.replace("\u2019", "'"))
    if not m:
        return None
    words = m.group(1).lower().split()
    if any(w in _STOP or w in _NOT_NAMES for w in words):
        return None
    picks = [w for w in words[:-1] if w not in _NEUTRAL_MODIFIERS]
    if words[-1] in _NAMING_HEADS and picks and picks[-1] in _CHANNELS:
        # "my email address", "my cell number": the channel itself, its word the head
        words, picks = picks, picks[:-1]
    if words[-1] in _CHANNELS and not picks:
        # a channel unpicked ("my email address", "my mobile number"): any statement of it,
        # however named ("My email is ...", "My cell is ...", "My phone number is ..."), is
        # its target, as before the object was read; a picked one ("my personal email") or
        # another thing ("my email signature") is compared by subject
        return None
    return Subject(_noun_stem(words[-1]), frozenset(_noun_stem(w) for w in picks))


# the ways the user is reached, named by several words ("cell", "mobile", "phone number"),
# and the nouns that name a channel's identifier after it ("email address", "cell number")
_CHANNELS = frozenset(("email", "e-mail", "mail", "phone", "cell", "mobile", "cellphone", "telephone", "landline"))
_NAMING_HEADS = frozenset(("address", "account", "number", "id", "handle"))


# A clause that only names the value being replaced ("..., not a Toyota", "..., not to
# Berlin", "instead of Lisbon"): no statement of its own. Read alone it named nobody and
# nothing, so it might revise anyone's fact ("My brother moved to Munich, not to Berlin."
# revised "I live in Berlin."; "the rental car is a Honda, not a Toyota" "I drive a Toyota").
_OLD_VALUE_CLAUSE = lazy_compile(r"^(?i:not|instead of|rather than|in place of)\b")
# the slot of where someone or something is: a place of the user's state ("I work at Acme in
# Berlin", "I live in Porto") is the user's own, never the place of a thing the statement
# does not mention ("the meeting is in Munich"; `may_revise`)
_PLACE_SLOT = "place"
# A plan told by the user, what they are doing or will do ("we're going to Lisbon in May",
# "I'm flying out on the 12th", "I'll be in Rome", "we fly to Lisbon"): an event, told by
# its verb, that a named event ("the trip", "the flight") may be (`_thing_fits`); "I live
# in Porto", "I moved to Lisbon", "I work at Acme", "I drive a Toyota" tell a state
_PLAN_TENSE = lazy_compile(r"\b(?:i|we)(?:'m| am|'re| are)(?: \w+ly| also| still| now)? \w{2,}ing\b"
                         r"|\b(?:i|we)(?:'ll| will| shall)\b|\bgoing to\b"
                         r"|\b(?:i|we)(?: \w+ly)? (?:fly|go|travel|head|leave|drive|sail|return) "
                         r"(?:to|from|for|out|back|home|into)\b")
# what opens a noun phrase naming a thing of nobody in particular ("the meeting", "this trip")
_NOBODYS = frozenset(("the", "this", "that"))
# after an -s verb, what tells a place or a route ("the flight leaves from Porto", "the
# connecting flight goes through Seattle")
_ROUTE_AFTER = _INTRANSITIVE_AFTER | frozenset(("through", "via", "past", "near"))


def _nobodys_thing(clause: str, subject: Subject | None) -> str | None:
    """The head noun (its stem) of the thing of nobody in particular whose value `clause`
    states ("the meeting is in Munich": "meet"; "the flight leaves from Porto", "the
    connecting flight goes through Seattle": "flight"; "the rental car is a Honda":
    "car"), or None: it opens with no "the / this / that", the thing acts on an object (an
    event), or the clause identifies ("the hotel is the Ritz": either side may be the
    thing, as `_subject` reads it). `subject`: `_subject(clause)`; where that reads none,
    the noun phrase before a verb of state, an auxiliary, a participle, or an -s verb
    before a preposition ("leaves from", "goes through")."""
    low = [w.lower() for w in _PHRASE_WORD.findall(clause.replace("\u2019", "'"))]
    if not low or low[0] not in _NOBODYS:
        return None
    if subject is not None:
        return None if subject.event else subject.head
    for j in range(1, min(len(low), MAX_SUBJECT_WORDS + 2)):
        w = low[j]
        nxt = low[j + 1] if j + 1 < len(low) else ""
        verb = w in _STATE_VERBS or w in _AUXILIARIES or _participle(w) or (
            w.endswith("s") and not w.endswith(_NOT_PRESENT_ENDINGS) and len(w) >= MIN_PRESENT_VERB_CHARS
            and nxt in _ROUTE_AFTER)
        if verb:
            if j == 1 or (w in _BE_FORMS and nxt in _DETERMINERS):
                return None  # no noun before it, or an identity ("the hotel is the Ritz")
            return _noun_stem(low[j - 1])
        if not w[:1].isalpha() or w in _STOP or w in _NOT_NAMES:
            return None
    return None


def _holder_fits(new: str | None, old: str | None) -> bool:
    """Whether a statement held by `new` may revise one held by `old`: someone else's
    change never revises the user's own fact, nor another person's; a statement about
    nobody in particular ("it's Dr. Park now") may revise anyone's; a third party named by
    the user revises only that party's (or a he/she/they statement that may be about them),
    and so does a person the old statement names (`NAMED_PREFIX`)."""
    if new is None:
        return True
    if new == SELF_HOLDER:
        return old in (None, SELF_HOLDER)
    if new == OTHER_HOLDER:
        return old != SELF_HOLDER
    # the same party in the singular or the plural ("my kid's school" / "my kids' school")
    return old == OTHER_HOLDER or (old is not None and not old.startswith(NAMED_PREFIX)
                                   and not new.startswith(NAMED_PREFIX) and old in _number_forms(new))


def may_revise(new: str, old: str) -> bool:
    """Whether some clause of `new` may revise some clause of `old`: by whose fact each
    is (`_holder_fits`) and by what it is about (`_subjects_fit`), both in the same pair."""
    # the words `old` writes in lower case, singular and plural: the things it names ("my
    # flights"); and the words it capitalises mid-sentence: the people it names ("a flat
    # with Tom"), whose own change revises only a fact of theirs, never the user's
    things = frozenset(f for w in _COMMON_WORD_RE.findall(old) for f in _number_forms(w))
    names = frozenset(m.group(0).lower().removesuffix("'s") for m in _ENTITY.finditer(_untitled(old)))

    def resolved(holder: str | None, *, revising: bool) -> str | None:
        if holder is None or not holder.startswith(NAMED_PREFIX):
            return holder
        word = holder[len(NAMED_PREFIX):]
        if revising and not things.isdisjoint(_number_forms(word)):
            return None
        return holder if revising and word in names else OTHER_HOLDER

    # where `new` names the value it replaces ("..., not Berlin") or the two share a place
    # ("the meeting is in Munich" / "I work at Acme in Berlin": where a thing is, not where
    # the user is), and `old` tells the user's state rather than a plan: the nouns `old`
    # mentions, as stems ("I'm meeting the client": "meet"), one of which a thing `new`
    # states a value of must be (`_thing_fits`); None: any thing may revise it, as before
    # (an amount or a time: "The budget is now $3,000." / "We can spend at most $2,000.")
    narrowed = bool(_old_values(new)) or _PLACE_SLOT in _matching_slots(_slots(new), _slots(old))
    mentions = None if not narrowed or _PLAN_TENSE.search(old.lower()) else \
        frozenset(_noun_stem(w) for w in _COMMON_WORD_RE.findall(old.lower()))
    return any(_holder_fits(resolved(a, revising=True), resolved(b, revising=False)) and _subjects_fit(sa, sb)
               and _thing_fits(ta, b, sb, mentions)
               for a, sa, ta in _clauses(new) for b, sb, _tb in _clauses(old))


def _thing_fits(thing: str | None, old_holder: str | None, old_subject: Subject | None,
                mentions: AbstractSet[str] | None) -> bool:
    """Whether a clause that states a value of a thing of nobody in particular (`thing`:
    "the meeting is in Munich", "the flight leaves from Porto") and names the value it
    replaces ("..., not Berlin") may revise a clause of the user's own that names no thing
    and tells the user's state ("I work at Acme in Berlin", "I moved to Lisbon"): only
    where that statement mentions the thing (`mentions`, its nouns' stems). Naming the old
    value is the strongest evidence a correction gives (`find_superseded` scores it 3),
    on the reading that the value was the thing's; held by the user's state, with the
    thing not mentioned, the value is the user's own, and the thing (a meeting, a flight,
    a rental car) is another: "Actually the meeting is in Munich, not Berlin." corrects the
    meeting, the user still works in Berlin. The same holds, without the old value named,
    where the value the two share by kind is a place ("Actually the meeting is in
    Munich." after "I work at Siemens in Berlin."): a thing's place is not where the user
    lives or works. A plan the user tells (`mentions` None: "We're going to Lisbon in
    May", "We fly to Lisbon", `_PLAN_TENSE`) is such a thing told by its verb, which "the trip is to Porto, not Lisbon" revises. Without an old value named, a
    shared value of a kind is read as before: "The budget is now $3,000." revises "We can
    spend at most $2,000 on the trip." (an amount, no place)."""
    return thing is None or old_holder != SELF_HOLDER or old_subject is not None or mentions is None \
        or thing in mentions


_ENTITY = lazy_compile(r"(?<!^)(?<![.!?] )\b[A-Z][\w'-]+")
# A title's period ends no sentence: "with Dr. Nguyen now" names Nguyen mid-sentence.
_TITLES = ("Dr", "Mr", "Mrs", "Ms", "Mx", "Prof", "St", "Jr", "Sr", "Capt", "Sgt", "Rev")
_TITLE_PERIOD = lazy_compile(rf"\b({'|'.join(_TITLES)})\.(?= [A-Z])")
_TITLE_WORDS = frozenset(t.lower() for t in _TITLES)  # a title is part of a name, not one


def _untitled(text: str) -> str:
    return _TITLE_PERIOD.sub(r"\1", text)


# --------------------------------------------------------------------------------------------------
# Whose voice: the speaker a message names
# --------------------------------------------------------------------------------------------------


def _voice(speaker: str | None) -> str | None:
    """A speaker's name as compared: "Alice", "alice " and "ALICE" are one person; a name
    of only spaces is none."""
    return (speaker.strip().casefold() or None) if speaker else None


def _other_speakers(a: str | None, b: str | None) -> bool:
    """Whether two turns are known to be said by two different people: both messages name
    their speaker (a group chat's `name`), and the names differ. A turn whose message names
    nobody may be anyone's, as a chat of one user is, where a client that names the speaker
    only on some messages (or began to midway) still speaks for the same user."""
    va, vb = _voice(a), _voice(b)
    return va is not None and vb is not None and va != vb


@scoped_cache(TEXT_MEMO_MAX_ENTRIES)
def _not_first_person(text: str) -> str:
    """`text`'s clauses (as `_clauses` reads them) that are not the speaker's own (an "I",
    "we" or "my" clause: SELF_HOLDER), joined: "" when every clause is; `text` itself when
    none is long enough to name a holder ("Make it 8pm."), which is then nobody's."""
    plain = _untitled(text)
    clauses = [c.strip() for a, e in statement_spans(plain) for c in _CLAUSE_CUT.split(plain[a:e])
               if len(_OPENER.sub("", c.strip(), count=1).split()) >= MIN_CLAUSE_WORDS]
    if not clauses:
        return text
    return ". ".join(c.rstrip(" .!;") for c in clauses if _holder(c) != SELF_HOLDER)


def voices_may_revise(new: str, new_speaker: str | None, old: str, old_speaker: str | None) -> bool:
    """`may_revise`, where the messages name their speakers: the name is the holder of a
    message's "I" and "my". Two different named people (`_other_speakers`): Bob's "I moved
    to Lisbon" never revises Alice's "I live in Porto", nor his "never mind" her request;
    a clause of nobody in particular revises either's as before ("Actually the meeting is
    at 5" said by Bob after Alice's "the meeting is at 4"), and so may a clause of his own
    a clause of nobody's of hers ("I moved the meeting to 5"). Where either message names
    nobody, as `may_revise`."""
    if not _other_speakers(new_speaker, old_speaker):
        return may_revise(new, old)
    # every pair of clauses but those where both speak in the first person
    new_rest, old_rest = _not_first_person(new), _not_first_person(old)
    return (bool(new_rest) and may_revise(new_rest, old)) or (bool(old_rest) and may_revise(new, old_rest))


@dataclass(frozen=True)
class Appended:
    """A turn as the Superseder sees it: where it is, who said it, and its label."""

    position: int
    role: str
    text: str
    intent: str
    load_bearing: bool
    # the name its message gives its speaker (tiers.models.speaker_name), None when none
    speaker: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What `Superseder.record` wrote: the whole-turn pairs, and the log's pin changes its
    pairs and relabels made (tiers.store `set_superseded`: the version it moved to and
    how many of the moves up to it were its own; None when it changed none), for the hot
    tier to apply as its own (tiers.hot, pin versions) rather than rebuild the set."""

    pairs: list[tuple[int, int]]
    moved: tuple[int, int] | None = None
    # turns relabelled load-bearing (`_inherit`) with the pairs: their pin changed too
    relabelled: list[int] = field(default_factory=list)
    # corrections recorded to be searched again (`Superseder.recheck`): decided while a
    # turn before them had no vector
    again: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Validity:
    """What was true when: a statement, valid from its own position and time until the
    turn that superseded it (None while current). `current_position` is the end of its
    chain of corrections (A, then B, then C: C), None when a retraction ended it."""

    position: int
    role: str
    text: str
    valid_from: float
    until_position: int | None
    until: float | None
    current_position: int | None
    span: tuple[int, int] | None = None  # the statement's characters in the message text (None: the whole turn)

    @property
    def status(self) -> str:
        return "current" if self.until_position is None else "superseded"

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "role": self.role, "text": self.text, "status": self.status,
                "valid_from": {"position": self.position, "time": self.valid_from},
                "valid_until": None if self.until_position is None else
                {"position": self.until_position, "time": self.until, "superseded_by": self.until_position},
                "current_position": self.current_position,
                "span": None if self.span is None else {"start": self.span[0], "end": self.span[1]}}


def assertive_text(text: str) -> str:
    """`text` without its questions: the sentences that can assert something, and of a
    sentence that asserts and then asks for something after a comma ("my flight is on the
    14th, can you rebook?") what it asserts."""
    return " ".join(a for s in _SENTENCE.split(text.strip()) if (a := _asserted(s)))


def _asserted(sentence: str) -> str:
    """What `sentence` asserts: all of it unless it asks; before a request after a comma
    when that part does not ask itself; else nothing."""
    if not sentence.strip():
        return ""
    rest = after_wish(sentence)
    if rest is not None:
        # "I wish my flight were on Monday instead.": a wish holds nothing as true, but what
        # follows its clause does ("I wish I'd told you sooner, but I moved to Bergen.")
        return _asserted(rest) if rest else ""
    if not sentence.rstrip(" \"')").endswith("?"):
        return sentence
    at = request_tail(sentence)  # classify's reading of the same sentence
    return sentence[:at].strip() if at is not None else ""


def _entities(text: str) -> set[str]:
    """Capitalised words inside a sentence (names), lower-cased."""
    out: set[str] = set()
    for sent in _SENTENCE.split(_untitled(text)):
        for m in _ENTITY.finditer(sent.strip()):
            low = m.group(0).lower()
            if low not in _STOP and low not in _TITLE_WORDS and len(low) >= 3:
                out.add(_stem(low))
    return out


def _values(text: str) -> set[tuple[str, str]]:
    """Typed values for matching an echo, a number word as its digits ("four nights" is
    "4 nights")."""
    out = set()
    for slot, vs in _slots(text).items():
        for v in vs:
            if slot == "number":
                head, sep, unit = v.partition(" ")
                v = _NUMBER_VALUES.get(head, head) + sep + unit
            if len(v) >= MIN_ECHO_VALUE_CHARS:
                out.add((slot, v))
    return out


def _numbers(text: str) -> set[str]:
    """The numeric parts of a text's numbers ("12 seats" -> "12"), at least two characters."""
    return {v.split(" ", 1)[0] for v in _slots(text).get("number", ()) if len(v.split(" ", 1)[0]) >= 2}


_IDENTIFIER = lazy_compile(r"(?<![\w.-])[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)+(?![\w-])")


def _identifiers(text: str) -> set[str]:
    """Lower-case identifiers joined by '-', '_' or '.' ("order-api", "snake_case",
    "example.dev"): a name as much as a capitalised one."""
    return set(_IDENTIFIER.findall(text.lower().rstrip(".")))


def _echoes(source: str, reply: str) -> bool:
    """Whether an assistant `reply` restates a value of `source`: a shared typed value
    ("2,000 eur", "14 harcourt road", "12" for "12 seats"), a shared name or identifier
    ("order-api", "v2.3"), two shared content words, or one in a reply of at most
    ECHO_SHORT_WORDS words."""
    if _values(source) & _values(reply) or _numbers(source) & _numbers(reply):
        return True
    if _identifiers(source) & _identifiers(reply):
        return True
    if _entities(source) & {_stem(w.lower()) for w in re.findall(r"[\w'-]+", reply)}:
        return True
    src, rep = _content(source), _content(reply)
    shared = set(src) & set(rep)
    if shared and len(reply.split()) <= ECHO_SHORT_WORDS:
        return True
    return sum(max(src[w], rep[w]) for w in shared) >= 2.0


def _asserts_new_value(text: str, target: str) -> bool:
    """A correction found by meaning must assert a value for the target's slot: a typed
    value or a name the target lacks, of the same slot type or on a shared content word."""
    # every typed value counts here, a one-digit one too ("Leo is 5 now")
    new_vals = _all_values(text) - _all_values(target)
    new_names = _entities(text) - _entities(target) - set(_content(target))
    if not new_vals and not new_names:
        return False
    same_slot = bool({s for s, _v in new_vals} & set(_slots(target)))
    # a shared word counts where the target mentions the slot the correction names, if it
    # names one: "the cabin" is no wifi password's (`_slot_mentioned`)
    shared = bool(set(_content(text)) & set(_content(target))) and _slot_mentioned(text, target)
    # a name for a name ("make it La Parrilla" after "go with Bistro Verde")
    names_for_names = bool(new_names) and bool(_entities(target))
    return same_slot or shared or names_for_names


# What opens a place or a time of a retraction's own, after its object ("drop the kids at
# the pool at 5pm", "forget the yoga class on Monday"); "to" and a number is a value moved
# ("drop the budget to $500"), no place; "for" and "with" tell a purpose or a party as
# often ("ignore the cake for the party", "drop the call with the landlord"): a name's part
_OWN_ADJUNCT = lazy_compile(r"\b(?:at|to(?! [$€£]?\d)|into|onto|in|on|from|by|near|until|before|after)\b")


def _errand_of_its_own(text: str, target: str) -> bool:
    """Whether a retraction found by meaning is a request of its own, no retraction of
    `target`: the clause of its cue (up to a mark; a reason may follow one) names a place
    or a time, after its object, with a content word or a typed value that `target` lacks
    ("Drop the kids at the pool at 5pm." after "Pick up the kids from school at 3pm."). A
    retraction names what it ends: its place or time, if any, is the target's own ("drop
    the dinner at Nando's" after "book a table at Nando's")."""
    norm = _cue_text(normalize(text))
    cue = _RETRACTS.search(norm)
    if cue is None:
        return False
    clause = re.split(r"[,.;:!?]", norm[cue.end():], maxsplit=1)[0]
    adjunct = _OWN_ADJUNCT.search(clause)
    if adjunct is None:
        return False
    own = clause[adjunct.start():]
    return bool(set(_content(own)) - set(_content(target))) or bool(_all_values(own) - _all_values(target))


def _choice_only(text: str) -> str | None:
    """What a correction that revises only a choice may revise: None when it may revise
    any turn; "" when only a request (a change of mind, or a correction saying only the
    value it replaces, "Instead of Lisbon"); a noun's stem when a request or a turn that
    mentions that thing ("I changed my mind about the trip ...": "trip")."""
    norm = _cue_text(normalize(text))
    if _ONLY_OLD_VALUE.fullmatch(norm):
        return ""
    mind = _CHANGED_MIND.search(norm)
    if mind is None or mind.group("obj") is None:
        return None
    words = [w for w in mind.group("obj").split() if w not in _STOP]
    return _noun_stem(words[0]) if words else None


def _choice_fits(choice: str | None, cand: str, intent: str) -> bool:
    """Whether a turn (`cand`, labelled `intent`) is one a correction that revises only
    a choice (`_choice_only`) may revise: a request, or a turn mentioning its thing. A
    plan revised or called off is no fact: "I changed my mind about the trip to Porto,
    let's skip it." shares only a place with "I live in Porto"."""
    if choice is None or intent in _PLAN_INTENTS:
        return True
    return bool(choice) and choice in {_noun_stem(w) for w in _COMMON_WORD_RE.findall(cand.lower())}


def _all_values(text: str) -> set[tuple[str, str]]:
    return {(slot, v) for slot, vs in _slots(text).items() for v in vs}


def _shares_word(text: str, cand: str) -> bool:
    """Whether a correction's `text` and a turn `cand` have a word or a value in common: a
    content word, the old value it names, or the same typed value ("scratch the 3pm slot" /
    "let's meet at 3pm")."""
    return _evidence(text, cand)[0] > 0 or bool(_all_values(text) & _all_values(cand))


def _evidence(text: str, cand: str) -> tuple[float, float]:
    """How strongly a correction's statement `text` points at one statement `cand`:
    (what it names: an old value (3) and shared content words (entities double); a value
    of the same slot type (1; a unitless identifier against a quantity 0.5)). Compared in
    that order: a slot type is weaker evidence than a word ("in Go" and "to PostgreSQL"
    are both places). (0, 0): nothing in common."""
    old_vals = _old_values(text)
    words = _content(text)
    for v in old_vals:
        words.pop(_stem(v), None)
    named = 3.0 if any(_contains_value(cand, v) for v in old_vals) else 0.0
    named += _shared(text, words, cand, _content(cand))[1]
    slots, cslots = _slots(text), _slots(cand)
    same = _matching_slots(slots, cslots)
    slot = 0.0 if not same else 0.5 if same == ["number"] and _unitless_number(slots, cslots) else 1.0
    return named, slot


# An elliptical replacement: a new value ordered for "it", the thing being decided, with
# nothing that names the slot ("make it La Parrilla", "go with the Sonos speaker", "let's
# do pale yellow instead"). A manner ("make it quick") is not a value.
_ELLIPTICAL = lazy_compile(
    r"\b(?:make (?:it|that|this)|change (?:it|that|this) to|switch (?:it |that |this )?(?:over )?to|"
    r"(?:let's |we'll |i'll )?go with|let's (?:do|try|use|get|book|pick|choose)|rename (?:it|that|this) to)\s+"
    r"(?!(?:quick|quicker|fast|faster|short|shorter|brief|snappy|easy|easier|simple|simpler|clear|clearer|"
    r"happen|work|count|up|out|sure|him|her|them|me|us|you)\b)\S"
)


def _elliptical(norm: str) -> bool:
    return bool(_ELLIPTICAL.search(norm))


def _searches_by_meaning(norm: str) -> bool:
    """Whether a correction (normalized) the rules leave unresolved is searched by meaning
    (`Superseder._by_meaning`): one with an update or retraction cue, an elliptical
    replacement, or a routine told by "<pronoun> now <verb>"; never a bare retraction,
    which takes back the previous turn or nothing."""
    if _BARE_RETRACTION.fullmatch(norm) is not None:
        return False
    cues = _cue_text(norm)
    return _elliptical(norm) or bool(MEANING_CUE.search(cues)) or bool(ROUTINE_NOW.search(cues))


@dataclass
class _Batch:
    """One batch's view of what is superseded: the turns it has read (`pool`), whole
    turns superseded (`by`: position -> superseding position), statements superseded
    within turns (`parts`), and what this batch adds (`pairs`, `statements`)."""

    pool: dict[int, Appended]
    hidden: Hidden = NOTHING_HIDDEN  # popped turns: neither corrections nor targets
    by: dict[int, int] = field(default_factory=dict)
    parts: dict[int, dict[tuple[int, int], int]] = field(default_factory=dict)
    pairs: list[tuple[int, int]] = field(default_factory=list)
    statements: list[StatementRow] = field(default_factory=list)

    @property
    def heads(self) -> set[int]:
        """Turns that superseded something (the latest value of a chain, unless itself superseded)."""
        return set(self.by.values()) | {v for d in self.parts.values() for v in d.values()}

    def current_text(self, q: int) -> str:
        """What still holds of turn `q`: its text without its superseded statements."""
        t = self.pool[q]
        gone = self.parts.get(q)
        return remaining_text(t.text, list(gone)) if gone else t.text

    def supersede(self, old: int, spans: Sequence[tuple[int, int]] | None, new: int,
                  facts: Sequence[tuple[int, int]]) -> None:
        """Turn `old` superseded by `new`: the statements `spans` of it, or (None) all
        that still held; the whole turn once none of its statements holds."""
        done = self.parts.get(old)
        if spans is None:
            if done:  # superseded in part before: each remaining statement gets its own record
                for sp in facts:
                    if sp not in done:
                        self._statement(old, sp, new)
            self.by[old] = new
            self.pairs.append((old, new))
            return
        for sp in spans:
            self._statement(old, sp, new)
        if all(sp in self.parts[old] for sp in facts):
            self.by[old] = new
            self.pairs.append((old, new))

    def _statement(self, old: int, sp: tuple[int, int], new: int) -> None:
        self.parts.setdefault(old, {})[sp] = new
        self.statements.append(StatementRow(old, sp[0], sp[1], new))


def _nearest_in(table: TurnTable, vec: np.ndarray, before: int, k: int) -> list[tuple[int, float]] | None:
    """(position, cosine) of the `k` turns of `table` before position `before` nearest to
    the unit vector `vec`, nearest first, equal cosines in log order: what the store's
    vector index answers (`ColdLog.search_dense` with `before`), scored in memory. None
    when the table cannot answer for every earlier turn: one without its vector yet (the
    cache re-reads late vectors a bounded number at a time, the store may hold it
    already), or vectors of another width."""
    m = int(np.searchsorted(table.positions, before))  # the rows before `before` (log order)
    if m == 0:
        return []
    vectors = table.vectors
    if vectors is None or vectors.shape[1] != vec.shape[0] or not bool(table.has_vec[:m].all()):
        return None
    # |a - b|^2 = 2 - 2 cos for unit vectors: the nearest by L2 are the highest cosines
    # on this thread (row_dots): BLAS's pool would spin a second core after the call
    cos = row_dots(vectors[:m], np.asarray(vec, dtype=np.float32))
    kk = min(k, m)
    # every row tied with the k-th best, then (cosine desc, position asc): a stable cut
    kth = np.partition(cos, m - kk)[m - kk]
    idx = np.nonzero(cos >= kth)[0]
    idx = idx[np.lexsort((table.positions[idx], -cos[idx]))][:kk]
    return [(int(table.positions[i]), float(cos[i])) for i in idx]


def _believed(rows: Sequence[TurnRow], stored: Sequence[StatementRow], hidden: Hidden) -> list[TurnRow]:
    """`rows` as `Superseder.facts` believes them: popped turns left out, supersession
    read past the popped ones, and a turn of which a statement holds again once its
    correction was popped current in part, when its superseded_by came from its statement
    rows (`Hidden.reviving`; `stored`: the statement rows of at least these turns)."""
    hidden = hidden.reviving(stored)
    return [hidden.row(r) for r in rows if r.position not in hidden.positions]


class Superseder:
    """Decides which earlier statements a conversation's new turns supersede, records it
    in the turn index (`ColdStore.set_superseded`), and reads validity intervals back."""

    def __init__(self, cold: ColdLog, embedder: Embedder | None, classifier: TurnClassifier,
                 turns: TurnCache | None = None) -> None:
        self.cold = cold
        self.embedder = embedder
        # whether a retraction's noun names a booking's kind ("Forget the restaurant."), by
        # meaning: without an embedder, none does (find_superseded's `kind_of`)
        self.kind_of = KindCheck(embedder) if embedder is not None else None
        self.classifier = classifier
        # the planner's in-process copy of each conversation's vectors: the meaning search
        # scores those rather than scanning the store's vector index under its lock
        self.turns = turns

    # -- deciding ------------------------------------------------------------------------------

    def assertion(self, turn: Appended) -> str:
        """The part of `turn` that may supersede something ("" when nothing may): a user
        turn's assertive sentences, when they carry a correction or update cue."""
        if turn.role != "user" or turn.intent in ("chitchat", "tool_result"):
            return ""
        head = turn.text[:CLASSIFY_MAX_CHARS]  # what the rules read (classify.CLASSIFY_MAX_CHARS)
        text = assertive_text(_ATTACHMENT.sub(" ", head))
        if not text:
            return ""
        # what is left once the questions are gone decides (a question is never a correction)
        if (text != head.strip() or turn.intent == "question") and \
                self.classifier.classify(text, "user").intent in NOT_SUPERSEDABLE:
            return ""
        norm = normalize(text)
        cues = _cue_text(norm)
        if correction_cue(norm, "user") or _STATE_CHANGE.search(cues) or UPDATE_CUE.search(cues) \
                or _framed_correction(norm) or _PLAN_RETRACTION.match(cues) or _OFF_STATE.match(cues) \
                or _NO_NEED.match(cues):
            return "" if _DISMISSAL.match(norm) else text
        return ""

    def on_append(self, conversation_id: str, appended: Sequence[Appended]) -> list[tuple[int, int]]:
        """Supersession for turns just appended (in log order): records and returns the
        (old position, superseding position) pairs of whole turns, echoes included; the
        statements superseded within a turn that still holds in part are recorded too
        (`ColdLog.set_superseded_statements`)."""
        return self.record(conversation_id, appended).pairs

    def record(self, conversation_id: str, appended: Sequence[Appended], *, final: bool = False) -> Recorded:
        """`on_append`, with the log's pin changes its pairs made (`Recorded.moved`). A
        correction that revised nothing while turns before it had no vector yet is
        recorded to be searched again once they have one (`recheck`).

        `final`: a live append's corrections decided by the rules alone while the model
        is not loaded, only where the decision is the one the meaning search would make
        (`_decided`): every user turn before them is in the window, no kind by meaning was
        asked, and none was left for the meaning search; the others (and those after them
        in the batch) are left undecided, to the embedding's decision. The catch-up never
        decides again what is recorded (a rules pick of a window turn while the real
        target lay further back stayed current for good, and `rebuild` disagreed)."""
        pairs, statements, idle, again, hidden = self._decided(conversation_id, appended, final=final)
        if statements:
            # a statement superseded again after its correction was popped: its row names
            # the popped turn, which readers skip (the statement read as current), so the
            # new correction's row replaces it
            self.cold.set_superseded_statements(conversation_id, statements, over=hidden)
        relabel = self._inherit(conversation_id, pairs, statements) + self._demote(appended, idle)
        moved = self.cold.set_superseded(conversation_id, pairs, relabel) if pairs or relabel else None
        if again:
            self.cold.owe_rechecks(conversation_id, again)
        return Recorded(pairs, moved, [lab[0] for lab in relabel], again)

    def recheck(self, conversation_id: str) -> list[Recorded]:
        """Decide again, in log order, the corrections `record` left to be searched by
        meaning once every turn before them is embedded (`ColdLog.rechecks`): those whose
        earlier turns all have a vector now, each once (the caller that removes its row
        re-checks it). The turn a correction revises may have had no vector when it was
        decided (the background indexer held it; the model call of the check's own
        catch-up failed; more than INLINE_INDEX_ROWS turns were pending before it), and
        that turn's own check, once it is embedded, looks back only. Called once a
        catch-up's pool has run all its hooks (`ColdLog.on_hooked`: after every decision of
        the turns before the correction it embedded), and right after `record` owed a row
        (the catch-up embedding those turns may have read the rows before it). Never
        waits: a correction whose earlier turns are still pending is left to the catch-up
        that embeds them. One indexed read when no correction waits."""
        out: list[Recorded] = []
        for p in self.cold.rechecks(conversation_id):
            if self.cold.first_pending(conversation_id, p) is not None:
                break  # a turn before it still waits: so does every later correction (log order)
            if not self.cold.take_recheck(conversation_id, p):
                continue  # another hook re-checks it
            try:
                rows = self.cold.turns_at(conversation_id, [p])
                msgs = self.cold.get(conversation_id, [p])
                if not rows or not msgs:
                    continue  # erased, or its message cannot be read: nothing to decide
                r, m = rows[0], msgs[0]
                out.append(self.record(conversation_id, [
                    Appended(p, r.role, m.text, r.intent or "statement", bool(r.load_bearing), speaker_name(m.body))]))
            except Exception:
                # derived work: the row again, for the next hook (this one goes on)
                log.warning("could not re-check the correction at %s #%d; the next catch-up does",
                            conversation_id, p, exc_info=True)
                self.cold.owe_rechecks(conversation_id, [p])
                break
        return out

    def _inherit(self, conv: str, pairs: Sequence[tuple[int, int]], statements: Sequence[StatementRow]
                 ) -> list[tuple[int, str, bool, int, str]]:
        """The new value of a load-bearing statement is load-bearing: a correction that
        the turn classifier did not label so ("On second thought, the HTTP client should
        be aiohttp") takes its target's place among the pins (derived labels, replayed
        with the supersession by `rebuild`). The labels to write, with the pairs."""
        ends = {(old, new) for old, new in pairs} | {(s.position, s.superseded_by) for s in statements}
        if not ends:
            return []
        rows = {r.position: r for r in self.cold.turns_at(conv, sorted({p for e in ends for p in e}))}
        relabel: dict[int, tuple[int, str, bool, int, str]] = {}
        for old, new in sorted(ends):
            o, n = rows.get(old), rows.get(new)
            if o is None or n is None or n.role != "user" or n.load_bearing or not o.load_bearing \
                    or o.role != "user" or new in relabel:
                continue
            relabel[new] = (new, "correction", True, max(int(o.priority or 0), CORRECTION_PRIORITY),
                            f"{n.label_reason or 'rule'}; supersedes load-bearing #{old}")
        return list(relabel.values())

    def _demote(self, appended: Sequence[Appended], idle: Mapping[int, str]
                ) -> list[tuple[int, str, bool, int, str]]:
        """The labels of the corrections among `appended` that revise nothing (`idle`: their
        assertive parts, `_decided`), as ordinary turns: the classifier pinned each at
        PRIORITY["correction"] for what it would revise, and a pin that revises nothing
        took the pinned share from the facts it left current ("Never mind." after a
        question pushed out "I'm allergic to peanuts."). A bare retraction takes back
        nothing and says nothing: small talk. A correction carrying a new fact has the
        label the classifier gives it as an ordinary turn (`ordinary`), unless a clause of
        it is the user's own (SELF_HOLDER: "Actually I live in Porto, not Lisbon." still
        tells where the user lives, a fact a correction's pin is worth). Derived labels,
        replayed with the supersession by `rebuild`."""
        out: list[tuple[int, str, bool, int, str]] = []
        for a in appended:
            text = idle.get(a.position)
            if text is None or a.role != "user" or a.intent != "correction" or not a.load_bearing:
                continue
            if _BARE_RETRACTION.fullmatch(normalize(text)):
                out.append((a.position, "chitchat", False, PRIORITY["chitchat"],
                            "supersession: a bare retraction that takes back nothing"))
            elif not any(holder == SELF_HOLDER for holder, _subject, _thing in _clauses(text)):
                lab = self.classifier.classify(a.text, "user", ordinary=True)
                out.append((a.position, lab.intent, lab.load_bearing, lab.priority,
                            f"{lab.reason}; supersession: a correction that revises nothing"))
        return out

    def find(self, conv: str, appended: Sequence[Appended]) -> list[tuple[int, int]]:
        """The whole-turn pairs `on_append` records, without recording anything."""
        return self.decide(conv, appended)[0]

    def decide(self, conv: str, appended: Sequence[Appended]) -> tuple[list[tuple[int, int]], list[StatementRow]]:
        """What `on_append` records, without recording it: whole-turn pairs and
        statement rows.

        Each correction is checked against the window, the pins, and the earlier turns
        nearest in meaning however far back (a plain "Seat preference: aisle" corrected
        300 turns later is neither pinned nor recent, while small talk on its topic in
        the window would otherwise be the only candidate the rules see). A live append
        (a batch of up to INLINE_INDEX_ROWS turns) embeds each of its corrections for
        that. A larger batch (an import) decides in two passes: the rules over the window
        and the pins first, without any embedding; then only the corrections they left
        unresolved, at most MAX_MEANING_LOOKUPS of them, are embedded."""
        pairs, statements, _idle, _again, _hidden = self._decided(conv, appended)
        return pairs, statements

    def _decided(self, conv: str, appended: Sequence[Appended], *, final: bool = False
                 ) -> tuple[list[tuple[int, int]], list[StatementRow], dict[int, str], list[int], frozenset[int]]:
        """`decide`, and the corrections that revise nothing once every rule had its say
        (position -> assertive part): a bare retraction always (no meaning search leads
        it anywhere), another once it was searched by meaning (an import's rules leave
        that to its catch-up, and a large batch searches MAX_MEANING_LOOKUPS only) over
        every turn before it; and those searched while a turn before them had no vector
        (`_nearest`'s incomplete ones), which revise nothing yet: to search again
        (`recheck`), not idle. Last, the positions a pop hides (read for the decision)."""
        gated = {a.position: txt for a in appended if (txt := self.assertion(a))}
        if not gated:
            return [], [], {}, [], frozenset()
        if final and not self._window_holds_all(conv, max(gated)):
            return [], [], {}, [], frozenset()
        # a popped turn (a control row hides it) neither corrects nor is corrected: a
        # replay then records what readers see through tiers.statements.Hidden
        hid = read_hidden(self.cold, conv)
        gated = {p: txt for p, txt in gated.items() if p not in hid.positions}
        if not gated:
            return [], [], {}, [], hid.positions
        first = appended[0].position
        # candidates, read once per batch: the window before the batch and the pins
        rows: dict[int, TurnRow] = {r.position: r for r in self.cold.turns(conv, start=max(0, first - SUPERSEDE_WINDOW),
                                                                            end=first - 1)}
        for r in self.cold.pin_candidates(conv, min_priority=0, limit=MAX_PIN_CANDIDATES):
            if r.position < first:
                rows.setdefault(r.position, r)
        b = _Batch(self._pool(conv, rows, hid), hid)
        self._load(conv, b, rows)
        for a in appended:
            if a.position not in hid.positions:
                b.pool[a.position] = self._as_target(a)
        bearing = sorted(p for p, t in b.pool.items() if t.load_bearing and t.role == "user")
        small = len(appended) <= INLINE_INDEX_ROWS
        unresolved: list[int] = []
        if final:
            done: dict[int, str] = {}
            for p in sorted(gated):
                if self._decide(conv, p, gated[p], (), b, bearing, meaning=True, final=True) is None:
                    break  # its decision needs the model, and so may every later one's
                done[p] = gated[p]
            return b.pairs, b.statements, _idle(done, b, frozenset()), [], hid.positions
        if small:
            unresolved = sorted(gated)
        else:
            for p in sorted(gated):
                if not self._decide(conv, p, gated[p], (), b, bearing, meaning=False):
                    unresolved.append(p)
        if not unresolved:
            return b.pairs, b.statements, _idle(gated, b, frozenset()), [], hid.positions
        near, incomplete = self._searched(conv, {p: gated[p] for p in unresolved}, small=small)
        far = {q: r for q, r in ((r.position, r) for r in self.cold.turns_at(
            conv, sorted({q for hits in near.values() for q, _c in hits} - set(b.pool))))}
        b.pool.update(self._pool(conv, far, hid))
        self._load(conv, b, far)
        again: list[int] = []
        for p in unresolved:
            found = self._decide(conv, p, gated[p], near.get(p, ()), b, bearing, meaning=True)
            if not found and p in incomplete and _searches_by_meaning(normalize(gated[p])):
                again.append(p)
        return (b.pairs, b.statements, _idle(gated, b, {q: v for q, v in near.items() if q not in again}), again,
                hid.positions)

    def _window_holds_all(self, conv: str, last: int) -> bool:
        """Whether no user turn lies before the window of the correction at `last` (its
        SUPERSEDE_WINDOW positions): then the rules see every turn the meaning search
        could find, and every target they pick is in a later decision's window, read
        back as superseded. A pin further back is no such turn: once superseded it is no
        pin candidate, so the catch-up would decide the correction again without it. At
        most FINAL_EARLIER_ROWS rows are read; a longer log is not read at all (an append
        to a 10k-turn log stays a few index seeks)."""
        edge = last - SUPERSEDE_WINDOW
        if edge <= 0:
            return True
        if edge > FINAL_EARLIER_ROWS:
            return False
        return not any(r.role == "user" for r in self.cold.turns(conv, start=0, end=edge - 1))

    def _pool(self, conv: str, rows: Mapping[int, TurnRow], hidden: Hidden = NOTHING_HIDDEN
              ) -> dict[int, Appended]:
        rows = {p: r for p, r in rows.items() if p not in hidden.positions}
        msgs = {m.position: m for m in self.cold.get(conv, sorted(rows))}
        return {p: self._as_target(Appended(p, r.role, msgs[p].text, r.intent or "statement", r.load_bearing,
                                            speaker_name(msgs[p].body)))
                for p, r in rows.items() if p in msgs}

    def _as_target(self, t: Appended) -> Appended:
        """`t` as a correction may find it: a user turn labelled a question that also states
        a fact in a sentence of its own ("My flight is on the 12th. What time is
        check-in?") has the label of what it asserts, as a correction's questions are
        removed before it is read (`assertion`); the question's label made it no target."""
        if t.role != "user" or t.intent != "question":
            return t
        text = assertive_text(_ATTACHMENT.sub(" ", t.text[:CLASSIFY_MAX_CHARS]))
        if not text:
            return t
        intent = self.classifier.classify(text, "user").intent
        return t if intent in NOT_SUPERSEDABLE else replace(t, intent=intent)

    def _load(self, conv: str, b: _Batch, rows: Mapping[int, TurnRow]) -> None:
        """What the stored rows say was superseded: whole turns, and statements (a
        supersession by a popped turn read as absent)."""
        for p, r in rows.items():
            if (by := b.hidden.row(r).superseded_by) is not None:  # None too for a revived turn
                b.by[p] = by
        for s in b.hidden.statements(self.cold.superseded_statements(conv, sorted(rows))):
            b.parts.setdefault(s.position, {})[(s.start, s.end)] = s.superseded_by

    def _facts(self, t: Appended) -> list[tuple[int, int]]:
        """The spans of `t` that state something a correction could revise: not a
        question, not small talk, with a content word or a typed value."""
        out = []
        for a, e in statement_spans(t.text):
            s = t.text[a:e]
            if (at := request_tail(s)) is not None:
                # "my flight is on the 12th, can you check it?": the assertion before the request
                e = a + len(s[:at].rstrip())
                s = t.text[a:e]
            if s.rstrip(" \"')").endswith("?") or not _ATTACHMENT.sub("", s).strip(" .,;:!") or \
                    not (_content(s) or _slots(s)):
                continue
            if t.role == "user" and len(s) < len(t.text.strip()) and \
                    self.classifier.classify(s, "user").intent in NOT_SUPERSEDABLE:
                continue
            out.append((a, e))
        return out

    def _decide(self, conv: str, p: int, text: str, near: Sequence[tuple[int, float]], b: _Batch,
                bearing: Sequence[int], *, meaning: bool, final: bool = False) -> bool | None:
        """Decide one correction at `p`: add its pair or statement rows (and its target's
        echoes) to `b`; False when it supersedes nothing. `final` (the rules alone, see
        `record`): None, and nothing added, where the model could decide otherwise."""
        pool = b.pool
        if p in b.heads:
            return True  # decided already (an import's rules, before its catch-up's meaning search)
        cand_pos = {q for q in range(max(0, p - SUPERSEDE_WINDOW), p) if q in pool}
        i = bisect_left(bearing, p)
        cand_pos.update(bearing[max(0, i - MAX_PIN_CANDIDATES):i])
        cand_pos.update(q for q, _c in near if q < p)
        users = [q for q in sorted(cand_pos) if q in pool and pool[q].role == "user"]
        speaker = pool[p].speaker
        # a turn that holds in part is matched by what still holds of it
        cands = [Candidate(q, b.current_text(q), pool[q].intent, pool[q].load_bearing, speaker=pool[q].speaker)
                 for q in users if q not in b.by and b.current_text(q)]
        # the user's previous turn: the latest in the window (one further back, a pin, is not)
        previous = max((q for q in users if q >= p - SUPERSEDE_WINDOW), default=None)
        latest = bool(cands) and cands[-1].position == previous
        # the kind of a booking is told by meaning, so only in the pass that may embed (an
        # import's rules pass leaves "Forget the restaurant." unresolved for its catch-up)
        asked = _KindAsked() if final else None
        found = find_superseded(text, cands, speaker=speaker, latest=latest,
                                kind_of=asked if asked is not None else self.kind_of if meaning else None
                                ) if cands else []
        if asked is not None and asked.asked:
            return None
        norm = normalize(text)
        # "never mind" takes back the previous turn or nothing (find_superseded): no chain,
        # meaning or value leads it further back
        bare = _BARE_RETRACTION.fullmatch(norm) is not None
        if not found and not bare:
            found = self._via_chain(text, p, [q for q in users if q in b.by or b.parts.get(q)], b)
        elliptical = _elliptical(norm)
        cues = _cue_text(norm)
        routine = not elliptical and not MEANING_CUE.search(cues) and bool(ROUTINE_NOW.search(cues))
        if not found and meaning and _searches_by_meaning(norm):
            if final:
                return None  # the meaning search has its say first, and only the model has it
            found = self._by_meaning(text, [(q, c) for q, c in near if q < p], pool, b.by, elliptical=elliptical,
                                     routine=routine, speaker=speaker)
        if not found and elliptical:
            found = self._chain_head(text, users, b, speaker)
        # a correction of one item of a list leaves the list's statement current, by whatever
        # path it was matched (`names_part_of_list`)
        found = [(q, why) for q, why in found if not names_part_of_list(text, b.current_text(q))]
        # the same value said more than once: every current saying of it, not only the one
        # matched ("I live in Oslo." twice, then "Actually I moved to Bergen."); "never
        # mind" takes back what the user just said, and only that
        restated = self._restated(text, [old for old, _why in found], p, users, b, speaker) \
            if found and not bare else []
        # one turn, or every turn of a topic a retraction names (_rest_of_topic), with its restatements
        for old, _why in [*found, *restated]:
            targets = self._targets(text, pool[old], b, speaker)
            b.supersede(old, targets, p, self._facts(pool[old]))
            for echo, spans in self._echoes_of(conv, old, p, targets, b):
                b.supersede(echo, spans, p, self._facts(pool[echo]))
        return bool(found)

    def _restated(self, text: str, found: Sequence[int], p: int, users: Sequence[int], b: _Batch,
                  speaker: str | None) -> list[tuple[int, str]]:
        """The other current user turns before `p` among `users` that restate a statement
        `text` revises in the turns `found` (`_restates`), each with the reason: a fact
        said twice and then corrected holds in neither saying. Only turns that still hold
        (a value superseded before stays superseded by what superseded it), of a voice and
        a kind `text` may revise; read before `found` is marked superseded."""
        pool = b.pool
        sources: list[str] = []
        for old in found:
            t = pool[old]
            spans = self._targets(text, t, b, speaker) or \
                [sp for sp in self._facts(t) if sp not in b.parts.get(old, {})]
            sources += [t.text[s:e] for s, e in spans] or [b.current_text(old)]
        kinds = fact_kinds(text)
        out: list[tuple[int, str]] = []
        for q in users:
            t = pool[q]
            if q >= p or q in found or q in b.by or t.role != "user" or t.intent in NOT_SUPERSEDABLE:
                continue
            current = b.current_text(q)
            if not current or not voices_may_revise(text, speaker, current, t.speaker) or \
                    not _kinds_fit(kinds, fact_kinds(current)):
                continue
            own = [t.text[s:e] for s, e in self._facts(t) if (s, e) not in b.parts.get(q, {})] or [current]
            said = next((src for src in sources for st in own if _restates(st, src)), None)
            if said is not None:
                out.append((q, f"restates '{said.strip()}'"))
        return out

    def _targets(self, text: str, target: Appended, b: _Batch, speaker: str | None = None
                 ) -> list[tuple[int, int]] | None:
        """The statements of `target` that `text` revises, or None for all of it: each
        statement of the correction revises the statement of the target it matches best
        (an old value it names, shared words, a value of the same slot); a target with
        one current statement, or a correction that matches none, revises it whole."""
        spans = [s for s in self._facts(target) if s not in b.parts.get(target.position, {})]
        if len(spans) < 2:
            return None
        hit: set[tuple[int, int]] = set()
        for a, e in statement_spans(text):
            own = text[a:e]
            # only a statement of the same holder ("I moved" revises "I live ...", not
            # "my brother lives ..." beside it)
            # nor one of another kind ("I moved to Seattle" revises "I live in Portland",
            # not "I work at Providence Portland" beside it; `fact_kinds`)
            kinds = fact_kinds(own)
            scores = [(_evidence(own, target.text[s:t]), (s, t)) for s, t in spans
                      if voices_may_revise(own, speaker, target.text[s:t], target.speaker)
                      and _kinds_fit(kinds, fact_kinds(target.text[s:t]))]
            if not scores:
                continue
            best = max(sc for sc, _sp in scores)
            if best > (0.0, 0.0):
                hit |= {sp for sc, sp in scores if sc >= best}
        if not hit or len(hit) == len(spans):
            return None
        return sorted(hit)

    @staticmethod
    def _via_chain(text: str, p: int, superseded: Sequence[int], b: _Batch) -> list[tuple[int, str]]:
        """A correction at `p` that matches only something already superseded ("the HTTP
        client should be aiohttp" after "Use requests for the HTTP client", "Switch to
        httpx instead") revises the value that replaced it: the end of its chain, when
        that is a user turn before `p` that still holds (a chain that ends at `p` was
        revised by this correction already: a turn never supersedes itself)."""
        cands = []
        for q in superseded:
            t = b.pool[q]
            gone = [t.text[s:e] for (s, e) in b.parts.get(q, {})]
            body = t.text if q in b.by else " ".join(gone)
            if body:
                cands.append(Candidate(q, body, t.intent, t.load_bearing, speaker=t.speaker))
        # the chain's turns are not the user's previous one (latest=False): "scratch that,
        # ..." with nothing matched takes back none of them
        for q, why in find_superseded(text, cands, speaker=b.pool[p].speaker, latest=False) if cands else []:
            nxt = b.by.get(q) if q in b.by else next(iter(b.parts.get(q, {}).values()), None)
            seen = {q}
            while nxt is not None and nxt in b.by and nxt not in seen:
                seen.add(nxt)
                nxt = b.by[nxt]
            end = b.pool.get(nxt) if nxt is not None else None
            if end is not None and end.position < p and end.role == "user" and end.position not in b.by and \
                    b.current_text(end.position) and \
                    _choice_fits(_choice_only(text), b.current_text(end.position), end.intent) and \
                    _RETRACTS.search(_cue_text(normalize(end.text))) is None:
                return [(end.position, f"{why}; #{q} was superseded by #{nxt}: its current value")]
        return []

    @staticmethod
    def _chain_head(text: str, users: Sequence[int], b: _Batch, speaker: str | None = None
                    ) -> list[tuple[int, str]]:
        """Without a word or a value in common: an elliptical replacement ("make it La
        Parrilla", "go with Le Bristol instead") revises the latest user turn, within
        ELLIPSIS_REACH user turns, that holds a value (small talk without one is passed
        over), if that is the latest correction (the value being changed) or holds a value
        of the same kind (a name for a name, a typed value of the same slot)."""
        names = _entities(text)
        kinds = set(_slots(text))
        for q in list(reversed(users))[:ELLIPSIS_REACH]:
            t = b.pool[q]
            if q in b.by or t.intent in NOT_SUPERSEDABLE:
                continue
            cur = b.current_text(q)
            if not voices_may_revise(text, speaker, cur, t.speaker) or not _kinds_fit(fact_kinds(text), fact_kinds(cur)):
                continue  # someone else's value, or another kind of fact, is not the one being changed
            if q in b.heads:
                return [(q, f"elliptical replacement of the latest correction #{q}")]
            has = _entities(cur), set(_slots(cur))
            if not has[0] and not has[1]:
                if t.load_bearing:
                    return []  # a load-bearing statement without a value: "it" may be that
                continue
            if (names and has[0]) or (kinds & has[1]):
                return [(q, f"elliptical replacement: a value of the same kind as #{q}'s")]
            return []
        return []

    def _nearest(self, conv: str, texts: Mapping[int, str], *, small: bool) -> dict[int, list[tuple[int, float]]]:
        """`_searched`'s hits alone."""
        return self._searched(conv, texts, small=small)[0]

    def _searched(self, conv: str, texts: Mapping[int, str], *, small: bool
                  ) -> tuple[dict[int, list[tuple[int, float]]], set[int]]:
        """(position, cosine) of the earlier turns nearest in meaning to each of `texts`,
        nearest first; in a large batch for at most MAX_MEANING_LOOKUPS of them. Derived work: when
        nothing can be embedded the rules still saw the pins and the window. With them, the
        positions of `texts` searched (or not searched, the embedding failed) while a
        turn before them had no vector (asked only where a turn of the conversation was
        pending before the search: one index seek then, none otherwise)."""
        if self.embedder is None:
            return {}, set()
        todo = sorted(texts) if small else sorted(texts)[:MAX_MEANING_LOOKUPS]
        if len(todo) < len(texts):
            log.info("supersession of %s: %d corrections unresolved by the rules in one batch, %d searched by "
                     "meaning", conv, len(texts), MAX_MEANING_LOOKUPS)
        waited = False  # whether a turn of the conversation was pending before the search
        try:
            # a live append: the turns just before it get their vectors now (only those
            # before it: the search looks at earlier turns, and a catch-up that calls this
            # has embedded them already, not the ones after); asked first whether any turn
            # waits, an index seek (so is index_pending's read since m022; it walked the
            # conversation's turns before). Those another catch-up of this process is
            # embedding too (`read_claimed`): left to it, the statement being corrected had
            # no vector here, nothing was superseded, and nothing looked again (its own
            # check looks back only). Embedded twice then, kept and hooked once (the store
            # step's `embedded = 0` recheck), and no wait for the other: hooks never wait
            if small and self.cold.pending_embeddings(conv):
                waited = True
                self.cold.index_pending(conversation_id=conv, max_rows=INLINE_INDEX_ROWS, end=max(todo),
                                        read_claimed=True)
            with remembered_for(memo_scope(self.cold.db_uuid, conv)):  # where the catch-up remembered them
                vecs = self.embedder.embed([_meaning_text(texts[p]) for p in todo])
        except Exception:
            log.warning("could not embed corrections of %s to find what they revise", conv, exc_info=True)
            return {}, self._incomplete(conv, todo) if waited else set()
        out: dict[int, list[tuple[int, float]]] = {}
        table = self._table(conv)
        for p, v in zip(todo, vecs, strict=True):
            # earlier turns only, however many later ones a catch-up has embedded already:
            # the decision is the one an eager process made when the turn was appended
            near = _nearest_in(table, v, p, SUPERSEDE_SEARCH_K) if table is not None else None
            if near is None:
                hits = self.cold.search_dense(v, SUPERSEDE_SEARCH_K, conversation_id=conv, before=p)
                near = [(q, cosine_from_l2(d)) for _c, q, d in hits if q < p]
            out[p] = near
        return out, self._incomplete(conv, todo) if waited else set()

    def _incomplete(self, conv: str, todo: Sequence[int]) -> set[int]:
        """Those of `todo` with a turn before them still without a vector: what their
        meaning search could not see (the first pending turn, one index seek)."""
        try:
            first = self.cold.first_pending(conv, max(todo))
        except Exception:  # derived: read as nothing missed, as before
            log.warning("could not read %s's pending turns after its meaning search", conv, exc_info=True)
            return set()
        return set() if first is None else {p for p in todo if p > first}

    def _table(self, conv: str) -> TurnTable | None:
        """The conversation's vectors from the turn cache (None without one, or when it
        cannot be read: the store's index is searched instead)."""
        if self.turns is None:
            return None
        try:
            return self.turns.get(conv)
        except Exception:  # derived: the store's own index answers the same
            log.warning("turn cache of %s unreadable; searching the store's vector index", conv, exc_info=True)
            return None

    @staticmethod
    def _by_meaning(text: str, near: Sequence[tuple[int, float]], pool: Mapping[int, Appended],
                    superseded: AbstractSet[int] | Mapping[int, int], *, elliptical: bool = False,
                    routine: bool = False, speaker: str | None = None) -> list[tuple[int, str]]:
        """Fallback when the rules find no target: a turn that says it updates something
        ("... from now on", "I switched ...") and asserts a value, or retracts something
        ("drop the flight rule"), supersedes the earlier user statement or instruction
        nearest in meaning (holding the same slot or topic, for an update), if it is
        clearly on the same topic. An elliptical replacement ("make it light grey",
        "go with the Sonos speaker") asserts its value by its form: its object. A `routine`
        told only by "<pronoun> now <verb>" (`ROUTINE_NOW`) revises a turn that shares a
        content word with it, the same activity. A turn of another kind of the user's
        fact (`fact_kinds`: where they live, where they work) is no target however near."""
        kinds = fact_kinds(text)
        eligible = [(cos, pool[q]) for q, cos in near  # nearest first
                    if q in pool and q not in superseded and pool[q].role == "user"
                    and pool[q].intent not in NOT_SUPERSEDABLE
                    and _kinds_fit(kinds, fact_kinds(pool[q].text))  # a job is no move
                    and voices_may_revise(text, speaker, pool[q].text, pool[q].speaker)
                    and _choice_fits(_choice_only(text), pool[q].text, pool[q].intent)]
        if not eligible or eligible[0][0] < SUPERSEDE_MIN_COSINE:
            return []  # the nearest statement is not close enough: nothing is
        best_cos = eligible[0][0]
        # a retraction ("drop the flight rule") ends a statement without a new value
        retracts = bool(_RETRACTS.search(_cue_text(normalize(text))))
        # ... unless it is an errand of its own that shares a word with a turn ("drop the
        # kids at the pool at 5pm" / "pick up the kids from school at 3pm"): with no other
        # update cue, it revises no turn that lacks its place or time (_errand_of_its_own)
        errand = retracts and not MEANING_CUE.search(_RETRACTS.sub(" ", _cue_text(normalize(text))))
        # a named old value ("instead of Monday") must be in the target (a retraction
        # names a topic, "forget the allergy thing", not a value)
        named = set() if retracts else _old_values(text)
        # ... or, naming the old value the target holds ("allergic to shellfish, not
        # peanuts" after "I have a peanut allergy"), a plain word for the new one
        # A retraction is checked against no new value: what links it to a turn that shares
        # no word or value with it ("forget the restaurant" / "book the Altis hotel") is the
        # cosine alone, which must then be above the unrelated range (RETRACTION_ALONE_MIN_COSINE)
        # A retraction naming its thing ("Forget the pharmacy, I'll go tomorrow."): the day
        # after it ("tomorrow") is the user's own plan, no new value for a pizza ordered for
        # tonight nor a word of a table booked for Friday (`_without_times`)
        cues = _cue_text(normalize(text))
        thing = _RETRACTED_OBJECT.match(cues) if retracts else None
        own = _without_times(cues, thing) if thing is not None else text
        # a meal names no request of another meal's hour ("Never mind the lunch." / "Order a
        # pizza from Luigi's for 7pm."), however near in meaning (`_meal_fits`)
        noun = _retracted_noun(cues) if retracts else None
        # (its cosines are of that text too: `_meaning_text`)
        fits = [(cos, t) for cos, t in eligible if cos >= max(SUPERSEDE_MIN_COSINE, best_cos - SUPERSEDE_PREFER_MARGIN)
                and (not named or any(_contains_value(t.text, v) for v in named))
                and ((retracts and (cos >= RETRACTION_ALONE_MIN_COSINE or _shares_word(own, t.text)))
                     or elliptical or bool(named) or _asserts_new_value(own, t.text))
                and (not routine or bool(set(_content(text)) & set(_content(t.text))))
                and (noun is None or _meal_fits(noun, t.text))
                and not (errand and _errand_of_its_own(text, t.text))
                and not _reporter_alone(text, t.text)]
        # small talk on the same topic can sit a hair closer than the instruction the
        # update revises: a load-bearing turn within the margin is the likelier target
        for cos, t in fits:
            if t.load_bearing:
                return [(t.position, f"update cue, new value and same topic (cosine {cos:.2f}, load-bearing)")]
        if fits:
            cos, t = fits[0]
            return [(t.position, f"update cue, new value and same topic (cosine {cos:.2f})")]
        return []

    def _echoes_of(self, conv: str, old: int, new: int, targets: Sequence[tuple[int, int]] | None,
                   b: _Batch) -> list[tuple[int, list[tuple[int, int]] | None]]:
        """The assistant's reply to a superseded statement (its turns after it, up to
        the next user turn, within ECHO_SCAN_TURNS and before the correction) where it
        restates the statement's value: each with the statements of the reply that do
        (None: all of them)."""
        pool = b.pool
        span = range(old + 1, min(new, old + ECHO_SCAN_TURNS + 1))
        missing = [q for q in span if q not in pool and q not in b.hidden.positions]
        if missing:
            rows = {r.position: r for r in self.cold.turns_at(conv, missing)}
            b.pool.update(self._pool(conv, rows))  # rows whose message can be read
            self._load(conv, b, rows)
        src = pool[old].text
        source = src if targets is None else " ".join(src[s:e] for s, e in targets)
        out: list[tuple[int, list[tuple[int, int]] | None]] = []
        for q in span:
            if q in b.hidden.positions:
                continue  # a popped turn is no reply
            t = pool.get(q)
            if t is None or t.role == "user":
                break  # the reply ends where the user speaks again
            if t.role != "assistant" or q in b.by or not _echoes(source, t.text):
                continue
            if targets is None:
                out.append((q, None))
                continue
            # the old statement was one of several: only the reply's statements that
            # restate it follow it
            facts = [sp for sp in self._facts(t) if sp not in b.parts.get(q, {})]
            hit = [sp for sp in facts if _echoes(source, t.text[sp[0]:sp[1]])]
            if hit:
                out.append((q, None if len(hit) == len(facts) else hit))
        return out

    def replay(self, conversation_id: str, turns: Sequence[Appended]) -> list[tuple[int, int]]:
        """Recompute a conversation's supersession from its log (after `rebuild` cleared
        the turn index): the whole log, in order, as appends decide it."""
        # in chunks the size of a live append, so that each correction is searched by
        # meaning as it was when appended
        pairs: list[tuple[int, int]] = []
        for start in range(0, len(turns), INLINE_INDEX_ROWS):
            pairs += self.on_append(conversation_id, turns[start:start + INLINE_INDEX_ROWS])
        return pairs

    # -- reading -------------------------------------------------------------------------------

    def facts(self, conversation_id: str, *, start: int = 0, end: int | None = None) -> list[Validity]:
        """The conversation's load-bearing user statements that hold now, and every
        statement something superseded, with its interval: what the agent believes now
        and what it believed before. In log order. A turn that holds several facts, of
        which some were superseded, is listed statement by statement (`Validity.span`).
        A popped item (a control row hides it) is not believed: it is not listed, and
        what only it superseded holds again (tiers.statements.Hidden).

        Of the turns at positions `start`..`end` only (None: to the last), when asked: the
        entries the whole conversation's list has at those positions, read from those
        turns and the chains of corrections they start, not from every turn (a page of
        the inspector's log asks for its rows)."""
        hid = read_hidden(self.cold, conversation_id)
        whole = start == 0 and end is None
        read = self.cold.turns(conversation_id, start=start, end=end)
        stored = [s for s in self.cold.superseded_statements(conversation_id, None if whole else
                                                             [r.position for r in read])
                  if s.position not in hid.positions]
        parts: dict[int, list[StatementRow]] = {}
        for s in hid.statements(stored):
            parts.setdefault(s.position, []).append(s)
        rows = _believed(read, stored, hid)
        keep = {r.position: r for r in rows if r.superseded_by is not None or r.position in parts
                or (r.role == "user" and r.load_bearing and r.intent not in NOT_SUPERSEDABLE)}
        texts = {m.position: m.text for m in self.cold.get(conversation_id, sorted(keep))}
        by_pos = {r.position: r for r in rows}
        if not whole:
            # the whole list's chains run through turns outside the range: read those
            self._follow(conversation_id, by_pos, [r.superseded_by for r in rows]
                         + [s.superseded_by for stmts in parts.values() for s in stmts], hid)
        got = self._intervals(conversation_id, {p: r for p, r in keep.items() if p not in parts}, texts, by_pos, hid)
        out = [got[p] for p in sorted(got)]
        for p, stmts in parts.items():
            r = by_pos.get(p)
            text = texts.get(p)
            if r is None or text is None:
                continue  # its message could not be read (salvaged away)
            ended = {(s.start, s.end) for s in stmts}
            for s in stmts:
                end = self._chain_end(conversation_id, s.superseded_by, by_pos)
                until = by_pos.get(s.superseded_by)
                out.append(Validity(p, r.role, text[s.start:s.end], r.created_at, s.superseded_by,
                                    until.created_at if until is not None else None, end, (s.start, s.end)))
            turn = Appended(p, r.role, text, r.intent or "statement", bool(r.load_bearing))
            if r.superseded_by is None:
                for a, e in self._facts(turn):
                    if (a, e) not in ended:
                        out.append(Validity(p, r.role, text[a:e], r.created_at, None, None, p, (a, e)))
            else:
                # a statement whose row names a popped turn, in a turn a later correction
                # superseded whole (a row written before such rows were replaced: `record`'s
                # `over`): it held until the turn's superseded_by, not until now
                by = r.superseded_by
                until = by_pos.get(by)
                for a, e in self._facts(turn):
                    if (a, e) not in ended:
                        out.append(Validity(p, r.role, text[a:e], r.created_at, by,
                                            until.created_at if until is not None else None,
                                            self._chain_end(conversation_id, by, by_pos), (a, e)))
        out.sort(key=lambda v: (v.position, v.span or (0, 0)))
        return out

    def _follow(self, conv: str, known: dict[int, TurnRow], starts: Sequence[int | None], hidden: Hidden) -> None:
        """Add to `known` the turns the chains from `starts` pass through (A -> B -> C),
        read as `facts` reads every turn (`_believed`), a hop's turns at a time."""
        frontier = {p for p in starts if p is not None} - set(known)
        while frontier:
            at = sorted(frontier)
            stored = [s for s in self.cold.superseded_statements(conv, at) if s.position not in hidden.positions]
            got = _believed(self.cold.turns_at(conv, at), stored, hidden)
            known.update({r.position: r for r in got})
            frontier = {r.superseded_by for r in got if r.superseded_by is not None} - set(known)

    def _chain_end(self, conv: str, start: int, known: Mapping[int, TurnRow]) -> int | None:
        """Where a chain of corrections starting at `start` ends (None: a retraction)."""
        end = start
        seen = {start}
        while (nxt := known[end].superseded_by if end in known else None) is not None and nxt not in seen:
            seen.add(nxt)
            end = nxt
        text = next((m.text for m in self.cold.get(conv, [end])), "")
        cue = correction_cue(normalize(text), "user")
        return None if cue is not None and cue[0] == "retraction" else end

    def _intervals(self, conv: str, keep: Mapping[int, TurnRow], texts: Mapping[int, str],
                   by_pos: Mapping[int, TurnRow] | None = None, hidden: Hidden = NOTHING_HIDDEN
                   ) -> dict[int, Validity]:
        known: dict[int, TurnRow] = dict(by_pos or keep)
        # follow each chain to its end (A -> B -> C), reading the rows it passes through
        frontier = {r.superseded_by for r in keep.values() if r.superseded_by is not None} - set(known)
        while frontier:
            got = [hidden.row(r) for r in self.cold.turns_at(conv, sorted(p for p in frontier if p is not None))]
            known.update({r.position: r for r in got})
            frontier = {r.superseded_by for r in got if r.superseded_by is not None} - set(known)
        end_texts: dict[int, str] = {}
        out: dict[int, Validity] = {}
        for p, r in keep.items():
            end = p
            seen = {p}
            while (nxt := known[end].superseded_by if end in known else None) is not None and nxt not in seen:
                seen.add(nxt)
                end = nxt
            current: int | None = end
            if end != p:
                if end not in end_texts:
                    end_texts[end] = texts.get(end) or next((m.text for m in self.cold.get(conv, [end])), "")
                cue = correction_cue(normalize(end_texts[end]), "user")
                if cue is not None and cue[0] == "retraction":
                    current = None  # a retraction ended the chain without a new value
            until = known.get(r.superseded_by) if r.superseded_by is not None else None
            out[p] = Validity(p, r.role, texts.get(p, ""), r.created_at, r.superseded_by,
                              until.created_at if until is not None else None, current)
        return out
