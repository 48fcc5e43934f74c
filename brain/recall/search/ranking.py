"""The ranking stage of hybrid and full_text grep: a small learned model reorders candidates.

The candidates are the union of the full-text and semantic rankings (``POOL`` each)
and, for hybrid, their neighbour turns, as the weighted fusion builds them, and the
second hop: the turns sharing the rarest entities with the ``HOP_FROM`` best of them
(``brain.lcm.entities.overlap.second_hop``). Each gets a row of cheap features
(``FEATURES``) computed over the whole pool at once with numpy or one SQL statement:
its bm25 and cosine scores and ranks, today's fused score, its neighbours' scores, the
best scores of its day (the turns of one conversation written on the same date,
a sitting), its length, whether its speaker is named in the query, whether it was
written inside a time the query names (``brain.recall.search.when``), how many of
the query's rare entities it mentions, whether the second hop found it, and whether
it (or the turn before it) asks a question. A linear model over the standardised
columns, trained listwise, orders them; its weights ship in ``ranker.json`` beside
this module, written by ``scripts/train_ranker.py`` from the LoCoMo dev split (see
the file's ``provenance``). ``GrepOptions.rank`` False skips the stage (today's fused order).

Entities are indexed off the request path (``entity_backlog``): a message not
indexed yet counts as naming no entity (overlap 0, no second hop) until the
daemon's background worker reaches it, within seconds of its ingest.

Adding a feature is one line in ``FEATURES`` and a retrain: the weights file lists
the column names it was trained on and is refused (``RankerMismatch``) when they
differ, as when its ``version`` is not ``RANKER_VERSION``.
Tested in tests/brain/recall/search/test_ranking.py.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Final

import numpy as np
import orjson
from numpy.typing import NDArray

from brain.lcm.entities.overlap import HOP_COMMON, entity_overlap, second_hop
from brain.lcm.ids import public_message_id
from brain.recall.search.fulltext import full_text_search
from brain.recall.search.model import LEXICAL_WEIGHT, WORD, GrepOptions, Hit, Nearest
from brain.recall.search.semantic import (
    MessageInfo,
    min_max,
    semantic_search,
    spread_to_neighbours,
)
from brain.recall.search.snippets import snippet_lead
from brain.recall.search.terms import fts_query
from brain.recall.search.when import resolve
from brain.store.connection import Store

RANKER_VERSION: Final = 1
"""The weights file format (and feature semantics) this code reads."""
WEIGHTS_PATH: Final = Path(__file__).with_name("ranker.json")
POOL: Final = 100
"""Candidates taken from each ranking: the stage reorders, it cannot find more."""
HOP_FROM: Final = 10
"""Hybrid's second hop starts from this many best message hits of the fused order..."""
HOP: Final = 50
"""...and adds at most this many turns sharing their rarest entities."""

Floats = NDArray[np.float64]


class RankerMismatch(ValueError):
    """The weights file does not fit this code (another version or other features)."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """The pool the stage orders, one entry per hit, as parallel numpy arrays."""

    options: GrepOptions
    hits: list[Hit]
    """In today's fused order; their ``score`` is the ranking's they came from."""
    row_ids: NDArray[np.int64]
    """Message row id, -1 for summaries."""
    lexical: Floats
    """bm25 min-max normalised over the full-text ranking; 0 when not in it."""
    lexical_rank: Floats
    """1 / (1 + rank) in the full-text ranking; 0 when not in it."""
    cosine: Floats
    """Cosine to the query; the pool's lowest when not among the nearest."""
    cosine_rank: Floats
    fused: Floats
    """Today's weighted fusion score, with the neighbour share."""
    hop: Floats
    """1 / (1 + rank) among the turns the top hits' rare entities lead to
    (``second_hop``); 0 for the others."""
    neighbour: NDArray[np.int64]
    """(n, 2): the index of the turn before and after in the pool, -1 if absent."""
    day: NDArray[np.int64]
    """Group id of (session, date written)."""
    length: Floats
    """Characters of the content (0 for summaries)."""
    asks: Floats
    """1 when the content holds a question mark: a question is rarely the evidence."""
    names: list[str | None]
    created: list[str]


Feature = Callable[[Store, Candidates], Floats]


def _neighbour_max(values: Floats, c: Candidates) -> Floats:
    padded = np.append(values, 0.0)  # index -1 reads the pad
    return np.asarray(np.maximum(padded[c.neighbour[:, 0]], padded[c.neighbour[:, 1]]))


def _day_max(values: Floats, c: Candidates) -> Floats:
    best = np.full(int(c.day.max()) + 1 if len(c.day) else 0, -np.inf)
    np.maximum.at(best, c.day, values)
    return np.asarray(best[c.day])


