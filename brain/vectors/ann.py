"""An inverted-file (IVF) index for approximate top-k by dot product, in numpy.

Rows are grouped into lists by their nearest centroid (spherical k-means trained on a
sample); the index keeps each list's row positions (8 bytes a row), and the caller's
matrix stays where it is: a search scores the query against the centroids, then
gathers and scores only the rows of the ``nprobe`` best lists.

The index owns no vectors, only centroids and positions, so the caller's matrix is
never held twice (a rebuild copies nothing). ``build`` trains and assigns;
``extended`` assigns rows appended since, with the centroids as they are
(O(new rows x lists)), so retraining is needed only when the row count has grown
enough that the number of lists should change. A caller that stores its rows in
``order`` (the matrix file, ``brain.vectors.matrix.listed``) uses ``in_list_order``:
each list is then a contiguous run, scored in place rather than gathered.

Costs at n rows of dim d with about sqrt(n) lists: training O(sample x lists x d x
iterations) with a sample of ``_PER_LIST`` rows per list; assignment O(n x lists x d);
a search O(lists x d + nprobe x n / lists x d).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["IVF", "default_lists", "default_nprobe", "top_k"]

Matrix = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]

_PER_LIST: Final = 40  # training rows per list (fewer gives visibly worse centroids)
_ITERATIONS: Final = 8  # Lloyd iterations: recall stops improving after ~5 on embeddings
_CHUNK: Final = 2_048
"""Rows assigned per matrix product: its scores (rows x lists float32) are the build's
scratch, 8 MB at 1,000 lists (16,384 rows made 65 MB: the cold load peaked at 1.45x)."""


def default_lists(rows: int) -> int:
    """About sqrt(rows) lists: the probe cost over centroids and over lists balance there."""
    return max(1, min(rows, round(math.sqrt(rows))))


def default_nprobe(lists: int) -> int:
    """Lists to probe for recall@10 >= 0.95 on sentence embeddings.

    Measured with the static embedder on recombined LoCoMo turns, LoCoMo questions as
    queries: 64 of 316 lists gave 0.957 at 100k rows, 64 of 1000 gave 0.950 and 128 of
    1000 0.973 at 1M. An eighth of the lists (at least 64) keeps a margin and costs
    ~5 ms at 1M rows of dim 256.
    """
    return max(1, min(lists, max(64, math.ceil(lists / 8))))


def top_k(scores: Matrix, k: int) -> Ints:
    """Positions of the ``k`` highest scores, best first (ties: lower position first)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    # argpartition needs k < len; with k == len every position is wanted anyway.
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    order = np.lexsort((part, -scores[part]))
    return part[order].astype(np.int64, copy=False)


Vectors = Callable[[Ints], Matrix]
"""The float32 vectors of the rows at some positions (the caller's rows, dequantised)."""
Scores = Callable[[Ints], Matrix]
"""The query's scores against the rows at some positions."""
Runs = Callable[[list[int], list[int]], Matrix]
"""The query's scores against each run of positions ``starts[i] .. ends[i] - 1``, the
runs one after the other."""


