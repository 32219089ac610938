"""Stored rows of the wrong shape never make an inspector page answer 500 (the project's
rule: no input, stored or sent, produces a 5xx). A stored plan decodes safely since
test_stored_json_derived.py, but one that decodes to an object of the wrong shape still
broke the plans page; so did a view, a plan or a conversation row whose columns SQLite
holds as text or as a number no page can show. Before (a review, 2026-12-06), every case
below answered 500 on the page named (the plan shapes `{}` and a nested query class
rendered silently instead: nothing, or a dict's text, with no word of what was wrong).

Now a stored plan goes through `planner.plan.read_stored_plan`: what passes renders, each
part that does not is a visible note naming the field and the limit; an odd column makes
its row salvaged (a view, a plan row of no turn) or shown as "-" (a time).

One store seeded through Memory, copied per case; each row rewritten behind tiermem's
back in SQLite, each page requested through the real app.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from html import unescape
from pathlib import Path
from typing import Any

import pytest
import sqlean
from fastapi.testclient import TestClient

from tiermem import Config, Memory
from tiermem.memory import MAX_BUDGET_TOKENS
from tiermem.planner.plan import MAX_STORED_TOKENS
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

CONV = "odd-rows"
QUERY = "shipping label"
TURNS = 8
NOTE = "Part of this stored plan cannot be shown"
HUGE = 10**400  # an integer JSON holds and no column or count does
PLANS = f"/ui/c/{CONV}/plans"


def _config(root: Path) -> Config:
    return Config(data_dir=root / "data", store_plans=True)


def _open(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(cfg, embedder=embedder, hot=False, background_indexing=False)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Path:
    """A conversation with a rolling view and two stored plans at different turns."""
    root = tmp_path_factory.mktemp("stored-shapes")
    with _open(_config(root), embedder) as m:
        m.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": f"turn {i}: the shipping label printed"} for i in range(TURNS - 1)])
        m.catch_up()
        assert m.consolidate(CONV) >= 1
        m.context(CONV, QUERY, 5_000)  # a plan at turn TURNS - 2
        m.append(CONV, {"role": "assistant", "content": "turn 7: reprinted"})
        m.context(CONV, QUERY, 5_000)  # a plan at turn TURNS - 1: the one the page shows first
    return root


@pytest.fixture
def store(seeded: Path, tmp_path: Path) -> Config:
    shutil.copytree(seeded / "data", tmp_path / "data")
    return _config(tmp_path)


def _sql(cfg: Config, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlean.connect(str(cfg.db_path), isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _get(cfg: Config, embedder: FastEmbedder, *paths: str) -> list[tuple[int, str]]:
    with _open(cfg, embedder) as m:
        app = create_app(cfg, m, auth=False, start_scheduler=False)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
            return [(r.status_code, unescape(r.text)) for r in (client.get(p) for p in paths)]


def _newest_plan(cfg: Config) -> dict[str, Any]:
    (text,) = _sql(cfg, "SELECT plan FROM plans WHERE last_position = ?", (TURNS - 1,))[0]
    plan: dict[str, Any] = json.loads(text)
    assert plan["items"], "the seeded plan must have items for the item cases"
    return plan


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: p.update(fields)


def _first_item(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["items"][0].update(fields)


def _drop_first_item(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["items"][0].pop(key)


# (id, how the newest stored plan is rewritten, what its note names)
PLAN_SHAPES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    # an item without the layer it belongs to: the page grouped by it (KeyError)
    ("item-without-slice", _drop_first_item("slice"), "items[0].slice: Field required"),
    # an item without its tokens: the chart summed them (KeyError)
    ("item-without-tokens", _drop_first_item("tokens"), "items[0].tokens: Field required"),
    # a string where the list of items is
    ("items-a-string", _set(items="all of them"), "items: not a list but str"),
    # a string where an item is
    ("item-a-string", lambda p: p["items"].insert(0, "tail"), "items[0]: Input should be a valid dictionary"),
    # a number where a layer's name is (unhashable nesting: a list)
    ("item-slice-nested", _first_item(slice=["tail"]), "items[0].slice: Input should be a valid string"),
    # a layer no plan has
    ("item-slice-unknown", _first_item(slice="basement"), "items[0].slice: Value error, not one of"),
    # text where an item's tokens are: the chart added them
    ("item-tokens-text", _first_item(tokens="many"), "items[0].tokens: Input should be a valid integer"),
    # text where a score is: the page formats it with %.3f
    ("item-score-text", _first_item(score="high"), "items[0].score: Input should be a valid number"),
    # a number where an item's positions are: the page slices them
    ("item-positions-a-number", _first_item(positions=3), "items[0].positions: Input should be a valid list"),
    # a position past any log
    ("item-position-huge", _first_item(positions=[HUGE]), "items[0].positions.0: Input should be less than"),
    # text where the plan's token count is
    ("tokens-text", _set(tokens="many"), "tokens: Input should be a valid integer"),
    # a budget past the largest a call accepts: the limit is named
    ("budget-huge", _set(budget=HUGE), f"budget: Input should be less than or equal to {MAX_STORED_TOKENS}"),
    # a list where the cache report is
    ("cache-a-list", _set(cache=[1, 2]), "cache: Input should be a valid dictionary"),
    # numbers where the tiers' states are
    ("tiers-numbers", _set(tiers={"hot": 1}), "tiers.hot: Input should be a valid string"),
    # a list where the shares are
    ("shares-a-list", _set(shares=[100]), "shares: Input should be a valid dictionary"),
    # strings where the views used are
    ("views-strings", _set(views=["rolling"]), "views[0]: Input should be a valid dictionary"),
    # strings where the breakpoints are
    ("breakpoints-strings", _set(breakpoints=["after 3"]), "breakpoints[0]: Input should be a valid dictionary"),
    # an object where the left-out list is
    ("left-out-an-object", _set(left_out={"slice": "tail"}), "left_out: not a list but dict"),
    # nesting where the query class is (rendered as a dict's text before, silently)
    ("query-class-nested", _set(query_class={"a": [1]}), "query_class: Input should be a valid string"),
    # an object with nothing of a plan (rendered as nothing before, silently)
    ("empty-object", lambda p: p.clear(), "items: missing"),
]
# (id, the plan's JSON text, what its note names) -- numbers only JSON's extensions spell
PLAN_TEXTS = [
    # NaN budget: int() of it raised
    ("budget-nan", '{"budget": NaN, "tokens": 1, "items": []}', "budget: Input should be a valid integer"),
    # infinite budget: int() of it raised
    ("budget-infinite", '{"budget": 1e999, "tokens": 1, "items": []}', "budget: Input should be a valid integer"),
    # a non-finite score: the page formats it
    ("score-nan", '{"budget": 9, "tokens": 1, "items": [{"slice": "tail", "conversation_id": "c", "positions": [1], '
     '"tier": "cold", "fidelity": "full", "tokens": 1, "score": NaN, "reason": "r"}]}',
     "items[0].score: Input should be a finite number"),
]


def _assert_noted(status: int, html: str, problem: str) -> None:
    assert status == 200, html[-2000:]
    assert NOTE in html and problem in html, html[-4000:]
    assert 'id="plan"' in html  # the rest of the plan is still rendered


@pytest.mark.parametrize(("mutate", "problem"), [c[1:] for c in PLAN_SHAPES], ids=[c[0] for c in PLAN_SHAPES])
def test_a_plan_of_the_wrong_shape_renders_with_a_note(store: Config, embedder: FastEmbedder,
                                                       mutate: Callable[[dict[str, Any]], None], problem: str) -> None:
    plan = _newest_plan(store)
    items = len(plan["items"])
    mutate(plan)
    _sql(store, "UPDATE plans SET plan = ? WHERE last_position = ?", (json.dumps(plan), TURNS - 1))
    [(status, html)] = _get(store, embedder, PLANS)
    _assert_noted(status, html, problem)
    if problem.startswith("items[0]") and isinstance(plan.get("items"), list):
        # one bad item hides only itself
        assert html.count('<tr class="item"') == len(plan["items"]) - 1 >= items - 1


@pytest.mark.parametrize(("text", "problem"), [c[1:] for c in PLAN_TEXTS], ids=[c[0] for c in PLAN_TEXTS])
def test_a_plan_with_non_finite_numbers_renders_with_a_note(store: Config, embedder: FastEmbedder, text: str,
                                                            problem: str) -> None:
    _sql(store, "UPDATE plans SET plan = ? WHERE last_position = ?", (text, TURNS - 1))
    [(status, html)] = _get(store, embedder, PLANS)
    _assert_noted(status, html, problem)


def test_the_stored_token_bound_is_the_budget_bound() -> None:
    # planner.plan defines its bound from the budget's (tiers.models): they cannot drift apart
    assert MAX_STORED_TOKENS == MAX_BUDGET_TOKENS


UNREADABLE_VIEW = "cannot be read"  # the views page's note for a stored view it cannot show
# (id, one UPDATE behind tiermem's back, the pages that answered 500, the text each must show)
ODD_ROWS = [
    # a plan's time as text: the time filter compared it with a number
    ("plan-created-text", "UPDATE plans SET created_at = 'yesterday'", [PLANS], ["made -"]),
    # a plan's time past the year 9999: gmtime raised
    ("plan-created-huge", "UPDATE plans SET created_at = 1e300", [PLANS], ["made -"]),
    # a plan row of no turn: int() of its last position raised; the other turn's plans show
    ("plan-turn-text", f"UPDATE plans SET last_position = 'last' WHERE last_position = {TURNS - 1}",
     [PLANS], [f"Plans made at turn {TURNS - 2}"]),
    # a view's time past the year 9999: gmtime raised
    ("view-created-huge", "UPDATE summaries SET created_at = 1e300", [f"/ui/c/{CONV}/views"], ["written -"]),
    # a view's time as text: the store's float() raised on every read of the view
    ("view-created-text", "UPDATE summaries SET created_at = 'soon'",
     [f"/ui/c/{CONV}/views", f"/ui/c/{CONV}"], [UNREADABLE_VIEW, "turn 7"]),
    # a view's version as text: int() raised listing and reading it (a row of no version: not listed)
    ("view-version-text", "UPDATE summaries SET version = 'one'",
     [f"/ui/c/{CONV}/views", f"/ui/c/{CONV}"], ["Not written yet", "turn 7"]),
    # a view's tokens as text: int() raised reading it
    ("view-tokens-text", "UPDATE summaries SET tokens = 'few'",
     [f"/ui/c/{CONV}/views", f"/ui/c/{CONV}"], [UNREADABLE_VIEW, "turn 7"]),
    # a view citing a position no engine holds: the what-if plan looked it up in SQL (OverflowError)
    ("view-position-huge", "UPDATE summaries SET body = '[{\"text\": \"x\", \"positions\": [" + str(HUGE) + "]}]'",
     [f"/ui/c/{CONV}/plan?q=shipping"], ['id="plan"']),
    # the conversation's creation time as text: float() raised
    ("conversation-created-text", "UPDATE conversations SET created_at = 'long ago'", [f"/ui/c/{CONV}"],
     ["turn 7"]),
]


@pytest.mark.parametrize(("sql", "pages", "shown"), [c[1:] for c in ODD_ROWS], ids=[c[0] for c in ODD_ROWS])
def test_odd_stored_columns_never_answer_500(store: Config, embedder: FastEmbedder, sql: str, pages: list[str],
                                             shown: list[str]) -> None:
    _sql(store, sql)
    for page, want, (status, html) in zip(pages, shown, _get(store, embedder, *pages), strict=True):
        assert status == 200, (page, html[-2000:])
        assert want in html, (page, html[-4000:])
