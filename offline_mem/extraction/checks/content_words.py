"""Content words: what two short texts must have in common to be about the same thing.

Used to check the 1.5B model's judgements cheaply: which message a fact comes from
(grounding.py) and whether a new fact can replace an old memory at all (supersession.py).
Words are lowercased and crudely stemmed (`stem`); stop words, numbers and the names given are
left out. The words of the language come from its lexicon (extraction/lexicon.py).
"""

from __future__ import annotations

import re

from ..lexicon import ENGLISH, Lexicon

WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words_of(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def stem(word: str, lexicon: Lexicon = ENGLISH) -> str:
    """A crude stem: the lexicon's group of the word if it has one, else the word without its
    ending, cut to its first five letters."""
    if word in lexicon.same_stem:
        return lexicon.same_stem[word]
    return lexicon.strip_ending(word)[:5]


def content_stems(text: str, names: frozenset[str], lexicon: Lexicon = ENGLISH) -> set[str]:
    return {
        stem(w, lexicon)
        for w in words_of(text)
        if w not in lexicon.stop_words and w not in names and not w.isdigit()
    }


def share_a_content_word(
    first: str, second: str, names: frozenset[str], lexicon: Lexicon = ENGLISH
) -> bool:
    """Whether two facts have a content word in common (stop words, speaker names, numbers and
    month names left out: month names say when, not what): the least two facts need to be
    about the same thing."""
    ignored = names | lexicon.months
    return bool(content_stems(first, ignored, lexicon) & content_stems(second, ignored, lexicon))
