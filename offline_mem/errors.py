"""The one small error hierarchy of offline_mem.

Every exception the library raises on purpose derives from `OfflineMemError`; where a builtin
fits, the class also derives from it, so `except ValueError` in an application written for Mem0
keeps working. The CLI alone turns these into messages and exit codes.
"""

from __future__ import annotations

import reprlib

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 4
_SHOWN.maxstring = _SHOWN.maxother = 200
_SHOWN.maxlong = 80


def shown(value: object) -> str:
    """A caller's value as an error message shows it: its repr, cut short and at most 4 levels
    deep (the plain repr of a value nested thousands deep exhausts the recursion limit)."""
    return _SHOWN.repr(value)


class OfflineMemError(Exception):
    """Base class of every error offline_mem raises on purpose."""


class ValidationError(OfflineMemError, ValueError):
    """An argument is malformed: a bad id, message, filter, date or range. Nothing was changed."""


class ScopeRequiredError(ValidationError):
    """No user_id, agent_id or run_id was given where one is required."""


class MemoryNotFoundError(OfflineMemError, KeyError):
    """No memory with this id exists in the scope the caller named."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "memory not found"


class ConfigError(OfflineMemError, ValueError):
    """The configuration has an unknown key or a value of the wrong kind."""


class StoreError(OfflineMemError):
    """The memory file cannot be opened or written."""


class CorruptFileError(StoreError):
    """The memory file is not a database offline_mem can trust (truncated, corrupted, foreign)."""


class SchemaVersionError(StoreError):
    """The memory file was written by a newer offline_mem than this one."""


class EmbedderMismatchError(StoreError):
    """The memory file was written with another embedder than the one configured."""


class StoreConnectionError(StoreError, ConnectionError):
    """The database server cannot be reached, or the connection to it was lost mid-call; a write
    in flight was rolled back by the server, never half applied."""


class StoreLoginError(StoreConnectionError, PermissionError):
    """The database server refused the login (user, password or pg_hba.conf)."""


class StoreConflictError(StoreError):
    """The database broke a conflict between this write and another session's (a deadlock or a
    serialization failure); this write was rolled back whole and may be retried."""


class MissingExtensionError(StoreError):
    """The database lacks an extension the store needs (pgvector's `vector`); the message says
    what to install."""


class NotImplementedInStoreError(StoreError, NotImplementedError):
    """This operation is not implemented yet for this store (the PostgreSQL store is being
    built: docs/design/postgresql.md); nothing was read or changed."""


class ImportRefusedError(OfflineMemError, ValueError):
    """An export file cannot be trusted (a malformed line, a row the API would refuse, rows that
    disagree) or it clashes with the target file. The message names the line and the reason.
    Nothing was written."""


class ModelError(OfflineMemError):
    """A pinned model is missing, unverifiable or failed to run."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """A model named in the manifest has not been fetched into the models folder."""


class ModelIntegrityError(ModelError):
    """A model file's size or sha256 differs from the manifest."""

    def __init__(self, path: str, expected: str, actual: str) -> None:
        super().__init__(
            f"{path}: sha256 {actual} does not match the manifest's {expected}; "
            "fetch it again (scripts/fetch_models) or import a verified bundle"
        )
        self.path = path
        self.expected = expected
        self.actual = actual


class MissingExtraError(ModelError, ImportError):
    """A model needs a library of an optional extra that is not installed; the message names the
    extra to install (e.g. `pip install 'offline_mem[reference]'`)."""

    def __init__(self, library: str, extra: str, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs {library}, which is not installed: "
            f"pip install 'offline_mem[{extra}]'"
        )
        self.library = library
        self.extra = extra


class ExtractionError(ModelError):
    """The extractor model failed or produced output outside its schema. Nothing was changed."""


class FlushTimeoutError(OfflineMemError, TimeoutError):
    """`Memory.flush(timeout=...)` ran out of time with extraction jobs still queued or running.
    Nothing is lost: the jobs stay queued in the memory file."""
