"""The pinned 1.5B extractor end to end (runs in CI, never skipped). One model for the session.

Floors: measured with benchmarks/extraction/run.py on the same set (see the report there); the
margins absorb CPU-dependent float differences between machines, not randomness (decoding is
greedy with a fixed seed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from offline_mem.config import DEFAULT_EXTRACTOR, resolve_models_dir
from offline_mem.extraction.planner import REPRODUCIBLE_SUFFIX
from offline_mem.extraction.prompts import PROMPT_VERSION
from offline_mem.memory import Memory
from offline_mem.pinned.extractor import LlamaExtractor

pytestmark = pytest.mark.real_model

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "extraction" / "run.py"
# Measured 2026-11-30 (benchmarks/extraction/run.py, prompt facts-4: facts keyed by message, no
# "supersedes" in the answer, only similar memories shown; the messages carry fixed timestamps, so
# the figures do not move with the day): recall 0.912 (31/34), precision 0.880 (22/25), 7 of 8
# contradictions superseded. (facts-3: 0.882 / 0.808 / 7; facts-1 without the check: recall
# 0.941, precision 0.722, 4 of 8 — but it re-copied the shown memories once a scope had several,
# ~20 s per add.) Floors kept from facts-3, which leave one to three facts, memories and one
# supersession of margin for CPU-dependent float differences.
RECALL_FLOOR = 0.85
PRECISION_FLOOR = 0.77
SUPERSEDED_FLOOR = 6


@pytest.fixture(scope="session")
def extractor():
    model = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir())
    yield model
    model.close()


def bench_module():
    spec = importlib.util.spec_from_file_location("extraction_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quality_floor(extractor, tmp_path):
    report = bench_module().quality(extractor, tmp_path)
    assert report["recall"] >= RECALL_FLOOR, report
    assert report["precision"] >= PRECISION_FLOOR, report
    assert report["contradictions_superseded"] >= SUPERSEDED_FLOOR, report


def test_reproducible_mode_gives_the_same_memories_whatever_the_cache_held(tmp_path):
    """The promise of `"reproducible": true`: every prompt is evaluated from scratch, so the same
    messages give the same memories after any history of calls (default mode promises that only
    for the same history: a prompt served from the KV cache may flip a near-tie)."""
    conversation = [
        {"role": "user", "content": "I'm Joana, a physiotherapist in Braga. I have two cats."},
        {"role": "assistant", "content": "Nice to meet you, Joana!"},
    ]
    elsewhere = [{"role": "user", "content": "I'm Tomas. I teach chemistry and I play the oboe."}]
    extractor = LlamaExtractor(DEFAULT_EXTRACTOR, resolve_models_dir(), reproducible=True)
    texts, versions = [], set()
    try:
        for name, before in (("a", None), ("b", elsewhere)):
            m = Memory({"path": str(tmp_path / f"{name}.db"), "reproducible": True},
                       extractor=extractor)  # fmt: skip
            if before is not None:  # another prompt in the cache, sharing its rules with ours
                m.add(before, user_id="tomas")
            m.add(conversation, user_id="joana")
            texts.append([r["memory"] for r in m.get_all(filters={"user_id": "joana"})["results"]])
            versions |= {row[0] for row in m.store.db.query("SELECT prompt_version FROM memories")}
            m.store.close()
    finally:
        extractor.close()
    assert texts[0] == texts[1]
    assert texts[0], "the model extracted nothing"
    assert versions == {PROMPT_VERSION + REPRODUCIBLE_SUFFIX}


def test_the_check_reads_the_probability_of_changed(extractor):
    """`choose` is one forward pass whose probabilities agree with the greedy answer, and the
    supersession threshold sits between a plain change and added detail (measured:
    benchmarks/results/check_threshold.json; the pairs are from benchmarks/extraction/run.py)."""
    from types import SimpleNamespace

    from offline_mem.extraction.supersession import (
        ANSWER_PREFIX,
        CHANGE_THRESHOLD,
        OPTIONS,
        build_check_prompt,
    )

    def prompt(old: str, new: str):
        return build_check_prompt(
            SimpleNamespace(text=old, observed_at="2026-01-05", created_at=None),  # type: ignore[arg-type]
            SimpleNamespace(text=new, observed_at="2026-11-29"),  # type: ignore[arg-type]
            now_day=None, instructions=None,
        )  # fmt: skip

    quit_job = prompt("User works at Google as a data analyst.",
                      "User quit Google and now works at Microsoft.")  # fmt: skip
    gloves = prompt("User goes rowing every Sunday morning.",
                    "User bought a new pair of rowing gloves.")  # fmt: skip
    for case in (quit_job, gloves):
        p = extractor.choose(case, ANSWER_PREFIX, OPTIONS)
        assert set(p) == set(OPTIONS) and sum(p.values()) == pytest.approx(1.0)
        assert (p[" true"] > p[" false"]) == extractor.extract(case).data["changed"]
    assert extractor.choose(quit_job, ANSWER_PREFIX, OPTIONS)[" true"] >= CHANGE_THRESHOLD
    assert extractor.choose(gloves, ANSWER_PREFIX, OPTIONS)[" true"] < 0.5


def test_an_async_add_is_searchable_at_once_and_extracted_in_the_background(extractor, tmp_path):
    """The real pinned models end to end: an async add returns PENDING, its turns are found by
    `search` as soon as it returns, and the worker thread's job adds the facts, citing them."""
    m = Memory({"path": str(tmp_path / "m.db")}, extractor=extractor)
    turns = [
        {"role": "user", "content": "I'm Joana. I adopted two cats last week, Miso and Tofu."},
        {"role": "assistant", "content": "Two cats! How are they settling in?"},
    ]
    try:
        queued = m.add(turns, user_id="joana", async_mode=True)
        assert queued["results"] == [] and queued["status"] == "PENDING"
        hits = m.search("Joana's cats Miso and Tofu", filters={"user_id": "joana"})["results"]
        assert hits and hits[0]["kind"] == "message" and hits[0]["content"] == turns[0]["content"]
        m.flush(timeout=900)
        job = m.job(queued["event_id"])
        assert job is not None and job["status"] == "SUCCEEDED", job
        memories = m.get_all(filters={"user_id": "joana"})["results"]
        assert memories, "the model extracted nothing"
        assert {r["id"] for r in job["results"] if r["event"] == "ADD"} == {
            r["id"] for r in memories
        }
        assert any("cat" in r["memory"].lower() for r in memories), memories
        message_id = hits[0]["id"]
        cited = m.get(message_id)["memory_ids"]
        assert cited and set(cited) <= {r["id"] for r in memories}
        assert m.pending() == 0 and m.failed_jobs() == []
    finally:
        m._worker.stop()  # the session's extractor stays open for the other tests
        m.store.close()