def _day_rank(_: Store, c: Candidates) -> Floats:
    """1 / (1 + the rank of the turn's day among the pool's days by their best fused score)."""
    best = _day_max(c.fused, c)
    per_day = np.full(int(c.day.max()) + 1 if len(c.day) else 0, -np.inf)
    np.maximum.at(per_day, c.day, best)
    rank = np.empty(len(per_day))
    rank[np.argsort(-per_day, kind="stable")] = np.arange(len(per_day))
    return np.asarray(1.0 / (1.0 + rank[c.day]))


def _speaker_named(_: Store, c: Candidates) -> Floats:
    words = {w.lower() for w in WORD.findall(c.options.query)}
    return np.array(
        [1.0 if n and any(p.lower() in words for p in n.split()) else 0.0 for n in c.names]
    )


def _intervals(store: Store, c: Candidates) -> list[tuple[str, str]]:
    anchor = _anchor(store, c)
    if anchor is None:
        return []
    return [(a.isoformat(), b.isoformat()) for a, b in resolve(c.options.query, anchor)]


def _date_match(store: Store, c: Candidates) -> Floats:
    spans = _intervals(store, c)
    days = np.array([t[:10] for t in c.created], dtype=object)
    hit = np.zeros(len(days), dtype=bool)
    for start, end in spans:
        hit |= (days >= start) & (days < end)
    return hit.astype(np.float64)


def _dated_query(store: Store, c: Candidates) -> Floats:
    return np.full(len(c.hits), 1.0 if _intervals(store, c) else 0.0)


def _entity_overlap(store: Store, c: Candidates) -> Floats:
    """The query's rare entities the turn mentions. A common one (the user's own name,
    in every other turn) says nothing about a turn: counting every entity got a
    negative weight on dev, where the names are mostly the two speakers'."""
    return entity_overlap(store, c.options.query, c.row_ids, common=HOP_COMMON)


FEATURES: Final[tuple[tuple[str, Feature], ...]] = (
    ("lexical", lambda _, c: c.lexical),
    ("lexical_rank", lambda _, c: c.lexical_rank),
    ("lexical_absent", lambda _, c: (c.lexical_rank == 0).astype(np.float64)),
    ("cosine", lambda _, c: c.cosine),
    ("cosine_rank", lambda _, c: c.cosine_rank),
    ("fused", lambda _, c: c.fused),
    ("neighbour_lexical", lambda _, c: _neighbour_max(c.lexical, c)),
    ("neighbour_cosine", lambda _, c: _neighbour_max(c.cosine, c)),
    ("day_lexical", lambda _, c: _day_max(c.lexical, c)),
    ("day_cosine", lambda _, c: _day_max(c.cosine, c)),
    ("neighbour_fused", lambda _, c: _neighbour_max(c.fused, c)),
    ("day_fused", lambda _, c: _day_max(c.fused, c)),
    ("day_rank", _day_rank),
    ("log_length", lambda _, c: np.log1p(c.length)),
    ("speaker_named", _speaker_named),
    ("date_match", _date_match),
    ("dated_query", _dated_query),
    ("summary", lambda _, c: (c.row_ids < 0).astype(np.float64)),
    ("entity_overlap", _entity_overlap),
    ("second_hop", lambda _, c: c.hop),
    ("second_hop_only", lambda _, c: ((c.hop > 0) & (c.fused == 0)).astype(np.float64)),
    ("asks", lambda _, c: c.asks),
    ("previous_asks", lambda _, c: np.append(c.asks, 0.0)[c.neighbour[:, 0]]),
)
"""(name, function of the pool): one column each, in the order the weights use."""


def feature_names() -> list[str]:
    """The matrix's column names, as the weights file lists them."""
    return [name for name, _ in FEATURES]


@dataclass(frozen=True, slots=True)
class Model:
    """A linear model over standardised features (trained listwise: its scores compare
    the candidates of one query, they are not probabilities)."""

    mean: Floats
    scale: Floats
    weights: Floats
    bias: float

    def score(self, x: Floats) -> Floats:
        """Each row's score: higher is likelier evidence, among one query's candidates."""
        return np.asarray(((x - self.mean) / self.scale) @ self.weights + self.bias)


