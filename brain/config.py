"""Engine configuration: a typed, frozen object the caller builds once.

The engine never reads the environment itself; ``daemon.config`` builds this
from flags, environment variables and an optional TOML file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Synchronous = Literal["FULL", "NORMAL", "EXTRA"]


@dataclass(frozen=True, slots=True)
class BrainConfig:
    """Knobs of the storage engine.

    ``large_payload_tokens``: a content block whose payload is estimated above
    this many tokens is written to the files directory and replaced in the
    message by a compact reference.

    ``busy_timeout_ms``: how long a statement waits for another process's
    write lock before failing with ``StoreBusy``.

    ``synchronous``: SQLite's ``PRAGMA synchronous``. FULL (the default) makes
    every acknowledged commit survive power loss as well as a killed process;
    NORMAL survives a killed process only.

    ``orphan_file_grace_s``: a payload file with no row is removed at start-up
    only when older than this, because another process may be between writing
    the file and committing its row.
    """

    large_payload_tokens: int = 25_000
    busy_timeout_ms: int = 5_000
    synchronous: Synchronous = "FULL"
    orphan_file_grace_s: float = 600.0
