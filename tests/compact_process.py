"""A writer for the kill-during-compact test: adds, delete_all and compact, in a loop.

    python tests/compact_process.py DB START

Round i adds "keep note <i>" to user "keep" and prints {"t": "ack", "i": i} once the add
returned; it then adds 20 notes to a churn user, deletes another churn user's notes and
compacts, printing {"t": "compacting", "i": i} before and {"t": "compacted", "i": i} after. It
runs until killed. Fake models: a start takes a fraction of a second.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from writer_process import WordAnalyzer

from offline_mem import Memory
from offline_mem.testing import FakeEmbedder


def say(**line: object) -> None:
    print(json.dumps(line), flush=True)


def main() -> None:
    path, start = sys.argv[1], int(sys.argv[2])
    config = {"path": path, "nlp": None}
    with Memory(config, embedder=FakeEmbedder(), analyzer=WordAnalyzer()) as memory:
        say(t="ready")
        i = start
        while True:
            memory.add(f"keep note {i}", user_id="keep", infer=False)
            say(t="ack", i=i)
            churn = [{"role": "user", "content": f"churn {i} line {j}"} for j in range(20)]
            memory.add(churn, user_id=f"churn{i % 3}", infer=False)
            memory.delete_all(user_id=f"churn{(i + 1) % 3}")
            say(t="compacting", i=i)
            memory.compact()
            say(t="compacted", i=i)
            i += 1


if __name__ == "__main__":
    main()
