"""One interface for the checks a fact of the model's answer passes before admission.

Every check is a `FactCheck`: `check(facts, context) -> (kept, dropped)`, `dropped` holding
(text, reason) pairs. A check may also rewrite the facts it keeps (a source corrected, "User"
named, a relative date resolved). `CheckContext` is everything a check may read, computed once
per add: the messages as the extractor saw them, who the speakers are, what else the model was
shown, the names the entity extractor finds in a text (each text read once), and the lexicon of
the language (extraction/lexicon.py). pipeline.py runs the checks in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from ...store.records import NewMessage
from ..admission import Fact
from ..lexicon import ENGLISH, Lexicon
from ..speakers import PLAIN_NAME
from .content_words import WORD

Dropped = tuple[str, str]  # (fact text, why it was dropped)
SIDES = ("user", "assistant")


@dataclass(frozen=True)
class Speakers:
    """Who the two sides of a conversation are, as facts name them."""

    sides: dict[str, frozenset[str]]  # role -> its role word and its speakers' name words
    user_names: frozenset[str]  # the user side's full names; none when one is not a plain name

    @property
    def every(self) -> frozenset[str]:
        """Every word that names a side of the conversation."""
        return frozenset().union(*self.sides.values())

    @classmethod
    def of(cls, messages: Sequence[NewMessage]) -> Speakers:
        return cls({role: side_names(messages, role) for role in SIDES}, user_names(messages))


def side_names(messages: Sequence[NewMessage], role: str) -> frozenset[str]:
    """How a side of the conversation is named in facts: its role word and its speakers' names."""
    found = {role}
    for m in messages:
        if m.role == role and m.name:
            found |= {w.lower() for w in WORD.findall(m.name)}
    return frozenset(found)


def user_names(messages: Sequence[NewMessage]) -> frozenset[str]:
    """The names of the user-side speakers of `messages`; none when one is not a plain name
    (an id such as "user_42" is no name to write into a fact)."""
    names = {m.name.strip() for m in messages if m.role == "user" and m.name and m.name.strip()}
    return frozenset(names) if all(PLAIN_NAME.fullmatch(name) for name in names) else frozenset()


class _NamesOnce:
    """`people_in` with each text read once per add."""

    def __init__(self, people_in: Callable[[Sequence[str]], list[list[str]]]) -> None:
        self._people_in = people_in
        self._found: dict[str, list[str]] = {}

    def __call__(self, texts: Sequence[str]) -> list[list[str]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._found]
        if missing:
            self._found.update(zip(missing, self._people_in(missing), strict=True))
        return [list(self._found[t]) for t in texts]


def _no_verbs(sentences: Sequence[str]) -> list[str | None]:
    return [None for _ in sentences]


@dataclass(frozen=True)
class CheckContext:
    """What the checks of one add may read."""

    messages: Sequence[NewMessage]  # the plan's messages as the extractor saw them (speakers.py)
    shown: Sequence[int]  # plan indexes of the new messages the model was asked about
    seen: Sequence[str]  # the other texts it was shown: similar memories, recent messages
    stored: Sequence[NewMessage]  # the plan's messages as given (their dates)
    now: datetime  # the add's time: the date of a fact whose messages carry none
    # the names (people, places, organisations) in each text, from the entity extractor
    people_in: Callable[[Sequence[str]], list[list[str]]]
    lexicon: Lexicon = ENGLISH
    # the model calls of the add, as lists of plan indexes (planner.extraction_groups): a fact
    # is grounded among its own call's messages; empty: one call for all of `shown`
    groups: Sequence[Sequence[int]] = ()
    # the base-form verb each sentence opens with, else None (EntityExtractor.opening_verbs);
    # the default, without a tagger, finds none
    opening_verbs: Callable[[Sequence[str]], list[str | None]] = field(default=_no_verbs)
    speakers: Speakers = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "speakers", Speakers.of(self.messages))
        object.__setattr__(self, "people_in", _NamesOnce(self.people_in))


def said_by_named_speakers(fact: Fact, messages: Sequence[NewMessage]) -> bool:
    """Whether every source message of `fact` has a plain name for its speaker: a dialogue
    between people, where every fact can name whom it is about."""
    sources = [messages[i] for i in fact.sources]
    return bool(sources) and all(PLAIN_NAME.fullmatch((m.name or "").strip()) for m in sources)


class FactCheck(Protocol):
    """A check of the model's facts: those it keeps (possibly rewritten), and those it drops
    with the reason."""

    def check(
        self, facts: Sequence[Fact], context: CheckContext
    ) -> tuple[list[Fact], list[Dropped]]: ...
