"""The graph's seeds ranked as grep ranks messages: a learned ranking stage over nodes.

A ``Seeder`` (``brain.graph.seeding``) that builds, for a graph query, the kind of
candidate pool grep's ranking stage (``brain.recall.search.ranking``) builds for
messages, and orders it with a small logistic regression of its own:

- the nodes' keyword ranking (bm25 over ``nodes_fts`` and summaries) and vector
  ranking, ``POOL`` each, fused as hybrid grep fuses them;
- each candidate's neighbours along ``sequence`` edges (the chunks before and after
  it in its file), added to the pool with a share of their neighbour's fused score,
  as hybrid grep adds the turns next to a match;
- the node's section (its file and parent heading: a session, a day of notes) as
  the analogue of a message's day: the section's best scores and its rank;
- its length, the speaker when its first line reads ``Name: ...`` (a chat log), and
  the date its heading path names (``## Session 3 (8 May, 2023)``) against the
  query's time expressions (``brain.recall.search.when``);
- whether its text (after the ``Name:`` prefix) asks a question, and whether the
  chunk before it does, as grep's ``asks`` / ``previous_asks``: a turn that asks is
  rarely the evidence, the answer after a question often is.

So a conversation kept as a workspace file, a heading per session and one per turn,
is ranked as grep ranks its messages. The weights ship in ``node_ranker.json``
beside this module, written by ``scripts/train_node_ranker.py`` from the LoCoMo dev
split (see its ``provenance``); the file lists its feature names and is refused
(``RankerMismatch``) when they differ from ``FEATURES``. A second model rather than
grep's: node text is not message text (the speaker and headings are in it), and
grep's features read messages (entities, sessions) that nodes do not have.

Seed scores are ``SEED_SPAN + 0.1 x ln(probability)`` (``_seed_scores``): with the
traversal's temperature a seed's activation is its probability over the best seed's.
Each seed also carries its ``match``, the same with the learned features at 0, which
the learning safeguard (``brain.graph.safeguard``) protects. Every step costs O(pool): a handful of
statements over the candidates, never a pass over the graph.

The recall layer hands this seeder to the graph (``run_query(..., seeder=)``): the
graph sits below recall and never imports it. Tested through the engine's ``query``
in tests/brain/recall/search/test_node_ranking.py.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Final

import numpy as np
import orjson
import regex
from numpy.typing import NDArray

from brain.graph.mirror import Graph
from brain.graph.seeding import (
    SEED_SPAN,
    Seed,
    SeedQuery,
    keyword_ranking,
    positive_prior,
    select,
    vector_ranking,
)
from brain.graph.states import GraphState
from brain.recall.search.model import LEXICAL_WEIGHT, NEIGHBOUR_SHARE, WORD
from brain.recall.search.ranking import Model, RankerMismatch
from brain.recall.search.semantic import min_max
from brain.recall.search.when import resolve
from brain.store.connection import Store
from brain.vectors.index import VectorIndex

NODE_RANKER_VERSION: Final = 1
"""The weights file format (and feature semantics) this code reads."""
WEIGHTS_PATH: Final = Path(__file__).with_name("node_ranker.json")
POOL: Final = 100
"""Candidates taken from each ranking (keywords, vectors): the stage reorders them."""

_SPEAKER: Final = regex.compile(r"^\s*(\p{Lu}[\p{L}\p{N}.'\-]*(?: \p{Lu}[\p{L}\p{N}.'\-]*)?):\s")
"""A chat log's line: ``Caroline: ...`` (one or two capitalised words, then a colon)."""
SEED_TEMPERATURE: Final = 0.1
"""The traversal's default temperature: seed scores are its multiples of ln(probability)."""
TAUGHT_SHARE: Final = 0.25
"""A taught node's likelihood, as a share of the best candidate's (times its match)."""
_LN_SHARE: Final = math.log(TAUGHT_SHARE)
_SOURCE_KINDS: Final = frozenset({"chunk", "summary"})
"""What the model ranks: text from the workspace and the conversations, not taught nodes."""
_HEADING_LINE: Final = regex.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_DATE_ANCHOR: Final = date(2000, 1, 1)
"""Relative expressions in a heading ("yesterday") have no anchor; only explicit dates count."""

