"""A fact of a named speaker's message that shares no content word with that message is dropped
(the other person's news, the prompt's example or small talk written under the writer's name),
and so is one of three or more content words of which at most a third are in the message; a
fact with enough words of its message stays, and so does a paraphrase of an unnamed user."""

from __future__ import annotations

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.pipeline import FACT_CHECKS
from offline_mem.extraction.checks.unsupported import UnsupportedFacts
from offline_mem.testing import check_context


def test_a_named_speakers_fact_without_a_word_of_their_message_is_dropped():
    ctx = check_context(
        ("Lena", "user", "I finally got my pottery wheel, and I already made two bowls!"),
        ("Rui", "assistant", "Woohoo, that's awesome! Any plans for what to make next?"),
    )
    facts = [
        Fact("Lena got a pottery wheel.", "user", (0,)),
        Fact("Rui is doing pottery.", "assistant", (1,)),  # Lena's news under Rui's name
        Fact("Rui's sister visits Rui on Sunday.", "assistant", (1,)),  # nothing of Rui's turn
        Fact("Rui plans to make something next.", "assistant", (1,)),
    ]
    kept, dropped = UnsupportedFacts().check(facts, ctx)
    assert [f.text for f in kept] == [
        "Lena got a pottery wheel.",
        "Rui plans to make something next.",
    ]
    assert dropped == [
        ("Rui is doing pottery.", "shares no content word with its message"),
        ("Rui's sister visits Rui on Sunday.", "shares no content word with its message"),
    ]


def test_an_unnamed_users_paraphrase_stays_and_the_check_runs_in_every_add():
    ctx = check_context((None, "user", "I don't eat meat."), (None, "assistant", "Noted!"))
    kept, dropped = UnsupportedFacts().check([Fact("User is vegetarian.", "user", (0,))], ctx)
    assert [f.text for f in kept] == ["User is vegetarian."] and dropped == []
    assert any(isinstance(c, UnsupportedFacts) for c in FACT_CHECKS)


def test_a_fact_with_a_third_or_less_of_its_words_in_its_message_is_dropped():
    ctx = check_context(
        ("Lena", "user", "I signed up for a gym membership and I go three times a week."),
        ("Rui", "assistant", "That's awesome! Keep going and have fun!"),
    )
    facts = [
        # Lena's news under Rui's name: of "start", "exercis", "regul", "go", "gym" one is his
        Fact("Rui started exercising regularly by going to the gym.", "assistant", (1,)),
        Fact("Rui thinks it is awesome.", "assistant", (1,)),  # 1 of 2 words: too few to judge
        Fact("Lena goes to the gym three times a week on Mondays.", "user", (0,)),
        Fact("Lena signed up for a gym membership in May.", "user", (0,)),
    ]
    kept, dropped = UnsupportedFacts().check(facts, ctx)
    assert [f.text for f in kept] == [
        "Rui thinks it is awesome.",
        "Lena goes to the gym three times a week on Mondays.",
        "Lena signed up for a gym membership in May.",
    ]
    assert dropped == [
        (
            "Rui started exercising regularly by going to the gym.",
            "shares 1 of its 5 content words with its message",
        )
    ]


def test_a_fact_resting_on_a_bracketed_annotation_is_dropped_unless_it_is_about_the_photo():
    """What a message holds in square brackets describes a photo or an action; read as the
    speaker's deed it is no fact ("made a handwritten letter" from a photo of one)."""
    ctx = check_context(
        ("Lena", "user", "Busy week at work, but it went well! [photo: a handwritten letter "
         "with a black ink marker on a desk]"),
        ("Rui", "assistant", "Nice! I baked bread with my son. [sends a picture: a loaf of "
         "sourdough bread on a wooden board]"),
    )  # fmt: skip
    facts = [
        Fact("Lena wrote a handwritten letter with a black marker.", "user", (0,)),
        Fact("Lena shared a photo of a handwritten letter on a desk.", "user", (0,)),
        Fact("Lena had a busy week at work.", "user", (0,)),
        Fact("Rui has a loaf of sourdough bread on a wooden board.", "assistant", (1,)),
        Fact("Rui baked bread with his son.", "assistant", (1,)),
    ]
    kept, dropped = UnsupportedFacts().check(facts, ctx)
    assert [f.text for f in kept] == [
        "Lena shared a photo of a handwritten letter on a desk.",
        "Lena had a busy week at work.",
        "Rui baked bread with his son.",
    ]
    assert dropped == [
        ("Lena wrote a handwritten letter with a black marker.",
         "shares no content word with its message"),
        ("Rui has a loaf of sourdough bread on a wooden board.",
         "shares 1 of its 5 content words with its message"),
    ]  # fmt: skip


def test_an_unnamed_users_fact_may_rest_on_an_annotation():
    ctx = check_context((None, "user", "My new bike! [photo: a red road bike]"))
    facts = [Fact("User has a red road bike.", "user", (0,))]
    assert UnsupportedFacts().check(facts, ctx) == (facts, [])


def test_a_markdown_links_text_is_the_speakers_own():
    ctx = check_context(
        ("Lena", "user", "I wrote about [sourdough baking and rye starters](https://example.org)")
    )
    facts = [Fact("Lena wrote about sourdough baking and rye starters.", "user", (0,))]
    assert UnsupportedFacts().check(facts, ctx) == (facts, [])
