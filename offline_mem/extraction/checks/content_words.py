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


def subject_of(text: str, lexicon: Lexicon = ENGLISH) -> tuple[str, str | None]:
    """Whom a fact is about, as the prompt has every fact open with it: its first word,
    lowercased, and the word after a possessive when it opens with one ("Ana's mother ..." ->
    ("ana", "mother"); "Ana moved ..." -> ("ana", None))."""
    opening = text.lstrip()
    first = next(iter(WORD.findall(opening)), "")
    rest = opening[len(first) :] if opening[: len(first)] == first else ""
    suffix = next((s for s in lexicon.possessive_suffixes if rest.startswith(s)), None)
    owned = words_of(rest[len(suffix) :])[:1] if suffix else []
    return first.lower(), owned[0] if owned else None


def same_subject(first: str, second: str, lexicon: Lexicon = ENGLISH) -> bool:
    """Whether two facts may be about the same person or thing: the same opening word (a side
    word such as "User" may stand for any name: an add without the user's name writes "User
    moved to Porto" of the user an earlier add called "Ana"), and, when both open with a
    possessive, the same thing owned ("Ana's mother" is not "Ana's father"; "Ana's job" may be
    what "Ana works ..." is about)."""
    (a, a_owned), (b, b_owned) = subject_of(first, lexicon), subject_of(second, lexicon)
    same = a == b or a in lexicon.side_words or b in lexicon.side_words
    return same and (a_owned is None or b_owned is None or a_owned == b_owned)
