"""A Memory with the fake models (offline_mem/testing.py) on any store's config: the one way
the public-API tests open theirs, on a SQLite file or a PostgreSQL database alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from offline_mem import Memory
from offline_mem.pinned.extractor import Extractor, Prompt
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, Script


def fake_memory(
    store: dict[str, Any],
    *script: Script,
    still_true: Callable[[Prompt], bool] | None = None,
    extractor: Extractor | None = None,
    **config: Any,
) -> Memory:
    """A Memory on `store` (plus `config`) whose extractor answers `script` in order, or is
    `extractor` when given."""
    return Memory(
        {**store, **config},
        embedder=FakeEmbedder(),
        extractor=extractor or FakeExtractor(*script, still_true=still_true),
        entities=FakeEntities(),
    )
