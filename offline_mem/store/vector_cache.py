"""An in-memory copy of large vector partitions, for exact KNN by one matrix product.

Why: an exact scan in SQL (sqlite-vec's `vec_distance_cosine` over a scope's rows) costs about
a microsecond per row, so a 100k-row scope would take ~100 ms per query; numpy does the same
100k x 384 product in ~8 ms. The file stays the only source of truth: the cache holds a
partition's vectors (owner rowid -> float32 row, normalised so a dot product is the cosine
similarity) and is kept in step through a change log that triggers write in the same
transaction as every vector change (migrations 003 and 008). Before each use the cache reads the
log entries after the last one it applied and re-reads just those rows, so writes from this or
any other process are seen, and a rolled-back write never is (see `_usable`).

A partition is a user's rows (`user_id`, or those without one): the owner table's index on
`user_id` finds them. Only partitions of at least `min_rows` rows are held (the SQL scan is
already fast below that), least recently used first out when the byte budget is reached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .db import Database

DEFAULT_BUDGET_MB = 512
DEFAULT_MIN_ROWS = 2_000
# Past this many changed rows since the last use, one reload is cheaper than row lookups.
RELOAD_AFTER_CHANGES = 2_000


@dataclass(frozen=True)
class VectorTable:
    """A table of vectors (rowid = its owner's key, one float32 BLOB each), the table of the
    rows that own them (they carry the scope) and the log of which owners' vectors changed.
    `values` is what readers read: the table, or a view that adds vectors shared with another
    table (a message's, linked to its raw memory's: migration 012)."""

    vectors: str
    owner: str
    owner_key: str
    changes: str
    changes_key: str
    values: str

    def partition_clause(self, partition: str, alias: str = "o") -> tuple[str, list[str]]:
        """The owner rows of a partition, through the owner's user_id index."""
        if partition == "":
            return f"{alias}.user_id IS NULL", []
        return f"{alias}.user_id = ?", [partition]


MEMORY_VECTORS = VectorTable(
    "memory_vectors", "memories", "rowid", "vector_changes", "memory_rowid", "memory_vectors"
)
MESSAGE_VECTORS = VectorTable(
    "message_vectors", "messages", "seq", "message_vector_changes", "message_seq",
    values="message_vector_values",
)  # fmt: skip


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
    """Partitions of one vector `table` held in memory while they are large enough and fit in
    `budget_mb`. Thread-safe; one per connection."""

    def __init__(
        self,
        db: Database,
        table: VectorTable = MEMORY_VECTORS,
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

    # -- queries ------------------------------------------------------------------------------

    def top(self, partition: str, query: np.ndarray, fetch: int) -> list[tuple[int, float]] | None:
        """The `fetch` rows of the partition most similar to the query, best first, or None when
        the partition is not held (the caller scans the rows in SQL)."""
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
        # rollback may take back: the cache must not learn them, so the SQL scan answers instead.
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
        if self._count(partition) < self.min_rows:  # on the owner's user_id index: cheap
            return None
        loaded = self._load(partition, newest)
        if loaded.nbytes > self.budget_bytes:
            self._too_large.add(partition)
            return None
        self._held[partition] = loaded
        self._evict()
        return loaded

    def _log_bounds(self) -> tuple[int, int]:
        log = self.table.changes
        row = self.db.query_one(
            f"SELECT (SELECT max(seq) FROM {log}), (SELECT min(seq) FROM {log})"
        )
        return int(row[0] or 0), int(row[1] or 0)

    def _catch_up(self, part: _Partition, partition: str, newest: int, oldest: int) -> bool:
        """Apply the logged changes after `part.last_seq` up to `newest`; False when a full
        load is needed instead (the log was pruned past us, or too much changed)."""
        if oldest > part.last_seq + 1:
            return False
        t = self.table
        changed = [
            int(row[0])
            for row in self.db.query(
                f"SELECT DISTINCT {t.changes_key} FROM {t.changes}"
                " WHERE (partition = ? OR partition IS NULL) AND seq > ? AND seq <= ?",
                (partition, part.last_seq, newest),
            )
        ]
        if len(changed) > RELOAD_AFTER_CHANGES:
            return False
        for rowid in changed:
            row = self.db.query_one(
                f"SELECT o.user_id, v.embedding FROM {t.owner} o"
                f" JOIN {t.values} v ON v.rowid = o.{t.owner_key} WHERE o.{t.owner_key} = ?",
                (rowid,),
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

    def _count(self, partition: str) -> int:
        where, params = self.table.partition_clause(partition)
        row = self.db.query_one(f"SELECT count(*) FROM {self.table.owner} o WHERE {where}", params)
        return int(row[0])

    def _load(self, partition: str, last_seq: int) -> _Partition:
        self.loads += 1
        rowids, matrix = read_partition(self.db, self.table, partition)
        return _Partition.of(rowids, matrix, last_seq)


def read_partition(db: Database, t: VectorTable, partition: str) -> tuple[np.ndarray, np.ndarray]:
    """A partition's (owner rowids, vectors), in rowid order."""
    where, params = t.partition_clause(partition)
    rows = db.query(
        f"SELECT o.{t.owner_key}, v.embedding FROM {t.owner} o"
        f" JOIN {t.values} v ON v.rowid = o.{t.owner_key} WHERE {where} ORDER BY o.{t.owner_key}",
        params,
    )
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
