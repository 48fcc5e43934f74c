"""brain.ops.grants: create, check, charge and revoke scoped, budgeted, expiring grants."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, InvalidInput, MessageIn, NotFound, Store, open_store
from brain.errors import GrantDenied, GrantExhausted
from brain.ops import grants
from brain.ops.grants import GRANT_ID, Reach

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _grant(store: Store, **overrides: object) -> grants.Grant:
    args: dict[str, object] = {
        "sessions": ["a"],
        "session_key": None,
        "methods": ["assemble", "grep"],
        "token_cap": 100,
        "ttl_s": 60.0,
        "now": T0,
    }
    args.update(overrides)
    return grants.create(store, **args)  # type: ignore[arg-type]


def _denied(store: Store, grant_id: str, method: str, reach: Reach, now: datetime = T0) -> str:
    with pytest.raises(GrantDenied) as caught:
        grants.check(store, grant_id, method, reach, now)
    return caught.value.reason


def test_a_new_grant_has_a_well_formed_id_and_is_stored_as_given(store: Store) -> None:
    grant = _grant(store, sessions=["a", "b", "a"], session_key="k")
    assert GRANT_ID.fullmatch(grant.grant_id)
    assert grant.sessions == ("a", "b")
    assert grant.expires_at == "2026-01-01T12:01:00.000Z"
    assert grants.get(store, grant.grant_id) == grant


def test_a_grant_needs_a_scope_methods_a_cap_and_a_ttl(store: Store) -> None:
    with pytest.raises(InvalidInput, match="sessions"):
        _grant(store, sessions=[], session_key=None)
    with pytest.raises(InvalidInput, match="methods"):
        _grant(store, methods=[])
    with pytest.raises(InvalidInput, match="token_cap"):
        _grant(store, token_cap=0)
    with pytest.raises(InvalidInput, match="ttl_s"):
        _grant(store, ttl_s=0)


def test_a_grant_allows_its_methods_on_its_sessions(store: Store) -> None:
    grant = _grant(store)
    assert grants.check(store, grant.grant_id, "assemble", Reach("a"), T0) == grant


def test_another_session_a_method_not_granted_and_everything_are_denied(store: Store) -> None:
    gid = _grant(store).grant_id
    assert _denied(store, gid, "assemble", Reach("b")) == "scope"
    assert _denied(store, gid, "ingest", Reach("a")) == "method"
    assert _denied(store, gid, "grep", Reach(everything=True)) == "scope"
    assert _denied(store, gid, "grep", Reach(session_key="k")) == "scope"


def test_a_session_key_grant_covers_exactly_the_sessions_filed_under_it(tmp_path: Path) -> None:
    engine = Brain(tmp_path / "b.db", BrainConfig())
    try:
        engine.ingest("mine", [MessageIn("user", "hi")], session_key="k")
        engine.ingest("theirs", [MessageIn("user", "hi")], session_key="other")
        engine.ingest("loose", [MessageIn("user", "hi")])
        store = engine.store
        gid = _grant(store, sessions=[], session_key="k", methods=["grep", "ingest"]).grant_id
        grants.check(store, gid, "grep", Reach("mine"), T0)
        grants.check(store, gid, "grep", Reach(session_key="k"), T0)
        assert _denied(store, gid, "grep", Reach("theirs")) == "scope"
        assert _denied(store, gid, "grep", Reach("loose")) == "scope"
        assert _denied(store, gid, "grep", Reach(session_key="other")) == "scope"
        # A session that does not exist yet is filed under no key: a request
        # under the grant cannot start one there.
        assert _denied(store, gid, "ingest", Reach("new", "k")) == "scope"
        assert _denied(store, gid, "ingest", Reach("new")) == "scope"
        assert _denied(store, gid, "ingest", Reach("mine", "other")) == "scope"
        grants.check(store, gid, "ingest", Reach("mine", "k"), T0)
    finally:
        engine.close()


def test_an_expired_grant_is_denied_from_the_moment_it_expires(store: Store) -> None:
    gid = _grant(store, ttl_s=60.0).grant_id
    grants.check(store, gid, "grep", Reach("a"), T0 + timedelta(seconds=59.9))
    assert _denied(store, gid, "grep", Reach("a"), T0 + timedelta(seconds=60)) == "expired"


def test_a_revoked_grant_is_denied_and_revoking_again_keeps_the_first_time(store: Store) -> None:
    gid = _grant(store).grant_id
    first = grants.revoke(store, gid, T0 + timedelta(seconds=1))
    again = grants.revoke(store, gid, T0 + timedelta(seconds=2))
    assert first.revoked_at == again.revoked_at == "2026-01-01T12:00:01.000Z"
    assert _denied(store, gid, "grep", Reach("a")) == "revoked"


def test_unknown_and_malformed_grant_ids_are_denied_as_unknown(store: Store) -> None:
    for forged in ("grt_0000000000000000", "grt_xyz", "", "' OR 1=1 --", "GRT_" + "a" * 16):
        assert _denied(store, forged, "grep", Reach("a")) == "unknown"
    with pytest.raises(NotFound):
        grants.revoke(store, "grt_0000000000000000")


def test_charges_add_up_and_a_used_up_cap_is_refused(store: Store) -> None:
    gid = _grant(store, token_cap=100).grant_id
    assert grants.charge(store, gid, 60) == 60
    grants.check(store, gid, "grep", Reach("a"), T0)
    assert grants.charge(store, gid, 60) == 120  # the call that crosses the cap still counts
    with pytest.raises(GrantExhausted):
        grants.check(store, gid, "grep", Reach("a"), T0)


def test_concurrent_charges_through_the_engine_lose_no_tokens(tmp_path: Path) -> None:
    engine = Brain(tmp_path / "b.db", BrainConfig())
    try:
        gid = engine.create_grant(
            sessions=["a"], session_key=None, methods=["grep"], token_cap=10**6, ttl_s=60
        ).grant_id
        threads = [
            threading.Thread(target=lambda: [engine.charge_grant(gid, 1) for _ in range(50)])
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert engine.get_grant(gid).tokens_used == 400
    finally:
        engine.close()


def test_grants_persist_across_reopening_the_database(db_path: Path) -> None:
    first = open_store(db_path, BrainConfig())
    try:
        grant = _grant(first)
        grants.charge(first, grant.grant_id, 7)
    finally:
        first.close()
    second = open_store(db_path, BrainConfig())
    try:
        again = grants.get(second, grant.grant_id)
        assert again.tokens_used == 7
        assert again.sessions == grant.sessions
    finally:
        second.close()


def test_an_admitted_call_reserves_a_token_and_holds_the_grant_until_it_settles(
    store: Store,
) -> None:
    gid = _grant(store, token_cap=100).grant_id
    assert grants.admit(store, gid, "grep", Reach("a"), "one", T0) is not None
    assert grants.get(store, gid).tokens_used == grants.RESERVED
    # Another process's call waits (None) and changes nothing meanwhile.
    assert grants.admit(store, gid, "grep", Reach("a"), "two", T0) is None
    assert grants.get(store, gid).tokens_used == grants.RESERVED
    assert grants.settle(store, gid, "one", 40) == 40
    assert grants.admit(store, gid, "grep", Reach("a"), "two", T0) is not None
    assert grants.settle(store, gid, "two", 0) == 40  # a failed call is refunded


def test_a_one_token_cap_admits_one_call_and_refuses_the_next_before_it_settles(
    store: Store,
) -> None:
    gid = _grant(store, token_cap=1).grant_id
    assert grants.admit(store, gid, "grep", Reach("a"), "one", T0) is not None
    later = T0 + timedelta(seconds=grants.HOLD_S + 1)  # even once the hold has lapsed
    with pytest.raises(GrantExhausted):
        grants.admit(store, gid, "grep", Reach("a"), "two", later)


def test_a_dead_holders_hold_lapses_and_its_reservation_stays_charged(store: Store) -> None:
    gid = _grant(store, token_cap=100).grant_id
    assert grants.admit(store, gid, "grep", Reach("a"), "dead", T0) is not None
    renewed = T0 + timedelta(seconds=grants.HOLD_S / 2)
    assert grants.renew(store, gid, "dead", renewed)
    assert grants.admit(store, gid, "grep", Reach("a"), "next", renewed) is None
    lapsed = renewed + timedelta(seconds=grants.HOLD_S + 1)
    assert grants.admit(store, gid, "grep", Reach("a"), "next", lapsed) is not None
    assert grants.get(store, gid).tokens_used == 2 * grants.RESERVED
    assert not grants.renew(store, gid, "dead", lapsed)
    # The dead holder's late settle charges but leaves the new holder's hold alone.
    grants.settle(store, gid, "dead", 5)
    assert grants.admit(store, gid, "grep", Reach("a"), "third", lapsed) is None


def test_admitting_checks_the_grant_first_and_a_refusal_reserves_nothing(store: Store) -> None:
    gid = _grant(store).grant_id
    with pytest.raises(GrantDenied):
        grants.admit(store, gid, "grep", Reach("b"), "one", T0)
    with pytest.raises(GrantDenied) as caught:
        grants.admit(store, gid, "grep", Reach("a", suppressed=True), "one", T0)
    assert caught.value.reason == "suppressed"
    assert grants.get(store, gid).tokens_used == 0
