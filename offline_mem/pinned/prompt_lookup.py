"""Draft tokens for greedy decoding, looked up in the text the model has already read.

A fact mostly repeats words of its message (names, places, whole phrases) and an answer repeats
its own JSON. When the last NGRAM tokens of the context (prompt and answer so far) occurred
before, the tokens that followed them there are a guess at what comes next. decoding.py has the
model check a guess in the same forward pass as the token before it and keeps the guessed tokens
it would have written itself, so the answer stays the model's own greedy answer.

The sizes are measured, not guessed: on a 2-core CPU a forward pass of k tokens of the pinned 1.5B
model costs 1.5x (k=2), 2.1x (3) and 2.4x (4) a pass of one (after a ~900-token prompt), so a
guess pays only when most of it is right. Replaying the dev set's 749 extraction answers against
their prompts, 3-token matches with guesses of up to 3 tokens wrote the same tokens in 0.85x the
time of one token per pass; 1- and 2-token matches guessed wrong too often (0.91x-1.07x), longer
guesses wasted their tail (0.93x-1.00x at 6-8 tokens).
"""

from __future__ import annotations

from collections.abc import Iterable

NGRAM = 3
MAX_DRAFT = 3


class PromptLookup:
    """The context's tokens and, for every NGRAM-token run that something followed, where its
    latest occurrence ended."""

    def __init__(
        self, tokens: Iterable[int] = (), *, ngram: int = NGRAM, max_draft: int = MAX_DRAFT
    ) -> None:
        if ngram < 1 or max_draft < 1:
            raise ValueError("ngram and max_draft must be at least 1")
        self.ngram = ngram
        self.max_draft = max_draft
        self.tokens: list[int] = []
        self._after: dict[tuple[int, ...], int] = {}  # run -> index of the token that followed it
        self.extend(tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            end = len(self.tokens)
            if end >= self.ngram:  # the run before this token now has a continuation
                self._after[tuple(self.tokens[end - self.ngram : end])] = end
            self.tokens.append(token)

    def draft(self, limit: int | None = None) -> list[int]:
        """What followed the latest earlier occurrence of the context's last NGRAM tokens (at most
        `max_draft` tokens, and at most `limit`); [] when they did not occur before."""
        if len(self.tokens) < self.ngram:
            return []
        start = self._after.get(tuple(self.tokens[-self.ngram :]))
        if start is None:
            return []
        size = self.max_draft if limit is None else min(self.max_draft, limit)
        return self.tokens[start : start + max(size, 0)]
