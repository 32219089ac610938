"""tiermem: tiered hot/warm/cold memory for LLM agents.

    from tiermem import Memory, Config
    with Memory(Config(data_dir="./data")) as mem:
        mem.append("conv-1", {"role": "user", "content": "No red-eyes, please."})
"""

from tiermem.config import Config
from tiermem.errors import (
    ConversationNotFound,
    LimitExceeded,
    TiermemError,
    ValidationError,
)
from tiermem.memory import ActiveView, Memory, NamespacedMemory
from tiermem.tiers.models import (
    Checkpoint,
    ErasureReport,
    Message,
    PruneReport,
    SearchHit,
    SearchHits,
    StoredMessage,
)

__all__ = [
    "ActiveView",
    "Checkpoint",
    "Config",
    "ConversationNotFound",
    "ErasureReport",
    "LimitExceeded",
    "Memory",
    "Message",
    "NamespacedMemory",
    "PruneReport",
    "SearchHit",
    "SearchHits",
    "StoredMessage",
    "TiermemError",
    "ValidationError",
]
__version__ = "0.1.0"
