"""The engine's exceptions: one rooted tree.

::

    BrainError
    ├── InvalidInput        a caller gave data the engine cannot accept (names the field)
    ├── NotFound            an id or session that does not exist
    ├── Conflict            a write that contradicts what is stored
    ├── GrantDenied         a grant that is unknown, expired or revoked, or a request outside it
    ├── GrantExhausted      a grant whose token cap is used up
    ├── StoreBusy           the database stayed locked past the busy timeout
    ├── StorageError        the database or files directory failed underneath us
    │   ├── PayloadMissing      a stored row names a payload file that is gone
    │   ├── DatabaseMissing     no database file at the path, and this process may not create one
    │   └── DatabaseFileLost    the open file was moved, replaced or deleted: writes stop
    └── ProviderError       an LLM or embedding provider failed (after retries) or is tripped

The engine knows nothing of the wire. The daemon's dispatcher is the one place
where these become protocol error codes (see ``daemon.dispatch``), and it is the
only place where foreign exceptions (apsw, OSError) are translated.

A class tree: tested where it becomes wire codes (``tests/daemon/test_dispatch.py``,
``tests/e2e/test_errors.py``).
"""

from __future__ import annotations

from typing import Any


class BrainError(Exception):
    """Root of every error the engine raises on purpose."""

    default_message = "engine error"

    def __init__(self, message: str | None = None, **data: Any) -> None:
        self.message = message or self.default_message
        self.data: dict[str, Any] = data
        super().__init__(self.message)


class InvalidInput(BrainError):
    """Input that fails validation; ``field`` names where (``messages[2].content[0].type``)."""

    default_message = "invalid input"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)
        self.field = field


class NotFound(BrainError):
    """The referenced object does not exist (or is outside the caller's scope)."""

    default_message = "not found"


class Conflict(BrainError):
    """The write contradicts stored state (a session already filed under another key)."""

    default_message = "conflict"


class EmbedderMismatch(Conflict):
    """The stored vectors belong to another embedder (another process switched it)."""

    default_message = "the stored vectors were made by another embedder"


class GrantDenied(BrainError):
    """The grant does not allow this request; ``reason`` says why.

    Reasons: ``unknown`` (including a malformed id), ``expired``, ``revoked``,
    ``method`` (not granted), ``scope`` (a session or key outside the grant,
    or a request over every conversation) or ``suppressed`` (a request for
    suppressed items, which no grant allows).
    """

    default_message = "grant denied"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, reason=reason)
        self.reason = reason


class GrantExhausted(BrainError):
    """The grant's token cap is already used up."""

    default_message = "grant exhausted"


class StoreBusy(BrainError):
    """The database stayed locked by another process past the busy timeout."""

    default_message = "database busy"


class StorageError(BrainError):
    """The database file or files directory failed (disk full, permissions, corruption)."""

    default_message = "storage error"


class PayloadMissing(StorageError):
    """A payload file a stored row names is gone from the files directory.

    Damage, not a bad id: ``file_id`` names the file (``brain doctor`` reports it).
    """

    default_message = "payload file missing"

    def __init__(self, file_id: str) -> None:
        super().__init__(
            f"payload file {file_id} is missing from the files directory; run brain doctor",
            file_id=file_id,
            missing_files=[file_id],
        )
        self.file_id = file_id


class DatabaseMissing(StorageError):
    """No database file at the path, and this open may not create one.

    Only the first start of a daemon on a path creates a database; a ``reload``,
    ``brain call`` or an offline command on a missing file would otherwise serve
    (and write into) a new empty database while the real one lives elsewhere.
    """

    default_message = "database file does not exist"


class DatabaseFileLost(StorageError):
    """The database file this process opened is no longer the file at its path.

    It was moved, replaced or deleted underneath the process: a write now would
    land in a file nobody else will open, so writes are refused from then on
    and the daemon exits for its supervisor to restart it on the real file.
    """

    default_message = "database file was moved, replaced or deleted; restart"


class ProviderError(BrainError):
    """An external provider (LLM, embeddings) failed after retries, or its breaker is open."""

    default_message = "provider unavailable"
