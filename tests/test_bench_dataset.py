"""The synthetic LoCoMo-format generator: deterministic by seed, five question types, evidence
that names real turns, and output the loader reads back."""

from __future__ import annotations

import json

import pytest

from benchmarks.locomo.dataset import CATEGORY, TYPES, generate
from benchmarks.locomo.loader import parse_locomo


def test_same_seed_same_json_other_seed_other_json():
    one = json.dumps(generate(3, personas=2))
    assert one == json.dumps(generate(3, personas=2))
    assert one != json.dumps(generate(4, personas=2))


def test_all_five_types_with_evidence_that_exists():
    samples = generate(11, personas=3, sessions=8, per_type=3)
    for raw in samples:
        conv = raw["conversation"]
        ids = {
            t["dia_id"]
            for k, v in conv.items()
            if k.startswith("session_") and not k.endswith("date_time")
            for t in v
        }
        assert {q["type"] for q in raw["qa"]} == set(TYPES)
        for q in raw["qa"]:
            assert q["category"] == CATEGORY[q["type"]]
            assert all(e in ids for e in q["evidence"])
            if q["type"] == "not_mentioned":
                assert q["evidence"] == [] and q["answer"] == "Not mentioned"
            else:
                assert q["evidence"] and q["answer"]
            if q["type"] == "multi_hop":
                assert len(q["evidence"]) == 2


def test_evidence_turns_hold_the_answer_and_changes_come_later():
    (raw,) = generate(5, sessions=7)
    turns = {
        t["dia_id"]: t
        for k, v in raw["conversation"].items()
        if k.startswith("session_") and not k.endswith("date_time")
        for t in v
    }
    order = list(turns)
    for q in raw["qa"]:
        if q["type"] in ("single_fact", "latest"):
            assert q["answer"] in turns[q["evidence"][0]]["text"]
            assert turns[q["evidence"][0]]["speaker"] == raw["conversation"]["speaker_a"]
        if q["type"] == "multi_hop":
            first, second = q["evidence"]
            assert order.index(first) < order.index(second)
            assert q["answer"] in turns[second]["text"]


def test_temporal_answers_are_absolute_dates_from_the_session():
    (raw,) = generate(9, sessions=7)
    sample = parse_locomo([raw])[0]
    when = {t.dia_id: s.when for s, t in sample.turns()}
    for q in sample.qa:
        if q.type == "temporal":
            day = when[q.evidence[0]]
            assert str(day.year) in q.answer
            assert q.answer.split()[-2] in {
                "January",
                "February",
                "March",
                "April",
                "May",
                "June",
                "July",
                "August",
                "September",
                "October",
                "November",
                "December",
            }


def test_loader_reads_generated_samples():
    samples = parse_locomo(generate(2, personas=2, sessions=6, turns_per_session=6))
    assert len(samples) == 2
    for sample in samples:
        assert len(sample.sessions) == 6
        assert all(s.when is not None for s in sample.sessions)
        assert len(sample.turns()) == 36 and len(sample.qa) == 15


def test_too_many_facts_for_the_turns_is_an_error():
    with pytest.raises(ValueError, match="do not fit"):
        generate(1, sessions=1, turns_per_session=4, per_type=3)