def ranked_search(store: Store, options: GrepOptions, nearest: Nearest | None) -> list[Hit]:
    """Hybrid (``nearest`` given) or full-text grep, the candidates ordered by the model.

    A message hit's ``score`` is the model's score; a summary keeps its place in the
    fused order and its fused score. The entry point other stages (the
    graph's seeds) call for the best retrieval.
    """
    pool = candidates(store, options, nearest)
    if not pool.hits:
        return []
    model = load_models()["hybrid" if nearest is not None else "full_text"]
    scores = model.score(features(store, pool))
    # The model learned from message turns only: it reorders the message hits among
    # the places messages hold in the fused order; summaries keep theirs (and their
    # fused score).
    slots = [i for i, h in enumerate(pool.hits) if h.kind == "message"]
    by_score = sorted(slots, key=lambda i: -scores[i])  # stable: fused order among equals
    order = list(range(len(pool.hits)))
    for slot, i in zip(slots, by_score, strict=True):
        order[slot] = i
    return [
        replace(
            pool.hits[i],
            score=float(scores[i] if pool.hits[i].kind == "message" else pool.fused[i]),
        )
        for i in order[: options.limit]
    ]


def features(store: Store, pool: Candidates) -> Floats:
    """The (candidates, features) matrix, columns in ``FEATURES`` order."""
    return np.column_stack([np.asarray(fn(store, pool), dtype=np.float64) for _, fn in FEATURES])


def candidates(store: Store, options: GrepOptions, nearest: Nearest | None) -> Candidates:
    """The full-text and semantic rankings' union, with neighbours, in today's fused order."""
    wide = replace(options, limit=max(options.limit, POOL))
    lexical = full_text_search(store, wide) if fts_query(options.query) is not None else []
    semantic = semantic_search(store, wide, nearest) if nearest is not None else []
    fused: dict[tuple[str, str], float] = {}
    by_key: dict[tuple[str, str], Hit] = {}
    lex: dict[tuple[str, str], tuple[float, int]] = {}
    cos: dict[tuple[str, str], tuple[float, int]] = {}
    share = LEXICAL_WEIGHT if semantic else 1.0
    for ranking, part, seen in ((lexical, share, lex), (semantic, 1.0 - share, cos)):
        normalised = min_max([h.score for h in ranking])
        for rank, (hit, norm) in enumerate(zip(ranking, normalised, strict=True)):
            key = (hit.kind, hit.id)
            seen[key] = (norm if seen is lex else hit.score, rank)
            fused[key] = fused.get(key, 0.0) + part * norm
            by_key.setdefault(key, hit)  # lexical first: its snippet marks the match
    # (row id, name, characters, asks) of the message hits, read once each: the
    # neighbours' by their spread, the other hits' in one statement, the second
    # hop's with its rows.
    info: dict[tuple[str, int | None], MessageInfo] = {}
    if nearest is not None:
        # Hybrid finds the turns next to a match, as weighted fusion does; full_text
        # keeps its contract: every hit contains the query's words.
        spread_to_neighbours(store, options, fused, by_key, info)
    keys = sorted(fused, key=lambda k: fused[k], reverse=True)
    info |= _message_info(store, [h for k in keys if ((h := by_key[k]).session, h.seq) not in info])
    hop: dict[tuple[str, str], float] = {}
    if nearest is not None and options.scope != "summaries":
        # Hybrid only: full_text's hits all contain the query's words.
        for found, hit in _second_hop(store, options, [by_key[k] for k in keys], info):
            hop[found] = 1.0 / (1 + len(hop))
            if found not in fused:
                fused[found] = 0.0
                by_key[found] = hit
                keys.append(found)
    hits = [by_key[k] for k in keys]  # scores are set on the few returned
    n = len(hits)
    floor = min((s for s, _ in cos.values()), default=0.0)
    position = {(h.session, h.seq): i for i, h in enumerate(hits) if h.kind == "message"}
    neighbour = np.full((n, 2), -1, dtype=np.int64)
    for i, h in enumerate(hits):
        if h.kind == "message" and h.seq is not None:
            neighbour[i, 0] = position.get((h.session, h.seq - 1), -1)
            neighbour[i, 1] = position.get((h.session, h.seq + 1), -1)
    groups: dict[tuple[str, str], int] = {}
    day = np.array(
        [groups.setdefault((h.session, h.created_at[:10]), len(groups)) for h in hits],
        dtype=np.int64,
    )
    rows = [info.get((h.session, h.seq)) if h.kind == "message" else None for h in hits]
    return Candidates(
        options=options,
        hits=hits,
        row_ids=np.array([r[0] if r else -1 for r in rows], dtype=np.int64),
        lexical=np.array([lex[k][0] if k in lex else 0.0 for k in keys]),
        lexical_rank=np.array([1.0 / (1 + lex[k][1]) if k in lex else 0.0 for k in keys]),
        cosine=np.array([cos[k][0] if k in cos else floor for k in keys]),
        cosine_rank=np.array([1.0 / (1 + cos[k][1]) if k in cos else 0.0 for k in keys]),
        fused=np.array([fused[k] for k in keys]),
        hop=np.array([hop.get(k, 0.0) for k in keys]),
        neighbour=neighbour,
        day=day,
        length=np.array([float(r[2]) if r else 0.0 for r in rows]),
        asks=np.array([float(r[3]) if r else 0.0 for r in rows]),
        names=[r[1] if r else None for r in rows],
        created=[h.created_at for h in hits],
    )


