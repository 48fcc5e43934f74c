"""Grants over the wire: a request carrying a grant stays in its scope and budget."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from brain import Brain
from tests.daemon.conftest import Harness

pytestmark = pytest.mark.anyio

SCOPE_DENIED = -32003
BUDGET_EXCEEDED = -32004
_ids = itertools.count(1)


async def call(
    h: Harness, method: str, params: dict[str, Any] | None = None, grant: Any = None
) -> dict[str, Any]:
    request_id = next(_ids)
    frame: dict[str, Any] = {"id": request_id, "method": method, "params": params or {}}
    if grant is not None:
        frame["grant"] = grant
    await h.write(frame)
    answer = await h.read()
    assert answer["id"] == request_id
    return answer


async def ok(
    h: Harness, method: str, params: dict[str, Any] | None = None, grant: Any = None
) -> Any:
    answer = await call(h, method, params, grant)
    assert "result" in answer, answer
    return answer["result"]


async def refused(
    h: Harness, method: str, params: dict[str, Any], grant: Any, code: int = SCOPE_DENIED
) -> dict[str, Any]:
    answer = await call(h, method, params, grant)
    assert "error" in answer, answer
    assert answer["error"]["code"] == code, answer
    error: dict[str, Any] = answer["error"]
    return error


async def seed(h: Harness) -> None:
    for session, key in (("a", "team"), ("b", "team"), ("c", None)):
        params: dict[str, Any] = {
            "session": session,
            "message": {"id": f"{session}1", "role": "user", "content": f"secret of {session}"},
        }
        if key:
            params["session_key"] = key
        await ok(h, "ingest", params)


async def new_grant(h: Harness, **params: Any) -> str:
    body = {"sessions": ["a"], "methods": ["grep", "assemble"], "token_cap": 100_000, "ttl_s": 60}
    body.update(params)
    result = await ok(h, "grant", body)
    assert result["grant_id"].startswith("grt_")
    grant_id: str = result["grant_id"]
    return grant_id


def say(session: str, key: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"session": session, "message": {"role": "user", "content": "x"}}
    if key is not None:
        params["session_key"] = key
    return params


def grep(session: str | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"query": "secret", **extra}
    if session is not None:
        params["session"] = session
    return params


async def test_a_grant_is_answered_with_its_id_expiry_methods_and_cap(running: Harness) -> None:
    result = await ok(
        running,
        "grant",
        {"session_key": "team", "methods": ["grep"], "token_cap": 5, "ttl_s": 1.5},
    )
    assert set(result) == {"grant_id", "expires_at", "methods", "token_cap"}
    assert result["methods"] == ["grep"]
    assert result["token_cap"] == 5
    assert result["expires_at"].endswith("Z")


@pytest.mark.parametrize(
    "params",
    [
        {"methods": ["grep"], "token_cap": 5, "ttl_s": 60},
        {"sessions": [], "methods": ["grep"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": [], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["grant"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["revoke"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["shutdown"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["info"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["nope"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["grep"], "token_cap": 0, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["grep"], "ttl_s": 60},
        {"sessions": ["a"], "methods": ["grep"], "token_cap": 5, "ttl_s": 0},
        {"sessions": ["a"], "methods": ["grep"], "token_cap": 5, "ttl_s": 1e9},
        {"sessions": [1], "methods": ["grep"], "token_cap": 5, "ttl_s": 60},
        {"sessions": ["a"], "methods": ["grep"], "token_cap": 5, "ttl_s": 60, "x": 1},
    ],
)
async def test_a_grant_with_bad_params_is_invalid(running: Harness, params: dict[str, Any]) -> None:
    answer = await call(running, "grant", params)
    assert answer["error"]["code"] == -32602, answer


async def test_a_grant_reads_its_own_session(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, methods=["grep", "assemble", "describe"])
    hits = (await ok(running, "grep", grep("a"), gid))["hits"]
    assert [h["session"] for h in hits] == ["a"]
    assembled = await ok(running, "assemble", {"session": "a", "budget": 1000}, gid)
    assert assembled["messages"]
    described = await ok(running, "describe", {"id": "a1", "session": "a"}, gid)
    assert "secret of a" in str(described)


async def test_another_sessions_id_is_refused_on_every_scoped_method(running: Harness) -> None:
    await seed(running)
    methods = ["grep", "assemble", "describe", "expand", "ingest", "compact"]
    gid = await new_grant(running, methods=methods)
    message = {"role": "user", "content": "planted"}
    for method, params in [
        ("grep", grep("b")),
        ("assemble", {"session": "b", "budget": 1000}),
        ("describe", {"id": "b1", "session": "b"}),
        ("expand", {"id": "sum_0000000000000000", "session": "b"}),
        ("ingest", {"session": "b", "message": message}),
        ("compact", {"session": "b"}),
    ]:
        error = await refused(running, method, params, gid)
        assert error["data"]["reason"] == "scope"
    assert (await ok(running, "info"))["messages"] == 3  # nothing was planted


async def test_all_true_and_lookups_without_a_session_are_refused(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, methods=["grep", "describe", "expand"])
    await refused(running, "grep", grep(all=True), gid)
    await refused(running, "describe", {"id": "a1", "all": True}, gid)
    await refused(running, "expand", {"id": "sum_0000000000000000", "all": True}, gid)


async def test_a_session_key_grant_reaches_only_that_key(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, sessions=[], session_key="team", methods=["grep", "ingest"])
    hits = (await ok(running, "grep", grep(session_key="team"), gid))["hits"]
    assert sorted(h["session"] for h in hits) == ["a", "b"]
    await ok(running, "grep", grep("b"), gid)
    await refused(running, "grep", grep("c"), gid)
    await refused(running, "grep", grep(session_key="other"), gid)
    await refused(running, "ingest", say("a", "other"), gid)
    await ok(running, "ingest", say("a", "team"), gid)
    await ok(running, "ingest", say("b"), gid)


async def test_a_session_list_grant_does_not_reach_by_session_key(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, sessions=["a"], methods=["grep"])
    await refused(running, "grep", grep(session_key="team"), gid)


async def test_a_method_not_granted_is_refused(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, methods=["grep"])
    error = await refused(running, "assemble", {"session": "a", "budget": 1000}, gid)
    assert error["data"]["reason"] == "method"
    for method in ("info", "save", "reload"):
        await refused(running, method, {}, gid)


async def test_a_grant_cannot_mint_or_revoke_grants(running: Harness) -> None:
    gid = await new_grant(running)
    body = {"sessions": ["a"], "methods": ["grep"], "token_cap": 5, "ttl_s": 60}
    await refused(running, "grant", body, gid)
    await refused(running, "revoke", {"grant_id": gid}, gid)


async def test_ping_through_a_grant_needs_ping_granted(running: Harness) -> None:
    await refused(running, "ping", {}, await new_grant(running, methods=["grep"]))
    assert await ok(running, "ping", {}, await new_grant(running, methods=["ping"])) == {
        "pong": True
    }


async def test_an_expired_grant_is_refused(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running, ttl_s=0.05)
    await anyio.sleep(0.1)  # about expiry itself, not speed: the grant must be past its TTL
    error = await refused(running, "grep", grep("a"), gid)
    assert error["data"]["reason"] == "expired"


async def test_a_revoked_grant_is_refused_and_revoking_is_idempotent(running: Harness) -> None:
    await seed(running)
    gid = await new_grant(running)
    await ok(running, "grep", grep("a"), gid)
    assert await ok(running, "revoke", {"grant_id": gid}) == {"revoked": True}
    assert await ok(running, "revoke", {"grant_id": gid}) == {"revoked": True}
    error = await refused(running, "grep", grep("a"), gid)
    assert error["data"]["reason"] == "revoked"


async def test_revoking_an_unknown_grant_is_not_found(running: Harness) -> None:
    assert (await call(running, "revoke", {"grant_id": "grt_0000000000000000"}))["error"][
        "code"
    ] == -32001


async def test_an_exhausted_grant_is_refused_after_the_call_that_used_it_up(
    running: Harness, engine: Brain
) -> None:
    await seed(running)
    gid = await new_grant(running, token_cap=1)
    hits = await ok(running, "grep", grep("a"), gid)  # allowed when it started: answered
    assert hits["hits"]
    used = engine.get_grant(gid).tokens_used
    assert used > 1
    error = await refused(running, "grep", grep("a"), gid, BUDGET_EXCEEDED)
    assert error["data"]["token_cap"] == 1
    assert engine.get_grant(gid).tokens_used == used  # refusals cost nothing


async def test_usage_is_the_estimated_size_of_each_answer(running: Harness, engine: Brain) -> None:
    await seed(running)
    gid = await new_grant(running)
    await ok(running, "grep", grep("a"), gid)
    first = engine.get_grant(gid).tokens_used
    await ok(running, "grep", grep("a"), gid)
    assert 0 < first < 200
    assert first * 2 - 2 <= engine.get_grant(gid).tokens_used <= first * 2 + 2


@pytest.mark.parametrize("forged", ["grt_0000000000000000", "grt_zz", "nonsense", "x" * 64])
async def test_a_forged_or_malformed_grant_id_is_refused(running: Harness, forged: str) -> None:
    await seed(running)
    error = await refused(running, "grep", grep("a"), forged)
    assert error["data"]["reason"] == "unknown"
    assert forged not in error["message"]


@pytest.mark.parametrize("grant", [123, "", ["grt_0000000000000000"], {}, True, "x" * 65])
async def test_a_grant_member_that_is_not_a_short_string_is_an_invalid_request(
    running: Harness, grant: Any
) -> None:
    await running.write({"id": 1, "method": "ping", "grant": grant})
    assert (await running.read())["error"]["code"] == -32600


async def test_a_notification_carrying_a_grant_is_checked_and_charged_silently(
    running: Harness, engine: Brain
) -> None:
    await seed(running)
    gid = await new_grant(running, methods=["ingest"])
    outside = {"session": "b", "message": {"role": "user", "content": "planted"}}
    inside = {"session": "a", "message": {"role": "user", "content": "allowed"}}
    await running.write({"method": "ingest", "params": outside, "grant": gid})
    await running.write({"method": "ingest", "params": inside, "grant": gid})
    await running.write({"method": "ingest", "params": inside, "grant": "grt_0000000000000000"})
    assert await ok(running, "ping") == {"pong": True}  # notifications got no answer
    with anyio.fail_after(5):
        while (await ok(running, "info"))["messages"] < 4:
            await anyio.sleep(0.01)
    assert (await ok(running, "info"))["messages"] == 4
    assert engine.get_grant(gid).tokens_used > 0


async def test_shutdown_carrying_a_grant_is_refused_and_the_daemon_keeps_serving(
    running: Harness,
) -> None:
    gid = await new_grant(running, methods=["ping"])
    for method in ("shutdown", "reload", "save", "info"):
        error = await refused(running, method, {}, gid)
        assert error["data"]["reason"] == "method"
    assert await ok(running, "ping") == {"pong": True}


async def test_calls_sent_together_under_one_grant_pass_its_cap_by_at_most_one_call(
    running: Harness, engine: Brain
) -> None:
    await seed(running)
    gid = await new_grant(running, token_cap=1)
    first = next(_ids)
    for request_id in range(first, first + 20):
        await running.write({"id": request_id, "method": "grep", "params": grep("a"), "grant": gid})
    answers = [await running.read() for _ in range(20)]
    assert sorted(a["id"] for a in answers) == list(range(first, first + 20))
    answered = [a for a in answers if "result" in a]
    refusals = [a for a in answers if "error" in a]
    assert len(answered) == 1
    assert {a["error"]["code"] for a in refusals} == {BUDGET_EXCEEDED}
    assert engine.get_grant(gid).tokens_used < 200  # one answer's worth
