"""Greedy decoding under a grammar, driven token by token on a `llama_cpp.Llama`.

Why not `Llama.create_completion`: its sampler chain filters all 151,936 candidates of the
vocabulary through the grammar for every token it writes, ~15 ms each at one thread (measured:
2.0 s of sampling for 136 tokens, a quarter of the time spent writing them). At temperature 0 only
the most likely token matters, so the grammar checks that one token first and filters the whole
vocabulary only when it rejects it (the way llama.cpp's own server samples). The token chosen is
the same either way: the most likely of the tokens the grammar allows, the first on a tie.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .prompt_lookup import PromptLookup

Finish = Literal["stop", "length", "deadline", "cancelled"]


@dataclass(frozen=True)
class Decoded:
    text: str
    completion_tokens: int  # tokens written, not counting the end-of-generation token
    cached_tokens: int  # prompt tokens whose keys and values the KV cache already held
    finish: Finish
    prompt_seconds: float = 0.0  # evaluating the prompt (the rest of the call writes the answer)
    guessed_tokens: int = 0  # of the tokens written, those guessed (no pass of their own)
    tokens: tuple[int, ...] = ()  # the tokens written


class GrammarSampler:
    """A llama.cpp grammar sampler that picks the grammar-allowed argmax of a logits row."""

    def __init__(self, llm: Any, gbnf: str, root: str) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, gbnf.encode("utf-8"), root.encode("utf-8")
        )
        if not self._sampler:
            raise ValueError("llama.cpp rejected the grammar")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1
        )
        self._all = llm._candidates  # llama-cpp-python's preallocated full-vocabulary array

    def allows(self, token: int, logit: float) -> bool:
        self._one[0] = self._llama_cpp.llama_token_data(token, logit, 0.0)
        self._one_array.size = 1
        self._one_array.selected = -1
        self._one_array.sorted = False
        self._llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._one_array))
        return not math.isinf(self._one[0].logit)

    def pick(self, logits: np.ndarray) -> int:
        best = int(np.argmax(logits))
        if self.allows(best, float(logits[best])):
            return best
        self._all.copy_logits(logits)
        self._llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._all.candidates))
        data = self._all.candidates_data
        return int(data.id[int(np.argmax(data.logit[: self._all.candidates.size]))])

    def accept(self, token: int) -> None:
        self._llama_cpp.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        if self._sampler:
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None


def common_prefix(a: Any, b: Any) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def _evaluate(llm: Any, prompt: list[int], reuse_cache: bool) -> int:
    """Evaluate `prompt`, keeping the longest prefix the KV cache shares with it (as
    llama-cpp-python's own generate does; none with `reuse_cache=False`); at least the prompt's
    last token is evaluated, so its logits are fresh. Returns the cached prefix's length."""
    if not prompt:
        raise ValueError("an empty prompt")
    cached = common_prefix(llm.input_ids[: llm.n_tokens], prompt) if reuse_cache else 0
    llm.n_tokens = min(cached, len(prompt) - 1)  # eval() drops the cells past n_tokens
    llm.eval(prompt[llm.n_tokens :])
    return cached


def next_token_logits(llm: Any, prompt: list[int], *, reuse_cache: bool = True) -> np.ndarray:
    """The logits of the token after `prompt` (a copy), the KV cache used as `decode_greedy`
    uses it."""
    import llama_cpp

    _evaluate(llm, prompt, reuse_cache)
    row = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).copy()


def _evaluate_all(llm: Any, tokens: list[int]) -> None:
    """Evaluate `tokens` after the kept ones in one batch, keeping every position's logits
    (`llama_get_logits_ith(ctx, i)` is the row after tokens[: i + 1]). Cells past
    `llm.n_tokens` (a previous batch's rejected guesses) are dropped first, as eval() does."""
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
    past = llm.n_tokens
    llm._batch.set_batch(batch=tokens, n_past=past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[past : past + len(tokens)] = tokens
    llm.n_tokens = past + len(tokens)


def decode_greedy(
    llm: Any,
    prompt: list[int],
    *,
    gbnf: str,
    root: str,
    max_tokens: int,
    deadline: float,
    reuse_cache: bool = True,
    cancelled: threading.Event | None = None,
    lookup: bool = True,
) -> Decoded:
    """Write the answer to `prompt` at temperature 0 under the grammar. The KV cache keeps the
    longest prefix it shares with the previous call (as llama-cpp-python's own generate does);
    at least the prompt's last token is evaluated, so its logits are fresh.

    With `reuse_cache=False` the whole prompt is evaluated from an empty cache, in the model's
    fixed batches: the answer then depends only on the prompt (and the build), not on what the
    cache held. Evaluating a prompt in one pass and re-evaluating only its tail give logits that
    differ in the last bits on some CPUs, enough to flip a near-tie.

    With `lookup`, each written token is evaluated together with the tokens that followed its
    context where that context occurred before (prompt_lookup.py), and the guesses the model
    itself picks are written without a pass of their own. The answer is the greedy answer still
    (a guess is kept only if it is the token picked from the logits before it); the logits of a
    batch may differ from one token's in the last bits, as above.

    Writing stops early when `cancelled` is set (the caller stopped waiting)."""
    import llama_cpp

    started = time.perf_counter()
    cached = _evaluate(llm, prompt, reuse_cache)
    prompt_seconds = time.perf_counter() - started
    ctx, vocab, n_vocab = llm._ctx.ctx, llm._model.vocab, llm.n_vocab()
    guesses = PromptLookup(prompt) if lookup else None
    sampler = GrammarSampler(llm, gbnf, root)
    written: list[int] = []
    finish: Finish = "length"
    row = -1  # the logits row of the last evaluated batch to pick the next token from
    guessed = 0
    try:
        while len(written) < max_tokens:
            if time.monotonic() > deadline:
                finish = "deadline"
                break
            if cancelled is not None and cancelled.is_set():
                finish = "cancelled"
                break
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,)
            )
            token = sampler.pick(logits)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            sampler.accept(token)
            written.append(token)
            draft: list[int] = []
            if guesses is not None:
                guesses.extend([token])
                draft = guesses.draft(max_tokens - len(written))
            if not draft:
                llm.eval([token])
                row = -1
                continue
            assert guesses is not None  # the draft came from it
            kept = llm.n_tokens
            _evaluate_all(llm, [token, *draft])
            row = 0
            for guess in draft:  # keep the guesses the model picks itself, up to the first miss
                logits = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,)
                )
                if sampler.pick(logits) != guess or llama_cpp.llama_vocab_is_eog(vocab, guess):
                    break
                sampler.accept(guess)
                written.append(guess)
                guesses.extend([guess])
                row += 1
                guessed += 1
            llm.n_tokens = kept + 1 + row  # the rejected guesses' cells go with the next batch
    finally:
        sampler.close()
    text = llm.detokenize(written).decode("utf-8", errors="replace")
    return Decoded(
        text,
        len(written),
        min(cached, len(prompt)),
        finish,
        prompt_seconds,
        guessed,
        tuple(written),
    )
