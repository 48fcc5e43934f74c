"""What a host needs of ``assemble`` and the reads, through a real daemon.

A host's system prompt is always in the context it is given, first and
counted; the first turn of a chat (nothing ingested yet) gets an empty
context, not an error; and in a conversation with several speakers every
read says who said what.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from protocol.client import Client
from protocol.errors import NotFound

SYSTEM = (
    "You are the release assistant of the brain project. Answer briefly, cite message ids, "
    "and never run destructive commands without asking first."
)


def _turns(n: int) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages of about 60 tokens each."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i}: " + " ".join(f"word{(i * 7 + k) % 97}" for k in range(30)),
        }
        for i in range(n)
    ]


def test_a_system_message_stays_first_and_counted_at_budgets_4000_and_16000(
    tmp_path: Path,
) -> None:
    # No background compaction: it would follow the 4,000 budget and fold history
    # before the 16,000 assemble, which must find enough raw history to fill it.
    args = ("--auto-compact", "false")
    with Client.spawn(tmp_path / "b.db", args=args) as client:
        client.call("ingest", {"session": "s", "messages": [{"role": "system", "content": SYSTEM}]})
        turns = _turns(600)  # ~36,000 tokens
        for start in range(0, len(turns), 100):
            batch = turns[start : start + 100]
            client.call("ingest", {"session": "s", "messages": batch})
        for budget in (4_000, 16_000):
            out = client.call("assemble", {"session": "s", "budget": budget})
            assert out["messages"][0] == {"role": "system", "content": SYSTEM}
            assert out["tokens"] <= budget
            assert not out["over_budget"]
            assert out["tokens"] > budget // 2  # the budget is used, not given up with the system
            anthropic = client.call(
                "assemble", {"session": "s", "budget": budget, "format": "anthropic"}
            )
            assert anthropic["system"] == SYSTEM
            assert anthropic["tokens"] == out["tokens"]  # the system text is counted in both
            assert anthropic["tokens"] <= budget
        # Folding history keeps it out of the summaries.
        client.call("compact", {"session": "s"})
        out = client.call("assemble", {"session": "s", "budget": 4_000, "format": "anthropic"})
        assert out["included"]["summaries"] >= 1
        assert out["system"] == SYSTEM


def test_assemble_of_a_session_with_no_messages_is_an_empty_context_and_creates_nothing(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "other", "message": {"role": "user", "content": "hi"}})
        before = client.call("info")["conversations"]
        for fmt in ("openai", "anthropic"):
            out = client.call("assemble", {"session": "first-turn", "budget": 8_000, "format": fmt})
            assert out["messages"] == []
            assert out["tokens"] == 0
            assert out["over_budget"] is False
            assert out["flush_recommended"] is False
            assert out["fresh_tail"]["count"] == 0
            if fmt == "anthropic":
                assert out["system"] is None
        assert client.call("info")["conversations"] == before
        # A read other than assemble is told the session is not there (a mistyped name
        # must not pass for an empty memory); asking creates nothing either.
        with pytest.raises(NotFound, match="no session 'first-turn'"):
            client.call("grep", {"session": "first-turn", "query": "hi"})
        assert client.call("info")["conversations"] == before


MEETING = [
    {"role": "user", "name": "Alice", "content": "I propose we ship the quokka release on Friday."},
    {"role": "user", "name": "Bob", "content": "Friday is too early: the quokka migration lags."},
    {"role": "assistant", "name": "scribe", "content": "Noted the quokka release debate."},
]


def test_speaker_names_are_kept_in_assemble_grep_expand_query_and_summaries(
    tmp_path: Path,
) -> None:
    filler = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"unrelated filler turn {i}"}
        for i in range(100)  # past the fresh tail, so compaction folds the meeting
    ]
    with Client.spawn(tmp_path / "b.db") as client:
        ids = client.call("ingest", {"session": "s", "messages": [*MEETING, *filler]})["ids"]
        described = client.call("describe", {"id": ids[0], "session": "s"})
        assert described["message"]["name"] == "Alice"  # as it was sent

        openai = client.call("assemble", {"session": "s", "budget": 100_000})["messages"]
        assert [m.get("name") for m in openai[:3]] == ["Alice", "Bob", "scribe"]
        anthropic = client.call(
            "assemble", {"session": "s", "budget": 100_000, "format": "anthropic"}
        )["messages"]
        first = [b["text"] for m in anthropic for b in m["content"] if b["type"] == "text"][:3]
        assert first == [f"{m['name']}: {m['content']}" for m in MEETING]

        hits = client.call("grep", {"session": "s", "query": "quokka"})["hits"]
        assert {h["name"] for h in hits} == {"Alice", "Bob", "scribe"}

        answer = client.call(
            "expand_query",
            {"session": "s", "prompt": "who wants Friday?", "query": "quokka Friday"},
        )["answer"]
        assert "Alice: I propose we ship the quokka release on Friday." in answer
        assert "Bob: Friday is too early" in answer

        client.call("compact", {"session": "s"})
        assembled = client.call("assemble", {"session": "s", "budget": 100_000, "detail": False})[
            "messages"
        ]
        summary = next(m["content"] for m in assembled if str(m["content"]).startswith("<summary"))
        found = re.search(r'<summary id="(sum_[0-9a-f]{16})"', summary)
        assert found is not None
        leaves = client.call("expand", {"id": found.group(1), "session": "s", "max_tokens": 10**6})
        texts = " ".join(i["content"] for i in leaves["items"] if i["kind"] == "summary") + summary
        assert "Alice" in texts
        assert "Bob" in texts
        named = {i["name"] for i in leaves["items"] if i["kind"] == "message"}
        assert {"Alice", "Bob"} <= named


def _tool_session(client: Client) -> None:
    """A system prompt, a request, then 20 reads of ~600-token files and an answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        *_turns(6),
        {"role": "user", "content": "read every file under src/ and fix the bug"},
    ]
    for i in range(20):
        call = {
            "id": f"t{i}",
            "type": "function",
            "function": {"name": "read", "arguments": f'{{"path": "src/f{i}.py"}}'},
        }
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"t{i}", "content": f"def f{i}(x): ...\n" * 150},
        ]
    messages.append({"role": "assistant", "content": "fixed: f3 returned the wrong value"})
    client.call("ingest", {"session": "s", "messages": messages})


