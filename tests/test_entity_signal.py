"""The entity signal reads links through indexes and checks visibility on the few rows it needs;
it must give what a full filtered read gives: the same best memories, counts and known names."""

from __future__ import annotations

import random

from offline_mem import Memory
from offline_mem.store.filters import compile_filters
from offline_mem.testing import FakeEmbedder, FakeEntities

NAMES = ["Ana", "Bruno", "Carla", "Dario"]


def brute_force(memory: Memory, norms, filters, limit):
    where = compile_filters(filters)
    sql, params = memory.store.search_filter(where)
    marks = ", ".join("?" for _ in norms)
    rows = memory.store.db.query(
        "SELECT l.memory_rowid, e.norm FROM entities e JOIN entity_links l "
        "ON l.entity_rowid = e.rowid JOIN memories m ON m.rowid = l.memory_rowid "
        f"WHERE e.norm IN ({marks}) AND {sql}",
        (*norms, *params),
    )
    per: dict[int, set[str]] = {}
    for rowid, norm in rows:
        per.setdefault(int(rowid), set()).add(norm)
    counts = {r: len(v) for r, v in per.items()}
    best = sorted(counts, key=lambda r: (-counts[r], r))[:limit]
    return {n for v in per.values() for n in v}, best, counts


def test_matches_a_full_filtered_read(tmp_path):
    rng = random.Random(5)
    m = Memory({"path": str(tmp_path / "m.db")}, embedder=FakeEmbedder(), entities=FakeEntities())
    for i in range(400):
        people = rng.sample(NAMES, rng.randint(1, 3))
        m.add(
            f"note {i} about " + " and ".join(people),
            user_id="u",
            infer=False,
            metadata={"keep": rng.random() < 0.15},  # most memories invisible to the filter
        )
    m.add("Dario only here", user_id="u", infer=False, metadata={"keep": False})
    for filters in ({"user_id": "u"}, {"user_id": "u", "keep": True}):
        for norms in (["ana"], ["ana", "bruno"], ["carla", "dario", "zed"], ["dario"]):
            for limit in (1, 5, 60):
                where = compile_filters(filters)
                signal = m.store.entity_candidates(
                    norms, where, m.store.search_filter(where), limit=limit
                )
                known, best, counts = brute_force(m, norms, filters, limit)
                assert signal.known == known
                assert signal.best == best
                assert all(signal.counts[r] == counts[r] for r in counts)
