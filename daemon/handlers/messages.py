"""Handlers that store messages: ``ingest`` and ``bootstrap`` (``protocol.methods.messages``).

Tested through the daemon: tests/e2e/test_lcm.py, test_message_shapes.py and
test_bootstrap_daemon.py send them to a real process.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from daemon import granted, progress
from daemon.context import Context

if TYPE_CHECKING:
    from brain import MessageIn
    from protocol.methods import BootstrapParams, IngestParams, Message


async def ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
    """Store messages; acknowledged only after the transaction commits (with the
    host's turn mark, when given, recorded in the same transaction)."""
    turn = None
    if params.turn is not None:
        from brain import HostTurn

        turn = HostTurn(params.turn.host, params.turn.key)
    result = await ctx.db(
        ctx.brain.ingest,
        params.session,
        [_message_in(m) for m in params.messages],
        session_key=params.session_key,
        field="message" if params.single else "messages",
        batch=not params.single,
        create=not granted.current.get(),
        turn=turn,
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
