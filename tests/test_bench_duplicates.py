"""The near-duplicate report (benchmarks/locomo/duplicates.py) on a hand-made memory file:
close pairs among active facts by threshold, merges, validity counts."""

from __future__ import annotations

from pathlib import Path

from benchmarks.locomo.duplicates import report
from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer


def test_close_pairs_merges_and_validity(tmp_path: Path) -> None:
    script = (
        answer("User likes green tea."),
        answer("user LIKES green tea!"),
        answer("User likes green tea a lot."),
        answer("User moved to Porto in 2021."),
    )
    with Memory({"path": str(tmp_path / "m.db"), "job_worker": False}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(*script), entities=FakeEntities()) as memory:  # fmt: skip
        for said in ("I like green tea.", "I like green tea!", "I like green tea a lot.",
                     "I moved to Porto in 2021."):  # fmt: skip
            memory.add(said, user_id="u1", timestamp="2023-05-08T10:00:00Z")
        memory.add("a raw turn is not a fact", user_id="u1", infer=False)
        result = report(memory, (0.8, 0.99), show=0, at=0.8)
    (user,) = result["per_conversation"].values()
    assert user["active_facts"] == 3 and user["merges"] == 1
    assert user["close_pairs"] == {"0.8": 1, "0.99": 0}
    assert user["valid_from_from_text"] == 1 and user["valid_to_before_valid_from"] == 0
    assert result["total"]["close_pairs"] == user["close_pairs"]
