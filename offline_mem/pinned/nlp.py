"""Text analysis for retrieval: keyword terms (spaCy lemmas) and the query's words.
Entity mentions come from entities.py, with the same normalisation for memories and queries.

The spaCy pipeline loads from the verified local folder on the first text to analyse, with the
components the call needs (spacy_pipeline.py), shared per folder within a process.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..values import EntityMention
from .entities import normalize_entity
from .spacy_pipeline import load_spacy, parse

MAX_QUERY_NGRAM = 3
_PARTS = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class Analysis:
    terms: list[str]  # keyword terms, in text order (repeats kept: they are term frequencies)
    tokens: list[str] = field(default_factory=list)  # lowercased words, for query n-grams


class TextAnalyzer(ABC):
    """One abstract batch method; everything retrieval needs from language."""

    @abstractmethod
    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        """Analyse each text."""

    def analyze(self, text: str) -> Analysis:
        return self.analyze_batch([text])[0]

    def analyze_query(self, text: str) -> Analysis:
        """A search query's analysis; the same terms and tokens as `analyze`, possibly cheaper."""
        return self.analyze(text)

    def analyze_terms(self, texts: Sequence[str]) -> list[Analysis]:
        """The analyses of texts whose entities nobody reads (stored messages): the same terms
        and tokens as `analyze_batch`, possibly cheaper."""
        return self.analyze_batch(texts)

    def query_entity_norms(
        self, analysis: Analysis, mentions: Sequence[EntityMention] = ()
    ) -> list[str]:
        """Candidate entity norms for a query: its entity mentions plus every 1-3 word n-gram,
        so a lowercase 'lisbon' still finds 'Lisbon'. Only norms known in the scope will count."""
        norms = [m.norm for m in mentions]
        words = [w for w in analysis.tokens if w]
        for size in range(1, MAX_QUERY_NGRAM + 1):
            for start in range(len(words) - size + 1):
                norms.append(normalize_entity(" ".join(words[start : start + size])))
        return sorted({n for n in norms if n})[:200]


class SpacyAnalyzer(TextAnalyzer):
    def __init__(self, folder: Path, *, batch_size: int = 128) -> None:
        self.folder = Path(folder)
        self.batch_size = batch_size

    def analyze_batch(self, texts: Sequence[str]) -> list[Analysis]:
        if not texts:
            return []
        # a write's docs serve its entity extraction too (parse's cache): with the recogniser
        nlp = load_spacy(self.folder, entities=True)
        return [_from_doc(doc) for doc in parse(nlp, texts, batch_size=self.batch_size)]

    def analyze_query(self, text: str) -> Analysis:
        return _from_doc(parse(load_spacy(self.folder, entities=False), [text], query=True)[0])

    def analyze_terms(self, texts: Sequence[str]) -> list[Analysis]:
        # without the recogniser, as a query: it does not change a term, and is half the time
        if not texts:
            return []
        nlp = load_spacy(self.folder, entities=False)
        return [_from_doc(doc) for doc in parse(nlp, texts, query=True)]


def _from_doc(doc: Any) -> Analysis:
    # "quokka-velvet-27" is one spaCy token; index its parts so "velvet" finds it
    terms = [part for token in doc if (term := _term(token)) for part in _PARTS.split(term) if part]
    tokens = [token.lower_ for token in doc if not token.is_punct and not token.is_space]
    return Analysis(terms=terms, tokens=tokens)


def _term(token: Any) -> str | None:
    if token.is_punct or token.is_space or token.is_stop:
        return None
    if token.like_num or token.pos_ == "PROPN":
        text = token.lower_  # names and numbers stay as written ("4417", "okonkwo")
    else:
        text = (token.lemma_ or token.text).lower()
    text = text.strip("'\"-_.,")
    return text or None
