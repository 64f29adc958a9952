"""One SQLite connection with sqlite-vec loaded, WAL mode, a busy timeout and `atomic()`.

The stdlib `sqlite3` is used where it can load extensions; many Python builds (pyenv, macOS)
cannot, and then `sqlean` — a drop-in DB-API driver that bundles SQLite — is used instead.
Every statement goes through `Database.execute`, so a tracer sees (and tests can fail) each one.
A file is created and checked on open by open_checks.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import sqlite_vec

from ..errors import CorruptFileError, StoreError
from .open_checks import (
    PAGE_SIZE,
    create_file,
    damaged,
    is_corruption,
    quick_check,
    refuse_foreign,
    refuse_stub,
)

Tracer = Callable[[str, Sequence[Any]], None]


def _stdlib_can_load_extensions() -> bool:
    return hasattr(sqlite3.Connection, "enable_load_extension")


def sqlite_driver() -> ModuleType:
    """The DB-API module to use: stdlib sqlite3 when it can load extensions, else sqlean."""
    if _stdlib_can_load_extensions():
        return sqlite3
    import sqlean

    return sqlean


class Database:
    """Connections in autocommit mode; transactions are explicit through `atomic()`.

    Thread safety by design: each thread gets its own connection to the file, with its own
    transaction state, so one thread's read snapshot never swallows another thread's write
    (with one shared connection, a write started while another thread's read was open became a
    savepoint inside it and was committed halfway by the read's COMMIT). Writes of one process
    take `_write_lock` as well, so they queue in Python instead of polling SQLite's busy lock.
    An in-memory database (":memory:") exists only inside its one connection: there every
    statement and every transaction holds `_serial`, so threads take turns on it.
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int = 30_000,
        init_empty: bool = False,
        check: bool = True,
    ) -> None:
        """`init_empty`: an existing 0-byte file becomes a new memory file (else it is refused).
        `check`: refuse a damaged file on opening (header, then `quick_check` once per process);
        `verify` opens without it, to report what is wrong."""
        self.path = path
        self.driver = sqlite_driver()
        self.tracer: Tracer | None = None
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._connections: dict[int, Any] = {}  # thread ident -> its connection
        self._connections_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._memory = path == ":memory:"
        self.last_checkpoint: tuple[int, ...] | str | None = None  # the last checkpoint's outcome
        self._serial: Any = threading.RLock() if self._memory else contextlib.nullcontext()
        self._closed = False
        self._check = check
        if not self._memory and not os.path.lexists(path):
            create_file(path, self.driver)
        refuse_stub(path, init_empty=init_empty, check=check)
        self._first = self._connect(first=True)

    def _connect(self, *, first: bool) -> Any:
        """A new connection with sqlite-vec loaded and the pragmas set; the first one also
        checks the file and switches it to WAL."""
        path = self.path
        try:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, never the driver.
            conn = self.driver.connect(
                path,
                isolation_level=None,
                timeout=self.busy_timeout_ms / 1000,
                check_same_thread=False,
            )
        except self.driver.Error as exc:
            raise StoreError(f"cannot open memory file {path!r}: {exc}") from exc
        try:
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            if first:
                # Before anything writes (journal_mode writes the header): refuse a damaged
                # file, and another application's database rather than adding our tables to it.
                if self._check and not self._memory:
                    quick_check(conn, path)
                refuse_foreign(conn, path)
                if not self._memory:
                    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                    conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(
                "PRAGMA synchronous = NORMAL" if self._memory else "PRAGMA synchronous = FULL"
            )
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted text is overwritten with zeros, not left in free space (docs/storage.md).
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except CorruptFileError:
            conn.close()
            raise
        except UnicodeDecodeError as exc:  # see _translated
            conn.close()
            raise damaged(path, f"SQLite's error names damaged bytes: {exc.object[:80]!r}") from exc
        except self.driver.DatabaseError as exc:
            conn.close()
            if is_corruption(exc):
                raise damaged(path, str(exc)) from exc
            raise StoreError(f"cannot open memory file {path!r}: {exc}") from exc
        with self._connections_lock:
            self._connections[threading.get_ident()] = conn
        self._local.conn = conn
        return conn

    @property
    def conn(self) -> Any:
        """This thread's connection (the only one for ":memory:"), opened on first use."""
        if self._memory:
            return self._first
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(f"memory file {self.path!r} is closed")
            self._close_dead_threads()
            conn = self._connect(first=False)
        return conn

    def _close_dead_threads(self) -> None:
        """Close the connections of threads that have ended (a thread pool's churn)."""
        alive = {thread.ident for thread in threading.enumerate()}
        with self._connections_lock:
            dead = [ident for ident in self._connections if ident not in alive]
            closing = [self._connections.pop(ident) for ident in dead]
        for conn in closing:
            if conn is not self._first:
                conn.close()

    @property
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @_depth.setter
    def _depth(self, value: int) -> None:
        self._local.depth = value

    @property
    def _writing(self) -> bool:
        return getattr(self._local, "writing", False)

    @_writing.setter
    def _writing(self, value: bool) -> None:
        self._local.writing = value

    # -- statements -------------------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Driver errors about the file become typed: CorruptFileError when SQLite says the file
        is damaged, StoreError otherwise (I/O, locks, read-only, sqlite-vec failures).
        IntegrityError and ProgrammingError stay as they are: they mean a bug here, unless a
        constraint failed because the file is damaged (a scribbled index page hides rows that a
        foreign key still sees), which SQLite's quick_check then confirms."""
        try:
            yield
        except self.driver.IntegrityError as exc:
            if self._damaged():
                raise CorruptFileError(f"memory file {self.path!r} is corrupted: {exc}") from exc
            raise
        except self.driver.ProgrammingError:
            raise
        except UnicodeDecodeError as exc:
            # The driver could not decode SQLite's error message: it quotes damaged bytes of the
            # file ("malformed database schema (<damaged name>)").
            raise CorruptFileError(
                f"memory file {self.path!r} is corrupted: {exc.object[:80]!r}"
            ) from exc
        except self.driver.DatabaseError as exc:
            if is_corruption(exc):
                raise CorruptFileError(f"memory file {self.path!r} is corrupted: {exc}") from exc
            raise StoreError(f"memory file {self.path!r}: {exc}") from exc

    def _damaged(self) -> bool:
        """Whether SQLite's quick_check finds the file damaged (only after an error: it reads
        every page)."""
        try:
            rows = self.conn.execute("PRAGMA quick_check").fetchall()
        except self.driver.DatabaseError:
            return True
        return rows != [("ok",)]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.tracer is not None:
            self.tracer(sql, params)
        with self._serial, self._translated():
            return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        if self.tracer is not None:
            self.tracer(sql, rows)
        with self._serial, self._translated():
            return self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._serial:  # the rows are read (and can fail) after execute returns
            cursor = self.execute(sql, params)
            with self._translated():
                return list(cursor.fetchall())

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._serial:
            cursor = self.execute(sql, params)
            with self._translated():
                return cursor.fetchone()

    def _raw(self, sql: str) -> None:
        """A transaction-control statement that no tracer may fail."""
        with self._serial, self._translated():
            self.conn.execute(sql)

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction of this thread (SAVEPOINT when nested in its write); rolled back and
        re-raised on any error.

        BEGIN IMMEDIATE takes SQLite's write lock up front, so concurrent writers wait on the
        busy timeout instead of failing with SQLITE_BUSY when a read transaction tries to
        upgrade; the threads of this process queue on `_write_lock` first.
        """
        if getattr(self._local, "reading", False):
            raise StoreError("a write cannot start inside this thread's read snapshot")
        if self._depth:
            with self._savepoint():
                yield
            return
        with self._serial, self._write_lock:
            self.execute("BEGIN IMMEDIATE")
            self._depth = 1
            self._writing = True
            try:
                yield
                self.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self._raw("ROLLBACK")  # never traced: a rollback must not be failable
                raise
            finally:
                self._depth = 0
                self._writing = False

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
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

    # -- giving space back ---------------------------------------------------------------------

    def checkpoint(self, *, wait: bool = True) -> bool:
        """Copy the WAL into the file and truncate it to zero bytes, so no old page image (and
        no deleted text in one) stays in it; False when a reader's snapshot or another process's
        write kept some frames, or the checkpoint failed. With `wait=False` it gives up at once
        instead of waiting the busy timeout for them (a delete must not stall behind a long
        reader). Maintenance after a commit: no tracer sees it, and it never raises."""
        if self._memory:
            return True
        self._refuse_in_transaction("a checkpoint")
        with self._serial, self._write_lock:
            conn = self.conn
            try:
                if not wait:
                    conn.execute("PRAGMA busy_timeout = 0")
                row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except self.driver.Error as exc:
                self.last_checkpoint = f"failed: {exc}"
                return False
            finally:
                if not wait:
                    conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        # (busy, WAL frames, frames checkpointed): what a failed erase reports
        self.last_checkpoint = None if row is None else tuple(row)
        return row is not None and int(row[0]) == 0

    def vacuum(self) -> None:
        """Rebuild the file without its free pages (SQLite's VACUUM: one transaction, so a kill
        during it leaves the file as it was). Other threads' writes wait; readers go on."""
        self._refuse_in_transaction("compact")
        with self._serial, self._write_lock:
            self.execute("VACUUM")

    def _refuse_in_transaction(self, what: str) -> None:
        if self._depth:  # and this thread holds `_write_lock` or a read snapshot
            raise StoreError(f"{what} cannot run inside a transaction")

    def compact(self) -> dict[str, int]:
        """Checkpoint, VACUUM, checkpoint: the file's bytes (data, free pages and WAL together)
        before and after, and its free bytes before."""
        self._refuse_in_transaction("compact")
        before = self.usage()
        self.checkpoint()
        self.vacuum()
        self.checkpoint()
        after = self.usage()
        return {"bytes_before": sum(before.values()), "bytes_after": sum(after.values()),
                "free_bytes_before": before["free_bytes"]}  # fmt: skip

    def usage(self) -> dict[str, int]:
        """Bytes of the file in pages holding data, in free pages, and of the WAL."""
        page_size = int(self.query_one("PRAGMA page_size")[0])
        pages = int(self.query_one("PRAGMA page_count")[0])
        free = int(self.query_one("PRAGMA freelist_count")[0])
        wal = 0
        if not self._memory and os.path.isfile(self.path + "-wal"):
            wal = os.path.getsize(self.path + "-wal")
        return {"used_bytes": (pages - free) * page_size, "free_bytes": free * page_size,
                "wal_bytes": wal}  # fmt: skip

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside `atomic()` or `snapshot()`."""
        return bool(self._depth)

    @property
    def in_write(self) -> bool:
        """Whether a write transaction (`atomic`) is open: reads then see uncommitted rows."""
        return self._writing

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction of this thread: several SELECTs see one consistent state of the
        file (inside this thread's write, the write's own state)."""
        if self._depth:
            yield
            return
        with self._serial:
            self._raw("BEGIN")
            self._depth = 1
            self._local.reading = True
            try:
                yield
            finally:
                self._depth = 0
                self._local.reading = False
                self._raw("COMMIT")

    def close(self) -> None:
        """Close every thread's connection; the Database is unusable afterwards."""
        self._closed = True
        with self._connections_lock:
            closing = {id(c): c for c in [self._first, *self._connections.values()]}
            self._connections.clear()
        for conn in closing.values():  # the first one too, if its thread has ended
            conn.close()
        self._local = threading.local()
