"""A writer for tests/test_postgres_crash.py, on a PostgreSQL database:

    python tests/pg_writer_process.py URL adds --proc K [--start N]
    python tests/pg_writer_process.py URL drain --extract-ms M [--log-jobs] [--stall-after N]

`adds`: raw adds of two messages each ("op<K>x<i> ..."), as user w<K> (or --user); every
fifth operation deletes, every seventh updates the user's newest memory. Before each call it
prints
{"t": "intent", "i": i, "op": ..., ...} (with the memory's id for a delete or an update) and
after it {"t": "ack", "i": i, ...} (with the new ids for an add; "gone" when another writer
deleted the memory first), flushed. `drain` runs the
queued extraction jobs with an extractor that takes M ms per job and answers "User said
<message>"; with --log-jobs it prints {"t": "extract", "said": <message>} for each job it
extracts, and with --stall-after N it prints {"t": "stalled"} in its (N+1)th extraction and
sleeps there, holding that job's claim until it is killed. Fake models.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from writer_process import WordAnalyzer  # spaCy's stand-in: starts in a fraction of a second

from offline_mem import Memory, MemoryNotFoundError
from offline_mem.pinned.extractor import Prompt
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor, answer, new_message_lines


class SlowEcho(FakeExtractor):
    def __init__(self, extract_ms: float, *, log_jobs: bool, stall_after: int | None) -> None:
        super().__init__()
        self.extract_ms = extract_ms
        self.log_jobs = log_jobs
        self.stall_after = stall_after
        self.extracted = 0

    def extract(self, prompt: Prompt) -> Any:
        if prompt.kind == "facts":
            time.sleep(self.extract_ms / 1000)
            said = new_message_lines(prompt)[0].split(": ", 1)[-1]
            if self.log_jobs:
                say(t="extract", said=said)
            if self.extracted == self.stall_after:
                say(t="stalled", said=said)
                time.sleep(3600)  # the claim is held until the test kills this process
            self.extracted += 1
            self.script.append(answer(f"User said {said}"))
        return super().extract(prompt)


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


def _gone(call: Any, *args: str) -> bool:
    """Run a delete or update; True when another writer deleted its memory first (a typed
    error, and nothing written)."""
    try:
        call(*args)
    except MemoryNotFoundError:
        return True
    return False


def adds(memory: Memory, proc: int, start: int, user: str) -> None:
    i = start
    while True:
        token = f"op{proc}x{i}"
        newest = memory.get_all(filters={"user_id": user}, top_k=1)["results"]
        target = newest[0]["id"] if newest else None
        if i % 5 == 4 and target is not None:
            say(t="intent", i=i, op="delete", id=target)
            say(t="ack", i=i, gone=_gone(memory.delete, target))
        elif i % 7 == 6 and target is not None:
            text = f"{token} updated text"
            say(t="intent", i=i, op="update", id=target, text=text)
            say(t="ack", i=i, gone=_gone(memory.update, target, text))
        else:
            messages = [{"role": "user", "content": f"{token} first turn about Lisbon gardens"},
                        {"role": "assistant", "content": f"{token} second turn"}]  # fmt: skip
            say(t="intent", i=i, op="add", texts=[m["content"] for m in messages])
            out = memory.add(messages, user_id=user, infer=False)
            say(t="ack", i=i, ids=[r["id"] for r in out["results"]])
        i += 1


def main() -> int:
    """Any exception is fatal: the traceback goes to stderr and the process exits 1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("mode", choices=("adds", "drain"))
    parser.add_argument("--proc", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--user", help="the user to write as (default w<K>)")
    parser.add_argument("--extract-ms", type=float, default=0.0)
    parser.add_argument("--log-jobs", action="store_true")
    parser.add_argument("--stall-after", type=int)
    args = parser.parse_args()
    extractor = SlowEcho(args.extract_ms, log_jobs=args.log_jobs, stall_after=args.stall_after)
    with Memory({"store": args.url, "job_worker": False}, embedder=FakeEmbedder(),
                extractor=extractor, entities=FakeEntities(),
                analyzer=WordAnalyzer()) as memory:  # fmt: skip
        say(t="ready")
        if args.mode == "adds":
            adds(memory, args.proc, args.start, args.user or f"w{args.proc}")
        else:
            memory.flush(timeout=600)
            say(t="drained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
