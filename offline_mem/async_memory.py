"""`AsyncMemory`: every public method of `Memory` as a coroutine, for asyncio applications.

Not a second implementation (Mem0 keeps a near-duplicate async class): each coroutine runs the
`Memory` method of the same name in a thread pool of its own, so the event loop never waits for a
model or the disk. `Memory` is thread-safe (one SQLite connection per thread, writes queued, the
models under their own locks), so concurrent coroutines are concurrent calls. Arguments, results
and errors are exactly those of `Memory`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from .config import MemoryConfig
from .memory import Memory

T = TypeVar("T")
DEFAULT_WORKERS = 8


def _coroutine(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The coroutine that runs `Memory.<name>` in the pool, documented as that method."""
    method = getattr(Memory, name)

    @functools.wraps(method)
    async def call(self: AsyncMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._run(getattr(self.sync, name), *args, **kwargs)

    return call


class AsyncMemory:
    """`Memory` for asyncio: `await memory.add(...)`, `await memory.search(...)`, ...

    `AsyncMemory(config)` takes what `Memory(config)` takes (models too, for tests);
    `max_workers` bounds the threads that run calls. Use `async with AsyncMemory(...) as m:` or
    `await m.close()`. The underlying `Memory` is `m.sync`."""

    def __init__(
        self,
        config: MemoryConfig | dict[str, Any] | None = None,
        *,
        max_workers: int = DEFAULT_WORKERS,
        **models: Any,
    ) -> None:
        self.sync = Memory(config, **models)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="offline_mem")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> AsyncMemory:
        return cls(MemoryConfig.from_dict(config))

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args, **kwargs))

    add = _coroutine("add")
    search = _coroutine("search")
    search_messages = _coroutine("search_messages")
    get = _coroutine("get")
    get_all = _coroutine("get_all")
    update = _coroutine("update")
    delete = _coroutine("delete")
    delete_all = _coroutine("delete_all")
    history = _coroutine("history")
    reset = _coroutine("reset")
    flush = _coroutine("flush")
    pending = _coroutine("pending")
    failed_jobs = _coroutine("failed_jobs")
    job = _coroutine("job")
    compact = _coroutine("compact")

    async def close(self) -> None:
        """Wait for the calls in flight, then close the memory file and release the models."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, functools.partial(self._pool.shutdown, wait=True))
        await loop.run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
