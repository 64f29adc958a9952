"""An in-memory copy of large vector partitions, for exact KNN by one matrix product.

Why: sqlite-vec's KNN is a brute-force scan whose per-row cost made a 100k-memory scope take
~73 ms per query on a 2-core laptop; numpy does the same 100k x 384 product in ~8 ms. The file
stays the only source of truth: the cache holds a partition's vectors (rowid -> float32 row,
normalised so a dot product is vec0's cosine similarity) and is kept in step through
`vector_changes`, a log that triggers on `memories` write in the same transaction as every
vector change (migration 003). Before each use the cache reads the log entries after the last
one it applied and re-reads just those rows, so writes from this or any other process are seen,
and a rolled-back write never is (see `_usable`).

Loading reads sqlite-vec's shadow tables (`<table>_chunks`, `<table>_vector_chunks00`) straight
away, ~10x faster than `SELECT ... FROM <table>`; their layout is checked first and the plain
scan is the fallback. Tests compare both readers and the cached KNN with vec0's own answers.

Only partitions of at least `min_rows` rows are held (vec0 is already fast below that), least
recently used first out when the byte budget is reached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .db import Database

CHANGE_LOG = "vector_changes"
DEFAULT_BUDGET_MB = 512
DEFAULT_MIN_ROWS = 2_000
# Past this many changed rows since the last use, one reload is cheaper than row lookups.
RELOAD_AFTER_CHANGES = 2_000

_CHUNK_COLUMNS = {"chunk_id", "size", "sequence_id", "partition00", "validity", "rowids"}
_VECTOR_CHUNK_COLUMNS = {"rowid", "vectors"}


@dataclass
class _Partition:
    """One partition's vectors. Rows are appended in place (capacity doubles); a deleted row
    becomes dead (its slot is skipped) until the next full load compacts."""

    last_seq: int  # the newest change-log entry reflected here
    rowids: np.ndarray  # int64, one per slot
    matrix: np.ndarray  # float32, slots x dimension, unit rows
    live: np.ndarray  # bool, one per slot
    size: int  # slots in use
    slot_of: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, rowids: np.ndarray, matrix: np.ndarray, last_seq: int) -> _Partition:
        part = cls(last_seq, rowids, _unit_rows(matrix), np.ones(len(rowids), bool), len(rowids))
        part.slot_of = {int(r): i for i, r in enumerate(rowids.tolist())}
        return part

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + self.rowids.nbytes + self.live.nbytes

    @property
    def rows(self) -> int:
        return int(self.live[: self.size].sum())

    def put(self, rowid: int, vector: np.ndarray) -> None:
        slot = self.slot_of.get(rowid)
        if slot is None:
            if self.size == len(self.rowids):
                self._grow()
            slot = self.size
            self.size += 1
            self.slot_of[rowid] = slot
            self.rowids[slot] = rowid
        self.matrix[slot] = _unit_rows(vector.reshape(1, -1))[0]
        self.live[slot] = True

    def drop(self, rowid: int) -> None:
        slot = self.slot_of.pop(rowid, None)
        if slot is not None:
            self.live[slot] = False

    def _grow(self) -> None:
        capacity = max(16, 2 * len(self.rowids))
        self.rowids = np.resize(self.rowids, capacity)
        self.live = np.concatenate([self.live, np.zeros(capacity - len(self.live), bool)])
        grown = np.zeros((capacity, self.matrix.shape[1]), np.float32)
        grown[: len(self.matrix)] = self.matrix
        self.matrix = grown

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine of the query to every slot in use; dead slots get -inf."""
        scores = self.matrix[: self.size] @ query
        scores[~self.live[: self.size]] = -np.inf
        return scores


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    return _unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]


