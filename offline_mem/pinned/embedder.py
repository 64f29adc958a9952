"""Embedders: one abstract batch method; vectors are float32, L2-normalised.

`SentenceTransformerEmbedder` computes the pinned all-MiniLM-L6-v2's vectors from its verified
local folder, without any hub lookup; the weights load lazily, on the first embed.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..errors import MissingExtraError, ModelError
from ..values import EmbedderIdentity

logger = logging.getLogger(__name__)


class Embedder(ABC):
    identity: EmbedderIdentity

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dimension) float32 array of unit-length rows."""

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model resources; the default has none."""


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32, copy=False)


class _Encoder(Protocol):
    @property
    def dimension(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or any sentence-transformers folder) from a local, verified path.

    A folder laid out as the pinned model is — BERT, mean pooling, Normalize (bert_layout.py) —
    runs on the numpy forward (bert_numpy.py): sentence-transformers' vectors without importing
    it, transformers or torch, ~10 s of a cold start. Any other layout loads sentence-transformers
    (st_encoder.py). Either loads on the first embed."""

    def __init__(
        self, model_dir: Path, identity: EmbedderIdentity, *, batch_size: int = 64
    ) -> None:
        self.model_dir = Path(model_dir)
        self.identity = identity
        self.batch_size = batch_size
        self._encoder: _Encoder | None = None
        self._lock = threading.Lock()

    def _load(self) -> _Encoder:
        with self._lock:
            if self._encoder is None:
                encoder = self._open()
                if encoder.dimension != self.identity.dimension:
                    raise ModelError(
                        f"embedder at {self.model_dir} gives {encoder.dimension} dimensions, "
                        f"the manifest says {self.identity.dimension}"
                    )
                self._encoder = encoder
            return self._encoder

    def _open(self) -> _Encoder:
        from .bert_layout import UnsupportedLayout

        try:
            try:
                from .bert_numpy import load_encoder

                return load_encoder(self.model_dir, batch_size=self.batch_size)
            except UnsupportedLayout as why:
                logger.debug("%s: %s; loading sentence-transformers", self.model_dir, why)
                from .st_encoder import SentenceTransformersEncoder

                return SentenceTransformersEncoder.load(self.model_dir, self.batch_size)
        except MissingExtraError:
            raise
        except Exception as exc:  # the libraries raise many types; one typed error out
            raise ModelError(f"cannot load embedder from {self.model_dir}: {exc}") from exc

    @property
    def backend(self) -> str:
        """Which code computes the vectors, "numpy" or "sentence-transformers" (loads them)."""
        from .bert_numpy import NumpyBertEncoder

        return "numpy" if isinstance(self._load(), NumpyBertEncoder) else "sentence-transformers"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        return normalize_rows(self._load().encode(list(texts)))

    def close(self) -> None:
        self._encoder = None


class QueryVectorCache(Embedder):
    """Wraps an embedder and remembers the vectors of the last few single texts embedded, so a
    query searched for memories and then for messages is embedded once. Batches pass through."""

    def __init__(self, inner: Embedder, size: int = 64) -> None:
        from collections import OrderedDict

        self.inner = inner
        self.identity = inner.identity
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_batch(texts)

    def embed(self, text: str) -> np.ndarray:
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                return found
        vector = np.array(self.inner.embed(text), dtype=np.float32)
        vector.flags.writeable = False  # shared by every caller that asks for this text
        with self._lock:
            self._vectors[text] = vector
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector
