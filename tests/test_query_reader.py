"""QueryReader: a query's vector and entities, side by side after the first search."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from offline_mem.pinned.embedder import QueryVectorCache
from offline_mem.pinned.query_reader import QueryReader
from offline_mem.testing import FakeEmbedder, FakeEntities


class ThreadRecordingEmbedder(FakeEmbedder):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.fail = fail

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("embedder broke")
        return super().embed_batch(texts)


def test_first_read_is_sequential_then_the_vector_is_made_in_the_worker() -> None:
    inner = ThreadRecordingEmbedder()
    cache = QueryVectorCache(inner)
    reader = QueryReader(cache, FakeEntities())
    try:
        reader.read("Where does Priya live?")
        reader.read("What does Tomasz play?")
        assert inner.threads[0] == threading.current_thread().name
        assert inner.threads[1].startswith("offline_mem-query")
        # both vectors are in the cache: the searches that follow embed nothing
        cache.embed("Where does Priya live?")
        cache.embed("What does Tomasz play?")
        assert len(inner.threads) == 2
    finally:
        reader.close()


def test_mentions_are_the_entity_extractors() -> None:
    entities = FakeEntities()
    reader = QueryReader(QueryVectorCache(FakeEmbedder()), entities)
    try:
        for _ in range(2):
            got = reader.read("Did Priya visit Lisbon?")
            assert got and got == entities.extract_query("Did Priya visit Lisbon?")
    finally:
        reader.close()


def test_an_embedding_error_reaches_the_caller_on_every_read() -> None:
    reader = QueryReader(QueryVectorCache(ThreadRecordingEmbedder(fail=True)), FakeEntities())
    try:
        for _ in range(2):  # sequential, then in the worker
            with pytest.raises(RuntimeError, match="embedder broke"):
                reader.read("anything")
    finally:
        reader.close()


def test_close_stops_the_worker_and_later_reads_still_work() -> None:
    inner = ThreadRecordingEmbedder()
    reader = QueryReader(QueryVectorCache(inner), FakeEntities())
    reader.read("one")
    reader.read("two")
    reader.close()
    assert not any(t.name.startswith("offline_mem-query") for t in threading.enumerate())
    reader.read("three")  # after close: in the caller's thread, no new worker
    assert inner.threads[-1] == threading.current_thread().name
