"""The words of one language that the fact checks know, in one place: stop words, the calendar,
the words that name the speakers or only say what someone is called, and the relative date
phrases with what each one means.

A `Memory` takes the lexicon of its spaCy pipeline's language (`lexicon_for`: "en_core_web_sm"
is English). The checks (checks/) hold the logic and no word of any language; another language
is one more `Lexicon` here, registered in LEXICONS. The prompts the model reads are English
(prompts.py) whatever the lexicon.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from ..errors import ConfigError

# What a relative date phrase means, as the checks compute it (checks/relative_dates.py):
#   day-2 .. day+2    that many days from the observation day
#   days-ago          (number) days before it     weeks-ago       (number) weeks before it
#   months-ago        (number) months before it   years-ago       (number) years before it
#   weekday-before    the (weekday) strictly before it      weekday-after   ... strictly after it
#   weekend-before, week-before, week-after, month-before, month-after, year-before, year-after
MEANINGS = frozenset({
    "day-2", "day-1", "day+0", "day+1", "day+2", "days-ago", "weeks-ago", "months-ago",
    "years-ago", "weekday-before",
    "weekday-after", "weekend-before", "week-before", "week-after", "month-before", "month-after",
    "year-before", "year-after",
})  # fmt: skip
# How each kind of resolved date is written: (preposition, text). The text formats {date} (a long
# date), {month} (a month's name) and {year}.
DATE_KINDS = frozenset(
    {"day", "around-day", "weekend-before", "week-before", "week-after", "month", "year"}
)


@dataclass(frozen=True, eq=False)
class Lexicon:
    language: str  # the ISO 639-1 code spaCy's pipelines start with ("en" of "en_core_web_sm")
    stop_words: frozenset[str]  # lowercase; a content word is any other word
    month_names: tuple[str, ...]  # lowercase, January first
    weekdays: tuple[str, ...]  # lowercase, Monday first
    # words that count as one content word: "lives in Ghent" / "moved to Aarhus" share one
    same_stem: Mapping[str, str]
    strip_ending: Callable[[str], str]  # a crude stem: the word without its inflection
    first_person: frozenset[str]  # "I", "my", ...: a sentence about the speaker
    second_person: frozenset[str]  # "you", "your", ...: words a third-person fact never keeps
    first_person_subject: frozenset[str]  # "i": the speaker says something of themself
    # words by which a fact says that someone asked ("<name> asked <other> about the trip")
    asking_words: frozenset[str]
    first_possessive: frozenset[str]  # "my", "our": what follows is the speaker's
    second_possessive: frozenset[str]  # "your": what follows is the person addressed's
    possessive_suffixes: tuple[str, ...]  # how a name is made possessive ("<name>'s")
    naming_words: frozenset[str]  # words that only say what someone is called
    # words by which a message says something changed; only then may its facts supersede one
    change_words: frozenset[str]
    # a new clause with its own subject starts at a joining word followed by a subject word
    # ("... last year, and I love surfing"): a relative date of one clause is not the other's
    clause_joiners: frozenset[str]
    subject_words: frozenset[str]
    side_words: frozenset[str]  # the words the extraction prompt uses for the two sides
    # verbs whose order includes the speaker ("Let's plan a trip"): a plan, not advice
    proposal_verbs: frozenset[str]
    # words by which a fact says it is about something shared (a photo, a video) rather than
    # something done: such a fact may rest on a message's bracketed annotation of it
    media_words: frozenset[str]
    # a sentence with one of these only hopes or considers what it says (checks/hedges.py) ...
    hedge_words: frozenset[str]
    hedge_phrase: re.Pattern[str]  # ... or with this ("thinking of trying")
    # a sentence opening with this guesses at the other person's lot ("Must be tough living in
    # the city"): a modal with no subject before it
    guess_opening: re.Pattern[str]
    # ... and a fact that keeps one of these says so ("may" is left out: it is also a month)
    intent_words: frozenset[str]
    numbers: Mapping[str, int]  # number words of relative dates ("two days ago")
    # words that, right before a relative date phrase, already say "when" ("since yesterday")
    prepositions: frozenset[str]
    relative_dates: tuple[tuple[re.Pattern[str], str], ...]  # (phrase, meaning), longest first
    date_words: Mapping[str, tuple[str, str]]  # kind of resolved date -> (preposition, text)
    long_date: str  # a day written out: {day} {month} {year}
    written_date: re.Pattern[str]  # a date written out in a text, preposition included
    # a month or a year named without a day ("May 2023", "in 2022"): groups month, month_year
    # and year (validity.py)
    written_period: re.Pattern[str]

    @property
    def months(self) -> frozenset[str]:
        return frozenset(self.month_names)

    @cached_property
    def clause_start(self) -> re.Pattern[str]:
        """Where a new clause with its own subject starts: before "<joiner> <subject word>"."""
        joiners = "|".join(sorted(map(re.escape, self.clause_joiners)))
        subjects = "|".join(sorted(map(re.escape, self.subject_words)))
        return re.compile(rf"(?i)[\s,;]+(?=\b(?:{joiners})\s+(?:{subjects})\b)")

    def __post_init__(self) -> None:
        unknown = {meaning for _, meaning in self.relative_dates} - MEANINGS
        missing = DATE_KINDS - set(self.date_words)
        if unknown or missing:
            raise ValueError(f"lexicon {self.language!r}: meanings {unknown}, kinds {missing}")


# -- English --------------------------------------------------------------------------------------

_EN_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_EN_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "a couple of": 2, "a": 1,
}  # fmt: skip
_EN_PREPOSITIONS = frozenset({
    "since", "from", "until", "till", "by", "before", "after", "on", "in", "at", "of", "as",
    "during", "to", "around", "about",
})  # fmt: skip
# Where someone lives and where they work are the facts that change most, and "lives in Ghent" /
# "moved to Aarhus" or "works as a nurse" / "started a new job" share no word: each group of
# words counts as one.
_EN_HOME_WORDS = "live lives living lived move moves moving moved relocated"
_EN_WORK_WORDS = "work works working worked job jobs employed hired career"


def _english_ending(word: str) -> str:
    """A plural or verb ending off, then a final "e" off ("adopted" and "adopt", "kids" and
    "kid", "baked" and "bake" meet)."""
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def _english_relative_dates() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Unambiguous English phrases only; anything else is left as written. Longest first."""
    number = "|".join(sorted((re.escape(k) for k in _EN_NUMBERS), key=len, reverse=True))
    weekday = "|".join(_EN_WEEKDAYS)
    rules = [
        (r"\bthe day before yesterday\b", "day-2"),
        (r"\bthe day after tomorrow\b", "day+2"),
        (r"\byesterday (?:morning|afternoon|evening)\b|\byesterday\b(?!')|\blast night\b",
         "day-1"),
        (r"\btomorrow (?:morning|afternoon|evening|night)\b|\btomorrow\b(?!')", "day+1"),
        (r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b(?!')", "day+0"),
        (rf"\b({number}|\d{{1,2}}) days? ago\b", "days-ago"),
        (rf"\b({number}|\d{{1,2}}) weeks? ago\b", "weeks-ago"),
        (rf"\b({number}|\d{{1,2}}) months? ago\b", "months-ago"),
        (rf"\b({number}|\d{{1,2}}) years? ago\b", "years-ago"),
        (rf"\blast ({weekday})\b", "weekday-before"),
        (rf"\b(?:next|this coming) ({weekday})\b", "weekday-after"),
        (r"\blast weekend\b", "weekend-before"),
        (r"\blast week\b", "week-before"),
        (r"\bnext week\b", "week-after"),
        (r"\blast month\b", "month-before"),
        (r"\bnext month\b", "month-after"),
        (r"\blast year\b", "year-before"),
        (r"\bnext year\b", "year-after"),
    ]  # fmt: skip
    return tuple((re.compile(pattern, re.I), meaning) for pattern, meaning in rules)


def _english_written_date() -> re.Pattern[str]:
    """ "on Saturday, 15 May 2023", "23 April", "April 23rd, 2023", "2023-04-23 (Sunday)", with
    the preposition before it when there is one."""
    month = "|".join(_EN_MONTHS)
    weekday = "|".join(_EN_WEEKDAYS)
    ordinal = r"(?:st|nd|rd|th)?"
    return re.compile(
        rf"(?:\b(?:on|in|around)\s+)?(?:\b(?:{weekday}),?\s+)?(?:the\s+)?(?:"
        rf"\b(?P<d1>\d{{1,2}}){ordinal}\s+(?:of\s+)?(?P<m1>{month})(?:,?\s+(?P<y1>\d{{4}}))?\b"
        rf"|\b(?P<m2>{month})\s+(?P<d2>\d{{1,2}}){ordinal}(?:,?\s+(?P<y2>\d{{4}}))?\b"
        rf"|\b(?P<iso>\d{{4}}-\d{{2}}-\d{{2}})(?:\s+\((?:{weekday})\))?)",
        re.IGNORECASE,
    )


def _english_written_period() -> re.Pattern[str]:
    """ "May 2023", "in May, 2023", "in 2022", "since 2016": a bare year only after a preposition
    that makes it a date ("2,000 steps" or "room 2022" are not)."""
    month = "|".join(_EN_MONTHS)
    return re.compile(
        rf"\b(?P<month>{month}),?\s+(?P<month_year>\d{{4}})\b"
        r"|\b(?:in|since|from|during|until|by)\s+(?:early\s+|late\s+|mid-?)?(?P<year>\d{4})\b",
        re.IGNORECASE,
    )


ENGLISH = Lexicon(
    language="en",
    stop_words=frozenset(
        """
        a about after again all also am an and any are as at be been before being both but by can
        could did do does doing during each for from further had has have having he her here hers
        him his how i if in into is it its just me more most my no nor not now of off on once only
        or other our out over own same she should so some such than that the their them then there
        these they this those through to too under until up very was we were what when where which
        while who whom why will with would you your yours user assistant s t don didn isn wasn
        really lately still hey hi hello oh yes yeah ok okay
        """.split()  # noqa: SIM905 - a word list reads better as text
    ),
    month_names=_EN_MONTHS,
    weekdays=_EN_WEEKDAYS,
    same_stem={
        **{word: "resid" for word in _EN_HOME_WORDS.split()},
        **{word: "occup" for word in _EN_WORK_WORDS.split()},
    },
    strip_ending=_english_ending,
    first_person=frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours"}),
    second_person=frozenset({"you", "your", "yours", "yourself", "yourselves"}),
    first_person_subject=frozenset({"i"}),
    asking_words=frozenset({"ask", "asks", "asked", "asking", "wonders", "wondered", "curious"}),
    first_possessive=frozenset({"my", "our"}),
    second_possessive=frozenset({"your"}),
    possessive_suffixes=("'s ", "’s "),
    naming_words=frozenset({"name", "named", "names", "called", "call", "calls", "goes", "go"}),
    side_words=frozenset({"user", "assistant"}),
    proposal_verbs=frozenset({"let"}),
    media_words=frozenset(
        """
        photo photos picture pictures pic pics image images video videos screenshot screenshots
        selfie selfies clip clips recording share shares shared sharing send sends sent post
        posts posted
        """.split()  # noqa: SIM905
    ),
    hedge_words=frozenset(
        "hope hoping hopefully perhaps wondering considering".split()  # noqa: SIM905
    ),
    hedge_phrase=re.compile(r"\bth(?:ink|inking|ought) (?:of|about) \w+ing\b", re.IGNORECASE),
    guess_opening=re.compile(
        r"^\W*(?:\w+,\s*)?(?:must|should|would|could|might)\s+(?:be|have)\b", re.IGNORECASE
    ),
    intent_words=frozenset(
        """
        think thinks thinking thought hope hopes hoping hoped hopefully perhaps maybe might
        could would consider considers considering considered wonder wonders wondering plan
        plans planning planned want wants wanted wish wishes wishing interested dream dreams
        dreaming idea ideas try tries trying intend intends intending
        """.split()  # noqa: SIM905
    ),
    change_words=frozenset(
        """
        now anymore longer instead nowadays switched switching swapped changed changing replaced
        moved moving relocated quit quitting left leaving sold bought stopped stopping ended
        cancelled canceled postponed rescheduled retired resigned fired lost passed died gone
        married divorced engaged separated broke became become turned
        """.split()  # noqa: SIM905
    ),
    clause_joiners=frozenset(
        "and but so because while whereas although though since then".split()  # noqa: SIM905
    ),
    subject_words=frozenset(
        "i we you he she they it my our your his her their".split()  # noqa: SIM905
    ),
    numbers=_EN_NUMBERS,
    prepositions=_EN_PREPOSITIONS,
    relative_dates=_english_relative_dates(),
    date_words={
        "day": ("on", "{date}"),
        "around-day": ("around", "{date}"),
        "weekend-before": ("on", "the weekend before {date}"),
        "week-before": ("in", "the week before {date}"),
        "week-after": ("in", "the week after {date}"),
        "month": ("in", "{month} {year}"),
        "year": ("in", "{year}"),
    },
    long_date="{day} {month} {year}",  # '23 September 2023': unambiguous, and LoCoMo's style
    written_date=_english_written_date(),
    written_period=_english_written_period(),
)

LEXICONS = {ENGLISH.language: ENGLISH}


def lexicon_for(pipeline: str | None) -> Lexicon:
    """The lexicon of a spaCy pipeline's language, read from its name ("en_core_web_sm" -> "en");
    English when no pipeline is configured (keyword analysis then uses the English one)."""
    if pipeline is None:
        return ENGLISH
    language = pipeline.split("_", 1)[0].lower()
    if language not in LEXICONS:
        raise ConfigError(
            f"no word lists for the language {language!r} of the spaCy pipeline {pipeline!r}; "
            f"the fact checks know {sorted(LEXICONS)} (extraction/lexicon.py)"
        )
    return LEXICONS[language]
