"""The method table: every method's params type and one-line summary, and the
methods a grant may carry.

``protocol.methods`` defines the params types and re-exports this table as
``METHODS``. A spec may name its params type rather than hold it: the name is
resolved in ``protocol.methods`` on first use, so a daemon validates and
answers ``info`` (``NoParams``, defined here) without building every params
dataclass (~8 ms of start-up).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, Self

from protocol.fields import Fields


class Params(Protocol):
    """What every params type provides."""

    FIELDS: ClassVar[tuple[str, ...]]

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self: ...


@dataclass(frozen=True, slots=True)
class NoParams:
    """Params of a method that takes none (``{}`` or absent)."""

    FIELDS: ClassVar[tuple[str, ...]] = ()
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        Fields(obj, known=cls.FIELDS).done()
        return cls()


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A method's params type and a one-line description for the reference.

    ``params_type``: the type, or its name in ``protocol.methods`` (imported on
    first use of ``params``).
    """

    params_type: type[Params] | str
    summary: str

    @property
    def params(self) -> type[Params]:
        """The params type (``protocol.methods`` is imported when it is named there)."""
        if isinstance(self.params_type, str):
            found: type[Params] = getattr(
                importlib.import_module("protocol.methods"), self.params_type
            )
            return found
        return self.params_type


METHODS: Final[dict[str, MethodSpec]] = {
    "ping": MethodSpec(NoParams, "liveness check, answered on the event loop"),
    "info": MethodSpec(NoParams, "version, schema version and counts"),
    "ingest": MethodSpec("IngestParams", "append messages to a session, idempotently"),
    "assemble": MethodSpec("AssembleParams", "model-ready context for a session under a budget"),
    "compact": MethodSpec("CompactParams", "fold a session's history into summaries now"),
    "describe": MethodSpec("LookupParams", "what a summary, payload file or message id holds"),
    "grep": MethodSpec("GrepParams", "find messages and summaries by regex, words or meaning"),
    "entities": MethodSpec("EntitiesParams", "find named things by name, with mention counts"),
    "entity": MethodSpec("EntityParams", "one named thing's mentions in time order, with snippets"),
    "recent": MethodSpec(
        "RecentParams", "a time window's day and week rollups and leaf summaries, in order"
    ),
    "suppress": MethodSpec("SuppressParams", "hide messages or summaries from every agent path"),
    "unsuppress": MethodSpec("SuppressParams", "show suppressed messages or summaries again"),
    "expand": MethodSpec("LookupParams", "walk a summary down to its sources under a cap"),
    "expand_query": MethodSpec(
        "ExpandQueryParams", "a cited answer to a prompt from the sources under summaries or hits"
    ),
    "grant": MethodSpec("GrantParams", "scoped, budgeted, expiring access for a sub-agent"),
    "revoke": MethodSpec("RevokeParams", "end a grant now (idempotent)"),
    "query": MethodSpec("QueryParams", "retrieve from the learned graph; records a trace"),
    "teach": MethodSpec("TeachParams", "add a teaching, correction or directive node"),
    "correction": MethodSpec("CorrectionParams", "teach a correction; penalise the chat's trace"),
    "learn": MethodSpec("LearnParams", "credit an outcome to a trace's steps"),
    "trace": MethodSpec("TraceParams", "a query's seeds, steps and fired nodes"),
    "sync": MethodSpec("SyncParams", "index a workspace's markdown files as graph chunks"),
    "maintain": MethodSpec("MaintainParams", "decay, merge, prune, connect and scale the graph"),
    "bootstrap": MethodSpec(
        "BootstrapParams", "import a session's JSONL transcript after what is stored"
    ),
    "health": MethodSpec(NoParams, "the retrieval graph's shape: counts, tiers, orphans"),
    "retain": MethodSpec(
        NoParams, "apply the retention limits now: drop old derived data, hand pages back"
    ),
    "save": MethodSpec(NoParams, "checkpoint the WAL and flush hot state"),
    "reload": MethodSpec(NoParams, "reopen the database and rebuild hot state"),
    "shutdown": MethodSpec(NoParams, "finish in-flight requests, flush, exit 0"),
}

GRANTABLE: Final = (
    "ping",
    "ingest",
    "assemble",
    "compact",
    "describe",
    "expand",
    "grep",
    "expand_query",
    "recent",
)
"""Methods a grant may allow. ``info`` is not (its counts span every session),
nor are ``grant``/``revoke`` (a sub-agent must not mint access) or the
lifecycle methods."""
