"""A date the model resolved wrongly is corrected from its message's phrase (fact_dates.py)."""

from __future__ import annotations

from datetime import date

import pytest

from offline_mem import Memory
from offline_mem.extraction.checks.fact_dates import correct_fact_date
from offline_mem.testing import FakeEmbedder, FakeExtractor, answer

SUNDAY = date(2023, 4, 23)
MONDAY = date(2023, 5, 15)

CORRECTED = [
    # the model wrote the message's own day for "yesterday" / "last Saturday"
    ("Oskar planted a vegetable garden on Sunday 23 April 2023.",
     "Yesterday I planted a vegetable garden!", SUNDAY,
     "Oskar planted a vegetable garden on 22 April 2023."),
    ("Oskar sang at an open mic night on Saturday 15 May 2023.",
     "Last Saturday I sang at an open mic night!", MONDAY,
     "Oskar sang at an open mic night on 13 May 2023."),
    # every written form, and the sentence's other words kept
    ("Oskar ran a half marathon on 2023-05-08 (Monday).", "Last week I ran a half marathon!",
     MONDAY, "Oskar ran a half marathon in the week before 15 May 2023."),
    ("Oskar baked bread on May 15th, 2023, at home.", "Two days ago I baked bread.", MONDAY,
     "Oskar baked bread on 13 May 2023, at home."),
    ("On 15 May Oskar baked bread.", "I baked bread yesterday.", MONDAY,
     "On 14 May 2023 Oskar baked bread."),
    # an undated fact retelling the phrase's sentence is dated
    ("Oskar sang at an open mic night.", "Hey! Last Saturday I sang at an open mic night!",
     MONDAY, "Oskar sang at an open mic night on 13 May 2023."),
    # ... the clause's, when the sentence has two: "and saw" shares the first one's subject
    ("Priya saw a bear.", "Last weekend I went hiking and saw a bear!", MONDAY,
     "Priya saw a bear on the weekend before 15 May 2023."),
    ("Lena moved to Porto.", "I moved to Porto last year and I love surfing.", MONDAY,
     "Lena moved to Porto in 2022."),
    # a right date is kept, in the one written form
    ("Oskar baked bread on Sunday, 14 May 2023.", "I baked bread yesterday.", MONDAY,
     "Oskar baked bread on 14 May 2023."),
]  # fmt: skip

KEPT = [
    # the message has no relative phrase, two of them, or a date of its own
    ("Oskar baked bread on 15 May 2023.", "I baked bread."),
    ("Oskar baked bread on 15 May 2023.", "Yesterday I baked bread, last week I bought flour."),
    ("Oskar baked bread on 15 May 2023.", "Yesterday I baked bread; on 3 May I bought flour."),
    # a date far from the message's day is another event's
    ("Oskar's sister marries on 12 August 2023.", "Yesterday I booked flights for the wedding."),
    # a fact without a date gets none unless it retells the phrase's sentence
    ("User has a cat named Pepper.", "Yesterday I adopted Pepper, my first cat!"),
    ("Oskar's sister lives in Rome.", "Last week I went to Rome. My sister lives there."),
    # ... nor when it retells another clause of that sentence, one with its own subject
    ("Lena loves surfing.", "I moved to Porto last year and I love surfing."),
    ("Rui is starting a business.", "I lost my job yesterday, so I'm starting a business."),
    # the fact's own phrase is resolved later, as written
    ("Oskar baked bread yesterday, on 15 May 2023.", "Yesterday I baked bread."),
    # a fact that names the month or year already is not dated again
    ("Lena broke up with Tom in April 2023.", "We broke up last month, I am no longer dating him."),
    ("Lena moved to Porto in 2022.", "I moved to Porto last year and I love surfing."),
    # a number before a month that is not a date, and "may" the verb
    ("Oskar may visit in 2 weeks.", "Yesterday I said I may visit."),
]


@pytest.mark.parametrize(("fact", "message", "observed", "expected"), CORRECTED)
def test_a_wrongly_resolved_date_takes_the_messages_phrase(fact, message, observed, expected):
    assert correct_fact_date(fact, [message], observed) == expected


@pytest.mark.parametrize(("fact", "message"), KEPT)
def test_a_fact_is_left_as_written_when_its_message_does_not_say_which_day(fact, message):
    assert correct_fact_date(fact, [message], MONDAY) == fact


def test_the_stored_fact_carries_the_day_its_message_meant(tmp_path) -> None:
    extractor = FakeExtractor(answer("User planted a vegetable garden on Sunday 23 April 2023."))
    with Memory(
        {"path": str(tmp_path / "m.db"), "nlp": None}, embedder=FakeEmbedder(), extractor=extractor
    ) as memory:
        memory.add(
            [{"role": "user", "content": "Yesterday I planted a vegetable garden!",
              "timestamp": "2023-04-23T10:00:00+00:00"}],
            user_id="u1",
        )  # fmt: skip
        stored = memory.get_all(filters={"user_id": "u1"})["results"]
        assert [m["memory"] for m in stored] == [
            "User planted a vegetable garden on 22 April 2023."
        ]