def test_each_fact_of_a_named_dialogue_is_about_the_person_who_said_it(extractor, tmp_path):
    """Two named people, the traps read on real dialogue: a question to the other person, an
    echo ("me too"), a reply about oneself. Every fact of a message starts with its speaker's
    name (the answer's grammar), so the cello stays Priya's and the running Tomasz's."""
    m = Memory({"path": str(tmp_path / "m.db")}, extractor=extractor)
    turns = [
        {"role": "user", "name": "Priya", "timestamp": "2026-03-02T10:00:00",
         "content": "I started learning the cello last month. Have you ever played an "
                    "instrument, Tomasz?"},
        {"role": "assistant", "name": "Tomasz", "timestamp": "2026-03-02T10:01:00",
         "content": "Never, but I run every morning before work. I love autumn too."},
        {"role": "user", "name": "Priya", "timestamp": "2026-03-02T10:02:00",
         "content": "Autumn is my favourite season! My brother Arjun is a pilot."},
    ]  # fmt: skip
    try:
        m.add(turns, user_id="chat")
        facts = [r["memory"] for r in m.get_all(filters={"user_id": "chat"})["results"]]
    finally:
        m.store.close()
    assert any("cello" in f.lower() for f in facts), facts
    assert any("run" in f.lower() for f in facts), facts
    for fact in facts:
        assert fact.startswith(("Priya", "Tomasz")), fact
        said_by = "Priya" if any(w in fact.lower() for w in ("cello", "arjun", "pilot")) else None
        said_by = "Tomasz" if "run" in fact.lower() else said_by
        if said_by is not None:
            assert fact.startswith(said_by), (fact, facts)


