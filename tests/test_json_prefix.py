"""`complete_prefix`: the finished values of a JSON answer cut at its token limit."""

from __future__ import annotations

import json

import pytest

from offline_mem.pinned.json_prefix import complete_prefix


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        ('{"1": ["Lena moved to Porto.", "Lena has a ca', {"1": ["Lena moved to Porto."]}),
        ('{"1": ["A"], "2": ["B', {"1": ["A"]}),
        ('{"1": ["A", "B"], "2', {"1": ["A", "B"]}),
        ('{"1": ["A", "B"], "2": ', {"1": ["A", "B"]}),
        ('{"a": 1, "b": tr', {"a": 1}),
        ('{"1": ["Rui said \\"hi\\" twice", "x', {"1": ['Rui said "hi" twice']}),
        ('{"1": ["a ] and } inside", "', {"1": ["a ] and } inside"]}),
        ('{"1": [["x", "y"], ["z', {"1": [["x", "y"]]}),
        ('{"1": ["A"]} trailing', {"1": ["A"]}),
        ("{}", {}),
    ],
)
def test_keeps_every_finished_value_and_closes_the_rest(cut, kept):
    assert complete_prefix(cut) == kept


@pytest.mark.parametrize(("cut", "kept"), [('{"1": [', {}), ('{"1', {}), (" {", {}), ('["A', [])])
def test_nothing_finished_keeps_the_root_empty(cut, kept):
    assert complete_prefix(cut) == kept


@pytest.mark.parametrize("cut", ["", "]", '{"1": ["A"]]', '["A"}', "no json"])
def test_no_json_prefix_gives_none(cut):
    assert complete_prefix(cut) is None


def test_every_cut_of_an_answer_keeps_a_prefix_of_its_facts():
    """Cut anywhere, what is kept is the answer's facts in order, at most one list shortened."""
    answer = {"1": ["Priya keeps bees.", "Priya's hives are blue."], "3": ["Tomasz runs."]}
    text = json.dumps(answer)
    flat = [(key, fact) for key, facts in answer.items() for fact in facts]
    for end in range(len(text) + 1):
        kept = complete_prefix(text[:end])
        if kept is None:
            assert end == 0, end  # every non-empty cut of a JSON answer is a prefix
            continue
        pairs = [(key, fact) for key, facts in kept.items() for fact in facts]
        assert pairs == flat[: len(pairs)], (end, kept)
        assert list(kept) == list(answer)[: len(kept)]
    assert complete_prefix(text) == answer
