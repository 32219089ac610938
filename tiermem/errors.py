"""The public home of tiermem's exceptions (defined in `tiers.errors`, the lowest layer)."""

from tiers.errors import (
    BudgetTooSmall,
    ConversationNotFound,
    DriverUnavailable,
    LimitExceeded,
    NamespaceMismatch,
    PositionOutOfRange,
    RedisBinaryNotFound,
    RedisStartError,
    SchemaTooNew,
    StoreUnavailable,
    SummarizerError,
    TiermemError,
    ValidationError,
)

__all__ = [
    "BudgetTooSmall",
    "ConversationNotFound",
    "DriverUnavailable",
    "LimitExceeded",
    "NamespaceMismatch",
    "PositionOutOfRange",
    "RedisBinaryNotFound",
    "RedisStartError",
    "SchemaTooNew",
    "StoreUnavailable",
    "SummarizerError",
    "TiermemError",
    "ValidationError",
]
