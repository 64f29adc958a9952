"""The guesses of prompt-lookup decoding (offline_mem.pinned.prompt_lookup): what followed the
latest earlier occurrence of the context's last tokens, never the current occurrence itself."""

from __future__ import annotations

import pytest

from offline_mem.pinned.prompt_lookup import PromptLookup


def test_guesses_what_followed_the_last_tokens_before():
    lookup = PromptLookup([1, 2, 3, 4, 5, 6, 9, 1, 2, 3], ngram=3, max_draft=3)
    assert lookup.draft() == [4, 5, 6]


def test_the_latest_earlier_occurrence_wins():
    lookup = PromptLookup([1, 2, 3, 7, 8, 1, 2, 3, 4, 0, 1, 2, 3], ngram=3, max_draft=2)
    assert lookup.draft() == [4, 0]


def test_no_guess_without_an_earlier_occurrence_or_when_too_short():
    assert PromptLookup([1, 2, 3, 4, 5], ngram=3).draft() == []
    assert PromptLookup([1, 2], ngram=3).draft() == []
    assert PromptLookup([], ngram=3).draft() == []


def test_written_tokens_extend_the_context_and_can_be_guessed_from():
    lookup = PromptLookup([5, 6, 7, 8], ngram=2, max_draft=3)
    lookup.extend([9, 5, 6])  # the answer repeats the prompt's start
    assert lookup.draft() == [7, 8, 9]
    lookup.extend([7])  # (6, 7) occurred once before, followed by 8
    assert lookup.draft() == [8, 9, 5]


def test_the_guess_is_cut_to_the_limit_and_to_what_exists():
    lookup = PromptLookup([1, 2, 3, 4, 5, 1, 2], ngram=2, max_draft=4)
    assert lookup.draft() == [3, 4, 5, 1]
    assert lookup.draft(limit=2) == [3, 4]
    assert lookup.draft(limit=0) == []
    tail = PromptLookup([4, 4, 4], ngram=2, max_draft=3)
    assert tail.draft() == [4]  # only one token followed the earlier (4, 4)


def test_sizes_are_checked():
    with pytest.raises(ValueError):
        PromptLookup([1], ngram=0)
    with pytest.raises(ValueError):
        PromptLookup([1], max_draft=0)