@dataclass(frozen=True, slots=True)
class IVF:
    """Centroids, and the caller's row positions grouped by list.

    List ``j`` holds the rows ``order[offsets[j]:offsets[j + 1]]``; ``offsets[-1]`` is
    the row count. The caller's rows are never moved: a search gathers the probed
    lists' rows by position, so building or extending the index copies no matrix.
    """

    centroids: Matrix
    offsets: Ints
    order: Ints
    listed: bool = False
    """The caller's rows are stored in list order (``order`` is ``0 .. rows - 1``): list
    ``j`` is the contiguous run ``offsets[j]:offsets[j + 1]``, which a search scores
    in place instead of gathering its rows (half the CPU at 1M rows)."""

    @property
    def lists(self) -> int:
        """How many lists (centroids)."""
        return len(self.centroids)

    @property
    def rows(self) -> int:
        """How many rows the lists cover (rows ``0 .. rows - 1`` of the caller's)."""
        return int(self.offsets[-1])

    @classmethod
    def build(cls, n: int, vectors: Vectors, lists: int | None = None, seed: int = 0) -> IVF:
        """Train on a sample of the caller's first ``n`` rows and assign every one.

        ``vectors`` gives rows by position (called with at most ``_CHUNK`` positions at
        a time, so the scratch stays small). Deterministic for a given seed.
        """
        if n == 0:
            raise ValueError("cannot build an index over no rows")
        lists = default_lists(n) if lists is None else max(1, min(lists, n))
        rng = np.random.default_rng(seed)
        sample_size = min(n, lists * _PER_LIST)
        sample = np.sort(rng.choice(n, sample_size, replace=False)).astype(np.int64)
        # The sample is read through ``vectors`` a chunk at a time on every pass, never
        # held as float32 (40 rows a list: 41 MB at 1M rows, 0.15x the int8 matrix).
        centroids = _train(lambda p: vectors(sample[p]), sample_size, lists, rng)
        return cls._layout(centroids, _assign(0, n, vectors, centroids))

    def extended(self, n: int, vectors: Vectors) -> IVF:
        """This index over the caller's first ``n`` rows: rows from ``self.rows`` on are
        assigned to the lists as they are (centroids unchanged)."""
        labels = np.empty(self.rows, dtype=np.int64)
        labels[self.order] = np.repeat(np.arange(self.lists, dtype=np.int64), np.diff(self.offsets))
        new = _assign(self.rows, n, vectors, self.centroids)
        return IVF._layout(self.centroids, np.concatenate([labels, new]))

    def in_list_order(self) -> IVF:
        """This index once the caller has stored its rows in ``order`` (list by list):
        the same lists, each a contiguous run of positions."""
        return IVF(self.centroids, self.offsets, np.arange(self.rows, dtype=np.int64), True)

    def search(
        self,
        score: Scores,
        query: Matrix,
        k: int,
        nprobe: int,
        runs: Runs | None = None,
    ) -> tuple[Ints, Matrix]:
        """Positions (the caller's) and scores of the approximate top ``k``, best first.

        Exact when ``nprobe`` covers every list. ``runs`` scores contiguous runs of
        positions in place; a ``listed`` index gives it the probed lists, in row order.
        """
        nprobe = max(1, min(nprobe, self.lists))
        probed = top_k(self.centroids @ query, nprobe)
        if self.listed and runs is not None:
            starts, ends = self.offsets[probed], self.offsets[probed + 1]
            kept = np.argsort(starts, kind="stable")  # in row order: ties break by position
            kept = kept[ends[kept] > starts[kept]]
            starts, ends = starts[kept], ends[kept]
            if len(starts) == 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            scores = runs(starts.tolist(), ends.tolist())
            best = top_k(scores, k)
            # Where each best score's run begins in ``scores``, and so its position.
            lengths = ends - starts
            begins = np.cumsum(lengths) - lengths
            run = np.searchsorted(begins, best, side="right") - 1
            return starts[run] + (best - begins[run]), scores[best]
        spans = [
            self.order[s:e]
            for s, e in zip(
                self.offsets[probed].tolist(), self.offsets[probed + 1].tolist(), strict=True
            )
            if e > s
        ]
        if not spans:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        positions = np.concatenate(spans)
        positions.sort()  # gathered in row order: sequential reads of the caller's matrix
        scores = score(positions)
        best = top_k(scores, k)
        return positions[best], scores[best]

    @classmethod
    def _layout(cls, centroids: Matrix, labels: Ints) -> IVF:
        order = np.argsort(labels, kind="stable").astype(np.int64)
        counts = np.bincount(labels, minlength=len(centroids))
        offsets = np.zeros(len(centroids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(centroids, offsets, order)


def _train(sample: Vectors, size: int, lists: int, rng: np.random.Generator) -> Matrix:
    """Spherical k-means over the ``size`` rows ``sample`` gives by position: centroids
    are unit mean directions of their members. Each pass reads the sample in chunks."""
    centroids = sample(rng.choice(size, lists, replace=False).astype(np.int64))
    for _ in range(_ITERATIONS):
        sums = np.zeros_like(centroids)
        transposed = np.ascontiguousarray(centroids.T)
        for at in range(0, size, _CHUNK):
            # Chunk by chunk in row order: np.add.at sums each list's members in the
            # same order as over the whole sample at once.
            chunk = sample(np.arange(at, min(size, at + _CHUNK), dtype=np.int64))
            np.add.at(sums, np.argmax(chunk @ transposed, 1), chunk)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms == 0
        # An empty list (or one whose members cancel out) restarts at a random sample row.
        sums[empty] = sample(rng.choice(size, int(empty.sum())).astype(np.int64))
        norms[empty] = np.linalg.norm(sums[empty], axis=1)
        centroids = sums / np.maximum(norms, 1e-12)[:, None]
    return centroids.astype(np.float32, copy=False)


def _assign(start: int, end: int, vectors: Vectors, centroids: Matrix) -> Ints:
    """The nearest centroid by dot product of rows ``start .. end - 1``, in chunks."""
    labels = np.zeros(end - start, dtype=np.int64)
    transposed = np.ascontiguousarray(centroids.T)
    for at in range(start, end, _CHUNK):
        chunk = vectors(np.arange(at, min(end, at + _CHUNK), dtype=np.int64))
        labels[at - start : at - start + len(chunk)] = np.argmax(chunk @ transposed, 1)
    return labels
