"""The retrieval graph through the engine: teach, query, correction, learn, traces."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from brain import Brain, BrainConfig, MessageIn
from brain.errors import InvalidInput, NotFound
from brain.graph.nodes import EdgeWrite, NewNode, bump_epoch, write_edges
from brain.graph.retrieval import LINK_WEIGHT
from brain.graph.traverse import TraverseOptions
from brain.lcm.assemble import AssembleOptions
from brain.vectors.embedders import HashEmbedder
from tests.brain.lcm.helpers import SMALL, SMALL_BRAIN

DEPLOY = "Deploys go through the staging cluster before production"
KESTREL = "The staging cluster is called kestrel and runs in Frankfurt"
COFFEE = "The coffee machine is on the third floor next to the library"


def _teach(brain: Brain, text: str, **kw: object) -> str:
    return brain.teach(NewNode("teaching", text, **kw)).node_id  # type: ignore[arg-type]


def _edge(brain: Brain, source: str, target: str, weight: float) -> None:
    """Set an edge directly (tests build exact shapes), as maintenance would."""
    store = brain.store
    rows = dict(store.execute("SELECT node_id, id FROM nodes"))
    with store.transaction():
        write_edges(store, [EdgeWrite(rows[source], rows[target], weight, "test")])
        bump_epoch(store)


def _weight(brain: Brain, source: str, target: str) -> float | None:
    value = brain.store.scalar(
        "SELECT e.weight FROM edges e JOIN nodes a ON a.id = e.source "
        "JOIN nodes b ON b.id = e.target WHERE a.node_id = ? AND b.node_id = ?",
        (source, target),
    )
    return None if value is None else float(value)


def test_a_taught_fact_is_found_by_a_query_and_the_query_is_traced(fresh_brain: Brain) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    _teach(fresh_brain, COFFEE)
    result = fresh_brain.query("how do we deploy to production?", chat_id="c1")
    assert result.fired[0].id == deploy
    assert DEPLOY in result.context
    assert result.seeds[0][0] == deploy
    trace = fresh_brain.trace(chat_id="c1")
    assert trace["trace_id"] == result.trace_id
    assert trace["fired_nodes"][0] == deploy
    assert trace["query"] == "how do we deploy to production?"
    count = fresh_brain.store.scalar("SELECT fire_count FROM nodes WHERE node_id = ?", (deploy,))
    assert count == 1


def test_a_dedup_key_taught_twice_gives_the_first_node(fresh_brain: Brain) -> None:
    first = fresh_brain.teach(NewNode("teaching", DEPLOY, dedup_key="deploy-rule"))
    again = fresh_brain.teach(NewNode("teaching", DEPLOY + " (again)", dedup_key="deploy-rule"))
    assert again.node_id == first.node_id
    assert not again.created
    assert fresh_brain.info().nodes == 1


def test_a_taught_node_is_linked_both_ways_to_its_nearest_neighbours(fresh_brain: Brain) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    result = fresh_brain.teach(NewNode("teaching", KESTREL))
    assert result.connected == [deploy]
    assert _weight(fresh_brain, result.node_id, deploy) == _weight(
        fresh_brain, deploy, result.node_id
    )
    assert (_weight(fresh_brain, deploy, result.node_id) or 0) > 0


def test_activation_spreads_along_an_edge_to_a_node_the_query_does_not_match(
    fresh_brain: Brain,
) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    coffee = _teach(fresh_brain, COFFEE)
    options = TraverseOptions(top_k=1)
    assert [f.id for f in fresh_brain.query("deploy to production", options=options).fired] == [
        deploy
    ]
    _edge(fresh_brain, deploy, coffee, 0.9)
    result = fresh_brain.query("deploy to production", options=options)
    assert [f.id for f in result.fired] == [deploy, coffee]
    steps = fresh_brain.trace(trace_id=result.trace_id)["steps"]
    assert [(s["source"], s["target"], s["hop"]) for s in steps] == [(deploy, coffee, 1)]


def test_the_context_lists_constitutional_then_canonical_then_overlay(fresh_brain: Brain) -> None:
    overlay = _teach(fresh_brain, "Deploy on weekdays only, production deploys need review")
    canonical = _teach(
        fresh_brain, "Deploy tooling lives in the ops repository", authority="canonical"
    )
    rule = _teach(fresh_brain, "Never deploy without a rollback plan", authority="constitutional")
    result = fresh_brain.query("how to deploy production")
    order = [f.id for f in result.fired]
    assert order.index(rule) < order.index(canonical) < order.index(overlay)
    assert result.context.index("rollback plan") < result.context.index("ops repository")


def test_the_context_block_keeps_within_its_character_budget(fresh_brain: Brain) -> None:
    for i in range(6):
        _teach(fresh_brain, f"Deploy rule {i}: " + "production deploys need care. " * 10)
    result = fresh_brain.query("deploy rule", options=TraverseOptions(max_chars=700))
    assert 0 < len(result.context) <= 700
    assert 1 <= len(result.fired) < 6


def test_a_correction_stops_what_fired_wrongly_on_the_next_similar_query(
    fresh_brain: Brain,
) -> None:
    kestrel = _teach(fresh_brain, KESTREL)
    first = fresh_brain.query("which cluster do deploys use?", chat_id="c1")
    assert kestrel in [f.id for f in first.fired]
    fix = fresh_brain.teach(
        NewNode("correction", "Deploys use the canary cluster named osprey"), chat_id="c1"
    )
    assert fix.penalised_trace == first.trace_id
    assert kestrel in fix.inhibited
    again = fresh_brain.query("which cluster do deploys use?", chat_id="c1")
    fired = [f.id for f in again.fired]
    assert fired[0] == fix.node_id
    assert kestrel not in fired


def test_a_correction_never_inhibits_a_constitutional_node(fresh_brain: Brain) -> None:
    rule = _teach(fresh_brain, "Deploys always need a rollback plan", authority="constitutional")
    fresh_brain.query("what do deploys need?", chat_id="c1")
    fix = fresh_brain.teach(NewNode("correction", "Deploys need a change ticket"), chat_id="c1")
    assert rule not in fix.inhibited
    assert rule in [f.id for f in fresh_brain.query("what do deploys need?").fired]


def test_learning_credits_only_the_steps_the_trace_took(fresh_brain: Brain) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    kestrel = _teach(fresh_brain, "Frankfurt racks: power budget twelve kilowatts")
    coffee = _teach(fresh_brain, COFFEE)
    _edge(fresh_brain, deploy, kestrel, 0.5)
    _edge(fresh_brain, coffee, kestrel, 0.5)  # not taken: coffee does not fire
    options = TraverseOptions(top_k=1)
    result = fresh_brain.query("deploy to production", chat_id="c1", options=options)
    assert [f.id for f in result.fired] == [deploy, kestrel]
    learned = fresh_brain.learn(1.0, chat_id="c1")
    assert learned.trace_id == result.trace_id
    assert learned.edges_updated == 1
    assert (_weight(fresh_brain, deploy, kestrel) or 0) > 0.5
    assert _weight(fresh_brain, coffee, kestrel) == 0.5
    fresh_brain.query("deploy to production", chat_id="c1", options=options)
    fresh_brain.learn(-1.0, chat_id="c1")
    fresh_brain.learn(-1.0, chat_id="c1")
    assert (_weight(fresh_brain, deploy, kestrel) or 0) < 0.5


def test_learning_never_changes_a_constitutional_nodes_edges(fresh_brain: Brain) -> None:
    rule = _teach(fresh_brain, DEPLOY, authority="constitutional")
    other = _teach(fresh_brain, "Frankfurt racks: power budget twelve kilowatts")
    _edge(fresh_brain, rule, other, 0.5)
    fresh_brain.query("deploy to production", chat_id="c1", options=TraverseOptions(top_k=1))
    assert fresh_brain.learn(1.0, chat_id="c1").edges_updated == 0
    assert _weight(fresh_brain, rule, other) == 0.5


def test_weights_stay_within_bounds_however_often_an_outcome_repeats(fresh_brain: Brain) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    other = _teach(fresh_brain, "Frankfurt racks: power budget twelve kilowatts")
    _edge(fresh_brain, deploy, other, 0.9)
    options = TraverseOptions(top_k=1)
    for _ in range(30):
        fresh_brain.query("deploy to production", chat_id="c", options=options)
        fresh_brain.learn(1.0, chat_id="c")
    weight = _weight(fresh_brain, deploy, other)
    assert weight is not None
    assert 0.9 < weight <= 1.0


def test_traces_and_learning_survive_a_restart(db_path: Path) -> None:
    brain = Brain(db_path)
    deploy = _teach(brain, DEPLOY)
    other = _teach(brain, "Frankfurt racks: power budget twelve kilowatts")
    _edge(brain, deploy, other, 0.5)
    result = brain.query("deploy to production", chat_id="c1", options=TraverseOptions(top_k=1))
    brain.close()
    again = Brain(db_path)
    assert again.trace(chat_id="c1")["trace_id"] == result.trace_id
    assert again.learn(1.0, chat_id="c1").edges_updated == 1
    again.close()


def test_every_summary_is_a_node_and_a_suppressed_one_never_fires(small: Brain) -> None:
    words = ["kestrel", "deploy", "cluster", "frankfurt", "rollback", "canary"]
    small.ingest(
        "s",
        [
            MessageIn("user", " ".join(words[(i + k) % 6] for k in range(80)) + f" turn {i}")
            for i in range(60)
        ],
    )
    summaries = small.compact("s").summaries
    assert summaries
    info = small.info()
    assert info.nodes == info.summaries
    while small.embed_pending():
        pass
    fired = {f.id for f in small.query("kestrel deploy cluster").fired}
    assert fired & set(summaries)
    small.suppress(sorted(fired), session="s")
    assert not {f.id for f in small.query("kestrel deploy cluster").fired} & fired


def test_unknown_traces_and_bad_outcomes_are_clear_errors(fresh_brain: Brain) -> None:
    with pytest.raises(NotFound):
        fresh_brain.learn(1.0, chat_id="nobody")
    with pytest.raises(NotFound):
        fresh_brain.trace(trace_id="tr_0000000000000000")
    with pytest.raises(InvalidInput):
        fresh_brain.learn(2.0)
    with pytest.raises(InvalidInput):
        fresh_brain.teach(NewNode("teaching", "   "))
    with pytest.raises(InvalidInput):
        fresh_brain.query("  ")


def test_a_node_taught_with_links_leads_a_similar_query_to_the_linked_nodes(
    fresh_brain: Brain,
) -> None:
    racks = _teach(fresh_brain, "Frankfurt racks: power budget twelve kilowatts")
    _teach(fresh_brain, COFFEE)
    options = TraverseOptions(top_k=1)
    assert racks not in [
        f.id for f in fresh_brain.query("who owns deploys?", options=options).fired
    ]
    taught = fresh_brain.teach(NewNode("teaching", "who owns deploys"), links=[racks])
    assert _weight(fresh_brain, taught.node_id, racks) == LINK_WEIGHT
    fired = [f.id for f in fresh_brain.query("who owns deploys?", options=options).fired]
    assert fired[:2] == [taught.node_id, racks]
    with pytest.raises(NotFound):
        fresh_brain.teach(NewNode("teaching", "x"), links=["nd_0000000000000000"])


def test_a_correction_never_inhibits_the_nodes_it_links_to(fresh_brain: Brain) -> None:
    kestrel = _teach(fresh_brain, KESTREL)
    fresh_brain.query("which cluster do deploys use?", chat_id="c1")
    fix = fresh_brain.teach(
        NewNode("correction", "Deploys use kestrel only for canaries"),
        chat_id="c1",
        links=[kestrel],
    )
    assert kestrel not in fix.inhibited
    assert kestrel in [f.id for f in fresh_brain.query("which cluster do deploys use?").fired]


def test_a_new_embedder_re_embeds_taught_nodes_so_queries_still_find_them(db_path: Path) -> None:
    brain = Brain(db_path, embedder=HashEmbedder(64))
    deploy = _teach(brain, DEPLOY)
    brain.close()
    again = Brain(db_path, embedder=HashEmbedder(32), may_switch_embedder=True)
    while again.embed_pending():
        pass
    assert again.store.scalar("SELECT count(*) FROM vectors WHERE kind = 'node'") == 1
    assert again.query("deploys staging production").fired[0].id == deploy
    again.close()


def test_a_deleted_nodes_id_is_never_given_to_a_new_node(fresh_brain: Brain) -> None:
    first = _teach(fresh_brain, DEPLOY)
    row = fresh_brain.store.scalar("SELECT id FROM nodes WHERE node_id = ?", (first,))
    with fresh_brain.store.transaction():
        fresh_brain.store.execute("DELETE FROM nodes WHERE node_id = ?", (first,))
    second = _teach(fresh_brain, COFFEE)
    again = fresh_brain.store.scalar("SELECT id FROM nodes WHERE node_id = ?", (second,))
    assert again != row


def _recall_session(brain: Brain) -> str:
    kestrel = _teach(brain, KESTREL)
    brain.ingest(
        "s",
        [
            MessageIn("user", "hello there"),
            MessageIn("assistant", "hi, how can I help?"),
            MessageIn("user", "which staging cluster do deploys go to?"),
        ],
    )
    return kestrel


def test_assemble_shows_the_graphs_recall_block_only_when_on(fresh_brain: Brain) -> None:
    kestrel = _recall_session(fresh_brain)
    plain = fresh_brain.assemble("s", AssembleOptions(budget=4_000))
    assert plain.recall is None
    shadow = fresh_brain.assemble("s", AssembleOptions(budget=4_000), recall="shadow")
    assert shadow.messages == plain.messages
    assert shadow.recall is not None
    assert shadow.recall.fired == [kestrel]
    assert not shadow.recall.injected
    assert fresh_brain.trace(chat_id="s")["trace_id"] == shadow.recall.trace_id
    shown = fresh_brain.assemble("s", AssembleOptions(budget=4_000), recall="on")
    assert shown.recall is not None
    assert shown.recall.injected
    recall = [m for m in shown.messages if "<recall" in str(m["content"])]
    assert len(recall) == 1
    assert "kestrel" in str(recall[0]["content"])
    assert shown.tokens == plain.tokens + shown.recall.tokens
    assert shown.messages[-1] == plain.messages[-1]  # the newest turn stays last


def test_a_recall_block_that_does_not_fit_the_budget_is_left_out(fresh_brain: Brain) -> None:
    _recall_session(fresh_brain)
    tight = fresh_brain.assemble("s", AssembleOptions(budget=40), recall="on")
    assert tight.recall is not None
    assert not tight.recall.injected
    assert not any("<recall" in str(m["content"]) for m in tight.messages)


def test_the_configured_recall_mode_applies_when_a_request_does_not_say(db_path: Path) -> None:
    brain = Brain(db_path, BrainConfig(recall_mode="shadow"))
    _recall_session(brain)
    assembled = brain.assemble("s", AssembleOptions(budget=4_000))
    assert assembled.recall is not None
    assert assembled.recall.mode == "shadow"
    brain.close()


def test_a_useful_node_is_linked_from_the_seeds_so_the_next_similar_query_reaches_it(
    fresh_brain: Brain,
) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    coffee = _teach(fresh_brain, COFFEE)
    assert _weight(fresh_brain, deploy, coffee) is None  # not similar enough to be linked
    wide = TraverseOptions(top_k=2, threshold=0.001)
    result = fresh_brain.query("deploy to production", chat_id="c1", options=wide)
    assert [f.id for f in result.fired] == [deploy, coffee]
    learned = fresh_brain.learn(1.0, chat_id="c1", useful=[coffee])
    assert learned.edges_updated == 1
    weight = _weight(fresh_brain, deploy, coffee)
    assert weight is not None
    assert weight > 0
    narrow = TraverseOptions(top_k=1, threshold=0.01)
    assert [f.id for f in fresh_brain.query("deploy to production", options=narrow).fired] == [
        deploy,
        coffee,
    ]


def test_useful_nodes_are_not_linked_after_a_failure_or_when_they_did_not_fire(
    fresh_brain: Brain,
) -> None:
    deploy = _teach(fresh_brain, DEPLOY)
    racks = _teach(fresh_brain, "Frankfurt racks: power budget twelve kilowatts")
    coffee = _teach(fresh_brain, COFFEE)
    wide = TraverseOptions(top_k=2, threshold=0.001, max_hops=0)
    one = TraverseOptions(top_k=1, max_hops=0)
    first = [
        f.id for f in fresh_brain.query("deploy to production", chat_id="c1", options=wide).fired
    ]
    assert first[0] == deploy
    other = first[1]  # fired: only the failure keeps it from being linked
    assert other in (racks, coffee)
    linked_before = _weight(fresh_brain, deploy, other)
    assert fresh_brain.learn(-1.0, chat_id="c1", useful=[other]).edges_updated == 0
    assert _weight(fresh_brain, deploy, other) == linked_before
    fired = fresh_brain.query("deploy to production", chat_id="c1", options=one).fired
    assert coffee not in [f.id for f in fired]
    before = _weight(fresh_brain, deploy, coffee)
    fresh_brain.learn(1.0, chat_id="c1", useful=[coffee])
    assert _weight(fresh_brain, deploy, coffee) == before


def test_a_node_named_useful_rises_among_close_seeds_and_shown_unused_ones_sink(
    fresh_brain: Brain,
) -> None:
    a = _teach(fresh_brain, "Deploy checklist: run the migrations first")
    b = _teach(fresh_brain, "Deploy checklist: tag the release first")
    wide = TraverseOptions(top_k=2, threshold=0.001, max_hops=0)
    first = [f.id for f in fresh_brain.query("deploy checklist", chat_id="c", options=wide).fired]
    loser = first[1]
    winner = first[0]
    for _ in range(5):
        fresh_brain.query("deploy checklist", chat_id="c", options=wide)
        fresh_brain.learn(1.0, chat_id="c", useful=[loser])
    priors = dict(fresh_brain.store.execute("SELECT node_id, prior FROM nodes"))
    assert priors[loser] > 0 > priors[winner]
    assert max(abs(p) for p in priors.values()) <= 0.1
    after = [f.id for f in fresh_brain.query("deploy checklist", options=wide).fired]
    assert after[0] == loser
    assert {a, b} == set(after)


def test_priors_never_move_a_constitutional_node(fresh_brain: Brain) -> None:
    rule = _teach(fresh_brain, "Deploy checklist: never skip review", authority="constitutional")
    other = _teach(fresh_brain, "Deploy checklist: tag the release first")
    wide = TraverseOptions(top_k=2, threshold=0.001, max_hops=0)
    fresh_brain.query("deploy checklist", chat_id="c", options=wide)
    fresh_brain.learn(1.0, chat_id="c", useful=[other])
    fresh_brain.query("deploy checklist", chat_id="c", options=wide)
    fresh_brain.learn(1.0, chat_id="c", useful=[rule])
    assert fresh_brain.store.scalar("SELECT prior FROM nodes WHERE node_id = ?", (rule,)) == 0


def test_assembles_recall_block_never_carries_another_sessions_summaries(tmp_path: Path) -> None:
    # The earlier extractive summaries of these word salads are their bare word lists, which
    # the query fires (the precondition); the fact summarizer's carry a header and a payload
    # stub, which score lower than the taught node's threshold share.
    config = replace(SMALL_BRAIN, compaction=replace(SMALL, offline_summarizer="extractive_v1"))
    small = Brain(tmp_path / "v1.db", config)
    try:
        _recall_block_is_scoped(small)
    finally:
        small.close()


def _recall_block_is_scoped(small: Brain) -> None:
    words = ["kestrel", "staging", "cluster", "frankfurt", "rollback", "canary"]
    small.ingest(
        "other",
        [
            MessageIn("user", " ".join(words[(i + k) % 6] for k in range(80)) + f" turn {i}")
            for i in range(60)
        ],
    )
    theirs = set(small.compact("other").summaries)
    assert theirs
    while small.embed_pending():
        pass
    taught = _teach(small, "The staging cluster kestrel is in Frankfurt")
    assert {f.id for f in small.query("kestrel staging cluster").fired} & theirs
    small.ingest("mine", [MessageIn("user", "where is the kestrel staging cluster?")])
    shown = small.assemble("mine", AssembleOptions(budget=4_000), recall="on")
    assert shown.recall is not None
    assert taught in shown.recall.fired
    assert not set(shown.recall.fired) & theirs
    assert not any("<summary" in str(m["content"]) for m in shown.messages)