class VectorCache:
    """Partitions of one vec0 `table` (rowid = memories.rowid) held in memory while they are
    large enough and fit in `budget_mb`. Thread-safe; one per connection."""

    def __init__(
        self,
        db: Database,
        table: str = "memory_vectors",
        *,
        budget_mb: float = DEFAULT_BUDGET_MB,
        min_rows: int = DEFAULT_MIN_ROWS,
    ) -> None:
        self.db = db
        self.table = table
        self.budget_bytes = int(budget_mb * 2**20)
        self.min_rows = min_rows
        self._held: OrderedDict[str, _Partition] = OrderedDict()
        self._too_large: set[str] = set()  # larger than the whole budget: never held
        self._lock = threading.Lock()
        self.loads = 0  # full loads so far (for tests and benchmarks)
        self._shadow_layout = self._has_known_shadow_layout()

    # -- queries ------------------------------------------------------------------------------

    def top(self, partition: str, query: np.ndarray, fetch: int) -> list[tuple[int, float]] | None:
        """The `fetch` rows of the partition most similar to the query, best first, or None when
        the partition is not held (the caller asks vec0)."""
        with self._lock:
            part = self._usable(partition)
            if part is None:
                return None
            scores = part.similarities(_unit(query))
            return _best(part.rowids, scores, fetch)

    def top_among(
        self, partition: str, query: np.ndarray, k: int, allowed: Sequence[int]
    ) -> list[tuple[int, float]] | None:
        """The best k of the partition's rows whose rowid is in `allowed`."""
        with self._lock:
            part = self._usable(partition)
            if part is None:
                return None
            scores = part.similarities(_unit(query))
            keep = np.isin(part.rowids[: part.size], np.asarray(list(allowed), dtype=np.int64))
            scores[~keep] = -np.inf
            return _best(part.rowids, scores, k)

    def similarities(
        self, partition: str, query: np.ndarray, rowids: Sequence[int]
    ) -> dict[int, float] | None:
        """Cosine of the query to those of `rowids` held in the partition (others are left out:
        they may live in another partition), or None when the partition is not held."""
        with self._lock:
            part = self._usable(partition)
            if part is None:
                return None
            unit = _unit(query)
            found = {}
            for rowid in rowids:
                slot = part.slot_of.get(int(rowid))
                if slot is not None:
                    found[int(rowid)] = float(part.matrix[slot] @ unit)
            return found

    def rows(self, partition: str) -> dict[int, np.ndarray] | None:
        """The held partition's rows (rowid -> unit vector), for tests."""
        with self._lock:
            part = self._usable(partition)
            if part is None:
                return None
            return {r: part.matrix[s].copy() for r, s in part.slot_of.items()}

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._too_large.clear()

    # -- keeping in step with the file --------------------------------------------------------

    def _usable(self, partition: str) -> _Partition | None:
        # Inside a write transaction the connection sees its own uncommitted rows, which a
        # rollback may take back: the cache must not learn them, so vec0 answers instead.
        if self.db.in_write or self.budget_bytes <= 0:
            return None
        newest, oldest = self._log_bounds()
        part = self._held.get(partition)
        if part is not None:
            if part.last_seq < newest and not self._catch_up(part, partition, newest, oldest):
                del self._held[partition]
                part = None
            else:
                self._held.move_to_end(partition)
                return part
        if partition in self._too_large:
            return None
        if self._count(partition) < self.min_rows:  # counted from chunk bitmaps: cheap
            return None
        loaded = self._load(partition, newest)
        if loaded.nbytes > self.budget_bytes:
            self._too_large.add(partition)
            return None
        self._held[partition] = loaded
        self._evict()
        return loaded

    def _log_bounds(self) -> tuple[int, int]:
        row = self.db.query_one(
            f"SELECT (SELECT max(seq) FROM {CHANGE_LOG}), (SELECT min(seq) FROM {CHANGE_LOG})"
        )
        return int(row[0] or 0), int(row[1] or 0)

    def _catch_up(self, part: _Partition, partition: str, newest: int, oldest: int) -> bool:
        """Apply the logged changes after `part.last_seq` up to `newest`; False when a full
        load is needed instead (the log was pruned past us, or too much changed)."""
        if oldest > part.last_seq + 1:
            return False
        changed = [
            int(row[0])
            for row in self.db.query(
                f"SELECT DISTINCT memory_rowid FROM {CHANGE_LOG}"
                " WHERE partition = ? AND seq > ? AND seq <= ?",
                (partition, part.last_seq, newest),
            )
        ]
        if len(changed) > RELOAD_AFTER_CHANGES:
            return False
        for rowid in changed:
            row = self.db.query_one(
                f"SELECT user_id, embedding FROM {self.table} WHERE rowid = ?", (rowid,)
            )
            if row is None or (row[0] or "") != partition:
                part.drop(rowid)
            else:
                part.put(rowid, np.frombuffer(row[1], dtype=np.float32))
        part.last_seq = newest
        return True

    def _evict(self) -> None:
        held = sum(p.nbytes for p in self._held.values())
        while held > self.budget_bytes and len(self._held) > 1:
            _, dropped = self._held.popitem(last=False)
            held -= dropped.nbytes

    # -- reading partitions -------------------------------------------------------------------

    def _has_known_shadow_layout(self) -> bool:
        """Whether sqlite-vec's shadow tables have the layout this reader knows (0.1.x)."""
        chunks = {r[1] for r in self.db.query(f"PRAGMA table_info({self.table}_chunks)")}
        vectors = {r[1] for r in self.db.query(f"PRAGMA table_info({self.table}_vector_chunks00)")}
        return chunks == _CHUNK_COLUMNS and vectors == _VECTOR_CHUNK_COLUMNS

    def _count(self, partition: str) -> int:
        if self._shadow_layout:
            rows = self.db.query(
                f"SELECT size, validity FROM {self.table}_chunks WHERE partition00 = ?",
                (partition,),
            )
            return sum(int(_valid(size, validity).sum()) for size, validity in rows)
        row = self.db.query_one(
            f"SELECT count(*) FROM {self.table} WHERE user_id = ?", (partition,)
        )
        return int(row[0])

    def _load(self, partition: str, last_seq: int) -> _Partition:
        self.loads += 1
        rowids, matrix = (
            read_partition_shadow(self.db, self.table, partition)
            if self._shadow_layout
            else read_partition_plain(self.db, self.table, partition)
        )
        return _Partition.of(rowids, matrix, last_seq)


