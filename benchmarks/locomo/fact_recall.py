"""Fact recall and precision of a run's stored facts against LoCoMo's own gold facts.

LoCoMo lists, per session and speaker, the facts a turn states (`observation` ->
`session_N_observation` -> speaker -> [[fact, dia_id], ...]). They are the scoring key only:
never in a prompt, a rule or a word list. A gold fact counts as recalled when a stored fact of
the same conversation is within cosine THRESHOLD of it (the pinned MiniLM embedder); a stored
fact counts as matching when it is that close to some gold fact of its conversation. Reported
overall, per speaker (speaker_a, whom the run adds as the user, and speaker_b) and per session,
at each threshold asked for.

    .venv/bin/python -m benchmarks.locomo.run --data locomo_dev.json --systems offline_mem \\
        --workdir /tmp/run --name dev8
    .venv/bin/python -m benchmarks.locomo.fact_recall --data locomo_dev.json \\
        --db /tmp/run/offline_mem/offline_mem.db --out benchmarks/results/fact_recall_dev8.json

The texts are not written into the result (scores and counts only); `--show N` prints N gold
facts with their best stored fact, to read what a threshold accepts.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_SESSIONS = 4
DEFAULT_THRESHOLDS = (0.7, 0.8)
PAGE = 10_000
SESSION_KEY = re.compile(r"session_(\d+)_observation$")
PERSON_WORD = re.compile(r"[^\W_]+")  # "I'm" reads as "I" and "m"


def gold_facts(sample: dict[str, Any], sessions: int) -> list[dict[str, Any]]:
    """[{session, speaker ('speaker_a'/'speaker_b'), text, dia_id}] of the first `sessions`."""
    conversation = sample["conversation"]
    side = {conversation["speaker_a"]: "speaker_a", conversation["speaker_b"]: "speaker_b"}
    out = []
    for key, by_speaker in sample.get("observation", {}).items():
        found = SESSION_KEY.match(key)
        if not found or int(found.group(1)) > sessions:
            continue
        for speaker, facts in by_speaker.items():
            for item in facts:
                text, dia_id = item[0], item[1] if len(item) > 1 else None
                out.append({"session": int(found.group(1)), "speaker": side.get(speaker, "other"),
                            "text": str(text), "dia_id": dia_id})  # fmt: skip
    return out


def stored_facts(memory: Any, user_id: str) -> list[dict[str, Any]]:
    """Every fact the run stored for a conversation, superseded ones included."""
    out: list[dict[str, Any]] = []
    while True:  # in pages: get_all returns at most 10,000 at a time
        page = memory.get_all(filters={"user_id": user_id}, top_k=PAGE, offset=len(out),
                              include_superseded=True)["results"]  # fmt: skip
        out += page
        if len(page) < PAGE:
            return [item for item in out if item.get("kind", "fact") == "fact"]


def best_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of a (unit vectors), its best cosine against the rows of b (-1 if none)."""
    if len(a) == 0:
        return np.zeros(0)
    if len(b) == 0:
        return np.full(len(a), -1.0)
    return np.asarray((a @ b.T).max(axis=1))


def in_person(text: str) -> bool:
    """Whether a fact holds a first- or second-person word ("I", "my", "you", ...): a fact is
    written in the third person, so such a word was copied from the turn (issue 46)."""
    from offline_mem.extraction.lexicon import ENGLISH

    said = {w.lower() for w in PERSON_WORD.findall(text)}
    return not said.isdisjoint(ENGLISH.first_person | ENGLISH.second_person)


def share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 3) if flags else None


def score(
    samples: list[dict[str, Any]],
    memory: Any,
    *,
    sessions: int,
    thresholds: tuple[float, ...],
    show: int = 0,
) -> dict[str, Any]:
    embed = memory.embedder.embed_batch
    per_threshold: dict[str, Any] = {}
    recalled: dict[float, list[tuple[dict[str, Any], bool]]] = defaultdict(list)
    matching: dict[float, list[bool]] = defaultdict(list)
    counts = {"gold": 0, "stored": 0, "samples": 0, "in_person": 0}
    shown: list[tuple[str, str, float]] = []
    for sample in samples:
        gold = gold_facts(sample, sessions)
        facts = stored_facts(memory, sample["sample_id"])
        if not facts and not gold:
            continue
        counts["samples"] += 1
        counts["gold"] += len(gold)
        counts["stored"] += len(facts)
        counts["in_person"] += sum(in_person(f["memory"]) for f in facts)
        gold_vectors = embed([g["text"] for g in gold]) if gold else np.zeros((0, 1))
        fact_vectors = embed([f["memory"] for f in facts]) if facts else np.zeros((0, 1))
        to_stored = best_cosines(gold_vectors, fact_vectors)
        to_gold = best_cosines(fact_vectors, gold_vectors)
        for threshold in thresholds:
            recalled[threshold] += [
                (g, bool(c >= threshold)) for g, c in zip(gold, to_stored, strict=True)
            ]
            matching[threshold] += [bool(c >= threshold) for c in to_gold]
        if show and len(fact_vectors):
            best = (gold_vectors @ fact_vectors.T).argmax(axis=1) if len(gold) else []
            shown += [(g["text"], facts[int(j)]["memory"], float(c))
                      for g, j, c in zip(gold, best, to_stored, strict=True)]  # fmt: skip
    for threshold in thresholds:
        pairs = recalled[threshold]
        per_threshold[str(threshold)] = {
            "recall": share([ok for _, ok in pairs]),
            "recall_by_speaker": {
                side: share([ok for g, ok in pairs if g["speaker"] == side])
                for side in ("speaker_a", "speaker_b")
            },
            "recall_by_session": {
                str(n): share([ok for g, ok in pairs if g["session"] == n])
                for n in range(1, sessions + 1)
            },
            "precision": share(matching[threshold]),
        }
    if show:
        for gold_text, fact, cosine in random.Random(46).sample(shown, min(show, len(shown))):
            print(f"{cosine:.3f}  gold: {gold_text}\n       stored: {fact}")
    counts["in_person_share"] = share(
        [True] * counts["in_person"] + [False] * (counts["stored"] - counts["in_person"])
    )
    return {"sessions": sessions, **counts, "thresholds": per_threshold}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="the LoCoMo-format JSON file")
    p.add_argument("--db", type=Path, required=True, help="the run's offline_mem memory file")
    p.add_argument("--samples", help="sample ids, comma-separated (default: all in the file)")
    p.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
    p.add_argument("--thresholds", default=",".join(map(str, DEFAULT_THRESHOLDS)))
    p.add_argument("--show", type=int, default=0, help="print N gold facts with their match")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from offline_mem import Memory

    samples = json.loads(args.data.read_text())
    if args.samples:
        wanted = set(args.samples.split(","))
        samples = [s for s in samples if s["sample_id"] in wanted]
    thresholds = tuple(float(t) for t in args.thresholds.split(","))
    with Memory({"path": str(args.db), "job_worker": False}) as memory:
        result = score(samples, memory, sessions=args.sessions, thresholds=thresholds,
                       show=args.show)  # fmt: skip
    result["db_bytes"] = args.db.stat().st_size
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
