"""Vectors as pgvector takes them: a text literal cast to `vector`, exact to the float32."""

from __future__ import annotations

import numpy as np


def vector_literal(vector: np.ndarray) -> str:
    """'[x,y,...]': each float32 written as the shortest decimal that reads back to it."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(repr(v) for v in values) + "]"