def _valid(size: int, validity: bytes) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
    return bits[: int(size)].astype(bool)


def read_partition_shadow(
    db: Database, table: str, partition: str
) -> tuple[np.ndarray, np.ndarray]:
    """A partition's (rowids, vectors) from sqlite-vec's chunk tables: each chunk holds `size`
    slots, a validity bitmap (bit i of byte i//8, least significant first), the slots' int64
    rowids and their float32 vectors back to back."""
    ids, blocks = [], []
    rows = db.query(
        f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {table}_chunks c"
        f" JOIN {table}_vector_chunks00 v ON v.rowid = c.chunk_id"
        " WHERE c.partition00 = ? ORDER BY c.chunk_id",
        (partition,),
    )
    for size, validity, rowids, vectors in rows:
        valid = _valid(size, validity)
        slots = np.frombuffer(rowids, dtype=np.int64)[: int(size)]
        matrix = np.frombuffer(vectors, dtype=np.float32).reshape(int(size), -1)
        ids.append(slots[valid])
        blocks.append(matrix[valid])
    if not ids:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    return np.concatenate(ids), np.concatenate(blocks)


def read_partition_plain(db: Database, table: str, partition: str) -> tuple[np.ndarray, np.ndarray]:
    """The same through vec0's own scan (slow, layout-independent)."""
    rows = db.query(f"SELECT rowid, embedding FROM {table} WHERE user_id = ?", (partition,))
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return rowids, matrix


def _best(rowids: np.ndarray, scores: np.ndarray, count: int) -> list[tuple[int, float]]:
    """The `count` best finite scores, best first; ties by rowid so runs repeat exactly."""
    finite = np.flatnonzero(np.isfinite(scores))
    if len(finite) > count:
        part = np.argpartition(-scores[finite], count - 1)[:count]
        finite = finite[part]
    order = np.lexsort((rowids[finite], -scores[finite]))
    return [(int(rowids[i]), float(scores[i])) for i in finite[order]]
