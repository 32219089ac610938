"""`tiermem demo`: the thirty-second answer to "why does this exist?".

It ingests a long conversation bundled with tiermem (`data/demo_conversation.json`:
six sessions of a personal-assistant and support chat, with constraints planted early
and one corrected later) into a temporary data dir, then asks several kinds of
question. For each, it shows what tiermem's `context()` loads and what plain tail
truncation (the most recent messages that fit) loads under the same token budget, and
whether the turn that holds the answer made it in.

Each question is asked on a fork of the conversation (so the questions do not pile up
in it), the way an agent asks: append the user's message, then call `context()`.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.tiers.models import message_text
from tiermem.tiers.tokens import messages_tokens

if TYPE_CHECKING:
    from rich.console import Console

    from tiermem.config import Config
    from tiermem.memory import Memory
    from tiermem.tiers.embed import Embedder

DATA_FILE = "demo_conversation.json"
NAMESPACE = "demo"


def load_conversation() -> dict[str, Any]:
    """The bundled demo conversation (sessions of turns, plus the questions to ask)."""
    text = resources.files("tiermem").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def tail_truncation(
    memory: Memory, conversation_id: str, budget: int
) -> tuple[list[dict[str, Any]], int, int]:
    """The baseline: the most recent messages that fit in `budget` tokens, counted the
    way tiermem counts. Returns (messages, tokens, first position loaded)."""
    history = memory.history(conversation_id, namespace=NAMESPACE)
    chosen: list[dict[str, Any]] = []
    first = len(history)
    for m in reversed(history):
        candidate = [m.to_openai(), *chosen]
        if messages_tokens(memory.tokens, candidate) > budget:
            break
        chosen = candidate
        first = m.position
    return chosen, messages_tokens(memory.tokens, chosen), first


# A line that says its value no longer holds (the planner's marking of superseded turns).
_MARKED = ("superseded", "not current")


def _found(messages: list[dict[str, Any]], evidence: list[str], stale: Sequence[str] = ()) -> list[bool]:
    """Per evidence string: whether the context presents it as current. Without `stale`
    values, anywhere in the context counts. With them (a corrected value), the evidence
    must sit in a line not marked superseded, and no stale value may sit in an unmarked
    line unless that line also states the current value ("replaces the old 2,000")."""
    lines = [ln.lower() for m in messages for ln in message_text(m).splitlines()]
    if not stale:
        text = "\n".join(lines)
        return [e.lower() in text for e in evidence]
    unmarked = [ln for ln in lines if not any(w in ln for w in _MARKED)]
    cur = [e.lower() for e in evidence]
    stale_shown = any(v.lower() in ln and not any(c in ln for c in cur) for ln in unmarked for v in stale)
    return [not stale_shown and any(c in ln for ln in unmarked) for c in cur]


def _open_memory(config: Config, embedder: Embedder | None) -> tuple[Memory, str]:
    from tiermem.memory import open_with_fallback

    memory, why = open_with_fallback(config, embedder=embedder)
    if why is None:
        return memory, "on (embedded redis-server)"
    return memory, f"off ({' '.join(str(why).split())}); cold log only"


def _consolidate(memory: Memory) -> str:
    """Refresh the warm views once, as the scheduler of a running service would have."""
    sched = memory.make_scheduler()
    refreshed = 0
    for _ in range(5):  # a run refreshes at most max_views_per_run views
        n = sched.run_once()
        refreshed += n
        if n == 0:
            break
    return f"{refreshed} view(s) refreshed"


def run_demo(
    *,
    budget: int = 800,
    config: Config | None = None,
    embedder: Embedder | None = None,
    keep: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> dict[str, Any]:
    """Ingest the demo conversation into a fresh temporary data dir, ask its questions
    and compare tiermem with tail truncation at `budget` tokens. Returns plain data."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tiermem.config import Config
    from tiermem.tiers.redis_server import EmbeddedRedis

    doc = load_conversation()
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-demo-"))
    base = config or Config.load(None, data_dir=tmp, redis_url=None)
    cfg = base.model_copy(update={"data_dir": tmp, "redis_url": None, "store_plans": False})
    try:
        mem, hot_state = _open_memory(cfg, embedder)
    except BaseException:
        EmbeddedRedis(tmp).stop()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    conv = str(doc["conversation_id"])
    step = float(doc.get("seconds_between_turns", 60))
    try:
        total = sum(len(s["turns"]) for s in doc["sessions"])
        with Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=True,
            disable=not progress,
        ) as bar:
            ingest = bar.add_task("ingesting the chat", total=total)
            for session in doc["sessions"]:
                start = dt.datetime.fromisoformat(session["start"]).timestamp()
                msgs = [{**t, "created_at": start + i * step} for i, t in enumerate(session["turns"])]
                mem.append_many(conv, msgs, namespace=NAMESPACE, session_id=session["id"])
                bar.advance(ingest, len(msgs))
            embed = bar.add_task("embedding (first run loads the model)", total=total)
            mem.cold.index_pending(batch=cfg.embedding_batch_size, progress=lambda n: bar.advance(embed, n))
            warm = bar.add_task("refreshing warm views", total=1)
            warm_state = _consolidate(mem)
            bar.advance(warm)
            history = mem.history(conv, namespace=NAMESPACE)
            last = history[-1].position
            ask = bar.add_task("asking", total=len(doc["questions"]))
            rows = []
            for i, q in enumerate(doc["questions"]):
                rows.append(_ask(mem, conv, last, i, q, budget, history))
                bar.advance(ask)
        found_tm = sum(all(r["tiermem"]["found"]) for r in rows)
        found_tail = sum(all(r["tail"]["found"]) for r in rows)
        return {
            "title": doc.get("title", ""),
            "conversation": {
                "id": conv,
                "messages": total,
                "sessions": len(doc["sessions"]),
                "tokens": messages_tokens(mem.tokens, [m.to_openai() for m in history]),
            },
            "budget": budget,
            "hot_tier": hot_state,
            "warm_tier": warm_state,
            "data_dir": str(tmp) if keep else None,
            "questions": rows,
            "score": {"tiermem": found_tm, "tail_truncation": found_tail, "questions": len(rows)},
        }
    finally:
        mem.close()
        if mem.hot is not None and mem.hot.embedded is not None and not keep:
            EmbeddedRedis(tmp).stop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _ask(
    memory: Memory, conv: str, last: int, i: int, q: dict[str, Any], budget: int, history: list[Any]
) -> dict[str, Any]:
    evidence = [str(e) for e in q["evidence"]]
    stale = [str(v) for v in q.get("stale", [])]  # a corrected value's old form: must not read as current
    where = sorted({m.position for m in history for e in evidence if e.lower() in m.text.lower()})
    fork = memory.fork(conv, last, new_id=f"{conv}.q{i}", namespace=NAMESPACE)
    memory.append(
        fork, {"role": "user", "content": q["query"]}, session_id="demo-questions", namespace=NAMESPACE
    )
    ctx = memory.context(fork, q["query"], budget, namespace_recall=False, namespace=NAMESPACE)
    tail_msgs, tail_tokens, tail_first = tail_truncation(memory, fork, budget)
    slices: dict[str, list[int]] = {}
    for item in ctx.plan.items:
        hit = [p for p in item.positions if p in where]
        if hit:
            slices.setdefault(item.slice, []).extend(hit)
    return {
        "kind": q["kind"],
        "query": q["query"],
        "note": q.get("note", ""),
        "evidence": evidence,
        "stale": stale,
        "evidence_positions": where,
        "tiermem": {
            "tokens": ctx.tokens,
            "found": _found(ctx.messages, evidence, stale),
            "query_class": ctx.plan.query_class,
            "slices": ctx.plan.slice_tokens(),
            "evidence_in": slices,
            "messages": len(ctx.messages),
            "degraded": ctx.plan.degraded,
            "explain": ctx.plan.explain(),
        },
        "tail": {
            "tokens": tail_tokens,
            "found": _found(tail_msgs, evidence, stale),
            "messages": len(tail_msgs),
            "from_position": tail_first,
        },
    }


