"""The fact-extraction prompt and the schema of its answer. Pure: no I/O, no clock.

Layout, most stable first, so that llama.cpp's KV cache serves the longest possible prefix:
the static instructions and examples (identical on every call), then the caller's custom
instructions (fixed for a `Memory`), then the conversation: the scope's recent messages and the
new ones as one numbered list, and last which messages are new, with their date.

The scope's stored memories are not shown. Shown, the 1.5B model copied them into the answer as
facts of the new message (an old photo caption, an earlier plan written again under a reply of
thanks) and, told not to, wrote fewer facts of the message itself (measured on real dialogue:
docs/design/prompt-layout.md). A fact said again is merged after the call (admission.py) and
what a fact supersedes is asked one pair at a time (supersession.py).

The prompt holds no clock reading: with timestamps on the messages it is a function of the data
alone, so a run gives the same memories whatever day it runs (today's date is shown only for
messages that carry no timestamp).

The recent messages are a window that only grows between jumps (`recent_window_start`), and a
new message is written exactly as it will be written as an earlier one: one call's prompt starts
with the previous call's up to the end of its new messages, so the KV cache serves them (a
sliding window would change its first line on every add).

The answer is an object from the number of a new message to the texts of the facts it states,
nothing else: at one thread every generated token costs as much as ~3 prompt tokens. Who said a
fact follows from its message; which memory it supersedes is asked afterwards, one pair at a
time (`supersession.py`). Measurements: docs/design/prompt-layout.md; versions: CHANGELOG.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..pinned.extractor import Prompt
from .speakers import PLAIN_NAME

# Recorded with every extracted memory; what each version changed: CHANGELOG.md
PROMPT_VERSION = "facts-10"

MAX_FACTS = 6  # facts per answer (two messages rarely hold more)
MAX_FACT_CHARS = 200
# Existing memories retrieved for an add (not shown to the model): the most similar to the new
# messages, where a fact said again is merged and supersessions are sought.
MAX_EXISTING = 6
# The recent messages shown: all since the window's start, which moves RECENT_STEP messages at a
# time and leaves at least RECENT_MIN messages; so between RECENT_MIN and RECENT_MIN+RECENT_STEP-1.
RECENT_MIN = 4
RECENT_STEP = 8
MAX_RECENT = RECENT_MIN + RECENT_STEP - 1
RECENT_CHARS = 300  # each earlier message is cut to this (as Mem0)
# At most this many earlier messages: the window's own bound, plus an add's own earlier messages
# (a call for its second message shows the first as context).
MAX_CONTEXT = 2 * MAX_RECENT
NEW_MESSAGE_CHARS = 4000  # each new message is cut to this
# Bounds the answer: 6 facts x (200 chars ~ 50 tokens + ~20 tokens of JSON keys) = ~420.
FACTS_MAX_TOKENS = 512


# The rest of a fact after its subject: JSON string characters without escapes or control
# characters (a raw newline in a fact made an answer invalid JSON, see extractor._JSON_CHAR).
_FACT_TAIL = r'[^"\\\x00-\x1F]+'
# Between the name and the rest: the name is the subject ("<name> moved") or the owner
# ("<name>'s cat"). With any character allowed there, the 1.5B model also wrote the turn itself
# behind "<name>: " ("<name>: Have you tried ...?"; docs/design/prompt-layout.md).
_AFTER_SUBJECT = "('s)? "


SUBJECT_RULE = "A fact of a message is about the person who wrote it; start it with their name: {}."


def fact_subject(message: PromptMessage) -> str | None:
    """The name every fact of `message` starts with: its speaker's name, when it has a plain one.

    Measured on real dialogue between two named people (dev set, 100 facts read): 26% of the facts
    were credited to the wrong person, mostly a question to the other person ("Have you tried ...?")
    or an echo ("me too") written as the other's fact. The answer's grammar makes each fact of a
    message start with the name of the person who said it, so a fact can only be about someone else
    through its speaker ("<speaker>'s sister ...", "<speaker> asked <other> ..."). Messages without
    a name (an application's user and assistant) keep "User"."""
    name = (message.name or "").strip()
    return name if PLAIN_NAME.fullmatch(name) else None


def facts_schema(
    new_messages: int, subjects: Sequence[str | None] | None = None, *, first: int = 1
) -> dict[str, Any]:
    """The answer: an object keyed by the number of each new message that states facts (the new
    messages are numbered from `first`), each holding the list of those facts. Keys are
    optional and in order, so an answer with nothing new is {}. `subjects[n]`, when given, is
    the name each fact of the call's message n (0-based) starts with."""

    def facts(subject: str | None) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS}
        if subject is not None:
            item = {"type": "string", "pattern": f"^{subject}{_AFTER_SUBJECT}{_FACT_TAIL}$"}
        return {"type": "array", "maxItems": MAX_FACTS, "items": item}

    names = list(subjects) if subjects is not None else [None] * new_messages
    return {
        "type": "object",
        "properties": {str(first + n): facts(names[n]) for n in range(new_messages)},
        "additionalProperties": False,
    }


