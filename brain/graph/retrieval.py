"""The graph's fast loop: query, teach, correct, learn; each one transaction.

``query`` embeds nothing itself: the engine embeds outside its lock and hands
the vector in. Seeds come from the graph's own vector index (nodes and
summaries), the traversal runs over the hot mirror, and the trace, the fire
counts and the context block are written and built in one go. ``teach``
stores a node with its vector at once (the caller embedded it) and links it
to its nearest neighbours; a correction with a chat also penalises that
chat's latest trace and inhibits what fired wrongly. ``learn`` credits the
steps a trace took (``brain.graph.learning``).

Tested through the engine's ``query``, ``teach`` and ``learn`` in
``tests/brain/graph/test_nodes.py`` (each call is one transaction over the graph).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson

from brain.clock import now_iso
from brain.errors import InvalidInput, NotFound
from brain.graph.learning import Credit, credit
from brain.graph.mirror import Graph, GraphState
from brain.graph.nodes import (
    AUTHORITY_RANK,
    EdgeWrite,
    NewNode,
    Node,
    bump_epoch,
    clamp_weight,
    clamped,
    get_nodes,
    graph_epoch,
    insert_node,
    write_edges,
)
from brain.graph.safeguard import bounded_order
from brain.graph.seeding import Seeder, SeedQuery, hybrid_seeds
from brain.graph.traces import Trace, find_trace, mark_learned, save_trace
from brain.graph.traverse import Traversal, TraverseOptions, traverse
from brain.store.connection import Store
from brain.store.readpool import WritePath, on_store
from brain.vectors.index import Pending, VectorIndex, text_hash

CONNECT_K: Final = 5
"""A taught node is linked both ways to this many nearest nodes..."""
CONNECT_MIN_SIMILARITY: Final = 0.3
"""...that are at least this similar; the edge weight is the similarity, halved."""
INHIBIT_WEIGHT: Final = -0.8
LINK_WEIGHT: Final = 0.3
"""A taught node's edge to each node it names in ``links``. LoCoMo dev (query_learned,
recall@10 / @50): 0.8 56.1 / 75.3, 0.5 56.5 / 75.5, 0.3 56.9 / 75.6 (learning rate 0.2);
a strong link lets a question's taught node crowd the top of every similar question."""
"""A correction's edge to each node that fired wrongly."""
_BASELINE_KEY: Final = "learn_baseline"


@dataclass(frozen=True, slots=True)
class FiredNode:
    """A fired node as callers see it."""

    id: str
    kind: str
    authority: str
    score: float
    text: str
    source: str | None = None
    lines: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What a query returns: the trace id, what fired, the context block and timings."""

    trace_id: str
    fired: list[FiredNode]
    context: str
    seeds: list[tuple[str, float]]
    inhibited: list[str]
    timings: dict[str, float] = field(default_factory=dict)


def run_query(
    store: Store,
    graph_: Graph,
    index: VectorIndex,
    vector: npt.NDArray[np.float32],
    text: str,
    chat_id: str | None,
    options: TraverseOptions,
    embed_ms: float,
    *,
    record: bool = True,
    conversations: Sequence[int] | None = None,
    summaries_only: bool = False,
    write: WritePath | None = None,
    match: str | None = None,
    seeder: Seeder = hybrid_seeds,
) -> QueryResult:
    """Seed, traverse, record the trace (unless ``record`` is False), build the context.

    ``answer_query`` and then ``Recording.save`` on ``write`` (default: ``store``);
    the engine calls the two apart instead, recording once its read has ended.
    """
    result, recording = answer_query(
        store,
        graph_,
        index,
        vector,
        text,
        chat_id,
        options,
        embed_ms,
        conversations=conversations,
        summaries_only=summaries_only,
        match=match,
        seeder=seeder,
    )
    if not record:
        return result
    return recording.into(result, (write or on_store(store))(recording.save))


@dataclass(frozen=True, slots=True)
class Recording:
    """What a query's trace records, kept to be written once the query's read is over.

    Written while the read transaction that found it is still open, every trace
    commit would hold back the WAL: a checkpoint cannot copy frames newer than an
    open reader's snapshot, so the WAL never restarted from its start, grew with
    every query, and each commit past ``wal_autocheckpoint`` pages ran a checkpoint
    of its own (two fsyncs on the request path of every query).
    """

    text: str
    chat_id: str | None
    traversal: Traversal
    timings: dict[str, float]
    shown: list[int]
    started: float
    """``time.perf_counter()`` when the query began (for ``total_ms``)."""
    embed_ms: float

    def save(self, target: Store) -> str:
        """Store the trace and the fired nodes' fire counts in one transaction; its id."""
        with target.transaction():
            saved = save_trace(
                target, self.text, self.chat_id, self.traversal, self.timings, self.shown
            )
            stamp = now_iso()
            target.executemany(
                "UPDATE nodes SET fire_count = fire_count + 1, last_fired_at = ? WHERE id = ?",
                [(stamp, n) for n in self.traversal.fired],
            )
        return saved

    def into(self, result: QueryResult, trace_id: str) -> QueryResult:
        """``result`` with the trace id it was recorded under and its total time since."""
        timings = {
            **result.timings,
            "total_ms": round(self.embed_ms + (time.perf_counter() - self.started) * 1000, 3),
        }
        return replace(result, trace_id=trace_id, timings=timings)


