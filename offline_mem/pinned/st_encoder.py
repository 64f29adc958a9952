"""sentence-transformers itself, for an embedder folder the numpy forward does not reproduce.

The pinned all-MiniLM-L6-v2 never comes here (bert_numpy.py computes its vectors); another
layout (a different pooling, a prompt, another architecture) loads SentenceTransformer from the
verified local folder, with every hub lookup switched off and its progress bar silenced.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtraError

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


class SentenceTransformersEncoder:
    def __init__(self, model: Any, batch_size: int) -> None:
        self.model = model
        self.batch_size = batch_size
        get_dim = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        self.dimension = int(get_dim())
        # One call at a time: the fast tokenizer changes its padding settings per call and
        # raises "Already borrowed" when two threads use it at once.
        self._call_lock = threading.Lock()

    @classmethod
    def load(cls, folder: Path, batch_size: int) -> SentenceTransformersEncoder:
        # Set before the import: transformers and huggingface_hub read them at import.
        for key, value in _OFFLINE_FLAGS.items():
            os.environ.setdefault(key, value)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as missing:
            raise MissingExtraError(
                "sentence-transformers", "reference", f"the embedder folder {folder}"
            ) from missing

        with _quiet_loading():
            model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        return cls(model, batch_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._call_lock:
            return np.asarray(
                self.model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            )
