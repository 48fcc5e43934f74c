"""The maintenance knobs refuse values out of their range."""

from __future__ import annotations

import math

import pytest

from brain.graph.maintain import MaintainOptions


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("prune_below", 5.0),  # would delete every edge
        ("prune_below", -0.1),
        ("merge_similarity", 1.5),
        ("connect_similarity", math.nan),
        ("half_life_days", 0.0),
        ("half_life_days", math.nan),
        ("orphan_days", -1.0),
        ("orphan_days", math.inf),
        ("scale_budget", 0.0),
        ("min_decay", -1e-4),
        ("chunk", 0),
        ("cofire_traces", 0),
        ("connect_k", -1),
    ],
)
def test_maintain_options_refuse_a_knob_out_of_its_range(knob: str, value: float) -> None:
    from brain.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        MaintainOptions(**{knob: value})
    assert refused.value.field == knob