def answer_query(
    store: Store,
    graph_: Graph,
    index: VectorIndex,
    vector: npt.NDArray[np.float32],
    text: str,
    chat_id: str | None,
    options: TraverseOptions,
    embed_ms: float,
    *,
    conversations: Sequence[int] | None = None,
    summaries_only: bool = False,
    match: str | None = None,
    seeder: Seeder = hybrid_seeds,
) -> tuple[QueryResult, Recording]:
    """Seed, traverse and build the context; the answer (no trace id yet) and its record.

    ``conversations``: only summaries of these conversations may fire (taught,
    directive and workspace nodes also may, unless ``summaries_only``); None lets
    every summary fire. ``match``: the query's FTS5 match expression (its keywords),
    for ``seeder`` (``brain.graph.seeding``). The whole query reads one state of the
    mirror, whatever is written meanwhile.

    The caller records the trace with ``Recording.save`` on the write connection
    (the engine: ``Access.write_unsynced``, committed without an fsync of its own: a
    trace survives a killed process, and a power cut loses only the newest ones, so
    a chat's latest trace left is always one that was answered; ``learn`` never
    credits a lost one's steps to another), after its read transaction has ended
    (``Recording``), and ``Recording.into`` gives the answer its trace id.
    """
    started = time.perf_counter()
    graph = graph_.refresh(store)
    suppressed = _suppressed_summaries(store)
    blocked: _Blocked | _Suppressed
    if conversations is None and not summaries_only:
        # Unscoped: nothing is outside, so no per-candidate scope call (hundreds a query).
        allowed: Callable[[int], bool] = _anything
        blocked = _Suppressed(suppressed)
    else:
        outside = _OutsideScope(store, graph, conversations, summaries_only)
        allowed = outside.inside
        blocked = _Blocked(suppressed, outside)
    seeds = seeder(store, graph, index, SeedQuery(text, vector, match, options.top_k), allowed)
    # What was learned lifts a seed up to the query's best match, never above it nor
    # below the seed's own match: so no seed fires less, nor fails to fire, because of
    # learning (brain.graph.safeguard).
    best = max((s.match for s in seeds), default=0.0)
    start = [(s.node, min(max(s.score, s.match), best)) for s in seeds]
    traversal = traverse(start, graph.neighbours, options, blocked)
    traverse_ms = (time.perf_counter() - started) * 1000
    nodes = get_nodes(store, list(traversal.fired) + [s.node for s in seeds])
    matched = sorted(seeds, key=lambda s: -s.match)
    order = bounded_order([s.node for s in matched], list(traversal.fired))
    fired = [_fired(nodes[n], traversal.fired[n]) for n in order if n in nodes and n not in blocked]
    context, shown = _context(fired, options.max_chars)
    shown_rows = [graph.by_public.get(f.id, -1) for f in shown]
    timings = {
        "embed_query_ms": round(embed_ms, 3),
        "traverse_ms": round(traverse_ms, 3),
    }
    recording = Recording(text, chat_id, traversal, timings, shown_rows, started, embed_ms)
    public = graph.public
    result = QueryResult(
        trace_id="",
        fired=shown,
        context=context,
        seeds=[(nodes[n].id if n in nodes else public.get(n, str(n)), s) for n, s, _ in seeds],
        inhibited=[public.get(n, str(n)) for n in traversal.inhibited],
        timings={
            **timings,
            "total_ms": round(embed_ms + (time.perf_counter() - started) * 1000, 3),
        },
    )
    return result, recording


