"""Who said a message (offline_mem/extraction/speakers.py): its name, else a "Name: " prefix of a
transcript written that way, else its role."""

from __future__ import annotations

from offline_mem.extraction.speakers import leading_name, with_speakers
from offline_mem.store.records import NewMessage


def message(content: str, name: str | None = None, role: str = "user") -> NewMessage:
    return NewMessage("m", role, content, name, None)


def test_a_leading_name_is_one_to_three_capitalised_words_and_a_colon():
    said = "I started pottery classes"
    assert leading_name(f"Tomasz: {said}") == ("Tomasz", said)
    assert leading_name("Mary Ann: hi there") == ("Mary Ann", "hi there")
    assert leading_name("Jean-Luc: ok") == ("Jean-Luc", "ok")
    for content in ("TODO: call mum", "hello: x", "Ana:no space", "At 10:30 we left",
                    "Anna Maria Lopez Diaz: too long", "R2: digits"):  # fmt: skip
        assert leading_name(content) is None, content


def test_prefixes_count_only_in_a_transcript_written_that_way():
    alone = [message("Note: buy milk and eggs")]
    assert with_speakers(alone) == alone  # one prefixed message is no transcript
    turns = [message("Tomasz: I started pottery classes"), message("Lea: Since when?")]
    named = with_speakers(turns)
    assert [(m.name, m.content) for m in named] == [
        ("Tomasz", "I started pottery classes"),
        ("Lea", "Since when?"),
    ]
    # the scope's recent messages show the format too: a single new turn is then read as well
    (one,) = with_speakers([message("Lea: I moved to Ghent")], ["Tomasz: hi", "Lea: hello"])
    assert (one.name, one.content) == ("Lea", "I moved to Ghent")


def test_a_message_name_wins_over_a_prefix():
    turns = [message("Tomasz: I started pottery", name="tom_k"), message("Lea: nice")]
    named = with_speakers(turns)
    assert (named[0].name, named[0].content) == ("tom_k", "Tomasz: I started pottery")
    assert named[1].name == "Lea"
