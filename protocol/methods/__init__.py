"""Method params: frozen dataclasses parsed once at the edge.

Each params type has ``from_obj(params) -> instance`` that validates
everything and raises ``InvalidParams`` naming the offending field, so a
handler never sees bad input. ``FIELDS`` lists the members each type takes:
an unknown one is refused first, so a typo is named as itself. ``METHODS``
(defined in ``protocol.spec``, re-exported here) lists every method with its
params type and a one-line description; the daemon must implement exactly
these, and the README's protocol reference is checked against this table.

The params types live in one module per method family (``messages``:
ingest and bootstrap; ``context``: assemble, compact, describe, expand,
suppress; ``recall``: grep, expand_query; ``entities``: entities, entity; ``recent``: recent;
``graph``: query, teach,
correction, learn, trace, sync, maintain; ``grants``: grant, revoke;
``checks``: the bounds they share) and are all re-exported here, where
``protocol.spec`` resolves them by name and the daemon imports them.
"""

from __future__ import annotations

from protocol.methods.checks import MAX_DEPTH, MAX_ID_LEN, MAX_PATH_LEN
from protocol.methods.context import (
    FORMATS,
    MAX_BUDGET,
    AssembleParams,
    CompactParams,
    LookupParams,
    SuppressParams,
)
from protocol.methods.entities import ENTITY_KINDS, EntitiesParams, EntityParams
from protocol.methods.grants import GRANT_ID_LEN, MAX_GRANT_TTL_S, GrantParams, RevokeParams
from protocol.methods.graph import (
    AUTHORITIES,
    MAINTAIN_TASKS,
    RECALL_MODES,
    TEACH_KINDS,
    CorrectionParams,
    LearnParams,
    MaintainParams,
    QueryParams,
    SyncParams,
    TeachParams,
    TraceParams,
)
from protocol.methods.messages import (
    MAX_BATCH,
    MAX_BLOCKS,
    MESSAGE_FIELDS,
    NO_CONTENT_NEEDS,
    ON_FORK,
    ROLES,
    BootstrapParams,
    IngestParams,
    Message,
)
from protocol.methods.recall import (
    GREP_DEFAULT_FUSION,
    GREP_FUSIONS,
    GREP_MODES,
    GREP_SCOPES,
    ExpandQueryParams,
    GrepParams,
)
from protocol.methods.recent import PERIODS, RecentParams

# The method table lives in protocol.spec (light: the daemon's dispatcher imports
# it alone); re-exported here, where it has always been (``as``: re-exported).
from protocol.spec import GRANTABLE as GRANTABLE
from protocol.spec import METHODS as METHODS
from protocol.spec import MethodSpec as MethodSpec
from protocol.spec import NoParams as NoParams
from protocol.spec import Params as Params

__all__ = [
    "AUTHORITIES",
    "AssembleParams",
    "BootstrapParams",
    "CompactParams",
    "CorrectionParams",
    "ENTITY_KINDS",
    "EntitiesParams",
    "EntityParams",
    "ExpandQueryParams",
    "PERIODS",
    "RecentParams",
    "FORMATS",
    "GRANTABLE",
    "GRANT_ID_LEN",
    "GREP_DEFAULT_FUSION",
    "GREP_FUSIONS",
    "GREP_MODES",
    "GREP_SCOPES",
    "GrantParams",
    "GrepParams",
    "IngestParams",
    "LearnParams",
    "LookupParams",
    "MAINTAIN_TASKS",
    "MAX_BATCH",
    "MAX_BLOCKS",
    "MAX_BUDGET",
    "MAX_DEPTH",
    "MAX_GRANT_TTL_S",
    "MAX_ID_LEN",
    "MAX_PATH_LEN",
    "MESSAGE_FIELDS",
    "METHODS",
    "MaintainParams",
    "Message",
    "MethodSpec",
    "NO_CONTENT_NEEDS",
    "NoParams",
    "ON_FORK",
    "Params",
    "QueryParams",
    "RECALL_MODES",
    "ROLES",
    "RevokeParams",
    "SuppressParams",
    "SyncParams",
    "TEACH_KINDS",
    "TeachParams",
    "TraceParams",
]
