"""Advice or an order to the other person is no deed: a fact written from such a sentence is
dropped ("<friend> takes it easy" from "Take it easy!"); a sentence with a first-person word
("Remind me to call my mother") or a proposal ("Let's plan a trip") keeps its facts, and so does
a statement."""

from __future__ import annotations

from collections.abc import Sequence

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.advice import AdviceFacts
from offline_mem.extraction.checks.base import CheckContext
from offline_mem.extraction.checks.pipeline import FACT_CHECKS
from offline_mem.testing import check_context

# what a tagger reports for the sentences of these tests: the opening base-form verb
OPENING = {
    "Take it easy, Tom!": "take",
    "Remind me to call my mother on Sunday.": "remind",
    "Let's plan a trip to the coast.": "let",
}


def _verbs(sentences: Sequence[str]) -> list[str | None]:
    return [OPENING.get(s) for s in sentences]


def _context(*messages: tuple[str, str, str]) -> CheckContext:
    return check_context(*messages, opening_verbs=_verbs)


def test_advice_to_the_other_person_is_dropped_and_statements_stay():
    ctx = _context(
        ("Tom", "user", "I ran my first half marathon today, it was brutal."),
        ("Ines", "assistant", "Congrats! Take it easy, Tom! Let's plan a trip to the coast."),
    )
    facts = [
        Fact("Tom ran his first half marathon.", "user", (0,)),
        Fact("Tom takes it easy.", "assistant", (1,)),
        Fact("Ines plans a trip to the coast.", "assistant", (1,)),
    ]
    kept, dropped = AdviceFacts().check(facts, ctx)
    assert [f.text for f in kept] == [
        "Tom ran his first half marathon.",
        "Ines plans a trip to the coast.",
    ]
    assert dropped == [("Tom takes it easy.", "advice or an order ('take'), not a deed")]


def test_an_order_about_the_speaker_keeps_its_fact_and_the_check_runs_in_every_add():
    ctx = _context(("Tom", "user", "Remind me to call my mother on Sunday."))
    fact = Fact("Tom will call his mother on Sunday.", "user", (0,))
    kept, dropped = AdviceFacts().check([fact], ctx)
    assert kept == [fact] and dropped == []
    assert any(isinstance(c, AdviceFacts) for c in FACT_CHECKS)


def test_without_a_tagger_nothing_is_dropped():
    ctx = check_context(("Ines", "assistant", "Take it easy, Tom!"))
    fact = Fact("Tom takes it easy.", "assistant", (0,))
    assert AdviceFacts().check([fact], ctx) == ([fact], [])


def test_a_fact_that_runs_on_is_judged_by_its_first_sentence():
    ctx = _context(("Tom", "user", "I'm always here to support you! Take it easy, Tom!"))
    fact = Fact("Tom is always here to support Ines. Take it easy, Tom!", "user", (0,))
    assert AdviceFacts().check([fact], ctx) == ([fact], [])