Floats = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class NodePool:
    """The candidates the stage orders, in fused order, as parallel numpy arrays."""

    query: str
    nodes: list[int]
    lexical: Floats
    """bm25 min-max normalised over the keyword ranking; 0 when not in it."""
    lexical_rank: Floats
    """1 / (1 + rank) in the keyword ranking; 0 when not in it."""
    cosine: Floats
    """Cosine to the query; the pool's lowest when not among the nearest."""
    cosine_rank: Floats
    fused: Floats
    """Hybrid grep's weighted fusion of the two, with the neighbour share."""
    neighbour: NDArray[np.int64]
    """(n, 2): the index of the chunk before and after in the pool, -1 if absent."""
    section: NDArray[np.int64]
    """Group id of (file, parent heading); a node outside any file is its own group."""
    length: Floats
    """Characters of the text, headings left out."""
    speaker: list[str | None]
    asks: Floats
    """1 when the text (after the speaker's prefix) holds a "?"."""
    previous_asks: Floats
    """1 when the chunk before it along ``sequence`` edges asks (in the pool or not)."""
    day: list[str]
    """The date (ISO) the heading path names, or ""."""
    summary: Floats
    """1 for summary nodes."""
    taught: list[tuple[int, float]]
    """The taught nodes the rankings found and their match shares (0..1), outside the pool."""
    prior: Floats
    """The node's learned prior where positive (learning promotes, never demotes)."""
    taught_link: Floats
    """The strongest (taught node's match share x weight) of the positive edges into the
    node from the taught nodes the query matched."""


Feature = Callable[[NodePool], Floats]


def _neighbour_max(values: Floats, p: NodePool) -> Floats:
    padded = np.append(values, 0.0)  # index -1 reads the pad
    return np.asarray(np.maximum(padded[p.neighbour[:, 0]], padded[p.neighbour[:, 1]]))


def _section_max(values: Floats, p: NodePool) -> Floats:
    best = np.full(int(p.section.max()) + 1 if len(p.section) else 0, -np.inf)
    np.maximum.at(best, p.section, values)
    return np.asarray(best[p.section])


def _section_rank(p: NodePool) -> Floats:
    """1 / (1 + the rank of the node's section among the pool's by best fused score)."""
    per = np.full(int(p.section.max()) + 1 if len(p.section) else 0, -np.inf)
    np.maximum.at(per, p.section, p.fused)
    rank = np.empty(len(per))
    rank[np.argsort(-per, kind="stable")] = np.arange(len(per))
    return np.asarray(1.0 / (1.0 + rank[p.section]))


def _speaker_named(p: NodePool) -> Floats:
    words = {w.lower() for w in WORD.findall(p.query)}
    return np.array(
        [1.0 if s and any(part.lower() in words for part in s.split()) else 0.0 for s in p.speaker]
    )


def _intervals(p: NodePool) -> list[tuple[str, str]]:
    """The query's time expressions, read from the pool's latest dated node."""
    latest = max(p.day, default="")
    if not latest:
        return []
    anchor = date.fromisoformat(latest)
    return [(a.isoformat(), b.isoformat()) for a, b in resolve(p.query, anchor)]


def _date_match(p: NodePool) -> Floats:
    days = np.array(p.day, dtype=object)
    hit = np.zeros(len(days), dtype=bool)
    for start, end in _intervals(p):
        hit |= (days >= start) & (days < end)
    return hit.astype(np.float64)


FEATURES: Final[tuple[tuple[str, Feature], ...]] = (
    ("lexical", lambda p: p.lexical),
    ("lexical_rank", lambda p: p.lexical_rank),
    ("lexical_absent", lambda p: (p.lexical_rank == 0).astype(np.float64)),
    ("cosine", lambda p: p.cosine),
    ("cosine_rank", lambda p: p.cosine_rank),
    ("fused", lambda p: p.fused),
    ("neighbour_lexical", lambda p: _neighbour_max(p.lexical, p)),
    ("neighbour_cosine", lambda p: _neighbour_max(p.cosine, p)),
    ("neighbour_fused", lambda p: _neighbour_max(p.fused, p)),
    ("section_lexical", lambda p: _section_max(p.lexical, p)),
    ("section_cosine", lambda p: _section_max(p.cosine, p)),
    ("section_fused", lambda p: _section_max(p.fused, p)),
    ("section_rank", _section_rank),
    ("log_length", lambda p: np.log1p(p.length)),
    ("speaker_named", _speaker_named),
    ("date_match", _date_match),
    ("dated_query", lambda p: np.full(len(p.nodes), 1.0 if _intervals(p) else 0.0)),
    ("summary", lambda p: p.summary),
    ("asks", lambda p: p.asks),
    ("previous_asks", lambda p: p.previous_asks),
    ("prior", lambda p: p.prior),
    ("taught_link", lambda p: p.taught_link),
)
"""(name, function of the pool): one column each, in the order the weights use."""
LEARNED: Final = frozenset({"prior", "taught_link"})
"""The features that read what the graph learned (0 in a graph that learned nothing)."""


