"""scripts/bench.py's targets report: every target is reported under its own key."""

from __future__ import annotations

from tests.scripts import bench_module

targets = bench_module("targets")


def test_every_target_has_its_own_entry_in_the_report_even_two_on_one_group() -> None:
    results = {
        "graph_daemon": {"nodes_1000": {"query_p50_ms": 1.5, "query_p95_over_p50": 4.0}},
    }
    report = targets.targets_report(results)
    assert len(report) == len(targets.TARGETS)
    p50 = report["graph_daemon.nodes_1000.query_p50_ms"]
    spread = report["graph_daemon.nodes_1000.query_p95_over_p50"]
    assert (p50["value"], p50["met"]) == (1.5, True)
    assert (spread["value"], spread["met"]) == (4.0, False)
