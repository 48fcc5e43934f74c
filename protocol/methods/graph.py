"""Params of the learned-graph methods: query, teach, correction, learn, trace, sync, maintain.

Tested where the daemon refuses their bad params (tests/e2e/test_graph_daemon.py,
test_sync_daemon.py, test_maintain_daemon.py) and, for ``FIELDS``, by
tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.checks import MAX_ID_LEN, MAX_PATH_LEN, check_depth, strings

TEACH_KINDS: Final = ("teaching", "correction", "directive")
RECALL_MODES: Final = ("off", "shadow", "on")
AUTHORITIES: Final = ("constitutional", "canonical", "overlay")


@dataclass(frozen=True, slots=True)
class QueryParams:
    """``query``: ``{"query", "chat_id"?, "top_k"?, "max_hops"?, "max_chars"?, ...}``.

    Retrieval from the learned graph. ``chat_id`` files the trace under a chat so
    ``learn``/``correction`` can find it; ``record: false`` answers without storing
    a trace (nothing to learn from then). ``threshold`` (activation a node needs to
    fire, 0..1; the best seed has 1) and ``max_fired`` tune how far it reaches.
    """

    query: str
    chat_id: str | None = None
    top_k: int = 8
    max_hops: int = 3
    max_chars: int = 6_000
    record: bool = True
    threshold: float = 0.2
    max_fired: int = 32

    FIELDS: ClassVar[tuple[str, ...]] = (
        "query",
        "chat_id",
        "top_k",
        "max_hops",
        "max_chars",
        "record",
        "threshold",
        "max_fired",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        query = f.required_str("query", max_len=16_384)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        top_k = f.optional_int("top_k", default=8, minimum=1, maximum=256)
        max_hops = f.optional_int("max_hops", default=3, minimum=0, maximum=16)
        max_chars = f.optional_int("max_chars", default=6_000, minimum=1, maximum=1_000_000)
        record = f.optional_bool("record", default=True)
        threshold = f.optional_number("threshold", default=0.2)
        assert threshold is not None
        if not 0.0 < threshold <= 1.0:
            raise InvalidParams("params.threshold: must be in (0, 1]")
        max_fired = f.optional_int("max_fired", default=32, minimum=1, maximum=1_000)
        f.done()
        return cls(query, chat_id, top_k, max_hops, max_chars, record, threshold, max_fired)


@dataclass(frozen=True, slots=True)
class TeachParams:
    """``teach``: ``{"content", "kind"?, "chat_id"?, "authority"?, "links"?, ...}``.

    ``kind``: teaching (default), correction or directive. A correction with
    ``chat_id`` also penalises that chat's latest trace and inhibits what fired.
    ``dedup_key`` makes a second teach of the same key return the first node;
    ``links`` (node ids) are what the new node is about: it points at them.
    """

    content: str
    kind: str = "teaching"
    chat_id: str | None = None
    authority: str = "overlay"
    dedup_key: str | None = None
    metadata: dict[str, Any] | None = None
    links: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "content",
        "kind",
        "chat_id",
        "authority",
        "dedup_key",
        "metadata",
        "links",
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls._parse(Fields(obj, known=cls.FIELDS), None)

    @classmethod
    def _parse(cls, f: Fields, kind: str | None) -> Self:
        content = f.required_str("content", max_len=262_144)
        if not content.strip():
            raise InvalidParams("params.content: must not be blank")
        if kind is None:
            kind = f.choice("kind", TEACH_KINDS, "teaching")
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        authority = f.choice("authority", AUTHORITIES, "overlay")
        dedup_key = f.optional_str("dedup_key", max_len=MAX_ID_LEN)
        metadata = f.raw("metadata")
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise InvalidParams("params.metadata: must be an object")
            check_depth(metadata, "params.metadata")
        links = tuple(strings(f.optional_list("links", max_items=1_000) or [], "params.links"))
        f.done()
        return cls(content, kind, chat_id, authority, dedup_key, metadata, links)


@dataclass(frozen=True, slots=True)
class CorrectionParams(TeachParams):
    """``correction``: ``teach`` with kind correction: ``{"content", "chat_id"?, ...}``."""

    FIELDS: ClassVar[tuple[str, ...]] = tuple(f for f in TeachParams.FIELDS if f != "kind")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls._parse(Fields(obj, known=cls.FIELDS), "correction")


@dataclass(frozen=True, slots=True)
class LearnParams:
    """``learn``: ``{"outcome", "trace_id"? | "chat_id"?}``; outcome in [-1, 1].

    Without either id the latest trace of all is credited.
    """

    outcome: float
    trace_id: str | None = None
    chat_id: str | None = None
    useful: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = ("outcome", "trace_id", "chat_id", "useful")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        outcome = f.optional_number("outcome")
        if outcome is None:
            raise InvalidParams("params.outcome: required")
        if not -1.0 <= outcome <= 1.0:
            raise InvalidParams("params.outcome: must be between -1 and 1")
        trace_id = f.optional_str("trace_id", max_len=MAX_ID_LEN)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        useful = tuple(strings(f.optional_list("useful", max_items=1_000) or [], "params.useful"))
        f.done()
        return cls(outcome, trace_id, chat_id, useful)


@dataclass(frozen=True, slots=True)
class TraceParams:
    """``trace``: ``{"trace_id"? | "chat_id"?}``; neither: the latest trace of all."""

    trace_id: str | None = None
    chat_id: str | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("trace_id", "chat_id")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        trace_id = f.optional_str("trace_id", max_len=MAX_ID_LEN)
        chat_id = f.optional_str("chat_id", max_len=MAX_ID_LEN)
        f.done()
        return cls(trace_id, chat_id)


@dataclass(frozen=True, slots=True)
class SyncParams:
    """``sync``: ``{"workspace", "paths"?, "authority"?}``.

    ``workspace`` is a directory (relative paths are the daemon's working
    directory's: prefer absolute ones); ``paths`` are extra files or directories
    (relative to the workspace: an absolute one, or one resolving outside it, is
    refused in the result, never read); ``authority`` maps file names (or paths
    relative to the workspace) to a level, over the defaults.
    """

    workspace: str
    paths: tuple[str, ...] = ()
    authority: tuple[tuple[str, str], ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = ("workspace", "paths", "authority")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        workspace = f.required_str("workspace", max_len=MAX_PATH_LEN)
        raw_paths = f.optional_list("paths", max_items=1_000) or []
        for i, path in enumerate(raw_paths):
            if not isinstance(path, str) or not path or len(path) > MAX_PATH_LEN:
                raise InvalidParams(
                    f"{f.path('paths')}[{i}]: must be a string of 1..{MAX_PATH_LEN} characters"
                )
        raw_authority = f.raw("authority")
        if raw_authority is None:
            raw_authority = {}
        if not isinstance(raw_authority, dict) or len(raw_authority) > 1_000:
            raise InvalidParams(f"{f.path('authority')}: must be an object of at most 1000 names")
        for name, level in raw_authority.items():
            if not name or len(name) > MAX_PATH_LEN:
                raise InvalidParams(f"{f.path('authority')}: names must be 1..{MAX_PATH_LEN} long")
            if level not in AUTHORITIES:
                raise InvalidParams(
                    f"{f.path('authority')}.{name}: must be one of {', '.join(AUTHORITIES)}"
                )
        f.done()
        return cls(workspace, tuple(raw_paths), tuple(raw_authority.items()))


MAINTAIN_TASKS: Final = ("health", "decay", "merge", "prune", "connect", "scale")
"""The slow loop's tasks in the order they run (``brain.graph.maintain.TASKS``)."""
_MAINTAIN_RATIOS: Final = ("merge_similarity", "prune_below", "connect_similarity")
_MAINTAIN_POSITIVE: Final = ("half_life_days", "orphan_days", "scale_budget")
_MAINTAIN_COUNTS: Final = ("cofire_traces", "connect_k")


@dataclass(frozen=True, slots=True)
class MaintainParams:
    """``maintain``: ``{"tasks"?, "dry_run"?, knobs...}``; absent knobs keep their defaults.

    ``tasks`` names some of ``MAINTAIN_TASKS`` (default: all; they always run in
    that order). Knobs: ``half_life_days``, ``orphan_days``, ``scale_budget``
    (positive), ``merge_similarity``, ``prune_below``, ``connect_similarity``
    (0..1), ``cofire_traces`` (>= 1) and ``connect_k`` (>= 0).
    """

    tasks: tuple[str, ...] = MAINTAIN_TASKS
    dry_run: bool = False
    knobs: tuple[tuple[str, float | int], ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "tasks",
        "dry_run",
        *_MAINTAIN_RATIOS,
        *_MAINTAIN_POSITIVE,
        *_MAINTAIN_COUNTS,
    )
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        raw = f.optional_list("tasks", max_items=len(MAINTAIN_TASKS))
        tasks: tuple[str, ...] = MAINTAIN_TASKS
        if raw is not None:
            for i, name in enumerate(raw):
                if name not in MAINTAIN_TASKS:
                    raise InvalidParams(
                        f"{f.path('tasks')}[{i}]: must be one of {', '.join(MAINTAIN_TASKS)}"
                    )
            tasks = tuple(t for t in MAINTAIN_TASKS if t in raw)
        dry_run = f.optional_bool("dry_run", default=False)
        knobs: list[tuple[str, float | int]] = []
        for name in _MAINTAIN_RATIOS + _MAINTAIN_POSITIVE:
            value = f.optional_number(name)
            if value is None:
                continue
            if name in _MAINTAIN_RATIOS and not 0.0 <= value <= 1.0:
                raise InvalidParams(f"{f.path(name)}: must be between 0 and 1")
            if name in _MAINTAIN_POSITIVE and value <= 0:
                raise InvalidParams(f"{f.path(name)}: must be positive")
            knobs.append((name, value))
        for name in _MAINTAIN_COUNTS:
            if f.raw(name) is not None:
                minimum = 1 if name == "cofire_traces" else 0
                knobs.append(
                    (name, f.optional_int(name, default=0, minimum=minimum, maximum=1_000))
                )
        f.done()
        return cls(tasks, dry_run, tuple(knobs))
