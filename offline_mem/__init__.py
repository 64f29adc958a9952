"""offline_mem: a memory layer for LLM applications that never leaves the machine.

Importing the package does no I/O and reads no environment; models load on first use.
"""

from .async_memory import AsyncMemory
from .config import MemoryConfig
from .embedder import Embedder, EmbedderIdentity
from .errors import (
    ConfigError,
    CorruptFileError,
    EmbedderMismatchError,
    ExtractionError,
    MemoryNotFoundError,
    ModelError,
    ModelIntegrityError,
    ModelNotFoundError,
    OfflineMemError,
    SchemaVersionError,
    ScopeRequiredError,
    StoreError,
    ValidationError,
)
from .memory import Memory

__all__ = [
    "AsyncMemory",
    "ConfigError",
    "CorruptFileError",
    "Embedder",
    "EmbedderIdentity",
    "EmbedderMismatchError",
    "ExtractionError",
    "Memory",
    "MemoryConfig",
    "MemoryNotFoundError",
    "ModelError",
    "ModelIntegrityError",
    "ModelNotFoundError",
    "OfflineMemError",
    "SchemaVersionError",
    "ScopeRequiredError",
    "StoreError",
    "ValidationError",
]
__version__ = "0.1.0"
