"""tiermem: tiered hot/warm/cold memory for LLM agents.

    from tiermem import Memory, Config
    with Memory(Config(data_dir="./data")) as mem:
        mem.append("conv-1", {"role": "user", "content": "No red-eyes, please."})

The names below load on first use (PEP 562), not when the package is imported: the
console script (`tiermem.entry`) is imported through this package, and must be able to
set up its Ctrl-C handling before the slow imports (the config, the models, numpy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiermem.config import Config as Config
    from tiermem.errors import ConversationNotFound as ConversationNotFound
    from tiermem.errors import LimitExceeded as LimitExceeded
    from tiermem.errors import TiermemError as TiermemError
    from tiermem.errors import ValidationError as ValidationError
    from tiermem.memory import ActiveView as ActiveView
    from tiermem.memory import Memory as Memory
    from tiermem.memory import NamespacedMemory as NamespacedMemory
    from tiermem.tiers.models import Checkpoint as Checkpoint
    from tiermem.tiers.models import ErasureReport as ErasureReport
    from tiermem.tiers.models import Message as Message
    from tiermem.tiers.models import PruneReport as PruneReport
    from tiermem.tiers.models import SearchHit as SearchHit
    from tiermem.tiers.models import SearchHits as SearchHits
    from tiermem.tiers.models import StoredMessage as StoredMessage

# each public name -> the module that defines it
_HOMES = {
    "Config": "tiermem.config",
    "ConversationNotFound": "tiermem.errors",
    "LimitExceeded": "tiermem.errors",
    "TiermemError": "tiermem.errors",
    "ValidationError": "tiermem.errors",
    "ActiveView": "tiermem.memory",
    "Memory": "tiermem.memory",
    "NamespacedMemory": "tiermem.memory",
    "Checkpoint": "tiermem.tiers.models",
    "ErasureReport": "tiermem.tiers.models",
    "Message": "tiermem.tiers.models",
    "PruneReport": "tiermem.tiers.models",
    "SearchHit": "tiermem.tiers.models",
    "SearchHits": "tiermem.tiers.models",
    "StoredMessage": "tiermem.tiers.models",
}

__all__ = sorted(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here after; a
    submodule (`tiermem.memory` after `import tiermem`), as the eager imports made it
    reachable before."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
