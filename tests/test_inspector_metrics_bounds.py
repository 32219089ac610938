"""The inspector's per-namespace call history is bounded per tenant (top-level namespace).

It kept 1,000 namespaces in one pool, the least recently seen dropped, so a token for
`acme` that made context calls in 1,000 of its own sub-namespaces emptied globex's
/ui/metrics. Now each tenant's namespaces compete only with each other
(`MAX_NAMESPACES_PER_TENANT`), and a tenant is dropped only when more than
`MAX_TENANTS_TRACKED` top-level namespaces have calls, which a scoped token cannot cause.
The metrics are fed real plans, as the context route feeds them; the flood cases fail on
the code before (globex's history was gone).
"""

from __future__ import annotations

import itertools

import pytest
from prometheus_client import CollectorRegistry

from tiermem.inspector import metrics as metrics_module
from tiermem.inspector.metrics import HISTORY_CALLS, PlanMetrics
from tiermem.planner.plan import Plan

FLOOD = 1000  # sub-namespaces one tenant calls in: the audit's number, past any per-tenant bound


def plan(conversation_id: str) -> Plan:
    return Plan(conversation_id, "q", "default", "", 100, tokens=40)


def tracked() -> PlanMetrics:
    ticks = itertools.count()
    return PlanMetrics(CollectorRegistry(), clock=lambda: float(next(ticks)))


# (namespace the victim's calls are in, the flooding tenant's namespaces)
FLOODS = [
    # another tenant's sub-namespaces, as in the audit (globex's history was emptied)
    ("globex", [f"acme/u{i}" for i in range(FLOOD)]),
    # a victim below its top level is safe too
    ("globex/team-1", [f"acme/u{i}" for i in range(FLOOD)]),
    # deeper sub-namespaces of the flooder count towards its own top level
    ("globex", [f"acme/u{i}/s{j}" for i in range(FLOOD // 10) for j in range(10)]),
]


@pytest.mark.parametrize(("victim", "flood"), FLOODS)
def test_one_tenant_cannot_evict_another(victim: str, flood: list[str]) -> None:
    m = tracked()
    for _ in range(3):
        m.observe(victim, plan("g1"))
    for ns in flood:
        m.observe(ns, plan("x"))
    assert [s.conversation_id for s in m.history([victim])] == ["g1"] * 3
    assert victim in m.namespaces(lambda ns: True)


def test_a_tenant_keeps_its_most_recent_namespaces() -> None:
    # the bound holds: the flooder's own least recently seen namespaces go, its latest stay
    m = tracked()
    cap = metrics_module.MAX_NAMESPACES_PER_TENANT
    flood = [f"acme/u{i}" for i in range(cap + 5)]
    for ns in flood:
        m.observe(ns, plan("x"))
    assert m.namespaces(lambda ns: ns.startswith("acme")) == sorted(flood[-cap:])
    assert m.history([flood[0]]) == []


def test_calls_per_namespace_are_bounded() -> None:
    m = tracked()
    for i in range(HISTORY_CALLS + 7):
        m.observe("acme", plan(f"c{i}"))
    kept = m.history(["acme"])
    assert len(kept) == HISTORY_CALLS and kept[-1].conversation_id == f"c{HISTORY_CALLS + 6}"


def test_only_new_tenants_push_out_a_tenant() -> None:
    # more top-level namespaces than the bound (an operator's, or that many tenants): the
    # least recently seen tenant goes, whole; a tenant seen since stays
    m = tracked()
    cap = metrics_module.MAX_TENANTS_TRACKED
    m.observe("first/a", plan("x"))
    m.observe("second", plan("y"))
    m.observe("second", plan("y"))
    for i in range(cap - 2):
        m.observe(f"t{i}", plan("z"))
    m.observe("first", plan("x"))  # first seen again: now second is the least recent
    m.observe("newcomer", plan("z"))
    assert m.history(["second"]) == []
    assert len(m.history(["first", "first/a"])) == 2
    assert len({ns.split("/")[0] for ns in m.namespaces(lambda ns: True)}) == cap
