"""Entity normalisation (pure) and the spaCy extractor on the pinned en_core_web_sm."""

from __future__ import annotations

import pytest

from offline_mem.config import DEFAULT_NLP, resolve_models_dir
from offline_mem.entities import SpacyEntities, normalize_entity


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("The Matrix", "matrix"), ("Ana's", "ana"), ("  New   York ", "new york"),
     ("“Dune”", "dune"), ("ＬＩＳＢＯＮ", "lisbon"), ("Straße", "strasse")],
)  # fmt: skip
def test_normalize_entity(raw, norm):
    assert normalize_entity(raw) == norm


@pytest.fixture(scope="module")
def spacy_entities():
    return SpacyEntities(DEFAULT_NLP, resolve_models_dir())


@pytest.mark.real_model
def test_spacy_entities_from_the_verified_folder(spacy_entities):
    lisbon, ana, quoted = spacy_entities.extract_batch([
        "User moved from Lisbon to Porto in May 2024.",
        "User's sister Ana works at Google in New York.",
        'User loves the film "The Matrix".',
    ])  # fmt: skip
    assert [(e.norm, e.kind) for e in lisbon] == [("lisbon", "GPE"), ("porto", "GPE")]
    assert {"ana", "google", "new york"} <= {e.norm for e in ana}
    assert "user" not in {e.norm for e in ana}
    assert "matrix" in {e.norm for e in quoted}
    assert spacy_entities.extract("") == []
