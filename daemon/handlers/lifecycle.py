"""Handlers of the daemon's own methods: ``ping``, ``info``, ``retain``, ``save``, ``reload``,
``shutdown``.

Tested through the daemon: tests/e2e/test_lcm.py, test_durability.py and
test_shutdown.py send these methods to a real process (``shutdown`` is
orchestrated by the server; its handler only reports the final save).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import anyio

from daemon.context import Context

if TYPE_CHECKING:
    from protocol.methods import NoParams


async def ping(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Answered on the event loop without touching the database."""
    return {"pong": True}


async def info(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Version, schema version and counts, read fresh from the database, and this
    daemon's background compaction (``active`` 0: none running or waiting to run)."""
    out = (await ctx.db(ctx.brain.info)).as_dict()
    out["compaction"] = ctx.compaction_counts()
    return out


def ping_now(ctx: Context, params: NoParams) -> dict[str, Any]:
    """``ping`` answered on the reader, before any task starts (``Handler.now``)."""
    return {"pong": True}


def info_now(ctx: Context, params: NoParams) -> dict[str, Any] | None:
    """``info`` answered on the reader when an idle read connection is free (``Handler.now``).

    It reads the maintained counters (a few statements, no lock); None sends it to a
    worker thread as before (no idle connection yet, none left, or the file is lost).
    """
    info = ctx.brain.info_now()
    if info is None:
        return None
    out = info.as_dict()
    out["compaction"] = ctx.compaction_counts()
    return out


async def retain(ctx: Context, params: NoParams) -> dict[str, Any]:
    """One retention pass now (``Brain.retain``): each batch its own short write, so
    other requests go on between them."""
    return dataclasses.asdict(await ctx.db(ctx.brain.retain))


async def save(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Checkpoint the WAL (and, in later layers, flush hot state)."""
    result = await ctx.db(ctx.brain.save)
    return {"saved": True, **dataclasses.asdict(result)}


async def reload(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Reopen the database and rebuild in-memory state from disk."""
    started = time.perf_counter()
    await ctx.db(ctx.brain.reload)
    return {"reloaded": True, "took_ms": (time.perf_counter() - started) * 1000}


async def shutdown(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Runs after in-flight requests finished or were abandoned: flush, then answer.

    The flush is bounded too (``Shutdown.bound``): a thread abandoned while it
    holds the engine would make it wait forever. ``saved`` is then null, which
    loses nothing: every acknowledged write is committed, in the WAL.
    """
    saved: dict[str, Any] | None = None
    with anyio.move_on_after(ctx.shutdown.bound()):
        saved = dataclasses.asdict(await ctx.db(ctx.brain.save))
    return {"ok": True, "saved": saved, "abandoned": ctx.shutdown.abandoned}
