"""Embedders: one abstract batch method; vectors are float32, L2-normalised.

The sentence-transformers implementation loads the pinned all-MiniLM-L6-v2 from a verified local
folder, with every hub lookup switched off; the weights load lazily, on the first embed.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ModelError


@dataclass(frozen=True)
class EmbedderIdentity:
    """What the memory file pins: a vector from another identity is never mixed in."""

    name: str
    sha256: str
    dimension: int


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


_OFFLINE_FLAGS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers draws a "Loading weights" progress bar on stderr at every load; a library
    opened by an application must not. Its setting is restored afterwards."""
    from transformers.utils import logging as transformers_logging

    was_enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            transformers_logging.enable_progress_bar()


class SentenceTransformerEmbedder(Embedder):
    """all-MiniLM-L6-v2 (or any sentence-transformers folder) from a local, verified path."""

    def __init__(
        self, model_dir: Path, identity: EmbedderIdentity, *, batch_size: int = 64
    ) -> None:
        self.model_dir = Path(model_dir)
        self.identity = identity
        self.batch_size = batch_size
        self._model: Any = None
        self._direct: Any = None  # DirectBertEncoder for single texts, when the layout allows
        self._lock = threading.Lock()
        # One call at a time: the fast tokenizer changes its padding settings per call and
        # raises "Already borrowed" when two threads use it at once.
        self._call_lock = threading.RLock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Set before the import: transformers and huggingface_hub read them at import.
                for key, value in _OFFLINE_FLAGS.items():
                    os.environ.setdefault(key, value)
                from sentence_transformers import SentenceTransformer

                try:
                    with _quiet_loading():
                        self._model = SentenceTransformer(
                            str(self.model_dir), device="cpu", local_files_only=True
                        )
                except Exception as exc:  # the library raises many types; one typed error out
                    raise ModelError(f"cannot load embedder from {self.model_dir}: {exc}") from exc
                get_dim = getattr(self._model, "get_embedding_dimension", None) or (
                    self._model.get_sentence_embedding_dimension
                )
                dim = get_dim()
                if dim != self.identity.dimension:
                    raise ModelError(
                        f"embedder at {self.model_dir} gives {dim} dimensions, "
                        f"the manifest says {self.identity.dimension}"
                    )
                from .bert_forward import DirectBertEncoder

                self._direct = DirectBertEncoder.from_model(self._model)
            return self._model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        model = self._load()
        with self._call_lock:
            vectors = model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return normalize_rows(vectors)

    def embed(self, text: str) -> np.ndarray:
        """One text (a query): the direct BERT forward when the model's layout allows it (same
        vector, a quarter less time; see bert_forward.py), else `encode`."""
        self._load()
        direct = self._direct
        if direct is None:
            return self.embed_batch([text])[0]
        with self._call_lock:
            return direct.encode_one(text)

    def close(self) -> None:
        self._model = None
        self._direct = None


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
