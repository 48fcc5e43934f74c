"""Daemon configuration: one typed, frozen object built once at the edge.

Precedence, lowest first: built-in defaults, a TOML file (``--config`` or
``$BRAIN_CONFIG``), environment variables (``BRAIN_*``), command-line flags.
Every option has all three spellings, listed in ``OPTIONS`` (the README's
configuration table is checked against it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from brain import BrainConfig

LogFormat = Literal["console", "json"]
EmbedderKind = Literal["static", "onnx", "openai", "hash"]


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Everything the daemon process needs to know."""

    db: Path
    max_line_bytes: int = 16 * 1024 * 1024
    max_inflight: int = 1024
    max_queued_request_bytes: int = 64 * 1024 * 1024
    max_unread_output_bytes: int = 16 * 1024 * 1024
    autosave_writes: int = 1000
    autosave_seconds: float = 30.0
    shutdown_timeout_s: float = 30.0
    watchdog_stall_s: float = 60.0
    log_level: str = "info"
    log_format: LogFormat = "console"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_s: float = 60.0
    embedder: EmbedderKind = "static"
    embed_base_url: str | None = None
    embed_model: str | None = None
    embed_api_key: str | None = field(default=None, repr=False)
    embed_timeout_s: float = 30.0
    embed_dim: int | None = None
    embed_batch: int = 64
    embedder_chosen: bool = False
    """Whether ``embedder`` was given (flag, environment or file) rather than defaulted:
    only then may ``brain serve`` switch a database whose vectors are another embedder's."""
    retention_every_s: float = 600.0
    """How often the background worker runs a retention pass (``brain.ops.retention``)."""
    provider_concurrency: int = 8
    provider_deadline_s: float = 60.0
    mcp_session: str | None = None
    """``brain mcp``: the conversation its tools read and write (None: the model names one)."""
    mcp_session_key: str | None = None
    """``brain mcp``: the session key its searches span and new sessions are filed under."""
    brain: BrainConfig = field(default_factory=BrainConfig)

    def __post_init__(self) -> None:
        if self.embedder == "openai" and not (self.embed_base_url and self.embed_model):
            raise ValueError("embedder openai needs embed_base_url and embed_model")
        if self.embedder != "openai":
            # Set without embedder = "openai" they would be ignored: a forgotten
            # BRAIN_EMBEDDER would silently keep the default model.
            stray = [
                key
                for key in ("embed_base_url", "embed_model", "embed_api_key", "embed_dim")
                if getattr(self, key) is not None
            ]
            if stray:
                raise ValueError(
                    f"{', '.join(stray)} only apply to embedder openai "
                    f"(embedder is {self.embedder})"
                )


Scope = Literal["common", "store", "engine", "serve", "mcp"]
"""Which commands take an option as a flag (every spelling works in a file or the
environment): ``common`` all of them; ``store`` those that open the database
(``doctor`` included); ``engine`` those that run the engine (all but ``doctor``);
``serve`` the serving commands, ``brain serve`` and ``brain mcp``; ``mcp`` only
``brain mcp``."""

SCOPES: Final[dict[str, tuple[Scope, ...]]] = {
    "serve": ("common", "store", "engine", "serve"),
    "mcp": ("common", "store", "engine", "serve", "mcp"),
    "call": ("common", "store", "engine"),
    "sync": ("common", "store", "engine"),
    "maintain": ("common", "store", "engine"),
    "bootstrap": ("common", "store", "engine"),
    "doctor": ("common", "store"),
}
"""The option scopes each ``brain`` command takes as flags."""


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its key (TOML and flag name), environment variable and parser."""

    key: str
    env: str
    parse: Callable[[str], Any]
    help: str
    target: Literal["daemon", "brain", "compaction", "retention"] = "daemon"
    attr: str | None = None  # the config attribute, when it differs from ``key``
    scope: Scope = "engine"

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The accepted values of an enumerated option (for ``--help``), else None."""
        return self.parse.choices if isinstance(self.parse, Choice) else None


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"must be a positive number, got {text!r}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and 0 < value <= 0.5):
        raise ValueError(f"must be above 0 and at most 0.5, got {text!r}")
    return value


