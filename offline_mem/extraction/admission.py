"""Admission: the model's answer turned into memories to write. Pure: no I/O, no model calls.

Two steps, with the embedding done by the caller in between:

1. `read_facts` checks the answer item by item (the grammar already guarantees its shape; this
   guards the guarantee): texts trimmed, empty texts dropped, message numbers mapped back to plan
   indexes, anything out of range dropped.
2. `admit` merges exact duplicates (the MD5 of the text, as Mem0, against the scope's active
   memories and the batch) and near-duplicates (cosine similarity of the embeddings at or above
   `NEAR_DUPLICATE_THRESHOLD`, against the scope's memories most similar to the new messages and the
   batch, among those about the same subject) into the memory that says it already: no second
   memory, but that memory gains the new messages as sources (a MERGE history row for a stored
   one), so what was said twice is recorded as said twice. It builds the `NewMemory` and
   `MergedFact` objects and Mem0-shaped result items.

Which old memory a new fact supersedes is not the model's answer: it is asked afterwards, one
pair at a time (`supersession.py`), and recorded with `Admission.record_supersession`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..store.records import MemoryRecord, MergedFact, NewMemory, NewMessage, keyword_text
from ..values import content_hash
from .checks.content_words import same_subject

# all-MiniLM-L6-v2 cosine similarity at or above which two facts say the same thing. Measured on
# the extraction benchmark: rephrasings such as "User lives in Porto." / "User lives in Porto,
# Portugal." score 0.93-0.99, while facts that differ in one value ("lives in Porto" / "lives in
# Lisbon") score 0.75-0.90 and must both survive (one may supersede the other).
NEAR_DUPLICATE_THRESHOLD = 0.95

ATTRIBUTIONS = ("user", "assistant")


@dataclass(frozen=True)
class Fact:
    """One fact of the model's answer, checked and mapped back to real references."""

    text: str
    attributed_to: str | None
    sources: tuple[int, ...]  # indexes into the plan's messages


@dataclass
class Admission:
    memories: list[NewMemory] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (text, reason)
    merges: list[MergedFact] = field(default_factory=list)  # into stored memories

    def merge_into_stored(
        self, memory_id: str, text: str, fact: Fact, ctx: AdmissionContext
    ) -> None:
        """`fact` says what stored memory `memory_id` (whose text is `text`) says."""
        for at, merge in enumerate(self.merges):
            if merge.memory_id == memory_id:  # a second fact of this add merged into it
                sources = sorted({*merge.source_messages, *fact.sources})
                self.merges[at] = replace(merge, source_messages=sources)
                return
        self.merges.append(MergedFact(memory_id=memory_id, text=fact.text,
                                      source_messages=list(fact.sources),
                                      happened=_latest_date(fact, ctx)))  # fmt: skip
        self.results.append({"id": memory_id, "memory": text, "event": "MERGE",
                             "merged": fact.text})  # fmt: skip

    def merge_into_new(self, index: int, fact: Fact) -> None:
        """`fact` says what memories[index], new in this add, says: it gains the sources."""
        memory = self.memories[index]
        sources = sorted({*memory.source_messages, *fact.sources})
        self.memories[index] = replace(memory, source_messages=sources)

    def record_supersession(self, index: int, old: MemoryRecord) -> None:
        """memories[index] supersedes `old`: mark it, and add the SUPERSEDE row after the
        memory's ADD row, with the ADD row listing it (the shape `admit` produces)."""
        memory = replace(
            self.memories[index], supersedes=[*self.memories[index].supersedes, old.id]
        )
        self.memories[index] = memory
        at = next(i for i, r in enumerate(self.results) if r["id"] == memory.id)
        self.results[at]["supersedes"] = list(memory.supersedes)
        while at + 1 < len(self.results) and self.results[at + 1]["event"] == "SUPERSEDE":
            at += 1
        row = {"id": old.id, "memory": old.text, "event": "SUPERSEDE", "superseded_by": memory.id}
        self.results.insert(at + 1, row)


def _clean_text(value: object) -> str:
    """Whitespace collapsed; text with no UTF-8 form (a lone surrogate from a JSON escape) or a
    NUL is not a fact we can store, so it becomes empty and is dropped."""
    if not isinstance(value, str) or "\x00" in value:
        return ""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return ""
    return " ".join(value.split())


