"""The PostgreSQL + pgvector store (`pip install 'offline_mem[postgres]'`): the `MemoryStore`
interface beside the SQLite `Store`. Imported only when a config names a postgresql:// store."""

from .store import PostgresStore

__all__ = ["PostgresStore"]
