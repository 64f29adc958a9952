"""A fact's date checked against the relative date its message gives, and corrected in code.

The extraction prompt asks the model to resolve "yesterday" or "last Saturday" itself, and the
1.5B model often writes the message's own date instead: "Yesterday I planted a vegetable
garden", said on Sunday 23 April 2023, became "... on Sunday 23 April 2023"; "Last Saturday I
sang at an open mic night", said on Monday 15 May, became "... on Saturday 15 May 2023" (the
side-by-side benchmark, medium configuration: 3 of 10 "when" questions lost this way). The
message's phrase has one exact meaning (the lexicon's `relative_dates`), so when a fact's
message holds exactly one such phrase and no written date, a date in the fact near the
message's day is replaced by what the phrase means. Dates far from it (a wedding in August
mentioned in May) are another event's and stay. A fact without a date gets the phrase's only
when it retells the clause that holds the phrase ("User sang at an open mic night.", 1 of 10
"when" questions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime

from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from .base import CheckContext, Dropped
from .content_words import WORD, content_stems
from .relative_dates import relative_phrases, resolve_relative_dates

NEAR_DAYS = 31  # a written date further than this from the message's day is not the phrase's
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def correct_fact_date(
    fact: str, sources: Sequence[str], observed: date, lexicon: Lexicon = ENGLISH
) -> str:
    """`fact` with each written date near `observed` replaced by the one relative date its source
    messages give, resolved; an undated fact that retells the phrase's sentence gets it too.
    Unchanged when the messages give no phrase, several, or a written date of their own, and
    when the fact has a relative date of its own (resolved later, as written)."""
    written_date = lexicon.written_date
    phrases = {phrase for text in sources for phrase in relative_phrases(text, lexicon)}
    if len(phrases) != 1 or any(written_date.search(text) for text in sources):
        return fact
    if relative_phrases(fact, lexicon):
        return fact
    (phrase,) = phrases

    def replace(match: re.Match[str]) -> str:
        written = _parse(match, observed, lexicon)
        if written is None or abs((written - observed).days) > NEAR_DAYS:
            return match.group(0)
        return phrase

    corrected = written_date.sub(replace, fact)
    if (
        corrected == fact
        and not written_date.search(fact)
        and not lexicon.written_period.search(fact)  # "in June 2023" says when already
        and _retells(fact, sources, phrase, lexicon)
    ):
        corrected = f"{fact.rstrip().rstrip('.!')} {phrase}."
    # the phrase, back in words ("yesterday"), is resolved as a fact's own phrase is
    return resolve_relative_dates(corrected, observed, lexicon) if corrected != fact else fact


def _retells(fact: str, sources: Sequence[str], phrase: str, lexicon: Lexicon) -> bool:
    """Whether every content word of the fact (names aside) is in the clause that holds the
    phrase: "User sang at an open mic night." retells "Last Saturday I sang at an open mic
    night!", "User has a cat named Pepper." does not retell "Yesterday I adopted Pepper", and
    "User is starting a business." does not retell "Lost my job yesterday, so I'm starting a
    business" (the date is the first clause's; a clause starts at a joining word followed by a
    subject, lexicon.clause_start)."""
    names = frozenset(w.lower() for w in WORD.findall(fact) if w[0].isupper())
    words = content_stems(fact, names, lexicon)
    for text in sources:
        for sentence in SENTENCE_END.split(text):
            for clause in lexicon.clause_start.split(sentence):
                if phrase in clause.lower():
                    return bool(words) and words <= content_stems(clause, names, lexicon)
    return False


def _parse(match: re.Match[str], observed: date, lexicon: Lexicon) -> date | None:
    if match.group("iso"):
        try:
            return date.fromisoformat(match.group("iso"))
        except ValueError:
            return None
    day = match.group("d1") or match.group("d2")
    month = (match.group("m1") or match.group("m2")).lower()
    year = match.group("y1") or match.group("y2") or str(observed.year)
    try:
        return datetime(int(year), lexicon.month_names.index(month) + 1, int(day)).date()
    except ValueError:
        return None


class RelativeDates:
    """Each fact with "yesterday", "last week", ... resolved against its messages' date (else the
    add's date): a 1.5B model often leaves them, and they mean nothing a month later. A date the
    model resolved itself is checked against its messages' phrase (`correct_fact_date`). The
    messages are read as given (`context.stored`). Drops nothing."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return [self._absolute(fact, ctx) for fact in facts], []

    @staticmethod
    def _absolute(fact: Fact, ctx: CheckContext) -> Fact:
        stamps = [ctx.stored[i].observed_at for i in fact.sources]
        known = [s for s in stamps if s is not None]
        observed = datetime.fromisoformat(max(known)).date() if known else ctx.now.date()
        sources = [ctx.stored[i].content for i in fact.sources]
        corrected = correct_fact_date(fact.text, sources, observed, ctx.lexicon)
        text = resolve_relative_dates(corrected, observed, ctx.lexicon)
        return fact if text == fact.text else replace(fact, text=text)
