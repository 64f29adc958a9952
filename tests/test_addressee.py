"""A fact about the person a message speaks to, written under its speaker's name, is moved to
the person addressed (a statement) or dropped (a question); facts about the speaker stay."""

from __future__ import annotations

from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks.addressee import move_addressed_facts
from offline_mem.store.records import NewMessage


def _message(name: str, role: str, content: str) -> NewMessage:
    return NewMessage(id=name, role=role, name=name, observed_at=None, content=content)


def _check(
    priya_says: str, *facts: str, tomasz_says: str = "Thanks, it took all spring."
) -> tuple[list[str], list[tuple[str, str]]]:
    messages = [_message("Priya", "user", priya_says), _message("Tomasz", "assistant", tomasz_says)]
    kept, dropped = move_addressed_facts(
        [Fact(text=f, attributed_to="user", sources=(0,)) for f in facts], messages
    )
    assert all(k.attributed_to == "user" for k in kept)  # still said by Priya
    return [k.text for k in kept], dropped


def test_a_statement_about_the_person_addressed_is_moved_to_them():
    kept, dropped = _check("Wow, your vegetable garden looks amazing!",
                           "Priya's vegetable garden looks amazing")  # fmt: skip
    assert kept == ["Tomasz's vegetable garden looks amazing"] and dropped == []


def test_a_question_to_the_other_person_is_dropped():
    kept, dropped = _check(
        "Nice! Have you tried the new climbing gym on Elm Street?",
        "Priya tried the new climbing gym on Elm Street",
    )
    assert kept == []
    assert dropped == [("Priya tried the new climbing gym on Elm Street",
                        "a question to the other person, not a fact")]  # fmt: skip


def test_a_question_without_a_you_is_no_fact_either_unless_it_tells_of_the_writer():
    kept, dropped = _check(
        "Ha, that sounds wild. Tried the bouldering hall on Elm Street yet? "
        "Did I tell you I joined a club?",
        "Priya tried the bouldering hall on Elm Street",
        "Priya joined a club",
        "Priya asked Tomasz about the bouldering hall",
    )
    assert kept == ["Priya joined a club", "Priya asked Tomasz about the bouldering hall"]
    assert dropped == [("Priya tried the bouldering hall on Elm Street",
                        "a question to the other person, not a fact")]  # fmt: skip


def test_a_question_to_the_other_person_is_no_fact_even_naming_them_or_the_writer_as_we():
    kept, dropped = _check(
        "Did you ever check out that climbing gym we talked about? Could you tell me what got "
        "you into climbing? Did you know I joined a club?",
        "Priya checked out the climbing gym with Tomasz",
        "Priya is into climbing",
        "Priya joined a club",
        "Priya asked Tomasz what got him into climbing",
    )
    assert kept == ["Priya joined a club", "Priya asked Tomasz what got him into climbing"]
    assert dropped == [
        ("Priya checked out the climbing gym with Tomasz",
         "a question to the other person, not a fact"),
        ("Priya is into climbing", "a question to the other person, not a fact"),
    ]  # fmt: skip


def test_facts_about_the_speaker_or_naming_both_stay():
    kept, _ = _check(
        "I planted tomatoes last week, you should too. Thank you for the seeds!",
        "Priya planted tomatoes last week",
        "Priya thanked Tomasz for the seeds",
    )
    assert kept == ["Priya planted tomatoes last week", "Priya thanked Tomasz for the seeds"]


def test_with_no_single_other_speaker_the_fact_is_dropped():
    messages = [
        _message("Priya", "user", "Your new bike is so shiny!"),
        _message("Tomasz", "assistant", "Thanks!"),
        _message("Ines", "assistant", "It is!"),
    ]
    fact = Fact(text="Priya's new bike is shiny", attributed_to="user", sources=(0,))
    kept, dropped = move_addressed_facts([fact], messages)
    assert kept == [] and dropped[0][1] == "about the person addressed, who is not named"


def test_messages_without_names_are_left_alone():
    user = NewMessage(id="u", role="user", name=None, observed_at=None, content="Your tip helped!")
    fact = Fact(text="User's tip helped", attributed_to="user", sources=(0,))
    assert move_addressed_facts([fact], [user]) == ([fact], [])


def test_the_speakers_possessive_of_what_the_message_gives_the_other_is_moved():
    kept, _ = _check(
        "I'm really impressed with your patience and commitment to the allotment!",
        "Priya's commitment to the allotment is impressive",
        "Priya's patience is admirable",
    )
    assert kept == ["Tomasz's commitment to the allotment is impressive",
                    "Tomasz's patience is admirable"]  # fmt: skip
    kept, _ = _check(  # hers too ("my"): it stays
        "My patience ran out, your patience never does, I'm impressed.",
        "Priya's patience ran out",
    )
    assert kept == ["Priya's patience ran out"]


def test_a_your_in_a_question_gives_nothing_to_the_person_addressed():
    # "what's your favourite?" asks for Tomasz's favourite; the message gives Priya's
    kept, dropped = _check(
        "I like every sport, but climbing is my top pick. What's your favourite?",
        "Priya's favourite sport is climbing",
    )
    assert kept == ["Priya's favourite sport is climbing"] and dropped == []


def test_a_fact_that_runs_on_is_judged_by_its_first_sentence():
    kept, _ = _check(
        "Wow, Tomasz! You found the perfect spot for your bakery. Way to go!",
        "Priya found the perfect spot for her bakery. Way to go!",
    )
    assert kept == ["Tomasz found the perfect spot for her bakery. Way to go!"]
    kept, _ = _check(
        "I'm always here for you! Go bake something great in your new oven.",
        "Priya is always here for you! Go bake something great in your new oven.",
    )
    assert kept == ["Priya is always here for you! Go bake something great in your new oven."]