def _days(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"must be 0 (off) or a positive number of days, got {text!r}")
    return value


def _key_days(text: str) -> tuple[tuple[str, float], ...]:
    """``key=days,key=days``: an age limit per session key (0: none for that key)."""
    pairs: list[tuple[str, float]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, days = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"must be key=days pairs separated by commas, got {item.strip()!r}")
        pairs.append((key.strip(), _days(days.strip())))
    return tuple(pairs)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {text!r}")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


class Choice:
    """Parses one of ``choices``, in any case; ``--help`` shows them."""

    def __init__(self, *choices: str) -> None:
        self.choices = choices

    def __call__(self, text: str) -> str:
        value = text.lower() if self.choices[0].islower() else text.upper()
        if value not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}, got {text!r}")
        return value


OPTIONS: Final[tuple[Option, ...]] = (
    Option("db", "BRAIN_DB", lambda s: Path(s).expanduser(), "database file", scope="common"),
    Option(
        "max_line_bytes",
        "BRAIN_MAX_LINE_BYTES",
        _positive_int,
        "longest request line",
        scope="serve",
    ),
    Option(
        "max_inflight",
        "BRAIN_MAX_INFLIGHT",
        _positive_int,
        "requests in progress at once",
        scope="serve",
    ),
    Option(
        "max_queued_request_bytes",
        "BRAIN_MAX_QUEUED_REQUEST_BYTES",
        _positive_int,
        "request bytes held (read, not yet answered) before reading pauses",
        scope="serve",
    ),
    Option(
        "max_unread_output_bytes",
        "BRAIN_MAX_UNREAD_OUTPUT_BYTES",
        _positive_int,
        "answer bytes the client has not read before reading pauses",
        scope="serve",
    ),
    Option(
        "autosave_writes",
        "BRAIN_AUTOSAVE_WRITES",
        _positive_int,
        "save after this many writes",
        scope="serve",
    ),
    Option(
        "autosave_seconds",
        "BRAIN_AUTOSAVE_SECONDS",
        _positive_float,
        "save this often if dirty",
        scope="serve",
    ),
    Option(
        "shutdown_timeout_s",
        "BRAIN_SHUTDOWN_TIMEOUT_S",
        _positive_float,
        "bound on finishing in-flight requests when stopping",
        scope="serve",
    ),
    Option(
        "watchdog_stall_s",
        "BRAIN_WATCHDOG_STALL_S",
        _positive_float,
        "withhold systemd's WATCHDOG=1 once no database work completed for this long",
        scope="serve",
    ),
    Option(
        "log_level",
        "BRAIN_LOG_LEVEL",
        Choice("debug", "info", "warning", "error"),
        "log level",
        scope="common",
    ),
    Option(
        "log_format",
        "BRAIN_LOG_FORMAT",
        Choice("console", "json"),
        "stderr log format",
        scope="common",
    ),
    Option(
        "large_payload_tokens",
        "BRAIN_LARGE_PAYLOAD_TOKENS",
        _positive_int,
        "blocks above this go to payload files",
        "brain",
    ),
    Option(
        "busy_timeout_ms",
        "BRAIN_BUSY_TIMEOUT_MS",
        _positive_int,
        "wait for a lock",
        "brain",
        scope="store",
    ),
    Option(
        "read_connections",
        "BRAIN_READ_CONNECTIONS",
        _count,
        "connections reads use beside the write connection (0: reads take the write lock)",
        "brain",
    ),
    Option(
        "recall_mode",
        "BRAIN_RECALL_MODE",
        Choice("off", "shadow", "on"),
        "assemble's graph recall block by default: off, shadow (traced) or on (shown)",
        "brain",
    ),
    Option(
        "synchronous",
        "BRAIN_SYNCHRONOUS",
        Choice("FULL", "NORMAL", "EXTRA"),
        "SQLite synchronous",
        "brain",
        scope="store",
    ),
    Option(
        "group_commit",
        "BRAIN_GROUP_COMMIT",
        _bool,
        "commit at NORMAL and share one WAL fsync among concurrent writers; each write "
        "answers once durable, as at FULL",
        "brain",
    ),
    Option(
        "trace_max_count",
        "BRAIN_TRACE_MAX_COUNT",
        _positive_int,
        "query traces kept; storing one more deletes the oldest",
        "brain",
    ),
    Option(
        "trace_max_age_days",
        "BRAIN_TRACE_MAX_AGE_DAYS",
        _positive_float,
        "maintenance deletes query traces older than this",
        "brain",
    ),
    Option(
        "retention_max_bytes",
        "BRAIN_RETENTION_MAX_BYTES",
        _count,
        "retention: while the database's used bytes pass this, drop the oldest messages' "
        "vectors (0: no limit)",
        "retention",
        "max_bytes",
    ),
    Option(
        "retention_max_age_days",
        "BRAIN_RETENTION_MAX_AGE_DAYS",
        _days,
        "retention: messages older than this lose their vectors (0: no limit)",
        "retention",
        "max_age_days",
    ),
    Option(
        "retention_key_max_age_days",
        "BRAIN_RETENTION_KEY_MAX_AGE_DAYS",
        _key_days,
        "retention: key=days,... an age limit per session key, over retention_max_age_days",
        "retention",
        "key_max_age_days",
    ),
    Option(
        "retention_delete_messages",
        "BRAIN_RETENTION_DELETE_MESSAGES",
        _bool,
        "retention may delete whole sessions past their age (or the oldest, over "
        "retention_max_bytes); off: messages are never deleted",
        "retention",
        "delete_messages",
    ),
    Option(
        "retention_every_s",
        "BRAIN_RETENTION_EVERY_S",
        _positive_float,
        "how often the daemon's background worker runs a retention pass (with a limit set)",
        scope="serve",
    ),
    Option(
        "auto_compact",
        "BRAIN_AUTO_COMPACT",
        _bool,
        "compact in the background",
        "compaction",
        "auto",
    ),
    Option(
        "fresh_tail_count",
        "BRAIN_FRESH_TAIL_COUNT",
        _positive_int,
        "newest messages always kept raw",
        "compaction",
    ),
    Option(
        "leaf_chunk_tokens",
        "BRAIN_LEAF_CHUNK_TOKENS",
        _positive_int,
        "raw tokens one leaf summary covers",
        "compaction",
    ),
    Option(
        "compaction_threshold_tokens",
        "BRAIN_COMPACTION_THRESHOLD_TOKENS",
        _positive_int,
        "raw tokens outside the tail that start compaction",
        "compaction",
        "threshold_tokens",
    ),
    Option(
        "compaction_budget_share",
        "BRAIN_COMPACTION_BUDGET_SHARE",
        _share,
        "share of a session's assemble budget its raw history (and its summaries) "
        "may take before compaction",
        "compaction",
        "budget_share",
    ),
    Option(
        "offline_summarizer",
        "BRAIN_OFFLINE_SUMMARIZER",
        Choice("default", "extractive_v1", "truncation", "random"),
        "summarizer without an LLM (and the LLM's fallback); truncation and random are "
        "evaluation baselines",
        "compaction",
    ),
    Option(
        "llm_base_url",
        "BRAIN_LLM_BASE_URL",
        _text,
        "OpenAI-compatible API for summaries, e.g. http://127.0.0.1:11434/v1",
    ),
    Option("llm_model", "BRAIN_LLM_MODEL", _text, "model name for summaries"),
    Option("llm_api_key", "BRAIN_LLM_API_KEY", _text, "API key (prefer the environment)"),
    Option("llm_timeout_s", "BRAIN_LLM_TIMEOUT_S", _positive_float, "per-call LLM timeout"),
    Option(
        "embedder",
        "BRAIN_EMBEDDER",
        Choice("static", "onnx", "openai", "hash"),
        "embedder for semantic search; a change re-embeds everything",
    ),
    Option(
        "embed_base_url",
        "BRAIN_EMBED_BASE_URL",
        _text,
        "OpenAI-compatible API for embeddings (embedder openai)",
    ),
    Option("embed_model", "BRAIN_EMBED_MODEL", _text, "embedding model name (embedder openai)"),
    Option("embed_api_key", "BRAIN_EMBED_API_KEY", _text, "embeddings API key (prefer the env)"),
    Option(
        "embed_timeout_s", "BRAIN_EMBED_TIMEOUT_S", _positive_float, "per-call embedding timeout"
    ),
    Option("embed_dim", "BRAIN_EMBED_DIM", _positive_int, "embedding dimension (else probed)"),
    Option("embed_batch", "BRAIN_EMBED_BATCH", _positive_int, "texts per embedding request"),
    Option(
        "provider_concurrency",
        "BRAIN_PROVIDER_CONCURRENCY",
        _positive_int,
        "requests waiting on each provider (LLM, embeddings) at once",
    ),
    Option(
        "provider_deadline_s",
        "BRAIN_PROVIDER_DEADLINE_S",
        _positive_float,
        "longest a request waits on a provider, retries included",
    ),
    Option(
        "mcp_session",
        "BRAIN_MCP_SESSION",
        _text,
        "brain mcp: pin the tools to this session (conversation)",
        scope="mcp",
    ),
    Option(
        "mcp_session_key",
        "BRAIN_MCP_SESSION_KEY",
        _text,
        "brain mcp: search this session key's sessions; file new sessions under it",
        scope="mcp",
    ),
)
OPTION_BY_KEY: Final = {o.key: o for o in OPTIONS}


