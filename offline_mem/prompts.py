"""The fact-extraction prompt and the schema of its answer. Pure: no I/O, no clock.

Layout, most stable first, so that llama.cpp's KV cache serves the longest possible prefix:
the static instructions and examples (identical on every call), then the caller's custom
instructions (fixed for a `Memory`), then the dates (change once a day), then the scope's recent
messages, the existing memories under small integer aliases, and last the new messages.
The model never sees a real memory id: only the aliases 0..9, mapped back by admission.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .extractor import Prompt

PROMPT_VERSION = "facts-2"

MAX_FACTS = 6  # facts per answer (two messages rarely hold more)
MAX_FACT_CHARS = 200
MAX_REFS = 6  # message numbers / memory aliases per fact
MAX_EXISTING = 10  # existing memories shown
MAX_RECENT = 10  # recent messages shown
RECENT_CHARS = 300  # each recent message is cut to this (as Mem0)
NEW_MESSAGE_CHARS = 4000  # each new message is cut to this
# Bounds the answer: 6 facts x (200 chars ~ 50 tokens + ~35 tokens of JSON keys) = ~510.
FACTS_MAX_TOKENS = 640

_INDEX = {"type": "integer", "minimum": 0, "maximum": 99}

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": MAX_FACTS,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS},
                    "said_by": {"enum": ["user", "assistant"]},
                    "from_messages": {"type": "array", "maxItems": MAX_REFS, "items": _INDEX},
                    "related": {"type": "array", "maxItems": MAX_REFS, "items": _INDEX},
                    "supersedes": {"type": "array", "maxItems": MAX_REFS, "items": _INDEX},
                },
                "required": ["text", "said_by", "from_messages", "related", "supersedes"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

FACTS_INSTRUCTIONS = """\
You are a careful note-taker for a personal assistant. You read the NEW MESSAGES of a \
conversation and write down every fact worth remembering about the user: who they are, where \
they live and work, people and pets in their life, plans and dates, preferences, habits, health, \
goals, possessions, and anything the assistant did or promised for them.

Rules:
1. Take facts only from the NEW MESSAGES. Recent messages and existing memories are context.
2. Each fact is one short, self-contained sentence in the third person. Call the user "User" \
and use names, never pronouns like "he", "she", "it", "they", "I" or "my".
3. Write one fact per piece of information; keep specific names, numbers and places.
4. Write dates as absolute dates: resolve "today", "yesterday", "last week", "next Friday" \
against the observation date.
5. "said_by" is "user" when the user said it and "assistant" when the assistant said it.
6. "from_messages" lists the numbers of the new messages the fact comes from.
7. "related" lists the numbers of existing memories about the same subject.
8. "supersedes" lists the numbers of existing memories that the fact makes no longer true, \
because something changed: the user moved, changed jobs, changed a preference, a plan was \
cancelled or moved. A fact that only talks about the past ("User used to love hiking") or adds \
detail supersedes nothing. Leave it empty unless an existing memory became false.
9. Skip greetings, thanks, small talk, questions without facts and general advice. Do not \
repeat a fact that an existing memory already states. If there is nothing new, answer \
{"facts": []}.

