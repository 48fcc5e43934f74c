"""Compaction follows the budget the host assembles with, through a real daemon.

A host replays a long two-speaker conversation (LoCoMo-like: 681 turns of
15-60 words, named speakers, dated sessions) turn by turn and assembles with
a 4,000-token budget every 20 turns. Once the background work after a turn
has settled (``info``'s ``compaction.active`` is 0), every assemble from turn
100 on must cover all earlier history: each message is in the context raw or
inside the span of a summary the context shows (checked through ``describe``
of each summary id), and the context stays within the budget.
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from protocol.client import Client

from .conftest import DEADLINE

BUDGET = 4_000
TURNS = 681
EVERY = 20
FROM_TURN = 100
SUMMARY_ID = re.compile(r'<summary id="(sum_[0-9a-f]{16})"')

_SENTENCES = (
    "I really love how the kids reacted when we went camping by the lake last weekend and "
    "my friend from the support group said painting helps her relax after a long day at work "
    "we talked about adoption agencies counseling school the new job the beach sunsets pottery "
    "class guitar lessons running a charity race volunteering at the shelter my grandmother's "
    "recipes the concert downtown road trip to the mountains reading that novel again our dog "
    "learning to swim a surprise party for my sister planning the garden this spring"
)
_WORDS = _SENTENCES.split()


def locomo_like(turns: int = TURNS, seed: int = 11) -> list[dict[str, Any]]:
    """``turns`` messages of two named speakers in dated sessions of 12-40 turns, each
    15-60 words (so ~20-80 tokens), every text unique (the coverage check finds raw
    messages in the context by their text)."""
    rng = random.Random(seed)
    speakers = (("user", "Caroline"), ("assistant", "Melanie"))
    day = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    messages: list[dict[str, Any]] = []
    seen: set[str] = set()
    left_in_session = 0
    moment = day
    while len(messages) < turns:
        if left_in_session == 0:
            day += timedelta(days=rng.randint(3, 20))
            moment = day
            left_in_session = rng.randint(12, 40)
        left_in_session -= 1
        role, name = speakers[len(messages) % 2]
        text = ""
        while not text or text in seen:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(15, 60))]
            text = " ".join(words).capitalize() + rng.choice(".!?")
        seen.add(text)
        moment += timedelta(seconds=rng.randint(20, 90))
        messages.append(
            {
                "id": f"D{len(messages) + 1}",
                "role": role,
                "name": name,
                "content": text,
                "created_at": moment.isoformat().replace("+00:00", "Z"),
            }
        )
    return messages


def settle(client: Client) -> None:
    """Wait until the daemon has no background compaction running or waiting to run."""
    deadline = time.monotonic() + DEADLINE * 4
    while client.call("info").get("compaction", {}).get("active", 0):
        assert time.monotonic() < deadline, "background compaction never settled"
        time.sleep(0.05)


def uncovered(
    client: Client, out: dict[str, Any], seq_of_text: dict[str, int], upto: int
) -> list[int]:
    """The message seqs in ``1..upto`` the assembled context neither shows raw nor covers
    with a summary it shows (each summary's span as ``describe`` reports it)."""
    covered: list[int] = []
    for message in out["messages"]:
        content = message["content"]
        assert isinstance(content, str)
        found = SUMMARY_ID.match(content)
        if found is None:
            covered.append(seq_of_text[content])
            continue
        described = client.call("describe", {"session": "s", "id": found.group(1)})
        assert described["kind"] == "summary"
        sources = described["sources"]
        covered += range(sources["first_seq"], sources["last_seq"] + 1)
    assert len(covered) == len(set(covered)), "a message is shown twice"
    return sorted(set(range(1, upto + 1)) - set(covered))


def test_a_replay_assembled_at_4000_covers_all_earlier_history_from_turn_100_once_settled(
    tmp_path: Path,
) -> None:
    conversation = locomo_like()
    seq_of_text = {m["content"]: n for n, m in enumerate(conversation, start=1)}
    failures: list[tuple[int, list[int]]] = []
    checked = 0
    with Client.spawn(tmp_path / "b.db") as client:
        for turn, message in enumerate(conversation, start=1):
            client.call("ingest", {"session": "s", "message": message})
            if turn % EVERY:
                continue
            if turn >= FROM_TURN:
                settle(client)
            out = client.call("assemble", {"session": "s", "budget": BUDGET})
            assert out["tokens"] <= BUDGET
            assert not out["over_budget"]
            if turn >= FROM_TURN:
                checked += 1
                missing = uncovered(client, out, seq_of_text, turn)
                if missing:
                    failures.append((turn, [*missing[:5], len(missing)]))
        summaries = client.call("info")["summaries"]
    assert checked == (TURNS - FROM_TURN) // EVERY + 1
    assert failures == [], f"turns whose assemble left history uncovered: {failures}"
    assert summaries > 0


def test_the_followed_budget_survives_a_restart(tmp_path: Path) -> None:
    """A restarted daemon compacts for the budget the session was assembled with, before
    any new assemble: the next ingest alone starts the background work."""
    conversation = locomo_like(200, seed=3)
    db = tmp_path / "b.db"
    with Client.spawn(db) as client:
        client.call("ingest", {"session": "s", "messages": conversation[:40]})
        client.call("assemble", {"session": "s", "budget": BUDGET})
        settle(client)
    with Client.spawn(db) as client:
        for message in conversation[40:]:
            client.call("ingest", {"session": "s", "message": message})
        settle(client)
        # Read before any assemble of this process: the summaries come from the ingests.
        assert client.call("info")["summaries"] > 0
        out = client.call("assemble", {"session": "s", "budget": BUDGET})
        seq_of_text = {m["content"]: n for n, m in enumerate(conversation, start=1)}
        assert uncovered(client, out, seq_of_text, len(conversation)) == []


def test_an_assemble_alone_starts_background_compaction_for_its_budget(tmp_path: Path) -> None:
    """History imported in bulk (under the 20,000-token threshold) is folded once a host
    assembles it at a small budget: the request comes from the assemble."""
    conversation = locomo_like(150, seed=5)
    seq_of_text = {m["content"]: n for n, m in enumerate(conversation, start=1)}
    with Client.spawn(tmp_path / "b.db") as client:
        client.call("ingest", {"session": "s", "messages": conversation})
        settle(client)
        assert client.call("info")["summaries"] == 0
        first = client.call("assemble", {"session": "s", "budget": BUDGET})
        # Answered at once, with what there is: a stand-in names what does not fit yet.
        assert first["gaps"]["messages"] > 0
        assert first["dropped"] == {"summaries": 0, "messages": 0}
        settle(client)
        out = client.call("assemble", {"session": "s", "budget": BUDGET})
        assert out["included"]["summaries"] > 0
        assert uncovered(client, out, seq_of_text, len(conversation)) == []
        assert client.call("info")["compaction"]["completed"] >= 1
