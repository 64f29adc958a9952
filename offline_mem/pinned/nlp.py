"""Text analysis for retrieval: keyword terms (spaCy lemmas) and the query's words.
Entity mentions come from entities.py, with the same normalisation for memories and queries.

The spaCy pipeline loads from the verified local folder on the first text to analyse, with the
components the call needs (spacy_pipeline.py), shared per folder within a process.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store.records import EntityMention
from .entities import normalize_entity
from .spacy_pipeline import load_spacy

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

    def query_entity_norms(
        self, analysis: Analysis, mentions: Sequence[EntityMention] = ()
    ) -> list[str]:
        """Candidate entity norms for a query: its entity mentions plus every 1-3 word n-gram,
        so a lowercase 'marta' still finds 'Marta'. Only norms known in the scope will count."""
        norms = [m.norm for m in mentions]
        words = [w for w in analysis.tokens if w]
        for size in range(1, MAX_QUERY_NGRAM + 1):
            for start in range(len(words) - size + 1):
                norms.append(normalize_entity(" ".join(words[start : start + size])))
        return sorted({n for n in norms if n})[:200]


_DOCS: OrderedDict[tuple[int, bool, str], Any] = OrderedDict()
_DOCS_LOCK = threading.Lock()
MAX_CACHED_DOCS = 4096
# Queries skip the named-entity recogniser: search needs their lemmas and proper-noun runs, and
# its entity signal looks up every 1-3 word n-gram anyway (measured: 4.2 ms -> 1.9 ms a query).
QUERY_SKIPS = frozenset({"ner"})


def parse(
    nlp: Any, texts: Sequence[str], *, batch_size: int = 128, query: bool = False
) -> list[Any]:
    """spaCy docs for the texts, parsed once: keyword analysis and entity extraction of the same
    write (or query) ask for the same texts, and a small LRU cache serves the second ask.
    `query=True` runs the pipeline without QUERY_SKIPS (its docs carry no `ents`)."""
    with _DOCS_LOCK:
        missing = [t for t in dict.fromkeys(texts) if (id(nlp), query, t) not in _DOCS]
        parsed = (
            _without(nlp, missing, QUERY_SKIPS)
            if query
            else nlp.pipe(missing, batch_size=batch_size)
        )
        for text, doc in zip(missing, parsed, strict=True):
            _DOCS[(id(nlp), query, text)] = doc
        docs = []
        for text in texts:
            _DOCS.move_to_end((id(nlp), query, text))
            docs.append(_DOCS[(id(nlp), query, text)])
        while len(_DOCS) > MAX_CACHED_DOCS:
            _DOCS.popitem(last=False)
        return docs


def _without(nlp: Any, texts: Sequence[str], skips: frozenset[str]) -> list[Any]:
    """The pipeline's components in order, minus `skips`, called one by one: unlike
    `nlp.select_pipes` this changes nothing shared, so a write parsing in another thread at the
    same moment still gets its entities."""
    docs = []
    for text in texts:
        doc = nlp.make_doc(text)
        for name, component in nlp.pipeline:
            if name not in skips:
                doc = component(doc)
        docs.append(doc)
    return docs


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


def term_frequencies(terms: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = counts.get(term, 0) + 1
    return counts