FACTS_INSTRUCTIONS = """\
You are a careful note-taker for a personal assistant. You read the new messages of a \
conversation and write down every fact worth remembering about the user: who they are, where \
they live and work, people and pets in their life, plans and dates, preferences, habits, health, \
goals, possessions, and anything the assistant did or promised for them.

Rules:
1. Take facts only from the new messages named at the end. Earlier messages are context.
2. Each fact is one short, self-contained sentence in the third person. Call the user "User" \
and use names, never pronouns like "he", "she", "it", "they", "I" or "my".
3. Write one fact per piece of information; keep specific names, numbers and places.
4. Write dates as absolute dates: resolve "today", "yesterday", "last week", "next Friday" \
against the date of the new messages.
5. When something changed (a move, a new job, a new preference, a plan cancelled or moved), \
write the new state ("User lives in Porto"), not the old one.
6. Skip greetings, thanks, small talk, questions without facts and general advice. Do not \
repeat a fact that an earlier message already states.
7. Answer with one JSON object: the number of each new message that states facts, with the \
list of its facts. Leave out messages without facts; if there is nothing new, answer {}.

Example 1.
Conversation:
1. [2024-06-01 (Saturday)] user: I finally finished the marathon! Mia, my cat, slept through it.
2. assistant: Congratulations!
3. [2024-06-05 (Wednesday)] user: Hi! Since last month I live in Porto and work at São João \
hospital. Mia loves the new flat. My sister Ana visits on Sunday.
4. assistant: Nice! Enjoy the visit.

New messages: 3 and 4 (2024-06-05 (Wednesday)).
Answer:
{"3": ["User lives in Porto since May 2024.", "User works at São João hospital.", \
"User's sister is named Ana.", "Ana visits User on Sunday 9 June 2024."]}
(The marathon and the cat Mia are in an earlier message, so neither is repeated; the \
assistant's reply holds no fact, so message 4 is left out.)

Example 2.
Conversation:
1. user: Hello, how are you today?
2. assistant: I'm fine, thanks! How can I help you?

New messages: 1 and 2.
Answer:
{}"""


@dataclass(frozen=True)
class PromptMessage:
    """A message as shown to the model."""

    role: str
    content: str
    name: str | None = None
    observed_at: str | None = None  # ISO 8601


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


def recent_window_start(count: int) -> int:
    """The position (0-based, in the scope's message order) of the first recent message shown,
    when the scope holds `count` messages before this add. It moves RECENT_STEP messages at a
    time, so consecutive adds show the same first messages and the KV cache serves them."""
    return max(0, (count - RECENT_MIN) // RECENT_STEP * RECENT_STEP)


def _stamped(messages: Sequence[PromptMessage]) -> list[tuple[str, PromptMessage]]:
    """Each message with its day in brackets when the day differs from the previous message's:
    a line's stamp depends only on the lines above it, so the text above stays the same."""
    out, previous = [], None
    for message in messages:
        today = day(message.observed_at)
        out.append((f"[{today}] " if today and today != previous else "", message))
        previous = today or previous
    return out


def first_new_number(prompt: Prompt) -> int:
    """The number the conversation of a facts prompt gives its first new message: the answer is
    keyed by these numbers (`facts_schema`), message n of the call being number first + n - 1."""
    return min((int(key) for key in prompt.schema.get("properties", {})), default=1)


def build_facts_prompt(
    *,
    new_messages: Sequence[PromptMessage],
    recent: Sequence[PromptMessage],
    now: datetime,
    instructions: str | None = None,
) -> Prompt:
    """The extraction prompt. `recent` are the scope's messages since `recent_window_start`,
    shown before `new_messages` as one numbered conversation; the answer is keyed by the new
    messages' numbers there (`first_new_number`). `now` dates the new messages that carry no
    timestamp. `instructions` (the config's custom_instructions or the call's `prompt`) are added
    after the fixed rules."""
    system = facts_system_prompt(instructions)
    context = [m for m in recent if m.content.strip()][-MAX_CONTEXT:]
    first = len(context) + 1
    lines = ["Conversation:"]
    for number, (stamp, message) in enumerate(_stamped([*context, *new_messages]), start=1):
        limit = RECENT_CHARS if number < first else NEW_MESSAGE_CHARS
        lines.append(f"{number}. {stamp}{_speaker(message)}: {_cut(message.content, limit)}")
    numbers = list(range(first, first + len(new_messages)))
    named = " and ".join(str(n) for n in numbers)
    days = sorted({d for m in new_messages if (d := day(m.observed_at))})
    when = f" ({days[0] if days else day(now)})" if len(days) <= 1 else ""
    plural = "s" if len(numbers) > 1 else ""
    lines.append(f"\nNew message{plural}: {named}{when}.")
    lines.append(
        f"Write only facts stated in message{plural} {named}; write nothing for a greeting, a "
        "question or a reply that states no fact."
    )
    subjects = [fact_subject(m) for m in new_messages]
    with_names = [f'message {n} with "{s}"' for n, s in zip(numbers, subjects, strict=True) if s]
    if with_names:
        lines.append(SUBJECT_RULE.format(", ".join(with_names)))
    lines.append("Answer:")
    return Prompt(
        kind="facts",
        messages=(
            {"role": "system", "content": system},
            {"role": "user", "content": "\n".join(lines)},
        ),
        schema=facts_schema(len(new_messages), subjects, first=first),
        max_tokens=FACTS_MAX_TOKENS,
    )
