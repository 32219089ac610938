"""A config file `tiermem config --export` wrote before 2d1fa7f loads again.

2d1fa7f refused slice_shares' per-class pinned / summary / tail and the recall classes'
retrieved (the planner reads none of them), but the export had written all six classes'
shares, so every file it exported, even one of defaults only, was refused ("slice_shares
.recent_recall.pinned is no longer read ..."), while README says an exported file loads
back to the identical Config. Such a key holding the default the old code exported is now
dropped, with one warning per load naming the keys and what to do; a changed value is
refused as before, naming the layer_shares key to set instead. Keyword, env and file alike.

tests/data/export_before_2d1fa7f.{toml,json} are `tiermem --data-dir /var/lib/tiermem
config --export` of 2d1fa7f^ (a149d29), unedited.

Fails before: every loading case (and the CLI's --check) was refused; the refusals passed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tiermem import Config

pytestmark = pytest.mark.usefixtures("clean_env")

DATA = Path(__file__).parent / "data"
OLD_TOML = DATA / "export_before_2d1fa7f.toml"
OLD_JSON = DATA / "export_before_2d1fa7f.json"
# 2d1fa7f^'s `_default_shares`, written out here (not imported from tiermem.config: the
# test must not share a mistake with the code's own table)
OLD_SHARES: dict[str, dict[str, float]] = {
    "recent_recall": {"pinned": 0.1, "summary": 0.05, "retrieved": 0.15, "tail": 0.7},
    "targeted_recall": {"pinned": 0.1, "summary": 0.1, "retrieved": 0.7, "tail": 0.1},
    "temporal": {"pinned": 0.1, "summary": 0.1, "retrieved": 0.7, "tail": 0.1},
    "new_subtask": {"pinned": 0.25, "summary": 0.2, "retrieved": 0.25, "tail": 0.3},
    "summarize": {"pinned": 0.15, "summary": 0.45, "retrieved": 0.1, "tail": 0.3},
    "default": {"pinned": 0.15, "summary": 0.15, "retrieved": 0.4, "tail": 0.3},
}
# the keys each class's old defaults are dropped for: all but a narrow class's retrieved,
# which is still read (and its old default is its default now)
DROPPED = {c: [k for k in shares if not (k == "retrieved" and c in ("new_subtask", "default"))]
           for c, shares in OLD_SHARES.items()}
WARNER = "tiermem.config"


def _export(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())


def _write(tmp_path: Path, data: dict[str, Any], suffix: str) -> Path:
    """`data` written as the export writes that format (sections as tables)."""
    f = tmp_path / f"c{suffix}"
    if suffix == ".json":
        f.write_text(json.dumps(data))
    else:
        from tiermem.config_sections import export_text

        f.write_text(export_text(data, as_json=False, header=[]))
    return f


def _env(monkeypatch: pytest.MonkeyPatch, shares: dict[str, dict[str, float]], *, sectioned: bool) -> None:
    head = "TIERMEM_PLANNER__SLICE_SHARES" if sectioned else "TIERMEM_SLICE_SHARES"
    for cls, keys in shares.items():
        for key, value in keys.items():
            monkeypatch.setenv(f"{head}__{cls.upper()}__{key.upper()}", str(value))


def _load(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          edit: dict[tuple[str, str], float] | None = None) -> Config:
    """The old export given by `source`, with `edit` ((class, key) -> value) made to its
    slice_shares first, loaded with data_dir = tmp_path (the file's is another machine's)."""
    shares = {c: dict(keys) for c, keys in OLD_SHARES.items()}
    for (cls, key), value in (edit or {}).items():
        shares[cls][key] = value
    if source in ("toml", "json"):
        data = _export(OLD_TOML if source == "toml" else OLD_JSON)
        data["planner"]["slice_shares"] = shares
        old = OLD_TOML if source == "toml" else OLD_JSON
        f = old if not edit else _write(tmp_path, data, f".{source}")
        return Config.load(f, data_dir=tmp_path)
    if source in ("env", "env-sectioned"):
        _env(monkeypatch, shares, sectioned=source == "env-sectioned")
        return Config(data_dir=tmp_path)
    return Config(data_dir=tmp_path, slice_shares=shares)


SOURCES = [
    "toml",  # the old TOML export, byte for byte
    "json",  # the old JSON export (`--export x.json`)
    "env",  # each old share as TIERMEM_SLICE_SHARES__<CLASS>__<KEY>, as text
    "env-sectioned",  # ... as TIERMEM_PLANNER__SLICE_SHARES__<CLASS>__<KEY>
    "kwargs",  # Config(slice_shares=<the old table>)
]


def test_the_fixtures_hold_the_old_defaults() -> None:
    # what the loading cases rest on: the committed exports are the old code's defaults
    for f in (OLD_TOML, OLD_JSON):
        assert _export(f)["planner"]["slice_shares"] == OLD_SHARES, f


@pytest.mark.parametrize("source", SOURCES)
def test_an_old_export_of_defaults_loads_as_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture, source: str) -> None:
    defaults = Config(data_dir=tmp_path)  # before env is set: it would read that too
    with caplog.at_level(logging.WARNING, logger=WARNER):
        cfg = _load(source, tmp_path, monkeypatch)
    assert cfg == defaults
    said = [r.getMessage() for r in caplog.records if r.name == WARNER]
    assert len(said) == 1, said  # one warning per load, not one per key
    for cls, keys in DROPPED.items():  # naming every key dropped ...
        assert f"slice_shares.{cls}: {', '.join(keys)}" in said[0], said[0]
    assert "delete them" in said[0] and "layer_shares" in said[0]  # ... and what to do
    # a second load warns again (once per load)
    with caplog.at_level(logging.WARNING, logger=WARNER):
        caplog.clear()
        _load(source, tmp_path, monkeypatch)
    assert len([r for r in caplog.records if r.name == WARNER]) == 1


# what the user had set when exporting with the old code, as (section path, value): the
# loaded config equals Config() with just these set
USER_SET = [
    # the kept share of a narrow class, below the cap (it acts)
    ((("planner", "slice_shares", "default", "retrieved"), 0.05), {"slice_shares": {"default": {"retrieved": 0.05}}}),
    # a stable layer's share: what replaces the per-class tail
    ((("planner", "layer_shares", "tail"), 0.2), {"layer_shares": {"tail": 0.2}}),
    # an unrelated setting
    ((("hot", "budget_tokens"), 3000), {"hot_budget_tokens": 3000}),
]


@pytest.mark.parametrize("suffix", [".toml", ".json"])
@pytest.mark.parametrize(("user_set", "expected"), USER_SET, ids=["retrieved", "layer-tail", "hot-budget"])
def test_an_old_export_keeps_what_the_user_set(tmp_path: Path, suffix: str, user_set: tuple[tuple[str, ...], Any],
                                               expected: dict[str, Any]) -> None:
    data = _export(OLD_TOML if suffix == ".toml" else OLD_JSON)
    path, value = user_set
    table = data
    for part in path[:-1]:
        table = table[part]
    table[path[-1]] = value
    cfg = Config.load(_write(tmp_path, data, suffix), data_dir=tmp_path)
    assert cfg == Config(data_dir=tmp_path, **expected)
    assert cfg != Config(data_dir=tmp_path)  # the user's value was kept, not dropped with the rest


# (class, key, a value the old default was not, what the refusal names)
CHANGED = [
    ("targeted_recall", "tail", 0.3, "set layer_shares.tail instead"),  # README's old tune grid's other value
    ("default", "tail", 0.2, "set layer_shares.tail instead"),
    ("new_subtask", "pinned", 0.1, "set layer_shares.pinned instead"),  # another class's old default
    ("summarize", "summary", 0.0, "set layer_shares.summary instead"),
    ("recent_recall", "retrieved", 0.5, "lower layer_shares.pinned, layer_shares.summary or layer_shares.tail"),
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("qclass", "key", "value", "replacement"), CHANGED)
def test_a_changed_per_class_share_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture, source: str, qclass: str,
                                                    key: str, value: float, replacement: str) -> None:
    with caplog.at_level(logging.WARNING, logger=WARNER), pytest.raises(pydantic.ValidationError) as info:
        _load(source, tmp_path, monkeypatch, edit={(qclass, key): value})
    text = str(info.value)
    assert f"slice_shares.{qclass}.{key}" in text and replacement in text, text
    # a refused load says only its error: no warning about the keys it would have dropped
    assert not [r for r in caplog.records if r.name == WARNER]


def test_a_boolean_or_a_files_string_is_no_old_default(tmp_path: Path) -> None:
    # `true` == 1 in Python, and a file's "0.7" is a type error there: neither is what the
    # old export wrote, so both are refused as before
    for text in ("tail = true", 'tail = "0.7"'):
        f = tmp_path / "c.toml"
        f.write_text(f"[slice_shares.recent_recall]\n{text}\n")
        with pytest.raises(pydantic.ValidationError, match=r"slice_shares\.recent_recall\.tail"):
            Config.load(f, data_dir=tmp_path)


def test_config_check_of_an_old_export_exits_0_with_one_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    res = subprocess.run([sys.executable, "-m", "tiermem.cli", "--data-dir", str(tmp_path), "config", "--check",
                          str(OLD_TOML), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    warned = [line for line in res.stderr.splitlines() if line.startswith(f"WARNING {WARNER}:")]
    # loaded twice (checked, then shown), said once
    assert len(warned) == 1 and "slice_shares.recent_recall: pinned, summary, retrieved, tail" in warned[0], res.stderr
    # the config is shown: the stable layers' shares, and of slice_shares only what is read
    shown = {r["key"]: r["value"] for r in json.loads(res.stdout)}
    assert {k: v for k, v in shown.items() if k.startswith("layer_shares.")} == {
        "layer_shares.pinned": 0.1, "layer_shares.summary": 0.1, "layer_shares.tail": 0.1}
    assert {k: v for k, v in shown.items() if k.startswith("slice_shares.")} == {
        "slice_shares.new_subtask.retrieved": 0.25, "slice_shares.default.retrieved": 0.4}
