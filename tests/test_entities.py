"""Entity normalisation (pure) and the spaCy extractor on the pinned en_core_web_sm."""

from __future__ import annotations

import pytest

from offline_mem.config import DEFAULT_NLP, resolve_models_dir
from offline_mem.pinned.entities import SpacyEntities, normalize_entity


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


@pytest.mark.real_model
def test_query_path_skips_the_recogniser_but_keeps_analysis_and_names(spacy_entities):
    """Search parses queries without spaCy's NER (spacy_pipeline.QUERY_SKIPS). Keyword terms and
    tokens must not change, names must still be found, and the cheaper doc must never be handed
    to a write asking for the same text."""
    from offline_mem.pinned.nlp import SpacyAnalyzer

    analyzer = SpacyAnalyzer(resolve_models_dir() / DEFAULT_NLP)
    queries = [
        "When did Oskar's sister Ana move to New York?",
        'Which film did the user call "The Lord of the Rings" her favourite?',
        "what is the name of marta's cat",
        "How many km did User run in the 2024 Berlin Marathon?",
    ]
    for query in queries:
        fast = analyzer.analyze_query(query)
        full = analyzer.analyze(query)
        assert (fast.terms, fast.tokens) == (full.terms, full.tokens), query
    first = {m.norm for m in spacy_entities.extract_query(queries[0])}
    assert {"oskar", "ana", "new york"} <= first
    titled = {m.norm for m in spacy_entities.extract_query(queries[1])}
    assert "lord of the rings" in titled  # four words: longer than the n-grams search adds
    # The same text parsed for a write right after the query still gets spaCy's labels.
    kinds = {m.norm: m.kind for m in spacy_entities.extract(queries[0])}
    assert kinds.get("new york") == "GPE"


@pytest.mark.real_model
def test_opening_verbs_find_orders_and_advice_not_statements(spacy_entities):
    sentences = [
        "Push through and it'll be worth it.",
        "Oh, don't forget to take breaks!",
        "Mira, take it easy!",
        "Let's plan a trip to the coast.",
        "I pushed through the last mile.",
        "She takes the bus to work.",
        "Was it relaxing?",
        "",
    ]
    assert spacy_entities.opening_verbs(sentences) == [
        "push", "do", "take", "let", None, None, None, None,
    ]  # fmt: skip
