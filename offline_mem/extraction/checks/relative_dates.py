"""Relative dates in extracted facts rewritten as absolute ones, against the observation date.

"User passed the driving test yesterday", stored on 24 September 2023, is useless a month
later; "... on 23 September 2023" stays true. The extraction prompt asks the model for absolute
dates, but a 1.5B model leaves "yesterday" or "last week" in about one fact in three that holds
one (benchmarks/extraction), so admission finishes the job in code: deterministic, exact, and
limited to the unambiguous phrases of the lexicon (extraction/lexicon.py), each with its meaning.
Anything it does not know it leaves as written.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from ..lexicon import ENGLISH, Lexicon


def long_date(day: date, lexicon: Lexicon = ENGLISH) -> str:
    """'23 September 2023': unambiguous in every locale, and LoCoMo's answer style."""
    return lexicon.long_date.format(day=day.day, month=_month(day, lexicon), year=day.year)


def _month(day: date, lexicon: Lexicon) -> str:
    return lexicon.month_names[day.month - 1].capitalize()


def _month_before(day: date) -> date:
    return (day.replace(day=1) - timedelta(days=1)).replace(day=1)


def _month_after(day: date) -> date:
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


def _weekday(name: str, day: date, direction: int, lexicon: Lexicon) -> date:
    """The nearest `name` day strictly before (direction -1) or after (+1) `day`."""
    target = lexicon.weekdays.index(name.lower())
    if direction < 0:
        return day - timedelta(days=(day.weekday() - target) % 7 or 7)
    return day + timedelta(days=(target - day.weekday()) % 7 or 7)


def _count(word: str, lexicon: Lexicon) -> int:
    return int(word) if word.isdigit() else lexicon.numbers[word.lower()]


def _meant(meaning: str, match: re.Match[str], day: date, lexicon: Lexicon) -> tuple[str, date]:
    """(kind of date, the day it is about) for a phrase of the lexicon (lexicon.MEANINGS)."""
    if meaning == "days-ago":
        return "day", day - timedelta(days=_count(match.group(1), lexicon))
    if meaning.startswith("day"):  # day-2 .. day+2
        return "day", day + timedelta(days=int(meaning[3:]))
    if meaning == "weeks-ago":
        return "around-day", day - timedelta(weeks=_count(match.group(1), lexicon))
    if meaning == "months-ago":  # the month only: "two months ago" is no exact day
        months = day.year * 12 + day.month - 1 - _count(match.group(1), lexicon)
        return "month", date(months // 12, months % 12 + 1, 1)
    if meaning == "years-ago":
        return "year", date(day.year - _count(match.group(1), lexicon), 1, 1)
    if meaning.startswith("weekday-"):
        return "day", _weekday(match.group(1), day, -1 if meaning.endswith("before") else 1,
                               lexicon)  # fmt: skip
    if meaning in ("weekend-before", "week-before", "week-after"):
        return meaning, day
    if meaning.startswith("month-"):
        return "month", _month_before(day) if meaning.endswith("before") else _month_after(day)
    shift = -1 if meaning.endswith("before") else 1  # year-before, year-after
    return "year", day.replace(year=day.year + shift, month=1, day=1)


def _written(kind: str, day: date, lexicon: Lexicon) -> tuple[str, str]:
    preposition, text = lexicon.date_words[kind]
    value = text.format(date=long_date(day, lexicon), month=_month(day, lexicon), year=day.year)
    return preposition, value


def resolve_relative_dates(text: str, observed: date, lexicon: Lexicon = ENGLISH) -> str:
    """`text` with every relative date phrase it knows replaced by the absolute date it meant
    when observed on `observed`."""
    for pattern, meaning in lexicon.relative_dates:

        def replace(match: re.Match[str], meaning: str = meaning) -> str:
            return _replace(match, meaning, observed, lexicon)

        text = pattern.sub(replace, text)
    return text


def relative_phrases(text: str, lexicon: Lexicon = ENGLISH) -> list[str]:
    """The relative date phrases `resolve_relative_dates` would replace in `text`, lowercased,
    longest first ("the day before yesterday" is one phrase, not also "yesterday")."""
    found = []
    for pattern, _ in lexicon.relative_dates:
        found += [match.group(0).lower() for match in pattern.finditer(text)]
        text = pattern.sub(" ", text)
    return found


def _replace(match: re.Match[str], meaning: str, day: date, lexicon: Lexicon) -> str:
    """The phrase's date with its preposition, unless the word before the phrase already says
    "when" ("since yesterday" becomes "since 23 September 2023", not "since on ...")."""
    preposition, value = _written(*_meant(meaning, match, day, lexicon), lexicon)
    before = match.string[: match.start()].split()
    if before and before[-1].lower().strip(",;:(") in lexicon.prepositions:
        return value
    phrase = f"{preposition} {value}"
    starts_sentence = not before or before[-1].endswith((".", "!", "?"))
    return phrase[0].upper() + phrase[1:] if starts_sentence else phrase
