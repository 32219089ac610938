"""The XDG base directories tiermem's defaults live under (data dir, the ONNX export cache).

Invariant: a base directory is the variable's value only where that is an absolute path;
unset, empty or relative, it is the fallback. The XDG Base Directory spec says a relative
path there is invalid and to be ignored: read against the working directory, each directory
a command ran in had a store (or a cache) of its own. A relative one is ignored aloud: one
WARNING per process and value, naming the variable, its value and the directory used
instead (ignored silently, the store moved with nothing said).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("tiermem.xdg")

# (variable, value) already warned about: the default is read several times a command
_said: set[tuple[str, str]] = set()


def xdg_base(variable: str, fallback: Path) -> Path:
    """`$variable` where it is an absolute path, else `fallback` (a relative value warned
    about, once)."""
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return Path(value)
    if value and (variable, value) not in _said:
        _said.add((variable, value))
        log.warning("%s=%s is a relative path, which the XDG Base Directory spec says to ignore: using %s "
                    "instead (set it to an absolute path)", variable, value, fallback)
    return fallback
