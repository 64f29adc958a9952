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
dropped; otherwise only its `said_by` is corrected. A fact that shares no word with any new
message (a paraphrase such as "User is vegetarian" from "I don't eat meat") is left as the model
wrote it: too little to judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .admission import Fact
from .content_words import WORD, content_stems
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
    """The facts with sources (and `said_by`) corrected, and those dropped with the reason.
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
