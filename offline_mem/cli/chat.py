"""`offline-mem chat --user NAME`: a terminal chat that remembers.

For each line read from stdin: search the user's memories, answer with a local pinned model (the
extractor GGUF, greedy, fixed seed, chat format from the manifest), print the answer, and only then
add the exchange to memory. The answer is out before extraction starts, and an extraction failure
is a one-line warning: it never loses the answer (Mem0's README chat example does).
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import click

from ..errors import ExtractionError, ModelError
from ..pinned.extractor import DEFAULT_SEED, LlamaExtractor
from ..retrieval.formatting import format_memories
from . import common
from .common import CliState, open_memory, pass_state

SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of the user. Answer the user's last "
    "message briefly and directly. Use the memories listed with it when they are relevant; "
    "do not invent facts about the user."
)
MAX_TURNS = 6  # earlier exchanges of this session sent with each message
EXIT_WORDS = ("/exit", "/quit")


class ChatModel(ABC):
    """One abstract method: the assistant's reply to a chat."""

    @abstractmethod
    def reply(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model."""


class LlamaChatModel(ChatModel):
    """A pinned extractor GGUF as a chat model, loaded (and verified) by `LlamaExtractor`: the
    manifest's chat format, never a guessed one; temperature 0, a fixed seed. When the memory's
    own extractor is the same model, its loaded weights are shared."""

    def __init__(self, extractor: LlamaExtractor, *, owned: bool) -> None:
        self.extractor = extractor
        self.owned = owned

    def reply(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str:
        def complete(llm: Any, _cancelled: Any) -> str:
            try:
                out = llm.create_chat_completion(
                    messages=list(messages),
                    temperature=0.0,
                    top_k=1,
                    top_p=1.0,
                    min_p=0.0,
                    repeat_penalty=1.0,
                    seed=DEFAULT_SEED,
                    max_tokens=max_tokens,
                )
            except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError
                raise ModelError(f"the chat model failed: {exc}") from exc
            return str(out["choices"][0]["message"]["content"] or "").strip()

        return self.extractor.call_model(complete)

    def close(self) -> None:
        if self.owned:
            self.extractor.close()


def chat_model(name: str | None, memory: Any) -> ChatModel:
    """The chat model NAME (default: the memory's configured extractor)."""
    name = name or memory.config.extractor
    if common.MODELS.chat is not None:
        model: ChatModel = common.MODELS.chat(name)
        return model
    own = memory.extractor
    if isinstance(own, LlamaExtractor) and own.name == name:
        return LlamaChatModel(own, owned=False)
    return LlamaChatModel(
        LlamaExtractor(
            name,
            memory.models_dir,
            threads=memory.config.threads,
            reproducible=memory.config.reproducible,
        ),
        owned=True,
    )


def build_messages(
    text: str, memories: Sequence[dict[str, Any]], turns: Sequence[tuple[str, str]]
) -> list[dict[str, str]]:
    """The static system prompt first (it stays in llama.cpp's KV cache), the session's recent
    exchanges, then the new message with its memories."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for said, answered in turns[-MAX_TURNS:]:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": answered}]
    known = format_memories(memories) or "(none)"
    messages.append(
        {"role": "user", "content": f"Memories about me:\n{known}\n\nMy message: {text}"}
    )
    return messages


@click.command("chat")
@click.option("--user", "user_id", required=True, metavar="NAME", help="Whose memories to use.")
@click.option("--model", metavar="NAME", help="The chat model (default: the configured extractor).")
@click.option(
    "--extractor", metavar="NAME", help="The model that extracts memories from each exchange."
)
@click.option("--show-memories", is_flag=True, help="Show which memories each answer used.")
@click.option("-k", "--top-k", default=5, show_default=True, help="Memories per message.")
@click.option("--max-tokens", default=256, show_default=True, help="Longest answer.")
@click.option("--no-remember", is_flag=True, help="Answer only; add nothing to memory.")
@pass_state
def chat(
    state: CliState,
    user_id: str,
    model: str | None,
    extractor: str | None,
    show_memories: bool,
    top_k: int,
    max_tokens: int,
    no_remember: bool,
) -> None:
    """Chat with a local model that uses your memories. Reads one message per line from stdin
    (type /exit to stop); prints each answer, then remembers the exchange."""
    stdin = sys.stdin
    interactive = stdin.isatty()
    with open_memory(state, extractor=extractor) as memory:
        llm = chat_model(model, memory)
        try:
            turns: list[tuple[str, str]] = []
            while True:
                if interactive:
                    click.echo("you> ", nl=False)
                line = stdin.readline()
                if not line:
                    break
                text = line.strip()
                if not text:
                    continue
                if text in EXIT_WORDS:
                    break
                answer = _turn(
                    state,
                    memory,
                    llm,
                    text,
                    turns,
                    user_id=user_id,
                    top_k=top_k,
                    max_tokens=max_tokens,
                    show_memories=show_memories,
                    remember=not no_remember,
                    interactive=interactive,
                )
                turns.append((text, answer))
        finally:
            llm.close()


def _turn(
    state: CliState,
    memory: Any,
    llm: ChatModel,
    text: str,
    turns: Sequence[tuple[str, str]],
    *,
    user_id: str,
    top_k: int,
    max_tokens: int,
    show_memories: bool,
    remember: bool,
    interactive: bool,
) -> str:
    found = memory.search(text, filters={"user_id": user_id}, top_k=top_k)["results"]
    answer = llm.reply(build_messages(text, found, turns), max_tokens=max_tokens)
    if state.json:  # one JSON object per line: the answer, then what was remembered
        record: dict[str, Any] = {"event": "answer", "message": text, "answer": answer}
        if show_memories:
            record["memories"] = [
                {"id": m["id"], "memory": m["memory"], "score": m["score"]} for m in found
            ]
        _echo_line(record)
    else:
        if show_memories:
            click.echo("memories used:" if found else "memories used: none")
            for m in found:
                click.echo(f"  {m['score']:.3f}  {m['memory']}")
        click.echo(f"assistant> {answer}" if interactive else answer)
    sys.stdout.flush()
    # The answer is out; from here on a failure can only cost the memory of the exchange.
    if not remember:
        return answer
    exchange = [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
    try:
        remembered = memory.add(exchange, user_id=user_id)["results"]
    except ExtractionError as exc:
        warning = f"the exchange was not remembered: {' '.join(str(exc).split())}"
        if state.json:
            _echo_line({"event": "warning", "warning": warning})
        click.echo(f"warning: {warning}", err=True)
        return answer
    if state.json:
        _echo_line({"event": "remembered", "results": remembered})
    return answer


def _echo_line(value: dict[str, Any]) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))
