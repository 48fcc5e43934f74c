"""Method handlers: typed params in, a JSON-ready result out.

Handlers do no validation (params arrive parsed) and no error mapping (the
dispatcher does it); blocking engine calls go through ``Context.db``. A call
that needs a provider is split: database work through ``Context.db``, the wait
on the model or embedder through ``Context.llm`` / ``Context.embedding`` (own
threads, a deadline), so a hung provider never holds a database thread.
``shutdown`` is orchestrated by the server (drain, flush, answer, exit); its
handler only reports the final save.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from brain import ProviderError, ignore_progress
from daemon import granted, progress
from daemon.context import Context

# A handler imports the engine parts it needs when it first runs: ``info`` must
# not load the assembler, search or the graph (see "Lazy imports" in
# docs/architecture.md). Params types are only annotations here.
if TYPE_CHECKING:
    from brain import CompactionReport, GrepMode, GrepScope, MessageIn, Progress, RecallMode
    from protocol.methods import (
        AssembleParams,
        BootstrapParams,
        CompactParams,
        ExpandQueryParams,
        GrantParams,
        GrepParams,
        IngestParams,
        LearnParams,
        LookupParams,
        MaintainParams,
        Message,
        NoParams,
        QueryParams,
        RevokeParams,
        SuppressParams,
        SyncParams,
        TeachParams,
        TraceParams,
    )

HandlerFn = Callable[[Context, Any], Awaitable[Any]]


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


def _no_lane(_params: Any) -> str | None:
    return None


def _session_lane(params: Any) -> str | None:
    session = getattr(params, "session", None)
    return None if session is None else f"session:{session}"


async def ping(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Answered on the event loop without touching the database."""
    return {"pong": True}


async def info(ctx: Context, params: NoParams) -> dict[str, Any]:
    """Version, schema version and counts, read fresh from the database, and this
    daemon's background compaction (``active`` 0: none running or waiting to run)."""
    out = dataclasses.asdict(await ctx.db(ctx.brain.info))
    out["compaction"] = ctx.compaction_counts()
    return out


async def ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
    """Store messages; acknowledged only after the transaction commits."""
    result = await ctx.db(
        ctx.brain.ingest,
        params.session,
        [_message_in(m) for m in params.messages],
        session_key=params.session_key,
        field="message" if params.single else "messages",
        batch=not params.single,
        create=not granted.current.get(),
    )
    from brain import compaction_sizes

    compaction = ctx.brain.config.compaction
    # All raw history (tail included) over the session's threshold: maybe work to do.
    if (
        compaction.auto
        and result.raw_tokens > compaction_sizes(compaction, result.budget).threshold
    ):
        ctx.compactions.request(params.session)
    return {
        "session": result.session,
        "ingested": result.ingested,
        "duplicates": result.duplicates,
        "context_tokens": result.context_tokens,
        "ids": [m.id for m in result.messages],
        # Built by hand: dataclasses.asdict deep-copies and cost ~1.7 ms per 500.
        "messages": [{"id": m.id, "seq": m.seq, "duplicate": m.duplicate} for m in result.messages],
    }


async def assemble(ctx: Context, params: AssembleParams) -> dict[str, Any]:
    """The model-ready context for a session under a token budget."""
    from brain import AssembleOptions

    options = AssembleOptions(
        budget=params.budget,
        format="anthropic" if params.format == "anthropic" else "openai",
        fresh_tail_count=params.fresh_tail,
        stubs=params.stubs,
        stub_tokens=params.stub_tokens,
    )
    recall = _RECALL_MODES.get(params.recall or "") or ctx.brain.config.recall_mode
    embedded = None
    if recall != "off":
        text = await ctx.db(ctx.brain.recall_text, params.session)
        embedded = await ctx.embedding.run(ctx.brain.embed_query, text)
    result = await ctx.db(
        ctx.brain.assemble,
        params.session,
        options,
        recall=recall,
        summaries_only=granted.current.get(),
        embedded=embedded,
    )
    dropped = result.dropped["messages"] or result.dropped["summaries"]
    if ctx.brain.config.compaction.auto and (result.budget_changed or dropped):
        # A new budget to follow, or history the context could not hold: compaction
        # may have work now (it checks, in the background, after the session is quiet).
        ctx.compactions.request(params.session)
    elif result.withheld:
        # Withheld by a suppression this process did not see (another process): rebuild.
        ctx.compactions.request(params.session, rebuild_only=True)
    # Shallow: dataclasses.asdict deep-copies every message (9 ms of 19 ms at 5k).
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    out.pop("budget_changed")
    if params.format != "anthropic":
        out.pop("system")
    out.pop("recall_tokens")
    if result.recall is None:
        out.pop("recall")
    else:
        out["recall"] = dataclasses.asdict(result.recall)
    return out


