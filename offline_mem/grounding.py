"""Which new message a fact comes from, decided by the words they share, not by the model alone.

The 1.5B extractor often cites the wrong message ("from_messages") and, in a conversation
between two people, credits one speaker's words to the other: measured on the side-by-side
benchmark, Alex's "I have a hamster called Noodle" became "Oskar has a hamster called Noodle",
citing Oskar's message about his car. Provenance is what `search_messages` reports under
`memory_ids` and what a user follows to check a memory, so it has to be right.

For each fact: its content words (stop words and the speakers' names left out, a crude
five-letter stem so "adopted" meets "adopt") are counted in each new message. The fact keeps the
model's citation unless another message shares strictly more of them; then that message becomes
the source. When the source so found was said by the other side than the model claimed, and the
fact names the claimed speaker but not the real one, the fact is about the wrong person and is
dropped; otherwise only its attribution is corrected. A fact that shares no word with any new
message (a paraphrase such as "User is vegetarian" from "I don't eat meat") is left as the model
wrote it: too little to judge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from .admission import Fact
from .content_words import WORD, content_stems, words_of
from .records import NewMessage


def speaker_names(messages: Sequence[NewMessage]) -> frozenset[str]:
    """Every word that names a side of the conversation: the role words and the speakers' names."""
    return _names(messages, "user") | _names(messages, "assistant")


def _names(messages: Sequence[NewMessage], role: str) -> frozenset[str]:
    """How a side of the conversation is named in facts: its role word and its speakers' names."""
    found = {role}
    for m in messages:
        if m.role == role and m.name:
            found |= {w.lower() for w in WORD.findall(m.name)}
    return frozenset(found)


def ground_facts(
    facts: Sequence[Fact], messages: Sequence[NewMessage], shown: Sequence[int]
) -> tuple[list[Fact], list[tuple[str, str]]]:
    """The facts with sources (and attribution) corrected, and those dropped with the reason.
    `shown` are the plan indexes of the new messages the model saw."""
    sides = {role: _names(messages, role) for role in ("user", "assistant")}
    every_name = frozenset().union(*sides.values())
    stems = {i: content_stems(messages[i].content, every_name) for i in shown}
    kept: list[Fact] = []
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        words = content_stems(fact.text, every_name)
        overlap = {i: len(words & stems[i]) for i in shown}
        cited = max((overlap.get(i, 0) for i in fact.sources), default=0)
        best = max(shown, key=lambda i: (overlap[i], i in fact.sources, -i), default=None)
        if best is None or overlap[best] <= cited:
            kept.append(fact)
            continue
        speaker = messages[best].role
        if fact.attributed_to in sides and speaker in sides and speaker != fact.attributed_to:
            mentioned = {w.lower() for w in WORD.findall(fact.text)}
            if mentioned & sides[fact.attributed_to] and not mentioned & sides[speaker]:
                dropped.append((fact.text, f"said by the {speaker}, credited to the other side"))
                continue
        kept.append(replace(fact, sources=(best,), attributed_to=speaker))
    return kept, dropped


FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours"})
# spaCy's small model often labels a first name ORG or GPE ("Kofi" ORG, "Valencia" PERSON in
# "Kofi has been living in Valencia"), so any named entity counts; the first one is the likely
# subject. Unlabelled proper-noun runs ("PROPER") do not: a capitalised first word is too often
# one ("Sadly", "Hey").
NAME_KINDS = frozenset({"PERSON", "ORG", "GPE", "NORP"})
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def drop_subject_swaps(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    people_in: Callable[[Sequence[str]], list[list[str]]],
) -> tuple[list[Fact], list[tuple[str, str]]]:
    """Facts that move what a named third person did onto the user are dropped: "Lena adopted a
    cat called Pepper" written as "Oskar adopted a cat called Pepper" (measured on the
    side-by-side benchmark; word overlap cannot see it, the words are the same). A fact is
    dropped when it is the user's and names the user, its source sentence (the one sharing most
    words) has no first-person word, and the first person that sentence names is not in the
    fact. `people_in` gives the names in each text, in order (from the entity extractor)."""
    user_names = _names(messages, "user")
    every_name = speaker_names(messages)
    kept: list[Fact] = []
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        mentioned = set(words_of(fact.text))
        if fact.attributed_to != "user" or not mentioned & user_names:
            kept.append(fact)
            continue
        sentence = _source_sentence(fact, messages, every_name)
        people = [p for p in people_in([sentence])[0] if p.lower() not in every_name]
        first_person = bool(set(words_of(sentence)) & FIRST_PERSON)
        if people and not first_person and not set(words_of(people[0])) <= mentioned:
            dropped.append((fact.text, f"about {people[0]}, not the user"))
            continue
        kept.append(fact)
    return kept, dropped


def _source_sentence(fact: Fact, messages: Sequence[NewMessage], names: frozenset[str]) -> str:
    words = content_stems(fact.text, names)
    sentences = [
        s.strip() for i in fact.sources for s in _SENTENCE.findall(messages[i].content) if s.strip()
    ]
    return max(sentences, key=lambda s: len(words & content_stems(s, names)), default="")


# Content words a fact must share with one context text to count as copied from it. One shared
# word is common between unrelated facts of one person ("cat", "moved"); two are rarely chance.
COPY_MIN_SHARED = 2


def drop_context_copies(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    shown: Sequence[int],
    context: Sequence[str],
) -> tuple[list[Fact], list[tuple[str, str]]]:
    """Facts copied from the context instead of taken from the new messages are dropped: a fact
    that shares no content word with any new message but at least COPY_MIN_SHARED with one
    `context` text (a memory or a recent message shown to the model). Measured on the
    side-by-side benchmark: the 1.5B model wrote "Oskar's cousin just moved to Ghent, funny
    coincidence." from Oskar's "I started a new job at Halcyon Bio", re-using the shown memory
    "Alex's cousin just moved to Ghent, funny coincidence." with the name swapped, and it
    superseded the true memory. A fact that shares no word with anything is a paraphrase and
    stays (see `ground_facts`)."""
    every_name = speaker_names(messages)
    new_words = set().union(*(content_stems(messages[i].content, every_name) for i in shown))
    context_words = [content_stems(text, every_name) for text in context]
    kept: list[Fact] = []
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        words = content_stems(fact.text, every_name)
        copied = not words & new_words and any(
            len(words & other) >= COPY_MIN_SHARED for other in context_words
        )
        if copied:
            dropped.append((fact.text, "copied from the context, not in the new messages"))
        else:
            kept.append(fact)
    return kept, dropped
