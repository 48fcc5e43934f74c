"""Where a graph query starts: the seeds, ranked as hybrid grep ranks messages.

A seed source is one function (``Seeder``): it gets the query (its text, its
vector and its full-text match expression) and returns the ``k`` best nodes,
best first, with scores on one scale. ``hybrid_seeds`` (the default) fuses the
nodes' keyword ranking (bm25 over ``nodes_fts`` and, for summary nodes,
``summaries_fts``) with their vector ranking, each scaled by its best score and weighted as
hybrid grep's ``weighted`` fusion weighs them; ``vector_seeds`` is the vector ranking
alone (what the graph seeded from before keywords, and what ``teach`` links a
new node by). A better ranking replaces the function, nothing else: the engine
passes the recall layer's learned node stage (``brain.recall.search.node_ranking``).
Every seed carries its ``match`` (the query's alone) beside its score, and ``select``
picks the ``k`` seeds within the learning bound (``brain.graph.safeguard``).

Learned priors are added after the fusion, in seed units and only where positive
(``positive_prior``): they reorder close candidates, they never lift a node the
query does not match over one it does, and never push one down.

Tested through the engine's ``query`` in ``tests/brain/graph/test_seeding.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from brain.graph.keywords import index_for
from brain.graph.mirror import Graph
from brain.graph.safeguard import bounded_order
from brain.graph.states import GraphState
from brain.store.connection import Store
from brain.store.stems import index_terms
from brain.vectors.index import VectorIndex

LEXICAL_WEIGHT: Final = 0.7
"""The keyword share of a seed's fused score, as hybrid grep's (``brain.recall.search``)."""
SEED_SPAN: Final = 0.5
"""Fused scores (0..1) are scaled to this span: seeds then sit as far apart as
cosine similarities do, so the traversal's temperature treats them alike."""
POOL_MIN: Final = 50
"""Each ranking fetches at least this many candidates (3 x k when more)."""
FREQUENT_MIN: Final = 2_000
FREQUENT_SHARE: Final = 0.05
"""A keyword in more than this share of the nodes (and more than ``FREQUENT_MIN`` of
them) is left out of the keyword search while a rarer one remains: bm25 gives it
little weight, yet scoring every node it matches cost the most (a query of common
words took 47 ms at 50,000 nodes)."""


@dataclass(frozen=True, slots=True)
class SeedQuery:
    """A query as seed sources see it."""

    text: str
    vector: npt.NDArray[np.float32]
    match: str | None
    """Its FTS5 match expression (None: no keyword to match, vectors alone)."""
    k: int


class Seed(NamedTuple):
    """A seed: its node, its score, and the part of the score the query alone gives it."""

    node: int
    score: float
    """What it starts the traversal with: the query's match and what was learned."""
    match: float
    """The query's match alone (no prior, nothing learned): the order learning may only
    promote within (``brain.graph.safeguard``)."""


class Seeder(Protocol):
    """A seed source: the ``query.k`` best nodes for ``query``, best first."""

    def __call__(
        self,
        store: Store,
        graph: Graph | GraphState,
        index: VectorIndex,
        query: SeedQuery,
        allowed: Callable[[int], bool],
        *,
        priors: bool = True,
    ) -> list[Seed]: ...


def positive_prior(prior: Mapping[int, float], node: int) -> float:
    """What a node's learned prior adds to its seed score: only a lift, never a cut.

    A prior goes down when a node is shown and not used (``brain.graph.retrieval``),
    but below zero it is not applied: learning promotes nodes with positive evidence,
    it never demotes a node below what the query alone gives it.
    """
    return max(0.0, prior.get(node, 0.0))


def select(candidates: list[Seed], k: int) -> list[Seed]:
    """The ``k`` seeds to start from, best score first, chosen within the learning bound.

    By score (what was learned included), except that the query's own best by match
    keep their places as ``brain.graph.safeguard.bounded_order`` keeps them: learning
    never pushes a node the query matches well out of the seeds.
    """
    by_score = sorted(candidates, key=lambda s: -s.score)
    by_match = sorted(candidates, key=lambda s: -s.match)
    chosen = set(bounded_order([s.node for s in by_match], [s.node for s in by_score], limit=k))
    return [s for s in by_score if s.node in chosen]


def vector_seeds(
    store: Store,
    graph: Graph | GraphState,
    index: VectorIndex,
    query: SeedQuery,
    allowed: Callable[[int], bool] = lambda _node: True,
    *,
    priors: bool = True,
) -> list[Seed]:
    """The ``k`` nodes nearest the query by cosine, best first (summaries through their node).

    With ``priors`` each node's learned prior is added to its similarity; the search
    over-fetches so priors (and ``allowed``) can reorder and drop close candidates.
    """
    prior = graph.prior if priors else {}
    seeds = [
        Seed(node, score + positive_prior(prior, node), score)
        for node, score in vector_ranking(store, graph, index, query.vector, query.k * 2, allowed)
    ]
    return select(seeds, query.k)


