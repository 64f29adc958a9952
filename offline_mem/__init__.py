"""offline_mem: a memory layer for LLM applications that never leaves the machine.

Importing the package does no I/O and reads no environment; models load on first use.
"""

from typing import TYPE_CHECKING, Any

from .config import MemoryConfig
from .errors import (
    ConfigError,
    CorruptFileError,
    EmbedderMismatchError,
    ExtractionError,
    FlushTimeoutError,
    ImportRefusedError,
    MemoryNotFoundError,
    MissingExtensionError,
    MissingExtraError,
    ModelError,
    ModelIntegrityError,
    ModelNotFoundError,
    NotImplementedInStoreError,
    OfflineMemError,
    SchemaVersionError,
    ScopeRequiredError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreLoginError,
    ValidationError,
)
from .memory import Memory
from .pinned.embedder import Embedder
from .retrieval.formatting import format_memories
from .store.writer import written_by
from .values import EmbedderIdentity

if TYPE_CHECKING:
    from .async_memory import AsyncMemory


def __getattr__(name: str) -> Any:
    # AsyncMemory brings asyncio (~50 ms of a cold start): imported when first asked for
    if name == "AsyncMemory":
        from .async_memory import AsyncMemory

        return AsyncMemory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AsyncMemory",
    "ConfigError",
    "CorruptFileError",
    "Embedder",
    "EmbedderIdentity",
    "EmbedderMismatchError",
    "ExtractionError",
    "FlushTimeoutError",
    "ImportRefusedError",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "MissingExtensionError",
    "MissingExtraError",
    "ModelError",
    "ModelIntegrityError",
    "ModelNotFoundError",
    "NotImplementedInStoreError",
    "OfflineMemError",
    "SchemaVersionError",
    "ScopeRequiredError",
    "StoreConflictError",
    "StoreConnectionError",
    "StoreError",
    "StoreLoginError",
    "ValidationError",
    "format_memories",
    "written_by",
]
__version__ = "0.1.0"
