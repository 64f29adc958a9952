"""A fact that states as true what its message only hopes or thinks of doing is dropped; one that
keeps the hedge stays, and so does a fact whose sentence hedges nothing."""

from __future__ import annotations

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.hedges import HedgedFacts
from offline_mem.extraction.checks.pipeline import FACT_CHECKS
from offline_mem.testing import check_context

WHY = "states as true what its message only hopes, guesses or considers"


def test_a_hope_or_a_thought_of_trying_stated_as_done_is_dropped():
    ctx = check_context(
        ("Lena", "user", "Work is slow. I was thinking about trying pottery. Hoping my sister "
         "visits in May!"),
        ("Rui", "assistant", "Perhaps we could go climbing next week. I bought new shoes."),
    )  # fmt: skip
    facts = [
        Fact("Lena does pottery as a hobby.", "user", (0,)),
        Fact("Lena is thinking about trying pottery.", "user", (0,)),
        Fact("Lena's sister visits in May.", "user", (0,)),
        Fact("Lena hopes her sister visits in May.", "user", (0,)),
        Fact("Rui goes climbing next week.", "assistant", (1,)),
        Fact("Rui bought new shoes.", "assistant", (1,)),
    ]
    kept, dropped = HedgedFacts().check(facts, ctx)
    assert [f.text for f in kept] == [
        "Lena is thinking about trying pottery.",
        "Lena hopes her sister visits in May.",
        "Rui bought new shoes.",
    ]
    assert dropped == [
        ("Lena does pottery as a hobby.", WHY),
        ("Lena's sister visits in May.", WHY),
        ("Rui goes climbing next week.", WHY),
    ]


def test_thinking_about_a_thing_and_a_might_in_another_clause_are_no_hedge():
    ctx = check_context(
        (None, "user", "I can't stop thinking about the novel, so I started writing another one. "
         "The kittens might be small, but they have big personalities."),
    )  # fmt: skip
    facts = [
        Fact("User started writing another novel.", "user", (0,)),
        Fact("User's kittens have big personalities.", "user", (0,)),
    ]
    assert HedgedFacts().check(facts, ctx) == (facts, [])
    assert any(isinstance(c, HedgedFacts) for c in FACT_CHECKS)


def test_a_guess_at_the_other_persons_lot_is_no_fact_of_either():
    ctx = check_context(
        ("Lena", "user", "Must be tough living in the city without a park. I moved to a farm."),
        ("Rui", "assistant", "Wow, must have been fun! It must be quiet there. Your barn looks "
         "great! Should be awesome to see your goats every day."),
    )  # fmt: skip
    facts = [
        Fact("Lena lives in the city without a park.", "user", (0,)),
        Fact("Rui must be tough living in the city without a park.", "user", (0,)),
        Fact("Lena moved to a farm.", "user", (0,)),
        Fact("Lena's move must have been fun.", "assistant", (1,)),
        Fact("Lena's farm is quiet.", "assistant", (1,)),  # "It must be ...": a statement
        # the claim is the first sentence; the guess copied on after it is cut later
        Fact(
            "Lena's barn looks great! Should be awesome to see her goats every day.",
            "assistant",
            (1,),
        ),
    ]
    kept, dropped = HedgedFacts().check(facts, ctx)
    assert [f.text for f in kept] == [facts[2].text, facts[4].text, facts[5].text]
    assert [text for text, _ in dropped] == [facts[0].text, facts[1].text, facts[3].text]
