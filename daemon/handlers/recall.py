"""Handlers of recall: ``grep`` and ``expand_query`` (``protocol.methods.recall``).

Tested through the daemon: tests/e2e/test_grep_files.py, test_embedder_daemon.py and
tests/daemon/test_expand_query.py send them to a real process.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from brain import ProviderError
from daemon.context import Context

if TYPE_CHECKING:
    from brain import GrepMode, GrepScope
    from protocol.methods import ExpandQueryParams, GrepParams


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
        rank=params.rank,
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
    if params.mode in ("full_text", "hybrid"):
        result["rank"] = params.rank and params.scope != "files"
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
