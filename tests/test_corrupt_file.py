"""A damaged memory file gives a typed error (CorruptFileError / StoreError), never a crash.

A real memory file is truncated to many lengths, has each header byte flipped, has random pages
scribbled on, is replaced by garbage, or is another application's SQLite database. Every variant
is opened and used (list, search, add, update, delete_all) in a child process — so that a
segfault in SQLite or sqlite-vec is caught and named — which reports, per variant, the first
error or "ok". Only errors deriving from OfflineMemError may appear.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()


def make_memory(path: str) -> Any:
    sys.path.insert(0, str(HERE.parent))
    from writer_process import make_memory as make

    return make(path)


def build_original(path: Path) -> bytes:
    memory = make_memory(str(path))
    names = ["Lisbon", "Marta", "Porto", "Kenji"]
    for i in range(120):
        text = f"memory {i} about {names[i % 4]} and the garden " + "detail " * (i % 7)
        memory.add(text, user_id=f"u{i % 3}", metadata={"i": i}, infer=False)
    memory.close()
    assert not Path(str(path) + "-wal").exists() or Path(str(path) + "-wal").stat().st_size == 0
    return path.read_bytes()


def use(path: str) -> str:
    """Open and exercise the file; "ok" or the first exception as 'Type: message'."""
    from offline_mem import OfflineMemError

    try:
        memory = make_memory(path)
        try:
            for user in ("u0", "u1", "u2"):
                found = memory.get_all(
                    filters={"user_id": user}, top_k=10_000, show_expired=True,
                    include_superseded=True,
                )["results"]  # fmt: skip
                memory.search("garden Lisbon", filters={"user_id": user}, threshold=None)
                if found:
                    memory.update(found[0]["id"], "changed text about Porto")
                    memory.history(found[0]["id"])
            memory.add("a new memory about Oslo", user_id="u0", infer=False)
            memory.delete_all(user_id="u1")
        finally:
            memory.close()
    except OfflineMemError as exc:
        return f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # an untyped error: the test fails on it
        return f"UNTYPED {type(exc).__name__}: {exc}"
    return "ok"


def child(folder: str) -> None:
    """Run every variant in the folder, printing one JSON line before and after each."""
    for name in sorted(os.listdir(folder)):
        if name.endswith(("-wal", "-shm", "-journal")) or name.startswith("_"):
            continue
        print(json.dumps({"start": name}), flush=True)
        print(json.dumps({"variant": name, "outcome": use(os.path.join(folder, name))}), flush=True)


# -- variants -----------------------------------------------------------------------------------


def foreign_databases(folder: Path) -> dict[str, bytes]:
    schemas = {
        "foreign_app": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO users (name) VALUES ('ada'), ('bob');",
        "foreign_meta": "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "INSERT INTO meta VALUES ('app', 'other');",
        "foreign_memories": "CREATE TABLE memories (id TEXT, text TEXT);"
        "INSERT INTO memories VALUES ('1', 'not ours');",
        "foreign_migrations": "CREATE TABLE migrations (id INTEGER PRIMARY KEY, migration TEXT,"
        " batch INTEGER); INSERT INTO migrations (migration, batch) VALUES ('create_users', 1);",
    }
    made = {}
    for name, sql in schemas.items():
        path = folder / f"_{name}"
        conn = sqlite3.connect(path)
        conn.executescript(sql)
        conn.close()
        made[name] = path.read_bytes()
    return made


def variants(original: bytes, folder: Path) -> dict[str, bytes]:
    size = len(original)
    page = int.from_bytes(original[16:18], "big")
    out: dict[str, bytes] = {}
    for length in sorted({1, 16, 50, 99, 100, 101, 512, page - 1, page, page + 1, 2 * page,
                          size // 4, size // 2, size - page, size - 1}):  # fmt: skip
        if 0 < length < size:
            out[f"truncated_{length:08d}"] = original[:length]
    for offset in range(100):
        data = bytearray(original)
        data[offset] ^= 0xFF
        out[f"header_{offset:03d}"] = bytes(data)
    rng = random.Random(5)
    for n in range(24):
        data = bytearray(original)
        start = rng.randrange(page, size - 64)
        for i in range(start, start + rng.choice([1, 8, 64])):
            data[i] = rng.randrange(256)
        out[f"scribbled_{n:02d}"] = bytes(data)
    out["garbage_random"] = bytes(rng.randrange(256) for _ in range(3 * page))
    out["garbage_zeros"] = bytes(2 * page)
    out["garbage_text"] = b"this is not a database\n" * 100
    out["garbage_magic_only"] = original[:100] + bytes(page - 100)
    out.update(foreign_databases(folder))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("corrupt")
    original = build_original(folder / "_original")
    made = variants(original, folder)
    for name, data in made.items():
        (folder / name.lstrip("_")).write_bytes(data)
    (folder / "directory").mkdir()
    (folder / "garbage_wal").write_bytes(original)
    (folder / "garbage_wal-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(4000))
    done = subprocess.run(
        [sys.executable, str(HERE), str(folder)], capture_output=True, text=True, timeout=600
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    started = [line["start"] for line in lines if "start" in line]
    outcomes = {line["variant"]: line["outcome"] for line in lines if "variant" in line}
    crashed = [name for name in started if name not in outcomes]
    assert done.returncode == 0 and not crashed, (
        f"the child crashed (rc {done.returncode}) on {crashed}: {done.stderr[-3000:]}"
    )
    page = int.from_bytes(original[16:18], "big")
    return {"outcomes": outcomes, "folder": folder, "made": made, "size": len(original),
            "page": page}  # fmt: skip


def test_no_variant_raises_an_untyped_error_or_crashes(report: dict[str, Any]) -> None:
    untyped = {k: v for k, v in report["outcomes"].items() if v.startswith("UNTYPED")}
    assert not untyped
    assert len(report["outcomes"]) > 140


def test_unreadable_files_are_refused_as_corrupt(report: dict[str, Any]) -> None:
    outcomes = report["outcomes"]
    refused = [name for name in outcomes if name.startswith(("garbage_", "truncated_0000"))]
    refused = [n for n in refused if n != "garbage_wal"]
    assert refused
    for name in refused:
        assert outcomes[name].startswith("CorruptFileError"), (name, outcomes[name])
    for offset in range(16):  # the magic string
        assert outcomes[f"header_{offset:03d}"].startswith("CorruptFileError")
    assert outcomes["directory"].startswith(("StoreError", "CorruptFileError"))


def test_truncated_files_never_pass_silently(report: dict[str, Any]) -> None:
    """A file cut short by at least a page has lost data: some operation must notice. (Cutting
    less can drop only bytes that were zero; SQLite reads a short last page zero-filled.)"""
    size, page = report["size"], report["page"]
    for name, outcome in report["outcomes"].items():
        if name.startswith("truncated_") and int(name.split("_")[1]) <= size - page:
            assert outcome != "ok", name


def test_a_bad_wal_file_is_ignored(report: dict[str, Any]) -> None:
    assert report["outcomes"]["garbage_wal"] == "ok"


@pytest.mark.parametrize(
    "name", ["foreign_app", "foreign_meta", "foreign_memories", "foreign_migrations"]
)
def test_another_applications_database_is_refused_and_left_untouched(report, name) -> None:
    assert report["outcomes"][name].startswith("CorruptFileError"), report["outcomes"][name]
    assert (report["folder"] / name).read_bytes() == report["made"][name]


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))  # this checkout's offline_mem
    child(sys.argv[1])
