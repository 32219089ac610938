"""What the tests of an LLM-summarized view after a correction share (test_view_outdated_llm_once,
test_view_settle_race, test_view_still_outdated_counted): session s1 books the Hilton
Riverside, a later turn corrects it to the Marriott Downtown; replies of a real local
chat-completions endpoint (tests/llm_endpoint.py) that reword each turn of a summary prompt
(`rewords`), or also restate the old hotel in a summary of s1 alone (`restates`); the cold
store on a SQLite file or a fresh PostgreSQL schema (`cold_settings`, for an `engine`
fixture parametrized over `ENGINES`); a Memory whose summarizer is that endpoint
(`open_memory`).

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from llm_endpoint import LLMEndpoint, Reply, Request, completion
from pg_server import fresh_schema

from tiermem import Config, Memory

CONV = "c1"
S1 = ("My flight leaves Monday at 9am. My hotel is the Hilton Riverside.",
      "Got it: Monday 9am flight, Hilton Riverside.")
CORRECTION = "Change of plans: my hotel is now the Marriott Downtown."
OLD_STATEMENT = "My hotel is the Hilton Riverside."  # what the correction takes back
QUERY = "Where am I staying?"
ENGINES = ["sqlite", "postgres"]
_TURN = re.compile(r"^\[#(\d+)\] (\w+): (.*)$", re.M)


def numbers(req: Request) -> set[int]:
    """The positions of the turns a summary request gave the endpoint."""
    return {int(m.group(1)) for m in _TURN.finditer(req.prompt)}


def reworded(prompt: str) -> str:
    """An abstractive summary: each turn of the prompt, reworded (never a substring of it)."""
    return "\n".join(f"- The {m.group(2)} noted: {m.group(3).lower().rstrip('.')} [#{m.group(1)}]"
                     for m in _TURN.finditer(prompt))


def rewords(req: Request) -> Reply:
    return completion(reworded(req.prompt))


def restates(req: Request) -> Reply:
    """`rewords`, but a summary of s1 alone (turns 0 and 1) also quotes the old hotel
    verbatim, whatever the request says now: no refresh can make its view current."""
    old = f"{OLD_STATEMENT} [#0]\n" if numbers(req) <= {0, 1} else ""
    return completion(old + reworded(req.prompt))


def cold_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The cold store's settings for `request.param` (one of `ENGINES`): a SQLite file under
    data_dir, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        return {"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
    return {}


def open_memory(engine: dict[str, Any], tmp_path: Path, endpoint: LLMEndpoint, **settings: Any) -> Memory:
    # llm_api_key_env "": a local endpoint without auth
    return Memory(Config(data_dir=tmp_path / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                         llm_api_key_env="", **engine, **settings), hot=False)


def hilton_current(mem: Memory, conv: str, kind: str, key: str = "") -> bool:
    """Whether the latest view (`kind`, `key`) of `conv` shows the old hotel as current."""
    view = mem.warm.latest(conv, kind, key)
    assert view is not None
    return any("hilton" in s.text.lower() for s in view.sentences if s.status == "current")
