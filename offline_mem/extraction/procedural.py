"""Procedural memory: one summary of an agent's run, structured as Mem0's is. Pure.

The model answers in a bounded JSON structure (overview, then numbered steps, each with the
action, its result verbatim and what was learned); `render_summary` turns it into the text that
is stored. A caller's `prompt` replaces the system prompt; the answer's shape is still enforced by
the grammar and restated at the end of the user message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..pinned.extractor import Prompt
from .prompts import PromptMessage

PROCEDURAL_PROMPT_VERSION = "procedural-1"
MAX_STEPS = 12
MAX_RESULT_CHARS = 800
MAX_FIELD_CHARS = 300
PROCEDURAL_MAX_TOKENS = 3072
TRANSCRIPT_CHARS = 4000  # each message is cut to this


def _text(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit}


PROCEDURAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_objective": _text(MAX_FIELD_CHARS),
        "progress_status": _text(MAX_FIELD_CHARS),
        "steps": {
            "type": "array",
            "maxItems": MAX_STEPS,
            "items": {
                "type": "object",
                "properties": {
                    "action": _text(MAX_FIELD_CHARS),
                    "result": _text(MAX_RESULT_CHARS),
                    "key_findings": _text(MAX_FIELD_CHARS),
                    "errors": _text(MAX_FIELD_CHARS),
                    "current_context": _text(MAX_FIELD_CHARS),
                },
                "required": ["action", "result", "key_findings", "errors", "current_context"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["task_objective", "progress_status", "steps"],
    "additionalProperties": False,
}

PROCEDURAL_INSTRUCTIONS = """\
You summarise the execution history of an AI agent so that it can continue the task later \
without repeating work. You read the transcript of the agent's run and write:

- Overview: the task objective, and the progress status (what is done, what remains, e.g. \
"2 of 5 pages scraped").
- Steps, numbered in chronological order, one per agent action, each with:
  - action: what the agent did, with its parameters or target.
  - result: the result of the action, copied verbatim from the transcript (exact values, \
URLs, numbers, output), never paraphrased.
  - key_findings: what was learned or decided.
  - errors: errors or problems met, or "" if none.
  - current_context: the state after this step (page, file, data in hand, next goal).

Guidelines: preserve every output exactly; keep chronological order; be precise and complete; \
output only the summary."""

FORMAT_REMINDER = (
    'Answer as one JSON object with "task_objective", "progress_status" and "steps"; each step '
    'has "action", "result", "key_findings", "errors" and "current_context".'
)


def build_procedural_prompt(
    messages: Sequence[PromptMessage], *, system_prompt: str | None = None
) -> Prompt:
    """`system_prompt` (the call's `prompt`) replaces the instructions."""
    lines = ["Transcript of the agent's run:"]
    for number, message in enumerate(messages, start=1):
        content = " ".join(message.content.split())[:TRANSCRIPT_CHARS]
        lines.append(f"{number}. {message.role}: {content}")
    lines += ["", "Create the procedural memory of the run above.", FORMAT_REMINDER]
    system = system_prompt if system_prompt and system_prompt.strip() else PROCEDURAL_INSTRUCTIONS
    return Prompt(
        kind="procedural",
        messages=(
            {"role": "system", "content": system},
            {"role": "user", "content": "\n".join(lines)},
        ),
        schema=PROCEDURAL_SCHEMA,
        max_tokens=PROCEDURAL_MAX_TOKENS,
    )


def _field(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _verbatim(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def render_summary(answer: Mapping[str, Any]) -> str:
    """The stored text, in Mem0's layout. Empty when the answer holds nothing."""
    objective = _field(answer.get("task_objective"))
    status = _field(answer.get("progress_status"))
    raw_steps = answer.get("steps")
    steps = [s for s in raw_steps if isinstance(s, dict)] if isinstance(raw_steps, list) else []
    if not (objective or status or steps):
        return ""
    out = [
        "## Summary of the agent's execution history",
        "",
        f"**Task Objective**: {objective}",
        f"**Progress Status**: {status}",
    ]
    for number, step in enumerate(steps, start=1):
        out += [
            "",
            f"{number}. **Agent Action**: {_field(step.get('action'))}",
            f"   **Action Result**: {_verbatim(step.get('result'))}",
            "   **Embedded Metadata**:",
            f"   - **Key Findings**: {_field(step.get('key_findings'))}",
            f"   - **Errors and Challenges**: {_field(step.get('errors')) or 'None'}",
            f"   - **Current Context**: {_field(step.get('current_context'))}",
        ]
    return "\n".join(out)
