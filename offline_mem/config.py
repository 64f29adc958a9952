"""Configuration: where the memory file and the models live, and which models to use.

Resolution order for each location: the config value, then an environment variable, then a
documented default. The environment is read when a `Memory` is built, never at import.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .errors import ConfigError, shown

DB_ENV = "OFFLINE_MEM_DB"
MODELS_ENV = "OFFLINE_MEM_MODELS"
DEFAULT_DB_PATH = Path("~/.local/share/offline_mem/memory.db")
DEFAULT_USER_MODELS_DIR = Path("~/.local/share/offline_mem/models")

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
DEFAULT_EXTRACTOR = "qwen2.5-coder-1.5b-instruct"
DEFAULT_NLP = "en_core_web_sm"
# The extractor's nice value when the config queues extraction (async_mode), so the caller's adds
# and searches get the cores first (docs/design/model-thread.md).
BACKGROUND_NICE = 10


@dataclass(frozen=True)
class MemoryConfig:
    """Settings of a `Memory`. Unknown keys are an error, never silently ignored."""

    path: str | None = None
    # a PostgreSQL database (postgresql://...) instead of the SQLite file at `path`
    # (docs/design/postgresql.md); the library connects to nothing else
    store: str | None = None
    models_dir: str | None = None
    embedder: str = DEFAULT_EMBEDDER
    extractor: str = DEFAULT_EXTRACTOR
    nlp: str = DEFAULT_NLP
    threads: int | None = None
    # every model call evaluates its prompt from scratch (no KV-cache reuse): the memories of a
    # conversation then do not depend on the cache's history (audits, benchmark runs)
    reproducible: bool = False
    custom_instructions: str | None = None
    busy_timeout_ms: int = 30_000
    # MiB of large vector partitions held in memory for fast KNN (vector_cache.py), half for
    # memories' vectors and half for messages'; 0: none
    vector_cache_mb: float = 1024
    # add(infer=True) queues the extraction and returns at once (a call's async_mode overrides)
    async_mode: bool = False
    # run queued extraction jobs in a background thread of the Memory (false: they wait for a
    # Memory that runs them, or for `flush()`; the command line opens files so)
    job_worker: bool = True
    # added to the nice value of the thread running the extractor (Linux), so that the caller's
    # adds and searches get the cores first while it extracts; None: BACKGROUND_NICE when
    # async_mode is set here (extraction then runs in the background), else 0
    extractor_nice: int | None = None
    # {"semantic": w, "keyword": w, "entity": w}, summing to 1 (see ranking.py)
    ranking_weights: dict[str, float] | None = None
    # the process is offline_mem's own: allow its process-wide speed settings for the rest of the
    # process (docs/embedding.md); the `offline-mem` command always does
    own_process: bool = False
    # an existing 0-byte file at `path` becomes a new memory file (else it is refused as a
    # truncated one); a path with no file is always created
    init_empty_file: bool = False
    # PostgreSQL only: "exact" (every search ranks all of the filter's rows) or "hnsw" (pgvector's
    # HNSW index, approximate: docs/postgresql.md gives its measured recall)
    vector_index: str = "exact"

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> MemoryConfig:
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s) {unknown}; known keys are {sorted(known)}")
        for key in ("path", "models_dir", "custom_instructions"):
            if values.get(key) is not None and not isinstance(values[key], (str, os.PathLike)):
                raise ConfigError(
                    f"config {shown(key)} must be a string path, got {shown(values[key])}"
                )
            if isinstance(values.get(key), os.PathLike):
                values[key] = os.fspath(values[key])
        _check_store(values)
        threads = values.get("threads")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"config 'threads' must be a positive integer, got {shown(threads)}")
        for key in ("reproducible", "async_mode", "job_worker", "own_process", "init_empty_file"):
            if not isinstance(values.get(key, False), bool):
                raise ConfigError(
                    f"config {shown(key)} must be true or false, got {shown(values[key])}"
                )
        nice = values.get("extractor_nice")
        if nice is not None and (
            isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 19
        ):
            raise ConfigError(f"config 'extractor_nice' must be an integer 0-19, got {shown(nice)}")
        cache_mb = values.get("vector_cache_mb", cls.vector_cache_mb)
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, (int, float)) or cache_mb < 0:
            raise ConfigError(
                f"config 'vector_cache_mb' must be a number of MiB >= 0, got {shown(cache_mb)}"
            )
        index = values.get("vector_index", cls.vector_index)
        if index not in VECTOR_INDEXES:
            raise ConfigError(f"config 'vector_index' must be one of {VECTOR_INDEXES}, got "
                              f"{shown(index)}")  # fmt: skip
        return cls(**values)

    @property
    def model_nice(self) -> int:
        """The nice value added to the extractor's thread (`extractor_nice`, resolved)."""
        if self.extractor_nice is not None:
            return self.extractor_nice
        return BACKGROUND_NICE if self.async_mode else 0


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
VECTOR_INDEXES = ("exact", "hnsw")


def is_postgres_url(value: str) -> bool:
    return value.startswith(POSTGRES_SCHEMES)


def _check_store(values: dict[str, Any]) -> None:
    store = values.get("store")
    if store is not None and (not isinstance(store, str) or not is_postgres_url(store)):
        raise ConfigError(
            f"config 'store' must be a postgresql:// URL, got {shown(store)}; "
            "a SQLite memory file goes in 'path'"
        )
    if store is not None and values.get("path") is not None:
        raise ConfigError("config names both 'path' and 'store': give one of them")
    path = values.get("path")
    if isinstance(path, str) and is_postgres_url(path):
        raise ConfigError("config 'path' holds a postgresql:// URL: name it in 'store' instead")


def redacted_url(url: str) -> str:
    """The URL as logs, errors and the server's status may show it: without its password."""
    url = re.sub(r"^([a-z]+://[^:/@?]*):[^@/?]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)


def resolve_store_url(config: MemoryConfig) -> str | None:
    """The PostgreSQL database to use: config `store`, else $OFFLINE_MEM_DB when it holds a
    postgresql:// URL (and config `path` is unset); None means the SQLite file."""
    if config.store is not None:
        return config.store
    env = os.environ.get(DB_ENV)
    if config.path is None and env and is_postgres_url(env):
        return env
    return None


def resolve_db_path(config: MemoryConfig) -> str:
    """The memory file: config `path`, else $OFFLINE_MEM_DB, else ~/.local/share/offline_mem."""
    if config.path is not None:
        return config.path if config.path == ":memory:" else str(Path(config.path).expanduser())
    env = os.environ.get(DB_ENV)
    if env:
        return str(Path(env).expanduser())
    return str(DEFAULT_DB_PATH.expanduser())


def checkout_models_dir() -> Path:
    """`models/` beside the package, which exists when running from a checkout."""
    return Path(__file__).resolve().parent.parent / "models"


def resolve_models_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The models folder: explicit value, else $OFFLINE_MEM_MODELS, else the checkout's `models/`
    when it holds a manifest, else ~/.local/share/offline_mem/models."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get(MODELS_ENV)
    if env:
        return Path(env).expanduser()
    checkout = checkout_models_dir()
    if (checkout / "manifest.json").is_file():
        return checkout
    return DEFAULT_USER_MODELS_DIR.expanduser()