class _OutsideScope:
    """Whether a node is outside the query's scope.

    Outside: a summary of a conversation not in scope and, with
    ``summaries_only``, every node that is not a summary.
    """

    def __init__(
        self,
        store: Store,
        graph: GraphState,
        conversations: Sequence[int] | None,
        summaries_only: bool = False,
    ) -> None:
        self.store = store
        self.graph = graph
        self.scope = None if conversations is None else set(conversations)
        self.summaries_only = summaries_only
        self.seen: dict[int, bool] = {}

    def inside(self, node: int) -> bool:
        """Not outside: a node the query may seed from."""
        return not self(node)

    def __call__(self, node: int) -> bool:
        if self.graph.kind.get(node) != "summary":
            return self.summaries_only
        if self.scope is None:
            return False
        if node not in self.seen:
            conversation = self.store.scalar(
                "SELECT s.conversation_id FROM nodes n JOIN summaries s ON s.id = n.summary_id "
                "WHERE n.id = ?",
                (node,),
            )
            self.seen[node] = conversation not in self.scope
        return self.seen[node]


def _anything(node: int) -> bool:
    return True


class _Suppressed:
    """Nodes that may not fire in an unscoped query: suppressed summaries alone."""

    def __init__(self, suppressed: set[int]) -> None:
        self.suppressed = suppressed

    def __call__(self, node: int) -> bool:
        return node in self.suppressed

    def __contains__(self, node: int) -> bool:
        return node in self.suppressed


class _Blocked:
    """Nodes that may not fire: suppressed summaries and summaries out of scope."""

    def __init__(self, suppressed: set[int], outside: _OutsideScope) -> None:
        self.suppressed = suppressed
        self.outside = outside

    def __call__(self, node: int) -> bool:
        return node in self.suppressed or self.outside(node)

    def __contains__(self, node: int) -> bool:
        return self(node)


def _suppressed_summaries(store: Store) -> set[int]:
    """Summary nodes whose summary is suppressed or withheld (a source is suppressed,
    ``brain.lcm.suppress``): they never fire."""
    # O(hidden summaries): the partial index holds only those, and CROSS JOIN keeps
    # it the outer loop whatever the statistics say (planned the other way round,
    # this was a scan of every node: 25 ms a query at 100k nodes).
    rows = store.execute(
        "SELECT n.id FROM summaries s INDEXED BY summaries_hidden "
        "CROSS JOIN nodes n ON n.summary_id = s.id "
        "WHERE s.suppressed_at IS NOT NULL OR s.hidden_by IS NOT NULL"
    )
    return {int(r[0]) for r in rows}


def _fired(node: Node, score: float) -> FiredNode:
    lines = (
        (node.line_start, node.line_end)
        if node.line_start is not None and node.line_end is not None
        else None
    )
    return FiredNode(node.id, node.kind, node.authority, score, node.text, node.source, lines)


def _context(fired: list[FiredNode], max_chars: int) -> tuple[str, list[FiredNode]]:
    """The context block: authority first, then the answer's order; whole nodes within
    ``max_chars``.

    A node that does not fit is left out (the next smaller one may still fit); the
    first node is clipped rather than dropped, so a block is never empty when
    something fired.
    """
    # Stable: within an authority, the answer's order (``brain.graph.safeguard``).
    ordered = sorted(fired, key=lambda f: AUTHORITY_RANK.get(f.authority, 9))
    parts: list[str] = []
    shown: list[FiredNode] = []
    used = 0
    for node in ordered:
        where = f" {node.source}:{node.lines[0]}-{node.lines[1]}" if node.lines else ""
        block = f"[{node.id} {node.kind}/{node.authority}{where}]\n{node.text.strip()}"
        cost = len(block) + (2 if parts else 0)
        if used + cost > max_chars:
            if parts:
                continue
            block = block[: max(0, max_chars - 1)] + "…"
            cost = len(block)
        parts.append(block)
        shown.append(node)
        used += cost
    return "\n\n".join(parts), shown


