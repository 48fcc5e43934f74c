"""Method handlers: typed params in, a JSON-ready result out.

Handlers do no validation (params arrive parsed) and no error mapping (the
dispatcher does it); blocking engine calls go through ``Context.db``.
``shutdown`` is orchestrated by the server (drain, flush, answer, exit); its
handler only reports the final save.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from brain import MessageIn
from daemon.context import Context
from protocol.methods import IngestParams, Message, NoParams

HandlerFn = Callable[[Context, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Handler:
    """A method's implementation, its ordering lane and whether it writes."""

    run: HandlerFn
    lane: Callable[[Any], str | None]
    mutates: bool = False


def _no_lane(_params: Any) -> str | None:
    return None


def _session_lane(params: IngestParams) -> str | None:
    return f"session:{params.session}"


async def ping(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Answered on the event loop without touching the database."""
    return {"pong": True}


async def info(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Version, schema version and counts, read fresh from the database."""
    return dataclasses.asdict(await ctx.db(ctx.brain.info))


async def ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
    """Store messages; acknowledged only after the transaction commits."""
    result = await ctx.db(
        ctx.brain.ingest,
        params.session,
        [_message_in(m) for m in params.messages],
        session_key=params.session_key,
        field="message" if params.single else "messages",
        batch=not params.single,
    )
    return {
        "session": result.session,
        "ingested": result.ingested,
        "duplicates": result.duplicates,
        "ids": [m.id for m in result.messages],
        # Built by hand: dataclasses.asdict deep-copies and cost ~1.7 ms per 500.
        "messages": [{"id": m.id, "seq": m.seq, "duplicate": m.duplicate} for m in result.messages],
    }


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
    """Runs after the server has drained in-flight requests: flush, then answer."""
    result = await ctx.db(ctx.brain.save)
    return {"ok": True, "saved": dataclasses.asdict(result)}


def _message_in(m: Message) -> MessageIn:
    return MessageIn(
        role=m.role,
        content=m.content,
        client_id=m.id,
        name=m.name,
        created_at=m.created_at,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
    )


HANDLERS: dict[str, Handler] = {
    "ping": Handler(ping, _no_lane),
    "info": Handler(info, _no_lane),
    "ingest": Handler(ingest, _session_lane, mutates=True),
    "save": Handler(save, _no_lane),
    "reload": Handler(reload, _no_lane),
    "shutdown": Handler(shutdown, _no_lane),
}
"""Method name -> handler; must cover ``protocol.methods.METHODS`` exactly."""
