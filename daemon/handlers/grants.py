"""Handlers of delegated grants: ``grant`` and ``revoke`` (``protocol.methods.grants``).

Tested through the daemon: tests/e2e/test_grants.py and tests/daemon/test_grants.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from daemon.context import Context

if TYPE_CHECKING:
    from protocol.methods import GrantParams, RevokeParams


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
