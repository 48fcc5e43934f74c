"""grep's ``rank`` param through a real daemon: the learned order by default, bm25 with false."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.client import Client
from protocol.errors import RPCError


def test_grep_ranks_by_default_and_rank_false_gives_the_plain_order(tmp_path: Path) -> None:
    messages = [
        {"id": "short", "role": "user", "content": "kayak kayak kayak", "name": "Ann"},
        {
            "id": "long",
            "role": "assistant",
            "content": "the kayak trip was the best day of the summer, "
            "we paddled to the island, had lunch and came back at sunset",
            "name": "Bob",
        },
    ]
    with Client.spawn(tmp_path / "rank.db") as client:
        client.call("ingest", {"session": "s", "messages": messages})
        params = {"query": "What did Bob say about the kayak?", "session": "s"}
        ranked = client.call("grep", params)
        plain = client.call("grep", {**params, "rank": False})
        assert ranked["rank"] is True
        assert plain["rank"] is False
        assert [h["id"] for h in plain["hits"]] == ["short", "long"]
        assert [h["id"] for h in ranked["hits"]] == ["long", "short"]
        with pytest.raises(RPCError) as bad:
            client.call("grep", {**params, "rank": "yes"})
        assert bad.value.code == -32602
        assert "rank" in bad.value.message


def test_a_hybrid_grep_reports_rank_fusion_and_pending_and_a_regex_grep_no_rank(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "fields.db") as client:
        client.call("ingest", {"session": "s", "messages": [{"role": "user", "content": "hi"}]})
        hybrid = client.call("grep", {"query": "hi", "mode": "hybrid", "session": "s"})
        assert hybrid["rank"] is True
        assert hybrid["fusion"] == "weighted"
        assert hybrid["pending"] in (0, 1)
        assert "rank" not in client.call("grep", {"query": "hi", "mode": "regex", "session": "s"})


def test_a_regex_of_thousands_of_open_parens_is_invalid_params_through_the_daemon(
    tmp_path: Path,
) -> None:
    messages = [{"id": "m", "role": "user", "content": "kayak trip"}]
    with Client.spawn(tmp_path / "deep.db") as client:
        client.call("ingest", {"session": "s", "messages": messages})
        with pytest.raises(RPCError) as bad:
            client.call("grep", {"query": "(" * 3000, "mode": "regex", "session": "s"})
        assert bad.value.code == -32602
        assert "nested too deeply" in bad.value.message
        assert client.call("grep", {"query": "kayak", "mode": "regex", "session": "s"})["hits"]