Example 1.
Observation date: 2024-06-05 (Wednesday)
Existing memories:
0. User works as a nurse at Santa Maria hospital.
1. User lives in Lisbon.
2. User has a cat named Mia.
New messages:
1. user: Hi! I moved to Porto last month and now I work at São João hospital. Mia loves the \
new flat. My sister Ana visits on Sunday.
2. assistant: Nice! Enjoy the visit.
Answer:
{"facts": [{"text": "User moved from Lisbon to Porto in May 2024.", "said_by": "user", \
"from_messages": [1], "related": [1], "supersedes": [1]}, {"text": "User works as a nurse at \
São João hospital.", "said_by": "user", "from_messages": [1], "related": [0], "supersedes": \
[0]}, {"text": "User's sister is named Ana.", "said_by": "user", "from_messages": [1], \
"related": [], "supersedes": []}, {"text": "Ana visits User on Sunday 9 June 2024.", \
"said_by": "user", "from_messages": [1], "related": [], "supersedes": []}]}
(The cat Mia is already memory 2, so it is not repeated; the assistant's reply holds no fact.)

Example 2.
New messages:
1. user: Hello, how are you today?
2. assistant: I'm fine, thanks! How can I help you?
Answer:
{"facts": []}

Answer with one JSON object: {"facts": [...]}, each fact with "text", "said_by", \
"from_messages", "related" and "supersedes"."""


@dataclass(frozen=True)
class PromptMessage:
    """A message as shown to the model."""

    role: str
    content: str
    name: str | None = None
    observed_at: str | None = None  # ISO 8601


@dataclass(frozen=True)
class ExistingMemory:
    """An existing memory as shown to the model, under the alias that is its list position."""

    text: str
    observed_at: str | None = None


def day(moment: str | datetime | None) -> str | None:
    """The calendar day of an ISO timestamp, with its weekday: '2024-06-05 (Wednesday)'."""
    if moment is None:
        return None
    value = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    return f"{value.date().isoformat()} ({value.strftime('%A')})"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _speaker(message: PromptMessage) -> str:
    return message.role if message.name is None else f"{message.role} ({message.name})"


def facts_system_prompt(instructions: str | None) -> str:
    """The fixed rules, then the caller's instructions; also the system message of the
    supersession check, so both kinds of call share this prefix in the KV cache."""
    if instructions and instructions.strip():
        return (
            FACTS_INSTRUCTIONS
            + "\n\nAdditional instructions from the application:\n"
            + instructions.strip()
        )
    return FACTS_INSTRUCTIONS


def build_facts_prompt(
    *,
    new_messages: Sequence[PromptMessage],
    recent: Sequence[PromptMessage],
    existing: Sequence[ExistingMemory],
    now: datetime,
    instructions: str | None = None,
) -> Prompt:
    """The extraction prompt. `existing[i]` is shown as memory i; `new_messages[i]` as message
    i + 1. `instructions` (the config's custom_instructions or the call's `prompt`) are added
    after the fixed rules."""
    system = facts_system_prompt(instructions)
    observed = [m.observed_at for m in new_messages if m.observed_at]
    observation = day(max(observed)) if observed else day(now)
    parts = [f"Current date: {day(now)}", f"Observation date of the new messages: {observation}"]
    parts.append("\nRecent messages (context only):")
    shown = [m for m in recent if m.content.strip()][-MAX_RECENT:]
    if shown:
        parts += [f"- {_speaker(m)}: {_cut(m.content, RECENT_CHARS)}" for m in shown]
    else:
        parts.append("(none)")
    parts.append("\nExisting memories:")
    if existing:
        parts += [f"{i}. {_cut(m.text, 2 * MAX_FACT_CHARS)}" for i, m in enumerate(existing)]
    else:
        parts.append("(none)")
    parts.append("\nNew messages:")
    several_days = len({day(m.observed_at) for m in new_messages if m.observed_at}) > 1
    for number, message in enumerate(new_messages, start=1):
        stamp = f"[{day(message.observed_at)}] " if several_days and message.observed_at else ""
        content = _cut(message.content, NEW_MESSAGE_CHARS)
        parts.append(f"{number}. {stamp}{_speaker(message)}: {content}")
    # The reminder sits next to the answer: without it the 1.5B model tends to re-copy the
    # shown memories once there are several (measured: ~320 output tokens per add, 20 s).
    parts.append(
        "\nWrite only facts stated in the new messages above; never copy an existing memory."
    )
    parts.append("Answer:")
    return Prompt(
        kind="facts",
        messages=(
            {"role": "system", "content": system},
            {"role": "user", "content": "\n".join(parts)},
        ),
        schema=FACTS_SCHEMA,
        max_tokens=FACTS_MAX_TOKENS,
    )
