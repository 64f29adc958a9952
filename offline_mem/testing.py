"""Fakes for fast tests of the API: real subclasses of the model interfaces, deterministic,
with a record of every call. Real models are exercised by their own tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from .embedder import Embedder, EmbedderIdentity, normalize_rows

_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder(Embedder):
    """Hashes words (and their 4-letter prefixes, a crude stem) into a fixed-size vector, so
    texts that share words are near each other. Records every batch in `calls`."""

    def __init__(self, dimension: int = 384, name: str = "fake-embedder") -> None:
        digest = hashlib.sha256(f"{name}:{dimension}".encode()).hexdigest()
        self.identity = EmbedderIdentity(name=name, sha256=digest, dimension=dimension)
        self.calls: list[list[str]] = []

    def _bucket(self, token: str) -> int:
        return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        dim = self.identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                for token in (word, "p:" + word[:4]):
                    bucket = self._bucket(token)
                    out[row, bucket % dim] += 1.0 if (bucket >> 32) & 1 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0
        return normalize_rows(out)
