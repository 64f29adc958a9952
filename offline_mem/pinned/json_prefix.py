"""The complete part of a JSON answer cut short.

An answer decoded under a JSON grammar that runs into its token limit is a valid prefix of JSON
that never closes. Measured on the dev set: 2 of 383 adds failed that way, each a single runaway
fact, and the facts the model had finished before it were lost with the add. `complete_prefix`
keeps every value that was finished before the cut and closes the containers left open, so the
complete facts survive and the unfinished one is dropped.
"""

from __future__ import annotations

import json
from typing import Any


def complete_prefix(text: str) -> Any | None:
    """The JSON value made of `text`'s finished parts, the open containers closed (the root
    alone, empty, when nothing in it was finished); None when `text` is no JSON prefix. A
    string or container is finished at its closing character, any value (a number too) once a
    comma follows it."""
    stack: list[str] = []  # "{" or "[" of each open container
    expecting_key = False  # inside an object, between members: the next string is a key
    in_string = escaped = False
    cut: tuple[int, str] | None = None  # (end of the last finished value, what closes it)
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if stack and stack[-1] == "{" and expecting_key:
                    expecting_key = False  # a key: its value is still to come
                else:
                    cut, expecting_key = _finished(i + 1, stack)
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
            expecting_key = char == "{"
        elif char in "}]":
            if not stack or stack.pop() != {"}": "{", "]": "["}[char]:
                return None
            cut, expecting_key = _finished(i + 1, stack)
            if not stack:
                break
        elif char == "," and stack:  # whatever came before a comma was finished (a number too)
            cut, expecting_key = _finished(i, stack)
    if cut is None:
        # cut inside the first value: the root, opened and still open, is kept empty
        opened = text.lstrip()[:1]
        return ({} if opened == "{" else []) if stack and opened in "{[" else None
    end, closers = cut
    try:
        return json.loads(text[:end] + closers)
    except ValueError:
        return None


def _finished(end: int, stack: list[str]) -> tuple[tuple[int, str], bool]:
    """A value ends at `end` inside the containers of `stack`: the cut that keeps it, and
    whether a key comes next."""
    closers = "".join("}" if c == "{" else "]" for c in reversed(stack))
    return (end, closers), bool(stack) and stack[-1] == "{"