def test_a_past_event_stays_and_a_stated_change_supersedes(extractor, tmp_path):
    """Two named people: news about the same person (a sister moving) does not end a past event
    (a hike with her), while a plainly stated change (pottery quit for climbing) supersedes the
    old habit. Measured with check-1, the hike was superseded (P(changed) above 0.7; now 0.56),
    as on the dev set, where an old car's breakdown ended a trip made in the new one."""
    m = Memory({"path": str(tmp_path / "m.db")}, extractor=extractor)
    turns = [
        ("Lena", "Hey Rui! I just got back from a week of hiking in the Dolomites with my sister."),
        ("Rui", "That sounds amazing! I started pottery classes last month, every Tuesday "
                "evening."),
        ("Lena", "Pottery, nice! My sister is moving to Oslo in June for a new job at a hospital."),
        ("Rui", "Wow. By the way, I sold my old bike and bought an electric one yesterday."),
        ("Lena", "How is the pottery going?"),
        ("Rui", "I quit pottery, it wasn't for me. Now I go climbing every Tuesday evening "
                "instead."),
    ]  # fmt: skip
    events = []
    try:
        for start, day in ((0, "2024-05-08"), (2, "2024-05-08"), (4, "2024-07-02")):
            messages = [
                {"role": "user" if n == "Lena" else "assistant", "name": n, "content": text,
                 "timestamp": f"{day}T10:00:00Z"}
                for n, text in turns[start : start + 2]
            ]  # fmt: skip
            events.append(m.add(messages, user_id="chat")["results"])
        active = [r["memory"] for r in m.get_all(filters={"user_id": "chat"})["results"]]
    finally:
        m.store.close()
    assert not any(r["event"] == "SUPERSEDE" for r in events[0] + events[1]), events
    assert any("hiking" in f for f in active), active
    ended = [r["memory"] for r in events[2] if r["event"] == "SUPERSEDE"]
    assert any("pottery" in f for f in ended), events[2]
    assert not any("pottery classes" in f for f in active), active


def test_every_model_call_runs_on_one_thread_whoever_calls(extractor, tmp_path):
    """llama.cpp runs slower once two threads have called it (model_thread.py): a synchronous
    add from the caller's thread and a queued job from the worker evaluate on the same thread."""
    import threading

    llm = extractor.call_model(lambda llm, _cancelled: llm)
    evaluated_on: set[int] = set()
    evaluate = llm.eval

    def spy(tokens):
        evaluated_on.add(threading.get_ident())
        return evaluate(tokens)

    llm.eval = spy
    m = Memory({"path": str(tmp_path / "m.db")}, extractor=extractor)
    try:
        m.add("I'm Priya and I keep bees on my roof.", user_id="priya")
        caller = threading.Thread(target=lambda: m.add("I also grow tomatoes.", user_id="priya"))
        caller.start()
        caller.join()
        m.add("My hives are blue.", user_id="priya", async_mode=True)
        m.flush(timeout=900)
        assert len(evaluated_on) == 1
        assert evaluated_on.isdisjoint({threading.get_ident(), caller.ident})
    finally:
        del llm.eval  # the session's extractor stays as it was for the other tests
        m._worker.stop()
        m.store.close()


def test_an_answer_cut_at_its_token_limit_keeps_the_facts_it_finished(extractor):
    """Measured on the dev set: 2 of 383 adds ran past the answer's token limit and failed
    whole. The facts finished before the cut are kept; the unfinished one is dropped."""
    import json

    from offline_mem.pinned.extractor import Prompt

    schema = {
        "type": "object",
        "properties": {"1": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False,
    }
    messages = (
        {"role": "system", "content": 'List the facts of the message as {"1": ["fact", ...]}.'},
        {"role": "user", "content": "Priya keeps bees in Lyon, rides a blue bicycle to work at "
                                    "the opera, and has a sister called Ines who is a pilot."},
    )  # fmt: skip
    whole = extractor.extract(Prompt("facts", messages, schema, max_tokens=200))
    assert not whole.truncated and len(whole.data["1"]) >= 2, whole.text
    limit = whole.completion_tokens - 4  # inside the last fact or its closing brackets
    cut = extractor.extract(Prompt("facts", messages, schema, max_tokens=limit))
    assert cut.truncated
    with pytest.raises(ValueError):
        json.loads(cut.text)  # the answer really was cut
    assert set(cut.data) <= {"1"} and 1 <= len(cut.data.get("1", [])) < len(whole.data["1"])
    assert all(fact and f'"{fact}"' in cut.text for fact in cut.data["1"])
    # cut inside the first fact (dev set: 1 add of 383): nothing to keep, but no error either,
    # so the add still stores its turns
    early = extractor.extract(Prompt("facts", messages, schema, max_tokens=6))
    assert early.truncated and early.data == {}, early.text