def test_a_tool_heavy_session_stays_within_budget_4000_with_stubs_pairs_and_the_request(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        _tool_session(client)
        for fresh_tail in (None, 0):
            params: dict[str, Any] = {"session": "s", "budget": 4_000}
            if fresh_tail is not None:
                params["fresh_tail"] = fresh_tail
            out = client.call("assemble", params)
            assert out["tokens"] <= 4_000
            assert out["over_budget"] is False
            messages = out["messages"]
            assert messages[0] == {"role": "system", "content": SYSTEM}
            contents = [m.get("content") for m in messages]
            assert "read every file under src/ and fix the bug" in contents
            assert contents[-1] == "fixed: f3 returned the wrong value"
            # Every tool result follows the assistant message holding its call.
            for n, m in enumerate(messages):
                if m["role"] == "tool":
                    calls = [c["id"] for c in messages[n - 1].get("tool_calls", [])]
                    assert m["tool_call_id"] in calls or messages[n - 1]["role"] == "tool"
            stubs = [c for c in contents if str(c).startswith("[Tool Output: ")]
            assert out["stubbed"] == len(stubs) >= 10
            ref = re.match(r"\[Tool Output: (\S+) \|", stubs[0])
            assert ref
            described = client.call("describe", {"id": ref.group(1), "session": "s"})
            assert "def f" in str(described["message"])


def test_a_newest_user_message_larger_than_the_budget_comes_alone_and_over_budget(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "s", "messages": _turns(40)})
        huge = "please consider " + "word " * 3_000
        client.call("ingest", {"session": "s", "message": {"role": "user", "content": huge}})
        out = client.call("assemble", {"session": "s", "budget": 1_000})
        assert out["over_budget"] is True
        assert out["messages"] == [{"role": "user", "content": huge}]
