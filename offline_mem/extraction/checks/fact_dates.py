"""A fact's date checked against the relative date its message gives, and corrected in code.

The extraction prompt asks the model to resolve "yesterday" or "last Saturday" itself, and the
1.5B model often writes the message's own date instead: "Yesterday I planted a vegetable
garden", said on Sunday 23 April 2023, became "... on Sunday 23 April 2023"; "Last Saturday I
sang at an open mic night", said on Monday 15 May, became "... on Saturday 15 May 2023" (the
side-by-side benchmark, medium configuration: 3 of 10 "when" questions lost this way). The
message's phrase has one exact meaning (`relative_dates.RULES`), so when a fact's message holds
exactly one such phrase and no written date, a date in the fact near the message's day is
replaced by what the phrase means. Dates far from it (a wedding in August mentioned in May) are
another event's and stay. A fact without a date gets the phrase's only when it retells the
sentence that holds the phrase ("Tiago sang at an open mic night.", 1 of 10 "when" questions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime

from .content_words import MONTH_NAMES, WORD, content_stems
from .relative_dates import WEEKDAYS, relative_phrases, resolve_relative_dates

_MONTH = "|".join(MONTH_NAMES)
_DAY = "|".join(WEEKDAYS)
_ORDINAL = r"(?:st|nd|rd|th)?"
# "on Saturday, 15 May 2023", "23 April", "April 23rd, 2023", "2023-04-23 (Sunday)", with the
# preposition before it when there is one: the replacement brings its own.
WRITTEN_DATE = re.compile(
    rf"(?:\b(?:on|in|around)\s+)?(?:\b(?:{_DAY}),?\s+)?(?:the\s+)?(?:"
    rf"\b(?P<d1>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<m1>{_MONTH})(?:,?\s+(?P<y1>\d{{4}}))?\b"
    rf"|\b(?P<m2>{_MONTH})\s+(?P<d2>\d{{1,2}}){_ORDINAL}(?:,?\s+(?P<y2>\d{{4}}))?\b"
    rf"|\b(?P<iso>\d{{4}}-\d{{2}}-\d{{2}})(?:\s+\((?:{_DAY})\))?)",
    re.IGNORECASE,
)
NEAR_DAYS = 31  # a written date further than this from the message's day is not the phrase's
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def correct_fact_date(fact: str, sources: Sequence[str], observed: date) -> str:
    """`fact` with each written date near `observed` replaced by the one relative date its source
    messages give, resolved; an undated fact that retells the phrase's sentence gets it too.
    Unchanged when the messages give no phrase, several, or a written date of their own, and
    when the fact has a relative date of its own (resolved later, as written)."""
    phrases = {phrase for text in sources for phrase in relative_phrases(text)}
    if len(phrases) != 1 or any(WRITTEN_DATE.search(text) for text in sources):
        return fact
    if relative_phrases(fact):
        return fact
    (phrase,) = phrases

    def replace(match: re.Match[str]) -> str:
        written = _parse(match, observed)
        if written is None or abs((written - observed).days) > NEAR_DAYS:
            return match.group(0)
        return phrase

    corrected = WRITTEN_DATE.sub(replace, fact)
    if corrected == fact and not WRITTEN_DATE.search(fact) and _retells(fact, sources, phrase):
        corrected = f"{fact.rstrip().rstrip('.!')} {phrase}."
    # the phrase, back in words ("yesterday"), is resolved as a fact's own phrase is
    return resolve_relative_dates(corrected, observed) if corrected != fact else fact


def _retells(fact: str, sources: Sequence[str], phrase: str) -> bool:
    """Whether every content word of the fact (names aside) is in the sentence that holds the
    phrase: "Tiago sang at an open mic night." retells "Last Saturday I sang at an open mic
    night!", "User has a cat named Pepper." does not retell "Yesterday I adopted Pepper"."""
    names = frozenset(w.lower() for w in WORD.findall(fact) if w[0].isupper())
    words = content_stems(fact, names)
    for text in sources:
        for sentence in SENTENCE_END.split(text):
            if phrase in sentence.lower():
                return bool(words) and words <= content_stems(sentence, names)
    return False


def _parse(match: re.Match[str], observed: date) -> date | None:
    if match.group("iso"):
        try:
            return date.fromisoformat(match.group("iso"))
        except ValueError:
            return None
    day = match.group("d1") or match.group("d2")
    month = (match.group("m1") or match.group("m2")).lower()
    year = match.group("y1") or match.group("y2") or str(observed.year)
    try:
        return datetime(int(year), MONTH_NAMES.index(month) + 1, int(day)).date()
    except ValueError:
        return None
