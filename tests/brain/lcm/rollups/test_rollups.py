"""Day and week rollups (brain.lcm.rollups): built from the leaves of their period,
refreshed only where new leaves land, hidden with their sources, found by grep,
described and expanded to their leaves, listed in time order by ``recent``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, GrepOptions, InvalidInput, MessageIn, NotFound
from tests.brain.lcm.helpers import SMALL

# Whole chunks fold, with no tail kept back, so each day's messages make their own leaves.
CONFIG = BrainConfig(compaction=replace(SMALL, fresh_tail_count=0))
MONDAY = "2026-11-16"
TUESDAY = "2026-11-17"
NEXT_MONDAY = "2026-11-23"
FILLER = "Okay, thanks, that sounds good to me and I will keep reading the notes as we go along."


@pytest.fixture
def brain(db_path: Path) -> Iterator[Brain]:
    engine = Brain(db_path, CONFIG)
    try:
        yield engine
    finally:
        engine.close()


def day(
    brain: Brain, date: str, fact: str, *, hour: int = 9, session: str = "s", key: str = "k"
) -> None:
    """A day's conversation (a fact among filler), compacted into leaves."""
    messages = [
        MessageIn(
            "user" if i % 2 == 0 else "assistant",
            fact if i == 3 else FILLER,
            client_id=f"{date}-{hour}-{i}",
            created_at=f"{date}T{hour:02d}:{i * 5:02d}:00Z",
        )
        for i in range(8)
    ]
    brain.ingest(session, messages, session_key=key)
    brain.compact(session)


def rollups(brain: Brain, period: str | None = None) -> dict[tuple[str, str], dict[str, object]]:
    found = brain.recent(session_key="k", since="2026-01-01T00:00:00Z", max_tokens=100_000)
    return {
        (i["period"], i["start"][:10]): i
        for i in found["items"]
        if i["kind"] == "rollup" and (period is None or i["period"] == period)
    }


def test_a_day_rollup_appears_once_leaves_of_that_day_land_and_holds_a_fact_of_each(
    brain: Brain,
) -> None:
    day(brain, MONDAY, "Priya decided the deploy of brain/store.py moves to Friday at 17:00.")
    day(brain, MONDAY, "The migration failed with LockTimeoutError twice.", hour=14)

    found = rollups(brain)

    assert set(found) == {("day", MONDAY), ("week", MONDAY)}
    text = str(found[("day", MONDAY)]["content"])
    assert text.startswith(f"[day {MONDAY}]")
    assert "Priya" in text
    assert "LockTimeoutError" in text
    assert "Friday" in str(found[("week", MONDAY)]["content"])


def test_a_new_leaf_refreshes_only_the_periods_its_messages_were_written_in(
    brain: Brain,
) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
    day(brain, TUESDAY, "The cache server moved to host db-7 after the outage.")
    brain.refresh_rollups()
    before = rollups(brain)

    day(brain, NEXT_MONDAY, "Omar chose Postgres 16 for the reporting database.")
    report = brain.refresh_rollups()
    after = rollups(brain)

    rebuilt = {k for k, v in after.items() if v["id"] in report.rebuilt}
    # The new leaves cover next Monday (and what was left of Tuesday): Monday's day
    # rollup is neither rebuilt nor changed.
    assert ("day", NEXT_MONDAY) in rebuilt
    assert ("week", NEXT_MONDAY) in rebuilt
    allowed = {("day", NEXT_MONDAY), ("week", NEXT_MONDAY), ("day", TUESDAY), ("week", MONDAY)}
    assert rebuilt <= allowed
    assert after[("day", MONDAY)] == before[("day", MONDAY)]
    assert after[("week", MONDAY)]["id"] == before[("week", MONDAY)]["id"]  # a stable id
    assert "Postgres" in str(after[("week", NEXT_MONDAY)]["content"])


def test_suppressing_a_source_hides_the_rollup_then_its_rebuild_drops_the_fact(
    brain: Brain,
) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
    day(brain, TUESDAY, "The cache server moved to host db-7 after the outage.")
    monday = rollups(brain)[("day", MONDAY)]
    week = rollups(brain)[("week", MONDAY)]

    brain.suppress([f"{MONDAY}-9-3"], session="s")

    # Hidden at once, everywhere, before any refresh.
    for rid in (monday["id"], week["id"]):
        with pytest.raises(NotFound):
            brain.describe(str(rid), session=None)
    hits = brain.grep(GrepOptions("Priya", scope="summaries"))
    assert not [h for h in hits if h.kind == "rollup"]
    # The refresh (which recent runs first) rebuilds them without the suppressed fact.
    brain.rebuild_withheld("s")
    again = rollups(brain)
    assert "Priya" not in str(again[("week", MONDAY)]["content"])
    assert "db-7" in str(again[("week", MONDAY)]["content"])