# -- teach and correct ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TeachResult:
    """A taught node: its id, whether it is new, what it was linked to, what it penalised."""

    node_id: str
    created: bool
    connected: list[str]
    inhibited: list[str] = field(default_factory=list)
    penalised_trace: str | None = None
    edges_updated: int = 0


def teach(
    store: Store,
    graph: Graph,
    index: VectorIndex,
    new: NewNode,
    vector: npt.NDArray[np.float32],
    embedded_text: str,
    chat_id: str | None = None,
    links: Sequence[str] = (),
) -> TeachResult:
    """Store a node with its vector, link it to its neighbours; a correction also corrects.

    ``vector`` is the embedding of ``embedded_text`` (the node text the vector index
    would embed). A correction with ``chat_id`` penalises that chat's latest trace
    (outcome -1) and adds an inhibitory edge from the correction to every node that
    fired in it, except protected ones and those it links to. ``links`` are public
    node ids the new node points at with a strong positive edge ("this is about
    those"): a correction that names the right nodes makes the next similar query
    reach them.
    """
    graph.refresh(store)
    linked: list[int] = []
    for public_id in dict.fromkeys(links):
        target = graph.by_public.get(public_id)
        if target is None:
            raise NotFound(f"no node {public_id!r} to link to", id=public_id)
        linked.append(target)
    trace: Trace | None = None
    if new.kind == "correction" and chat_id is not None:
        trace = find_trace(store, chat_id=chat_id)
    neighbours = [
        (node, score)
        for node, score in _nearest_nodes(store, graph, index, vector, CONNECT_K + 1)
        if score >= CONNECT_MIN_SIMILARITY
    ]
    added: list[tuple[int, str, str, str, int | None]] = []
    with graph.following():  # a reader that sees this epoch first gets the state before
        with store.transaction():
            before = graph_epoch(store)
            row_id, node_id, created = insert_node(store, new)
            edges: list[EdgeWrite] = []
            wrong: list[int] = []
            if created:
                added.append((row_id, node_id, new.kind, new.authority, None))
                index.put(
                    store,
                    _pending_one(row_id, embedded_text),
                    np.asarray([vector], dtype=np.float32),
                )
                for node, score in neighbours[:CONNECT_K]:
                    if node == row_id:
                        continue
                    edges.append(EdgeWrite(row_id, node, score / 2, "similar"))
                    edges.append(EdgeWrite(node, row_id, score / 2, "similar"))
            edges += [EdgeWrite(row_id, n, LINK_WEIGHT, "link") for n in linked if n != row_id]
            learned: Credit | None = None
            if trace is not None:
                wrong = [
                    n
                    for n, _ in trace.fired
                    if n != row_id
                    and n not in linked
                    and graph.authority.get(n) != "constitutional"
                ]
                edges += [EdgeWrite(row_id, n, INHIBIT_WEIGHT, "inhibits") for n in wrong]
                learned = _credit(store, graph, trace, -1.0, extra=edges)
                edges = _merge(edges, learned.edges)
            edges = clamped(edges)
            write_edges(store, edges)
            after = bump_epoch(store)
        graph.apply(before, after, nodes=added, edges=edges)
    public = graph.public
    connected = [public.get(n, str(n)) for n, _ in neighbours[:CONNECT_K] if n != row_id]
    return TeachResult(
        node_id=node_id,
        created=created,
        connected=connected if created else [],
        inhibited=[public.get(n, str(n)) for n in wrong],
        penalised_trace=trace.id if trace is not None else None,
        edges_updated=len(learned.edges) if trace is not None and learned else 0,
    )