def _second_hop(
    store: Store,
    options: GrepOptions,
    ranked: list[Hit],
    info: dict[tuple[str, int | None], MessageInfo],
) -> list[tuple[tuple[str, str], Hit]]:
    """The turns sharing rare entities with the ``HOP_FROM`` best message hits, best first,
    as (key, hit) within the options' conversations and times. ``info`` holds the
    ranked hits' ``MessageInfo``; the turns found add theirs."""
    top = [h for h in ranked if h.kind == "message"][:HOP_FROM]
    sources = [info[(h.session, h.seq)][0] for h in top if (h.session, h.seq) in info]
    found = second_hop(store, sources, conversations=options.conversations or (), limit=HOP)
    if not found:
        return []
    rows = store.execute(
        "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content, "
        "m.name, length(m.content), instr(m.content, '?') > 0 "
        "FROM json_each(?) j CROSS JOIN messages m ON m.id = j.value "
        "CROSS JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.created_at >= ? AND m.created_at < ? ORDER BY j.key",
        (orjson.dumps(found).decode(), options.since or "", options.before or "\uffff"),
    )
    out = []
    for row_id, client_id, seq, role, created_at, session, content, name, chars, asks in rows:
        info[(session, seq)] = (int(row_id), name, int(chars), int(asks))
        hit = Hit(
            "message",
            public_message_id(row_id, client_id),
            session,
            0.0,
            snippet_lead(content),
            created_at,
            seq,
            role,
            name,
        )
        out.append((("message", hit.id), hit))
    return out


def _message_info(store: Store, hits: list[Hit]) -> dict[tuple[str, int | None], MessageInfo]:
    """(row id, name, characters, holds a "?") of the message hits, in one statement."""
    wanted = [[h.session, h.seq] for h in hits if h.kind == "message" and h.seq is not None]
    if not wanted:
        return {}
    return {
        (str(r[0]), int(r[1])): (int(r[2]), r[3], int(r[4]), int(r[5]))
        for r in store.execute(
            "SELECT c.session_id, m.seq, m.id, m.name, length(m.content), "
            "instr(m.content, '?') > 0 FROM json_each(?) j "
            "CROSS JOIN conversations c ON c.session_id = j.value ->> 0 "
            "CROSS JOIN messages m ON m.conversation_id = c.id AND m.seq = j.value ->> 1",
            (orjson.dumps(wanted).decode(),),
        )
    }


def _anchor(store: Store, c: Candidates) -> date | None:
    """The conversation's "now": its latest message's date (of the scope, or of the pool)."""
    latest: str | None = None
    convs = c.options.conversations
    if convs is not None:
        row = store.one(
            "SELECT max((SELECT created_at FROM messages WHERE conversation_id = j.value "
            "ORDER BY seq DESC LIMIT 1)) FROM json_each(?) j",
            (orjson.dumps(list(convs)).decode(),),
        )
        latest = None if row is None else row[0]
    if latest is None:
        latest = max(c.created, default=None)
    try:
        return date.fromisoformat(latest[:10]) if latest else None
    except ValueError:
        return None


@functools.cache
def load_models(path: Path = WEIGHTS_PATH) -> dict[str, Model]:
    """The shipped models by mode (``hybrid``, ``full_text``), checked against this code."""
    data = json.loads(path.read_text())
    if data.get("version") != RANKER_VERSION:
        raise RankerMismatch(
            f"{path}: weights version {data.get('version')!r}, this code reads {RANKER_VERSION}"
        )
    names = feature_names()
    if data.get("features") != names:
        raise RankerMismatch(f"{path}: trained on features {data.get('features')}, not {names}")
    models = {}
    for mode, m in data["models"].items():
        models[mode] = Model(
            mean=np.array(m["mean"], dtype=np.float64),
            scale=np.array(m["scale"], dtype=np.float64),
            weights=np.array(m["weights"], dtype=np.float64),
            bias=float(m["bias"]),
        )
        if not all(math.isfinite(v) for v in models[mode].weights):
            raise RankerMismatch(f"{path}: {mode} weights are not finite")
    return models
