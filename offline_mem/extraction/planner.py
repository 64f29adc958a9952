"""The planner of an `add` with inference: read the scope, ask the extractor, admit, and
return one write plan.

Nothing here writes: the caller applies the returned `AddPlan` in one transaction. When the
extractor fails, `ExtractionError` propagates before any write, so the file is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from ..pinned.embedder import Embedder
from ..pinned.entities import EntityExtractor
from ..pinned.extractor import ExtractionOutput, Extractor
from ..store.filters import compile_filters
from ..store.interface import ExtractionStore
from ..store.records import (
    AddPlan,
    MemoryRecord,
    MessageRecord,
    NewMemory,
    NewMessage,
    keyword_text,
)
from ..values import Scope, content_hash
from .admission import AdmissionContext, Fact, admit, read_facts
from .checks.base import CheckContext
from .checks.grounding import NAME_KINDS
from .checks.pipeline import check_facts
from .lexicon import ENGLISH, Lexicon
from .procedural import PROCEDURAL_PROMPT_VERSION, build_procedural_prompt, render_summary
from .prompts import (
    MAX_EXISTING,
    PROMPT_VERSION,
    PromptMessage,
    day,
    fact_subject,
    first_new_number,
    recent_window_start,
)
from .prompts import build_facts_prompt as build_prompt
from .speakers import with_speakers
from .supersession import check_supersessions


@dataclass(frozen=True)
class Models:
    embedder: Embedder
    extractor: Extractor
    entities: EntityExtractor
    lexicon: Lexicon = ENGLISH  # the words the fact checks know (the spaCy pipeline's language)


@dataclass(frozen=True)
class AddRequest:
    scope: Scope
    messages: Sequence[NewMessage]  # every message of the call, stored as given
    metadata: dict[str, Any]
    expiration_date: str | None
    instructions: str | None  # the call's `prompt`, else the config's custom_instructions
    now: datetime
    # An async add's job runs after its messages were stored: the scope's messages stored
    # before this seq are its context, as they were for a synchronous add (None: all of them).
    context_before: int | None = None


def _prompt_message(message: NewMessage | MessageRecord) -> PromptMessage:
    return PromptMessage(
        role=message.role, content=message.content, name=message.name,
        observed_at=message.observed_at,
    )  # fmt: skip


def existing_memories(
    store: ExtractionStore, embedder: Embedder, scope: Scope, texts: Sequence[str], now: datetime
) -> list[MemoryRecord]:
    """Up to MAX_EXISTING active, unexpired memories of the scope most similar to the new
    messages, in the order they were written: where a fact said again is merged and what a fact
    supersedes is sought. The prompt does not show them (prompts.py says why)."""
    where = compile_filters({k: v for k, v in scope.as_dict().items() if v is not None})
    query = embedder.embed("\n".join(texts))
    condition = store.search_filter(where, now=now)
    hits = store.vector_candidates(query, where, condition, k=MAX_EXISTING)
    return sorted(
        store.records_by_rowid(list(hits)).values(), key=lambda r: (r.created_at, r.rowid)
    )


REPRODUCIBLE_SUFFIX = "+reproducible"


def recorded_version(prompt_version: str, extractor: Extractor) -> str:
    """The prompt version a memory records, marked when the extractor ran in reproducible mode
    (every prompt evaluated from scratch), so an audit can tell which memories are replayable."""
    return prompt_version + (REPRODUCIBLE_SUFFIX if extractor.reproducible else "")


def plan_facts(
    store: ExtractionStore, models: Models, request: AddRequest
) -> tuple[AddPlan, list[dict[str, Any]], ExtractionOutput | None]:
    """The plan and Mem0-shaped results of an infer=True add, and the model call's figures."""
    shown = [
        i for i, m in enumerate(request.messages)
        if m.role != "system" and m.extract and m.content.strip()
    ]  # fmt: skip
    plan = AddPlan(
        scope=request.scope, messages=list(request.messages), memories=[],
        embedder_sha256=models.embedder.identity.sha256,
        extractor_sha256=models.extractor.identity.sha256,
        prompt_version=recorded_version(PROMPT_VERSION, models.extractor),
    )  # fmt: skip
    if not shown:
        return plan, [], None
    before = request.context_before
    count = store.message_count(request.scope, before=before)
    stored_recent = store.recent_messages(
        request.scope, count - recent_window_start(count), before=before
    )
    # who said each message, as the extractor sees it (speakers.py); the stored ones keep theirs
    messages = with_speakers(request.messages, [m.content for m in stored_recent])
    recent = with_speakers(stored_recent, [m.content for m in request.messages])
    roles = [m.role for m in messages]
    facts: list[Fact] = []
    outputs: list[ExtractionOutput] = []
    seen_records: dict[str, MemoryRecord] = {}
    groups = extraction_groups(messages, shown)
    for group in groups:
        # the add's earlier messages are context for a later group, as if already stored
        earlier = [messages[i] for i in shown if i < group[0]]
        prompt_recent: list[NewMessage | MessageRecord] = [*recent, *earlier]
        texts = [messages[i].content for i in group]
        found = existing_memories(store, models.embedder, request.scope, texts, request.now)
        seen_records.update((r.id, r) for r in found)
        prompt = build_prompt(
            new_messages=[_prompt_message(messages[i]) for i in group],
            recent=[_prompt_message(m) for m in prompt_recent],
            now=request.now,
            instructions=request.instructions,
        )
        outputs.append(models.extractor.extract(prompt))
        first = first_new_number(prompt)
        facts += read_facts(outputs[-1].data, shown_messages=group, roles=roles, first=first)
    output = _combined(outputs)
    seen = sorted(seen_records.values(), key=lambda r: (r.created_at, r.rowid))
    # The prompt shows the memories a read of these ids would return (a user's includes those
    # of the user's agents and runs, as Mem0's add shows them), but a fact merges into or
    # supersedes only a memory of exactly this scope: a link across scopes would survive the
    # other scope's delete_all and break the rule `verify` and `import` hold the file to.
    old = [r for r in seen if same_scope(r, request.scope)]
    checks = CheckContext(
        messages=messages, shown=shown, groups=groups,
        seen=[r.text for r in seen] + [m.content for m in recent],
        stored=request.messages, now=request.now,
        people_in=lambda texts: _names_in(models.entities, texts), lexicon=models.lexicon,
        opening_verbs=models.entities.opening_verbs,
    )  # fmt: skip
    facts, dropped = check_facts(facts, checks)
    if not facts:
        return plan, [], output
    vectors = models.embedder.embed_batch([f.text for f in facts] + [r.text for r in old])
    hashes = store.hashes_in_scope(request.scope, [content_hash(f.text) for f in facts])
    context = AdmissionContext(
        messages=messages, existing_vectors=vectors[len(facts) :], existing_hashes=hashes,
        metadata=request.metadata, expiration_date=request.expiration_date, existing=old,
    )  # fmt: skip
    admission = admit(facts, vectors[: len(facts)], context)
    admission.dropped.extend(dropped)
    check_supersessions(
        models.extractor, admission, old, vectors[len(facts) :],
        now_day=day(request.now), instructions=request.instructions,
        names=checks.speakers.every, lexicon=models.lexicon, said=[m.content for m in messages],
    )  # fmt: skip
    plan = replace(plan, memories=list(admission.memories), merges=list(admission.merges))
    return plan, admission.results, output


