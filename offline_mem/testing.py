"""Fakes for fast tests of the API: real subclasses of the model interfaces, deterministic,
with a record of every call, and the context a fact check reads (`check_context`). Real models
are exercised by their own tests."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone

import numpy as np

from .extraction.checks.base import CheckContext
from .pinned.embedder import Embedder, normalize_rows
from .values import EmbedderIdentity

_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder(Embedder):
    """Hashes words (and their 4-letter prefixes, a crude stem) into a fixed-size vector, so
    texts that share words are near each other. Records every batch in `calls`."""

    def __init__(self, dimension: int = 384, name: str = "fake-embedder") -> None:
        digest = hashlib.sha256(f"{name}:{dimension}".encode()).hexdigest()
        self.identity = EmbedderIdentity(name=name, sha256=digest, dimension=dimension)
        self.calls: list[list[str]] = []

    def _bucket(self, token: str) -> int:
        return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        dim = self.identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                for token in (word, "p:" + word[:4]):
                    bucket = self._bucket(token)
                    out[row, bucket % dim] += 1.0 if (bucket >> 32) & 1 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0
        return normalize_rows(out)


# -- extraction fakes (appended for the extraction issue) -------------------------------------

from collections.abc import Callable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

from .extraction.prompts import first_new_number  # noqa: E402
from .pinned.entities import EntityExtractor, unique_mentions  # noqa: E402
from .pinned.entities import _mention as _entity_mention  # noqa: E402
from .pinned.extractor import ExtractionOutput, Extractor, ExtractorIdentity, Prompt  # noqa: E402
from .store.records import NewMessage  # noqa: E402
from .values import EntityMention  # noqa: E402

Script = dict[str, Any] | BaseException | Callable[[Prompt], dict[str, Any]]


class FakeExtractor(Extractor):
    """Answers from a script, in order: each item is the answer dict, an exception to raise, or a
    function of the prompt. When the script runs out it answers {} (for a procedural prompt, an
    empty summary). Every prompt is recorded in `calls`."""

    def __init__(
        self,
        *script: Script,
        name: str = "fake-extractor",
        still_true: Callable[[Prompt], bool] | None = None,
    ) -> None:
        digest = hashlib.sha256(name.encode()).hexdigest()
        self.identity = ExtractorIdentity(name=name, sha256=digest)
        self.script = list(script)
        self.calls: list[Prompt] = []
        # Supersession checks are answered by `still_true` and recorded apart, so scripts of
        # facts answers are not consumed by them. By default nothing changed (see `changes`).
        self.still_true = still_true or (lambda prompt: True)
        self.check_calls: list[Prompt] = []
        self.closed = False

    def extract(self, prompt: Prompt) -> ExtractionOutput:
        if prompt.kind == "check":
            self.check_calls.append(prompt)
            answer = {"changed": not self.still_true(prompt)}
            return ExtractionOutput(data=answer, text=json.dumps(answer))
        self.calls.append(prompt)
        if not self.script:
            empty: dict[str, Any] = {} if prompt.kind == "facts" else {"steps": []}
            return ExtractionOutput(data=empty, text=json.dumps(empty))
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        data = item(prompt) if callable(item) else item
        if prompt.kind == "facts":  # scripts number the call's new messages 1, 2, ...
            data = _numbered_as_prompt(data, first_new_number(prompt))
        return ExtractionOutput(data=dict(data), text=json.dumps(data, ensure_ascii=False))

    def close(self) -> None:
        self.closed = True


def _numbered_as_prompt(data: Mapping[str, Any], first: int) -> dict[str, Any]:
    """A scripted facts answer keyed as the model keys it: the prompt numbers the conversation's
    messages, so the call's new message n is number first + n - 1 there. Keys that are not
    numbers stay as they are (hostile-answer tests)."""
    return {
        str(int(key) + first - 1) if isinstance(key, str) and key.isdigit() else key: value
        for key, value in data.items()
    }


def new_message_lines(prompt: Prompt) -> list[str]:
    """The lines of a facts prompt's conversation that are its new messages, without their
    numbers ("user (<name>): I moved."; a line that opens a new day starts with its date)."""
    first = first_new_number(prompt)
    count = len(prompt.schema.get("properties", {}))
    conversation = prompt.messages[-1]["content"].split("\n\nNew message", 1)[0]
    numbered = dict(_NUMBERED_LINE.findall(conversation))
    return [numbered[str(n)] for n in range(first, first + count)]


_NUMBERED_LINE = re.compile(r"^(\d+)\. (.*)$", re.MULTILINE)


def answer(*facts: str | tuple[int, str]) -> dict[str, list[str]]:
    """A facts answer in the extractor's format, for scripting a FakeExtractor: each fact is its
    text (stated in new message 1) or (message number, text)."""
    out: dict[str, list[str]] = {}
    for item in facts:
        number, text = item if isinstance(item, tuple) else (1, item)
        out.setdefault(str(number), []).append(text)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def changed_when(changed: Callable[[str, str], bool]) -> Callable[[Prompt], bool]:
    """A FakeExtractor's `still_true`: the supersession check answers "changed" when
    `changed(old memory, new fact)` is true."""

    def still_true(check: Prompt) -> bool:
        found = _CHECK_PAIR.search(check.messages[-1]["content"])
        return found is None or not changed(found.group(1), found.group(2))

    return still_true


def changes(*pairs: tuple[str, str]) -> Callable[[Prompt], bool]:
    """A FakeExtractor's `still_true`: "changed" exactly for these (old memory, new fact)."""
    return changed_when(lambda old, new: (old, new) in pairs)


_CHECK_PAIR = re.compile(r"Existing memory \(recorded .*?\): (.*)\nNew fact \(.*?\): (.*)\n")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")


class FakeEntities(EntityExtractor):
    """Capitalised word runs are entities (kind "PROPER"); no model. Records every batch."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def extract_batch(self, texts: Sequence[str]) -> list[list[EntityMention]]:
        self.calls.append(list(texts))
        return [
            unique_mentions(_entity_mention(m.group(0), "PROPER") for m in _CAPITALISED.finditer(t))
            for t in texts
        ]


def check_context(*messages: tuple[str | None, str, str], **changes: Any) -> CheckContext:
    """What a fact check reads for an add of `messages` ((name, role, content), every one new and
    shown to the model), with no entity names found; `changes` replace any other field."""
    plan = [
        NewMessage(id=str(i), role=role, name=name, observed_at=None, content=content)
        for i, (name, role, content) in enumerate(messages)
    ]
    values: dict[str, Any] = {
        "messages": plan, "shown": list(range(len(plan))), "seen": [], "stored": plan,
        "now": datetime(2025, 5, 1, tzinfo=timezone.utc),
        "people_in": lambda texts: [[] for _ in texts],
    }  # fmt: skip
    return CheckContext(**(values | changes))
