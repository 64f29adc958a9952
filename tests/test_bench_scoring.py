"""Scores the LoCoMo way: normalisation, stemmed multiset F1, not-mentioned, evidence recall."""

from __future__ import annotations

import pytest

from benchmarks.locomo.scoring import (
    answer_score,
    evidence_recall,
    multi_answer_f1,
    normalize_answer,
    percentile,
    porter_stem,
    says_not_mentioned,
    spell_iso_dates,
    token_f1,
)


def test_normalize_drops_case_punctuation_articles_and_commas():
    assert normalize_answer("The Overstory, by  Richard Powers!") == "overstory by richard powers"
    assert normalize_answer("A cat and an owl") == "cat owl"


def test_f1_known_values():
    assert token_f1("Porto", "porto") == 1.0
    assert token_f1("the city of Porto", "Porto") == pytest.approx(2 * (1 / 3) / (1 + 1 / 3))
    assert token_f1("May 7, 2023", "7 May 2023") == 1.0  # order does not matter
    assert token_f1("Lisbon", "Porto") == 0.0
    assert token_f1("", "Porto") == 0.0
    # multiset: a repeated token counts once per occurrence on each side
    assert token_f1("rowing rowing", "rowing") == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_f1_stems_tokens():
    assert token_f1("running marathons", "ran a marathon") == pytest.approx(0.5)
    assert token_f1("He plays cellos", "playing the cello") == pytest.approx(0.8)


def test_builtin_porter_on_ordinary_words():
    expected = {
        "running": "run",
        "marathons": "marathon",
        "caresses": "caress",
        "ponies": "poni",
        "relational": "relat",
        "hopping": "hop",
        "happy": "happi",
        "day": "day",
        "generalization": "gener",
        "adoption": "adopt",
        "cello": "cello",
    }
    assert {w: porter_stem(w) for w in expected} == expected


def test_multi_hop_and_not_mentioned_scoring():
    assert multi_answer_f1("Rex, Biscuit", "Biscuit, Rex") == 1.0
    assert multi_answer_f1("Rex", "Biscuit, Rex") == 0.5
    assert answer_score("Not mentioned.", "Not mentioned", "not_mentioned") == 1.0
    assert answer_score("No information available", "Not mentioned", "not_mentioned") == 1.0
    assert answer_score("Harvard", "Not mentioned", "not_mentioned") == 0.0
    assert answer_score("architect", "architect", "multi_hop") == 1.0
    assert says_not_mentioned("It is NOT  mentioned in the memories")
    assert not says_not_mentioned("Porto")


def test_evidence_recall_via_provenance():
    retrieved = [("D1:1", "D1:2"), (), ("D4:3",)]
    assert evidence_recall(["D1:2"], retrieved) == 1.0
    assert evidence_recall(["D1:2", "D5:1"], retrieved) == 0.5
    assert evidence_recall(["D9:9"], retrieved) == 0.0
    assert evidence_recall([], retrieved) is None  # not-mentioned questions have no evidence
    assert evidence_recall(["D1:1"], []) == 0.0


def test_percentile_interpolates_like_numpy():
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(x) for x in range(1, 101)], 95) == pytest.approx(95.05)


def test_iso_dates_in_predictions_are_spelled_like_gold():
    assert spell_iso_dates("on 2023-05-07.") == "on 7 May 2023."
    assert spell_iso_dates("2023-13-01") == "2023-13-01"
    assert answer_score("2023-05-07", "7 May 2023", "temporal") == 1.0