def same_scope(record: MemoryRecord, scope: Scope) -> bool:
    """Whether the memory's ids are exactly the scope's (None where the scope has none)."""
    return (record.user_id, record.agent_id, record.run_id) == (
        scope.user_id, scope.agent_id, scope.run_id
    )  # fmt: skip


def extraction_groups(messages: Sequence[NewMessage], shown: Sequence[int]) -> list[list[int]]:
    """The model calls of an add, as lists of plan indexes: one per message when the new
    messages come from two or more named speakers, else one for all of them.

    Asked for the facts of two named speakers' messages at once, the 1.5B model filed nearly
    every fact under the first message; one message at a time, with the earlier ones as context
    (`prompts.fact_subject`), answered better (docs/design/fact-checks.md)."""
    subjects = {fact_subject(_prompt_message(messages[i])) for i in shown}
    if len(subjects - {None}) >= 2:
        return [[i] for i in shown]
    return [list(shown)]


def _combined(outputs: Sequence[ExtractionOutput]) -> ExtractionOutput:
    """One add's model calls as one output: answers side by side, figures summed."""
    if len(outputs) == 1:
        return outputs[0]
    return ExtractionOutput(
        data={str(n): o.data for n, o in enumerate(outputs, start=1)},
        text="\n".join(o.text for o in outputs),
        prompt_tokens=sum(o.prompt_tokens for o in outputs),
        cached_tokens=sum(o.cached_tokens for o in outputs),
        completion_tokens=sum(o.completion_tokens for o in outputs),
        guessed_tokens=sum(o.guessed_tokens for o in outputs),
        seconds=sum(o.seconds for o in outputs),
        truncated=any(o.truncated for o in outputs),
    )


def _names_in(entities: EntityExtractor, texts: Sequence[str]) -> list[list[str]]:
    return [
        [m.name for m in mentions if m.kind in NAME_KINDS]
        for mentions in entities.extract_batch(texts)
    ]


def plan_procedural(
    store: ExtractionStore, models: Models, request: AddRequest
) -> tuple[AddPlan, list[dict[str, Any]], ExtractionOutput]:
    """One summary memory of an agent's run; `request.instructions` replaces the system prompt."""
    plan = AddPlan(
        scope=request.scope, messages=list(request.messages), memories=[],
        embedder_sha256=models.embedder.identity.sha256,
        extractor_sha256=models.extractor.identity.sha256,
        prompt_version=recorded_version(PROCEDURAL_PROMPT_VERSION, models.extractor),
    )  # fmt: skip
    prompt = build_procedural_prompt(
        [_prompt_message(m) for m in request.messages if m.content.strip()],
        system_prompt=request.instructions,
    )
    output = models.extractor.extract(prompt)
    text = render_summary(output.data)
    digest = content_hash(text)
    if not text or store.hashes_in_scope(request.scope, [digest]):
        return plan, [], output
    vector: np.ndarray = models.embedder.embed(text)
    memory = NewMemory(
        id=_new_id(), text=text, hash=digest, vector=vector, keyword_text=keyword_text(text),
        metadata=dict(request.metadata), role="assistant", attributed_to="assistant",
        memory_type="procedural_memory", observed_at=_latest(request.messages),
        expiration_date=request.expiration_date,
        source_messages=list(range(len(request.messages))),
    )  # fmt: skip
    return (
        replace(plan, memories=[memory]),
        [{"id": memory.id, "memory": text, "event": "ADD"}],
        output,
    )


def _latest(messages: Sequence[NewMessage]) -> str | None:
    stamps = [m.observed_at for m in messages if m.observed_at is not None]
    return max(stamps) if stamps else None


def _new_id() -> str:
    import uuid

    return str(uuid.uuid4())
