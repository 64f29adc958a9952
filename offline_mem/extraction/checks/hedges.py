"""Facts that state as true what their message only hoped, guessed or thought of doing are
dropped.

The 1.5B model drops the hedge of a sentence: "<name> likes RPGs" from "Thinking of trying RPGs
like that", "<name> has hobbies including painting" from "I was thinking about trying painting",
"<name>'s screenplay is expected to make it to the screen" from "Hoping my screenplay gets
noticed and makes it to the screen". A fact is dropped when its source sentence (the one sharing
most content words) hedges (the lexicon's `hedge_words`, or its `hedge_phrase`: "thinking of
trying") and the fact keeps no word of intent or doubt (`intent_words`: "<name> is thinking about
trying painting" stays). "Might" and "maybe" are not hedges here: on the dev set they belonged to
another clause ("The turtles might be small, but ...") as often as to the fact. What the check
changed on real dialogue: docs/design/fact-checks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..admission import Fact
from .base import CheckContext, Dropped
from .content_words import words_of
from .grounding import claim_source_sentence


class HedgedFacts:
    """Facts asserting what their source sentence only hopes or considers dropped."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        lexicon = ctx.lexicon
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for fact in facts:
            sentence = claim_source_sentence(fact, ctx.messages, ctx.speakers.every, lexicon)
            words = set(words_of(sentence))
            hedged = bool(
                lexicon.hedge_words & words
                or lexicon.hedge_phrase.search(sentence)
                or lexicon.guess_opening.match(sentence)
            )
            if hedged and lexicon.intent_words.isdisjoint(words_of(fact.text)):
                dropped.append(
                    (fact.text, "states as true what its message only hopes, guesses or considers")
                )
            else:
                kept.append(fact)
        return kept, dropped
