"""The fact-recall scorer (benchmarks/locomo/fact_recall.py) on a hand-made two-speaker sample:
gold facts per session and speaker, recall and precision at a threshold."""

from __future__ import annotations

from pathlib import Path

from writer_process import WordAnalyzer

from benchmarks.locomo.fact_recall import gold_facts, score
from offline_mem import Memory
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor

SAMPLE = {
    "sample_id": "s1",
    "conversation": {"speaker_a": "Ana", "speaker_b": "Ben"},
    "observation": {
        "session_1_observation": {
            "Ana": [["Ana teaches chemistry at a school.", "D1:1"]],
            "Ben": [["Ben's brother is moving to Oslo in May.", "D1:2"]],
        },
        "session_2_observation": {"Ana": [["Ana went on a hike with her dog.", "D2:1"]]},
        "session_5_observation": {"Ben": [["Ben bought a boat.", "D5:3"]]},
    },
}


def test_gold_facts_keep_session_speaker_side_and_turn() -> None:
    gold = gold_facts(SAMPLE, sessions=4)
    assert [(g["session"], g["speaker"], g["dia_id"]) for g in gold] == [
        (1, "speaker_a", "D1:1"), (1, "speaker_b", "D1:2"), (2, "speaker_a", "D2:1")]  # fmt: skip


def test_recall_and_precision_per_speaker_and_session(tmp_path: Path) -> None:
    with Memory({"path": str(tmp_path / "m.db"), "job_worker": False}, embedder=FakeEmbedder(),
                extractor=FakeExtractor(), entities=FakeEntities(),
                analyzer=WordAnalyzer()) as memory:  # fmt: skip
        for text in ("Ana teaches chemistry at a school.", "Ana likes green tea."):
            memory.add(text, user_id="s1", infer=False)
        result = score([SAMPLE], memory, sessions=4, thresholds=(0.99,))
    at = result["thresholds"]["0.99"]
    assert (result["gold"], result["stored"]) == (3, 2)
    assert at["recall"] == 0.333 and at["precision"] == 0.5
    assert at["recall_by_speaker"] == {"speaker_a": 0.5, "speaker_b": 0.0}
    assert at["recall_by_session"] == {"1": 0.5, "2": 0.0, "3": None, "4": None}
