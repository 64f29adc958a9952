"""Messages as agent frameworks write them: content as a list of parts, tool calls, tool results.

OpenAI-style transcripts carry more than a string per message: `content` may be a list of parts
(`{"type": "text", "text": ...}`, `{"type": "image_url", "image_url": {"url": ...}}`, ...), an
assistant message may have `content: None` and `tool_calls`, and a `tool` message answers a call.
`read_content` keeps every text part as the message's text and records the rest in the message's
metadata as references: an image's URL (a `data:` URL only as its media type and size; nothing is
ever fetched: no network), another part's type, the tool calls as given. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import ValidationError

MAX_REFERENCE_CHARS = 2_000


def _image_reference(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise ValidationError("an image_url part without a URL")
    if url.startswith("data:"):
        media = url[5:].split(";", 1)[0].split(",", 1)[0] or "unknown"
        return f"data:{media} ({len(url)} characters inline, not kept)"
    return url[:MAX_REFERENCE_CHARS]


def read_content(content: object, where: str) -> tuple[str, dict[str, Any]]:
    """(the text, metadata of what else the content carried). Raises ValidationError for a
    content that is neither a string, None nor a list of parts."""
    if content is None:
        return "", {}
    if isinstance(content, str):
        return content, {}
    if not isinstance(content, list):
        raise ValidationError(
            f"{where}['content'] must be a string, None or a list of parts, "
            f"got {type(content).__name__}"
        )
    texts: list[str] = []
    images: list[str] = []
    others: list[str] = []
    for number, part in enumerate(content):
        if not isinstance(part, dict):
            raise ValidationError(f"{where}['content'][{number}] must be a dict with a 'type'")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ValidationError(f"{where}['content'][{number}] has no text string")
            texts.append(text)
        elif kind == "image_url":
            images.append(_image_reference(part))
        else:
            others.append(str(kind)[:100])
    metadata: dict[str, Any] = {}
    if images:
        metadata["images"] = images
    if others:
        metadata["other_parts"] = others
    return "\n".join(texts), metadata


def tool_metadata(item: dict[str, Any], where: str) -> dict[str, Any]:
    """The tool calls of an assistant message and the call id of a tool result, as given
    (JSON-serialisable, else refused)."""
    found = {key: item[key] for key in ("tool_calls", "tool_call_id") if item.get(key)}
    try:
        json.dumps(found, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where} tool fields are not JSON-serialisable: {exc}") from None
    return found
