"""A fact that is a new message copied out is dropped; a rewrite of it is a fact and stays."""

from __future__ import annotations

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.turn_copies import (
    drop_turn_copies,
    is_turn_copy,
    quotes_a_message,
    shared_in_order,
)
from offline_mem.store.records import NewMessage


def test_words_shared_in_order():
    assert shared_in_order(list("abcd"), list("axcd")) == list("acd")
    assert len(shared_in_order(list("dcba"), list("abcd"))) == 1
    assert shared_in_order([], list("ab")) == []


def test_a_quoted_turn_is_a_copy_even_with_its_date_resolved():
    turn = "Hi Tomasz! I finally got the keys to the new flat yesterday, so I'm moving on Friday."
    quoted = ("Priya says 'Hi Tomasz! I finally got the keys to the new flat on 3 March 2026, so "
              "I'm moving on Friday.'")  # fmt: skip
    assert is_turn_copy(quoted, turn)
    assert is_turn_copy("Priya: " + turn, turn)


def test_a_rewrite_or_one_clause_of_a_long_turn_is_not_a_copy():
    rewrite = "User lives in Porto now, not in Lisbon."
    assert not is_turn_copy(rewrite, "I live in Porto now, not in Lisbon.")
    assert not is_turn_copy(
        "User adopted a grey cat called Pixel", "I adopted a grey cat called Pixel"
    )
    half = "User started eating meat again, I'm no longer vegetarian."  # the change is kept
    assert not is_turn_copy(half, "I started eating meat again, I'm no longer vegetarian.")
    long_turn = ("Sorry to hear about the flood! I'm starting a pottery studio because I love "
                 "clay and it would be great to teach it to kids.")  # fmt: skip
    assert not is_turn_copy("Priya is starting a pottery studio because she loves clay.", long_turn)
    assert not is_turn_copy("User loves sushi.", "I love sushi")  # too short to call a copy


def test_only_copies_are_dropped_with_the_reason():
    messages = [
        NewMessage(
            id="m1",
            role="user",
            name="Priya",
            observed_at=None,
            content="Good morning! How was your weekend, Tomasz?",
        ),
        NewMessage(
            id="m2",
            role="assistant",
            name="Tomasz",
            observed_at=None,
            content="Great, I ran a half marathon in Gdansk.",
        ),
    ]
    facts = [Fact(text="Priya says 'Good morning! How was your weekend, Tomasz?'",
                  attributed_to="user", sources=(0,)),
             Fact(text="Tomasz ran a half marathon in Gdansk.", attributed_to="assistant",
                  sources=(1,))]  # fmt: skip
    kept, dropped = drop_turn_copies(facts, messages, [0, 1])
    assert kept == [facts[1]]
    assert dropped == [(facts[0].text, "a copy of a new message, not a fact taken from it")]


def test_a_turn_in_quote_marks_is_a_copy_without_a_person_word():
    turn = "Hey Tomasz! Long time no see! What's up?"
    assert not is_turn_copy("Priya says Hey Tomasz! Long time no see! What's up?", turn)
    assert quotes_a_message("Priya says 'Hey Tomasz! Long time no see! What's up?'", turn)
    assert quotes_a_message("Priya says \"Hey Tomasz! Long time no see! What's up?", turn)  # open
    assert not quotes_a_message("Priya says 'Hey Tomasz! Long time no see!'", turn)  # 6 of 8
    # a quoted title, or a quotation from another text, is no copy of the turn
    game = "Tonight we finally play Walking Dead, the new board game, at my place"
    assert not quotes_a_message("Priya plays 'Walking Dead' with friends tonight.", game)
    assert not quotes_a_message("Priya's friends' game night is tonight.", game)
    kept, dropped = drop_turn_copies(
        [Fact("Priya says 'Hey Tomasz! Long time no see! What's up?'", "user", (0,))],
        [NewMessage(id="m1", role="user", name="Priya", observed_at=None, content=turn)],
        [0],
    )
    assert kept == [] and len(dropped) == 1