def features(pool: NodePool) -> Floats:
    """The (candidates, features) matrix, columns in ``FEATURES`` order."""
    return np.column_stack([np.asarray(fn(pool), dtype=np.float64) for _, fn in FEATURES])


def ranked_node_seeds(
    store: Store,
    graph: Graph | GraphState,
    index: VectorIndex,
    query: SeedQuery,
    allowed: Callable[[int], bool] = lambda _node: True,
    *,
    priors: bool = True,
) -> list[Seed]:
    """The ``query.k`` best nodes by the learned ranking stage, best first.

    Scores come from the model's probability (``_seed_scores``); their ``match`` the
    same with the learned features at 0 (``query_only``), and so the score too without
    ``priors``. Taught nodes score by their keyword and vector match.
    """
    pool = node_pool(store, graph, index, query, allowed)
    seeds: list[Seed] = []
    if pool.nodes:
        model = load_model()
        x = features(pool)
        alone = model.score(query_only(x))
        scores = model.score(x) if priors else alone
        seeds = [
            Seed(node, s, a)
            for node, s, a in zip(
                pool.nodes,
                _seed_scores(scores).tolist(),
                _seed_scores(alone).tolist(),
                strict=True,
            )
        ]
    # A taught node counts as TAUGHT_SHARE x its match share as likely as the best
    # candidate (its activation, with the default temperature): below the best, since
    # what it points at is weighed by the model already (``taught_link``); seeded at
    # full strength as well, its spreading crowded the top (LoCoMo dev query_learned
    # R@10, measured on the earlier probability scale: share 1 80.5, 0.5 80.9, 0.25
    # 81.2). Among taught nodes alone (a graph of teachings), their match orders them.
    best = max((s.score for s in seeds), default=SEED_SPAN - SEED_TEMPERATURE * _LN_SHARE)
    best_match = max((s.match for s in seeds), default=SEED_SPAN - SEED_TEMPERATURE * _LN_SHARE)
    prior = graph.prior if priors else {}
    for node, f in pool.taught:
        lift = SEED_TEMPERATURE * (_LN_SHARE + math.log(max(f, 1e-6)))
        seeds.append(Seed(node, best + lift + positive_prior(prior, node), best_match + lift))
    return select(seeds, query.k)


def query_only(x: Floats) -> Floats:
    """The feature matrix with what was learned taken out (``LEARNED`` columns at 0,
    their value in a graph that learned nothing)."""
    out = x.copy()
    out[:, [i for i, (name, _) in enumerate(FEATURES) if name in LEARNED]] = 0.0
    return out


