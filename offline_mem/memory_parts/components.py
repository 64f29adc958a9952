"""What a `Memory` is built from when its caller does not hand it in: the store (the SQLite file
or a PostgreSQL database), and the pinned models, each from its verified folder under the
models directory."""

from __future__ import annotations

from pathlib import Path

from ..config import MemoryConfig
from ..errors import ConfigError, ModelError, shown
from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor, NoEntities, SpacyEntities
from ..pinned.extractor import Extractor, LlamaExtractor
from ..pinned.nlp import TextAnalyzer
from ..store.interface import MemoryStore
from ..store.store import Store
from ..values import EmbedderIdentity


def open_store(
    config: MemoryConfig, *, store_url: str | None, path: str, embedder: EmbedderIdentity
) -> MemoryStore:
    """The SQLite file at `path`, or the PostgreSQL database at `store_url` (psycopg is
    imported only then)."""
    if store_url is not None:
        from ..store.postgres import PostgresStore

        return PostgresStore.open(store_url, embedder=embedder, vector_index=config.vector_index)
    if config.vector_index != "exact":
        raise ConfigError(
            f"config 'vector_index' {config.vector_index!r} needs a PostgreSQL 'store'; "
            "the memory file's search is exact"
        )
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return Store.open(
        path,
        embedder=embedder,
        busy_timeout_ms=config.busy_timeout_ms,
        vector_cache_mb=config.vector_cache_mb,
        init_empty=config.init_empty_file,
    )


def load_embedder(name: str, models_dir: Path) -> Embedder:
    from ..pinned.embedder import SentenceTransformerEmbedder
    from ..pinned.model_files import model_identity, verified_model_dir

    folder = verified_model_dir(name, models_dir)
    ident = model_identity(name, models_dir)
    if ident.dimension is None:
        raise ModelError(f"the manifest gives no dimension for embedder {shown(name)}")
    identity = EmbedderIdentity(
        name=name,
        sha256=ident.sha256,
        dimension=ident.dimension,
        files_sha256=ident.files_sha256,
    )
    return SentenceTransformerEmbedder(folder, identity)


def load_analyzer(nlp: str | None, models_dir: Path) -> TextAnalyzer:
    from ..pinned.model_files import verified_model_dir
    from ..pinned.nlp import SpacyAnalyzer

    return SpacyAnalyzer(verified_model_dir(nlp or "en_core_web_sm", models_dir))


def default_extractor(config: MemoryConfig, models_dir: Path) -> Extractor:
    """The configured extractor; it loads its model on first use."""
    return LlamaExtractor(
        config.extractor,
        models_dir,
        threads=config.threads,
        reproducible=config.reproducible,
        nice=config.model_nice,
    )


def default_entities(config: MemoryConfig, models_dir: Path) -> EntityExtractor:
    """spaCy's recogniser (loaded on first use), or none when the config turns `nlp` off."""
    return NoEntities() if config.nlp is None else SpacyEntities(config.nlp, models_dir)