def hybrid_seeds(
    store: Store,
    graph: Graph | GraphState,
    index: VectorIndex,
    query: SeedQuery,
    allowed: Callable[[int], bool] = lambda _node: True,
    *,
    priors: bool = True,
) -> list[Seed]:
    """The ``k`` best nodes by keyword and vector rankings fused, best first.

    Without a match expression (a query of stop words or symbols) it is
    ``vector_seeds``. Scores are ``SEED_SPAN x`` the fused score, plus the prior.
    """
    if query.match is None:
        return vector_seeds(store, graph, index, query, allowed, priors=priors)
    pool = max(query.k * 3, POOL_MIN)
    lexical = keyword_ranking(store, graph, query.match, pool, allowed)
    semantic = vector_ranking(store, graph, index, query.vector, pool, allowed)
    fused: dict[int, float] = {}
    for ranking, share in ((lexical, LEXICAL_WEIGHT), (semantic, 1.0 - LEXICAL_WEIGHT)):
        for (node, _), weight in zip(ranking, _scaled([s for _, s in ranking]), strict=True):
            fused[node] = fused.get(node, 0.0) + share * weight
    prior = graph.prior if priors else {}
    seeds = [
        Seed(node, SEED_SPAN * f + positive_prior(prior, node), SEED_SPAN * f)
        for node, f in fused.items()
    ]
    return select(seeds, query.k)


def vector_ranking(
    store: Store,
    graph: Graph | GraphState,
    index: VectorIndex,
    vector: npt.NDArray[np.float32],
    n: int,
    allowed: Callable[[int], bool],
) -> list[tuple[int, float]]:
    """Up to ``n`` nodes by cosine, best first (a summary's vector stands for its node)."""
    out: list[tuple[int, float]] = []
    for kind, row_id, score in index.search(store, vector, n):
        node = row_id if kind == "node" else graph.summary_node(store, row_id)
        if node is not None and node in graph.kind and allowed(node):
            out.append((node, score))
    return out


def keyword_ranking(
    store: Store, graph: Graph | GraphState, match: str, n: int, allowed: Callable[[int], bool]
) -> list[tuple[int, float]]:
    """Up to ``n`` nodes by bm25 (higher is better), best first: nodes' own text and
    summaries' text (through their node)."""
    thinned = _thinned(store, match, len(graph.kind))
    # The same ranking as FTS5's below, without calling bm25() for every matched row.
    ranked = index_for(store).ranking(store, thinned, n)
    found: list[tuple[int, float]] = (
        ranked
        if ranked is not None
        else [
            (int(r[0]), -float(r[1]))
            for r in store.execute(
                "SELECT rowid, bm25(nodes_fts) FROM nodes_fts WHERE nodes_fts MATCH ? "
                "ORDER BY rank LIMIT ?",
                (thinned, n),
            )
        ]
    )
    for r in store.execute(
        "SELECT rowid, bm25(summaries_fts) FROM summaries_fts WHERE summaries_fts MATCH ? "
        "ORDER BY rank LIMIT ?",
        (match, n),
    ):
        node = graph.summary_node(store, int(r[0]))
        if node is not None:
            found.append((node, -float(r[1])))
    found = [(node, s) for node, s in found if node in graph.kind and allowed(node)]
    found.sort(key=lambda f: -f[1])
    return found[:n]


def _thinned(store: Store, match: str, nodes: int) -> str:
    """``match`` without its frequent keywords (``FREQUENT_SHARE``), the rarest kept.

    Only for an OR of quoted words (``fts_query``'s form), and only in a graph large
    enough for a word to be frequent. Document counts come from the index's
    vocabulary (``nodes_fts_vocab``, schema v15), looked up by the stem the index
    holds (``brain.store.stems``): looked up as written, a frequent word whose stem
    differs ("deploys") was not found, kept, and scored against every node it
    matches (100 ms a query at 100,000 nodes).
    """
    limit = max(FREQUENT_MIN, FREQUENT_SHARE * nodes)
    terms = match.split(" OR ")
    if nodes <= limit or len(terms) < 2:
        return match
    words = [t[1:-1] for t in terms]
    if any(
        len(t) < 3 or t[0] != '"' or t[-1] != '"' or '"' in w
        for t, w in zip(terms, words, strict=True)
    ):
        return match
    terms_of = dict(zip(words, index_terms(words), strict=True))
    by_term = {t: _doc_count(store, t, nodes) for t in terms_of.values() if t is not None}
    docs = {w: by_term.get(t, 0) if t is not None else 0 for w, t in terms_of.items()}
    kept = [w for w in words if docs[w] <= limit]
    if not kept:
        kept = [min(words, key=lambda w: docs[w])]
    return " OR ".join(f'"{w}"' for w in kept)


_DOC_COUNTS: Final[dict[tuple[str, str], tuple[int, int]]] = {}
"""(database path, term) -> (nodes holding it, graph size then): a term's share moves
little while the graph grows by a tenth, and counting costs its whole doclist."""
_DOC_COUNTS_MAX: Final = 65_536


def _doc_count(store: Store, term: str, nodes: int) -> int:
    """How many nodes hold ``term``, counted again once the graph changed size by a tenth."""
    key = (str(store.path), term)
    known = _DOC_COUNTS.get(key)
    if known is not None and abs(nodes - known[1]) * 10 <= known[1]:
        return known[0]
    # One term at a time: the vocabulary answers ``term = ?`` from its index, while
    # ``term IN (...)`` walked the whole vocabulary (1.5 ms at 100k nodes).
    count = int(store.scalar("SELECT doc FROM nodes_fts_vocab WHERE term = ?", (term,)) or 0)
    if len(_DOC_COUNTS) >= _DOC_COUNTS_MAX:
        _DOC_COUNTS.clear()
    _DOC_COUNTS[key] = (count, nodes)
    return count


def _scaled(scores: list[float]) -> list[float]:
    """Scores as shares of the best (negative ones 0).

    Not min-max: over a handful of candidates min-max sets the two best a whole
    unit apart however close they are, and no prior could then reorder them.
    """
    high = max(scores, default=0.0)
    if high <= 0:
        return [1.0] * len(scores)
    return [max(0.0, s) / high for s in scores]
