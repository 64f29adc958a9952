"""A fact that opens in the third person and then runs on with the message's own words is cut
back to its third-person opening.

Measured on real dialogue (dev set, docs/design/fact-checks.md): asked to open each fact with
its speaker's name, the 1.5B model often wrote one rewritten sentence and then copied the rest
of the turn after it: "User launched an ad campaign for the store. Starting my own store is
scary and rewarding. I'm excited to see where it takes me!", "User was thinking about trying
painting. Do you have any hobbies you love?". The tail is the turn itself (stored and searchable
as evidence already), written in the first or second person, so a reader of the fact cannot
tell whom "I" or "you" means. `TurnCopies` drops a fact that is a copy from its first word; this
check keeps the rewritten opening of the others.

A fact is split into sentences and into clauses set off by a spaced dash ("... shows - my
favourite memory was ..."). The first part that is a question or holds a first- or
second-person word, after the opening one, ends the fact. The opening part itself is never cut:
"User started eating meat again, I'm no longer vegetarian." is one sentence and stays whole
(the change a supersession needs).

`PersonClauses` goes further for a named speaker's fact, where every person has a name to
write: what still speaks as a person is cut at its clause ("<name> made a cake with berries, maybe
you would like that!"), and a fact whose first clause does ("<name> will keep you posted.") is
dropped: no reader can tell whom its "you" or "we" means. A later sentence that does not open
with a speaker's name is the turn copied on after the claim, and is cut too ("<name> is busy
with her pets. It's really fulfilling."): one fact per stated thing, and the turn itself is
stored as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from .base import CheckContext, Dropped, said_by_named_speakers
from .content_words import WORD

# Where a fact's parts meet: after a sentence's end, or a dash with spaces around it.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\s+[-–—]\s+")
# Where a clause of a sentence ends: a comma or a semicolon.
_CLAUSE_END = re.compile(r"[,;]\s+")
_ENDS = ".!?"


def parts_of(text: str) -> list[tuple[int, str]]:
    """The fact's parts with the offset where each starts."""
    parts, start = [], 0
    for cut in _BOUNDARY.finditer(text):
        parts.append((start, text[start : cut.start()]))
        start = cut.end()
    parts.append((start, text[start:]))
    return [(offset, part) for offset, part in parts if part.strip()]


def speaks_as_a_person(part: str, lexicon: Lexicon) -> bool:
    """A question, or words of the first or second person ("I'm" counts as "I")."""
    if part.rstrip().endswith("?"):
        return True
    said = {w.lower().replace("’", "'").split("'")[0] for w in WORD.findall(part)}
    return not said.isdisjoint(lexicon.first_person | lexicon.second_person)


def third_person_opening(text: str, lexicon: Lexicon = ENGLISH) -> str:
    """The fact up to its first later part written as a person speaks; the fact itself when
    it has none."""
    parts = parts_of(text)
    for offset, part in parts[1:]:
        if speaks_as_a_person(part, lexicon):
            kept = text[:offset].rstrip().rstrip("-–—").rstrip()
            return kept if kept.endswith(tuple(_ENDS)) else kept + "."
    return text


class CopiedTails:
    """Facts cut back to their third-person opening (`third_person_opening`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        kept = []
        for fact in facts:
            opening = third_person_opening(fact.text, ctx.lexicon)
            kept.append(fact if opening == fact.text else replace(fact, text=opening))
        return kept, []


def clauses_as_a_third_person(text: str, lexicon: Lexicon = ENGLISH) -> str:
    """The fact up to its first clause that speaks as a person; "" when its first one does."""
    start = 0
    for cut in [*_CLAUSE_END.finditer(text), None]:
        end = cut.start() if cut else len(text)
        if speaks_as_a_person(text[start:end], lexicon):
            kept = text[:start].rstrip().rstrip(",;").rstrip()
            return "" if not kept else kept if kept.endswith(tuple(_ENDS)) else kept + "."
        start = cut.end() if cut else end
    return text


# A sentence ends at "!" or "?", or at "." after a word that is no abbreviation: one of three
# letters or more that is not capitalised short ("St. Louis", "Dr. Lima", "5 ft. tall" go on).
_SENTENCE_END = re.compile(r"(?<=[!?])\s+|(?<=[^\W\d_]{3})(?<!\b[A-Z][a-z]{2})\.\s+(?=\S)")


def sentences_naming_their_subject(text: str, names: frozenset[str]) -> str:
    """The fact up to its first later sentence that does not open with one of `names` (the
    speakers' name words): "<name> chose furniture that is comfy. The chandelier adds a glam
    feel." is the turn copied on after its claim; "<name> adopted a cat. <name> calls her
    Pepper." is two claims, each with its subject."""
    for cut in _SENTENCE_END.finditer(text):
        first = next(iter(WORD.findall(text[cut.end() :])), "").lower()
        if first not in names:
            kept = text[: cut.start()].rstrip()
            return kept if kept.endswith(tuple(_ENDS)) else kept + "."
    return text


class PersonClauses:
    """A named speaker's fact cut at its first clause that speaks as a person, or dropped when
    its first clause does (`clauses_as_a_third_person`), then cut at its first later sentence
    without a subject of its own (`sentences_naming_their_subject`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for fact in facts:
            text = fact.text
            if said_by_named_speakers(fact, ctx.messages):
                text = clauses_as_a_third_person(text, ctx.lexicon)
                text = sentences_naming_their_subject(text, ctx.speakers.every)
            if not text:
                dropped.append((fact.text, "speaks as a person: whom 'I' or 'you' means is lost"))
            else:
                kept.append(fact if text == fact.text else replace(fact, text=text))
        return kept, dropped
