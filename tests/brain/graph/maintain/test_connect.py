"""The connect task: a lonely learning node is linked to its nearest chunks."""

from __future__ import annotations

import pytest

from brain.graph.maintain import MaintainOptions, maintain
from tests.brain.graph.maintain.helpers import G


def test_connect_links_a_lonely_teaching_to_its_nearest_chunks_both_ways(g: G) -> None:
    g.node("t", vector=1)
    g.node("near", kind="chunk", vector=1, source="a.md")
    g.node("far", kind="chunk", vector=7, source="b.md")
    g.node("rule", kind="directive", authority="constitutional", vector=1)
    report = maintain(
        g.store, tasks=["connect"], options=MaintainOptions(connect_k=1, connect_similarity=0.9)
    )
    assert (report.tasks["connect"]["nodes"], report.tasks["connect"]["edges"]) == (1, 2)
    assert g.weight("t", "near") == pytest.approx(0.5)
    assert g.weight("near", "t") == pytest.approx(0.5)
    assert g.weight("t", "far") is None
    assert g.weight("rule", "near") is None
