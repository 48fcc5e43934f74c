"""Method handlers: typed params in, a JSON-ready result out.

Handlers do no validation (params arrive parsed) and no error mapping (the
dispatcher does it); blocking engine calls go through ``Context.db``. A call
that needs a provider is split: database work through ``Context.db``, the wait
on the model or embedder through ``Context.llm`` / ``Context.embedding`` (own
threads, a deadline), so a hung provider never holds a database thread.
``shutdown`` is orchestrated by the server (drain, flush, answer, exit); its
handler only reports the final save.

This package holds the ``Handler`` record, the ordering lanes and the method table
(``HANDLERS``); the handlers themselves live in one module per method family,
as ``protocol.methods`` groups their params: ``messages``, ``context``,
``recall``, ``entities``, ``graph``, ``grants`` and ``lifecycle`` (the daemon's own methods).
A handler imports the engine parts it needs when it first runs (``info`` must
not load the assembler, search or the graph: "Lazy imports" in
docs/architecture.md); params types are only annotations.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from daemon.context import Context
from daemon.handlers import context, entities, grants, graph, lifecycle, messages, recall

HandlerFn = Callable[[Context, Any], Awaitable[Any]]
NowFn = Callable[[Context, Any], Any]
"""Answers at once on the event loop, or returns None to have ``run`` answer instead."""


@dataclass(frozen=True, slots=True)
class Handler:
    """A method's implementation, its ordering lane and whether it writes.

    A request on a lane waits for the requests before it on that lane. With
    ``holds_lane`` (the default) later requests on the lane also wait for it;
    without, it only waits (long work such as ``compact`` must not hold up the
    session's next ``assemble``). ``loop_free``: see the field.
    """

    run: HandlerFn
    lane: Callable[[Any], str | None]
    mutates: bool = False
    holds_lane: bool = True
    loop_free: bool = False
    """It awaits nothing but ``Context.db`` and reports no progress, so a one-shot
    ``brain call`` may run it with no event loop (``Context.inline``)."""
    now: NowFn | None = None
    """A synchronous answer the server gives on its reader as the line is read (no
    task, no thread): only for work of microseconds that never blocks (``ping``;
    ``info`` on an idle read connection). It returns None when it cannot answer
    without waiting, and the request then runs as any other."""


def _no_lane(_params: Any) -> str | None:
    return None


def _session_lane(params: Any) -> str | None:
    session = getattr(params, "session", None)
    return None if session is None else f"session:{session}"


def _workspace_lane(params: Any) -> str | None:
    # Two syncs of one workspace run in order; other requests need not wait for them.
    return f"workspace:{params.workspace}"


def _chat_lane(params: Any) -> str | None:
    chat = getattr(params, "chat_id", None)
    return None if chat is None else f"chat:{chat}"


HANDLERS: dict[str, Handler] = {
    "ping": Handler(lifecycle.ping, _no_lane, loop_free=True, now=lifecycle.ping_now),
    "info": Handler(lifecycle.info, _no_lane, loop_free=True, now=lifecycle.info_now),
    "ingest": Handler(messages.ingest, _session_lane, mutates=True, loop_free=True),
    "assemble": Handler(context.assemble, _session_lane),
    "compact": Handler(context.compact, _session_lane, mutates=True, holds_lane=False),
    "describe": Handler(context.describe, _session_lane, holds_lane=False, loop_free=True),
    "expand": Handler(context.expand, _session_lane, holds_lane=False, loop_free=True),
    "grep": Handler(recall.grep, _session_lane, holds_lane=False),
    "entities": Handler(entities.entities, _session_lane, holds_lane=False, loop_free=True),
    "entity": Handler(entities.entity, _session_lane, holds_lane=False, loop_free=True),
    "recent": Handler(context.recent, _session_lane, holds_lane=False, loop_free=True),
    "expand_query": Handler(recall.expand_query, _session_lane, holds_lane=False),
    "suppress": Handler(context.suppress, _session_lane, mutates=True, loop_free=True),
    "unsuppress": Handler(context.unsuppress, _session_lane, mutates=True, loop_free=True),
    "grant": Handler(grants.grant, _no_lane, mutates=True, loop_free=True),
    "revoke": Handler(grants.revoke, _no_lane, mutates=True, loop_free=True),
    "query": Handler(graph.query, _chat_lane, mutates=True),
    "teach": Handler(graph.teach, _chat_lane, mutates=True),
    "correction": Handler(graph.teach, _chat_lane, mutates=True),
    "learn": Handler(graph.learn, _chat_lane, mutates=True, loop_free=True),
    "trace": Handler(graph.trace, _chat_lane, loop_free=True),
    "sync": Handler(graph.sync, _workspace_lane, mutates=True),
    "maintain": Handler(graph.maintain, _no_lane, mutates=True),
    "bootstrap": Handler(messages.bootstrap, _session_lane, mutates=True),
    "health": Handler(graph.health, _no_lane, loop_free=True),
    "retain": Handler(lifecycle.retain, _no_lane, mutates=True),
    "save": Handler(lifecycle.save, _no_lane, loop_free=True),
    "reload": Handler(lifecycle.reload, _no_lane, loop_free=True),
    "shutdown": Handler(lifecycle.shutdown, _no_lane),
}
