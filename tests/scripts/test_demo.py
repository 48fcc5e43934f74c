"""scripts/demo.py: runs twice in a row on fresh databases, and what it prints is true.

The captions are checked against the database the demo leaves behind with
``--db``: a new daemon on it assembles the same context, the summaries it
named exist and cover what it said, and the early messages it pointed at are
where it said they are.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from protocol.client import Client
from tests import ROOT

SCRIPT = ROOT / "scripts" / "demo.py"
SESSION = "fernhill-launch"


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _find(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text)
    assert found is not None, (pattern, text)
    return found


def test_the_demo_runs_twice_in_a_row_and_its_captions_hold_for_the_database_it_kept(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    kept = _demo("--db", str(db))
    assert kept.returncode == 0, kept.stderr
    again = _demo()  # a second run, on a fresh temporary database
    assert again.returncode == 0, again.stderr
    assert "daemon exited with code 0" in again.stdout
    refused = _demo("--db", str(db))  # never on top of an existing database
    assert refused.returncode == 2
    assert "fresh database" in refused.stderr

    out = kept.stdout
    turns, sent = map(int, _find(r"(\d+) user turns, (\d+) messages", out).groups())
    assert turns >= 100
    assert sent >= 200  # a few hundred
    stored = int(_find(r"Stored: (\d+) messages", out).group(1))
    assert stored == sent
    head = _find(r"assemble\(budget=([\d,]+)\): ([\d,]+) tokens used of ([\d,]+)", out)
    budget, tokens = _number(head.group(1)), _number(head.group(2))
    assert tokens <= budget
    body = _find(
        r"Summaries: (\d+), .*?, standing for the oldest (\d+) messages \((.*?)\); then (\d+) "
        r"raw messages from seq (\d+) on, the newest (\d+) of them being the fresh tail from "
        r"seq (\d+)\.",
        out,
    )
    count, covered, spans, raw, raw_from, tail, first_seq = body.groups()
    dropped = _find(r"dropped: (\d+) messages, (\d+) summaries", out)
    assert dropped.groups() == ("0", "0")

    with Client.spawn(db, stderr=subprocess.DEVNULL) as client:
        context = client.call("assemble", {"session": SESSION, "budget": budget})
        assert context["tokens"] == tokens
        assert not context["over_budget"]
        shown = [m for m in context["messages"] if str(m["content"]).startswith("<summary")]
        assert len(shown) == int(count) >= 1
        assert len(context["messages"]) - len(shown) == int(raw)
        assert context["fresh_tail"]["count"] == int(tail)
        assert context["fresh_tail"]["first_seq"] == int(first_seq)
        # The summaries named cover seq 1 up to the raw messages, and each is what it says.
        next_seq, total, span = 1, 0, {}
        for summary_id, first, last in re.findall(r"(sum_[0-9a-f]+) seq (\d+)-(\d+)", spans):
            described = client.call("describe", {"id": summary_id, "session": SESSION})
            assert described["sources"]["first_seq"] == int(first) == next_seq
            assert described["sources"]["last_seq"] == int(last)
            assert f'<summary id="{summary_id}"' in str(shown[len(span)]["content"])
            span[summary_id] = (int(first), int(last))
            next_seq, total = int(last) + 1, total + described["subtree"]["messages"]
        assert total == int(covered)
        assert next_seq == int(raw_from)
        assert int(covered) + int(raw) == stored  # nothing of the history left out
        assert stored - int(raw_from) + 1 == int(raw)
        assert int(raw_from) <= int(first_seq)

        # grep's hit and expand_query's passage are early, and covered where it says.
        hit = _find(r"the best message: (\S+) \(seq (\d+),", out)
        passage = _find(r"The passage saying 'port 8443' is message (\S+) \(seq (\d+)\)", out)
        holders = re.findall(r"not raw in the context .*?; summary (sum_\w+) there covers it", out)
        assert len(holders) == 2
        for (message_id, seq), holder in zip(
            (hit.groups(), passage.groups()), holders, strict=True
        ):
            described = client.call("describe", {"id": message_id, "session": SESSION})
            assert described["seq"] == int(seq) < int(raw_from)
            assert span[holder][0] <= described["seq"] <= span[holder][1]
        said = client.call("describe", {"id": passage.group(1), "session": SESSION})
        assert "port 8443" in said["message"]["content"]
        grep_hit = client.call("describe", {"id": hit.group(1), "session": SESSION})
        assert "Stripe webhooks" in grep_hit["message"]["content"]
