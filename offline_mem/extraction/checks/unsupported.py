"""Facts of a named speaker's message that share too few content words with it are dropped.

Every fact of a named speaker's message opens with the speaker's name (prompts.fact_subject), so
the 1.5B model writes something under that name even for a turn that states nothing: a reply of
thanks or praise, a question. On real dialogue most facts that share no content word (stop
words, speakers' names, numbers and calendar words left out, crudely stemmed) with their message
were wrong: the other person's news under the writer's name, the prompt's worked example, small
talk (docs/design/fact-checks.md). So were most facts of three or more content words of which at
most a third are in the message: the other speaker's earlier turn under this speaker's name
("<writer> started going to the gym" from "That's awesome, keep going!"), with one word in
common.

What a message holds in square brackets is an annotation, not the speaker's words: a chat
export's "[photo: a dog on a beach]", a transcript's "[laughs]". A fact resting on it reads a
photo's description as something the speaker did or has ("<name> made a handwritten letter"
from "[photo: a handwritten letter]"). So a fact is checked against the message without
its annotations, unless the fact says it is about something shared (the lexicon's `media_words`:
"<name> shared a photo of ..."). On the dev set this dropped 18 facts, about 12 of them wrong
(docs/design/fact-checks.md).

A message without a plain name keeps such facts: there a paraphrase ("User is vegetarian" from
"I don't eat meat") is what the model is asked for, and no real user/assistant chat was at hand
to show what dropping them would cost (grounding.py leaves them alone for that reason).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from ..admission import Fact
from .base import CheckContext, Dropped, said_by_named_speakers
from .content_words import content_stems, words_of

# A fact needs more than this share of its content words in its message, once it has at least
# SHARE_FROM of them (a two-word fact with one word in common is too little to judge).
LEAST_SHARE = Fraction(1, 3)
SHARE_FROM = 3
# "[photo: ...]", "[laughs]"; not a Markdown link's text ("[my blog](https://...)")
ANNOTATION = re.compile(r"\[[^\[\]]*\](?!\()")


def support_of(fact: str, said: set[str], ignored: frozenset[str], ctx: CheckContext) -> str:
    """Why `fact` is not supported by the content words `said`, or "" when it is."""
    words = content_stems(fact, ignored, ctx.lexicon)
    shared = words & said
    if not shared:
        return "shares no content word with its message"
    if len(words) >= SHARE_FROM and Fraction(len(shared), len(words)) <= LEAST_SHARE:
        return f"shares {len(shared)} of its {len(words)} content words with its message"
    return ""


class UnsupportedFacts:
    """Facts of a named speaker that share too few content words with their source messages
    dropped."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        # when a fact happened says nothing of what happened: calendar words are left out
        ignored = ctx.speakers.every | ctx.lexicon.months | frozenset(ctx.lexicon.weekdays)
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for fact in facts:
            why = ""
            if said_by_named_speakers(fact, ctx.messages):
                sources = [ctx.messages[i].content for i in fact.sources]
                if ctx.lexicon.media_words.isdisjoint(words_of(fact.text)):
                    sources = [ANNOTATION.sub(" ", c) for c in sources]
                said = set().union(*(content_stems(c, ignored, ctx.lexicon) for c in sources))
                why = support_of(fact.text, said, ignored, ctx)
            if why:
                dropped.append((fact.text, why))
            else:
                kept.append(fact)
        return kept, dropped
