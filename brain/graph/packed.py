"""The mirror's adjacency as packed arrays: one row's dict is made only when it is read.

A loaded graph used to become a dict of dicts per direction: at 100k nodes and
1M edges that took ~1.4 s of Python before a first query could answer, and ~2M
small objects kept for the life of the process. ``PackedRows`` holds the same
rows as four numpy arrays (sorted keys, their row starts, the other ends and the
weights, i.e. CSR), read from SQLite in one pass; the ``{other: weight}`` dict
of a row is built on first lookup, at the cost of its degree, and kept. States
made from it (``brain.graph.states``) layer their changed rows over it, and
fold them into new packed arrays (``merged``) once they pass an eighth of it,
so the dicts never have to exist for the whole graph.

Tested in tests/brain/graph/test_mirror.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from brain.store.connection import Store

__all__ = ["PackedRows", "load_edges"]

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class PackedRows(Mapping[int, dict[int, float]]):
    """Adjacency rows (key -> {other end: weight}) over CSR arrays; never changed.

    ``ids`` (the keys) are sorted and unique, row ``i`` is ``others[starts[i]:starts[i + 1]]``
    with ``weights`` alike. A row read is built once and shared: callers must not
    change it (a state copies a row before writing it).
    """

    __slots__ = ("_cache", "_index", "_starts", "ids", "others", "pair", "starts", "weights")

    def __init__(
        self,
        keys: Ints,
        starts: Ints,
        others: Ints,
        weights: Floats,
        *,
        like: PackedRows | None = None,
    ) -> None:
        """``like``: rows with the same keys and starts, whose lookup tables are shared."""
        self.ids, self.starts, self.others, self.weights = keys, starts, others, weights
        self._index: dict[int, int]
        self._starts: list[int]
        if like is not None:
            self._index, self._starts = like._index, like._starts
        else:
            self._index = dict(zip(keys.tolist(), range(len(keys)), strict=True))
            self._starts = starts.tolist()
        self._cache: dict[int, dict[int, float]] = {}
        self.pair: tuple[PackedRows, Ints] | None = None
        """After ``transposed``: the transposed rows and, for each of their edges, its
        index here (so new weights or removals carry over without sorting again)."""

    @classmethod
    def from_edges(
        cls, keys: Ints, others: Ints, weights: Floats, *, others_sorted: bool = False
    ) -> PackedRows:
        """Rows of the edges (``keys[i]`` -> ``others[i]``: ``weights[i]``), in any order.

        ``others_sorted``: each key's edges are in ``others`` order already, so a stable
        sort by key alone orders them (a transpose, or sorted runs being merged: ~10x
        cheaper than sorting pairs)
        """
        order = np.argsort(keys, kind="stable") if others_sorted else np.lexsort((others, keys))
        keys, others, weights = keys[order], others[order], weights[order]
        if len(keys):
            first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        else:
            first = np.zeros(0, dtype=np.int64)
        starts = np.concatenate((first, [len(keys)])).astype(np.int64)
        return cls(keys[first], starts, others, weights)

    def edges(self) -> tuple[Ints, Ints, Floats]:
        """Every edge as (keys, others, weights), one entry per edge."""
        counts = np.diff(self.starts)
        return np.repeat(self.ids, counts), self.others, self.weights

    def transposed(self) -> PackedRows:
        """The same edges keyed by their other end (incoming rows from outgoing ones)."""
        keys, others, weights = self.edges()
        order = np.argsort(others, kind="stable")  # each key's edges stay by other end
        flipped = _packed(others[order], keys[order], weights[order])
        self.pair = (flipped, order)
        return flipped

    def merged(self, top: Mapping[int, Any], gone: object) -> PackedRows:
        """These rows with ``top``'s replacing theirs (``gone``: the row was removed)."""
        keys, others, weights = self.edges()
        changed = np.fromiter(top.keys(), dtype=np.int64, count=len(top))
        marked = np.zeros(int(max(keys.max(initial=0), changed.max(initial=0))) + 1, dtype=bool)
        marked[changed] = True
        keep = ~marked[keys]  # O(edges), where ``isin`` sorts
        rows = [(k, row) for k, row in top.items() if row is not gone and row]
        count = sum(len(row) for _, row in rows)
        new_keys = np.fromiter(
            itertools.chain.from_iterable(itertools.repeat(k, len(row)) for k, row in rows),
            dtype=np.int64,
            count=count,
        )
        new_others = np.fromiter(
            itertools.chain.from_iterable(row.keys() for _, row in rows),
            dtype=np.int64,
            count=count,
        )
        new_weights = np.fromiter(
            itertools.chain.from_iterable(row.values() for _, row in rows),
            dtype=np.float64,
            count=count,
        )
        order = np.lexsort((new_others, new_keys))  # the changed rows only
        # Two runs each sorted by (key, other), no key in both: a stable sort by key
        # merges them. A fold costs O(edges), paid once per eighth of the rows changed
        # (a full lexsort of a million edges each time slowed a maintain run's steps).
        return PackedRows.from_edges(
            np.concatenate((keys[keep], new_keys[order])),
            np.concatenate((others[keep], new_others[order])),
            np.concatenate((weights[keep], new_weights[order])),
            others_sorted=True,
        )

    def with_changes(
        self,
        sources: Ints,
        targets: Ints,
        weights: Floats,
        dropped: npt.NDArray[np.bool_],
        incoming: object = None,
    ) -> tuple[PackedRows, PackedRows]:
        """These (outgoing) rows with edge writes applied in order, and their transpose:
        ``(sources[i], targets[i])`` set to ``weights[i]``, or removed where ``dropped[i]``
        (the last write of an edge wins).

        The whole adjacency at once, in numpy: a maintain run's step sets or drops tens
        of thousands of edges spread over most rows, where a copy of every touched row's
        dict cost ~1 us an edge per direction. New weights and removals reuse the
        transpose made before (``pair``) when it is ``incoming`` (the state's incoming
        rows): no sort; only new edges sort again.
        """
        pair = self.pair if self.pair is not None and self.pair[0] is incoming else None
        keys, others, current = self.edges()
        existing = (keys << 32) | others  # sorted: rows are by key, then other end
        wanted = (sources << 32) | targets
        pick = np.zeros(0, dtype=np.int64)
        if len(wanted):
            order = np.argsort(wanted, kind="stable")
            wanted = wanted[order]
            last = np.concatenate((wanted[1:] != wanted[:-1], [True]))
            pick, wanted = order[last], wanted[last]
        at = np.searchsorted(existing, wanted)
        found = at < len(existing)
        found[found] = existing[at[found]] == wanted[found]
        drop = dropped[pick]
        new = weights[pick]
        weights = current.copy()
        weights[at[found & ~drop]] = new[found & ~drop]
        added = ~found & ~drop
        keep = np.ones(len(existing), dtype=bool)
        keep[at[found & drop]] = False
        if added.any() or pair is None:
            merged = np.concatenate((existing[keep], wanted[added]))
            merged_weights = np.concatenate((weights[keep], new[added]))
            by_key = np.argsort(merged, kind="stable")
            out = _packed(merged[by_key] >> 32, merged[by_key] & 0xFFFFFFFF, merged_weights[by_key])
            return out, out.transposed()
        flipped, perm = pair
        if keep.all():  # weights only: every array but the weights is shared
            out = PackedRows(self.ids, self.starts, self.others, weights, like=self)
            inc = PackedRows(
                flipped.ids, flipped.starts, flipped.others, weights[perm], like=flipped
            )
            out.pair = (inc, perm)
            return out, inc
        out = _packed(keys[keep], others[keep], weights[keep])
        kept = keep[perm]  # the transpose's edges that stay, still in its order
        flipped_keys, flipped_others, _ = flipped.edges()
        inc = _packed(flipped_keys[kept], flipped_others[kept], weights[perm][kept])
        out.pair = (inc, (np.cumsum(keep) - 1)[perm[kept]])
        return out, inc

    def _row(self, key: int) -> dict[int, float] | None:
        row = self._cache.get(key)
        if row is None:
            i = self._index.get(key)
            if i is None:
                return None
            a, b = self._starts[i], self._starts[i + 1]
            row = dict(zip(self.others[a:b].tolist(), self.weights[a:b].tolist(), strict=True))
            self._cache[key] = row  # two threads may build it at once: the same row
        return row

    def __getitem__(self, key: int) -> dict[int, float]:
        row = self._row(key)
        if row is None:
            raise KeyError(key)
        return row

    def get(self, key: int, default: Any = None) -> Any:
        """The row of ``key`` (built on first read), else ``default``."""
        row = self._row(key)
        return default if row is None else row

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[int]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def edge_count(self) -> int:
        """Edges in all rows."""
        return len(self.others)


def _packed(sources: Ints, targets: Ints, weights: Floats) -> PackedRows:
    """Rows of edges already sorted by (source, target)."""
    if len(sources):
        first = np.flatnonzero(np.concatenate(([True], sources[1:] != sources[:-1])))
    else:
        first = np.zeros(0, dtype=np.int64)
    starts = np.concatenate((first, [len(sources)])).astype(np.int64)
    return PackedRows(sources[first], starts, targets, weights)


def load_edges(store: Store) -> PackedRows:
    """Every edge of ``store`` as outgoing rows, read in one pass into arrays.

    One ``fromiter`` over the rows' values (ids are exact in float64 up to 2**53):
    no tuple, dict or float object is kept per edge.
    """
    flat = np.fromiter(
        itertools.chain.from_iterable(
            store.execute("SELECT source, target, weight FROM edges ORDER BY source, target")
        ),
        dtype=np.float64,
    )
    return _packed(
        flat[0::3].astype(np.int64), flat[1::3].astype(np.int64), np.ascontiguousarray(flat[2::3])
    )
