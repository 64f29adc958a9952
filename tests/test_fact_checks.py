"""The fact checks behind one interface (extraction/checks/base.py): one context per add, the
speakers and the entity names computed once, and the words of the language in one lexicon."""

from __future__ import annotations

import dataclasses
import re
from datetime import date, datetime

import pytest

from offline_mem.errors import ConfigError
from offline_mem.extraction.admission import Fact
from offline_mem.extraction.checks import base
from offline_mem.extraction.checks.base import CheckContext, Speakers
from offline_mem.extraction.checks.pipeline import FACT_CHECKS, check_facts
from offline_mem.extraction.checks.relative_dates import resolve_relative_dates
from offline_mem.extraction.lexicon import ENGLISH, lexicon_for
from offline_mem.memory import Memory
from offline_mem.store.records import NewMessage
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer

MESSAGES = [
    NewMessage("m0", "user", "I adopted a cat called Pepper yesterday.", "Ana",
               "2024-05-02T10:00:00"),
    NewMessage("m1", "assistant", "Lovely! How old is she?", None, "2024-05-02T10:01:00"),
]  # fmt: skip


def context(**changes) -> CheckContext:
    values = {
        "messages": MESSAGES, "shown": [0, 1], "seen": ["Ana lives in Porto."],
        "stored": MESSAGES, "now": datetime(2024, 5, 2, 12),
        "people_in": lambda texts: [[] for _ in texts],
    }  # fmt: skip
    return CheckContext(**(values | changes))


def test_every_check_has_the_one_interface() -> None:
    for check in FACT_CHECKS:
        kept, dropped = check.check([], context())
        assert kept == [] and dropped == []


def test_the_pipeline_keeps_rewrites_and_drops_with_reasons() -> None:
    facts = [
        Fact("User adopted a cat called Pepper yesterday.", "user", (0,)),
        Fact("User is named Ana.", "user", (0,)),  # no word of Ana's message (and only a name)
        Fact(
            "User adopted the cat Pepper in Madrid.", "user", (0,)
        ),  # no text the model saw says Madrid
    ]
    kept, dropped = check_facts(facts, context())
    assert [f.text for f in kept] == ["Ana adopted a cat called Pepper on 1 May 2024."]
    assert dropped == [
        ("User is named Ana.", "shares no content word with its message"),
        ("User adopted the cat Pepper in Madrid.", "names 'Madrid', which no message says"),
    ]


def test_the_context_computes_the_speakers_once(monkeypatch) -> None:
    calls = []
    of = Speakers.of.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(Speakers, "of", classmethod(lambda cls, m: calls.append(1) or of(cls, m)))
    ctx = context()
    check_facts([Fact("User adopted a cat called Pepper.", "user", (0,))] * 3, ctx)
    assert len(calls) == 1
    assert ctx.speakers.every == {"user", "assistant", "ana"}
    assert ctx.speakers.user_names == {"Ana"}


def test_an_add_reads_each_text_for_names_once(tmp_path) -> None:
    """Two facts of one sentence: the subject-swap check asks the entity extractor once."""
    entities = FakeEntities()
    script = answer("Ana has a dog called Rex.", "Ana walks Rex daily.")
    with Memory({"path": str(tmp_path / "m.db")}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(script), entities=entities) as memory:  # fmt: skip
        memory.add([{"role": "user", "name": "Ana", "content": "My dog Rex loves walks."}],
                   user_id="u")  # fmt: skip
    read = [text for batch in entities.calls for text in batch]
    assert read.count("My dog Rex loves walks.") == 1


def test_a_pipeline_name_chooses_the_lexicon() -> None:
    assert lexicon_for("en_core_web_sm") is ENGLISH
    assert lexicon_for(None) is ENGLISH  # keyword analysis then runs the English pipeline
    with pytest.raises(ConfigError, match="'de'"):
        lexicon_for("de_core_news_sm")


def test_another_language_is_data_only() -> None:
    """A lexicon with other phrases and other words changes what the same code resolves."""
    german = dataclasses.replace(
        ENGLISH, language="de",
        month_names=("januar", "februar", "märz", "april", "mai", "juni", "juli", "august",
                     "september", "oktober", "november", "dezember"),
        prepositions=frozenset({"seit"}),
        relative_dates=((re.compile(r"\bvorgestern\b", re.I), "day-2"),
                        (re.compile(r"\bgestern\b", re.I), "day-1")),
        date_words={**ENGLISH.date_words, "day": ("am", "{date}")},
        long_date="{day}. {month} {year}",
    )  # fmt: skip
    observed = date(2024, 5, 2)
    assert resolve_relative_dates("Ana war gestern in Porto.", observed, german) == (
        "Ana war am 1. Mai 2024 in Porto."
    )
    assert resolve_relative_dates("Seit vorgestern", observed, german) == "Seit 30. April 2024"
    assert resolve_relative_dates("Ana war gestern in Porto.", observed) == (
        "Ana war gestern in Porto."
    )  # English knows no "gestern"


def test_a_lexicon_must_mean_what_the_checks_compute() -> None:
    with pytest.raises(ValueError, match="meanings"):
        dataclasses.replace(ENGLISH, relative_dates=((re.compile("x"), "fortnight-ago"),))
    assert base.SIDES == ("user", "assistant")


def test_with_one_call_per_message_an_earlier_message_of_the_add_is_context() -> None:
    """The second call saw the first message as context: a fact of it that restates the first
    message under the second speaker's name is a context copy; its own fact stays."""
    from offline_mem.extraction.checks.grounding import ContextCopies

    messages = [
        NewMessage("m0", "user", "I used to race dinghies and won the regional cup at sixteen.",
                   "Priya", None),
        NewMessage("m1", "assistant", "Winning the cup is amazing! I sail on Sundays now.",
                   "Tomasz", None),
    ]  # fmt: skip
    facts = [
        Fact("Tomasz won the regional cup racing dinghies at sixteen", "assistant", (1,)),
        Fact("Tomasz sails on Sundays", "assistant", (1,)),
        Fact("Priya won the regional cup at sixteen", "user", (0,)),
    ]
    kept, dropped = ContextCopies().check(
        facts, context(messages=messages, stored=messages, seen=[], groups=[[0], [1]])
    )
    assert [f.text for f in kept] == ["Priya won the regional cup at sixteen",
                                      "Tomasz sails on Sundays"]  # fmt: skip
    assert dropped == [(facts[0].text, "copied from the context, not in the new messages")]
    # as one call for both messages, nothing was context: all stay
    kept, _ = ContextCopies().check(facts, context(messages=messages, stored=messages, seen=[]))
    assert len(kept) == 3
