"""The plan: what a `context()` call loaded, at what fidelity, and why.

A plan is data first (`to_dict()` for JSON, the `plans` table, the HTTP API) and text
second (`explain()` for a person asking "why did it load this on turn 37?").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SLICES = ("system", "pinned", "summary", "retrieved", "tail")
FIDELITIES = ("verbatim", "trimmed", "summary", "reference")


@dataclass
class PlanItem:
    slice: str
    conversation_id: str
    positions: list[int]
    tier: str  # hot | cold | warm | caller
    fidelity: str
    tokens: int
    score: float
    reason: str

    def label(self) -> str:
        if not self.positions:
            return "-"
        if len(self.positions) == 1:
            return f"#{self.positions[0]}"
        return f"#{self.positions[0]}..#{self.positions[-1]} ({len(self.positions)})"


@dataclass
class ViewStaleness:
    kind: str
    version: int
    covers: tuple[int, int]
    turns_behind: int
    seconds_behind: float
    over_budget: bool


@dataclass
class Plan:
    conversation_id: str
    query: str | None
    query_class: str
    class_reason: str
    budget: int
    tokens: int = 0
    items: list[PlanItem] = field(default_factory=list)
    left_out: list[PlanItem] = field(default_factory=list)
    views: list[ViewStaleness] = field(default_factory=list)
    tiers: dict[str, str] = field(default_factory=dict)  # tier -> ok | degraded | unused | rebuilt
    degraded: bool = False
    # slice -> tokens of its share of the room (the first packing pass; leftovers can take a
    # slice past it, so it is not a cap)
    shares: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def slice_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for it in self.items:
            out[it.slice] = out.get(it.slice, 0) + it.tokens
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def explain(self) -> str:
        lines = [
            f"context for {self.conversation_id!r}: {self.tokens}/{self.budget} tokens",
            f"query class: {self.query_class} ({self.class_reason})",
            "tiers: " + ", ".join(f"{k}={v}" for k, v in self.tiers.items())
            + ("  [DEGRADED: hot tier unavailable, answered from the cold log]" if self.degraded else ""),
        ]
        per = self.slice_tokens()
        for s in SLICES:
            items = [i for i in self.items if i.slice == s]
            if not items:
                continue
            share = self.shares.get(s)
            lines.append(f"{s}: {per.get(s, 0)} tokens" + (f" (share {share})" if share is not None else "")
                         + f", {len(items)} item(s)")
            for it in items:
                lines.append(f"  {it.label():>14} {it.fidelity:<9} {it.tier:<5} {it.tokens:>5} tok "
                             f"score={it.score:.3f}  {it.reason}")
        for v in self.views:
            lines.append(f"view {v.kind} v{v.version} covers #{v.covers[0]}..#{v.covers[1]}: "
                         f"{v.turns_behind} turns / {v.seconds_behind:.0f}s behind"
                         + (" (over its freshness budget)" if v.over_budget else ""))
        if self.left_out:
            lines.append(f"left out: {len(self.left_out)} item(s)")
            for it in self.left_out[:20]:
                lines.append(f"  {it.label():>14} {it.slice:<9} {it.tokens:>5} tok  {it.reason}")
            if len(self.left_out) > 20:
                lines.append(f"  ... and {len(self.left_out) - 20} more")
        return "\n".join(lines)


@dataclass
class Context:
    """What `Memory.context()` returns: messages ready to send, their exact token
    count (never above the budget) and the plan that chose them."""

    messages: list[dict[str, Any]]
    tokens: int
    plan: Plan
