"""Facts that run on with their message's own words are cut back to the third-person opening,
and a named speaker's fact to its clauses in the third person, or dropped when its first clause
speaks as a person (extraction/checks/copied_tails.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.base import CheckContext
from offline_mem.extraction.checks.copied_tails import (
    CopiedTails,
    PersonClauses,
    clauses_as_a_third_person,
    sentences_naming_their_subject,
    third_person_opening,
)
from offline_mem.extraction.checks.pipeline import check_facts
from offline_mem.store.records import NewMessage


@pytest.mark.parametrize(
    ("fact", "kept"),
    [
        (
            "Ana launched an ad campaign for her shop. Starting my own shop is scary. "
            "I'm excited to see where it takes me!",
            "Ana launched an ad campaign for her shop.",
        ),
        ("Rui was thinking about trying painting. Do you have any hobbies?",
         "Rui was thinking about trying painting."),
        ("Ana used to sing in a choir - my best memory was our first concert.",
         "Ana used to sing in a choir."),
        ("Rui took his family to the coast. It was amazing! We drove along the cliffs.",
         "Rui took his family to the coast. It was amazing!"),
        ("Rui will keep you posted. See you soon!", "Rui will keep you posted."),
        ("Ana moved house — your old street, in fact.", "Ana moved house."),
    ],
)  # fmt: skip
def test_a_tail_in_the_first_or_second_person_is_cut(fact: str, kept: str) -> None:
    assert third_person_opening(fact) == kept


@pytest.mark.parametrize(
    "fact",
    [
        "User started eating meat again, I'm no longer vegetarian.",  # one sentence: whole
        "Ana works on new routines - rehearsing hard for an upcoming show.",
        "Rui adopted a cat. The cat is called Pepper.",
        "Dr. Ana Lima treats Rui's back pain.",
        "Ana works at 3.5 km from home.",
    ],
)
def test_a_fact_without_such_a_tail_stays_as_written(fact: str) -> None:
    assert third_person_opening(fact) == fact


def test_the_pipeline_keeps_the_cut_fact_with_its_source() -> None:
    said = "I opened a bakery last week. Starting my own place is scary!"
    messages = [NewMessage("m0", "user", said, "Ana", "2024-05-02T10:00:00")]
    ctx = CheckContext(
        messages=messages, shown=[0], seen=[], stored=messages, now=datetime(2024, 5, 2, 12),
        people_in=lambda texts: [[] for _ in texts],
    )  # fmt: skip
    facts = [Fact("Ana opened a bakery last week. Starting my own place is scary!", "user", (0,))]
    kept, dropped = check_facts(facts, ctx)
    assert dropped == []
    assert [(f.text, f.sources) for f in kept] == [
        ("Ana opened a bakery in the week before 2 May 2024.", (0,))
    ]
    alone, none = CopiedTails().check(facts, ctx)
    assert [f.text for f in alone] == ["Ana opened a bakery last week."] and none == []


@pytest.mark.parametrize(
    ("fact", "kept"),
    [
        ("Nate made a cake with berries on it, maybe you would like that!",
         "Nate made a cake with berries on it."),
        ("Ivo did well in the tournament; I made it to the semis.",
         "Ivo did well in the tournament."),
        ("Rui will keep you posted.", ""),
        ("Ana's dogs go nuts when we go on hikes!", ""),
        ("Rui adopted a cat, a tabby called Pepper.", "Rui adopted a cat, a tabby called Pepper."),
    ],
)  # fmt: skip
def test_a_clause_speaking_as_a_person_ends_the_fact(fact: str, kept: str) -> None:
    assert clauses_as_a_third_person(fact) == kept


def test_only_a_named_speakers_fact_is_cut_or_dropped() -> None:
    messages = [
        NewMessage("m0", "user", "Keep you posted! I'm no longer vegetarian, by the way.", "Rui",
                   "2024-05-02T10:00:00"),
        NewMessage("m1", "user", "I started eating meat again, I'm no longer vegetarian.", None,
                   "2024-05-02T10:00:00"),
    ]  # fmt: skip
    ctx = CheckContext(
        messages=messages, shown=[0, 1], seen=[], stored=messages, now=datetime(2024, 5, 2, 12),
        people_in=lambda texts: [[] for _ in texts],
    )  # fmt: skip
    facts = [
        Fact("Rui will keep you posted.", "user", (0,)),
        Fact("User started eating meat again, I'm no longer vegetarian.", "user", (1,)),
    ]
    kept, dropped = PersonClauses().check(facts, ctx)
    assert kept == [facts[1]]  # no name to write for an unnamed user: the change stays whole
    assert dropped == [
        ("Rui will keep you posted.", "speaks as a person: whom 'I' or 'you' means is lost")
    ]


@pytest.mark.parametrize(
    ("fact", "kept"),
    [
        ("Ana chose a comfy sofa. The lamp adds a glam feel.", "Ana chose a comfy sofa."),
        ("Ana found the perfect spot. Way to go! [shares a photo: a shop]",
         "Ana found the perfect spot."),
        ("Rui is excited! This is gonna be great!", "Rui is excited!"),
        ("Ana adopted a cat. Ana calls her Pepper.", "Ana adopted a cat. Ana calls her Pepper."),
        ("Rui lives in St. Louis now.", "Rui lives in St. Louis now."),
        ("Rui is 5 ft. tall and met Dr. Lima.", "Rui is 5 ft. tall and met Dr. Lima."),
        ("Ana moved to the U.S. last year.", "Ana moved to the U.S. last year."),
    ],
)  # fmt: skip
def test_a_later_sentence_without_its_own_subject_ends_the_fact(fact: str, kept: str) -> None:
    assert sentences_naming_their_subject(fact, frozenset({"ana", "rui", "user"})) == kept
