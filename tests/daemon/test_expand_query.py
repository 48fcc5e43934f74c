"""expand_query over the wire: params checked at the edge, a cited answer back, grantable."""

from __future__ import annotations

import pytest

from tests.daemon.conftest import Harness

pytestmark = pytest.mark.anyio


async def test_expand_query_answers_with_citations_and_checks_its_params(running: Harness) -> None:
    messages = [
        {"role": "user", "content": "Where do the nightly backups go?", "id": "q"},
        {"role": "assistant", "content": "Nightly backups go to bucket cold-store-7.", "id": "a"},
    ]
    await running.write(
        {"id": 1, "method": "ingest", "params": {"session": "s", "messages": messages}}
    )
    assert "result" in await running.read()
    params = {"prompt": "where do backups go", "session": "s", "query": "nightly backups bucket"}
    await running.write({"id": 2, "method": "expand_query", "params": params})
    result = (await running.read())["result"]
    assert result["mode"] == "extractive"
    assert "cold-store-7. [a]" in result["answer"]
    assert {c["id"] for c in result["citations"]} >= {"a"}
    await running.write(
        {"id": 3, "method": "expand_query", "params": {"prompt": "x", "session": "s"}},
        {"id": 4, "method": "expand_query", "params": {"prompt": "x", "query": "y"}},
    )
    errors = [f["error"] for f in await running.read_n(2)]
    assert [e["code"] for e in errors] == [-32602, -32602]
    assert "summary_ids" in errors[0]["message"]


async def test_expand_query_can_be_granted_within_the_grant_sessions(running: Harness) -> None:
    note = {"role": "user", "content": "hello"}
    await running.write({"id": 0, "method": "ingest", "params": {"session": "s", "message": note}})
    assert "result" in await running.read()
    body = {"sessions": ["s"], "methods": ["expand_query"], "token_cap": 100_000, "ttl_s": 60}
    await running.write({"id": 1, "method": "grant", "params": body})
    grant = (await running.read())["result"]["grant_id"]
    own = {"prompt": "p", "session": "s", "query": "q"}
    other = {"prompt": "p", "session": "t", "query": "q"}
    await running.write(
        {"id": 2, "method": "expand_query", "params": own, "grant": grant},
        {"id": 3, "method": "expand_query", "params": other, "grant": grant},
    )
    frames = {f["id"]: f for f in await running.read_n(2)}
    assert frames[2]["result"]["citations"] == []
    assert frames[3]["error"]["code"] == -32003
