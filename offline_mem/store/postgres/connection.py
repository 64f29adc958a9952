"""One PostgreSQL database, reached through psycopg 3 at exactly the URL given.

`PgDatabase` holds one connection per thread (a transaction belongs to a connection, and the job
worker's thread must not share the caller's), in autocommit mode: a statement outside `atomic()`
is its own transaction, and `atomic()` is one BEGIN/COMMIT (a SAVEPOINT when nested), rolled back
and re-raised on any error. psycopg's errors become the store's typed ones here and nowhere else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...config import redacted_url
from ...errors import StoreConflictError, StoreConnectionError, StoreError, StoreLoginError
from ..db import Tracer

try:
    import psycopg
except ImportError:  # the optional extra: the SQLite store never needs it
    psycopg = None  # type: ignore[assignment]

# libpq reports a refused login only in its message (no SQLSTATE reaches the client)
_LOGIN_REFUSED = (
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "password is required",
    'role "',  # FATAL: role "x" does not exist
)
CONNECT_TIMEOUT_S = 10


def _require_psycopg() -> None:
    if psycopg is None:
        raise StoreError(
            "the PostgreSQL store needs psycopg 3, which is not installed: "
            "pip install 'offline_mem[postgres]'"
        )


class PgDatabase:
    def __init__(self, url: str) -> None:
        _require_psycopg()
        self.url = url
        self.shown = redacted_url(url)
        self._local = threading.local()
        self._all: list[Any] = []
        self._guard = threading.Lock()
        self._closed = False
        # sees (and tests can fail) every statement, as Database.tracer does on the file
        self.tracer: Tracer | None = None

    # -- connections -----------------------------------------------------------------------

    def _connect(self) -> Any:
        try:
            # only the URL's own parameters: libpq's environment (PGHOST, ...) fills what the URL
            # leaves out, as for every libpq client; docs/design/postgresql.md
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            raise _connect_error(self.shown, exc) from exc
        with self._guard:
            self._all.append(conn)
        return conn

    @property
    def conn(self) -> Any:
        if self._closed:
            raise StoreError(f"the store at {self.shown} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._connect()
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    # -- statements --------------------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A lost connection becomes StoreConnectionError (the next call reconnects); a
        conflict the server broke by rolling this transaction back, StoreConflictError."""
        try:
            yield
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
            raise StoreConflictError(
                f"the database at {self.shown} rolled this write back: it conflicted with "
                f"another session's ({exc.sqlstate}: {str(exc).splitlines()[0]}); nothing of "
                "it was committed: retry it"
            ) from exc
        except psycopg.OperationalError as exc:
            conn = getattr(self._local, "conn", None)
            if conn is not None and (conn.closed or conn.broken):
                self._local.conn = None
                raise StoreConnectionError(
                    f"lost the connection to {self.shown}: {exc}; nothing of the call was "
                    "committed unless it returned"
                ) from exc
            raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.tracer is not None:
            self.tracer(sql, params)
        with self._translated():
            return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self.tracer is not None:
            self.tracer(sql, rows)
        with self._translated(), self.conn.cursor() as cursor:
            cursor.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self.tracer is not None:
            self.tracer(sql, params)
        with self._translated():
            return self.conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if self.tracer is not None:
            self.tracer(sql, params)
        with self._translated():
            return self.conn.execute(sql, params).fetchone()

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction (a savepoint inside another): all of it commits, or none."""
        with self._translated(), self.conn.transaction():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one committed state: a REPEATABLE READ, READ ONLY transaction (or the
        enclosing transaction, when there is one)."""
        conn = self.conn
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            yield
            return
        with self._translated(), conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield


def _connect_error(shown: str, exc: Exception) -> StoreConnectionError:
    text = str(exc)
    if any(marker in text for marker in _LOGIN_REFUSED):
        return StoreLoginError(f"the database at {shown} refused the login: {text.strip()}")
    return StoreConnectionError(f"cannot connect to the database at {shown}: {text.strip()}")
