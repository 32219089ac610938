"""The XDG base directories tiermem's defaults live under (data dir, the ONNX export cache).

Invariant: a base directory is the variable's value only where that is an absolute path;
unset, empty or relative, it is the fallback. The XDG Base Directory spec says a relative
path there is invalid and to be ignored: read against the working directory, each directory
a command ran in had a store (or a cache) of its own.
"""

from __future__ import annotations

import os
from pathlib import Path


def xdg_base(variable: str, fallback: Path) -> Path:
    """`$variable` where it is an absolute path, else `fallback`."""
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else fallback
