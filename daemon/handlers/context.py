"""Handlers of a session's context: ``assemble``, ``compact``, ``describe``, ``expand``,
``suppress`` and ``unsuppress`` (``protocol.methods.context``), and ``recent``
(``protocol.methods.recent``).

Tested through the daemon: tests/e2e/test_assemble_host.py, test_compaction_follows.py,
test_describe_daemon.py and test_suppress_daemon.py send them to a real process.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from brain import ignore_progress
from daemon import granted, progress
from daemon.context import Context

if TYPE_CHECKING:
    from brain import CompactionReport, RecallMode
    from protocol.methods import (
        AssembleParams,
        CompactParams,
        LookupParams,
        RecentParams,
        SuppressParams,
    )


async def assemble(ctx: Context, params: AssembleParams) -> dict[str, Any]:
    """The model-ready context for a session under a token budget."""
    from brain import AssembleOptions

    options = AssembleOptions(
        budget=params.budget,
        format="anthropic" if params.format == "anthropic" else "openai",
        fresh_tail_count=params.fresh_tail,
        stubs=params.stubs,
        stub_tokens=params.stub_tokens,
        detail=params.detail,
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
    left_out = bool(
        result.dropped["messages"] or result.dropped["summaries"] or result.gaps["count"]
    )
    if ctx.brain.config.compaction.auto and (result.budget_changed or left_out):
        # A new budget to follow: compaction may have work now (it checks, in the
        # background, after the session is quiet). History the context could not hold:
        # at once, whether or not the session pauses (a tool loop never does).
        ctx.compactions.request(params.session, urgent=left_out)
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
        fold_tail=params.fold_tail,
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


async def recent(ctx: Context, params: RecentParams) -> dict[str, Any]:
    """The day and week rollups and leaf summaries of a time window, in time order."""
    result: dict[str, Any] = await ctx.db(
        ctx.brain.recent,
        session=params.session,
        session_key=params.session_key,
        since=params.since,
        before=params.before,
        period=params.period,
        max_tokens=params.max_tokens,
    )
    return result
