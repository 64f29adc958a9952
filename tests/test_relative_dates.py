"""Relative dates in extracted facts become absolute ones
(offline_mem/extraction/checks/relative_dates.py)."""

from __future__ import annotations

from datetime import date

import pytest

from offline_mem import Memory
from offline_mem.extraction.checks.relative_dates import resolve_relative_dates
from offline_mem.testing import FakeEmbedder, FakeExtractor, answer

SUNDAY = date(2023, 9, 24)  # a Sunday

CASES = [
    ("Oskar passed his driving test yesterday.",
     "Oskar passed his driving test on 23 September 2023."),
    ("Yesterday Oskar baked bread.", "On 23 September 2023 Oskar baked bread."),
    ("User has felt ill since yesterday.", "User has felt ill since 23 September 2023."),
    ("User went out last night.", "User went out on 23 September 2023."),
    ("User had wisdom teeth out the day before yesterday.",
     "User had wisdom teeth out on 22 September 2023."),
    ("User starts the new job tomorrow morning.", "User starts the new job on 25 September 2023."),
    ("User is seeing a concert tonight.", "User is seeing a concert on 24 September 2023."),
    ("User baked a loaf two days ago.", "User baked a loaf on 22 September 2023."),
    ("User moved 3 days ago.", "User moved on 21 September 2023."),
    ("User adopted a dog a week ago.", "User adopted a dog around 17 September 2023."),
    ("User ran a race last Saturday.", "User ran a race on 23 September 2023."),
    ("User ran a race last Sunday.", "User ran a race on 17 September 2023."),  # not today
    ("User flies to Oslo next Monday.", "User flies to Oslo on 25 September 2023."),
    ("Luna passed away last week.", "Luna passed away in the week before 24 September 2023."),
    ("User moved to Ghent last weekend.",
     "User moved to Ghent on the weekend before 24 September 2023."),
    ("User got married last month.", "User got married in August 2023."),
    ("User graduated last year.", "User graduated in 2022."),
    ("User retires next year.", "User retires in 2024."),
    ("User's trip next month is to Peru.", "User's trip in October 2023 is to Peru."),
    ("Ines got her first two cats three years ago.", "Ines got her first two cats in 2020."),
    ("Rui bought a kayak a year ago.", "Rui bought a kayak in 2022."),
    ("Rui first saw the film around 4 years ago.", "Rui first saw the film around 2019."),
    ("User quit smoking two months ago.", "User quit smoking in July 2023."),
    ("User adopted a dog about a week ago.", "User adopted a dog about 17 September 2023."),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:30] for c in CASES])
def test_phrases_resolve_against_the_observation_day(text: str, expected: str) -> None:
    assert resolve_relative_dates(text, SUNDAY) == expected


@pytest.mark.parametrize(
    "text",
    [
        "User was born on 3 May 1990.",
        "User likes yesterday's newspapers.",  # possessive: not a date of the fact
        "User reads a few pages every night.",
        "User's weekly review is every Monday.",
        "User joined Yesterdays Ltd.",
        "User moved to Porto a few years ago.",  # no number: no one year
    ],
)
def test_text_without_a_relative_date_is_left_as_written(text: str) -> None:
    assert resolve_relative_dates(text, SUNDAY) == text


def test_month_arithmetic_crosses_the_year() -> None:
    assert resolve_relative_dates("User moved last month.", date(2024, 1, 15)) == (
        "User moved in December 2023."
    )
    assert resolve_relative_dates("User moves next month.", date(2023, 12, 31)) == (
        "User moves in January 2024."
    )
    assert resolve_relative_dates("User moved three months ago.", date(2024, 2, 29)) == (
        "User moved in November 2023."
    )


def test_an_extracted_fact_is_stored_with_the_date_of_its_message(tmp_path) -> None:
    extractor = FakeExtractor(answer("User passed the driving test yesterday."))
    with Memory(
        {"path": str(tmp_path / "m.db"), "nlp": None}, embedder=FakeEmbedder(), extractor=extractor
    ) as memory:
        result = memory.add(
            [{"role": "user", "content": "I passed my driving test yesterday!",
              "timestamp": "2023-09-24T10:00:00+00:00"}],
            user_id="u1",
        )  # fmt: skip
        assert [r["memory"] for r in result["results"]] == [
            "User passed the driving test on 23 September 2023."
        ]
        stored = memory.get_all(filters={"user_id": "u1"})["results"]
        assert [m["memory"] for m in stored] == [
            "User passed the driving test on 23 September 2023."
        ]
        # raw memories stay verbatim: they are the user's own words
        memory.add("See you tomorrow", user_id="u1", infer=False)
        texts = {m["memory"] for m in memory.get_all(filters={"user_id": "u1"})["results"]}
        assert "See you tomorrow" in texts
