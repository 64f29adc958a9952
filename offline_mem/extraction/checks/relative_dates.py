"""Relative dates in extracted facts rewritten as absolute ones, against the observation date.

"Rui passed his driving test yesterday", stored on 24 September 2023, is useless a month
later; "... on 23 September 2023" stays true. The extraction prompt asks the model for absolute
dates, but a 1.5B model leaves "yesterday" or "last week" in about one fact in three that holds
one (benchmarks/extraction), so admission finishes the job in code: deterministic, exact, and
limited to unambiguous English phrases. Anything it does not know it leaves as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "a couple of": 2, "a": 1,
}  # fmt: skip
# When one of these words comes right before the phrase, it already says "when": "since
# yesterday" becomes "since 23 September 2023", not "since on 23 September 2023".
PREPOSITIONS = {"since", "from", "until", "till", "by", "before", "after", "on", "in", "at", "of",
                "as", "during", "to"}  # fmt: skip


def long_date(day: date) -> str:
    """'23 September 2023': unambiguous in every locale, and LoCoMo's answer style."""
    return f"{day.day} {day:%B} {day.year}"


def _month_before(day: date) -> date:
    return (day.replace(day=1) - timedelta(days=1)).replace(day=1)


def _month_after(day: date) -> date:
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


def _weekday(name: str, day: date, direction: int) -> date:
    """The nearest `name` day strictly before (direction -1) or after (+1) `day`."""
    target = WEEKDAYS.index(name.lower())
    if direction < 0:
        return day - timedelta(days=(day.weekday() - target) % 7 or 7)
    return day + timedelta(days=(target - day.weekday()) % 7 or 7)


# (pattern, (preposition, text) for the observation day). The preposition is dropped when the
# fact already has one before the phrase. Longest phrases first.
Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], tuple[str, str]]]
_NUM = "|".join(sorted((re.escape(k) for k in NUMBERS), key=len, reverse=True))
_DAY = "|".join(WEEKDAYS)
RULES: list[Rule] = [
    (re.compile(r"\bthe day before yesterday\b", re.I),
     lambda m, d: ("on", long_date(d - timedelta(days=2)))),
    (re.compile(r"\bthe day after tomorrow\b", re.I),
     lambda m, d: ("on", long_date(d + timedelta(days=2)))),
    (re.compile(r"\byesterday (?:morning|afternoon|evening)\b|\byesterday\b(?!')|\blast night\b",
                re.I),
     lambda m, d: ("on", long_date(d - timedelta(days=1)))),
    (re.compile(r"\btomorrow (?:morning|afternoon|evening|night)\b|\btomorrow\b(?!')", re.I),
     lambda m, d: ("on", long_date(d + timedelta(days=1)))),
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b(?!')", re.I),
     lambda m, d: ("on", long_date(d))),
    (re.compile(rf"\b({_NUM}|\d{{1,2}}) days? ago\b", re.I),
     lambda m, d: ("on", long_date(d - timedelta(days=_count(m.group(1)))))),
    (re.compile(rf"\b({_NUM}|\d{{1,2}}) weeks? ago\b", re.I),
     lambda m, d: ("around", long_date(d - timedelta(weeks=_count(m.group(1)))))),
    (re.compile(rf"\blast ({_DAY})\b", re.I),
     lambda m, d: ("on", long_date(_weekday(m.group(1), d, -1)))),
    (re.compile(rf"\b(?:next|this coming) ({_DAY})\b", re.I),
     lambda m, d: ("on", long_date(_weekday(m.group(1), d, +1)))),
    (re.compile(r"\blast weekend\b", re.I),
     lambda m, d: ("on", f"the weekend before {long_date(d)}")),
    (re.compile(r"\blast week\b", re.I), lambda m, d: ("in", f"the week before {long_date(d)}")),
    (re.compile(r"\bnext week\b", re.I), lambda m, d: ("in", f"the week after {long_date(d)}")),
    (re.compile(r"\blast month\b", re.I), lambda m, d: ("in", f"{_month_before(d):%B %Y}")),
    (re.compile(r"\bnext month\b", re.I), lambda m, d: ("in", f"{_month_after(d):%B %Y}")),
    (re.compile(r"\blast year\b", re.I), lambda m, d: ("in", str(d.year - 1))),
    (re.compile(r"\bnext year\b", re.I), lambda m, d: ("in", str(d.year + 1))),
]  # fmt: skip


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word.lower()]


def resolve_relative_dates(text: str, observed: date) -> str:
    """`text` with every relative date phrase it knows replaced by the absolute date it meant
    when observed on `observed`."""
    for pattern, absolute in RULES:
        text = pattern.sub(lambda m, f=absolute: _replace(m, f, observed), text)  # type: ignore[misc]
    return text


def relative_phrases(text: str) -> list[str]:
    """The relative date phrases `resolve_relative_dates` would replace in `text`, lowercased,
    longest first ("the day before yesterday" is one phrase, not also "yesterday")."""
    found = []
    for pattern, _ in RULES:
        found += [match.group(0).lower() for match in pattern.finditer(text)]
        text = pattern.sub(" ", text)
    return found


def _replace(
    match: re.Match[str], absolute: Callable[[re.Match[str], date], tuple[str, str]], day: date
) -> str:
    preposition, value = absolute(match, day)
    before = match.string[: match.start()].split()
    if before and before[-1].lower().strip(",;:(") in PREPOSITIONS:
        return value
    phrase = f"{preposition} {value}"
    starts_sentence = not before or before[-1].endswith((".", "!", "?"))
    return phrase[0].upper() + phrase[1:] if starts_sentence else phrase
