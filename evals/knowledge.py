"""Knowledge-update eval: is a correction current every time, and does the record say
what was true when?

Cases: ``evals/data/knowledge_cases.jsonl``, 73 short conversations written by hand for
this eval (not from LoCoMo) over travel, support, personal-assistant and coding topics.
Each holds some of: corrections, retractions without a new value, partial updates
("also add Porto"), questions and statements that contain update words ("now",
"actually", "change", "update", "instead") without correcting anything, assistant
echoes of a value ("Got it, 2,000 EUR"), chains (A, then B, then C), and two facts in
one turn of which one is corrected. The last twelve (ids ``sup-*``) are the session-33
review's (r_sup): corrections a swap, a wish's clause, a channel's other name or an old
value named another way once kept from being recorded, and four look-alikes. Every case
lists:

- ``supersede``: the (old, new) pairs of user turns a correct system marks superseded
  (positions into the case's own turns);
- ``echo``: (assistant turn, new) pairs: the echo of an old value follows its source;
- ``present``: questions about now, with the value that must be presented as current
  and (optionally) a stale string that must not be;
- ``past``: questions about before, with the old value that must be shown with its
  validity interval.

Ingest: each case turn is followed by ``FILLER_PAIRS`` neutral exchanges (drawn from
``FILLER``; not between a message and the reply to it), so the facts sit outside the recent tail at the eval budget as they do in a
real conversation, and turns are an hour apart (validity intervals then carry dates).

Scores (each probe is asked the way an agent asks: on a fork, append the question, call
``context()`` at ``BUDGET`` tokens):

- supersession precision and recall over user-turn pairs (a pair counts only with the
  right target and the right superseding turn), and echo recall;
- present share: the current value appears in a line not marked as superseded, and the
  stale string appears in no unmarked line (the probe itself excluded);
- past share: the old value appears in a line that carries its interval ("valid ...
  until ...").

A pair counts at either granularity: the whole turn superseded, or one of its statements
(``facts()`` lists both). A line is marked when it says "superseded" or "not current" (the
convention of ``evals/pressure.py``). Run: ``python -m tiermem.evals.knowledge [--json]
[--errors] [--cases evals/data/knowledge_heldout.jsonl]``; ``--locomo FILE`` instead lists
every supersession decided on LoCoMo conversations, for judging precision by reading;
``--pairs FILE`` instead scores a file of supersession pairs in the format of
``evals/data/supersede_cases.jsonl`` through the library's path (`pair_census`).

``knowledge_heldout.jsonl`` (24 conversations, also written by us) was written after the
first set had been tuned on and before the statement-level and chain rules, and scored
blind once on the code before them: turns holding several facts of which one is
corrected, chains whose steps share no word or slot, and look-alikes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.models import message_text

CASES_PATH = Path(__file__).parent / "data" / "knowledge_cases.jsonl"
# Written after the first set was tuned on, before the statement-level and chain rules:
# turns holding several facts of which one is corrected, chains whose steps share no
# word or slot, and turns that look like such updates but are not (scored blind first).
HELDOUT_PATH = Path(__file__).parent / "data" / "knowledge_heldout.jsonl"
# a third set of 16 conversations, written 2026-12-03 after every rule above and scored
# blind once (README, "Knowledge updates")
FRESH_PATH = Path(__file__).parent / "data" / "knowledge_fresh.jsonl"
# a fourth set of 16, written after the third set's fixes and scored blind once
FOURTH_PATH = Path(__file__).parent / "data" / "knowledge_fourth.jsonl"
# 26 pairs written before the supersession rules of 2026-12-06's second round and scored
# blind once (README, "Knowledge updates"): `--pairs`
PAIRS_HELDOUT_PATH = Path(__file__).parent / "data" / "supersede_heldout2.jsonl"
BUDGET = 300  # tokens per probe context: the facts do not all fit, as in a long chat
FILLER_PAIRS = 3  # neutral exchanges after each case turn
TURN_SECONDS = 3600.0  # an hour between turns, so intervals span dates
START = 1_777_600_000.0  # 2026-05-01 (UTC), a fixed clock for reproducible renderings
MARKED = re.compile(r"superseded|not current", re.I)
INTERVAL = re.compile(r"valid\b.*\buntil\b", re.I)
# Neutral exchanges: no values, no update words, no questions, nothing to supersede.
FILLER: tuple[tuple[str, str], ...] = (
    ("I had a long day at work.", "Sorry to hear that, hope the evening is calmer."),
    ("The weather was lovely this morning.", "Nice, sunshine helps."),
    ("I watched a documentary about whales yesterday.", "Whales are fascinating animals."),
    ("My cat knocked a glass off the table.", "Cats do love gravity experiments."),
    ("I finally finished that novel.", "Congratulations on finishing it."),
    ("The neighbours are painting their fence.", "A fresh coat makes a difference."),
    ("I made pancakes for breakfast.", "Pancakes are a great start."),
    ("Traffic was terrible on the bridge.", "Bridges are bottlenecks at rush hour."),
    ("I went for a short walk by the river.", "Walks by water are relaxing."),
    ("The printer jammed again at the office.", "Printers have a talent for that."),
    ("I tried a new podcast about history.", "History podcasts can be gripping."),
    ("My plants are growing fast this spring.", "Spring growth is always rewarding."),
)


def load_cases(path: Path = CASES_PATH) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _ingest(memory: Memory, conv: str, case: dict[str, Any]) -> dict[int, int]:
    """Append the case with filler; returns case position -> log position."""
    msgs: list[dict[str, Any]] = []
    where: dict[int, int] = {}
    k = 0
    turns = case["turns"]
    for i, t in enumerate(turns):
        where[i] = len(msgs)
        msgs.append({"role": t["role"], "content": t["content"]})
        if i + 1 < len(turns) and turns[i + 1]["role"] == "assistant":
            continue  # a reply follows its message directly
        for _ in range(FILLER_PAIRS):
            u, a = FILLER[k % len(FILLER)]
            k += 1
            msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    for n, m in enumerate(msgs):
        m["created_at"] = START + n * TURN_SECONDS
    memory.append_many(conv, msgs)
    memory.catch_up(conv)
    return where


def _lines(ctx_messages: list[dict[str, Any]], query: str) -> list[str]:
    out: list[str] = []
    for m in ctx_messages:
        text = message_text(m)
        if text.strip() == query.strip():
            continue  # the probe itself
        out += [ln for ln in text.splitlines() if ln.strip()]
    return out


def _present_ok(lines: list[str], current: str | None, stale: str | None) -> bool:
    unmarked = [ln.lower() for ln in lines if not MARKED.search(ln)]
    if current is not None and not any(current.lower() in ln for ln in unmarked):
        return False
    return not (stale is not None and any(stale.lower() in ln for ln in unmarked))


def _past_ok(lines: list[str], old: str) -> bool:
    return any(old.lower() in ln.lower() and INTERVAL.search(ln) for ln in lines)


def _ask(memory: Memory, conv: str, last: int, n: int, query: str) -> list[str]:
    fork = memory.fork(conv, last, new_id=f"{conv}.p{n}")
    memory.append(fork, {"role": "user", "content": query}, created_at=START + (last + 2) * TURN_SECONDS)
    ctx = memory.context(fork, query, BUDGET, namespace_recall=False)
    return _lines(ctx.messages, query)


def run(memory: Memory, cases: list[dict[str, Any]]) -> dict[str, Any]:
    tp = fp = fn = 0
    echo_hit = echo_n = 0
    present_ok = present_n = past_ok = past_n = 0
    errors: list[str] = []
    by_kind: dict[str, list[int]] = {}
    for case in cases:
        conv = f"k-{case['id']}"
        where = _ingest(memory, conv, case)
        back = {v: k for k, v in where.items()}
        rows = memory.cold.turns(conv)
        # a pair counts whether the whole turn or one of its statements was superseded
        # (facts() lists both: a statement of a turn that holds several facts)
        ended = [(v.position, v.until_position) for v in memory.facts(conv)
                 if v.role == "user" and v.until_position is not None]
        # a filler turn has no case position: each one superseded is its own false
        # positive (as a case pair they would all be (-1, -1) and count once in a set)
        got = {(back[p], back.get(new, -1)) for p, new in ended if p in back}
        filler = sorted((p, new) for p, new in ended if p not in back)
        want = {tuple(p) for p in case["supersede"]}
        c_tp = len(got & want)
        tp += c_tp
        fp += len(got - want) + len(filler)
        fn += len(want - got)
        for p in sorted(got - want):
            errors.append(f"{case['id']}: superseded {p} (not expected)")
        for old_pos, new_pos in filler:
            errors.append(f"{case['id']}: filler turn at log position {old_pos} superseded by log position {new_pos}")
        for p in sorted(want - got):
            errors.append(f"{case['id']}: missed {p}")
        ends = {(v.position, v.until_position) for v in memory.facts(conv) if v.until_position is not None}
        ends |= {(r.position, r.superseded_by) for r in rows if r.superseded_by is not None}
        for a, new in case["echo"]:
            echo_n += 1
            if (where[a], where[new]) in ends:
                echo_hit += 1
            else:
                errors.append(f"{case['id']}: echo #{a} not tied to #{new}")
        last = memory.cold.last_position(conv)
        n = 0
        for pr in case["present"]:
            lines = _ask(memory, conv, last, n, pr["query"])
            n += 1
            ok = _present_ok(lines, pr.get("current"), pr.get("stale"))
            present_n += 1
            present_ok += ok
            if not ok:
                errors.append(f"{case['id']}: present {pr['query']!r} -> {[ln for ln in lines][:8]}")
            for kind in case["kinds"]:
                by_kind.setdefault(kind, [0, 0])
                by_kind[kind][0] += ok
                by_kind[kind][1] += 1
        for pa in case["past"]:
            lines = _ask(memory, conv, last, n, pa["query"])
            n += 1
            ok = _past_ok(lines, pa["old"])
            past_n += 1
            past_ok += ok
            if not ok:
                errors.append(f"{case['id']}: past {pa['query']!r} -> {[ln for ln in lines][:8]}")
    return {
        "cases": len(cases),
        "supersession": {"precision": tp / max(1, tp + fp), "recall": tp / max(1, tp + fn),
                         "tp": tp, "fp": fp, "fn": fn},
        "echo_recall": echo_hit / max(1, echo_n), "echo_n": echo_n,
        "present_share": present_ok / max(1, present_n), "present_n": present_n,
        "past_share": past_ok / max(1, past_n), "past_n": past_n,
        "present_by_kind": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_kind.items())},
        "budget": BUDGET,
        "errors": errors,
    }


def locomo_census(memory: Memory, path: Path, limit: int | None = None) -> dict[str, Any]:
    """Every supersession decided on LoCoMo conversations (data nobody here wrote, with
    few real corrections): whole-turn pairs and statement rows, each with both texts, for
    judging precision by reading them. Appended as the LoCoMo harness does (a session per
    batch), so live-sized batches search by meaning as a service's appends do."""
    from tiermem.evals.locomo import conversation_ids, ingest_sample, load_samples

    out: dict[str, Any] = {"conversations": 0, "user_turns": 0, "pairs": [], "statements": []}
    samples = load_samples(path)[:limit]
    ids = conversation_ids([s.sample_id for s in samples], memory.config.max_id_chars)  # as import makes them
    for sample, cid in zip(samples, ids, strict=True):
        got = ingest_sample(memory, sample, cid=cid)
        key = memory.cold.key_of(got.namespace, got.conversation_id) or got.conversation_id
        memory.catch_up(got.conversation_id, namespace=got.namespace)
        rows = memory.cold.turns(key)
        texts = {m.position: m.text for m in memory.cold.history(key)}
        out["conversations"] += 1
        out["user_turns"] += sum(1 for r in rows if r.role == "user")
        for r in rows:
            if r.superseded_by is not None:
                out["pairs"].append({"conversation": got.conversation_id, "old": r.position, "new": r.superseded_by,
                                     "role": r.role, "old_text": texts.get(r.position, ""),
                                     "new_text": texts.get(r.superseded_by, "")})
        for st in memory.cold.superseded_statements(key):
            out["statements"].append({"conversation": got.conversation_id, "old": st.position,
                                      "new": st.superseded_by,
                                      "statement": texts.get(st.position, "")[st.start:st.end],
                                      "new_text": texts.get(st.superseded_by, "")})
    return out


