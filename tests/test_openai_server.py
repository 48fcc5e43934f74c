"""The fake OpenAI server's streaming and scripted replies (what the OpenClaw end-to-end
run, integrations/openclaw/e2e/run.py, relies on: OpenClaw streams every chat request)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.openai_server import OpenAIServer, Recorded, Reply


def _events(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of a server-sent event stream, ``[DONE]`` kept as a string."""
    found: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def test_a_streamed_request_gets_the_queued_completion_as_chunks_ending_in_done() -> None:
    with OpenAIServer() as server:
        server.enqueue(Reply.text("hello"))
        response = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": [], "stream": True},
        )
    assert response.headers["content-type"] == "text/event-stream"
    events = _events(response)
    assert events[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in events[:-1] if e["choices"]]
    assert "".join(d.get("content", "") for d in deltas) == "hello"
    assert [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"]][-1] == "stop"
    assert events[-2]["usage"]["total_tokens"] == 2


def test_a_streamed_tool_call_carries_its_index_id_name_and_arguments() -> None:
    with OpenAIServer() as server:
        server.enqueue(Reply.tool_call("memory_grep", {"query": "deploy"}, call_id="call7"))
        events = _events(
            httpx.post(
                f"{server.base_url}/chat/completions",
                json={"model": "m", "messages": [], "stream": True},
            )
        )
    first = events[0]["choices"][0]["delta"]
    assert first["tool_calls"] == [
        {
            "index": 0,
            "id": "call7",
            "type": "function",
            "function": {"name": "memory_grep", "arguments": '{"query": "deploy"}'},
        }
    ]
    assert "content" not in first
    assert events[1]["choices"][0]["finish_reason"] == "tool_calls"


def test_with_the_queue_empty_the_responder_answers_from_the_request() -> None:
    def echo(request: Recorded) -> Reply:
        return Reply.text(request.json()["messages"][-1]["content"].upper())

    with OpenAIServer(responder=echo) as server:
        server.enqueue(Reply.text("queued first"))
        answers = [
            httpx.post(
                f"{server.base_url}/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": text}]},
            ).json()["choices"][0]["message"]["content"]
            for text in ("one", "two")
        ]
    assert answers == ["queued first", "TWO"]
    assert server.requests[0].at <= server.requests[1].at
