"""Handlers of the entity index: ``entities`` and ``entity`` (``protocol.methods.entities``).

Tested through the daemon: tests/e2e/test_entities_daemon.py.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from daemon.context import Context

if TYPE_CHECKING:
    from protocol.methods import EntitiesParams, EntityParams


async def entities(ctx: Context, params: EntitiesParams) -> dict[str, Any]:
    """Entities named like ``params.name``, best match first, with mention counts."""
    found = await ctx.db(
        ctx.brain.entities,
        params.name,
        session=params.session,
        session_key=params.session_key,
        kind=params.kind,
        limit=params.limit,
    )
    return {"entities": [dataclasses.asdict(e) for e in found]}


async def entity(ctx: Context, params: EntityParams) -> dict[str, Any]:
    """One entity's mentions, oldest first (``NotFound`` when nothing in scope names it)."""
    result = await ctx.db(
        ctx.brain.entity,
        params.name,
        session=params.session,
        session_key=params.session_key,
        kind=params.kind,
        limit=params.limit,
    )
    return dataclasses.asdict(result)
