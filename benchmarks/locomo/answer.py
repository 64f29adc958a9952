"""The answer model: one pinned GGUF, loaded once, the same prompt for every system.

Greedy (temperature 0, top_k 1) with a fixed seed; the chat format comes from the manifest. The
static instructions come first so llama.cpp reuses their KV cache across questions.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_mem import format_memories

from .systems import Hit

ANSWER_PROMPT_VERSION = "answer-1"
SYSTEM_PROMPT = """\
You answer questions about {speaker}, using only the memories given. Memories come from \
{speaker}'s conversations; "User" in a memory means {speaker}. Each memory starts with the date \
it was recorded.
Rules:
- Reply with the answer only, in a few words (a name, place, date or short phrase), no sentence.
- When a fact changed over time, give the most recent value.
- For "when" questions give the date, e.g. 7 May 2023; compute relative dates such as \
"yesterday" or "last week" from the memory's date.
- If the memories do not contain the answer, reply exactly: Not mentioned"""


def render_memories(hits: Sequence[Hit]) -> str:
    """The hits as the library renders results for a prompt (`offline_mem.format_memories`),
    for every system alike: numbered, each with the day it was said."""
    items = [{"memory": h.text, "observed_at": h.date} for h in hits]
    return format_memories(items, numbered=True) or "(no memories)"


def build_messages(speaker: str, question: str, hits: Sequence[Hit]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT.format(speaker=speaker)},
        {
            "role": "user",
            "content": f"Memories:\n{render_memories(hits)}\n\nQuestion: {question}\nAnswer:",
        },
    ]


@dataclass(frozen=True)
class Answer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class Answerer:
    """The pinned answer model, loaded on construction and kept for the whole run."""

    def __init__(
        self,
        model_name: str,
        *,
        threads: int,
        seed: int = 1234,
        n_ctx: int = 4096,
        max_tokens: int = 32,
    ) -> None:
        from llama_cpp import Llama

        from offline_mem.pinned.manifest import load_manifest
        from offline_mem.pinned.model_files import verified_model_dir

        spec = load_manifest().get(model_name)
        if not spec.chat_format:
            raise ValueError(f"model {model_name!r} has no pinned chat format")
        self.model_name, self.seed, self.max_tokens = model_name, seed, max_tokens
        self.chat_format = spec.chat_format
        self.llm: Any = Llama(
            model_path=str(verified_model_dir(model_name) / spec.primary),
            chat_format=spec.chat_format,
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            seed=seed,
            verbose=False,
        )

    def answer(self, speaker: str, question: str, hits: Sequence[Hit]) -> Answer:
        started = time.perf_counter()
        reply = self.llm.create_chat_completion(
            messages=build_messages(speaker, question, hits),
            temperature=0.0,
            top_k=1,
            top_p=1.0,
            min_p=0.0,
            repeat_penalty=1.0,
            seed=self.seed,
            max_tokens=self.max_tokens,
        )
        usage = reply.get("usage", {})
        text = (reply["choices"][0]["message"].get("content") or "").strip()
        return Answer(
            text=text.splitlines()[0].strip() if text else "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - started,
        )

    def close(self) -> None:
        self.llm.close()


class CachedAnswerer:
    """An Answerer whose answers are kept in a JSONL file keyed by the answer prompt (model,
    seed and messages): a later run that retrieves the same memories for a question reuses the
    answer instead of asking the model again, so an ablation pays only for the questions whose
    results changed. Greedy decoding makes the answer a function of the prompt, up to the last
    bits of llama.cpp's arithmetic on a warm KV cache; `reused` counts the answers taken from
    the file (the file holds the dataset's text: keep it in the workdir)."""

    def __init__(self, inner: Answerer, path: Path) -> None:
        self.inner, self.path, self.reused = inner, path, 0
        self.known: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                self.known[record["key"]] = record

    def answer(self, speaker: str, question: str, hits: Sequence[Hit]) -> Answer:
        messages = build_messages(speaker, question, hits)
        key = hashlib.sha256(
            json.dumps([self.inner.model_name, self.inner.seed, messages]).encode("utf-8")
        ).hexdigest()
        if key in self.known:
            self.reused += 1
            r = self.known[key]
            return Answer(r["text"], r["prompt_tokens"], r["completion_tokens"], 0.0)
        reply = self.inner.answer(speaker, question, hits)
        record = {"key": key, "text": reply.text, "prompt_tokens": reply.prompt_tokens,
                  "completion_tokens": reply.completion_tokens}  # fmt: skip
        self.known[key] = record
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        return reply

    def close(self) -> None:
        self.inner.close()
