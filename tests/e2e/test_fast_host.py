"""A host faster than background compaction, through a real daemon: nothing of the history
vanishes from the model's view, and once the work settles the budget is used.

A tool loop that never pauses (ingest, assemble, ingest the call, its result and the
answer), in either shape, and the first assemble after a bulk import: every assemble
shows the history it cannot hold yet as a stand-in (``<history_gap ...>``) naming the
span and ids that ``describe`` reads, so ``dropped`` stays 0. Compaction catches up
without waiting for a quiet the host never gives, and the settled context spends its
budget.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from protocol.client import Client

from .test_compaction_follows import BUDGET, locomo_like, settle

GAP = re.compile(r'<history_gap session="([^"]*)" first_seq="(\d+)" last_seq="(\d+)"')
GAP_IDS = re.compile(r"messages (\S+) to (\S+) \(")
LOOP_TURNS = 60
LOOP_BUDGET = 3_000
_WORDS = [
    "the",
    "build",
    "fails",
    "because",
    "the",
    "cache",
    "is",
    "stale",
    "so",
    "we",
    "retry",
    "the",
    "import",
    "of",
    "the",
    "parser",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _tool_turn(rng: random.Random, t: int, shape: str) -> list[dict[str, Any]]:
    """The assistant's call, its result (a few hundred to a few thousand tokens) and the
    answer, in ``shape``."""
    output = _text(rng, rng.randint(150, 1_200))
    if shape == "openai":
        call = {"id": f"c{t}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        return [
            {"id": f"a{t}", "role": "assistant", "content": None, "tool_calls": [call]},
            {"id": f"r{t}", "role": "tool", "tool_call_id": f"c{t}", "content": output},
            {"id": f"b{t}", "role": "assistant", "content": "done " + _text(rng, 20)},
        ]
    use = {"type": "tool_use", "id": f"c{t}", "name": "run", "input": {}}
    result = {"type": "tool_result", "tool_use_id": f"c{t}", "content": output}
    return [
        {"id": f"a{t}", "role": "assistant", "content": [use]},
        {"id": f"r{t}", "role": "user", "content": [result]},
        {"id": f"b{t}", "role": "assistant", "content": "done " + _text(rng, 20)},
    ]


def _texts(out: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for message in out["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found += [b.get("text", "") for b in content if b.get("type") == "text"]
    return found


def _assert_gap_readable(client: Client, out: dict[str, Any]) -> bool:
    """Whether ``out`` shows a stand-in; if so, its ids are ones ``describe`` reads."""
    gaps = [t for t in _texts(out) if t.startswith("<history_gap")]
    assert len(gaps) == out["gaps"]["count"]
    for text in gaps:
        found = GAP.match(text)
        assert found is not None, text
        assert found.group(1) == "s"
        ids = GAP_IDS.search(text)
        if ids is not None:
            for message_id in ids.groups():
                described = client.call("describe", {"id": message_id, "session": "s"})
                assert described["kind"] == "message"
    return bool(gaps)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_an_unpaused_tool_loop_never_loses_history_from_the_context(
    tmp_path: Path, shape: str
) -> None:
    rng = random.Random(3)
    stood_in = 0
    with Client.spawn(tmp_path / "b.db") as client:
        for t in range(LOOP_TURNS):
            message = {"id": f"u{t}", "role": "user", "content": f"turn {t}: " + _text(rng, 30)}
            client.call("ingest", {"session": "s", "message": message})
            out = client.call("assemble", {"session": "s", "budget": LOOP_BUDGET, "format": shape})
            assert out["dropped"] == {"summaries": 0, "messages": 0}, (t, out["gaps"])
            assert out["tokens"] <= LOOP_BUDGET or out["over_budget"]
            stood_in += _assert_gap_readable(client, out)
            client.call("ingest", {"session": "s", "messages": _tool_turn(rng, t, shape)})
        settle(client)
        final = client.call("assemble", {"session": "s", "budget": LOOP_BUDGET, "format": shape})
        assert client.call("info")["compaction"]["completed"] >= 1
    assert stood_in > 0  # the loop did outrun compaction: the check above meant something
    assert final["dropped"] == {"summaries": 0, "messages": 0}
    assert final["gaps"]["count"] == 0  # settled: summaries stand for the history
    assert final["included"]["summaries"] >= 1


def test_the_first_assemble_after_an_import_names_what_it_cannot_show(tmp_path: Path) -> None:
    conversation = locomo_like(600, seed=8)
    with Client.spawn(tmp_path / "b.db") as client:
        for at in range(0, len(conversation), 100):
            client.call("ingest", {"session": "s", "messages": conversation[at : at + 100]})
        first = client.call("assemble", {"session": "s", "budget": BUDGET})
        assert first["dropped"] == {"summaries": 0, "messages": 0}
        assert first["gaps"]["count"] == 1
        assert first["gaps"]["messages"] + first["included"]["messages"] == len(conversation)
        assert _assert_gap_readable(client, first)
        assert first["tokens"] <= BUDGET


def test_a_settled_replay_spends_its_budget(tmp_path: Path) -> None:
    """Once compaction settles, the summaries and detail fill the budget: the old
    selection left a settled 4,000-token context near half full."""
    conversation = locomo_like(400, seed=13)
    used: list[float] = []
    with Client.spawn(tmp_path / "b.db") as client:
        for at in range(0, len(conversation), 20):
            client.call("ingest", {"session": "s", "messages": conversation[at : at + 20]})
            client.call("assemble", {"session": "s", "budget": BUDGET})
            if (at + 20) % 100 == 0:
                settle(client)
                out = client.call("assemble", {"session": "s", "budget": BUDGET})
                settle(client)  # the assemble may have asked for more
                out = client.call("assemble", {"session": "s", "budget": BUDGET})
                assert out["dropped"] == {"summaries": 0, "messages": 0}
                assert out["gaps"]["count"] == 0
                used.append(out["tokens"] / BUDGET)
    assert min(used) >= 0.9, used
