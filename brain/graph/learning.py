"""Learning from outcomes: credit assignment along the steps a traversal took.

The rule is REINFORCE-shaped with a running baseline. An outcome ``r`` in
[-1, 1] for a trace becomes an advantage ``A = r - b``, where ``b`` is the
running mean of past outcomes (an exponential average), so a graph that is
usually right learns mostly from its failures and vice versa. Every step of
the trace (an edge that carried activation into a node that fired) moves by

    dw = rate x A x e x (1 - |w|)

with ``e`` the step's eligibility, the activation it delivered relative to the
strongest step of the trace: the edges that did most of the work get most of
the credit. ``(1 - |w|)`` keeps weights inside (-1, 1) without clipping and
slows learning near the bounds, so one outcome cannot flip an edge that many
outcomes built. Only positive edges carry steps, and an outcome never takes one
below 0: learning from outcomes never makes an edge inhibitory (corrections do).
Edges touching a constitutional node are never changed.

Only steps are credited, never pairs of nodes that merely fired in the same
trace: a node reached through another path gets no credit for this one.

Tested with the traversal whose steps it credits (``tests/brain/graph/test_traverse.py``)
and through ``learn`` (``tests/brain/graph/test_nodes.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from brain.graph.nodes import EdgeWrite, clamp_weight
from brain.graph.traverse import Step

DEFAULT_RATE: Final = 0.05
"""LoCoMo dev, query_learned:outcomes recall@10 against query's 55.3: rate 0.2 53.9,
0.05 54.8, 0.02 54.9; with taught links (query_learned) 0.2 56.9, 0.05 57.9, 0.02 57.5."""
BASELINE_DECAY: Final = 0.1
"""The running baseline moves this share of the way to each new outcome."""


@dataclass(frozen=True, slots=True)
class Credit:
    """What one outcome changes: the new edge weights and the next baseline."""

    edges: list[EdgeWrite]
    advantage: float
    baseline: float


def credit(
    steps: Sequence[Step],
    outcome: float,
    baseline: float,
    weight_of: Callable[[int, int], float | None],
    kind_of: Callable[[int, int], str],
    protected: Callable[[int], bool],
    rate: float = DEFAULT_RATE,
) -> Credit:
    """The edge updates for ``outcome`` on a trace that took ``steps``.

    ``weight_of(source, target)`` is the edge's current weight (None: the edge
    is gone, e.g. pruned since; it is skipped); ``protected(node)`` marks nodes
    whose edges must not change (constitutional).
    """
    outcome = clamp_weight(outcome)
    advantage = outcome - baseline
    next_baseline = baseline + BASELINE_DECAY * (outcome - baseline)
    strongest = max((s.activation for s in steps), default=0.0)
    updates: dict[tuple[int, int], float] = {}
    if strongest > 0 and advantage != 0:
        for step in steps:
            if protected(step.source) or protected(step.target):
                continue
            key = (step.source, step.target)
            current = updates.get(key, weight_of(step.source, step.target))
            if current is None:
                continue
            eligibility = step.activation / strongest
            # Never below 0: an outcome weakens an edge to nothing, it never makes it
            # inhibitory (only a correction, taught by a person, inhibits: the
            # safeguard of brain.graph.safeguard).
            updates[key] = max(
                0.0, clamp_weight(current + rate * advantage * eligibility * (1.0 - abs(current)))
            )
    edges = [EdgeWrite(s, t, w, kind_of(s, t)) for (s, t), w in updates.items()]
    return Credit(edges, advantage, next_baseline)
