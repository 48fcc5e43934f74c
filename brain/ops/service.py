"""The engine's grant operations: ``brain.ops.grants`` run under the write lock.

Every grant operation writes (or must see the latest write: a cap holds across
processes only if the check and the reservation are one transaction), so each one
takes the write connection. Tested through the engine in tests/brain/ops/test_grants.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from brain.store.access import Access

if TYPE_CHECKING:
    from collections.abc import Callable

    from brain.config import BrainConfig
    from brain.ops.grants import Grant, Reach
    from brain.ops.retention import RetentionReport


class GrantService:
    """Grants over one database (see ``brain.ops.grants`` for the rules)."""

    def __init__(self, access: Access) -> None:
        """``access``: the database's connections."""
        self._access = access

    def create_grant(
        self,
        *,
        sessions: Sequence[str],
        session_key: str | None,
        methods: Sequence[str],
        token_cap: int,
        ttl_s: float,
    ) -> Grant:
        """Store a new grant; see ``brain.ops.grants.create``."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.create(
                store,
                sessions=sessions,
                session_key=session_key,
                methods=methods,
                token_cap=token_cap,
                ttl_s=ttl_s,
            )

    def get_grant(self, grant_id: str) -> Grant:
        """The stored grant (``NotFound`` if unknown)."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.get(store, grant_id)

    def revoke_grant(self, grant_id: str) -> Grant:
        """Revoke a grant; idempotent."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.revoke(store, grant_id)

    def charge_grant(self, grant_id: str, tokens: int) -> int:
        """Add an answer's cost to the grant's usage; return the new total."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.charge(store, grant_id, tokens)

    def admit_grant(self, grant_id: str, method: str, reach: Reach, holder: str) -> Grant | None:
        """Check the grant and hold it for one call; None while another process holds it.

        See ``brain.ops.grants.admit``: the check and a one-token reservation are one
        transaction, so the cap holds across processes sharing the database.
        """
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.admit(store, grant_id, method, reach, holder)

    def renew_grant(self, grant_id: str, holder: str) -> bool:
        """Extend a call's hold on a grant (``brain.ops.grants.renew``)."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.renew(store, grant_id, holder)

    def settle_grant(self, grant_id: str, holder: str, tokens: int) -> int:
        """Charge an admitted call's cost for its reservation and release its hold."""
        from brain.ops import grants

        with self._access.locked() as store:
            return grants.settle(store, grant_id, holder, tokens)


class RetentionService:
    """Retention over one database (``brain.ops.retention``)."""

    def __init__(self, access: Access, config: BrainConfig) -> None:
        """``access``: the database's connections; ``config``: its limits."""
        self._access = access
        self._config = config

    def retain(self, *, stop: Callable[[], bool] | None = None) -> RetentionReport:
        """Run one retention pass now: drop derived data past the configured age and
        size (messages only with ``delete_messages``), then hand freed pages back.

        Each batch is its own short transaction under the write lock, so requests go
        on meanwhile; ``stop`` (asked between batches) ends it early.
        """
        from brain.ops.retention import run_pass

        return run_pass(self._access, self._config, stop=stop)
