"""Grants through real daemons: stored across restarts, held in every path
(recall, session creation, suppressed items) and capped across processes."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from protocol.client import Client
from protocol.framing import encode_frame
from tests.e2e.conftest import DEADLINE, Daemon, Spawn, opened, serve_argv, user_message


def _granted(daemon: Daemon, request_id: int, grant: str, params: dict[str, Any]) -> dict[str, Any]:
    daemon.send(
        encode_frame({"id": request_id, "method": "grep", "params": params, "grant": grant})
    )
    frame = daemon.frame()
    assert frame["id"] == request_id, frame
    return frame


def test_a_grant_survives_a_restart_and_is_refused_once_revoked(
    db_path: Path, spawn: Spawn
) -> None:
    first = spawn(serve_argv(db_path))
    for session in ("mine", "theirs"):
        assert "result" in first.call(1, "ingest", {"session": session, "message": user_message(1)})
    made = first.call(
        2, "grant", {"sessions": ["mine"], "methods": ["grep"], "token_cap": 10_000, "ttl_s": 600}
    )
    grant = made["result"]["grant_id"]
    assert "result" in _granted(first, 3, grant, {"query": "message", "session": "mine"})
    code, _ = first.finish()
    assert code == 0

    second = spawn(serve_argv(db_path))
    used = _granted(second, 4, grant, {"query": "message", "session": "mine"})
    assert [h["session"] for h in used["result"]["hits"]] == ["mine"]
    outside = _granted(second, 5, grant, {"query": "message", "session": "theirs"})
    assert outside["error"]["code"] == -32003
    assert second.call(6, "revoke", {"grant_id": grant})["result"] == {"revoked": True}
    revoked = _granted(second, 7, grant, {"query": "message", "session": "mine"})
    assert revoked["error"]["code"] == -32003
    assert revoked["error"]["data"]["reason"] == "revoked"
    code, _ = second.finish()
    assert code == 0


SECRETS = ("swordfish-7781", "osprey-4410")
"""A workspace secret (``MEMORY.md``) and a taught one: graph nodes no grant reaches."""


def _plant_graph_secrets(client: Client, workspace: Path) -> None:
    workspace.mkdir()
    (workspace / "MEMORY.md").write_text(
        f"# Access\n\nThe root password is {SECRETS[0]}.\n", encoding="utf-8"
    )
    assert client.call("sync", {"workspace": str(workspace)})["added"] >= 1
    client.call("teach", {"content": f"The root password of the vault is {SECRETS[1]}"})


def test_assembles_recall_under_a_grant_fires_no_taught_node_or_workspace_chunk(
    db_path: Path, tmp_path: Path
) -> None:
    with Client.spawn(db_path, args=["--recall-mode", "on"]) as client:
        _plant_graph_secrets(client, tmp_path / "ws")
        question = {"role": "user", "content": "what is the root password?"}
        client.call("ingest", {"session": "s", "message": question})
        owners = client.call("assemble", {"session": "s", "budget": 4_000})
        assert owners["recall"]["injected"] is True
        assert all(secret in str(owners["messages"]) for secret in SECRETS)
        grant = client.call(
            "grant", {"sessions": ["s"], "methods": ["assemble"], "token_cap": 10**6, "ttl_s": 60}
        )["grant_id"]
        granted = client.call("assemble", {"session": "s", "budget": 4_000}, grant=grant)
        assert granted["recall"]["fired"] == []
        assert granted["recall"]["injected"] is False
        assert not any(secret in str(granted) for secret in SECRETS)
        assert any("root password?" in str(m["content"]) for m in granted["messages"])
        assert client.close() == 0


SCOPE_DENIED, NOT_FOUND, BUDGET_EXCEEDED = -32003, -32001, -32004


def _code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


def test_a_request_under_a_grant_never_creates_a_session_or_files_one_under_a_key(
    db_path: Path,
) -> None:
    with Client.spawn(db_path) as client:
        said = {"role": "user", "content": "secret plans"}
        client.call("ingest", {"session": "a", "session_key": "team", "message": said})
        client.call("ingest", {"session": "loose", "message": said})
        every = ["ingest", "assemble", "compact", "describe", "expand", "grep", "expand_query"]
        body = {"session_key": "team", "methods": every, "token_cap": 10**6, "ttl_s": 60}
        by_key = client.call("grant", body)["grant_id"]
        for method, params in [
            ("ingest", {"session": "future", "session_key": "team", "message": said}),
            ("ingest", {"session": "future", "message": said}),
            ("assemble", {"session": "future", "budget": 1_000}),
            ("compact", {"session": "future"}),
            ("grep", {"session": "future", "query": "secret"}),
            ("describe", {"session": "future", "id": "msg_1"}),
            ("expand", {"session": "future", "id": "sum_0000000000000000"}),
            ("expand_query", {"session": "future", "prompt": "what?", "query": "secret"}),
        ]:
            assert _code(client.request(method, params, grant=by_key)) == SCOPE_DENIED, method
        assert client.call("info")["conversations"] == 2
        # The owner starts ``future`` later, without a key: it stays outside the grant.
        client.call("ingest", {"session": "future", "message": said})
        refused = client.request("grep", {"session": "future", "query": "secret"}, grant=by_key)
        assert _code(refused) == SCOPE_DENIED
        body = {"sessions": ["later", "loose"], "methods": ["ingest"], "token_cap": 10**6}
        listed = client.call("grant", {**body, "ttl_s": 60})["grant_id"]
        later = client.request("ingest", {"session": "later", "message": said}, grant=listed)
        assert _code(later) == NOT_FOUND
        refile = {"session": "loose", "session_key": "team", "message": said}
        assert _code(client.request("ingest", refile, grant=listed)) == SCOPE_DENIED
        assert client.call("info")["conversations"] == 3
        hits = client.call("grep", {"session_key": "team", "query": "secret"})["hits"]
        assert {h["session"] for h in hits} == {"a"}  # ``loose`` was not filed under team
        assert client.call("ingest", {"session": "loose", "message": said}, grant=listed)
        assert client.close() == 0


def test_describe_of_suppressed_items_is_refused_under_a_grant(db_path: Path) -> None:
    with Client.spawn(db_path) as client:
        hidden = {"id": "h1", "role": "user", "content": "the hidden part"}
        client.call("ingest", {"session": "s", "message": hidden})
        client.call("suppress", {"session": "s", "ids": ["h1"]})
        lookup = {"session": "s", "id": "h1", "include_suppressed": True}
        assert "the hidden part" in str(client.call("describe", lookup))
        body = {"sessions": ["s"], "methods": ["describe"], "token_cap": 10**6, "ttl_s": 60}
        grant = client.call("grant", body)["grant_id"]
        refused = client.request("describe", lookup, grant=grant)
        assert _code(refused) == SCOPE_DENIED
        assert refused["error"]["data"]["reason"] == "suppressed"
        assert "the hidden part" not in str(refused)
        assert client.close() == 0


def _all_at_once(
    clients: list[Client], method: str, params: dict[str, Any], grant: str
) -> list[dict[str, Any]]:
    """Each client sends the same granted request, released together; their answers."""
    start = threading.Barrier(len(clients))
    answers: list[dict[str, Any]] = [{} for _ in clients]

    def ask(i: int) -> None:
        start.wait()
        answers[i] = clients[i].request(method, params, grant=grant)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    return answers


def test_daemons_sharing_a_database_answer_a_one_token_grant_once_between_them(
    db_path: Path,
) -> None:
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(Client.spawn(db_path)) for _ in range(5)]
        for client in clients:
            assert client.call("ping") == {"pong": True}  # every daemon is serving
        owner = clients[0]
        owner.call("ingest", {"session": "a", "message": {"role": "user", "content": "secret"}})
        body = {"sessions": ["a"], "methods": ["grep"], "token_cap": 1, "ttl_s": 60}
        for _ in range(5):
            grant = owner.call("grant", body)["grant_id"]
            answers = _all_at_once(clients, "grep", {"session": "a", "query": "secret"}, grant)
            assert sum("result" in a for a in answers) == 1, answers
            assert [_code(a) for a in answers if "error" in a] == [BUDGET_EXCEEDED] * 4
            with opened(db_path) as engine:
                assert 1 < engine.get_grant(grant).tokens_used < 200  # one answer's worth
        for client in clients:
            assert client.close() == 0


def test_daemons_sharing_a_grant_with_budget_left_answer_every_call_and_charge_each(
    db_path: Path,
) -> None:
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(Client.spawn(db_path)) for _ in range(4)]
        owner = clients[0]
        owner.call("ingest", {"session": "a", "message": {"role": "user", "content": "secret"}})
        body = {"sessions": ["a"], "methods": ["grep"], "token_cap": 10**6, "ttl_s": 60}
        grant = owner.call("grant", body)["grant_id"]
        alone = owner.call("grep", {"session": "a", "query": "secret"}, grant=grant)
        with opened(db_path) as engine:
            one = engine.get_grant(grant).tokens_used
        assert alone["hits"]
        # Calls in other processes wait for the one holding the grant, not refused.
        answers = _all_at_once(clients, "grep", {"session": "a", "query": "secret"}, grant)
        assert all("result" in a for a in answers), answers
        with opened(db_path) as engine:
            used = engine.get_grant(grant).tokens_used
        assert 5 * one - 5 <= used <= 5 * one + 5  # every answer charged, no reservation left
        for client in clients:
            assert client.close() == 0
