"""Facts made of advice or an order to the other person are dropped: advice is no deed.

The 1.5B model writes what one person tells the other to do as done: "<friend> is pushing through
and destressing" from the writer's "Push through ... don't forget to take breaks when you need to
destress!", "<friend> takes it easy" from "Take it easy!". A fact is taken to come from advice
when its source sentence (the one sharing most content words) opens with a verb in its base
form and no subject (EntityExtractor.opening_verbs, from the tagger) and has no first-person
word: "Remind me to call my mother" and "Let's plan a trip" (the lexicon's proposal verbs) say
something of the speaker and stay. What the check changed on real dialogue:
docs/design/fact-checks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..admission import Fact
from .base import CheckContext, Dropped
from .content_words import words_of
from .grounding import claim_source_sentence


class AdviceFacts:
    """Facts whose source sentence orders or advises the other person dropped."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        if not facts:
            return [], []
        lexicon = ctx.lexicon
        sentences = [
            claim_source_sentence(f, ctx.messages, ctx.speakers.every, lexicon) for f in facts
        ]
        verbs = ctx.opening_verbs(sentences)
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for fact, sentence, verb in zip(facts, sentences, verbs, strict=True):
            speaker_in_it = set(words_of(sentence)) & lexicon.first_person
            if verb is not None and verb not in lexicon.proposal_verbs and not speaker_in_it:
                dropped.append((fact.text, f"advice or an order ({verb!r}), not a deed"))
            else:
                kept.append(fact)
        return kept, dropped