def _mark(found: list[bool]) -> str:
    if len(found) == 1:
        return "yes" if found[0] else "NO"
    return f"{sum(found)}/{len(found)}"


def render(result: dict[str, Any], console: Console, *, explain: bool = False) -> None:
    """The comparison as a table, then the plan behind one answer (all with `explain`)."""
    from rich.table import Table
    from rich.text import Text

    c = result["conversation"]
    console.print(Text(f"tiermem demo: {result['title']}", style="bold"))
    console.print(
        Text(
            f"{c['messages']} messages over {c['sessions']} sessions ({c['tokens']} tokens); "
            f"every answer below gets {result['budget']} tokens. Hot tier: {result['hot_tier']}; "
            f"warm tier: {result['warm_tier']}."
        )
    )
    table = Table(show_lines=True)
    table.add_column("question", overflow="fold", ratio=3)
    table.add_column("answer in", overflow="fold")
    table.add_column("tiermem", overflow="fold", ratio=2)
    table.add_column("tail truncation", overflow="fold", ratio=2)
    for r in result["questions"]:
        tm, tail = r["tiermem"], r["tail"]
        pos = r["evidence_positions"]
        where = ", ".join(f"#{p}" for p in pos[:4]) + (" ..." if len(pos) > 4 else "")
        tm_ok = all(tm["found"])
        tail_ok = all(tail["found"])
        carried = ", ".join(sorted(tm["evidence_in"])) or "-"
        table.add_row(
            Text(f"[{r['kind']}] {r['query']}"),
            Text(where or "-"),
            Text(
                f"{_mark(tm['found'])}  {tm['tokens']} tok\nvia {carried}; class {tm['query_class']}",
                style="green" if tm_ok else "red",
            ),
            Text(
                f"{_mark(tail['found'])}  {tail['tokens']} tok\nlast {tail['messages']} messages "
                f"(from #{tail['from_position']})",
                style="green" if tail_ok else "red",
            ),
        )
    console.print(table)
    s = result["score"]
    console.print(
        Text(
            f"Answer-bearing turns loaded: tiermem {s['tiermem']}/{s['questions']}, "
            f"tail truncation {s['tail_truncation']}/{s['questions']}, same budget.",
            style="bold",
        )
    )
    shown = (
        result["questions"]
        if explain
        else [
            next((r for r in result["questions"] if r["kind"] == "corrected value"), result["questions"][0])
        ]
    )
    for r in shown:
        console.print()
        console.print(Text(f"Why tiermem loaded what it did for {r['query']!r}:", style="bold"))
        console.print(Text(r["tiermem"]["explain"]))
    if result.get("data_dir"):
        console.print(
            Text(
                f"\ndata kept in {result['data_dir']} (conversation {c['id']!r}, namespace "
                f"{NAMESPACE!r}); stop its redis with: tiermem --data-dir {result['data_dir']} stop-redis"
            )
        )
