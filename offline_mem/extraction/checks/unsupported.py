"""Facts of a named speaker's message that share no content word with it are dropped.

Every fact of a named speaker's message opens with the speaker's name (prompts.fact_subject), so
the 1.5B model writes something under that name even for a turn that states nothing: a reply of
thanks or praise, a question. On real dialogue most facts that share no content word (stop
words, speakers' names and numbers left out, crudely stemmed) with their message were wrong: the
other person's news under the writer's name, the prompt's worked example, small talk
(docs/design/fact-checks.md).

A message without a plain name keeps such facts: there a paraphrase ("User is vegetarian" from
"I don't eat meat") is what the model is asked for, and no real user/assistant chat was at hand
to show what dropping them would cost (grounding.py leaves them alone for that reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..admission import Fact
from ..speakers import PLAIN_NAME
from .base import CheckContext, Dropped
from .content_words import content_stems


class UnsupportedFacts:
    """Facts of a named speaker that share no content word with their source messages dropped."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        names = ctx.speakers.every
        kept: list[Fact] = []
        dropped: list[Dropped] = []
        for fact in facts:
            sources = [ctx.messages[i] for i in fact.sources]
            named = all(PLAIN_NAME.fullmatch((m.name or "").strip()) for m in sources)
            said = set().union(*(content_stems(m.content, names, ctx.lexicon) for m in sources))
            if named and sources and not content_stems(fact.text, names, ctx.lexicon) & said:
                dropped.append((fact.text, "shares no content word with its message"))
            else:
                kept.append(fact)
        return kept, dropped
