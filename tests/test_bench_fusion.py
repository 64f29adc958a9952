"""The benchmark's fusion of offline_mem's two rankings (facts, stored turns)."""

from __future__ import annotations

from benchmarks.locomo.systems import Hit, reciprocal_rank_fusion


def hits(*texts: str, prefix: str) -> list[Hit]:
    return [Hit(t, "2024-01-01", (f"{prefix}{i}",)) for i, t in enumerate(texts)]


def test_alternates_equal_ranks_facts_first_and_cuts_at_top_k():
    facts = hits("f1", "f2", "f3", prefix="F")
    turns = hits("t1", "t2", "t3", prefix="T")
    fused = reciprocal_rank_fusion([facts, turns], 4)
    assert [h.text for h in fused] == ["f1", "t1", "f2", "t2"]


def test_the_same_text_in_both_lists_is_one_hit_ranked_higher_with_merged_provenance():
    facts = hits("a fact", "Shared text", prefix="F")
    turns = hits("a turn", "shared  text", prefix="T")
    fused = reciprocal_rank_fusion([facts, turns], 10)
    assert [h.text for h in fused] == ["Shared text", "a fact", "a turn"]
    assert fused[0].dia_ids == ("F1", "T1")


def test_empty_rankings():
    assert reciprocal_rank_fusion([[], []], 5) == []
    assert [h.text for h in reciprocal_rank_fusion([[], hits("x", prefix="T")], 5)] == ["x"]


def test_a_text_repeated_in_one_list_counts_once_at_its_best_rank():
    turns = hits("first", "said twice", "third", "Said  twice", prefix="T")
    facts = hits("a fact", prefix="F")
    fused = reciprocal_rank_fusion([turns, facts], 10)
    assert [h.text for h in fused] == ["first", "a fact", "said twice", "third"]
    assert fused[2].dia_ids == ("T1", "T3")
