"""The real pinned embedder (all-MiniLM-L6-v2 from the verified models folder), never a hub."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from offline_mem import EmbedderMismatchError, Memory
from offline_mem.pinned.embedder import SentenceTransformerEmbedder
from offline_mem.pinned.model_files import model_identity, verified_model_dir
from offline_mem.testing import FakeEmbedder
from offline_mem.values import EmbedderIdentity

pytestmark = pytest.mark.real_model

NAME = "all-MiniLM-L6-v2"
EXPECTED_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@pytest.fixture(scope="module")
def real_embedder() -> Iterator[SentenceTransformerEmbedder]:
    ident = model_identity(NAME)
    identity = EmbedderIdentity(NAME, ident.sha256, int(ident.dimension or 0))
    embedder = SentenceTransformerEmbedder(verified_model_dir(NAME), identity)
    yield embedder
    embedder.close()


def test_identity_is_the_pinned_weights(real_embedder: SentenceTransformerEmbedder) -> None:
    assert real_embedder.identity.sha256 == EXPECTED_SHA
    assert real_embedder.identity.dimension == 384


def test_vectors_are_unit_length_deterministic_and_semantic(
    real_embedder: SentenceTransformerEmbedder,
) -> None:
    texts = [
        "I am allergic to peanuts",
        "Peanuts make me sick, I have an allergy",
        "The train to Porto leaves at nine",
    ]
    vectors = real_embedder.embed_batch(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again = real_embedder.embed_batch(texts)
    assert np.allclose(vectors, again, atol=1e-6)
    single = real_embedder.embed(texts[0])
    assert np.allclose(single, vectors[0], atol=1e-5)
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > 0.6 > unrelated


def test_single_text_path_matches_batches(real_embedder: SentenceTransformerEmbedder) -> None:
    """A query is embedded alone, stored texts in batches: the vectors must be the same for
    every kind of text, or stored vectors and query vectors would drift apart (and both equal
    sentence-transformers' own: tests/test_bert_numpy.py)."""
    assert real_embedder.backend == "numpy"  # the pinned model has the layout it reproduces
    texts = [
        "What is the name of Oskar's sister?",
        "  leading and trailing spaces  ",
        "x",
        "Ünïcödé, emoji 🐈 and numbers 4417-B",
        "a long text " * 200,  # past max_seq_length: truncated the same way
    ]
    batch = real_embedder.embed_batch(texts)
    for text, expected in zip(texts, batch, strict=True):
        single = real_embedder.embed(text)
        assert single.dtype == np.float32 and single.shape == (384,)
        assert np.abs(single - expected).max() < 1e-5, text


def test_memory_with_real_embedder_end_to_end(tmp_path) -> None:
    path = str(tmp_path / "real.db")
    with Memory({"path": path}) as memory:
        assert memory.embedder.identity.sha256 == EXPECTED_SHA
        memory.add(
            [
                {"role": "user", "content": "I am allergic to peanuts"},
                {"role": "user", "content": "My sister Marta is a doctor in Porto"},
                {"role": "user", "content": "I drive a red bicycle to work"},
            ],
            user_id="ana",
            infer=False,
        )
        memory.add("Bob likes peanut butter", user_id="bob", infer=False)
        hits = memory.search("what food should I avoid?", filters={"user_id": "ana"})["results"]
        assert hits[0]["memory"] == "I am allergic to peanuts"
        assert all(h["user_id"] == "ana" for h in hits)
        meta = memory.store.meta()
        assert meta["embedder_sha256"] == EXPECTED_SHA and meta["embedder_name"] == NAME
    # the file pins the real embedder: a fake one is refused
    with pytest.raises(EmbedderMismatchError):
        Memory({"path": path}, embedder=FakeEmbedder())


def test_opening_a_memory_draws_nothing_on_stderr(tmp_path) -> None:
    """A library must be quiet: transformers' "Loading weights" bar is switched off while the
    embedder loads (and an application's own setting is left as it was)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from transformers.utils import logging\n"
        "from offline_mem import Memory\n"
        "with Memory({'path': sys.argv[1]}) as m:\n"
        "    m.add('I keep bees', user_id='u', infer=False)\n"
        "    m.search('bees', filters={'user_id': 'u'})\n"
        "assert logging.is_progress_bar_enabled()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "quiet.db")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "it/s" not in done.stderr, done.stderr