_RECALL_MODES: dict[str, RecallMode] = {"off": "off", "shadow": "shadow", "on": "on"}


async def compact(ctx: Context, params: CompactParams) -> dict[str, Any]:
    """A full sweep (or sweeps down to a target) now, in a worker thread."""
    report = await ctx.compactions.run(
        ctx.brain.compact,
        params.session,
        target_tokens=params.target_tokens,
        progress=progress.get() or ignore_progress,
    )
    return _report(report)


async def describe(ctx: Context, params: LookupParams) -> dict[str, Any]:
    """What a summary, payload file or message id holds."""
    return await ctx.db(
        ctx.brain.describe,
        params.id,
        session=params.session,
        max_tokens=params.max_tokens,
        lines=params.lines,
        include_suppressed=params.include_suppressed,
    )


async def expand(ctx: Context, params: LookupParams) -> dict[str, Any]:
    """A summary walked down to child summaries and source messages."""
    return await ctx.db(
        ctx.brain.expand, params.id, session=params.session, max_tokens=params.max_tokens
    )


async def expand_query(ctx: Context, params: ExpandQueryParams) -> dict[str, Any]:
    """A focused answer with citations, walked down from summaries or search hits.

    The model's synthesis waits in the LLM's threads; past the deadline the answer is
    the extractive one with ``fallback: true``, as when the model fails.
    """
    draft = await ctx.db(
        ctx.brain.draft_answer,
        params.prompt,
        session=params.session,
        summary_ids=params.summary_ids,
        query=params.query,
        max_tokens=params.max_tokens,
    )
    if ctx.brain.chat is None or not draft.extractive["citations"]:
        return draft.extractive
    try:
        return await ctx.llm.run(ctx.brain.synthesize, draft)
    except ProviderError:
        return {**draft.extractive, "fallback": True}


async def grep(ctx: Context, params: GrepParams) -> dict[str, Any]:
    """Messages and summaries (or payload files) matching a regex or free text, best first."""
    from brain import GrepOptions

    options = GrepOptions(
        query=params.query,
        mode=_GREP_MODES.get(params.mode, "full_text"),
        fusion="rrf" if params.fusion == "rrf" else "weighted",
        scope=_GREP_SCOPES.get(params.scope, "both"),
        since=params.since,
        before=params.before,
        limit=params.limit,
    )
    started = time.perf_counter()
    embedded = None
    if options.mode in ("semantic", "hybrid"):
        # Past the deadline: ProviderError (-32007), as when the embedder fails.
        embedded = await ctx.embedding.run(ctx.brain.embed_query, params.query)
    hits = await ctx.db(
        ctx.brain.grep,
        options,
        session=params.session,
        session_key=params.session_key,
        embedded=embedded,
    )
    took_ms = round((time.perf_counter() - started) * 1000, 3)
    result: dict[str, Any] = {
        "mode": params.mode,
        "hits": [dataclasses.asdict(h) for h in hits],
        "took_ms": took_ms,
    }
    if params.mode in ("semantic", "hybrid"):
        result["fusion"] = params.fusion
        result["pending"] = await ctx.db(ctx.brain.embeddings_pending)
    return result


_GREP_SCOPES: dict[str, GrepScope] = {
    "messages": "messages",
    "summaries": "summaries",
    "both": "both",
    "files": "files",
}
_GREP_MODES: dict[str, GrepMode] = {
    "regex": "regex",
    "full_text": "full_text",
    "semantic": "semantic",
    "hybrid": "hybrid",
}


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
    embedded = await ctx.embedding.run(ctx.brain.embed_query, params.query)
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
        "nodes": [dataclasses.asdict(f) for f in result.fired],
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
    return dataclasses.asdict(result)


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


async def bootstrap(ctx: Context, params: BootstrapParams) -> dict[str, Any]:
    """Import a transcript file from its anchor on, in batches, in a worker thread."""
    report = await ctx.db(
        ctx.brain.bootstrap,
        params.session,
        params.path,
        session_key=params.session_key,
        on_fork="append" if params.on_fork == "append" else "refuse",
        progress=progress.get(),
    )
    compaction = ctx.brain.config.compaction
    if report.imported and compaction.auto:
        ctx.compactions.request(params.session)  # as after ingest: it checks the threshold
    return dataclasses.asdict(report)


def _workspace_lane(params: Any) -> str | None:
    # Two syncs of one workspace run in order; other requests need not wait for them.
    return f"workspace:{params.workspace}"


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


def _chat_lane(params: Any) -> str | None:
    chat = getattr(params, "chat_id", None)
    return None if chat is None else f"chat:{chat}"