def test_recent_for_a_week_lists_rollups_and_leaves_in_time_order(brain: Brain) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
    day(brain, TUESDAY, "The cache server moved to host db-7 after the outage.")
    day(brain, NEXT_MONDAY, "Omar chose Postgres 16 for the reporting database.")

    found = brain.recent(session_key="k", period="week", before=f"{MONDAY[:8]}22T00:00:00Z")

    items = found["items"]
    kinds = [(i["kind"], i.get("period")) for i in items]
    assert kinds[0] == ("rollup", "week")
    assert kinds[1] == ("rollup", "day")
    assert ("summary", None) in kinds
    starts = [i["start"] if i["kind"] == "rollup" else i["earliest_at"] for i in items]
    assert starts == sorted(starts)
    assert all(i["earliest_at"] < f"{NEXT_MONDAY}T00:00:00Z" for i in items)
    tuesday = [i for i in items if i.get("period") == "day" and i["start"].startswith(TUESDAY)]
    monday = [i for i in items if i.get("period") == "day" and i["start"].startswith(MONDAY)]
    assert items.index(monday[0]) < items.index(tuesday[0])


def test_a_rollup_is_found_by_grep_described_and_expanded_to_its_leaves(brain: Brain) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
    rid = str(rollups(brain)[("day", MONDAY)]["id"])

    hits = brain.grep(GrepOptions("Priya deploy", scope="summaries", rank=False))
    described = brain.describe(rid, session="s")
    expanded = brain.expand(rid, session="s", max_tokens=100_000)

    assert rid in [h.id for h in hits if h.kind == "rollup"]
    assert described["kind"] == "rollup"
    assert described["period"] == "day"
    leaves = [c["id"] for c in described["children"]]
    assert leaves
    assert [i["id"] for i in expanded["items"]] == leaves
    assert any("Priya" in str(i["content"]) for i in expanded["items"])
    with pytest.raises(NotFound):
        brain.describe(rid, session="another")


def test_rollups_are_derived_and_rebuilt_the_same_from_the_summaries(brain: Brain) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
    first = rollups(brain)
    with brain.store.transaction():
        brain.store.execute("DELETE FROM rollup_sources")
        brain.store.execute("DELETE FROM rollups")

    brain.refresh_rollups(rebuild=True)

    again = rollups(brain)
    assert {k: v["content"] for k, v in again.items()} == {
        k: v["content"] for k, v in first.items()
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"period": "month"}, "period"),
        ({"before": "soon"}, "before"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-11-20T00:00:00Z", "before": "2026-11-19T00:00:00Z"}, "since"),
        ({"since": "2026-11-18T00:00:00Z", "period": "week"}, "since"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(
    brain: Brain, params: dict[str, str], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        brain.recent(session="s", **params)
    assert refused.value.field == field


def test_a_window_starts_at_since_or_one_period_before_before(brain: Brain) -> None:
    brain.ingest("s", [MessageIn("user", "hello")])
    before = "2026-11-20T12:00:00Z"
    since = brain.recent(session="s", since="2026-11-18T00:00:00Z", before=before)
    daily = brain.recent(session="s", period="day", before=before)
    default = brain.recent(session="s", before=before)

    assert since["since"] == "2026-11-18T00:00:00.000Z"
    assert daily["since"] == "2026-11-19T12:00:00.000Z"
    assert default["since"] == "2026-11-13T12:00:00.000Z"


def test_a_session_sees_its_keys_rollups_only_while_they_hold_that_session_alone(
    brain: Brain,
) -> None:
    day(brain, MONDAY, "Priya decided the deploy moves to Friday at 17:00.", session="a")
    day(brain, TUESDAY, "Omar chose Postgres 16 for the reporting database.", session="b")
    window = {"since": "2026-11-01T00:00:00Z", "max_tokens": 100_000}

    keyed = brain.recent(session_key="k", **window)["items"]
    mine = brain.recent(session="a", **window)["items"]

    week = next(i for i in keyed if i.get("period") == "week")
    assert "Omar" in week["content"]
    assert "Priya" in week["content"]
    # Session a sees its own day's rollup and summaries, not the week holding b's.
    assert [i.get("period") for i in mine if i["kind"] == "rollup"] == ["day"]
    assert all("Omar" not in i["content"] for i in mine)
    with pytest.raises(NotFound):
        brain.describe(str(week["id"]), session="a")
    assert brain.describe(str(week["id"]), session=None)["kind"] == "rollup"


def test_an_upgraded_database_rolls_up_the_leaves_it_already_held(db_path: Path) -> None:
    engine = Brain(db_path, CONFIG)
    try:
        day(engine, MONDAY, "Priya decided the deploy moves to Friday at 17:00.")
        with engine.store.transaction():
            # As before version 17: leaves, and nothing rolled up or queued.
            engine.store.execute("DELETE FROM rollup_backlog")
            engine.store.execute("PRAGMA user_version = 16")
    finally:
        engine.close()

    upgraded = Brain(db_path, CONFIG)
    try:
        found = upgraded.recent(session_key="k", since="2026-01-01T00:00:00Z")
    finally:
        upgraded.close()

    rolled = [i for i in found["items"] if i["kind"] == "rollup"]
    assert [i["period"] for i in rolled] == ["week", "day"]
    assert "Priya" in rolled[1]["content"]
