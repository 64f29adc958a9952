"""Read LoCoMo-format files: a JSON list of samples, each with a `conversation` (speaker_a,
speaker_b, session_<n> turn lists and session_<n>_date_time) and a `qa` list.

Works for the public LoCoMo file (category 5 items carry `adversarial_answer` and no `answer`;
a turn that shares a photo carries its caption in `blip_caption`, which becomes part of the
turn's text as "[shares a photo: <caption>]": the photo is evidence like anything said) and for
`dataset.py`'s output (which adds `type`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

# LoCoMo's numbering; 6 is this benchmark's "latest value of a changed fact".
CATEGORY_TYPES = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_fact",
    5: "not_mentioned",
    6: "latest",
}
NOT_MENTIONED = "Not mentioned"
_SESSION = re.compile(r"^session_(\d+)$")
_STAMP = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)


@dataclass(frozen=True)
class Turn:
    speaker: str
    dia_id: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    date_time: str  # as written in the file
    when: datetime | None  # parsed, naive local time; None when the format is unknown
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class QA:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int | None
    type: str


@dataclass(frozen=True)
class Sample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    qa: tuple[QA, ...]

    def turns(self) -> list[tuple[Session, Turn]]:
        return [(s, t) for s in self.sessions for t in s.turns]


def parse_session_time(text: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> datetime(2023, 5, 8, 13, 56); ISO strings also work."""
    match = _STAMP.match(text or "")
    if match:
        hour, minute, half, day, month, year = match.groups()
        clock = f"{int(hour)}:{minute} {half.upper()} {int(day)} {month[:3].title()} {year}"
        try:
            return datetime.strptime(clock, "%I:%M %p %d %b %Y")
        except ValueError:
            return None
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def _qa(item: dict[str, Any]) -> QA:
    category = item.get("category")
    category = int(category) if category is not None else None
    kind = item.get("type") or CATEGORY_TYPES.get(category, "unknown")  # type: ignore[arg-type]
    if kind == "not_mentioned":
        answer = NOT_MENTIONED
    else:
        answer = str(item.get("answer", item.get("adversarial_answer", "")))
    evidence = tuple(str(e).strip() for e in item.get("evidence") or [])
    return QA(
        question=str(item["question"]),
        answer=answer,
        evidence=evidence,
        category=category,
        type=str(kind),
    )


def turn_text(turn: dict[str, Any]) -> str:
    """What was said, with the caption of a shared photo appended."""
    text = str(turn.get("text", ""))
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


def parse_sample(raw: dict[str, Any], index: int = 0) -> Sample:
    conv = raw["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
    sessions = []
    for n in numbers:
        stamp = str(conv.get(f"session_{n}_date_time", ""))
        turns = tuple(
            Turn(speaker=str(t["speaker"]), dia_id=str(t["dia_id"]), text=turn_text(t))
            for t in conv[f"session_{n}"]
        )
        sessions.append(Session(n, stamp, parse_session_time(stamp), turns))
    return Sample(
        sample_id=str(raw.get("sample_id", f"sample-{index}")),
        speaker_a=str(conv["speaker_a"]),
        speaker_b=str(conv["speaker_b"]),
        sessions=tuple(sessions),
        qa=tuple(_qa(q) for q in raw.get("qa", [])),
    )


def parse_locomo(data: list[dict[str, Any]]) -> list[Sample]:
    if not isinstance(data, list):
        raise ValueError("a LoCoMo file holds a JSON list of samples")
    return [parse_sample(raw, i) for i, raw in enumerate(data)]


def load_locomo(path: str | Path) -> list[Sample]:
    """Every sample of a LoCoMo-format JSON file, sessions in numeric order."""
    return parse_locomo(json.loads(Path(path).read_text(encoding="utf-8")))
