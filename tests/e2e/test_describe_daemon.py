"""``describe`` and ``expand`` through a real daemon: what a host reads back."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from brain.tokens import estimate_tokens
from protocol.client import Client


def _long(i: int) -> str:
    """About 1,500 tokens: far more than an 800-token cap."""
    return " ".join(f"word{i}_{j}" for j in range(600))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    """A daemon whose session ``s`` holds 12 long messages, all but 2 in one leaf summary."""
    args = ["--fresh-tail-count", "2"]
    with Client.spawn(tmp_path / "d.db", args=args, stderr=subprocess.DEVNULL) as daemon:
        messages = [
            {"id": f"m{i}", "role": ("user", "assistant")[i % 2], "content": _long(i)}
            for i in range(12)
        ]
        daemon.call("ingest", {"session": "s", "messages": messages})
        yield daemon


def _leaf(client: Client) -> dict[str, Any]:
    summaries = client.call("compact", {"session": "s"})["summaries"]
    assert summaries
    described: dict[str, Any] = client.call("describe", {"id": summaries[0], "session": "s"})
    assert described["summary_kind"] == "leaf"
    return described


def test_describe_of_a_message_says_when_it_was_created(client: Client) -> None:
    described = client.call("describe", {"id": "m3", "session": "s"})
    assert described["kind"] == "message"
    created = datetime.fromisoformat(described["created_at"].replace("Z", "+00:00"))
    assert created.tzinfo is not None
    hit = client.call("grep", {"query": "word3_599", "session": "s"})["hits"][0]
    assert hit["created_at"] == described["created_at"]


def test_expand_under_a_cap_smaller_than_the_first_child_returns_it_truncated(
    client: Client,
) -> None:
    leaf = _leaf(client)
    expanded = client.call("expand", {"id": leaf["id"], "session": "s", "max_tokens": 800})
    assert expanded["truncated"]
    assert len(expanded["items"]) == 1
    (first,) = expanded["items"]
    assert (first["kind"], first["id"], first["truncated"]) == ("message", "m0", True)
    assert _long(0).startswith(first["content"])
    assert 0 < first["tokens"] == estimate_tokens(first["content"]) <= 800
    assert expanded["tokens"] == first["tokens"]
    assert expanded["reached"] == ["m0"]


def test_expand_items_that_fit_are_whole_and_not_marked_truncated(client: Client) -> None:
    leaf = _leaf(client)
    expanded = client.call("expand", {"id": leaf["id"], "session": "s", "max_tokens": 4_000})
    assert expanded["truncated"]  # not all ten fit
    assert [i["id"] for i in expanded["items"]] == ["m0", "m1"]
    assert all("truncated" not in i for i in expanded["items"])
    assert expanded["items"][1]["content"] == _long(1)