def _nearest_nodes(
    store: Store, graph: Graph, index: VectorIndex, vector: npt.NDArray[np.float32], k: int
) -> list[tuple[int, float]]:
    """The ``k`` nodes nearest ``vector`` (a summary's vector stands for its node), best
    first, as the graph index finds them approximately: past
    ``brain.vectors.embedding.GRAPH_APPROXIMATE_BELOW`` rows from its IVF lists, not a
    product over every node (a teach links its node to near neighbours; a query's seeds
    stay exact)."""
    found: list[tuple[int, float]] = []
    for kind, row_id, score in index.search(store, vector, 2 * k, approximate=True):
        node = row_id if kind == "node" else graph.summary_node(store, row_id)
        if node is not None and node in graph.kind:
            found.append((node, score))
    found.sort(key=lambda pair: -pair[1])
    return found[:k]


def _pending_one(row_id: int, text: str) -> Pending:
    store_text = (text,)
    return Pending(
        keys=(("node", row_id),),
        conversations=(0,),
        texts=store_text,
        hashes=(text_hash(text),),
        slots=(0,),
        to_embed=store_text,
    )


def _merge(first: Sequence[EdgeWrite], then: Sequence[EdgeWrite]) -> list[EdgeWrite]:
    """Edge writes with later writes to the same edge replacing earlier ones."""
    merged = {(e.source, e.target): e for e in first}
    merged.update({(e.source, e.target): e for e in then})
    return list(merged.values())


# -- learn --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LearnResult:
    """What an outcome changed."""

    trace_id: str
    edges_updated: int
    advantage: float
    baseline: float


def learn(
    store: Store,
    graph: Graph,
    outcome: float,
    trace_id: str | None = None,
    chat_id: str | None = None,
    useful: Sequence[str] = (),
) -> LearnResult:
    """Credit ``outcome`` to a trace (by id, else the chat's latest, else the latest).

    ``useful`` names fired nodes the caller used: with a positive advantage, the
    trace's strongest seeds (what the query matched) are linked to them, new edges
    included, so the next query that matches those seeds reaches them too.
    """
    if not -1.0 <= outcome <= 1.0:
        raise InvalidInput("outcome", "must be between -1 and 1")
    graph.refresh(store)
    with graph.following():  # a reader that sees this epoch first gets the state before
        with store.transaction():
            trace = find_trace(store, trace_id, chat_id)
            before = graph_epoch(store)
            result = _credit(store, graph, trace, outcome)
            if useful and result.advantage > 0:
                associated = _associate(graph, trace, useful, result)
                # An edge that exists keeps its kind (a file's ``sequence`` edge stays one:
                # the seeds' ranking reads a file's order from it).
                kinds = _kinds_of(store, [(e.source, e.target) for e in associated])
                associated = [
                    replace(e, kind=kinds.get((e.source, e.target), e.kind)) for e in associated
                ]
                result = replace(result, edges=_merge(result.edges, associated))
            priors = _priors(graph, trace, useful)
            store.executemany(
                "UPDATE nodes SET prior = ? WHERE id = ?", [(p, n) for n, p in priors.items()]
            )
            write_edges(store, result.edges)
            mark_learned(store, trace.row_id, outcome)
            after = bump_epoch(store)
        graph.apply(before, after, edges=result.edges, priors=priors)
    return LearnResult(trace.id, len(result.edges), result.advantage, result.baseline)


ASSOCIATE_SEEDS: Final = 3
"""A useful node is linked from this many of the trace's strongest seeds..."""
ASSOCIATE_RATE: Final = 0.3
"""...each edge moving this far (x advantage x (1 - |w|)) toward 1. LoCoMo dev,
query_learned:outcomes recall@10 against query's 55.3: without useful nodes 54.8;
rate 0.1 54.6, 0.3 55.6, 0.5 54.9; from 1 seed 55.1, 3 55.6, 5 55.5."""


def _associate(
    graph: Graph, trace: Trace, useful: Sequence[str], credit_: Credit
) -> list[EdgeWrite]:
    """Edges from the trace's strongest seeds to the useful nodes, strengthened or made."""
    fired = {n for n, _ in trace.fired}
    targets = [graph.by_public[u] for u in useful if graph.by_public.get(u) in fired]
    seeds = [n for n, _ in sorted(trace.seeds, key=lambda s: -s[1])][:ASSOCIATE_SEEDS]
    pending = {(e.source, e.target): e.weight for e in credit_.edges}
    out: list[EdgeWrite] = []
    for target in targets:
        for seed in seeds:
            if seed == target or "constitutional" in (
                graph.authority.get(seed),
                graph.authority.get(target),
            ):
                continue
            current = pending.get((seed, target), graph.out.get(seed, {}).get(target, 0.0))
            weight = clamp_weight(
                current + ASSOCIATE_RATE * credit_.advantage * (1.0 - abs(current))
            )
            out.append(EdgeWrite(seed, target, weight, "learned"))
    return out


