"""Generated filters, metadata and export lines: every call either succeeds or raises an
`OfflineMemError`, and a refused call leaves the memory file's bytes (with its WAL) as they were.

Hypothesis draws the inputs; OFFLINE_MEM_FUZZ_EXAMPLES sets the examples per test (default 100).
`benchmarks/fuzz_refusals.py` runs the same three tests with a count and reports the totals
(10,000 inputs: see docs/import-and-open-checks.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from writer_process import WordAnalyzer

from offline_mem import Memory, OfflineMemError
from offline_mem.store.filters import OPERATORS
from offline_mem.testing import FakeEmbedder, FakeEntities, FakeExtractor
from offline_mem.transfer.export import export_lines
from offline_mem.transfer.importer import import_data
from offline_mem.transfer.reader import read_export

EXAMPLES = int(os.environ.get("OFFLINE_MEM_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)  # fmt: skip
TALLY: dict[str, dict[str, int]] = {}  # test -> {"ok": n, "refused": n}, read by the benchmark

# -- strategies -----------------------------------------------------------------------------

BIG = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70, 2**80, -(2**100), 10**300]),
)
odd_text = st.one_of(
    st.text(max_size=20),
    st.text(st.characters(codec=None, categories=None), max_size=20),  # lone surrogates too
    st.sampled_from(["\x00", "a\nb", "*", "$.x", "'; DROP TABLE memories; --", "\ud800", ""]),
)
scalar = st.one_of(st.none(), st.booleans(), BIG, st.floats(), odd_text)
json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(odd_text, inner, max_size=3)
    ),
    max_leaves=10,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


deep = st.builds(nested, st.sampled_from([31, 32, 33, 100, 1000, 5000, 100_000]), scalar)
condition = st.one_of(
    scalar,
    deep,
    st.dictionaries(st.one_of(st.sampled_from(OPERATORS), odd_text),
                    st.one_of(scalar, st.lists(scalar, max_size=3), deep), max_size=3),
)  # fmt: skip
field_key = st.one_of(
    st.sampled_from(["n", "k", "user_id", "created_at", "role", "AND", "OR", "NOT"]), odd_text
)
filters = st.recursive(
    st.dictionaries(field_key, condition, max_size=3),
    lambda inner: st.dictionaries(st.sampled_from(["AND", "OR", "NOT"]),
                                  st.lists(inner, max_size=3), max_size=2),
    max_leaves=8,
).map(lambda f: {**f, "user_id": "u1"} if isinstance(f, dict) else f)  # fmt: skip
metadata = st.one_of(
    st.dictionaries(st.one_of(odd_text, st.sampled_from(["user_id", "n"])),
                    st.one_of(json_value, deep, BIG), max_size=4),
    json_value,
    deep,
)  # fmt: skip

# -- the file and the check ------------------------------------------------------------------


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for part in (path, Path(str(path) + "-wal")):
        h.update(part.read_bytes() if part.exists() else b"-")
    return h.hexdigest()


def open_memory(path: Path) -> Memory:
    return Memory({"path": str(path), "job_worker": False}, embedder=FakeEmbedder(),
                  extractor=FakeExtractor(), entities=FakeEntities(),
                  analyzer=WordAnalyzer())  # fmt: skip


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("fuzz") / "memory.db"
    with open_memory(path) as mem:
        mem.add("n is seven", user_id="u1", metadata={"n": 7, "k": "a"}, infer=False)
        mem.add("another one", user_id="u2", metadata={"n": 2**63 - 1}, infer=False)
        yield mem


def attempt(name: str, path: Path, call: Callable[[], Any]) -> None:
    """Run the call: a refusal must be an OfflineMemError and leave the file's bytes as they
    were; any other exception fails the test."""
    counts = TALLY.setdefault(name, {"ok": 0, "refused": 0})
    before = digest(path)
    try:
        call()
    except OfflineMemError as exc:
        assert digest(path) == before, f"{type(exc).__name__} changed the file"
        assert str(exc)
        counts["refused"] += 1
        return
    counts["ok"] += 1


@FUZZ
@given(where=filters, search=st.booleans())
def test_filters(memory: Memory, where: Any, search: bool) -> None:
    path = Path(memory.path)
    if search:
        attempt("filters", path, lambda: memory.search("seven", filters=where, threshold=None))
    else:
        attempt("filters", path, lambda: memory.get_all(filters=where))


@FUZZ
@given(meta=metadata)
def test_metadata(memory: Memory, meta: Any) -> None:
    attempt("metadata", Path(memory.path),
            lambda: memory.add("fuzzed", user_id="u1", metadata=meta, infer=False))  # fmt: skip


# -- export lines ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    path = tmp_path_factory.mktemp("fuzz-source") / "source.db"
    with open_memory(path) as mem:
        mem.add("I keep bees", user_id="u1", metadata={"k": 1}, infer=False)
        mem.add(
            [
                {"role": "user", "content": "hi", "name": "Ana"},
                {"role": "assistant", "content": "hello"},
            ],
            user_id="u2",
            infer=False,
        )
        lines = list(export_lines(mem.store.db, vectors=True))
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = tmp_path_factory.mktemp("fuzz-target") / "target.db"
    with open_memory(path) as mem:
        mem.add("already here", user_id="u9", infer=False)
        yield mem


def mutate(rows: list[dict[str, Any]], choice: int, key: str, value: Any) -> list[Any]:
    """A copy of the export with one field of one row (header included) replaced."""
    copy: list[Any] = json.loads(json.dumps(rows))
    row = copy[choice % len(copy)]
    fields = sorted(row)
    row[fields[choice % len(fields)] if key == "*" else key] = value
    return copy


raw_line = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["{", "[]", "null", '{"type": "memory"}', "NaN", '{"a": 1, "a": 2}',
                     "[" * 3000 + "]" * 3000, '{"n": ' + "9" * 5000 + "}", "\x00"]),
)  # fmt: skip


@FUZZ
@given(
    choice=st.integers(0, 50),
    key=st.one_of(st.just("*"), st.sampled_from(["id", "user_id", "scope", "sources", "vector",
                  "metadata", "created_at", "role", "text", "content", "counts", "type"])),
    value=st.one_of(json_value, deep, BIG),
    raw=st.one_of(st.none(), raw_line),
    where=st.integers(0, 50),
)  # fmt: skip
def test_import_lines(export, target: Memory, choice, key, value, raw, where) -> None:
    rows = mutate(export, choice, key, value)
    lines = []
    for row in rows:
        try:
            lines.append(json.dumps(row, ensure_ascii=False))
        except (ValueError, RecursionError):  # not JSON-writable: a garbage line instead
            lines.append("{")
    if raw is not None:
        lines.insert(where % (len(lines) + 1), raw)
    text = "\n".join(lines) + "\n"

    def run() -> None:
        import io

        data = read_export(io.StringIO(text))
        import_data(target, data)

    attempt("import lines", Path(target.path), run)
