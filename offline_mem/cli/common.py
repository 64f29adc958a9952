"""What every command module shares: the global options and how results are printed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..config import (
    MemoryConfig,
    is_postgres_url,
    redacted_url,
    resolve_db_path,
    resolve_models_dir,
    resolve_store_url,
)
from ..errors import StoreError
from ..memory import Memory
from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..pinned.extractor import Extractor
from ..values import EmbedderIdentity


@dataclass(frozen=True)
class CliState:
    """The global options of `offline-mem`, available to every command as `ctx.obj`."""

    db: Path | str | None = None  # a memory file, or a postgresql:// URL (kept as given)
    json: bool = False
    debug: bool = False


pass_state = click.make_pass_decorator(CliState, ensure=True)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


# -- opening the memory file ------------------------------------------------------------------


@dataclass
class CliModels:
    """The models the CLI gives a `Memory`. `None` means the configured, pinned model; tests
    install fakes by replacing `common.MODELS` (one place, so no command can bypass it)."""

    embedder: Callable[[], Embedder] | None = None
    extractor: Callable[[str], Extractor] | None = None  # called with the extractor's name
    entities: Callable[[], EntityExtractor] | None = None
    chat: Callable[[str], Any] | None = None  # a chat model by name (see cli/chat.py)


MODELS = CliModels()


def store_url(state: CliState) -> str | None:
    """The PostgreSQL database the global options name (--db, else $OFFLINE_MEM_DB, holding a
    postgresql:// URL); None for a memory file."""
    if state.db is not None:
        return state.db if isinstance(state.db, str) and is_postgres_url(state.db) else None
    return resolve_store_url(MemoryConfig())


def db_path(state: CliState) -> str:
    """The memory file the global options name: --db, else $OFFLINE_MEM_DB, else the default;
    or the database's URL."""
    url = store_url(state)
    if url is not None:
        return url
    return str(state.db) if state.db is not None else resolve_db_path(MemoryConfig())


def shown_db(state: CliState) -> str:
    """What messages show of the store: the file's path, or the URL without its password."""
    url = store_url(state)
    return db_path(state) if url is None else redacted_url(url)


def require_file(state: CliState, command: str) -> str:
    """The memory file, for a command that works on the SQLite file itself."""
    if store_url(state) is not None:
        raise StoreError(
            f"`offline-mem {command}` works on a SQLite memory file; for a PostgreSQL database "
            "use the server's own tools (pg_dump, VACUUM, ...)"
        )
    return db_path(state)


def open_memory(
    state: CliState,
    *,
    extractor: str | None = None,
    job_worker: bool = False,
    existing: bool = False,
    extractor_nice: int | None = None,
) -> Memory:
    """A `Memory` over the file of `--db` (created when missing, unless `existing`: a command
    that reads, or changes what is there, refuses a path with no file rather than make an
    empty memory of a mistyped path), with the CLI's models. Queued extraction jobs run only
    where asked (`flush`, the MCP server): a command that merely opens the file never waits,
    when it closes, for a job it happened to start."""
    url = store_url(state)
    path = db_path(state)
    if url is None and existing and not os.path.isfile(path):
        raise StoreError(
            f"no memory file at {path!r}; check --db / $OFFLINE_MEM_DB (`offline-mem add` "
            "creates a new one)"
        )
    where = {"path": path} if url is None else {"store": url}
    config: dict[str, Any] = {**where, "job_worker": job_worker}
    if extractor_nice is not None:
        config["extractor_nice"] = extractor_nice
    if extractor is not None:
        config["extractor"] = extractor
    models = MODELS
    return Memory(
        config,
        embedder=models.embedder() if models.embedder else None,
        extractor=models.extractor(extractor or MemoryConfig().extractor)
        if models.extractor
        else None,
        entities=models.entities() if models.entities else None,
    )


def configured_embedder() -> EmbedderIdentity:
    """The identity of the embedder a `Memory` would use, without loading its weights."""
    if MODELS.embedder is not None:
        return MODELS.embedder().identity
    from ..pinned.model_files import model_identity

    name = MemoryConfig().embedder
    ident = model_identity(name, resolve_models_dir(None))
    return EmbedderIdentity(
        name=name,
        sha256=ident.sha256,
        dimension=int(ident.dimension or 0),
        files_sha256=ident.files_sha256,
    )
