"""One SQLite connection with sqlite-vec loaded, WAL mode, a busy timeout and `atomic()`.

The stdlib `sqlite3` is used where it can load extensions; many Python builds (pyenv, macOS)
cannot, and then `sqlean` — a drop-in DB-API driver that bundles SQLite — is used instead.
Every statement goes through `Database.execute`, so a tracer sees (and tests can fail) each one.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import sqlite_vec

from .errors import CorruptFileError, StoreError

Tracer = Callable[[str, Sequence[Any]], None]


def _stdlib_can_load_extensions() -> bool:
    return hasattr(sqlite3.Connection, "enable_load_extension")


def sqlite_driver() -> ModuleType:
    """The DB-API module to use: stdlib sqlite3 when it can load extensions, else sqlean."""
    if _stdlib_can_load_extensions():
        return sqlite3
    import sqlean

    return sqlean


def _is_corruption(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


MIN_DATABASE_BYTES = 512  # SQLite's smallest page: a shorter non-empty file is a damaged one


def _refuse_stub(path: str) -> None:
    """SQLite treats some tiny files as empty databases and would silently start afresh."""
    if path == ":memory:" or not os.path.isfile(path):
        return
    size = os.path.getsize(path)
    if 0 < size < MIN_DATABASE_BYTES:
        raise CorruptFileError(
            f"{path!r} is not a readable memory file ({size} bytes: truncated or not a database); "
            "restore it from a backup or point `path` at another file"
        )


def _refuse_foreign(conn: Any, path: str) -> None:
    """A file with tables but without offline_mem's `migrations` table is not a memory file."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return
    columns = {row[1] for row in conn.execute("PRAGMA table_info(migrations)")}
    if columns != {"name", "applied_at"}:
        shown = ", ".join(sorted(tables)[:5])
        raise CorruptFileError(
            f"{path!r} is an SQLite database of another application (tables: {shown}), not a "
            "memory file; offline_mem leaves it untouched. Point `path` at another file"
        )


class Database:
    """A connection in autocommit mode; transactions are explicit through `atomic()`."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 30_000) -> None:
        self.path = path
        self.driver = sqlite_driver()
        self.tracer: Tracer | None = None
        self._depth = 0
        self._writing = False  # inside atomic(), as opposed to a read snapshot
        _refuse_stub(path)
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, never the driver.
            self.conn = self.driver.connect(
                path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
            )
        except self.driver.Error as exc:
            raise StoreError(f"cannot open memory file {path!r}: {exc}") from exc
        try:
            self.conn.enable_load_extension(True)
            sqlite_vec.load(self.conn)
            self.conn.enable_load_extension(False)
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Before anything writes (journal_mode writes the header): refuse another
            # application's database rather than adding our tables to it.
            _refuse_foreign(self.conn, path)
            if path != ":memory:":
                self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute(
                "PRAGMA synchronous = NORMAL" if path == ":memory:" else "PRAGMA synchronous = FULL"
            )
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except CorruptFileError:
            self.conn.close()
            raise
        except self.driver.DatabaseError as exc:
            self.conn.close()
            if _is_corruption(exc):
                raise CorruptFileError(
                    f"{path!r} is not a readable memory file ({exc}); restore it from a backup "
                    "or point `path` at another file"
                ) from exc
            raise StoreError(f"cannot open memory file {path!r}: {exc}") from exc

    # -- statements -------------------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors about the file become typed: CorruptFileError when SQLite says the file
        is damaged, StoreError otherwise (I/O, locks, read-only, sqlite-vec failures).
        IntegrityError and ProgrammingError stay as they are: they mean a bug here."""
        try:
            yield
        except (self.driver.IntegrityError, self.driver.ProgrammingError):
            raise
        except self.driver.DatabaseError as exc:
            if _is_corruption(exc):
                raise CorruptFileError(f"memory file {self.path!r} is corrupted: {exc}") from exc
            raise StoreError(f"memory file {self.path!r}: {exc}") from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.tracer is not None:
            self.tracer(sql, params)
        with self._translated():
            return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        if self.tracer is not None:
            self.tracer(sql, rows)
        with self._translated():
            return self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cursor = self.execute(sql, params)
        with self._translated():  # rows are read (and can fail) after execute returns
            return list(cursor.fetchall())

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = self.execute(sql, params)
        with self._translated():
            return cursor.fetchone()

    def _raw(self, sql: str) -> None:
        """A transaction-control statement that no tracer may fail."""
        with self._translated():
            self.conn.execute(sql)

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction (SAVEPOINT when nested); rolled back and re-raised on any error.

        BEGIN IMMEDIATE takes the write lock up front, so concurrent writers wait on the busy
        timeout instead of failing with SQLITE_BUSY when a read transaction tries to upgrade.
        """
        if self._depth:
            name = f"sp{self._depth}"
            self.execute(f"SAVEPOINT {name}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                self._raw(f"ROLLBACK TO {name}")
                self._raw(f"RELEASE {name}")
                raise
            self._depth -= 1
            self.execute(f"RELEASE {name}")
            return
        self.execute("BEGIN IMMEDIATE")
        self._depth = 1
        self._writing = True
        try:
            yield
            self.execute("COMMIT")
        except BaseException:
            self._depth = 0
            self._writing = False
            if self.conn.in_transaction:
                self._raw("ROLLBACK")  # never traced: a rollback must not be failable
            raise
        self._depth = 0
        self._writing = False

    @property
    def in_write(self) -> bool:
        """Whether a write transaction (`atomic`) is open: reads then see uncommitted rows."""
        return self._writing

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: several SELECTs see one consistent state of the file."""
        if self._depth:
            yield
            return
        self._raw("BEGIN")
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            self._raw("COMMIT")

    def close(self) -> None:
        self.conn.close()
