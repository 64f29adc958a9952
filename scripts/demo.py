"""The demo behind scripts/demo: real pinned models, a fresh memory file, printed results."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from offline_mem import Memory
from offline_mem.retrieval.search import SearchRequest, hybrid_search
from offline_mem.store.filters import compile_filters


def show(title: str, payload: Any) -> None:
    print(f"\n== {title}")
    print(json.dumps(payload, indent=2, ensure_ascii=False))


def brief(results: dict[str, Any], *keys: str) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("memory", *keys) if k in r} for r in results["results"]]


def keyword_only_demo(memory: Memory) -> None:
    """A rare name the embedder confuses with a similar one; the keyword signal does not."""
    query = "Okonkwo phone"
    where = compile_filters({"user_id": "ana"})
    semantic = hybrid_search(
        memory.store, memory.embedder, memory.analyzer,
        SearchRequest(query=query, where=where, top_k=1, threshold=None, signals=("semantic",)),
    )  # fmt: skip
    show(f"vector similarity alone, top 1 for {query!r}", [r.text for r, _ in semantic])
    found = memory.search(query, filters={"user_id": "ana"}, top_k=1, explain=True)
    show(f"hybrid search({query!r}, explain=True)", brief(found, "score", "score_details"))


def extraction_demo(memory: Memory) -> None:
    """Facts extracted by the pinned GGUF, then a contradicting message supersedes one."""
    scope = {"user_id": "joana"}
    started = time.perf_counter()
    first = memory.add(
        [
            {"role": "user", "content": "Hi, I'm Joana. I live in Lisbon and work as a nurse."},
            {"role": "assistant", "content": "Nice to meet you, Joana!"},
            {"role": "user", "content": "My dog is called Rex and I'm allergic to cats."},
        ],
        **scope,
        timestamp="2026-03-02",
    )
    show(f"add(infer=True): {time.perf_counter() - started:.1f}s", brief(first, "event"))
    started = time.perf_counter()
    second = memory.add("I moved from Lisbon to Porto last month.", **scope, timestamp="2026-06-10")
    show(
        f"a contradicting message: {time.perf_counter() - started:.1f}s",
        brief(second, "event", "supersedes", "superseded_by"),
    )
    everything = memory.get_all(filters=scope, include_superseded=True)
    show("every memory of joana, with its state", brief(everything, "state", "superseded_by"))
    hits = memory.search("where does Joana live?", filters=scope, top_k=2)
    show(
        "search('where does Joana live?'): the move ranks first, found by the words of the fact "
        "it superseded, which stays hidden",
        brief(hits, "score"),
    )
    said = memory.search_messages("when did I move to Porto?", filters=scope, top_k=1)
    show(
        "search_messages('when did I move to Porto?'): the message itself, dated",
        [
            {k: r[k] for k in ("content", "observed_at", "score", "memory_ids")}
            for r in said["results"]
        ],
    )


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="offline_mem_demo_"))
    path = folder / "memory.db"
    print(f"memory file: {path}")
    with Memory({"path": str(path)}) as memory:
        started = time.perf_counter()
        added = memory.add(
            [
                {"role": "user", "content": "My name is Ana and I live in Lisbon."},
                {"role": "user", "content": "My gym locker is number 4417."},
                {"role": "user", "content": "I am allergic to peanuts."},
                {"role": "user", "content": "My sister Marta is a doctor in Porto."},
                {"role": "user", "content": "Dr. Okafor's phone number is 555-0192."},
                {"role": "user", "content": "Dr. Okonkwo works at the St. Mary clinic."},
            ],
            user_id="ana",
            infer=False,
        )
        show(f"add(infer=False): {time.perf_counter() - started:.2f}s", brief(added, "event"))
        for query in ("what food should I avoid?", "where does my sister work?"):
            found = memory.search(query, filters={"user_id": "ana"}, top_k=2)
            show(f"search({query!r})", brief(found, "score"))
        keyword_only_demo(memory)
        others = memory.search("locker", filters={"user_id": "bob"})
        show("search as another user sees nothing", others["results"])
        extraction_demo(memory)
    print(f"\nall state lives in one file: {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
