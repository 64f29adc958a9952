"""The supersession check: which old memory a new fact makes no longer true, asked one pair at
a time.

The facts answer names no superseded memory. Measured on the side-by-side benchmark, the 1.5B
model's own "supersedes" list was mostly noise (a sourdough loaf superseding the user's job, a
friend's music taste superseding the user's cousin), each wrong name cost a check, and writing
the list cost ~6 generated tokens per fact (~0.3 s at one thread). Measured on
benchmarks/extraction (8 contradiction cases), it also missed real changes ("User's favourite
colour is green now." beside "...is blue.").

So after admission, each new fact is paired with the existing memory most similar to it that
shares a content word with it; when that pair is at least `CHECK_MIN_SIMILARITY` alike, the
model is asked one yes/no question: has the old memory changed? The answer is read as the
probability of "true" (`Extractor.choose`, one forward pass), and the old memory is superseded
only when it reaches CHANGE_THRESHOLD. At most `MAX_CHECKS` questions per add, most similar pairs
first.

The check prompt keeps the facts prompt's system message, so its first call finds that long
static prefix in llama.cpp's KV cache; after that each kind keeps its own cached sequence
(`kv_slots.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pinned.extractor import Extractor, Prompt
from ..store.records import MemoryRecord, NewMemory
from .admission import Admission
from .checks.content_words import same_subject, share_a_content_word, words_of
from .checks.grounding import closest_sentence
from .lexicon import ENGLISH, Lexicon
from .prompts import day, facts_system_prompt

# all-MiniLM-L6-v2 cosine of a new fact and an old memory at or above which the pair is checked.
# Real replacements score 0.49-0.79 ("Luna passed away" / "User has a cat named Luna" 0.49); added
# detail scores as high, which the question decides (docs/design/supersession-threshold.md).
CHECK_MIN_SIMILARITY = 0.45
MAX_CHECKS = 2  # questions per add: each costs about one to three seconds on two cores

# Asked as "changed", not "still true": the latter missed real changes such as "favourite colour
# is green now" (docs/design/supersession-threshold.md). Versions: CHANGELOG.md.
CHECK_PROMPT_VERSION = "check-2"
ANSWER_KEY = "changed"
CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {ANSWER_KEY: {"type": "boolean"}},
    "required": [ANSWER_KEY],
    "additionalProperties": False,
}
CHECK_MAX_TOKENS = 16

CHECK_QUESTION = """\
Compare an existing memory with a new fact. Answer "changed": true only when the new fact says \
the existing memory is no longer true (the user moved, changed job, changed a preference or a \
habit, a plan was cancelled or moved, a pet or person died, a relationship ended or began). \
When the new fact adds detail about the same person, pet or thing, the memory has not changed. \
Something that happened (a trip, a visit, a meal, a purchase) stays true: later news does not \
change it.

Examples:
Existing memory: User's phone is an iPhone 12. New fact: User switched to a Pixel 8. -> \
{{"changed": true}}
Existing memory: User has a son named Leo. New fact: Leo starts school in September. -> \
{{"changed": false}}
Existing memory: User's yoga class is on Tuesdays. New fact: User's yoga class moved to \
Wednesdays. -> {{"changed": true}}
Existing memory: User plays the piano. New fact: User's piano teacher is Ms. Ito. -> \
{{"changed": false}}
Existing memory: User had dinner with Marco at a Thai place on Friday. New fact: Marco moved \
to Rome. -> {{"changed": false}}

