"""What learning may change in a query's answer (brain.graph.safeguard), through ``query``."""

from __future__ import annotations

import random
from pathlib import Path

from brain import Brain, TraverseOptions
from brain.graph.nodes import bump_epoch
from brain.graph.safeguard import bounded_order

ALL_FIRE = TraverseOptions(top_k=30, threshold=0.001, max_fired=60)
TOPICS = [
    "kestrel migration to Frankfurt",
    "the kestrel cluster backups",
    "osprey deploy checklist",
    "the canary rollout of kestrel",
    "lunch orders for the offsite",
    "badge renewals at the front desk",
    "printer toner and laptop invoices",
    "the weather alert for Tuesday",
    "kestrel rollback plan",
    "hiring plans for the data team",
]


def _notes(workspace: Path) -> None:
    memory = workspace / "memory"
    memory.mkdir(parents=True)
    sections = [
        f"## Note {i}\n\nWe talked about {TOPICS[i % len(TOPICS)]}, item {i}.\n" for i in range(30)
    ]
    (memory / "notes.md").write_text("# Notes\n\n" + "\n".join(sections))


def _order(brain: Brain, query: str) -> list[str]:
    return [f.id for f in brain.query(query, options=ALL_FIRE, record=False).fired]


def _by_match(brain: Brain, query: str) -> list[str]:
    """The seeds by the query's match alone (their score while nothing is learned)."""
    seeds = brain.query(query, options=ALL_FIRE, record=False).seeds
    return [node for node, _ in sorted(seeds, key=lambda s: -s[1])]


def test_whatever_priors_were_learned_the_querys_best_seven_stay_in_its_top_ten(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    _notes(tmp_path / "ws")
    fresh_brain.sync(tmp_path / "ws")
    query = "When is the kestrel migration to Frankfurt?"
    before = _by_match(fresh_brain, query)
    assert len(before) >= 20
    store = fresh_brain.store
    # As much as a prior can say: the query's best ten were never useful, the worst
    # ten always were.
    with store.transaction():
        for node, prior in [(n, -1.0) for n in before[:10]] + [(n, 1.0) for n in before[-10:]]:
            store.execute("UPDATE nodes SET prior = ? WHERE node_id = ?", (prior, node))
        bump_epoch(store)
    after = _order(fresh_brain, query)
    assert set(before[:7]) <= set(after[:10])
    assert set(before[-10:]) & set(after[:10])  # the learned part still lifts


def test_failures_weaken_edges_to_nothing_but_never_make_one_inhibit_a_matching_seed(
    fresh_brain: Brain, tmp_path: Path
) -> None:
    memory = tmp_path / "ws" / "memory"
    memory.mkdir(parents=True)
    (memory / "deploy.md").write_text(
        "# Deploy\n\n## Checklist\n\nDeploy checklist: run the migrations.\n\n"
        "## More\n\nDeploy checklist: tag the release.\n"
    )
    fresh_brain.sync(tmp_path / "ws")  # the two sections: a sequence edge each way
    options = TraverseOptions(top_k=2, threshold=0.001)
    seeds = {node for node, _ in fresh_brain.query("deploy checklist", options=options).seeds}
    assert len(seeds) == 2
    for _ in range(60):
        fresh_brain.query("deploy checklist", chat_id="c", options=options)
        fresh_brain.learn(-1.0, chat_id="c")
    weights = [float(r[0]) for r in fresh_brain.store.execute("SELECT weight FROM edges")]
    assert weights
    assert min(weights) >= 0.0
    after = {f.id for f in fresh_brain.query("deploy checklist", options=options).fired}
    assert seeds <= after


def test_a_limited_bounded_order_is_the_prefix_of_the_whole_order() -> None:
    rng = random.Random(7)
    for _ in range(200):
        learned = rng.sample(range(60), rng.randint(0, 60))
        query = rng.sample(learned, rng.randint(0, len(learned)))
        whole = bounded_order(query, learned)
        for k in (0, 1, 3, 8, 100):
            assert bounded_order(query, learned, limit=k) == whole[:k]
