"""100 randomly damaged copies of a memory file (byte flips, truncations down to 0 bytes, swapped
pages; seed 45): each is refused when opened, or `verify` reports it, or its damage fell on bytes
that hold no data (every row reads back as the original's, vectors to within 0.001: a page's free
space, or a vector's lowest bits).
None is opened and written as if sound. Each copy is tried in a child process, so a crash in
SQLite or sqlite-vec is caught and named.

`python tests/test_damaged_files.py FOLDER` is the child; `--report` prints the tally.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

HERE = Path(__file__).resolve()
SEED = 45
VARIANTS = 100


def open_memory(path: str, **config: Any) -> Any:
    sys.path.insert(0, str(HERE.parent))
    from writer_process import WordAnalyzer

    from offline_mem import Memory
    from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor

    return Memory({"path": path, "job_worker": False, **config}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(), entities=FakeEntities(),
                  analyzer=WordAnalyzer())  # fmt: skip


def build_original(path: Path) -> bytes:
    with open_memory(str(path)) as memory:
        names = ["Lisbon", "Marta", "Porto", "Kenji"]
        for i in range(150):
            text = f"memory {i} about {names[i % 4]} and the garden " + "detail " * (i % 7)
            memory.add(text, user_id=f"u{i % 3}", metadata={"i": i}, infer=False)
    return path.read_bytes()


def damaged_copies(original: bytes) -> dict[str, bytes]:
    rng = random.Random(SEED)
    size = len(original)
    page = int.from_bytes(original[16:18], "big")
    pages = size // page
    out: dict[str, bytes] = {"truncated_0000000000": b""}
    while len(out) < VARIANTS:
        kind = rng.choice(["flip", "flip", "truncate", "swap"])
        data = bytearray(original)
        if kind == "flip":
            for _ in range(rng.choice([1, 1, 2, 8])):
                data[rng.randrange(size)] ^= rng.randrange(1, 256)
        elif kind == "truncate":
            data = data[: rng.randrange(size)]
        else:
            a, b = rng.sample(range(pages), 2)
            data[a * page : (a + 1) * page], data[b * page : (b + 1) * page] = (
                original[b * page : (b + 1) * page],
                original[a * page : (a + 1) * page],
            )
        if bytes(data) != original:
            out[f"{kind}_{len(out):03d}"] = bytes(data)
    return out


VECTOR_TABLES = ("memory_vectors", "message_vectors")


def dump(path: str) -> Any:
    """Every table's rows; each vector read back as float32 values."""
    sys.path.insert(0, str(HERE.parent))
    from invariants import table_dump

    from offline_mem.store.db import Database

    db = Database(path, check=False)
    try:
        tables = table_dump(db)
        vectors = {
            table: {
                int(rowid): np.frombuffer(bytes(blob), dtype=np.float32)
                for rowid, blob in db.query(f"SELECT rowid, embedding FROM {table}")
            }
            for table in VECTOR_TABLES
        }
    finally:
        db.close()
    rows = {k: v for k, v in tables.items() if not k.startswith(VECTOR_TABLES)}
    return rows, vectors


def same_data(a: Any, b: Any) -> bool:
    """Equal rows, and the same vectors to within 0.001 in every value (a flip of a float's
    lowest bits keeps it a unit vector, and ranks as before)."""
    if a[0] != b[0]:
        return False
    for table in VECTOR_TABLES:
        x, y = a[1][table], b[1][table]
        if x.keys() != y.keys():
            return False
        for rowid, vector in x.items():
            other = y[rowid]
            if vector.shape != other.shape:
                return False
            if not np.allclose(vector, other, rtol=0, atol=1e-3):
                return False
    return True


def outcome(path: str, original_dump: Any) -> str:
    """ "open: <error>", "verify: <problems>", "same data" (every row reads as the original's:
    the damage fell on unused bytes) or "ACCEPTED" (opened, verified, and different: a damaged
    file taken as sound)."""
    from offline_mem import OfflineMemError
    from offline_mem.store.integrity import verify_file

    try:
        memory = open_memory(path)
    except OfflineMemError as exc:
        return f"open: {type(exc).__name__}"
    except Exception as exc:
        return f"UNTYPED {type(exc).__name__}: {exc}"
    try:
        report = verify_file(memory.store.db, embedder=memory.embedder.identity)
    except OfflineMemError as exc:
        return f"verify: {type(exc).__name__}"
    except Exception as exc:
        return f"UNTYPED {type(exc).__name__}: {exc}"
    finally:
        memory.close()
    if not report.ok:
        return "verify: " + ", ".join(sorted({p.check for p in report.problems}))
    try:
        same = same_data(dump(path), original_dump)
    except OfflineMemError:
        return "verify: unreadable rows"
    return "same data" if same else "ACCEPTED"


def child(folder: str) -> None:
    original_dump = dump(os.path.join(folder, "_original"))
    for name in sorted(os.listdir(folder)):
        if name.startswith("_") or name.endswith(("-wal", "-shm")):
            continue
        print(json.dumps({"start": name}), flush=True)
        result = outcome(os.path.join(folder, name), original_dump)
        print(json.dumps({"variant": name, "outcome": result}), flush=True)


def run_all(folder: Path) -> dict[str, str]:
    original = build_original(folder / "_original")
    for name, data in damaged_copies(original).items():
        (folder / name).write_bytes(data)
    done = subprocess.run(
        [sys.executable, str(HERE), str(folder)], capture_output=True, text=True, timeout=900
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    started = [line["start"] for line in lines if "start" in line]
    outcomes = {line["variant"]: line["outcome"] for line in lines if "variant" in line}
    crashed = [name for name in started if name not in outcomes]
    assert done.returncode == 0 and not crashed, (
        f"the child crashed (rc {done.returncode}) on {crashed}: {done.stderr[-3000:]}"
    )
    return outcomes


def tally(outcomes: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in outcomes.values():
        key = result.split(":")[0] if ":" in result else result
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return run_all(tmp_path_factory.mktemp("damaged"))


def test_every_damaged_copy_is_refused_or_holds_the_same_rows(outcomes: dict[str, str]) -> None:
    assert len(outcomes) == VARIANTS
    wrong = {k: v for k, v in outcomes.items() if v.startswith(("UNTYPED", "ACCEPTED"))}
    assert not wrong, (wrong, tally(outcomes))


def test_truncations_are_refused_when_opened_and_swaps_when_opened_or_verified(
    outcomes: dict[str, str],
) -> None:
    """A swap of two indexes' root pages leaves two well-formed B-trees that the open check
    (quick_check) passes; `verify`'s integrity_check compares each index with its table
    (docs/import-and-open-checks.md). Every other swap is refused when opened."""
    for name, result in outcomes.items():
        if name.startswith(("truncated", "truncate")):
            assert result.startswith(("open:", "same data")), (name, result)
        if name.startswith("swap"):
            assert result.startswith(("open:", "same data", "verify: sqlite")), (name, result)
    assert outcomes["truncated_0000000000"] == "open: CorruptFileError"


if __name__ == "__main__":
    sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]  # this checkout's offline_mem
    if sys.argv[1] == "--report":
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            found = run_all(Path(tmp))
        print(json.dumps({"tally": tally(found), "outcomes": found}, indent=2))
    else:
        child(sys.argv[1])
