"""A BERT sentence embedder in numpy: the pinned all-MiniLM-L6-v2 without torch.

Importing sentence-transformers (and with it transformers and torch) takes ~10 s on a cold 2-core
machine, a thousand times the forward pass of a query. This module computes the vectors of
sentence-transformers' `encode` for the layout bert_layout.py accepts, from the same files: the
weights with `safetensors.numpy`; the tokens with the `tokenizers` library from the folder's
tokenizer.json (its fixed padding switched off, truncation at the model's max_seq_length, as
sentence-transformers sets them); then BertModel's arithmetic in float32 (embeddings + LayerNorm,
self-attention, exact erf GELU), mean pooling over the tokens and L2 normalisation.
tests/test_bert_numpy.py holds it to sentence-transformers' vectors (within 1e-5 per component;
measured: 2e-7).

A batch is packed, not padded: every text's tokens one after another, the dense layers over all
of them at once and attention over each text's own rows, so no token attends to padding and
nothing is computed for padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .bert_layout import BertLayout, UnsupportedLayout, check_tokenizer, read_layout
from .blas_threads import blas_threads_for_forward

WEIGHTS_NAME = "model.safetensors"


@dataclass(frozen=True)
class _Layer:
    """One encoder layer. Dense weights are kept transposed, (in, out) and contiguous: for a
    query's ~20 rows `x @ w` then runs 1.4-1.7x faster than `x @ weight.T` on the checkpoint's
    (out, in) array, with the same result bits (measured with OpenBLAS, 1 and 2 threads)."""

    qkv: tuple[np.ndarray, np.ndarray]  # query, key and value side by side: (hidden, 3 * hidden)
    attention_out: tuple[np.ndarray, np.ndarray]
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: tuple[np.ndarray, np.ndarray]
    output: tuple[np.ndarray, np.ndarray]
    output_norm: tuple[np.ndarray, np.ndarray]


class NumpyBertEncoder:
    """Unit-length sentence embeddings (float32) of a BERT folder, in numpy."""

    def __init__(
        self,
        layout: BertLayout,
        weights: dict[str, np.ndarray],
        tokenizer: Any,
        *,
        batch_size: int = 64,
    ) -> None:
        check_tokenizer(tokenizer, layout)
        if tokenizer.get_vocab_size(with_added_tokens=True) > layout.vocab_size:
            raise UnsupportedLayout("tokenizer.json has more tokens than the embedding table")
        # tokenizer.json carries its own padding and truncation (128 for all-MiniLM-L6-v2);
        # sentence-transformers overrides both: no fixed padding, truncation at max_seq_length.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=layout.max_seq_length, strategy="longest_first")
        self.layout = layout
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        w = _Weights(weights)
        self.word = w.take("embeddings.word_embeddings.weight", (layout.vocab_size, layout.hidden))
        self.position = w.take("embeddings.position_embeddings.weight")[: layout.max_seq_length]
        self.token_type = w.take("embeddings.token_type_embeddings.weight")[0]
        self.embedding_norm = w.pair("embeddings.LayerNorm")
        self.layers = []
        for i in range(layout.layers):
            p = f"encoder.layer.{i}"
            projections = [w.pair(f"{p}.attention.self.{x}") for x in ("query", "key", "value")]
            self.layers.append(
                _Layer(
                    qkv=_dense(
                        np.concatenate([weight for weight, _ in projections]),
                        np.concatenate([bias for _, bias in projections]),
                    ),
                    attention_out=_dense(*w.pair(f"{p}.attention.output.dense")),
                    attention_norm=w.pair(f"{p}.attention.output.LayerNorm"),
                    intermediate=_dense(*w.pair(f"{p}.intermediate.dense")),
                    output=_dense(*w.pair(f"{p}.output.dense")),
                    output_norm=w.pair(f"{p}.output.LayerNorm"),
                )
            )
        if self.position.shape[0] < layout.max_seq_length:
            raise UnsupportedLayout("fewer position embeddings than max_seq_length")

    @classmethod
    def load(cls, layout: BertLayout, *, batch_size: int = 64) -> NumpyBertEncoder:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(layout.folder / "tokenizer.json"))
        weights = load_file(str(layout.folder / WEIGHTS_NAME))
        arrays = {_strip_prefix(name): array for name, array in weights.items()}
        return cls(layout, arrays, tokenizer, batch_size=batch_size)

    @property
    def dimension(self) -> int:
        return self.layout.hidden

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), hidden) float32 rows of unit length, `batch_size` texts per forward."""
        batch_size = self.batch_size
        out = np.zeros((len(texts), self.layout.hidden), dtype=np.float32)
        # one text at a time: encode_batch would start the tokenizer's own thread pool
        ids = [self.tokenizer.encode(text).ids for text in texts]
        with blas_threads_for_forward():
            for start in range(0, len(ids), batch_size):
                out[start : start + batch_size] = self._forward(ids[start : start + batch_size])
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        """Unit-length embeddings of token id lists, packed (see the module docstring)."""
        lengths = np.array([len(ids) for ids in batch])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        tokens = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch])
        positions = np.concatenate([np.arange(n) for n in lengths])
        eps = self.layout.layer_norm_eps
        x = self.word[tokens] + self.position[positions] + self.token_type
        x = _layer_norm(x, *self.embedding_norm, eps)
        for layer in self.layers:
            qkv = _linear(x, *layer.qkv)
            attended = np.empty_like(x)
            for start, n in zip(starts.tolist(), lengths.tolist(), strict=True):
                attended[start : start + n] = self._attention(qkv[start : start + n])
            x = _layer_norm(_linear(attended, *layer.attention_out) + x, *layer.attention_norm, eps)
            inner = _gelu(_linear(x, *layer.intermediate))
            x = _layer_norm(_linear(inner, *layer.output) + x, *layer.output_norm, eps)
        # mean over each text's tokens (summed in float64: up to 256 rows), then unit length
        pooled = np.add.reduceat(x, starts, axis=0, dtype=np.float64) / lengths[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)

    def _attention(self, qkv: np.ndarray) -> np.ndarray:
        """Multi-head self-attention over one text's (tokens, 3 * hidden) projections."""
        n = qkv.shape[0]
        heads = self.layout.heads
        size = self.layout.hidden // heads
        q, k, v = qkv.reshape(n, 3, heads, size).transpose(1, 2, 0, 3)  # 3 x (heads, n, size)
        scores = (q @ k.transpose(0, 2, 1)) * np.float32(1.0 / np.sqrt(size))
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        return (scores @ v).transpose(1, 0, 2).reshape(n, heads * size)