def node_pool(
    store: Store,
    graph: Graph | GraphState,
    index: VectorIndex,
    query: SeedQuery,
    allowed: Callable[[int], bool] = lambda _node: True,
) -> NodePool:
    """The keyword and vector rankings' union with their sequence neighbours, fused order."""
    lexical = keyword_ranking(store, graph, query.match, POOL, allowed) if query.match else []
    semantic = vector_ranking(store, graph, index, query.vector, POOL, allowed)
    # Taught nodes (the learned part) stay out of the pool: their matches must not
    # change how the rest ranks (their ranks, the best score that scales the others).
    kind_of = graph.kind.get  # bound once: the loops below look up thousands of nodes
    sources = _SOURCE_KINDS
    taught = {n for n, _ in lexical + semantic if kind_of(n) not in sources}
    lexical_all, semantic_all = lexical, semantic
    lexical = [(n, s) for n, s in lexical if n not in taught]
    semantic = [(n, s) for n, s in semantic if n not in taught]
    fused: dict[int, float] = {}
    lex: dict[int, tuple[float, int]] = {}
    cos: dict[int, tuple[float, int]] = {}
    share = LEXICAL_WEIGHT if semantic else 1.0
    for found, part, seen in ((lexical, share, lex), (semantic, 1.0 - share, cos)):
        ranking = _first_of_each(found)
        normalised = min_max([s for _, s in ranking])
        for rank, ((node, score), norm) in enumerate(zip(ranking, normalised, strict=True)):
            seen[node] = (norm if seen is lex else score, rank)
            fused[node] = fused.get(node, 0.0) + part * norm
    before, after = _sequence(store, list(fused))
    base = dict(fused)
    gains: dict[int, float] = {}
    for node, score in base.items():
        for other in (before.get(node), after.get(node)):
            if other is not None and other in graph.kind and allowed(other):
                gains[other] = max(gains.get(other, 0.0), score)
    for node, gain in gains.items():
        fused[node] = fused.get(node, 0.0) + NEIGHBOUR_SHARE * gain
    taught_scores = _taught_scores(taught, lexical_all, semantic_all)
    linked: dict[int, float] = {}
    neighbours = graph.neighbours
    for node, score in taught_scores:
        for target, weight in neighbours(node).items():
            if weight > 0 and kind_of(target) in sources and allowed(target):
                linked[target] = max(linked.get(target, 0.0), score * weight)
    for node in linked:
        fused.setdefault(node, 0.0)  # what a taught node points at is a candidate
    newcomers = [n for n in fused if n not in base]
    if newcomers:
        more_before, more_after = _sequence(store, newcomers)
        before.update(more_before)
        after.update(more_after)
    nodes = sorted(fused, key=lambda n: -fused[n])
    # The chunks before the candidates are read too: ``previous_asks`` needs their
    # text whether or not they made the pool.
    info = _node_info(store, nodes + [before[n] for n in nodes if n in before])
    position = {n: i for i, n in enumerate(nodes)}
    neighbour = np.array(
        [[position.get(before.get(n, -1), -1), position.get(after.get(n, -1), -1)] for n in nodes],
        dtype=np.int64,
    ).reshape(len(nodes), 2)
    groups: dict[Any, int] = {}
    section = np.array(
        [groups.setdefault(_group(info, n), len(groups)) for n in nodes], dtype=np.int64
    )
    floor = min((s for s, _ in cos.values()), default=0.0)
    return NodePool(
        taught=taught_scores,
        prior=np.array([max(0.0, graph.prior.get(n, 0.0)) for n in nodes]),
        taught_link=np.array([linked.get(n, 0.0) for n in nodes]),
        query=query.text,
        nodes=nodes,
        lexical=np.array([lex[n][0] if n in lex else 0.0 for n in nodes]),
        lexical_rank=np.array([1.0 / (1 + lex[n][1]) if n in lex else 0.0 for n in nodes]),
        cosine=np.array([cos[n][0] if n in cos else floor for n in nodes]),
        cosine_rank=np.array([1.0 / (1 + cos[n][1]) if n in cos else 0.0 for n in nodes]),
        fused=np.array([fused[n] for n in nodes]),
        neighbour=neighbour,
        section=section,
        length=np.array([info[n].length if n in info else 0.0 for n in nodes]),
        speaker=[info[n].speaker if n in info else None for n in nodes],
        asks=np.array([1.0 if n in info and info[n].asks else 0.0 for n in nodes]),
        previous_asks=np.array(
            [1.0 if before.get(n) in info and info[before[n]].asks else 0.0 for n in nodes]
        ),
        day=[info[n].day if n in info else "" for n in nodes],
        summary=np.array([1.0 if n in info and info[n].summary else 0.0 for n in nodes]),
    )