def pair_census(memory: Memory, path: Path) -> dict[str, Any]:
    """Score supersession pairs (``{"earlier": [texts], "correction": text, "expected":
    index | null}`` per line, as ``supersede_cases.jsonl``) through the library's path,
    where ``evals.classifier_eval`` calls ``find_superseded`` alone: each case is a
    conversation of its user turns, each answered "Noted.", caught up; what the correction
    superseded (a whole turn or a statement) is compared with ``expected``."""
    cases = load_cases(path)
    out: dict[str, Any] = {"n": len(cases), "right": 0, "wrong": 0, "missed": 0, "errors": []}
    for i, case in enumerate(cases):
        conv = f"pair-{i}"
        users = [*case["earlier"], case["correction"]]
        for u in users:
            memory.append_many(conv, [{"role": "user", "content": u}, {"role": "assistant", "content": "Noted."}])
        memory.catch_up(conv)
        last = 2 * (len(users) - 1)  # user turn j at position 2 * j
        rows = memory.cold.turns(conv, start=0, end=last)
        by = {r.position: r.superseded_by for r in rows if r.superseded_by is not None}
        by.update((st.position, st.superseded_by)
                  for st in memory.cold.superseded_statements(conv, [r.position for r in rows]))
        got = sorted(q // 2 for q, new in by.items() if new == last)
        want = [] if case["expected"] is None else [case["expected"]]
        verdict = "right" if got == want else "wrong" if got else "missed"
        out[verdict] += 1
        if verdict != "right":
            out["errors"].append(f"{verdict}: {case['correction']!r} -> {got}, expected {case['expected']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.knowledge", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--errors", action="store_true", help="list every miss")
    ap.add_argument("--cases", type=Path, default=CASES_PATH,
                    help=f"a case file (default {CASES_PATH.name}; {HELDOUT_PATH.name} holds the held-out set, "
                         f"{FRESH_PATH.name} and {FOURTH_PATH.name} the third and fourth)")
    ap.add_argument("--locomo", type=Path, default=None,
                    help="instead: list every supersession decided on this LoCoMo file (precision by reading)")
    ap.add_argument("--pairs", type=Path, default=None,
                    help=f"instead: score a file of supersession pairs through the library's path "
                         f"({PAIRS_HELDOUT_PATH.name} holds a held-out set)")
    ap.add_argument("--limit-samples", type=int, default=None)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-knowledge-"))
    try:
        with Memory(Config(data_dir=tmp), hot=False, background_indexing=False) as mem:
            if args.locomo is not None:
                census = locomo_census(mem, args.locomo, args.limit_samples)
                print(json.dumps(census, ensure_ascii=False, indent=1))
                return 0
            if args.pairs is not None:
                pairs = pair_census(mem, args.pairs)
                if args.json:
                    print(json.dumps(pairs, ensure_ascii=False, indent=1))
                else:
                    print(f"supersession pairs ({args.pairs.name}): {pairs['right']} of {pairs['n']} right, "
                          f"{pairs['wrong']} wrong supersessions, {pairs['missed']} missed")
                    for e in pairs["errors"] if args.errors else ():
                        print("  " + e)
                return 0
            res = run(mem, load_cases(args.cases))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(res, ensure_ascii=False, indent=1))
        return 0
    s = res["supersession"]
    print(f"knowledge updates ({args.cases.name}), {res['cases']} conversations, budget {res['budget']}")
    print(f"  supersession precision {s['precision']:.3f} recall {s['recall']:.3f} "
          f"(tp {s['tp']}, fp {s['fp']}, fn {s['fn']})")
    print(f"  echo follows source {res['echo_recall']:.3f} of {res['echo_n']}")
    print(f"  present questions, only the current value as current: {res['present_share']:.3f} "
          f"of {res['present_n']}  {res['present_by_kind']}")
    print(f"  past questions, old value with its interval: {res['past_share']:.3f} of {res['past_n']}")
    if args.errors:
        for e in res["errors"]:
            print("  " + e, file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