class _Weights:
    """The named arrays of the checkpoint, each checked to exist (and its shape, if given)."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.arrays = arrays

    def take(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        array = self.arrays.get(name)
        if array is None or array.dtype != np.float32:
            raise UnsupportedLayout(f"{WEIGHTS_NAME} has no float32 {name}")
        if shape is not None and array.shape != shape:
            raise UnsupportedLayout(f"{name} has shape {array.shape}, expected {shape}")
        return array

    def pair(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        return self.take(f"{prefix}.weight"), self.take(f"{prefix}.bias")


def _strip_prefix(name: str) -> str:
    """Checkpoints saved from BertForX name the encoder's weights "bert.…"."""
    return name.removeprefix("bert.")


def _dense(weight: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A checkpoint's (out, in) weight as the contiguous (in, out) array `_linear` takes."""
    return np.ascontiguousarray(weight.T), bias


def _linear(x: np.ndarray, weight_in_out: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """torch.nn.functional.linear with the weight already transposed (see `_dense`)."""
    return x @ weight_in_out + bias


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.square(centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + np.float32(eps)) * weight + bias


# numpy has no erf. Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), the formula of PyTorch's own
# AVX2 float32 erf (ATen/cpu/vec/vec256/vec256_float.h).
_P = np.float32(0.3275911)
_A = tuple(
    np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)


def _erf(x: np.ndarray) -> np.ndarray:
    magnitude = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + _P * magnitude)
    poly = _A[0]
    for a in _A[1:]:
        poly = poly * t + a
    result = np.float32(1.0) - poly * t * np.exp(-magnitude * magnitude)
    return np.copysign(result, x)


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, x * Phi(x), as BERT's "gelu" (not the tanh approximation)."""
    return np.float32(0.5) * x * (np.float32(1.0) + _erf(x * np.float32(1.0 / np.sqrt(2.0))))


def load_encoder(folder: Path, *, batch_size: int = 64) -> NumpyBertEncoder:
    """The numpy encoder of a folder whose layout it reproduces; UnsupportedLayout otherwise."""
    return NumpyBertEncoder.load(read_layout(folder), batch_size=batch_size)
