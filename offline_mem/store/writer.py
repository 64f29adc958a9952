"""Which application made a change: a label recorded in each history row it writes
(`written_by`), so a memory shared by several apps shows who added, changed or deleted what.

    with written_by("ide-agent"):
        memory.add(...)          # its history rows say written_by="ide-agent"

`offline-mem serve` sets it to the label of the token a request came with. A context variable:
it follows the code into threads started with the context copied (asyncio.to_thread, Starlette's
thread pool) and into queued extraction jobs (the job records it). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

MAX_LABEL_CHARS = 200
_current: ContextVar[str | None] = ContextVar("offline_mem_written_by", default=None)


@contextmanager
def written_by(label: str | None) -> Iterator[None]:
    """Record `label` as the writer of every change made inside the block (None: unrecorded)."""
    if label is not None and (not isinstance(label, str) or not label.strip()):
        from ..errors import ValidationError

        raise ValidationError("written_by takes a non-empty label or None")
    token = _current.set(None if label is None else label.strip()[:MAX_LABEL_CHARS])
    try:
        yield
    finally:
        _current.reset(token)


def current_writer() -> str | None:
    """The label of the block this code runs in, or None."""
    return _current.get()
