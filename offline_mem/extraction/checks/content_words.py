"""Content words: what two short texts must have in common to be about the same thing.

Used to check the 1.5B model's judgements cheaply: which message a fact comes from
(grounding.py) and whether a new fact can replace an old memory at all (admission.py,
supersession.py). Words are lowercased and crudely stemmed (`stem`); stop words, numbers and
the names given are left out.
"""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    """
    a about after again all also am an and any are as at be been before being both but by can
    could did do does doing during each for from further had has have having he her here hers
    him his how i if in into is it its just me more most my no nor not now of off on once only
    or other our out over own same she should so some such than that the their them then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours user assistant s t don didn isn wasn
    really lately still hey hi hello oh yes yeah ok okay
    """.split()  # noqa: SIM905 - a word list reads better as text
)
WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Month names say when, not what: two facts dated in the same month are not about the same thing.
MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
MONTHS = frozenset(MONTH_NAMES)


# Where someone lives and where they work are the facts that change most, and "lives in Ghent" /
# "moved to Aarhus" or "works as a nurse" / "started a new job" share no word: each group of
# words counts as one.
HOME_WORDS = "live lives living lived move moves moving moved relocated"
WORK_WORDS = "work works working worked job jobs employed hired career"
SAME_STEM = {
    **{word: "resid" for word in HOME_WORDS.split()},
    **{word: "occup" for word in WORK_WORDS.split()},
}


def words_of(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def stem(word: str) -> str:
    """A crude stem: a plural or verb ending off, a final "e" off, then the first five letters
    ("adopted" and "adopt", "kids" and "kid", "baked" and "bake" meet)."""
    if word in SAME_STEM:
        return SAME_STEM[word]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word[:5]


def content_stems(text: str, names: frozenset[str]) -> set[str]:
    return {
        stem(w)
        for w in words_of(text)
        if w not in STOP_WORDS and w not in names and not w.isdigit()
    }


def share_a_content_word(first: str, second: str, names: frozenset[str]) -> bool:
    """Whether two facts have a content word in common (stop words, speaker names, numbers and
    month names left out): the least two facts need to be about the same thing."""
    ignored = names | MONTHS
    return bool(content_stems(first, ignored) & content_stems(second, ignored))
