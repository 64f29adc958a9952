"""A search query's vector and entity mentions, computed side by side.

A search starts with two model passes over the query: the embedder's (numpy BERT, ~10 ms on one
core, most of it in matrix products that release the GIL) and spaCy's (~3 ms). After the first
search they run at once, the embedding in a worker thread while spaCy reads the query in the
caller's, so the second pass costs little on a machine with a core free. The first search runs
them one after the other: loading the embedder's weights briefly holds two copies of them
(~180 MB), and with spaCy's pipeline not loaded yet that peak is ~80 MB lower (measured RSS of
a cold search: 307 -> 225 MB).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ..values import EntityMention
from .embedder import Embedder
from .entities import EntityExtractor


class QueryReader:
    def __init__(self, embedder: Embedder, entities: EntityExtractor) -> None:
        """`embedder` should keep the vectors it makes (embedder.QueryVectorCache): `read`
        computes the query's vector for the searches that follow, which ask it again."""
        self.embedder = embedder
        self.entities = entities
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def read(self, query: str) -> list[EntityMention]:
        """The query's entity mentions, once its vector is in the embedder's cache."""
        with self._lock:
            pool = self._pool
            if pool is None and not self._closed:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="offline_mem-query")
        if pool is None:
            self.embedder.embed(query)
            return self.entities.extract_query(query)
        vector = pool.submit(self.embedder.embed, query)
        try:
            return self.entities.extract_query(query)
        finally:
            vector.result()  # its error, if any, is the search's

    def close(self) -> None:
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True)
