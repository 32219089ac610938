"""The public home of tiermem's exceptions (defined in `tiers.errors`, the lowest layer)."""

from tiermem.tiers.errors import (
    BudgetTooSmall,
    ConversationNotFound,
    DataFileError,
    DriverUnavailable,
    ImportConflict,
    LimitExceeded,
    PositionOutOfRange,
    RedisBinaryNotFound,
    RedisStartError,
    SchemaTooNew,
    StorageReadOnly,
    StoreUnavailable,
    SummarizerError,
    TiermemError,
    ValidationError,
)

__all__ = [
    "BudgetTooSmall",
    "ConversationNotFound",
    "DataFileError",
    "DriverUnavailable",
    "ImportConflict",
    "LimitExceeded",
    "PositionOutOfRange",
    "RedisBinaryNotFound",
    "RedisStartError",
    "SchemaTooNew",
    "StorageReadOnly",
    "StoreUnavailable",
    "SummarizerError",
    "TiermemError",
    "ValidationError",
]
