"""A Ctrl-C while `open_with_fallback` starts the hot tier stays a KeyboardInterrupt (the
CLI's exit 130). The except clause's tuple (`hot_start_errors`, which imports redis) was
evaluated only when an exception arrived: after a Ctrl-C that cut the first `import redis`
short, the half-made module in sys.modules had no `exceptions`, and an AttributeError
replaced the interrupt (exit 1). Review r_cli 4. The interrupt is raised where the hot tier
starts, with the half-made module left as an interrupted import leaves it."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, memory


def test_an_interrupt_while_redis_is_imported_stays_an_interrupt(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted_start(*_args: Any, **_kwargs: Any) -> None:
        # what a Ctrl-C in the middle of `import redis` leaves: a module with none of its names
        monkeypatch.setitem(sys.modules, "redis", types.ModuleType("redis"))
        raise KeyboardInterrupt

    # the first import is the one cut short: the package and its submodules (a submodule left
    # in sys.modules is not bound on a fresh parent module, so `redis.exceptions` would be
    # missing whichever test imported redis before this one in the worker)
    for name in [n for n in sys.modules if n == "redis" or n.startswith("redis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(memory, "Memory", interrupted_start)
    with pytest.raises(KeyboardInterrupt):
        memory.open_with_fallback(Config(data_dir=tmp_path / "data"))
