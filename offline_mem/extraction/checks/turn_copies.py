"""Facts that are a new message copied out, not a fact taken from it, are dropped.

Measured on real dialogue (dev set): asked to open each fact with its speaker's name, the 1.5B model
often wrote the turn itself ("<speaker> says 'Hey! Good to see you. What's up?'", "<speaker>: Yeah,
me too! ..."), mostly for greetings, questions and echoes that state nothing. The turn is stored and
searchable as evidence already, so such a copy adds nothing and, credited to a person, can mislead.
A copy shares with a new message, in the same order (their longest common subsequence), at least
COPY_SHARE of that message's words and at least COPY_MIN_WORDS, starting with the message's own
first word, and keeps one of its first- or second-person words ("I", "my", "you"): a fact is written
in the third person. So a copy with a date resolved inside it still is one, while a rewrite ("User
adopted a grey cat called Pixel" from "I adopted a grey cat called Pixel", 6 of 7 words), a
half-rewrite ("User started eating meat again, I'm no longer vegetarian.", the change a supersession
needs) and a fact that restates one clause of a long turn stay. A fact that puts the message in
quote marks ("<speaker> says 'Hey! Long time no see! What's up?'") is a copy by its own account,
person words or not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...store.records import NewMessage
from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from .base import CheckContext, Dropped

COPY_SHARE = 0.85  # of the message's words, shared with the fact in order
COPY_MIN_WORDS = 5  # a shorter message is restated, not copied
_WORD = re.compile(r"\w+(?:['’]\w+)*")


def words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def shared_in_order(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """The words `a` and `b` share in the same order (a longest common subsequence)."""
    rows = [[0] * (len(b) + 1)]
    for word in a:
        row = [0]
        for j, other in enumerate(b, start=1):
            row.append(rows[-1][j - 1] + 1 if word == other else max(rows[-1][j], row[-1]))
        rows.append(row)
    shared, i, j = [], len(a), len(b)
    while i and j:
        if a[i - 1] == b[j - 1]:
            shared.append(a[i - 1])
            i, j = i - 1, j - 1
        elif rows[i - 1][j] >= rows[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return shared[::-1]


def is_turn_copy(fact: str, message: str, lexicon: Lexicon = ENGLISH) -> bool:
    said = words(message)
    shared = shared_in_order(words(fact), said)
    return (
        len(shared) >= max(COPY_MIN_WORDS, COPY_SHARE * len(said))
        and shared[0] == said[0]  # it opens as the message does: "I started", not "User started"
        and not (lexicon.first_person | lexicon.second_person).isdisjoint(
            w.split("'")[0] for w in shared
        )
    )


# A quotation in a fact: from an opening quote mark at a word's start to its closing mark, or to
# the end of the fact when a later check cut it off inside the quotation.
_QUOTATION = re.compile(r"""(?:^|\s)['"‘“](?P<quoted>\w.*?)(?:['"’”](?=\W|$)|$)""")


def quotes_a_message(fact: str, message: str) -> bool:
    """Whether `fact` quotes `message` ("<name> says 'Hey! Long time no see! What's up?'"): a
    quotation in it shares COPY_SHARE of the message's words in order, and COPY_MIN_WORDS. The
    quote marks say it is a copy, so it needs no first- or second-person word to be one."""
    said = words(message)
    return any(
        len(shared_in_order(words(m.group("quoted")), said))
        >= max(COPY_MIN_WORDS, COPY_SHARE * len(said))
        for m in _QUOTATION.finditer(fact)
    )


def drop_turn_copies(
    facts: Sequence[Fact],
    messages: Sequence[NewMessage],
    shown: Sequence[int],
    lexicon: Lexicon = ENGLISH,
) -> tuple[list[Fact], list[Dropped]]:
    """The facts that copy none of the new messages (`shown`: their plan indexes), and those
    dropped with the reason."""
    kept: list[Fact] = []
    dropped: list[Dropped] = []
    for fact in facts:
        if any(
            is_turn_copy(fact.text, messages[i].content, lexicon)
            or quotes_a_message(fact.text, messages[i].content)
            for i in shown
        ):
            dropped.append((fact.text, "a copy of a new message, not a fact taken from it"))
        else:
            kept.append(fact)
    return kept, dropped


class TurnCopies:
    """Facts that copy a new message out dropped (`drop_turn_copies`)."""

    def check(self, facts: Sequence[Fact], ctx: CheckContext) -> tuple[list[Fact], list[Dropped]]:
        return drop_turn_copies(facts, ctx.messages, ctx.shown, ctx.lexicon)
