"""Opening a memory file safely: a new file is created whole, and an existing one is refused
before anything writes to it when it is empty (0 bytes), too short, has a broken SQLite header,
fails SQLite's `quick_check`, or is another application's database. Each refusal is a
`CorruptFileError` that says how to repair the file. `Database` (db.py) runs these on open."""

from __future__ import annotations

import contextlib
import os
import threading
from types import ModuleType
from typing import Any

from ..errors import CorruptFileError, StoreError

# A new file's page size: five 1,536-byte vectors fit an 8 KiB page, two a 4 KiB one (1,638
# against 2,048 bytes per vector; docs/storage.md). A file keeps the size it was made with.
PAGE_SIZE = 8192
MIN_DATABASE_BYTES = 512  # SQLite's smallest page: a shorter non-empty file is a damaged one
SQLITE_MAGIC = b"SQLite format 3\x00"
REPAIR_HINT = (
    "run `offline-mem verify` to see what is wrong and restore the file from a backup "
    "(`offline-mem backup` makes one), or point `path` at another file"
)


def damaged(path: str, why: str) -> CorruptFileError:
    return CorruptFileError(f"{path!r} is a damaged memory file ({why}); {REPAIR_HINT}")


def is_corruption(exc: BaseException) -> bool:
    """Whether a driver error is SQLite saying the file is damaged."""
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def refuse_stub(path: str, *, init_empty: bool = False, check: bool = True) -> None:
    """SQLite treats a 0-byte file (and some tiny ones) as an empty database and would silently
    start afresh: a memory file truncated by a failed copy would look like a new, empty memory.
    An existing 0-byte file is therefore refused unless the caller asks to initialise it."""
    if path == ":memory:" or not os.path.isfile(path):
        return
    size = os.path.getsize(path)
    if size == 0 and not init_empty:
        raise CorruptFileError(
            f"{path!r} is an empty (0-byte) file, not a memory file: a truncated copy or a "
            f"failed restore? {REPAIR_HINT}. To start a new memory file in it, pass the config "
            "key init_empty_file=True"
        )
    if 0 < size < MIN_DATABASE_BYTES:
        raise damaged(path, f"{size} bytes: truncated or not a database")
    if size and check:
        _check_header(path, size)


def _check_header(path: str, size: int) -> None:
    """The 100-byte SQLite header against the file: magic string, page size, format bytes, and
    the page count it records (a file cut short of it was truncated)."""
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or header[:16] != SQLITE_MAGIC:
        raise damaged(path, "no SQLite header")
    page = int.from_bytes(header[16:18], "big")
    page = 65_536 if page == 1 else page
    if page < 512 or page > 65_536 or page & (page - 1):
        raise damaged(path, f"the header's page size {page} is impossible")
    if header[18] not in (1, 2) or header[19] not in (1, 2) or header[21:24] != b"\x40\x20\x20":
        raise damaged(path, "the header's format bytes are wrong")
    if size % page:
        raise damaged(path, f"{size} bytes is not a whole number of {page}-byte pages")
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the count is current (SQLite >= 3.7.0 wrote it)
    wal = path + "-wal"
    pending = os.path.isfile(wal) and os.path.getsize(wal) > 0  # a checkpoint may be unfinished
    if valid and not pending and pages * page > size:
        raise damaged(path, f"the header records {pages} pages, the file holds {size // page}")


def create_file(path: str, driver: ModuleType) -> None:
    """A new memory file appears whole: SQLite makes it (with its header, in WAL mode) under a
    name of its own beside `path`, and it is hard-linked into place. So no process ever sees a
    new memory file empty, and an empty file can be refused as a truncated one. A process that
    loses the race to another opens the other's file; where hard links are not supported,
    SQLite creates the file in place."""
    import uuid

    staging = f"{path}.{uuid.uuid4().hex}.creating"
    try:
        conn = driver.connect(staging)
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before WAL writes the header
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        with contextlib.suppress(OSError):  # FileExistsError: another process created it
            os.link(staging, path)
    except driver.Error as exc:
        raise StoreError(f"cannot create memory file {path!r}: {exc}") from exc
    finally:
        for leftover in (staging, staging + "-wal", staging + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


# Files (path, size, mtime) that passed `quick_check` in this process: checked once each.
_checked: set[tuple[str, int, int]] = set()
_checked_lock = threading.Lock()


def _file_key(path: str) -> tuple[str, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)


def quick_check(conn: Any, path: str) -> None:
    """SQLite's `quick_check` (every page's structure, not the indexes' content) on the first
    open of a file in this process: see docs/import-and-open-checks.md for its cost."""
    key = _file_key(path)
    if key is None or key[1] == 0:
        return
    with _checked_lock:
        if key in _checked:
            return
    rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    if rows != ["ok"]:
        raise damaged(path, "SQLite's quick_check: " + "; ".join(str(r) for r in rows)[:300])
    with _checked_lock:
        _checked.add(key)


def refuse_foreign(conn: Any, path: str) -> None:
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
