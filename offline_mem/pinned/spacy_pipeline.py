"""The pinned spaCy pipeline: loaded once per folder and process, with the components calls need,
and its docs parsed once per text (`parse`: keyword analysis, nlp.py, and entity extraction,
entities.py, of one write or query share them).

Retrieval never needs the parser nor the senter. A search needs tok2vec, tagger,
attribute_ruler and lemmatizer (lemmas, parts of speech, stop words; QUERY_SKIPS); a write
needs the named-entity recogniser too (entities.py). So the first call loads what it needs, and
the first write of a process that has only searched so far adds the recogniser, as spacy.load
would have (created from the folder's config, its weights read, appended last). In
en_core_web_sm the recogniser has its own tok2vec, so no other component's output depends on it
(tests/test_spacy_pipeline.py compares the two ways). Measured on this 2-core machine, loaded
by another process: 0.47 s to load without the recogniser against 0.53 s with it; adding it
later, 0.05 s.

Loading is by path (never by package name, never from a hub) and imports spaCy the fast way
(spacy_import.py). The pipeline is read-only once loaded; adding the recogniser appends to it
under the lock, and a search running meanwhile calls its components one by one without it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ModelError

UNUSED = ("parser", "senter")
RECOGNISER = "ner"

_PIPELINES: dict[str, Any] = {}
_WITHOUT_RECOGNISER: set[str] = set()  # folders whose pipeline was loaded for searches only
_LOCK = threading.Lock()


def load_spacy(folder: Path, *, entities: bool = True) -> Any:
    """The shared pipeline of `folder`; with `entities`, one that includes the recogniser (if
    the folder has one)."""
    key = _resolved(str(folder))
    with _LOCK:
        nlp = _PIPELINES.get(key)
        if nlp is None:
            skipped = UNUSED if entities else (*UNUSED, RECOGNISER)
            nlp = _PIPELINES[key] = _load(key, exclude=list(skipped))
            if not entities:
                _WITHOUT_RECOGNISER.add(key)
        elif entities and key in _WITHOUT_RECOGNISER:
            _add_recogniser(nlp, key)
            _WITHOUT_RECOGNISER.discard(key)
        return nlp


@functools.lru_cache(maxsize=16)
def _resolved(folder: str) -> str:
    """The folder's real path: the pipelines' key (resolving it on every search took ~0.3 ms)."""
    return str(Path(folder).resolve())


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
    `query=True` runs the pipeline without QUERY_SKIPS (its docs carry no `ents`), or takes a
    whole doc of the text from the cache (the same tokens, lemmas and tags)."""

    def key(text: str) -> tuple[int, bool, str]:
        whole = (id(nlp), False, text)
        return whole if query and whole in _DOCS else (id(nlp), query, text)

    with _DOCS_LOCK:
        missing = [t for t in dict.fromkeys(texts) if key(t) not in _DOCS]
        parsed = (
            _without(nlp, missing, QUERY_SKIPS)
            if query
            else nlp.pipe(missing, batch_size=batch_size)
        )
        for text, doc in zip(missing, parsed, strict=True):
            _DOCS[(id(nlp), query, text)] = doc
        docs = []
        for text in texts:
            _DOCS.move_to_end(key(text))
            docs.append(_DOCS[key(text)])
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


def _load(folder: str, **options: Any) -> Any:
    from .spacy_import import import_spacy

    try:
        spacy = import_spacy()
    except ImportError as exc:
        raise ModelError("text analysis needs spaCy: pip install 'offline_mem[nlp]'") from exc
    try:
        if _tokenizer_is_on_disk(folder):
            options["config"] = {"nlp": {"tokenizer": {"@tokenizers": _register_blank(spacy)}}}
        return spacy.load(folder, **options)
    except Exception as exc:  # spaCy raises many types; one typed error out
        raise ModelError(f"cannot load the spaCy pipeline from {folder}: {exc}") from exc


# spacy.load first builds the language's default tokenizer (2,700 special cases, ~20 regular
# expressions), then replaces every part of it with the folder's saved tokenizer
# (Tokenizer.from_bytes resets rules, prefixes, suffixes, infixes and both matchers before
# loading). A blank tokenizer in its place saves that first build: measured 0.05-0.07 s of
# 0.4 s of CPU; the tokens are the same (tests/test_spacy_pipeline.py).
_DEFAULT_TOKENIZER = {"@tokenizers": "spacy.Tokenizer.v1"}
_BLANK_TOKENIZER = "offline_mem.blank_tokenizer.v1"


def _tokenizer_is_on_disk(folder: str) -> bool:
    """The folder saves the standard tokenizer, which spacy.load will read from disk."""
    from spacy.util import load_config

    if not (Path(folder) / "tokenizer").is_file():
        return False
    return bool(load_config(Path(folder) / "config.cfg")["nlp"]["tokenizer"] == _DEFAULT_TOKENIZER)


def _register_blank(spacy: Any) -> str:
    from spacy.tokenizer import Tokenizer

    def blank_tokenizer() -> Any:
        return lambda nlp: Tokenizer(nlp.vocab)

    spacy.registry.tokenizers.register(_BLANK_TOKENIZER, func=blank_tokenizer)
    return _BLANK_TOKENIZER


def _add_recogniser(nlp: Any, folder: str) -> None:
    """What spacy.load does for the component (Language.from_config, then from_disk): create it
    from the folder's config, then read its weights and labels."""
    from spacy.util import load_config

    try:
        saved = load_config(Path(folder) / "config.cfg", interpolate=True)
        if RECOGNISER not in saved["nlp"]["pipeline"]:
            return  # a pipeline without one: nothing was left out
        config = dict(saved["components"][RECOGNISER])
        factory = config.pop("factory")
        component = nlp.add_pipe(factory, name=RECOGNISER, config=config)
        component.from_disk(Path(folder) / RECOGNISER, exclude=["vocab"])
        if RECOGNISER in saved["nlp"].get("disabled", []):
            nlp.disable_pipe(RECOGNISER)  # as spacy.load leaves it
    except Exception as exc:  # spaCy raises many types; one typed error out
        raise ModelError(f"cannot load the recogniser of {folder}: {exc}") from exc
