"""Handlers of the learned graph: ``query``, ``teach``/``correction``, ``learn``, ``trace``,
``sync``, ``maintain`` and ``health`` (``protocol.methods.graph``).

Tested through the daemon: tests/e2e/test_graph_daemon.py, test_sync_daemon.py and
test_maintain_daemon.py send them to a real process.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from brain import ProviderError, ignore_progress
from daemon import progress
from daemon.context import Context

if TYPE_CHECKING:
    from brain import Progress
    from protocol.methods import (
        LearnParams,
        MaintainParams,
        NoParams,
        QueryParams,
        SyncParams,
        TeachParams,
        TraceParams,
    )


async def query(ctx: Context, params: QueryParams) -> dict[str, Any]:
    """Retrieve from the learned graph: fired nodes, the context block, the trace id."""
    from brain import TraverseOptions

    options = TraverseOptions(
        top_k=params.top_k,
        max_hops=params.max_hops,
        max_chars=params.max_chars,
        threshold=params.threshold,
        max_fired=params.max_fired,
    )
    # An in-process embedder (static, hash) embeds in the database thread: one thread
    # hop instead of two, and on a busy machine each hop waits for a core.
    embedded = (
        None
        if ctx.brain.embeds_in_process
        else await ctx.embedding.run(ctx.brain.embed_query, params.query)
    )
    result = await ctx.db(
        ctx.brain.query,
        params.query,
        chat_id=params.chat_id,
        options=options,
        record=params.record,
        embedded=embedded,
    )
    return {
        "trace_id": result.trace_id or None,
        "fired_nodes": [f.id for f in result.fired],
        # Field by field: ``dataclasses.asdict`` deep-copies each node (12 nodes: 360 us
        # against 3 us, timeit on the loaded test machine).
        "nodes": [
            {
                "id": f.id,
                "kind": f.kind,
                "authority": f.authority,
                "score": f.score,
                "text": f.text,
                "source": f.source,
                "lines": f.lines,
            }
            for f in result.fired
        ],
        "context": result.context,
        "seeds": [[node, round(score, 6)] for node, score in result.seeds],
        "inhibited": result.inhibited,
        **result.timings,
    }


async def teach(ctx: Context, params: TeachParams) -> dict[str, Any]:
    """Add a node; a correction with a chat also corrects that chat's latest trace."""
    from brain import NewNode, teach_text

    node = NewNode(
        kind=params.kind,  # type: ignore[arg-type]  # validated against TEACH_KINDS
        text=params.content,
        authority=params.authority,  # type: ignore[arg-type]  # validated
        metadata=params.metadata or {},
        dedup_key=params.dedup_key,
    )
    node = await ctx.db(ctx.brain.prepare_teach, node, chat_id=params.chat_id)
    embedded = await ctx.embedding.run(ctx.brain.embed_query, teach_text(node))
    result = await ctx.db(
        ctx.brain.teach, node, chat_id=params.chat_id, links=params.links, embedded=embedded
    )
    return dataclasses.asdict(result)


async def learn(ctx: Context, params: LearnParams) -> dict[str, Any]:
    """Credit an outcome to the steps a trace took."""
    result = await ctx.db(
        ctx.brain.learn,
        params.outcome,
        trace_id=params.trace_id,
        chat_id=params.chat_id,
        useful=params.useful,
    )
    return {
        "trace_id": result.trace_id,
        "edges_updated": result.edges_updated,
        "advantage": result.advantage,
        "baseline": result.baseline,
    }


async def trace(ctx: Context, params: TraceParams) -> dict[str, Any]:
    """A stored trace: by id, the chat's latest, or the latest."""
    result: dict[str, Any] = await ctx.db(
        ctx.brain.trace, trace_id=params.trace_id, chat_id=params.chat_id
    )
    return result


async def sync(ctx: Context, params: SyncParams) -> dict[str, Any]:
    """Index a workspace's markdown as chunk nodes; new chunks are embedded before the answer.

    Embedding waits in the embedder's threads; past the deadline the nodes not yet
    embedded are reported ``pending`` (the background embedder takes them), as when
    the provider fails.
    """
    report = progress.get() or ignore_progress
    indexed = await ctx.db(
        ctx.brain.sync_index,
        params.workspace,
        params.paths,
        dict(params.authority) or None,
        progress=report,
    )
    embedded = 0
    if indexed.new_rows:
        waiting = [True]  # an abandoned embedding must not report after the answer

        def embed_progress(done: int, total: int | None, phase: str) -> None:
            if waiting[0]:
                report(done, total, phase)

        try:
            embedded = await ctx.embedding.run(_embed_nodes, ctx, indexed.new_rows, embed_progress)
        except ProviderError:
            pass
        finally:
            waiting[0] = False
    return dataclasses.asdict(indexed.report(embedded))


def _embed_nodes(ctx: Context, rows: tuple[int, ...], report: Progress) -> int:
    return ctx.brain.embed_nodes(rows, progress=report)


async def maintain(ctx: Context, params: MaintainParams) -> dict[str, Any]:
    """The graph's slow loop, in a worker thread (ping is answered meanwhile)."""
    from brain import MaintainOptions  # numpy: loaded when maintenance runs

    options = MaintainOptions(**dict(params.knobs))  # type: ignore[arg-type]
    report = await ctx.db(
        ctx.brain.maintain,
        params.tasks,
        dry_run=params.dry_run,
        options=options,
        progress=progress.get() or ignore_progress,
    )
    out = report.to_dict()
    out.pop("took_ms")
    return {**out, "took_ms": report.took_ms}


async def health(ctx: Context, params: NoParams) -> dict[str, Any]:
    """The retrieval graph's shape, read fresh."""
    return dataclasses.asdict(await ctx.db(ctx.brain.health))
