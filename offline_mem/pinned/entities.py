"""Entities named in a text (people, places, organisations, titles), for entity links and
entity-aware retrieval.

`SpacyEntities` loads the pinned en_core_web_sm from its verified folder, by path (never by
package name, never downloaded), on first use. It keeps spaCy's named entities except the
numeric kinds (dates, amounts), runs of proper nouns spaCy did not label (kind "PROPER") and
double-quoted titles (kind "QUOTED"). `normalize_entity` is pure and decides which mentions are
the same entity: the store links a memory to the entity of its scope with the same normalised
form (UNIQUE(scope, norm)). There is no embedding-similarity merging of entities: exact
normalised match only.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..values import EntityMention

SKIPPED_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
# Words the extraction prompt uses for the speakers: every memory mentions them.
SKIPPED_NORMS = frozenset({"user", "assistant", "the user", "the assistant", "i", "me", "you"})
MAX_ENTITY_CHARS = 100
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")
_LEADING = re.compile(r"^(?:the|a|an)\s+")
_POSSESSIVE = re.compile(r"['’]s$")
_EDGE_PUNCT = "\"'“”‘’.,;:!?()[]{}<>"


def normalize_entity(name: str) -> str:
    """The form two mentions share when they name the same entity: Unicode NFKC, case-folded,
    whitespace collapsed, edge punctuation, a leading article and a possessive 's removed.
    "The Matrix" -> "matrix"; "Lisbon's" -> "lisbon"; "  New   York " -> "new york"."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = " ".join(text.split()).strip(_EDGE_PUNCT + " ")
    text = _POSSESSIVE.sub("", text).strip(_EDGE_PUNCT + " ")
    text = _LEADING.sub("", text)
    return text[:MAX_ENTITY_CHARS]


def _mention(name: str, kind: str) -> EntityMention | None:
    clean = " ".join(name.split()).strip(_EDGE_PUNCT + " ")
    norm = normalize_entity(clean)
    if not norm or norm in SKIPPED_NORMS or not any(ch.isalnum() for ch in norm):
        return None
    return EntityMention(name=clean[:MAX_ENTITY_CHARS], norm=norm, kind=kind)


def unique_mentions(mentions: Iterable[EntityMention | None]) -> list[EntityMention]:
    """First mention of each normalised form, in order."""
    seen: dict[str, EntityMention] = {}
    for mention in mentions:
        if mention is not None and mention.norm not in seen:
            seen[mention.norm] = mention
    return list(seen.values())


class EntityExtractor(ABC):
    @abstractmethod
    def extract_batch(self, texts: Sequence[str]) -> list[list[EntityMention]]:
        """The entity mentions of each text, one per normalised form, in order of appearance."""

    def extract(self, text: str) -> list[EntityMention]:
        return self.extract_batch([text])[0]

    def extract_query(self, text: str) -> list[EntityMention]:
        """A search query's mentions. Search also looks up every 1-3 word n-gram of the query
        (nlp.query_entity_norms), so an extractor may skip costly recognition here."""
        return self.extract(text)

    def opening_verbs(self, sentences: Sequence[str]) -> list[str | None]:
        """For each sentence, the verb it opens with when that verb is in its base form with no
        subject before it ("Push through!", "Oh, don't forget..."; interjections, adverbs,
        conjunctions and a name before a comma skipped), lowercased; else None. What a sentence
        orders or advises is no fact of anyone (checks/advice.py). The default has no
        part-of-speech tagger and finds none."""
        return [None for _ in sentences]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model; the default holds none."""


class NoEntities(EntityExtractor):
    """Entity extraction switched off (config `nlp: None`): no links are written."""

    def extract_batch(self, texts: Sequence[str]) -> list[list[EntityMention]]:
        return [[] for _ in texts]


class SpacyEntities(EntityExtractor):
    """spaCy's small English pipeline from the verified models folder."""

    def __init__(self, name: str, models_dir: Path | None = None) -> None:
        self.name = name
        self.models_dir = models_dir
        self._folder: Path | None = None
        self._lock = threading.Lock()

    def _load(self, *, entities: bool) -> Any:
        with self._lock:
            if self._folder is None:
                from .model_files import verified_model_dir

                self._folder = verified_model_dir(self.name, self.models_dir)
        from .spacy_pipeline import load_spacy

        # One pipeline per folder per process, shared with keyword analysis (nlp.py).
        return load_spacy(self._folder, entities=entities)

    def extract_batch(self, texts: Sequence[str]) -> list[list[EntityMention]]:
        if not texts:
            return []
        nlp = self._load(entities=True)
        from .spacy_pipeline import parse

        return [_from_doc(doc) for doc in parse(nlp, texts)]

    def extract_query(self, text: str) -> list[EntityMention]:
        """Without the recogniser (the query's doc has no `ents`): its proper-noun runs and
        quoted titles, which cover names longer than the n-grams search looks up."""
        from .spacy_pipeline import parse

        return _from_doc(parse(self._load(entities=False), [text], query=True)[0])

    def opening_verbs(self, sentences: Sequence[str]) -> list[str | None]:
        from .spacy_pipeline import parse

        docs = parse(self._load(entities=False), sentences, query=True) if sentences else []
        return [_opening_verb(doc) for doc in docs]

    def close(self) -> None:
        self._folder = None


# what may come before a sentence's opening verb: "Oh,", "So", "And", "Just", "Definitely,"
_BEFORE_THE_VERB = frozenset({"INTJ", "PUNCT", "CCONJ", "ADV", "SPACE"})


def _opening_verb(doc: Any) -> str | None:
    tokens = list(doc)
    i = 0
    while i < len(tokens):
        vocative = tokens[i].pos_ == "PROPN" and i + 1 < len(tokens) and tokens[i + 1].text == ","
        if tokens[i].pos_ not in _BEFORE_THE_VERB and not vocative:
            break
        i += 1
    if i == len(tokens):
        return None
    first = tokens[i]
    # a base form ("VB" in English's tag set) or a pipeline's imperative mood
    base = first.tag_ == "VB" or "Imp" in first.morph.get("Mood")
    # "don't forget": spaCy tags a lowercase "do" before "n't" as present tense
    after = tokens[i + 1 : i + 3]
    negated = (
        first.lemma_ == "do"
        and len(after) == 2
        and after[0].pos_ == "PART"
        and after[1].tag_ == "VB"
    )
    return first.lower_ if first.pos_ in ("VERB", "AUX") and (base or negated) else None


def _from_doc(doc: Any) -> list[EntityMention]:
    found: list[tuple[int, EntityMention | None]] = []
    covered: set[int] = set()
    for ent in doc.ents:
        covered.update(range(ent.start, ent.end))
        if ent.label_ not in SKIPPED_LABELS:
            found.append((ent.start_char, _mention(ent.text, ent.label_)))
    run: list[Any] = []
    for token in [*doc, None]:
        if token is not None and token.pos_ == "PROPN" and token.i not in covered:
            run.append(token)
            continue
        if run:
            start, end = run[0].idx, run[-1].idx + len(run[-1].text)
            found.append((start, _mention(doc.text[start:end], "PROPER")))
            run = []
    for match in _QUOTED.finditer(doc.text):
        found.append((match.start(), _mention(match.group(1), "QUOTED")))
    found.sort(key=lambda pair: pair[0])
    return unique_mentions(mention for _, mention in found)