PRIOR_STEP: Final = 0.02
"""How far a useful node's prior rises (toward ``PRIOR_LIMIT``), per time it was useful."""
PRIOR_DOWN: Final = 0.5
"""A shown node nobody used sinks by this share of a step. LoCoMo dev recall@10,
query_learned / query_learned:outcomes: 0 55.8 / 52.7 (rising alone only crowds the
top), 0.25 58.7 / 56.3, 0.5 60.0 / 56.8, 0.75 59.8 / 55.6, 1.0 58.2 / 55.8."""
PRIOR_LIMIT: Final = 0.1
"""Priors stay within +-this, in similarity units: they reorder close candidates but
cannot lift a node the query does not match over one it does (0.15: 60.0 / 56.6)."""


def _priors(graph: Graph, trace: Trace, useful: Sequence[str]) -> dict[int, float]:
    """New priors: up for the useful nodes, half a step down for the rest shown.

    Nodes that were useful once tend to be useful again (a fact asked about is
    asked about again, in other words), and nodes shown but not used again and
    again are noise near many queries. Needs ``useful``: an outcome alone does
    not say which shown node earned it.
    """
    if not useful:
        return {}
    wanted = {graph.by_public[u] for u in useful if u in graph.by_public}
    out: dict[int, float] = {}
    for node in wanted:
        if graph.authority.get(node) != "constitutional":
            current = graph.prior.get(node, 0.0)
            out[node] = min(PRIOR_LIMIT, current + PRIOR_STEP * (1.0 - current / PRIOR_LIMIT))
    for node in trace.shown:
        if node in wanted or node not in graph.kind:
            continue
        if graph.authority.get(node) != "constitutional":
            out[node] = max(-PRIOR_LIMIT, graph.prior.get(node, 0.0) - PRIOR_STEP * PRIOR_DOWN)
    return out


def _credit(
    store: Store,
    graph: Graph,
    trace: Trace,
    outcome: float,
    extra: Sequence[EdgeWrite] = (),
) -> Credit:
    """Credit for ``outcome`` on ``trace``; stores the new baseline (in the transaction)."""
    baseline = float(store.scalar("SELECT value FROM meta WHERE key = ?", (_BASELINE_KEY,)) or 0.0)
    pending = {(e.source, e.target): e.weight for e in extra}

    def weight_of(source: int, target: int) -> float | None:
        if (source, target) in pending:
            return pending[(source, target)]
        return graph.out.get(source, {}).get(target)

    kinds = _edge_kinds(store, trace)
    # Only what the caller got can have earned the outcome: steps into fired nodes
    # the context block left out changed nothing the caller saw.
    shown = set(trace.shown)
    result = credit(
        [s for s in trace.steps if s.target in shown],
        outcome,
        baseline,
        weight_of,
        lambda s, t: kinds.get((s, t), "learned"),
        lambda n: graph.authority.get(n) == "constitutional",
    )
    store.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_BASELINE_KEY, repr(result.baseline)),
    )
    return result


def _edge_kinds(store: Store, trace: Trace) -> dict[tuple[int, int], str]:
    return _kinds_of(store, [(s.source, s.target) for s in trace.steps])


def _kinds_of(store: Store, edges: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """The kinds of those of ``edges`` (source, target) that exist."""
    pairs: list[Any] = [list(e) for e in edges]
    if not pairs:
        return {}
    rows = store.execute(
        "SELECT e.source, e.target, e.kind FROM json_each(?) j "
        "JOIN edges e ON e.source = j.value ->> 0 AND e.target = j.value ->> 1",
        (orjson.dumps(pairs),),
    )
    return {(int(r[0]), int(r[1])): str(r[2]) for r in rows}