def default_db_path(env: Mapping[str, str]) -> Path:
    """``$BRAIN_DB``, else ``$XDG_DATA_HOME/brain/brain.db``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share``.
    """
    if env.get("BRAIN_DB"):
        return Path(env["BRAIN_DB"]).expanduser()
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "brain" / "brain.db"


def load_config(
    flags: Mapping[str, str | None],
    env: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> DaemonConfig:
    """Build the config from defaults, a TOML file, the environment and flags.

    ``flags`` maps option keys to the raw strings given on the command line
    (None when the flag was not given). Raises ``ValueError`` naming the option
    on a bad value.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or env.get("BRAIN_CONFIG")
    if path:
        import tomllib  # only with a config file: most starts have none

        with open(path, "rb") as fh:
            table = tomllib.load(fh)
        for key, raw in table.items():
            option = OPTION_BY_KEY.get(key)
            if option is None:
                raise ValueError(f"{path}: unknown option {key!r}")
            values[key] = _parse(option, str(raw), f"{path}: {key}")
    for option in OPTIONS:
        if env.get(option.env):
            values[option.key] = _parse(option, env[option.env], option.env)
    for key, raw in flags.items():
        if raw is not None:
            values[key] = _parse(OPTION_BY_KEY[key], raw, f"--{key.replace('_', '-')}")
    nested: dict[str, dict[str, Any]] = {"brain": {}, "compaction": {}, "retention": {}}
    for o in OPTIONS:
        if o.target != "daemon" and o.key in values:
            nested[o.target][o.attr or o.key] = values.pop(o.key)
    db = values.pop("db", None) or default_db_path(env)
    values["embedder_chosen"] = "embedder" in values
    defaults = BrainConfig()
    try:
        retention = replace(defaults.retention, **nested["retention"])
    except ValueError as exc:
        raise ValueError(f"retention: {exc}") from None
    brain = replace(
        defaults,
        **nested["brain"],
        compaction=replace(defaults.compaction, **nested["compaction"]),
        retention=retention,
    )
    return replace(DaemonConfig(db=db), **values, brain=brain)


def _parse(option: Option, raw: str, where: str) -> Any:
    try:
        return option.parse(raw)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