async def suppress(ctx: Context, params: SuppressParams) -> dict[str, Any]:
    """Hide messages or summaries (nothing is deleted)."""
    result = await ctx.db(ctx.brain.suppress, params.ids, session=params.session)
    for session in result.rebuild:  # summaries withheld by it are rebuilt in the background
        ctx.compactions.request(session, rebuild_only=True)
    return {
        "suppressed": result.changed,
        "already": result.unchanged,
        "not_found": result.not_found,
    }


async def unsuppress(ctx: Context, params: SuppressParams) -> dict[str, Any]:
    """Show suppressed messages or summaries again."""
    result = await ctx.db(ctx.brain.suppress, params.ids, session=params.session, suppressed=False)
    return {
        "unsuppressed": result.changed,
        "already": result.unchanged,
        "not_found": result.not_found,
    }


async def grant(ctx: Context, params: GrantParams) -> dict[str, Any]:
    """Store a scoped, budgeted, expiring grant; the id is what a sub-agent carries."""
    created = await ctx.db(
        ctx.brain.create_grant,
        sessions=params.sessions,
        session_key=params.session_key,
        methods=params.methods,
        token_cap=params.token_cap,
        ttl_s=params.ttl_s,
    )
    return {
        "grant_id": created.grant_id,
        "expires_at": created.expires_at,
        "methods": list(created.methods),
        "token_cap": created.token_cap,
    }


async def revoke(ctx: Context, params: RevokeParams) -> dict[str, Any]:
    """Revoke a grant at once; revoking it again is a no-op."""
    await ctx.db(ctx.brain.revoke_grant, params.grant_id)
    return {"revoked": True}


def _report(report: CompactionReport) -> dict[str, Any]:
    return {
        "leaf_passes": report.leaf_passes,
        "condensed_passes": report.condensed_passes,
        "rebuilt": report.rebuilt,
        "summaries": report.summaries,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "summarize_ms": round(report.summarize_ms, 3),
        "took_ms": round(report.took_ms, 3),
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
    """Runs after in-flight requests finished or were abandoned: flush, then answer.

    The flush is bounded too (``Shutdown.bound``): a thread abandoned while it
    holds the engine would make it wait forever. ``saved`` is then null, which
    loses nothing: every acknowledged write is committed, in the WAL.
    """
    saved: dict[str, Any] | None = None
    with anyio.move_on_after(ctx.shutdown.bound()):
        saved = dataclasses.asdict(await ctx.db(ctx.brain.save))
    return {"ok": True, "saved": saved, "abandoned": ctx.shutdown.abandoned}


def _message_in(m: Message) -> MessageIn:
    from brain import MessageIn

    return MessageIn(
        role=m.role,
        content=m.content,
        client_id=m.id,
        name=m.name,
        created_at=m.created_at,
        tool_calls=m.tool_calls,
        tool_call_id=m.tool_call_id,
        extra=m.extra,
        content_absent=m.content_absent,
    )


HANDLERS: dict[str, Handler] = {
    "ping": Handler(ping, _no_lane, loop_free=True),
    "info": Handler(info, _no_lane, loop_free=True),
    "ingest": Handler(ingest, _session_lane, mutates=True, loop_free=True),
    "assemble": Handler(assemble, _session_lane),
    "compact": Handler(compact, _session_lane, mutates=True, holds_lane=False),
    "describe": Handler(describe, _session_lane, holds_lane=False, loop_free=True),
    "expand": Handler(expand, _session_lane, holds_lane=False, loop_free=True),
    "grep": Handler(grep, _session_lane, holds_lane=False),
    "expand_query": Handler(expand_query, _session_lane, holds_lane=False),
    "suppress": Handler(suppress, _session_lane, mutates=True, loop_free=True),
    "unsuppress": Handler(unsuppress, _session_lane, mutates=True, loop_free=True),
    "grant": Handler(grant, _no_lane, mutates=True, loop_free=True),
    "revoke": Handler(revoke, _no_lane, mutates=True, loop_free=True),
    "query": Handler(query, _chat_lane, mutates=True),
    "teach": Handler(teach, _chat_lane, mutates=True),
    "correction": Handler(teach, _chat_lane, mutates=True),
    "learn": Handler(learn, _chat_lane, mutates=True, loop_free=True),
    "trace": Handler(trace, _chat_lane, loop_free=True),
    "sync": Handler(sync, _workspace_lane, mutates=True),
    "maintain": Handler(maintain, _no_lane, mutates=True),
    "bootstrap": Handler(bootstrap, _session_lane, mutates=True),
    "health": Handler(health, _no_lane, loop_free=True),
    "save": Handler(save, _no_lane, loop_free=True),
    "reload": Handler(reload, _no_lane, loop_free=True),
    "shutdown": Handler(shutdown, _no_lane),
}
"""Method name -> handler; must cover ``protocol.methods.METHODS`` exactly."""
