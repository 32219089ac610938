"""Eviction pressure: planted constraints, hundreds of distractor turns, corrections and
retractions, then probes.

    tiermem eval pressure --seed 0 --budget 500 --budget 1000 --budget 2000 --json

Each generated conversation (seeded; ``--conversations`` of them, ``--turns`` messages
each) goes like this:

1. early on, the user plants load-bearing facts, each about one *slot* (budget, food
   allergy, database, a flight rule, seat, nickname, time zone, hotel chain) in varied
   wording; the assistant acknowledges without repeating the value;
2. distractor exchanges (chitchat, unrelated questions, near misses that share a word
   with a slot but carry no value);
3. probe round 1 ("what's my budget?"): the planted values must be in the context;
4. corrections ("actually my budget is $1,500 now") and retractions ("forget the allergy
   thing, that was my brother"), interleaved with more distractors; a correction never
   repeats the old value, so the old value's text only occurs in superseded turns;
5. more distractors, then probe round 2: the current value (or, for a retracted slot, the
   retraction) must be in the context, and no superseded value may be presented as
   current.

Scores per method and budget:

- retention: the share of probes whose slot's current state is in the context (the
  current value's text, or the retraction's key phrase);
- leakage: probes whose context presents a superseded value as current: a message
  carries the stale value (case-insensitive, as whole words) and is not marked as
  superseded. Marked means: the message's text contains "superseded", or it is the
  content of a plan item whose ``reason`` says "superseded" (tiermem's planner either
  drops superseded turns, or keeps them marked that way).

Every probe is scored on a fresh context, as the first call of its conversation (as the
LoCoMo eval's since 1e7dc5a): tiermem's `context()` runs as a what-if plan
(``record=False``), which keeps no prompt-cache epoch state (planner.epoch) for the next
call. The figures are per probe, and a budget gives the same contexts alone as beside other
budgets. (Before, one budget alone extended each probe's context from the previous probe's
epoch, showing or rewinding past what it retrieved; in the three-budget run the smallest
budget's context was still shaped by the previous probe's largest one. Seed 0: retention
100% and 0 leaks throughout, but tiermem's mean tokens at 500 were 466 alone, 487 in the
three-budget run, 494 in both now; at 1,000 alone 947, now 994 as in the three-budget
run.) Each run's conversations are new to the data dir (`unique_conversation_id`), so no
earlier run's epoch state is there to drop.

Goal (issue 6): 100% retention and 0 leakage at 1,000 tokens. The generator is this
file's own; it shares nothing with the planner's rules, and the planner must not
special-case its templates.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.progress import Progress
from rich.table import Table

from tiermem.evals.baselines import (
    BASELINES,
    METHODS,
    TIERMEM,
    ConvView,
    MethodOutput,
    mean,
    percentiles,
    rank_all,
    run_baseline,
    tiermem_context,
    tiermem_runs,
    unique_conversation_id,
)
from tiermem.memory import Memory
from tiermem.tiers.models import message_text
from tiermem.tiers.tokens import messages_tokens

DEFAULT_PRESSURE_BUDGETS: tuple[int, ...] = (500, 1000, 2000)
DEFAULT_TURNS = 600
DEFAULT_CONVERSATIONS = 3
EXCHANGES_PER_SESSION = 40
START_EPOCH = 1_700_000_000.0
MAX_EXAMPLES = 10


# ---------------------------------------------------------------------------------------
# Slots: what the user plants, corrects, retracts and asks about


@dataclass(frozen=True)
class Retraction:
    text: str
    marker: str  # a phrase that shows the retraction is in the context


@dataclass(frozen=True)
class SlotType:
    key: str
    values: tuple[str, ...]
    plant: tuple[str, ...]  # templates with {v}
    correct: tuple[str, ...]  # templates with {v}; never mention the old value
    retract: tuple[Retraction, ...]
    probes: tuple[str, ...]


SLOTS: tuple[SlotType, ...] = (
    SlotType(
        "budget",
        ("$2,000", "$1,500", "$3,250", "$900", "$4,800", "$2,750"),
        (
            "My budget for the whole trip is {v}, please plan around that.",
            "Keep in mind I can't spend more than {v} in total on this trip.",
            "Hard limit for the trip: {v}. Don't go over it.",
        ),
        (
            "Actually, my budget is {v} now.",
            "Change of plans on money: the trip budget is {v} from here on.",
            "Quick update, make the total budget {v}.",
        ),
        (
            Retraction(
                "Forget the spending limit I gave you, my company is paying for everything now.",
                "my company is paying",
            ),
            Retraction("Drop the budget cap entirely, money is no object on this one.", "money is no object"),
        ),
        (
            "What's my budget?",
            "How much can I spend on the trip?",
            "Remind me of my spending limit for the trip.",
        ),
    ),
    SlotType(
        "allergy",
        ("peanuts", "shellfish", "sesame", "kiwi", "buckwheat"),
        (
            "I'm allergic to {v}, so keep that in mind for any restaurant picks.",
            "Important: I have a serious allergy to {v}.",
            "Please never suggest dishes with {v}, I'm allergic.",
        ),
        (
            "Correction on the allergy: it's {v} I react to, I mixed it up earlier.",
            "I got tested again and the allergy is actually {v}.",
        ),
        (
            Retraction(
                "Forget the allergy thing I mentioned, that was my brother, not me.", "that was my brother"
            ),
            Retraction(
                "Scratch the allergy note, I got retested and I can eat anything.", "i can eat anything"
            ),
        ),
        ("What am I allergic to?", "Any food restrictions I told you about?", "Which foods should I avoid?"),
    ),
    SlotType(
        "database",
        ("Postgres", "MySQL", "MongoDB", "CockroachDB", "MariaDB"),
        (
            "For the backend, use {v} for the database.",
            "We're standardizing on {v}, don't suggest any other database.",
            "Our team only runs {v} in production, so design the schema for that.",
        ),
        (
            "We switched: the database is {v} from now on.",
            "Update from the architecture review: go with {v} for storage.",
        ),
        (
            Retraction(
                "Ignore my database preference, the platform team decides that now.", "platform team decides"
            ),
        ),
        ("Which database should we use?", "What's our database choice for the backend?"),
    ),
    SlotType(
        "flights",
        (
            "red-eye flights",
            "layovers longer than three hours",
            "basic economy fares",
            "flights that depart before 6am",
        ),
        (
            "Never book me {v}, I'm useless the next day.",
            "Travel rule for me: absolutely no {v}.",
            "One rule when you book flights: avoid {v}.",
        ),
        (
            "New travel rule instead of the old one: no {v}.",
            "I changed my mind about flights, the only thing to avoid is {v}.",
        ),
        (Retraction("Drop the flight rule, I'm flexible on flights now.", "flexible on flights"),),
        ("Any flight rules I gave you?", "What kind of flights should you avoid for me?"),
    ),
    SlotType(
        "seat",
        ("aisle seat", "window seat", "exit row seat"),
        ("On planes I always want the {v}.", "Seat preference: {v}, every time."),
        ("Actually, put me in the {v} from now on.", "Switch my seat preference to {v}."),
        (Retraction("Forget the seat preference, any seat is fine now.", "any seat is fine"),),
        ("Where do I like to sit on planes?", "What's my seat preference?"),
    ),
    SlotType(
        "nickname",
        ("Sammy", "Lexi", "Jojo", "Bea", "Teddy"),
        (
            "Call me {v}, everyone does.",
            "By the way, I go by {v}.",
            "Please address me as {v} in your replies.",
        ),
        ("Actually, call me {v} instead.", "I've decided I prefer {v} as my nickname now."),
        (Retraction("Forget the nickname, just use my full name again.", "use my full name"),),
        ("What should you call me?", "What name do I go by?"),
    ),
    SlotType(
        "timezone",
        ("Pacific time", "Central European time", "Tokyo time", "Eastern time", "India Standard Time"),
        ("Schedule all my meetings in {v}.", "I work on {v}, so put every calendar invite in that zone."),
        ("I moved, so schedule everything in {v} from now on.", "Update: my calendar should be in {v} now."),
        (
            Retraction(
                "Never mind the time zone thing, my assistant handles the calendar now.",
                "my assistant handles the calendar",
            ),
        ),
        ("Which time zone do I schedule meetings in?", "What time zone should invites use?"),
    ),
    SlotType(
        "hotel",
        ("Marriott", "Hilton", "Hyatt", "Accor"),
        (
            "Only book {v} hotels for me, I collect points there.",
            "Hotel-wise I stick to {v}, please keep it that way.",
        ),
        ("I switched loyalty programs, book {v} hotels now.", "From now on the hotel chain is {v}."),
        (
            Retraction(
                "Forget the hotel chain rule, I cancelled the loyalty program.",
                "cancelled the loyalty program",
            ),
        ),
        ("Which hotel chain do I prefer?", "What hotels should you book for me?"),
    ),
)

ACKS: tuple[str, ...] = (
    "Got it, I've noted that.",
    "Understood, I'll keep that in mind from now on.",
    "Thanks for the update, noted.",
    "Okay, updated my notes.",
    "Noted. Anything else I should know?",
)

# -- distractors ------------------------------------------------------------------------------

_FILL: dict[str, tuple[str, ...]] = {
    "animal": ("octopus", "crow", "otter", "honeybee", "elephant", "gecko", "dolphin", "beaver"),
    "topic": (
        "volcanoes",
        "the Roman empire",
        "black holes",
        "jazz history",
        "tea ceremonies",
        "origami",
        "the printing press",
        "coral reefs",
        "chess openings",
        "medieval castles",
    ),
    "skill": (
        "watercolor painting",
        "the guitar",
        "Rust programming",
        "sourdough baking",
        "rock climbing",
        "touch typing",
        "bird watching",
        "knitting",
    ),
    "relative": ("aunt", "cousin", "neighbor", "old roommate", "uncle", "grandmother"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "weekend"),
    "weather": ("rainy", "foggy", "weirdly warm", "freezing", "windy", "humid"),
    "genre": ("a sci-fi", "a horror", "a documentary", "an animated", "a detective", "a romance"),
    "opinion": (
        "and honestly it dragged in the middle",
        "and the ending surprised me",
        "and the soundtrack was the best part",
        "and I fell asleep halfway",
    ),
    "concept": (
        "a hash map",
        "recursion",
        "compound interest",
        "photosynthesis",
        "a mutex",
        "inflation",
        "a vaccine trial",
        "a load balancer",
    ),
    "chore": (
        "clean a cast iron pan",
        "fold a fitted sheet",
        "descale a kettle",
        "repot a cactus",
        "organize a closet",
        "remove a wine stain",
    ),
    "food": ("pasta", "rice", "salmon", "broccoli", "potatoes", "lentils", "eggs", "mushrooms"),
    "office": ("printer", "coffee machine", "parking", "snack"),
    "place": ("Iceland", "Patagonia", "the Sahara", "Mongolia", "New Zealand", "the Alps"),
}

DISTRACTOR_USER: tuple[str, ...] = (
    "Random question: how do {animal}s sleep?",
    "Tell me a fun fact about {topic}.",
    "I'm trying to learn {skill}. Where should I even start?",
    "My {relative} is visiting next {weekday}, any ideas for something relaxed to do together?",
    "Ugh, the weather here is {weather} again. Third day in a row.",
    "I watched {genre} movie last night {opinion}.",
    "Can you explain {concept} in simple terms?",
    "What's the easiest way to {chore}?",
    "How long should I cook {food} for dinner tonight?",
    "Do you know anything interesting about {place}?",
    "My coworker keeps complaining about the office {office} budget, it's getting old.",
    "We had a long meeting about databases at work today, pretty boring honestly.",
    "My {relative} is picky about airplane seats too, funny how that runs in families.",
    "I read an article about {topic} on the train this morning, fascinating stuff.",
    "Is it normal to feel tired after a {weekday} like this one?",
    "What's a good podcast about {topic}?",
    "I think I'll try {skill} this {weekday}. Wish me luck.",
    "Quick one: what's the difference between weather and climate?",
    "Remind me to drink more water today, I keep forgetting.",
    "Do {animal}s have good memory?",
)

DISTRACTOR_ASSISTANT: tuple[str, ...] = (
    "Good question! {fact} If you want, I can dig into it a bit more.",
    "Sure. {fact} Let me know if you'd like a longer explanation.",
    "Here's the short version: {fact}",
    "Happy to help. {fact} Does that answer it?",
    "{fact} It's one of those things that sounds simple until you look closely.",
)

FACTS: tuple[str, ...] = (
    "Most of it comes down to practice in short, regular sessions rather than long marathons.",
    "It varies a lot, but the general rule is to start small and adjust as you go.",
    "Researchers still argue about the details, though the broad picture is well understood.",
    "The key idea is breaking a big problem into smaller pieces that are easy to handle.",
    "A common mistake is rushing the first step; patience usually pays off.",
    "There are a few good beginner guides online, and a local class can help with motivation.",
    "The history goes back centuries, with plenty of surprising twists along the way.",
    "In short, it depends on conditions, but a steady routine tends to work best.",
    "The simplest approach is usually the right one to try first.",
    "It helps to write things down, so you can see what changed over time.",
)


@dataclass
class SlotState:
    """What is true for a slot at some point of the conversation."""

    current: str | None  # the current value, None when retracted
    retraction_marker: str | None
    stale: tuple[str, ...]  # values held before and no longer current

    @property
    def expected(self) -> str:
        return self.current if self.current is not None else (self.retraction_marker or "")


@dataclass
class Probe:
    slot: str
    text: str
    state: SlotState
    round: int  # 1: before any change, 2: at the end


@dataclass
class Event:
    kind: str  # "exchange" or "probe"
    messages: list[dict[str, Any]] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    tag: str = "distractor"  # plant / correct / retract / distractor


@dataclass
class GeneratedConversation:
    seed: int
    slots: list[str]
    events: list[Event]
    final: dict[str, SlotState]

    @property
    def n_messages(self) -> int:
        return sum(len(e.messages) for e in self.events)


def _word_rx(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)", re.IGNORECASE)


def contains(text: str, value: str) -> bool:
    return bool(_word_rx(value).search(text))


def _fill(rng: random.Random, template: str) -> str:
    def sub(m: re.Match[str]) -> str:
        return rng.choice(_FILL[m.group(1)])

    return re.sub(r"\{(\w+)\}", sub, template)


def _all_values() -> list[str]:
    return [v for s in SLOTS for v in s.values]


def _distractor(rng: random.Random, banned: Sequence[str]) -> tuple[str, str]:
    for _ in range(100):
        user = _fill(rng, rng.choice(DISTRACTOR_USER))
        reply = rng.choice(DISTRACTOR_ASSISTANT).format(fact=rng.choice(FACTS))
        if not any(contains(user, b) or contains(reply, b) for b in banned):
            return user, reply
    raise RuntimeError("the distractor templates cannot avoid the slot values")  # pragma: no cover


def generate(seed: int, turns: int = DEFAULT_TURNS, *, n_slots: int = 5) -> GeneratedConversation:
    """One conversation of about `turns` messages (user + assistant), deterministic in `seed`."""
    rng = random.Random(seed)
    exchanges = max(30, turns // 2)
    slot_types = rng.sample(list(SLOTS), k=min(n_slots, len(SLOTS)))
    banned = _all_values() + [r.marker for s in SLOTS for r in s.retract] + ["superseded"]
    state: dict[str, SlotState] = {}
    history: dict[str, list[str]] = {}
    events: list[Event] = []

    def exchange(user: str, tag: str = "distractor", reply: str | None = None) -> None:
        if reply is None:
            reply = rng.choice(ACKS)
        events.append(
            Event(
                "exchange",
                [{"role": "user", "content": user}, {"role": "assistant", "content": reply}],
                tag=tag,
            )
        )

    def distractors(n: int) -> None:
        for _ in range(max(0, n)):
            u, a = _distractor(rng, banned)
            exchange(u, reply=a)

    def probe_round(r: int) -> None:
        probes = [Probe(st.key, rng.choice(st.probes), _copy(state[st.key]), r) for st in slot_types]
        events.append(Event("probe", probes=probes, tag=f"probe{r}"))

    # 1. plant, early: within the first ~10% of the exchanges
    plant_span = max(len(slot_types) * 2, exchanges // 10)
    for st in slot_types:
        v = rng.choice(st.values)
        state[st.key] = SlotState(v, None, ())
        history[st.key] = [v]
        exchange(rng.choice(st.plant).format(v=v), tag="plant")
        distractors(rng.randint(0, max(0, plant_span // len(slot_types) - 1)))
    # 2. pressure, then probe round 1 at ~45%
    distractors(int(exchanges * 0.45) - len(events))
    probe_round(1)
    # 3. corrections and retractions between ~45% and ~75%
    actions = ["correct", "retract"] + [
        rng.choice(["correct", "retract", "keep", "correct2"]) for _ in slot_types[2:]
    ]
    rng.shuffle(actions)
    changes: list[tuple[SlotType, str]] = []
    for st, act in zip(slot_types, actions, strict=False):
        if act == "correct2":
            changes += [(st, "correct"), (st, "correct")]
        elif act != "keep":
            changes.append((st, act))
    rng.shuffle(changes)
    change_span = int(exchanges * 0.30)
    gap = max(1, change_span // max(1, len(changes)))
    for st, act in changes:
        cur = state[st.key]
        if cur.current is None:  # already retracted: a correction re-establishes a value
            act = "correct"
        if act == "correct":
            choices = [v for v in st.values if v not in history[st.key]] or [
                v for v in st.values if v != cur.current
            ]
            v = rng.choice(choices)
            stale = tuple(dict.fromkeys([*cur.stale, *([cur.current] if cur.current else [])]))
            state[st.key] = SlotState(v, None, tuple(s for s in stale if s != v))
            history[st.key].append(v)
            exchange(rng.choice(st.correct).format(v=v), tag="correct")
        else:
            r = rng.choice(st.retract)
            stale = tuple(dict.fromkeys([*cur.stale, *([cur.current] if cur.current else [])]))
            state[st.key] = SlotState(None, r.marker, stale)
            exchange(r.text, tag="retract")
        distractors(rng.randint(max(0, gap // 2), gap))
    # 4. the rest, then probe round 2 at the end
    n_ex = sum(1 for e in events if e.kind == "exchange")
    distractors(exchanges - n_ex)
    probe_round(2)
    return GeneratedConversation(
        seed, [s.key for s in slot_types], events, {k: _copy(v) for k, v in state.items()}
    )


def _copy(s: SlotState) -> SlotState:
    return SlotState(s.current, s.retraction_marker, tuple(s.stale))


# ---------------------------------------------------------------------------------------
# Scoring


@dataclass
class ProbeScore:
    retained: bool
    leaked: list[str]
    tokens: int
    ms: float
    over_budget: bool
    round: int
    token_mismatch: bool = False


def score_probe(probe: Probe, out: MethodOutput, superseded_texts: Sequence[str]) -> tuple[bool, list[str]]:
    """(retained, stale values presented as current).

    Leakage is judged line by line, because a planner may pack several turns into one
    message (e.g. a block of pinned facts, one per line): a line that carries a stale
    value leaks unless it says "superseded" or carries the text of a turn that a plan
    item marked superseded."""
    everything = "\n".join(message_text(m) for m in out.messages)
    expected = probe.state.expected
    retained = bool(expected) and contains(everything, expected)
    marked_texts = [t.strip() for t in superseded_texts if t and t.strip()]
    lines = everything.splitlines()
    leaked: list[str] = []
    for stale in probe.state.stale:
        for line in lines:
            if not contains(line, stale):
                continue
            if "superseded" in line.lower() or any(t in line for t in marked_texts):
                continue
            leaked.append(stale)
            break
    return retained, leaked


def summarize(scores: Sequence[ProbeScore]) -> dict[str, Any]:
    r1 = [s for s in scores if s.round == 1]
    r2 = [s for s in scores if s.round == 2]

    def ret(xs: Sequence[ProbeScore]) -> float | None:
        return round(sum(1 for s in xs if s.retained) / len(xs), 4) if xs else None

    leaks = sum(1 for s in scores if s.leaked)
    return {
        "retention": ret(scores),
        "retention_before_changes": ret(r1),
        "retention_after_changes": ret(r2),
        "leakage": leaks,
        "leakage_rate": round(leaks / len(scores), 4) if scores else None,
        "probes": len(scores),
        "mean_context_tokens": None if not scores else round(mean([s.tokens for s in scores]) or 0.0, 1),
        "max_context_tokens": max((s.tokens for s in scores), default=None),
        "context_ms": percentiles([s.ms for s in scores]),
        "budget_violations": sum(1 for s in scores if s.over_budget),
        "token_mismatches": sum(1 for s in scores if s.token_mismatch),
    }


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class PressureRun:
    result: dict[str, Any]


def run_pressure(
    memory: Memory,
    *,
    seed: int = 0,
    budgets: Sequence[int] = DEFAULT_PRESSURE_BUDGETS,
    turns: int = DEFAULT_TURNS,
    conversations: int = DEFAULT_CONVERSATIONS,
    methods: Sequence[str] = METHODS,
    hot: bool = True,
    progress: Progress | None = None,
) -> PressureRun:
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise ValueError("budgets must be positive integers")
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; known: {list(METHODS)}")
    use_tiermem = tiermem_runs(memory, methods, ", baselines only")
    baselines = [m for m in BASELINES if m in methods]
    active = ([TIERMEM] if use_tiermem else []) + baselines
    gens = [generate(seed * 1000 + i, turns) for i in range(conversations)]
    scores: dict[int, dict[str, list[ProbeScore]]] = {b: {m: [] for m in active} for b in budgets}
    examples: dict[int, list[dict[str, Any]]] = {b: [] for b in budgets}
    total = sum(g.n_messages for g in gens)
    task = progress.add_task("pressure (turns)", total=total) if progress is not None else None
    t0 = time.perf_counter()
    conv_ids: list[str] = []
    for g in gens:
        conv = unique_conversation_id(memory, f"pressure-{g.seed}")
        conv_ids.append(conv)
        ns = conv
        view = ConvView(conv)
        texts: dict[int, str] = {}
        n_exchange = 0
        for ev in g.events:
            if ev.kind == "exchange":
                session = n_exchange // EXCHANGES_PER_SESSION
                t_ex = START_EPOCH + session * 86_400 + (n_exchange % EXCHANGES_PER_SESSION) * 60
                msgs = [
                    dict(m, session_id=f"session_{session + 1}", created_at=t_ex + i)
                    for i, m in enumerate(ev.messages)
                ]
                positions = memory.append_many(conv, msgs, namespace=ns)
                for m, p in zip(ev.messages, positions, strict=True):
                    texts[p] = str(m["content"])
                n_exchange += 1
                if progress is not None and task is not None:
                    progress.advance(task, len(msgs))
                continue
            memory.catch_up(conv, namespace=ns)
            view.refresh(memory)
            for probe in ev.probes:
                stale_texts = [t for p, t in texts.items() if any(contains(t, s) for s in probe.state.stale)]
                rankings = rank_all(memory, view, probe.text, baselines) if baselines else None
                full_score: ProbeScore | None = None
                for b in budgets:
                    for name in active:
                        if name == TIERMEM:
                            t = time.perf_counter()
                            # a what-if plan: no epoch carried to the next probe (or budget)
                            out = tiermem_context(memory, conv, probe.text, b, namespace=ns, record=False)
                            ms = (time.perf_counter() - t) * 1000
                            sup = [texts[p] for p in out.superseded_positions if p in texts]
                            ok = messages_tokens(memory.tokens, out.messages) == out.tokens
                        elif name == "full_context" and full_score is not None:
                            scores[b][name].append(full_score)
                            continue
                        else:
                            out, ms = run_baseline(name, view, rankings, b)
                            sup, ok = [], True
                        retained, leaked = score_probe(probe, out, sup)
                        s = ProbeScore(
                            retained,
                            leaked,
                            out.tokens,
                            ms,
                            over_budget=name != "full_context" and out.tokens > b,
                            round=probe.round,
                            token_mismatch=not ok,
                        )
                        if name == "full_context":
                            full_score = s
                        scores[b][name].append(s)
                        if name == TIERMEM and (not retained or leaked) and len(examples[b]) < MAX_EXAMPLES:
                            examples[b].append(
                                {
                                    "conversation": conv,
                                    "slot": probe.slot,
                                    "probe": probe.text,
                                    "round": probe.round,
                                    "expected": probe.state.expected,
                                    "retained": retained,
                                    "leaked": leaked,
                                    "stale_turns": len(stale_texts),
                                }
                            )
    budget_results: dict[str, Any] = {}
    for b in budgets:
        entry: dict[str, Any] = {"method": TIERMEM}
        if use_tiermem:
            entry.update({"available": True, **summarize(scores[b][TIERMEM]), "failures": examples[b]})
        else:
            entry.update({"available": False, "retention": None, "leakage": None, "probes": 0})
        entry["baselines"] = {m: summarize(scores[b][m]) for m in baselines}
        budget_results[str(b)] = entry
    result: dict[str, Any] = {
        "seed": seed,
        "conversations": conversations,
        "turns_per_conversation": [g.n_messages for g in gens],
        "slots": [g.slots for g in gens],
        "hot_tier": hot,
        "hot_budget_tokens": memory.config.hot_budget_tokens if hot else None,
        "tokenizer": memory.tokens.name,
        "elapsed_s": round(time.perf_counter() - t0, 2),
        "budgets": budget_results,
    }
    if len(budgets) == 1:
        result.update(budget_results[str(budgets[0])])
        result["budget"] = budgets[0]
    return PressureRun(result)


def table(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"Eviction pressure (seed {result['seed']}, {result['conversations']} conversations of "
        f"{result['turns_per_conversation']} turns; hot tier {'on' if result['hot_tier'] else 'OFF'})"
    )
    for col in (
        "budget",
        "method",
        "retention %",
        "before %",
        "after %",
        "leaks",
        "probes",
        "tokens",
        "p50 ms",
    ):
        t.add_column(col, justify="left" if col in ("budget", "method") else "right")

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    for b, entry in result["budgets"].items():
        rows = [(TIERMEM, entry)] if entry.get("available") else []
        rows.extend(entry["baselines"].items())
        for name, e in rows:
            t.add_row(
                b,
                name,
                pct(e["retention"]),
                pct(e["retention_before_changes"]),
                pct(e["retention_after_changes"]),
                str(e["leakage"]),
                str(e["probes"]),
                "-" if e["mean_context_tokens"] is None else f"{e['mean_context_tokens']:,.0f}",
                "-" if e["context_ms"]["p50"] is None else f"{e['context_ms']['p50']:.1f}",
            )
        t.add_section()
    return t