Existing memory (recorded {old_day}): {old}
New fact ({new_day}): {new}
Answer:"""


ANSWER_PREFIX = '{"' + ANSWER_KEY + '":'  # how the model starts its answer
OPTIONS = (" true", " false")  # and continues it (one token each for the pinned models)
# The greedy answer (P > 0.5) superseded mostly wrongly on real dialogue; at 0.7 "favourite colour
# is green now" (0.75 a week after "blue") still supersedes while most added details do not.
# Measured: docs/design/supersession-threshold.md (benchmarks/results/check_threshold.json).
CHANGE_THRESHOLD = 0.7


def changed_probability(extractor: Extractor, prompt: Prompt) -> float:
    """How likely the model finds "changed": true (normalised against false)."""
    return extractor.choose(prompt, ANSWER_PREFIX, OPTIONS)[OPTIONS[0]]


def interpret(answer: dict[str, Any]) -> bool:
    """True when the old memory is still true."""
    return answer.get(ANSWER_KEY) is not True


@dataclass(frozen=True)
class CheckPair:
    memory: int  # index into Admission.memories
    shown: int  # index into the existing memories it is checked against
    similarity: float


def pairs_to_check(
    memories: Sequence[NewMemory],
    existing: Sequence[MemoryRecord],
    existing_vectors: np.ndarray,
    names: frozenset[str] = frozenset(),
    lexicon: Lexicon = ENGLISH,
    may_change: Sequence[bool] | None = None,
) -> list[CheckPair]:
    """Each new memory (those `may_change` allows, all when None) with its most similar
    existing memory that shares a content word with it (`names`, the speakers' names, do not
    count), is about the same subject ("<name>'s father passed away" ends nothing of
    "<name>'s mother", measured on the dev set) and was said by the same speaker when both
    speakers are named; pairs below the floor
    dropped; at most MAX_CHECKS, most similar first; an old memory is checked once."""
    if not len(existing):
        return []
    candidates = []
    matrix = np.asarray(existing_vectors, dtype=np.float32)
    for index, memory in enumerate(memories):
        if may_change is not None and not may_change[index]:
            continue
        similar = matrix @ np.asarray(memory.vector, dtype=np.float32)
        for j in np.argsort(-similar, kind="stable"):
            old = existing[int(j)]
            if (
                same_speaker(memory.actor_id, old.actor_id)
                and same_subject(memory.text, old.text, lexicon)
                and share_a_content_word(memory.text, old.text, names, lexicon)
            ):
                candidates.append(CheckPair(index, int(j), float(similar[int(j)])))
                break
    candidates.sort(key=lambda p: (-p.similarity, p.memory))
    chosen: list[CheckPair] = []
    checked: set[int] = set()
    for pair in candidates:
        if pair.similarity < CHECK_MIN_SIMILARITY or pair.shown in checked:
            continue
        chosen.append(pair)
        checked.add(pair.shown)
        if len(chosen) == MAX_CHECKS:
            break
    return chosen


def same_speaker(new: str | None, old: str | None) -> bool:
    """Whether a new fact may say an old one changed, as far as their speakers go: one person's
    news does not end another's fact (one person's allergy ending the other's was always wrong on
    real dialogue: docs/design/supersession-threshold.md). Unnamed speakers (an application's
    user) always may."""
    return new is None or old is None or new.strip().casefold() == old.strip().casefold()


def states_a_change(text: str, lexicon: Lexicon = ENGLISH) -> bool:
    """Whether a message says that something changed ("moved", "quit", "no longer", "now",
    "passed away"): the lexicon's change words. Only such a message's facts are checked against
    the old memories; the word must be in the sentence the fact comes from
    (`check_supersessions`). On real dialogue the check's supersessions without a change word
    were all wrong, and every hand-written change has one
    (docs/design/supersession-threshold.md)."""
    return not lexicon.change_words.isdisjoint(words_of(text))


def build_check_prompt(
    old: MemoryRecord, new: NewMemory, *, now_day: str | None, instructions: str | None
) -> Prompt:
    question = CHECK_QUESTION.format(
        old=old.text,
        old_day=day(old.observed_at or old.created_at) or "unknown date",
        new=new.text,
        new_day=day(new.observed_at) or now_day or "today",
    )
    return Prompt(
        kind="check",
        messages=(
            {"role": "system", "content": facts_system_prompt(instructions)},
            {"role": "user", "content": question},
        ),
        schema=CHECK_SCHEMA,
        max_tokens=CHECK_MAX_TOKENS,
    )


def check_supersessions(
    extractor: Extractor,
    admission: Admission,
    existing: Sequence[MemoryRecord],
    existing_vectors: np.ndarray,
    *,
    now_day: str | None,
    instructions: str | None,
    names: frozenset[str] = frozenset({"user", "assistant"}),
    lexicon: Lexicon = ENGLISH,
    said: Sequence[str] | None = None,
) -> int:
    """Ask about each chosen pair of a new memory and an existing one (`existing`, with
    their embeddings) and record the supersessions found in `admission` (its memories and its
    Mem0-shaped results). `said[i]` is the text of the messages i of the add's plan: a memory
    is checked only when the sentence of its source messages closest to it `states_a_change`
    (all are, when None).
    Returns how many were found. An ExtractionError propagates: the add fails and nothing is
    written."""
    may_change = None
    if said is not None:
        may_change = [
            states_a_change(
                closest_sentence(m.text, [said[i] for i in m.source_messages], names, lexicon),
                lexicon,
            )
            for m in admission.memories
        ]
    found = 0
    chosen = pairs_to_check(
        admission.memories, existing, existing_vectors, names, lexicon, may_change
    )
    for pair in chosen:
        old, memory = existing[pair.shown], admission.memories[pair.memory]
        prompt = build_check_prompt(old, memory, now_day=now_day, instructions=instructions)
        if changed_probability(extractor, prompt) >= CHANGE_THRESHOLD:
            admission.record_supersession(pair.memory, old)
            found += 1
    return found
