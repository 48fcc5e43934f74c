"""Spreading activation and credit assignment: invariants over random graphs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.graph.learning import credit
from brain.graph.traverse import TraverseOptions, traverse

Graph = dict[int, dict[int, float]]

_graphs = st.dictionaries(
    st.integers(0, 11),
    st.dictionaries(st.integers(0, 11), st.floats(-1, 1, allow_nan=False), max_size=5),
    max_size=12,
)
_seeds = st.lists(
    st.tuples(st.integers(0, 11), st.floats(0, 1, allow_nan=False)),
    max_size=5,
    unique_by=lambda s: s[0],
)
_options = st.builds(
    TraverseOptions,
    max_hops=st.integers(0, 4),
    threshold=st.floats(0.01, 0.9),
    max_fired=st.integers(1, 12),
)


def _edges(graph: Graph) -> Graph:
    return {s: {t: w for t, w in out.items() if t != s} for s, out in graph.items()}


@settings(max_examples=300, deadline=None)
@given(_graphs, _seeds, _options, st.sets(st.integers(0, 11), max_size=3))
def test_what_fires_is_bounded_explained_by_its_steps_and_never_blocked_or_inhibited(
    graph: Graph, seeds: list[tuple[int, float]], options: TraverseOptions, blocked: set[int]
) -> None:
    graph = _edges(graph)
    result = traverse(seeds, lambda n: graph.get(n, {}), options, blocked.__contains__)
    fired = result.fired
    assert len(fired) <= options.max_fired
    assert not set(fired) & blocked
    assert not set(fired) & set(result.inhibited)
    seed_ids = {n for n, _ in seeds}
    for node, activation in fired.items():
        assert activation >= options.threshold
        if node not in seed_ids:
            assert any(s.target == node for s in result.steps)
    for step in result.steps:
        assert step.source in fired
        assert step.target in fired
        assert graph[step.source][step.target] == step.weight > 0
        assert 1 <= step.hop <= options.max_hops


@settings(max_examples=300, deadline=None)
@given(
    _graphs,
    _seeds,
    st.floats(-1, 1, allow_nan=False),
    st.floats(-1, 1, allow_nan=False),
    st.sets(st.integers(0, 11), max_size=4),
)
def test_credit_keeps_weights_in_bounds_and_never_touches_protected_nodes(
    graph: Graph,
    seeds: list[tuple[int, float]],
    outcome: float,
    baseline: float,
    protected: set[int],
) -> None:
    graph = _edges(graph)
    walk = traverse(seeds, lambda n: graph.get(n, {}), TraverseOptions(threshold=0.05))
    result = credit(
        walk.steps,
        outcome,
        baseline,
        lambda s, t: graph.get(s, {}).get(t),
        lambda s, t: "test",
        protected.__contains__,
    )
    taken = {(s.source, s.target) for s in walk.steps}
    for edge in result.edges:
        assert -1.0 <= edge.weight <= 1.0
        assert (edge.source, edge.target) in taken
        assert edge.source not in protected
        assert edge.target not in protected
        before = graph[edge.source][edge.target]
        if outcome > baseline:
            assert edge.weight >= before
        elif outcome < baseline:
            assert edge.weight <= before
    assert abs(result.baseline - baseline) <= abs(outcome - baseline)
