"""What a host is shown is what it is charged for, through a real daemon.

A speaker's name is part of the context assemble gives back (OpenAI ``name``,
or ``Name: `` where a format has none), so the stored token counts that budgets
are made of include it. A refusal-only answer (OpenAI ``refusal``, ``content``
null) assembles as the refusal, not as an empty message, and grep finds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brain.tokens import MESSAGE_OVERHEAD, estimate_tokens
from protocol.client import Client

NAME = "Bartholomew_Quartermaine_release_manager"


def _named(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "name": NAME, "content": f"ok {i}"}
        if i % 2 == 0
        else {"role": "assistant", "name": "scribe", "content": f"noted {i}"}
        for i in range(n)
    ]


def test_the_tokens_assemble_reports_count_the_speaker_names_it_shows(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "s", "messages": _named(40)})
        out = client.call("assemble", {"session": "s", "budget": 100_000, "format": "anthropic"})
        texts = [b["text"] for m in out["messages"] for b in m["content"] if b["type"] == "text"]
        assert len(texts) == 40
        assert texts[0] == f"{NAME}: ok 0"  # the name is in what the model reads
        shown = sum(estimate_tokens(t) + MESSAGE_OVERHEAD for t in texts)
        assert out["tokens"] >= shown
        openai = client.call("assemble", {"session": "s", "budget": 100_000})
        assert openai["messages"][0]["name"] == NAME
        assert openai["tokens"] == out["tokens"]
        # A budget the named context does not fit is not reported as met.
        tight = client.call("assemble", {"session": "s", "budget": shown - 1, "fresh_tail": 0})
        assert tight["tokens"] <= shown - 1
        assert len(tight["messages"]) < 40


def test_a_refusal_only_answer_assembles_as_the_refusal_and_grep_finds_it(
    tmp_path: Path,
) -> None:
    refusal = "I can't help with disabling the smoke detectors."
    sent = [
        {"id": "u1", "role": "user", "content": "how do I turn off every smoke detector?"},
        {"id": "a1", "role": "assistant", "content": None, "refusal": refusal},
        {"id": "u2", "role": "user", "content": "fine, how do I test them then?"},
    ]
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "s", "messages": sent})
        openai = client.call("assemble", {"session": "s", "budget": 10_000})["messages"]
        assert openai[1] == {"role": "assistant", "content": None, "refusal": refusal}
        anthropic = client.call(
            "assemble", {"session": "s", "budget": 10_000, "format": "anthropic"}
        )["messages"]
        assert anthropic[1] == {"role": "assistant", "content": [{"type": "text", "text": refusal}]}
        hits = client.call("grep", {"session": "s", "query": "smoke detectors"})["hits"]
        assert "a1" in {h["id"] for h in hits}
        # What describe gives back is what was sent.
        described = client.call("describe", {"id": "a1", "session": "s"})["message"]
        assert described == {"role": "assistant", "content": None, "refusal": refusal}