def read_facts(
    answer: Mapping[str, Any],
    *,
    shown_messages: Sequence[int],
    roles: Sequence[str],
    first: int = 1,
) -> list[Fact]:
    """The answer's facts: it maps the number of a new message to the facts it states; the
    prompt numbered the new messages from `first`, and `shown_messages[n]` is the plan index of
    the call's message n (0-based); `roles[i]` is the role of plan
    message i. A fact is attributed to the side that said its message: the answer carries no
    speaker of its own, which saves generated tokens (`ground_facts` corrects the message)."""
    facts = []
    for key, raw in answer.items():
        number = int(key) if isinstance(key, str) and key.isascii() and key.isdigit() else -1
        if not first <= number < first + len(shown_messages) or not isinstance(raw, list):
            continue
        source = shown_messages[number - first]
        side = roles[source] if roles[source] in ATTRIBUTIONS else None
        for item in raw:
            text = _clean_text(item)
            if text:
                facts.append(Fact(text=text, attributed_to=side, sources=(source,)))
    return facts


@dataclass(frozen=True)
class AdmissionContext:
    """What admission needs to know about the scope and the call."""

    messages: Sequence[NewMessage]  # the plan's messages
    # embeddings of the scope's memories most similar to the new messages (`existing_memories`)
    existing_vectors: np.ndarray
    # the scope's active memories with the hash of a candidate fact: hash -> memory id
    existing_hashes: Mapping[str, str]
    metadata: Mapping[str, Any]
    expiration_date: str | None = None
    new_id: Callable[[], str] = lambda: str(uuid.uuid4())
    # the memories whose embeddings `existing_vectors` holds, in its order
    existing: Sequence[MemoryRecord] = ()


def admit(facts: Sequence[Fact], vectors: np.ndarray, ctx: AdmissionContext) -> Admission:
    """Decide which facts become memories and which merge into one that says the same thing;
    `vectors[i]` is the unit embedding of facts[i]."""
    out = Admission()
    kept_hashes: dict[str, int] = {}  # hash -> index into out.memories
    kept_vectors: list[np.ndarray] = []
    for fact, vector in zip(facts, vectors, strict=True):
        digest = content_hash(fact.text)
        if digest in ctx.existing_hashes:
            out.merge_into_stored(ctx.existing_hashes[digest], fact.text, fact, ctx)
            continue
        if digest in kept_hashes:
            out.merge_into_new(kept_hashes[digest], fact)
            continue
        existing = _similarities(vector, ctx.existing_vectors)
        if ctx.existing:
            existing = _same_subject_only(fact.text, [r.text for r in ctx.existing], existing)
        batch = _similarities(vector, np.asarray(kept_vectors)) if kept_vectors else existing[:0]
        batch = _same_subject_only(fact.text, [m.text for m in out.memories], batch)
        best_existing, best_batch = existing.max(initial=-1.0), batch.max(initial=-1.0)
        if max(best_existing, best_batch) >= NEAR_DUPLICATE_THRESHOLD:
            if best_batch >= best_existing:
                out.merge_into_new(int(batch.argmax()), fact)
            elif ctx.existing:
                same = ctx.existing[int(existing.argmax())]
                out.merge_into_stored(same.id, same.text, fact, ctx)
            else:  # vectors without their records (a caller that passes none): nothing to cite
                out.dropped.append((fact.text, "near duplicate"))
            continue
        memory = _new_memory(fact, digest, vector, ctx)
        kept_hashes[digest] = len(out.memories)
        kept_vectors.append(vector)
        out.memories.append(memory)
        out.results.append({"id": memory.id, "memory": memory.text, "event": "ADD"})
    return out


def _latest_date(fact: Fact, ctx: AdmissionContext) -> str | None:
    stamps = [ctx.messages[i].observed_at for i in fact.sources]
    known = [s for s in stamps if s is not None]
    return max(known) if known else None


def _same_subject_only(text: str, others: Sequence[str], similarities: np.ndarray) -> np.ndarray:
    """`similarities` with those of facts about another subject set to -1: "Ana thanks Rui for
    his help" and "Rui thanks Ana for her help" embed within 0.95 of each other (measured: a
    MERGE of the two on the dev set) but are two facts."""
    keep = np.array([same_subject(text, other) for other in others], dtype=bool)
    return np.where(keep, similarities, np.float32(-1.0)) if len(others) else similarities


def _similarities(vector: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    if matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(matrix, dtype=np.float32) @ np.asarray(vector, dtype=np.float32)


def _new_memory(fact: Fact, digest: str, vector: np.ndarray, ctx: AdmissionContext) -> NewMemory:
    sources = [ctx.messages[i] for i in fact.sources]
    speakers = {m.name for m in sources if m.role == fact.attributed_to and m.name is not None}
    stamps = [m.observed_at for m in sources if m.observed_at is not None]
    return NewMemory(
        id=ctx.new_id(),
        text=fact.text,
        hash=digest,
        vector=vector,
        keyword_text=keyword_text(fact.text),
        metadata=dict(ctx.metadata),
        actor_id=speakers.pop() if len(speakers) == 1 else None,
        attributed_to=fact.attributed_to,
        observed_at=max(stamps) if stamps else None,
        expiration_date=ctx.expiration_date,
        source_messages=list(fact.sources),
        supersedes=[],
    )
