"""Who said a message: its `name`, else a leading "Name: " in its content, else its role.

Transcripts of conversations between named people often reach a memory layer as plain text,
each message's content starting with its speaker ("Name: I went to the pottery class
yesterday"). Read as the user's own words, such a turn credits one person's life to the other.
So, for extraction, a message without a `name` whose content starts with a name and a colon is
shown as said by that name, without the prefix.

A prefix counts only when the transcript is written that way: at least two of the messages in
view (the new ones and the scope's recent ones) start with one. A lone "Note: buy milk" is not
a speaker called Note. A name is one to three words, each a capital letter followed by
lowercase letters (no digits, no all-caps labels). The stored message keeps its content as given;
only what the extractor sees (and the speaker names used to check its facts) changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

_PREFIX = re.compile(
    r"^\s*(?P<name>[^\W\d_]+(?:[ '’-][^\W\d_]+){0,2})\s*:\s+(?P<rest>\S.*)$", re.DOTALL
)
_NAME_PARTS = re.compile(r"[ '’-]")
MIN_PREFIXED = 2  # messages in view that must start with a name before prefixes count
# A name that can be written into a fact: letters, joined by single spaces, apostrophes or
# hyphens (an id such as "user_42" is no name to write into a fact).
PLAIN_NAME = re.compile(r"[^\W\d_]+(?:[ '-][^\W\d_]+)*")


class _Named(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def content(self) -> str: ...


M = TypeVar("M", bound=_Named)


def _is_name_word(word: str) -> bool:
    return word[0].isupper() and (len(word) == 1 or word[1:].islower())


def leading_name(content: str) -> tuple[str, str] | None:
    """("Name", rest) when `content` starts with a name and a colon, else None."""
    match = _PREFIX.match(content)
    if match is None:
        return None
    name = match.group("name")
    if not all(_is_name_word(word) for word in _NAME_PARTS.split(name) if word):
        return None
    return name, match.group("rest").strip()


def transcript_uses_prefixes(contents: Sequence[str]) -> bool:
    """Whether the messages in view are written "Name: text" (at least MIN_PREFIXED are)."""
    return sum(1 for c in contents if leading_name(c) is not None) >= MIN_PREFIXED


def with_speakers(messages: Sequence[M], context: Sequence[str] = ()) -> list[M]:
    """The messages as the extractor should see them: a message without a `name` whose content
    starts with "Name: " gets that name and loses the prefix, when the messages and `context`
    (the contents of the scope's recent messages) are a "Name: text" transcript."""
    if not transcript_uses_prefixes([m.content for m in messages] + list(context)):
        return list(messages)
    named = []
    for message in messages:
        found = None if message.name else leading_name(message.content)
        if found is None:
            named.append(message)
        else:
            name, rest = found
            named.append(replace(message, name=name, content=rest))  # type: ignore[type-var]
    return named
