"""Does the query classifier send a user's message to broad retrieval when it asks for
something from the log, and only then?

    python -m tiermem.evals.query_class_eval [--data FILE] [--no-embeddings] [--json] [--errors]

Data: ``evals/data/query_lookup.jsonl``, one user message per line, ``{"text", "lookup",
"source"}``, written for this project (not from LoCoMo, whose questions are all about third
parties) before it was first scored: messages of support customers, personal-assistant
users, coding-agent users and casual chat. ``lookup`` is true when answering needs a fact
the user (or the assistant) gave earlier in the conversation, beyond the last few turns:
"What was the case number you gave me?", "Which hotel are we staying at in Rome?"; false
for talk, a fresh request, or a question about what was just said ("Can you make it
faster?").

A message is scored as looked up when its class is one the planner retrieves broadly for
(`planner.candidates.RECALL_CLASSES`); every other class retrieves only clearly related
turns, so a fact the message asks for may be missing from its context. Reported: lookup
recall (the share of lookup messages sent to broad retrieval: a miss is what an agent
"forgot"), talk precision (the share of the rest kept narrow: a miss costs cache and
tokens, not correctness), per source. As in production, the embedding prototypes decide
only where no rule does (``--no-embeddings``: rules only).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.planner.candidates import RECALL_CLASSES
from tiermem.planner.classify import QueryClassifier

if TYPE_CHECKING:
    from tiermem.tiers.embed import Embedder

DATA_PATH = Path(__file__).parent / "data" / "query_lookup.jsonl"
# a second set of 77, written 2026-12-03 after the first set's fixes and scored blind once
FRESH_PATH = Path(__file__).parent / "data" / "query_lookup_fresh.jsonl"
# a third set of 38, written after the second set's fixes and scored blind once
THIRD_PATH = Path(__file__).parent / "data" / "query_lookup_third.jsonl"


@dataclass(frozen=True)
class Row:
    text: str
    lookup: bool
    source: str


def load_rows(path: Path = DATA_PATH) -> list[Row]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Row(str(d["text"]), bool(d["lookup"]), str(d["source"])))
    return out


def _share(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def score(rows: list[Row], classes: list[tuple[str, str]]) -> dict[str, Any]:
    """Lookup recall and talk precision of (class, reason) per row, overall and per source."""
    def part(idx: list[int]) -> dict[str, Any]:
        look = [i for i in idx if rows[i].lookup]
        talk = [i for i in idx if not rows[i].lookup]
        return {"lookup_n": len(look), "lookup_recall": _share(sum(classes[i][0] in RECALL_CLASSES for i in look),
                                                               len(look)),
                "talk_n": len(talk), "talk_kept_narrow": _share(sum(classes[i][0] not in RECALL_CLASSES
                                                                    for i in talk), len(talk))}
    every = list(range(len(rows)))
    errors = [{"text": rows[i].text, "lookup": rows[i].lookup, "class": classes[i][0], "reason": classes[i][1]}
              for i in every if rows[i].lookup != (classes[i][0] in RECALL_CLASSES)]
    return {"messages": len(rows), **part(every),
            "by_source": {s: part([i for i in every if rows[i].source == s]) for s in sorted({r.source for r in rows})},
            "errors": errors}


def run(*, embeddings: bool = True, embedder: Embedder | None = None, path: Path = DATA_PATH) -> dict[str, Any]:
    """Score the classifier on `path`; with `embeddings`, the prototypes use `embedder`
    (the packaged model when None)."""
    rows = load_rows(path)
    clf = QueryClassifier()
    if embeddings:
        if embedder is None:
            from tiermem.tiers.embed import SentenceTransformerEmbedder  # slow import: only when asked

            embedder = SentenceTransformerEmbedder()
        vecs = embedder.embed([r.text for r in rows])
        got = [clf.classify(r.text, query_vec=v, embed=embedder.embed) for r, v in zip(rows, vecs, strict=True)]
    else:
        got = [clf.classify(r.text) for r in rows]
    return score(rows, [(c.name, c.reason) for c in got])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.query_class_eval", description=__doc__.split("\n")[0])
    ap.add_argument("--no-embeddings", action="store_true", help="rules only; skip the prototype fallback")
    ap.add_argument("--data", type=Path, default=DATA_PATH,
                    help=f"a message file in the same format (default {DATA_PATH.name}; {FRESH_PATH.name} "
                    f"and {THIRD_PATH.name} are the second and third sets)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--errors", action="store_true", help="list every message scored wrong")
    args = ap.parse_args(argv)
    res = run(embeddings=not args.no_embeddings, path=args.data)
    if args.json:
        print(json.dumps(res, ensure_ascii=False, indent=1))
        return 0
    print(f"query classes ({args.data.name}), {res['messages']} messages")
    print(f"  lookup recall {res['lookup_recall']:.3f} of {res['lookup_n']}; "
          f"talk kept narrow {res['talk_kept_narrow']:.3f} of {res['talk_n']}")
    for s, p in res["by_source"].items():
        print(f"  {s:10} lookup {p['lookup_recall']:.3f} of {p['lookup_n']}, talk {p['talk_kept_narrow']:.3f} "
              f"of {p['talk_n']}")
    if args.errors:
        for e in res["errors"]:
            print(f"  {'missed lookup' if e['lookup'] else 'broad on talk'}: {e['text']!r} -> {e['class']} ({e['reason']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