def _taught_scores(
    taught: set[int], lexical: list[tuple[int, float]], semantic: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """Taught nodes' match shares: their keyword and vector scores as shares of the
    pool's best (at most 1), fused as hybrid grep fuses them."""
    if not taught:
        return []
    out: dict[int, float] = {}
    share = LEXICAL_WEIGHT if semantic else 1.0
    for ranking, part in ((lexical, share), (semantic, 1.0 - share)):
        high = max((s for _, s in ranking), default=0.0)
        if high <= 0:
            continue
        for node, score in ranking:
            if node in taught:
                share_of = score / high  # clamped to 0..1 as min(1, max(0, x)) does
                share_of = 1.0 if share_of > 1.0 else share_of if share_of > 0.0 else 0.0
                out[node] = out.get(node, 0.0) + part * share_of
    return list(out.items())


def _first_of_each(ranking: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """A ranking with each node once, at its best place (a summary's node can come twice)."""
    seen: set[int] = set()
    out = []
    for node, score in ranking:
        if node not in seen:
            seen.add(node)
            out.append((node, score))
    return out


def _seed_scores(log_odds: Floats) -> Floats:
    """Seed scores from the model's log-odds: ``SEED_SPAN + 0.1 x ln(probability)``.

    With the traversal's temperature (0.1) a seed's activation is then its probability
    over the best seed's: it fires (threshold 0.2) when at least a fifth as likely to be
    what the query wants. (The probability itself, times SEED_SPAN, squeezed a small
    graph's candidates together near 0, and all of them fired. LoCoMo dev R@10 query /
    query_learned: probability 80.4 / 81.5, this 80.4 / 81.8, half of it 80.7 / 81.4.)
    Very unlikely candidates score below 0: without a temperature they never fire.
    """
    log_p = -np.logaddexp(0.0, -log_odds)  # ln(sigmoid), without overflow
    return np.asarray(SEED_SPAN + SEED_TEMPERATURE * log_p)


def _group(info: dict[int, _Info], node: int) -> Any:
    found = info.get(node)
    return found.group if found is not None and found.group is not None else ("node", node)


def _sequence(store: Store, nodes: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    """Each node's chunk before and after it in its file (along ``sequence`` edges)."""
    if not nodes:
        return {}, {}
    before: dict[int, int] = {}
    after: dict[int, int] = {}
    for source, target, earlier in store.execute(
        "SELECT e.source, e.target, t.line_start < s.line_start FROM json_each(?) j "
        "JOIN edges e ON e.source = j.value AND e.kind = 'sequence' "
        "JOIN nodes s ON s.id = e.source JOIN nodes t ON t.id = e.target",
        (orjson.dumps(nodes).decode(),),
    ):
        (before if earlier else after)[int(source)] = int(target)
    return before, after


class _Info:
    """What the features read of a node: its section, length, speaker, question, date, kind."""

    __slots__ = ("asks", "day", "group", "length", "speaker", "summary")

    def __init__(
        self, kind: str, content: str | None, source: str | None, heading: str | None
    ) -> None:
        body = [
            line
            for line in (content or "").splitlines()
            if line.strip() and not _HEADING_LINE.match(line)
        ]
        self.summary = kind == "summary"
        self.length = float(sum(len(line) for line in body))
        first = _SPEAKER.match(body[0]) if body else None
        self.speaker = first.group(1) if first else None
        text = "\n".join(body)
        self.asks = "?" in (text[first.end() :] if first else text)
        parent = (heading or "").rpartition(" > ")[0]
        self.group: Any = (source, parent) if kind == "chunk" and source else None
        self.day = _heading_date(heading or "")


def _node_info(store: Store, nodes: list[int]) -> dict[int, _Info]:
    """The pool's nodes as the features read them, in one statement."""
    rows = store.execute(
        "SELECT n.id, n.kind, n.content, n.source, n.metadata ->> '$.heading' "
        "FROM json_each(?) j JOIN nodes n ON n.id = j.value",
        (orjson.dumps(nodes).decode(),),
    )
    return {int(r[0]): _info(str(r[1]), r[2], r[3], r[4]) for r in rows}


@functools.lru_cache(maxsize=16_384)
def _info(kind: str, content: str | None, source: str | None, heading: str | None) -> _Info:
    """A node's ``_Info``, parsed once per text (candidates recur from query to query)."""
    return _Info(kind, content, source, heading)


@functools.lru_cache(maxsize=65_536)
def _heading_date(heading: str) -> str:
    """The one day an explicit date in the heading path names (ISO), or ""."""
    for start, end in resolve(heading, _DATE_ANCHOR):
        if (end - start).days == 1 and start != _DATE_ANCHOR:
            return start.isoformat()
    return ""


@functools.cache
def load_model(path: Path = WEIGHTS_PATH) -> Model:
    """The shipped node model, checked against this code's version and features."""
    data = json.loads(path.read_text())
    if data.get("version") != NODE_RANKER_VERSION:
        raise RankerMismatch(
            f"{path}: weights version {data.get('version')!r}, this code reads "
            f"{NODE_RANKER_VERSION}"
        )
    names = [name for name, _ in FEATURES]
    if data.get("features") != names:
        raise RankerMismatch(f"{path}: trained on features {data.get('features')}, not {names}")
    m = data["model"]
    model = Model(
        mean=np.array(m["mean"], dtype=np.float64),
        scale=np.array(m["scale"], dtype=np.float64),
        weights=np.array(m["weights"], dtype=np.float64),
        bias=float(m["bias"]),
    )
    if not all(math.isfinite(v) for v in model.weights):
        raise RankerMismatch(f"{path}: weights are not finite")
    return model
