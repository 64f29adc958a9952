"""A fact that is its source turn written out again is dropped: the turn itself is kept and
searched (`search` ranks stored messages beside facts), so the copy adds nothing but a second,
often truncated, version of the same text.

Measured on the real dev set (issue 19): 55 of 274 facts were such copies ("Maria says 'Yeah,
John! It definitely builds ...'", whole turns with the speaker's name in front), and the copies
took part in most wrong supersessions (one quoted remark "superseding" another). A copy is
recognised by words, not by phrasing: the longest run of words the fact shares, in order, with
one of its source messages is at least COPY_MIN_RUN words long and covers at least
COPY_MIN_SHARE of the fact's words. Short turns restated as facts ("I adopted a cat named Pixel"
-> "Rui adopted a cat named Pixel") stay: a fact that short is what a fact should be.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .admission import Fact
from .records import NewMessage

COPY_MIN_RUN = 10  # words in order, shared with the source turn
COPY_MIN_SHARE = 0.6  # of the fact's words
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def longest_shared_run(first: Sequence[str], second: Sequence[str]) -> int:
    """The length of the longest run of words that both sequences hold in the same order."""
    best = 0
    previous = [0] * (len(second) + 1)
    for word in first:
        current = [0] * (len(second) + 1)
        for j, other in enumerate(second, start=1):
            if word == other:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def is_turn_copy(fact: str, turn: str) -> bool:
    words = _words(fact)
    if len(words) < COPY_MIN_RUN:
        return False
    run = longest_shared_run(words, _words(turn))
    return run >= COPY_MIN_RUN and run >= COPY_MIN_SHARE * len(words)


def drop_turn_copies(
    facts: Sequence[Fact], messages: Sequence[NewMessage]
) -> tuple[list[Fact], list[tuple[str, str]]]:
    """The facts that are not copies of one of their source messages, and those dropped."""
    kept: list[Fact] = []
    dropped: list[tuple[str, str]] = []
    for fact in facts:
        sources = [messages[i].content for i in fact.sources if 0 <= i < len(messages)]
        if any(is_turn_copy(fact.text, turn) for turn in sources):
            dropped.append((fact.text, "a copy of its source message, which is kept"))
        else:
            kept.append(fact)
    return kept, dropped
