"""The offline summarizer a daemon compacts with: the fact summarizer by default, any other
by ``--offline-summarizer``, and a leaf summary that says who said what on which day."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.client import Client

FILLER = ["Wow, that's so awesome!", "Haha yes, totally!", "Thanks so much, that's sweet!"]


def _conversation() -> list[dict[str, Any]]:
    facts = [
        ("2023-05-08T13:56:00Z", "Caroline", "I went to the LGBTQ support group yesterday."),
        ("2023-05-08T13:57:00Z", "Melanie", "I painted a lake sunrise for the Riverside show."),
        ("2023-05-09T10:00:00Z", "Caroline", "I researched 3 adoption agencies in Portland."),
        ("2023-05-09T10:01:00Z", "Melanie", "We're going camping at Yosemite in June 2023."),
    ]
    messages: list[dict[str, Any]] = []
    for i, (at, name, text) in enumerate(facts):
        role = "user" if name == "Caroline" else "assistant"
        messages.append({"role": role, "name": name, "content": text, "created_at": at})
        for k, filler in enumerate(FILLER):
            other = "Melanie" if name == "Caroline" else "Caroline"
            messages.append(
                {
                    "role": "assistant" if role == "user" else "user",
                    "name": other,
                    "content": filler,
                    "created_at": at.replace(":00Z", f":{10 + 10 * k + i}Z"),
                }
            )
    return messages


def _leaf(client: Client) -> dict[str, Any]:
    client.call("ingest", {"session": "s", "messages": _conversation()})
    report = client.call("compact", {"session": "s"})
    assert report["leaf_passes"] >= 1
    described = [client.call("describe", {"id": i, "session": "s"}) for i in report["summaries"]]
    return next(d for d in described if d["summary_kind"] == "leaf")


def test_a_leaf_summary_names_each_speaker_and_day_and_keeps_the_facts(tmp_path: Path) -> None:
    args = ["--auto-compact", "false", "--fresh-tail-count", "1"]
    with Client.spawn(tmp_path / "b.db", args=args) as client:
        leaf = _leaf(client)

    content = leaf["content"]
    assert leaf["summarizer"] == "facts"
    assert "[8 May] Caroline: went to LGBTQ support group on 7 May 2023" in content
    assert "[9 May] Caroline: researched 3 adoption agencies in Portland" in content
    assert "Caroline (user)" not in content
    assert "user:" not in content
    for filler in FILLER:
        assert filler.rstrip("!") not in content


def test_the_earlier_extractive_summarizer_is_still_there_by_name(tmp_path: Path) -> None:
    args = ["--auto-compact", "false", "--fresh-tail-count", "1"]
    args += ["--offline-summarizer", "extractive_v1"]
    with Client.spawn(tmp_path / "b.db", args=args) as client:
        leaf = _leaf(client)

    assert leaf["summarizer"] == "extractive"
    assert "Caroline (user): " in leaf["content"]
