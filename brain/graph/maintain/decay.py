"""The ``decay`` task: edges weaken with the time since they last changed.

Tested in tests/brain/graph/maintain/test_decay.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from brain.clock import iso, parse
from brain.graph.maintain.options import MaintainOptions
from brain.graph.maintain.snapshot import Edge, Snapshot
from brain.graph.maintain.writer import Effect, Write, Writer

__all__ = ["decay"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)

# The time since an edge changed, in microseconds, as SQLite reads its stamp (stored with
# milliseconds: ``unixepoch(..., 'subsec')`` rounded back to whole milliseconds is exact),
# so ``?1`` (now, in microseconds) minus it is the integer Python's ``now - parse(stamp)``
# holds, and divided by 10**6 the same float as its ``total_seconds()``.
_ELAPSED_US: Final = "(?1 - round(unixepoch(updated_at, 'subsec') * 1000) * 1000)"
_IN = "(SELECT value FROM json_each(?{n}))"
_DECAYED: Final = (
    f"weight * pow(0.5, {_ELAPSED_US} / 1000000.0 / (?2 * CASE WHEN source IN "
    f"{_IN.format(n=3)} OR target IN {_IN.format(n=3)} THEN 2 ELSE 1 END))"
)
_SWEEP: Final = (
    f"UPDATE edges SET weight = {_DECAYED}, updated_at = ?4 "  # noqa: S608 (constants)
    "WHERE source BETWEEN ?5 AND ?6 "
    f"AND NOT (source IN {_IN.format(n=7)} OR target IN {_IN.format(n=7)}) "
    f"AND {_ELAPSED_US} > 0 AND abs(weight - {_DECAYED}) >= ?8 "
    "RETURNING source, target, weight, kind"
)
"""Decay of one span of sources: the formula of ``_planned``, computed by SQLite."""
_PLAIN: Final = (
    f"UPDATE edges SET weight = weight * pow(0.5, {_ELAPSED_US} / 1000000.0 / ?2), "  # noqa: S608
    "updated_at = ?4 WHERE source BETWEEN ?5 AND ?6 "
    f"AND {_ELAPSED_US} > 0 AND abs(weight - weight * pow(0.5, {_ELAPSED_US} / 1000000.0 / ?2)) "
    ">= ?8 RETURNING source, target, weight, kind"
)
"""``_SWEEP`` for a graph without canonical or constitutional nodes (the same numbers:
``?2 * 1`` is ``?2``), without the two membership tests per edge (a seventh of its CPU)."""


def decay(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Weaken edges by ``0.5 ** (elapsed / half_life)`` since each last changed.

    The edge's ``updated_at`` moves to ``now`` with it, so runs compose: two
    decays over a week each equal one over two weeks. Edges touching a
    constitutional node keep their weight; touching a canonical one, they use
    twice the half-life.

    A real run decays a span of sources per statement (``Writer.sweep``), as the
    rows are when it runs (an edge a teach changed meanwhile decays from its new
    stamp, by next to nothing); a dry run plans the same formula over the snapshot.
    """
    if writer.dry_run:
        return _planned(snap, writer, options, now)
    constitutional = snap.with_authority("constitutional")
    canonicals = snap.with_authority("canonical")
    protected = _touching(snap, constitutional)
    stamp = iso(now)
    edges = snap.edges

    def on_rows(rows: list[tuple[Any, ...]]) -> None:
        ops = writer.delta.ops
        for source, target, weight, kind in rows:
            if (source, target) in edges:
                edges[(source, target)] = Edge(weight, kind, stamp)
            ops.append(("edge", source, target, weight))

    shared = (
        (now - _EPOCH) // _MICROSECOND,
        options.half_life_days * 86_400.0,
        orjson.dumps(sorted(canonicals)).decode(),
        stamp,
    )
    no_change = orjson.dumps(sorted(constitutional)).decode()
    changed = writer.sweep(
        _SWEEP if canonicals or constitutional else _PLAIN,
        [
            (*shared, lo, hi, no_change, options.min_decay)
            for lo, hi in snap.source_ranges(options.sweep)
        ],
        on_rows,
    )
    return {"decayed": changed, "skipped": 0, "protected": protected}


def _touching(snap: Snapshot, nodes: set[int]) -> int:
    """Edges of the snapshot with either end in ``nodes`` (at the cost of their degree)."""
    pairs: set[tuple[int, int]] = set()
    for node in nodes:
        pairs.update((node, target) for target in snap.out.get(node, ()))
        pairs.update((source, node) for source in snap.inc.get(node, ()))
    return len(pairs)


def _planned(
    snap: Snapshot, writer: Writer, options: MaintainOptions, now: datetime
) -> dict[str, Any]:
    """Decay planned edge by edge over the snapshot (a dry run's), written row by row."""
    half_life = options.half_life_days * 86_400.0
    stamp = iso(now)
    writes: list[Write] = []
    effects: list[Effect] = []
    protected = 0
    constitutional = snap.with_authority("constitutional")
    canonicals = snap.with_authority("canonical")
    since: dict[str, float] = {}
    for (source, target), edge in list(snap.edges.items()):
        if constitutional and (source in constitutional or target in constitutional):
            protected += 1
            continue
        canonical = source in canonicals or target in canonicals
        elapsed = since.get(edge.updated_at)
        if elapsed is None:  # edges changed together share a stamp: parsed once
            elapsed = since[edge.updated_at] = (now - parse(edge.updated_at)).total_seconds()
        if elapsed <= 0:
            continue
        weight = edge.weight * 0.5 ** (elapsed / (half_life * (2 if canonical else 1)))
        if abs(edge.weight - weight) < options.min_decay:
            continue
        writes.append(
            (
                "UPDATE edges SET weight = ?, updated_at = ? "
                "WHERE source = ? AND target = ? AND updated_at = ?",
                (weight, stamp, source, target, edge.updated_at),
            )
        )
        effects.append(("edge", source, target, weight))
        snap.edges[(source, target)] = Edge(weight, edge.kind, stamp)
    changed = writer.run(writes, effects=effects)
    return {"decayed": changed, "skipped": len(writes) - changed, "protected": protected}
