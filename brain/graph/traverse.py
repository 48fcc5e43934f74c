"""Spreading activation over the retrieval graph: seeds in, fired nodes and steps out.

Seeds are the nodes nearest the query (their similarity is their activation).
A seed fires when its similarity, less the inhibition other seeds send it
along negative edges, reaches the threshold. Then, hop by hop, every
node that fired in the previous hop sends ``activation x weight x damping``
along its positive edges and ``activation x |weight|`` of inhibition along its
negative ones. A node fires when what it received, less its inhibition,
reaches the threshold; an inhibited node never fires. The walk stops after
``max_hops``, when ``max_fired`` nodes fired, or when nothing new fires.

A node fires once and passes on what it fired with, but it keeps receiving:
activation arriving at a node that already fired adds to its score, so a
node reached from several fired nodes (a seed next to other seeds) ranks
higher. The fired nodes are returned best first by that final activation.

A step is recorded only when it delivered activation to a node that fired
(before or because of it): those are the steps learning credits
(``brain.graph.learning``), not merely the edges between nodes that happened to
fire together.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

DEFAULT_TOP_K: Final = 8


@dataclass(frozen=True, slots=True)
class TraverseOptions:
    """Knobs of one traversal."""

    top_k: int = DEFAULT_TOP_K
    max_hops: int = 3
    damping: float = 0.85
    threshold: float = 0.2
    max_fired: int = 32
    max_chars: int = 6000
    temperature: float | None = 0.1
    """Seeds' activation: ``exp((similarity - best) / temperature)`` when set (the best
    seed 1, the others falling off with their distance from it); the similarity
    itself when None."""


@dataclass(frozen=True, slots=True)
class Step:
    """Activation that flowed along an edge into a node that fired."""

    source: int
    target: int
    weight: float
    activation: float
    """What the source delivered along the edge (source activation x weight x damping)."""
    hop: int


@dataclass(slots=True)
class Traversal:
    """What fired, in firing order, and why."""

    seeds: list[tuple[int, float]] = field(default_factory=list)
    fired: dict[int, float] = field(default_factory=dict)
    """Node -> activation when it fired, in firing order."""
    steps: list[Step] = field(default_factory=list)
    inhibited: dict[int, float] = field(default_factory=dict)
    """Node -> inhibition received, for nodes it stopped from firing."""


def traverse(
    seeds: Sequence[tuple[int, float]],
    neighbours: Callable[[int], dict[int, float]],
    options: TraverseOptions,
    blocked: Callable[[int], bool] = lambda _node: False,
) -> Traversal:
    """Spread activation from ``seeds`` ((node, similarity), best first).

    ``neighbours(node)`` gives the node's outgoing edges {target: weight};
    ``blocked(node)`` says a node may not fire at all (e.g. suppressed).
    ``result.fired`` holds every fired node's final activation, highest first.
    """
    result = Traversal(seeds=list(seeds))
    activation: dict[int, float] = {}  # fired nodes: what they hold (still accumulating)
    sent: dict[int, float] = {}  # fired nodes: what they fired with (what they pass on)
    frontier = _fire_seeds(seeds, neighbours, options, blocked, result, activation, sent)
    for hop in range(1, options.max_hops + 1):
        if not frontier:
            break
        received: dict[int, float] = {}
        held_back: dict[int, float] = {}
        arrivals: dict[int, list[Step]] = {}
        for source in frontier:
            for target, weight in neighbours(source).items():
                if target in result.inhibited or blocked(target):
                    continue
                if weight > 0:
                    delivered = sent[source] * weight * options.damping
                    # The strongest arrival counts, not the sum: a sum lets a hub
                    # linked to many fired nodes outrank what the query matched.
                    received[target] = max(received.get(target, 0.0), delivered)
                    arrivals.setdefault(target, []).append(
                        Step(source, target, weight, delivered, hop)
                    )
                elif weight < 0:
                    held_back[target] = held_back.get(target, 0.0) + sent[source] * -weight
        frontier = []
        # Nodes that already fired keep what reaches them (it ranks them) but do not
        # fire again; the others fire when what they got, less inhibition, is enough.
        for target in [t for t in received if t in activation]:
            activation[target] += received[target]
            result.steps.extend(arrivals[target])
        fresh = [t for t in received if t not in activation]
        for target in sorted(fresh, key=lambda t: -(received[t] - held_back.get(t, 0.0))):
            net = received[target] - held_back.get(target, 0.0)
            if net < options.threshold:
                if target in held_back and received[target] >= options.threshold:
                    result.inhibited[target] = held_back[target]
                continue
            if len(activation) >= options.max_fired:
                break
            activation[target] = sent[target] = net
            result.steps.extend(arrivals[target])
            frontier.append(target)
    result.fired = dict(sorted(activation.items(), key=lambda kv: -kv[1]))
    return result


def _fire_seeds(
    seeds: Sequence[tuple[int, float]],
    neighbours: Callable[[int], dict[int, float]],
    options: TraverseOptions,
    blocked: Callable[[int], bool],
    result: Traversal,
    activation: dict[int, float],
    sent: dict[int, float],
) -> list[int]:
    """Fire the seeds that pass the threshold after inhibition; the ones that fired."""
    seed_activation = {node: score for node, score in seeds if not blocked(node)}
    if options.temperature is not None and seed_activation:
        best = max(seed_activation.values())
        seed_activation = {
            n: math.exp((s - best) / options.temperature) for n, s in seed_activation.items()
        }
    # Seeds inhibit each other before any fires: a correction seed stops the
    # seed it was taught against even when that seed scores higher.
    inhibition: dict[int, float] = {}
    for node, score in seed_activation.items():
        if score <= 0:
            continue
        for target, weight in neighbours(node).items():
            if weight < 0 and target in seed_activation:
                inhibition[target] = inhibition.get(target, 0.0) + score * -weight
    fired: list[int] = []
    for node, score in sorted(seed_activation.items(), key=lambda kv: -kv[1]):
        if len(activation) >= options.max_fired:
            break
        held = inhibition.get(node, 0.0)
        if score - held < options.threshold:
            if held > 0 and score >= options.threshold:
                result.inhibited[node] = held
            continue
        activation[node] = sent[node] = score - held
        fired.append(node)
    return fired
