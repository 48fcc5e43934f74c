"""A daemon configured with an OpenAI-compatible endpoint summarises through it,
and falls back to the offline summarizer when the endpoint fails."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from protocol import Client
from tests.openai_server import OpenAIServer, Reply

SECRET = "sk-test-never-logged-0123456789"


def _conversation(n: int) -> list[dict[str, Any]]:
    words = [
        "the",
        "deploy",
        "of",
        "service",
        "alpha",
        "failed",
        "because",
        "the",
        "database",
        "migration",
        "timed",
        "out",
    ]
    return [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": " ".join(words[(i + k) % len(words)] for k in range(60)) + f" step {i}",
        }
        for i in range(n)
    ]


def _daemon(db: Path, server: OpenAIServer, log: IO[bytes]) -> Client:
    args = [
        "--llm-base-url", server.base_url,
        "--llm-model", "tiny-model",
        "--auto-compact", "false",
        "--fresh-tail-count", "4",
        "--leaf-chunk-tokens", "800",
    ]  # fmt: skip
    env = {"BRAIN_LLM_API_KEY": SECRET, "PATH": "/usr/bin:/bin"}
    return Client.spawn(db, args=args, env=env, stderr=log)


def test_compaction_uses_the_configured_llm_and_never_logs_its_key(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    with OpenAIServer() as server:
        server.enqueue(
            *[
                Reply.text("Alpha deploy failed: migration timeout. Expand for details about: logs")
                for _ in range(20)
            ]
        )
        with log.open("wb") as err, _daemon(tmp_path / "llm.db", server, err) as client:
            client.call("ingest", {"session": "s", "messages": _conversation(60)})
            report = client.call("compact", {"session": "s"})
            assert report["summaries"]
            described = client.call("describe", {"id": report["summaries"][0], "session": "s"})
            assert described["summarizer"] == "llm:tiny-model"
            assert "migration timeout" in described["content"]
            assert client.close() == 0
        request = server.requests[0]
        assert request.headers.get("authorization") == f"Bearer {SECRET}"
        assert request.json()["model"] == "tiny-model"
    assert SECRET not in log.read_text()


def test_a_failing_endpoint_falls_back_to_the_offline_summarizer(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    with OpenAIServer() as server:
        server.enqueue(*[Reply.error(401, f"bad key {SECRET}") for _ in range(40)])
        with log.open("wb") as err, _daemon(tmp_path / "fallback.db", server, err) as client:
            client.call("ingest", {"session": "s", "messages": _conversation(60)})
            report = client.call("compact", {"session": "s"})
            assert report["summaries"]
            described = client.call("describe", {"id": report["summaries"][0], "session": "s"})
            assert described["summarizer"].startswith("fallback")
            assert client.close() == 0
    assert SECRET not in log.read_text()


def _twice_the_prompt(request: Any) -> Reply:
    """A model that answers every summary request with more than it was given."""
    return Reply.text(request.json()["messages"][1]["content"] * 2)


def test_answers_longer_than_their_input_walk_the_ladder_to_the_offline_summarizer(
    tmp_path: Path,
) -> None:
    log = tmp_path / "daemon.log"
    with OpenAIServer(responder=_twice_the_prompt) as server:
        with log.open("wb") as err, _daemon(tmp_path / "ladder.db", server, err) as client:
            client.call("ingest", {"session": "s", "messages": _conversation(120)})
            report = client.call("compact", {"session": "s"})
            described = [
                client.call("describe", {"id": sid, "session": "s"}) for sid in report["summaries"]
            ]
            assert client.close() == 0
        prompts = [r.json() for r in server.requests]
    kinds = {d["summary_kind"] for d in described}
    assert kinds == {"leaf", "condensed"}
    # Every summary refused the model's answer twice and came from the offline summarizer,
    # smaller than what it covers.
    assert {d["summarizer"] for d in described} == {"fallback"}
    assert all(
        d["content"].splitlines()[-1].startswith("Expand for details about:") for d in described
    )
    leaves = [d for d in described if d["summary_kind"] == "leaf"]
    assert all(d["token_count"] < d["subtree"]["source_tokens"] for d in leaves)
    assert len(prompts) == 2 * len(described)
    # Each summary: the normal request, then the aggressive one (lower temperature).
    assert [p["temperature"] for p in prompts] == [0.2, 0.1] * len(described)
    users = [p["messages"][1]["content"] for p in prompts]
    assert sum("<source_messages>" in u for u in users) == 2 * len(leaves)
    condensed = [u for u in users if "<source_summaries>" in u]
    assert condensed
    assert all("Condense these consecutive summaries" in u for u in condensed)
