"""Facts about the person a message speaks to, credited to its speaker, are moved or dropped.

Every fact of a named speaker's message opens with that speaker's name (prompts.fact_subject). When
the sentence a fact comes from speaks to the other person and not about the speaker ("Your garden
looks amazing!", "Have you tried yoga?"), the 1.5B model still has to open the fact with the
speaker's name, and writes the other person's garden as the speaker's. A fact is taken to be about
the person addressed when its source sentence (the one sharing most content words) has a
second-person word and no first-person word, and the fact does not name the other person already
("<speaker> thanked <other> ..." is about both). So is a fact opening with the speaker's possessive
whose thing the message gives the person addressed and never the speaker ("<speaker>'s store looks
great" from the speaker's "I love how your store looks"). A question is no fact: dropped, also one
without a second-person word ("Tried the new ramen bar yet?" had become "<speaker> tried the new
ramen bar"), unless it has a first-person word ("Did I tell you I moved?"). A question put to the
other person (its first personal word "you", no "I" in it) is no fact even when the fact names
the other person or the question says "we" or "me": "Did you ever check out that spot we talked
about?" had become "<speaker> checked out the spot with <other>"; a fact that says someone asked
stays. A statement is rewritten to open with the other person's name when the add's messages
name exactly one other speaker, else dropped.

Facts credited to the wrong person on real dialogue were mostly of this pattern; what the check
changed: docs/design/fact-checks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...store.records import NewMessage
from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from ..speakers import PLAIN_NAME
from .base import CheckContext, Dropped, Speakers
from .content_words import words_of
from .grounding import SENTENCE, claim_source_sentence


def _plain_name(message: NewMessage) -> str | None:
    name = (message.name or "").strip()
    return name if PLAIN_NAME.fullmatch(name) else None


def move_addressed_facts(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    *,
    speakers: Speakers | None = None,
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """The facts kept (those about the person addressed rewritten to name them), and those
    dropped with the reason."""
    speakers = speakers or Speakers.of(messages)
    names = {n for m in messages if (n := _plain_name(m))}
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        writer = _plain_name(messages[fact.sources[0]]) if len(fact.sources) == 1 else None
        others = sorted(names - {writer})
        rest = fact.text[len(writer) :] if writer and fact.text.startswith(writer) else None
        if rest is None:
            kept.append(fact)
            continue
        sentence = claim_source_sentence(fact, messages, speakers.every, lexicon)
        if _asks_the_other(sentence, lexicon) and lexicon.asking_words.isdisjoint(
            words_of(fact.text)
        ):
            # "Did you ever check out that spot we talked about?" -> "<writer> checked out
            # the spot with <other>": naming the other person does not make it a fact
            dropped.append((fact.text, "a question to the other person, not a fact"))
            continue
        if any(set(words_of(o)) <= set(words_of(rest)) for o in others):
            kept.append(fact)
            continue
        said = set(words_of(sentence))
        owned = _owned_by_addressee(rest, messages[fact.sources[0]].content, lexicon)
        question = sentence.rstrip().endswith("?")
        if not owned and question and not said & lexicon.first_person:
            # asks, with "you" or without ("Tried the ramen bar yet?"), and tells nothing of
            # the writer: the question's words are not the writer's facts
            dropped.append((fact.text, "a question to the other person, not a fact"))
        elif not owned and (not said & lexicon.second_person or said & lexicon.first_person):
            kept.append(fact)
        elif len(others) == 1:
            # still said by the writer (attributed_to, actor_id), now about the other person
            kept.append(Fact(others[0] + rest, fact.attributed_to, fact.sources))
        else:
            dropped.append((fact.text, "about the person addressed, who is not named"))
    return kept, dropped


def _asks_the_other(sentence: str, lexicon: Lexicon) -> bool:
    """Whether `sentence` is a question put to the other person: its first personal word is
    second-person and it has no first-person subject ("Could you tell me ...?", "Did you
    check out the place we talked about?"; not "Did you know I moved?")."""
    if not sentence.rstrip().endswith("?"):
        return False
    said = words_of(sentence)
    personal = lexicon.first_person | lexicon.second_person
    person = next((w for w in said if w in personal), None)
    return person in lexicon.second_person and lexicon.first_person_subject.isdisjoint(said)


# how far after "your" or "my" a word still names what is owned ("your energy and commitment")
OWNED_WINDOW = 3


def _owned_by(owners: frozenset[str], said: Sequence[str]) -> set[str]:
    """The words at most OWNED_WINDOW after one of `owners` in `said`."""
    starts = [i + 1 for i, word in enumerate(said) if word in owners]
    return {w for start in starts for w in said[start : start + OWNED_WINDOW]}


def _owned_by_addressee(rest: str, content: str, lexicon: Lexicon) -> bool:
    """Whether a fact that opens with the writer's possessive ("<writer>'s store ...") names a
    thing the message gives the person addressed ("your store") and never the writer ("my
    store"). Questions do not count: "contemporary is my pick, what's your favourite?" asks
    for the other's favourite and gives the writer's."""
    suffix = next((s for s in lexicon.possessive_suffixes if rest.startswith(s)), None)
    owned = words_of(rest[len(suffix) :])[:1] if suffix else []
    statements = [s for s in SENTENCE.findall(content) if not s.rstrip().endswith("?")]
    said = words_of(" ".join(statements))
    return bool(owned) and (
        owned[0] in _owned_by(lexicon.second_possessive, said)
        and owned[0] not in _owned_by(lexicon.first_possessive, said)
    )


class AddressedFacts:
    """Facts about the person a message speaks to moved to them or dropped
    (`move_addressed_facts`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return move_addressed_facts(facts, ctx.messages, speakers=ctx.speakers, lexicon=ctx.lexicon)
