"""The LoCoMo-format loader on a tiny hand-written file (tests/fixtures/locomo_tiny.json)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from benchmarks.locomo.loader import load_locomo, parse_locomo, parse_session_time

TINY = Path(__file__).parent / "fixtures" / "locomo_tiny.json"


def test_loads_sessions_in_numeric_order_with_dates():
    (sample,) = load_locomo(TINY)
    assert sample.sample_id == "tiny-1"
    assert (sample.speaker_a, sample.speaker_b) == ("Lena", "Tomas")
    assert [s.number for s in sample.sessions] == [1, 2, 10]  # not "1, 10, 2"
    assert sample.sessions[0].when == datetime(2023, 5, 8, 13, 56)
    assert sample.sessions[2].when == datetime(2023, 6, 2, 9, 15)
    assert [t.dia_id for _, t in sample.turns()] == [
        "D1:1",
        "D1:2",
        "D1:3",
        "D2:1",
        "D10:1",
        "D10:2",
    ]
    # a shared photo's caption is evidence like the words (the URL is never used)
    assert sample.sessions[0].turns[1].text == (
        "That's great, how was it? [shares a photo: a photo of a cup]"
    )


def test_qa_types_answers_and_evidence():
    (sample,) = load_locomo(TINY)
    assert [q.type for q in sample.qa] == [
        "temporal",
        "single_fact",
        "multi_hop",
        "not_mentioned",
        "open_domain",
    ]
    assert sample.qa[0].answer == "7 May 2023"
    assert sample.qa[2].evidence == ("D2:1", "D10:2")
    assert sample.qa[3].answer == "Not mentioned"  # adversarial: the conversation does not say
    assert sample.qa[3].evidence == ()
    assert sample.qa[4].answer == "2023"  # numbers become text


def test_every_evidence_id_names_a_turn():
    (sample,) = load_locomo(TINY)
    ids = {t.dia_id for _, t in sample.turns()}
    assert all(e in ids for q in sample.qa for e in q.evidence)


def test_session_time_formats():
    assert parse_session_time("12:05 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 5)
    assert parse_session_time("12:30 pm on 3 Feb, 2024") == datetime(2024, 2, 3, 12, 30)
    assert parse_session_time("2024-03-04T10:00:00") == datetime(2024, 3, 4, 10, 0)
    assert parse_session_time("sometime") is None


def test_rejects_a_non_list(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"conversation": {}}))
    with pytest.raises(ValueError):
        load_locomo(path)
    assert parse_locomo([]) == []


def test_the_retrieval_child_ingests_the_sessions_the_parent_scores():
    """Generated data reaches the per-system child as --data: it must still ingest (and search)
    every session, as the parent scores every question (a KeyError at scoring time otherwise)."""
    from benchmarks.locomo.run import DEFAULT_MAX_SESSIONS, config_of, parse_args

    assert config_of(parse_args([]))["max_sessions"] is None  # generated: every session
    child = ["--data", "gen.json", "--all-sessions", "--retrieve", "naive", "--retrieve-out", "o"]
    assert config_of(parse_args(child))["max_sessions"] is None
    assert config_of(parse_args(["--data", "x.json"]))["max_sessions"] == DEFAULT_MAX_SESSIONS
    assert config_of(parse_args(["--data", "x.json", "--max-sessions", "2"]))["max_sessions"] == 2
