"""``brain tools`` prints the model-facing tool definitions, and a model's calls made
from them are answered by a real daemon (never -32602)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from protocol import Client
from protocol.tools import TOOLS, request
from tests.e2e.conftest import BRAIN, DEADLINE

EXPECTED = {
    "memory_grep",
    "memory_describe",
    "memory_expand",
    "memory_expand_query",
    "memory_recent",
    "memory_query",
    "memory_teach",
    "memory_learn",
}


def _tools(fmt: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(BRAIN), "tools", "--format", fmt],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
        cwd="/",  # no database, no configuration needed
    )
    assert done.returncode == 0, done.stderr.decode()
    tools: list[dict[str, Any]] = orjson.loads(done.stdout)
    return tools


def test_brain_tools_prints_openai_tools_covering_exactly_the_memory_methods() -> None:
    tools = _tools("openai")
    assert {t["function"]["name"] for t in tools} == EXPECTED
    for tool in tools:
        assert tool["type"] == "function"
        assert tool["function"]["description"]
        assert tool["function"]["parameters"]["type"] == "object"


def test_brain_tools_prints_anthropic_tools_covering_exactly_the_memory_methods() -> None:
    tools = _tools("anthropic")
    assert {t["name"] for t in tools} == EXPECTED
    assert all(t["description"] and t["input_schema"]["type"] == "object" for t in tools)


def test_brain_tools_refuses_an_unknown_format() -> None:
    done = subprocess.run(
        [str(BRAIN), "tools", "--format", "gemini"],
        capture_output=True,
        timeout=DEADLINE,
        check=False,
    )
    assert done.returncode == 2
    assert b"openai" in done.stderr


@pytest.fixture
def daemon(tmp_path: Path) -> Any:
    args = ["--fresh-tail-count", "4", "--leaf-chunk-tokens", "200"]
    with Client.spawn(tmp_path / "t.db", args=args, stderr=subprocess.DEVNULL) as client:
        messages = [
            {
                "id": f"m{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i}: the deploy key of service {i} lives in vault/ci/{i}",
            }
            for i in range(40)
        ]
        client.call("ingest", {"session": "s1", "messages": messages})
        client.call("compact", {"session": "s1"})
        yield client


def test_a_models_tool_calls_made_from_the_schemas_are_answered_by_the_daemon(
    daemon: Client,
) -> None:
    def call(name: str, arguments: dict[str, Any]) -> Any:
        return daemon.call(*request(name, arguments, session="s1"))

    hits = call("memory_grep", {"query": "deploy key", "limit": 5})["hits"]
    summary = next(h["id"] for h in hits if h["kind"] == "summary")
    assert call("memory_describe", {"id": "m3"})["kind"] == "message"
    assert call("memory_describe", {"id": summary})["kind"] == "summary"
    assert call("memory_expand", {"id": summary, "max_tokens": 500})["items"]
    answer = call("memory_expand_query", {"prompt": "where does the deploy key of service 3 live?"})
    assert "vault/ci/3" in answer["answer"]
    taught = call("memory_teach", {"content": "Deploy keys rotate weekly.", "kind": "directive"})
    assert taught["node_id"]
    found = call("memory_query", {"query": "how often do deploy keys rotate?"})
    learned = call("memory_learn", {"outcome": 1, "trace_id": found["trace_id"]})
    assert learned["trace_id"] == found["trace_id"]


def test_brain_tools_help_names_every_tool() -> None:
    done = subprocess.run(
        [str(BRAIN), "tools", "--help"], capture_output=True, timeout=DEADLINE, check=True
    )
    said = " ".join(done.stdout.decode().split())  # argparse wraps lines
    listed = said.split("gives its model: ")[1].split(". ")[0]
    assert listed.split(", ") == [t.method for t in TOOLS]
