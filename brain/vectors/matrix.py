"""The hot matrix's rows, and the file beside the database that lets a process map them.

An index's rows live in two parts. The *base* is read-only and usually memory-mapped
from a derived file next to the database, ``<db>-vectors.<kinds>``, so a process that
starts finds its vectors without reading them from SQLite: mapping costs nothing until
a search touches the pages, and the kernel shares them between processes. The *tail*
holds rows read since (appended to growable buffers, doubling). A fold writes base and
tail to a new file and maps it; rows keep their order, so positions stay valid, unless
the index keeps an IVF: then the file is written in its list order (``listed``) and
the header's ``layout`` token names that order.

The file is a cache, never a second source of truth. Its header records the rows it
holds: every ``vectors`` row of its kinds with ``id <= max_id`` as of ``gone`` (the
per-kind counters of deleted or rewritten vectors, kept by triggers, see
``brain.store.migrations.vectors_int8``). While those counters have not moved, the
file's rows are all still stored and unchanged, and the rows with a larger id are the
only ones to read. Otherwise the file is rebuilt from the database. The last row it
holds is checked too (same kind, row and text hash at ``max_id``), so a database file
replaced by a copy with a different history is not mistaken for the one it was made
from. Files are written to a temporary name and renamed over the old one: a process
that mapped the old file keeps reading it.

The IVF built over a file's rows is saved beside it (``<file>.ivf``: centroids, list
offsets, row positions unless the file is in list order, and the ``max_id``, counters
and layout of the file it was built for), so a process that maps the file searches
through the index from its first query.

Layout: a 4 KiB JSON header, then columns of ``capacity`` rows each (int8 codes,
float32 scales, int8 kinds, int64 row ids, int64 conversation ids), each aligned to
64 bytes. Building one streams rows from SQLite in chunks: the whole matrix is never
held twice, nor as a list of blobs.

Tested in tests/brain/vectors/test_matrix.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson

from brain.store.connection import Store
from brain.vectors.ann import IVF
from brain.vectors.epochs import KINDS, Kind
from brain.vectors.quantise import decode_rows, scores, scores_runs

__all__ = [
    "Loaded",
    "Rows",
    "Tail",
    "cache_path",
    "damaged_files",
    "folded",
    "gone",
    "last_row",
    "listed",
    "load",
    "load_ivf",
    "read_since",
    "save_ivf",
    "write_file",
]

_HEADER: Final = 4096
_ALIGN: Final = 64
_CHUNK: Final = 16_384  # rows read from SQLite, or scored, at a time
_FORMAT: Final = 1
_GONE_KEY: Final = "vectors_gone:"

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Rows:
    """Quantised rows with what each is: codes, scales, kind codes, row ids, conversations."""

    codes: npt.NDArray[np.int8]
    scales: Floats
    kinds: npt.NDArray[np.int8]
    row_ids: Ints
    convs: Ints

    @classmethod
    def empty(cls, dim: int) -> Rows:
        """No rows."""
        return cls(
            np.zeros((0, dim), np.int8),
            np.zeros(0, np.float32),
            np.zeros(0, np.int8),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )

    def __len__(self) -> int:
        return len(self.scales)

    def head(self, n: int) -> Rows:
        """Views of the first ``n`` rows."""
        return Rows(
            self.codes[:n], self.scales[:n], self.kinds[:n], self.row_ids[:n], self.convs[:n]
        )

    def tail_from(self, start: int) -> Rows:
        """Views of the rows from ``start`` on."""
        return Rows(*(column[start:] for column in _columns(self)))

    def take(self, positions: Ints) -> Rows:
        """Copies of the rows at ``positions``, in that order."""
        return Rows(*(column[positions] for column in _columns(self)))

    def score_runs(self, query: Floats, starts: Sequence[int], ends: Sequence[int]) -> Floats:
        """Dot products of ``query`` with each run of rows ``starts[i] .. ends[i] - 1``,
        read in place, the runs one after the other."""
        return scores_runs(self.codes, self.scales, starts, ends, query)

    def score(self, query: Floats, positions: Ints | None = None) -> Floats:
        """Dot products of ``query`` with the rows at ``positions`` (None: every row).

        Gathers at most ``_CHUNK`` rows at a time, so a search's scratch stays small.
        """
        if positions is None:
            return scores(self.codes, self.scales, query)
        out = np.empty(len(positions), dtype=np.float32)
        for start in range(0, len(positions), _CHUNK):
            part = positions[start : start + _CHUNK]
            out[start : start + len(part)] = scores(self.codes[part], self.scales[part], query)
        return out

    def vectors(self, positions: Ints) -> Floats:
        """The float32 vectors the rows at ``positions`` approximate (training, assignment)."""
        return (self.codes[positions].astype(np.float32) * self.scales[positions, None]).astype(
            np.float32, copy=False
        )


class Tail:
    """Rows appended after the base, in buffers that double (an append never copies the base)."""

    def __init__(self, dim: int) -> None:
        """An empty tail of ``dim``-wide rows."""
        self._buffers = Rows.empty(dim)
        self.n = 0

    def append(self, rows: Rows) -> None:
        """Add ``rows`` at the end (only the tail's buffers are ever copied, when they grow)."""
        start, end = self.n, self.n + len(rows)
        if end > len(self._buffers):
            capacity = max(end, 2 * len(self._buffers), 1024)
            self._buffers = Rows(*(_grown(old, start, capacity) for old in _columns(self._buffers)))
        for buffer, new in zip(_columns(self._buffers), _columns(rows), strict=True):
            buffer[start:end] = new
        self.n = end

    def view(self) -> Rows:
        """The rows in use (views: valid after later appends, which write past them)."""
        return self._buffers.head(self.n)

    def drop_first(self, n: int) -> None:
        """Forget the first ``n`` rows (folded into the base); later rows move up."""
        rest = self._buffers.head(self.n)
        kept = Rows(*(np.array(column[n:]) for column in _columns(rest)))
        self._buffers = kept
        self.n = len(kept)


@dataclass(frozen=True, slots=True)
class Loaded:
    """Rows read for an index, and the state of the database they reflect."""

    rows: Rows
    max_id: int
    """The largest ``vectors.id`` among them (0: none); later rows are read as a delta."""
    gone: tuple[int, ...]
    """The kinds' deletion counters when they were read."""
    last: tuple[str, int, str] | None
    """What the row at ``max_id`` is (kind, row id, text hash; any kind): checked when
    the file is opened again."""
    path: Path | None
    """The file they are mapped from (None: held in memory)."""
    layout: str | None = None
    """The file's row order: None for the order of ``vectors.id``, else the token of the
    IVF whose list order it holds (``listed``; ``load_ivf`` takes only that IVF)."""


def cache_path(db_path: Path, kinds: Sequence[Kind]) -> Path:
    """The matrix file of an index over ``kinds`` beside the database at ``db_path``."""
    return db_path.with_name(f"{db_path.name}-vectors.{'-'.join(kinds)}")


def gone(store: Store, kinds: Sequence[Kind]) -> tuple[int, ...]:
    """The deletion counters of ``kinds``' vectors (they only grow)."""
    stored = dict(
        store.execute(
            "SELECT key, value FROM meta WHERE key IN (SELECT value FROM json_each(?))",
            (orjson.dumps([_GONE_KEY + kind for kind in kinds]),),
        )
    )
    return tuple(int(stored.get(_GONE_KEY + kind, 0)) for kind in kinds)


def load(store: Store, kinds: Sequence[Kind], dim: int, path: Path | None) -> Loaded:
    """Every stored vector of ``kinds``: mapped from the file at ``path`` if it is current,
    else read from the database (and written to ``path``, then mapped).

    Rows the file does not hold yet (a larger id) come back as a delta for the tail:
    ``read_since(store, kinds, dim, loaded.max_id)``.
    """
    counters = gone(store, kinds)
    if path is not None:
        mapped = _open(path, kinds, dim, counters, store)
        if mapped is not None:
            return mapped
    top = int(store.scalar("SELECT coalesce(max(id), 0) FROM vectors"))
    n = int(
        store.scalar(
            "SELECT count(*) FROM vectors "
            "WHERE id <= ? AND kind IN (SELECT value FROM json_each(?))",
            (top, orjson.dumps(list(kinds)).decode()),
        )
    )
    last = last_row(store, top)
    chunks = _read(store, kinds, dim, after=0, upto=top)
    if path is not None:
        try:
            written = write_file(path, kinds, dim, chunks, n, max_id=top, gone=counters, last=last)
            return Loaded(written, top, counters, last, path)
        except OSError:
            chunks = _read(store, kinds, dim, after=0, upto=top)  # not writable: in memory
    rows = _concatenated(chunks, n, dim)
    return Loaded(rows, top, counters, last, None)


def read_since(store: Store, kinds: Sequence[Kind], dim: int, after: int) -> tuple[Rows, int]:
    """The stored vectors of ``kinds`` with ``id > after``, and the largest id of the table
    when they were read (the next delta starts after it; see ``last_row``)."""
    top = int(store.scalar("SELECT coalesce(max(id), 0) FROM vectors"))
    if top <= after:
        return Rows.empty(dim), after
    parts = list(_read(store, kinds, dim, after=after, upto=top))
    if not parts:
        return Rows.empty(dim), top
    if len(parts) == 1:
        return parts[0], top
    return Rows(*(np.concatenate(c) for c in zip(*map(_columns, parts), strict=True))), top


def write_file(
    path: Path,
    kinds: Sequence[Kind],
    dim: int,
    parts: Iterable[Rows],
    capacity: int,
    *,
    max_id: int,
    gone: tuple[int, ...],
    last: tuple[str, int, str] | None = None,
    layout: str | None = None,
) -> Rows:
    """Write ``parts`` (at most ``capacity`` rows in all) as the matrix file at ``path``;
    the rows written, mapped from it. ``layout``: see ``Loaded.layout``.

    Streams: each part is written where its columns go and then dropped. Written to a
    temporary file, mapped, then renamed over ``path``: the mapping is of this file even
    if another process renames its own over it a moment later.
    """
    offsets = _offsets(capacity, dim)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.truncate(offsets["end"])
            at = 0
            for whole in parts:
                # More rows than counted: some were deleted and others written between the
                # count and the read; the deletion counters moved, so this file is rebuilt
                # on the next refresh anyway. Never write past the columns.
                part = whole.head(min(len(whole), capacity - at))
                k = len(part)
                if k == 0:
                    continue
                for name, column in zip(_NAMES, _columns(part), strict=True):
                    width = column.itemsize * (dim if name == "codes" else 1)
                    out.seek(offsets[name] + at * width)
                    # The array's own buffer: ``tobytes`` would copy each part once more.
                    out.write(np.ascontiguousarray(column).data.cast("B"))
                at += k
            header = {
                "format": _FORMAT,
                "kinds": list(kinds),
                "dim": dim,
                "rows": at,
                "capacity": capacity,
                "max_id": max_id,
                "gone": list(gone),
                "last": list(last) if last is not None else None,
                "layout": layout,
            }
            raw = orjson.dumps(header)
            if len(raw) > _HEADER:
                raise ValueError("matrix file header too long")
            out.seek(0)
            out.write(raw.ljust(_HEADER, b" "))
        mapped = _mapped(Path(tmp), dim, at, capacity)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return mapped


_NAMES: Final = ("codes", "scales", "kinds", "row_ids", "convs")
_DTYPES: Final[dict[str, Any]] = {
    "codes": np.int8,
    "scales": np.float32,
    "kinds": np.int8,
    "row_ids": np.int64,
    "convs": np.int64,
}


def _columns(rows: Rows) -> tuple[npt.NDArray[Any], ...]:
    return (rows.codes, rows.scales, rows.kinds, rows.row_ids, rows.convs)


def _offsets(capacity: int, dim: int) -> dict[str, int]:
    at, out = _HEADER, {}
    for name in _NAMES:
        out[name] = at
        width = np.dtype(_DTYPES[name]).itemsize * (dim if name == "codes" else 1)
        at += -(-(capacity * width) // _ALIGN) * _ALIGN
    out["end"] = at
    return out


def _open(
    path: Path, kinds: Sequence[Kind], dim: int, counters: tuple[int, ...], store: Store
) -> Loaded | None:
    """The file's rows mapped read-only, if it is current for the database; else None."""
    try:
        # ``O_NONBLOCK`` and a type check on the opened fd: a FIFO (or device) at this
        # path would otherwise block the open or the read forever; anything but a
        # regular file is treated as absent, so the caller rebuilds over it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            header = orjson.loads(f.read(_HEADER).rstrip(b" \x00"))
            size = st.st_size
    except (OSError, ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        return None
    if header.get("kinds") != list(kinds) or header.get("dim") != dim:
        return None
    if tuple(header.get("gone") or ()) != counters:
        return None
    rows, capacity, max_id = int(header["rows"]), int(header["capacity"]), int(header["max_id"])
    offsets = _offsets(capacity, dim)
    if size < offsets["end"] or rows > capacity:
        return None
    if max_id > 0 and not _holds_last(store, header.get("last"), max_id):
        return None
    stored = header.get("last")
    last = None if stored is None else (str(stored[0]), int(stored[1]), str(stored[2]))
    layout = header.get("layout")
    mapped = _mapped(path, dim, rows, capacity)
    # Bounds check on what a search indexes with: a corrupted kind code would raise
    # IndexError in every search (a permanent -32603). One byte a row: ~0.02 ms per
    # million rows in page cache (measured), once per mapping. Invalid: rebuild.
    if rows and not (int(mapped.kinds.min()) >= 0 and int(mapped.kinds.max()) < len(KINDS)):
        return None
    return Loaded(
        mapped,
        max_id,
        counters,
        last,
        path,
        layout if isinstance(layout, str) else None,
    )


def _mapped(path: Path, dim: int, rows: int, capacity: int) -> Rows:
    """The first ``rows`` rows of the matrix file at ``path``, mapped read-only."""
    if rows == 0:
        return Rows.empty(dim)
    offsets = _offsets(capacity, dim)

    def column(name: str) -> npt.NDArray[Any]:
        shape = (rows, dim) if name == "codes" else (rows,)
        mapped = np.memmap(path, dtype=_DTYPES[name], mode="r", offset=offsets[name], shape=shape)
        # A plain array over the mapping (which it keeps alive as its base): every slice
        # or item of a ``np.memmap`` runs its Python ``__array_finalize__`` (a search's
        # blocks and results: ~0.3 ms of a 100k-row query's CPU).
        return np.asarray(mapped)

    return Rows(*(column(name) for name in _NAMES))


def _holds_last(store: Store, last: Any, max_id: int) -> bool:
    """Whether the database still has, at ``max_id``, the row the file says it ends with."""
    return last is not None and last_row(store, max_id) == tuple(last)


def last_row(store: Store, max_id: int) -> tuple[str, int, str] | None:
    """What the row at ``max_id`` is, as a file records it (None: no such row)."""
    row = store.one("SELECT kind, row_id, hex(text_hash) FROM vectors WHERE id = ?", (max_id,))
    return None if row is None else (str(row[0]), int(row[1]), str(row[2]))


def save_ivf(
    path: Path, ivf: IVF, trained: int, key: tuple[int, ...], layout: str | None = None
) -> None:
    """Write ``ivf`` beside the matrix file at ``path`` (``<file>.ivf``), for the file
    whose ``(max_id, *gone)`` is ``key`` and whose row order is ``layout``: a process
    that maps that file starts with it."""
    target = path.with_name(path.name + ".ivf")
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(
                out,
                key=np.asarray([*key, trained], dtype=np.int64),
                centroids=ivf.centroids,
                offsets=ivf.offsets,
                # A listed index's order is every position in turn: not stored.
                order=np.zeros(0, np.int64) if ivf.listed else ivf.order,
                layout=np.asarray(layout or ""),
            )
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_ivf(
    path: Path, key: tuple[int, ...], rows: int, layout: str | None = None
) -> tuple[IVF, int] | None:
    """The IVF saved beside the matrix file at ``path`` if it was built for the file whose
    ``(max_id, *gone)`` is ``key`` and whose row order is ``layout``, and covers at most
    its ``rows``; with its trained rows.

    The layout check matters after a crash between writing a file in a new list order
    and saving its IVF: the old IVF has the same key but points at other rows.
    """
    try:
        with np.load(path.with_name(path.name + ".ivf"), allow_pickle=False) as saved:
            stored = saved["key"].tolist()
            saved_layout = str(saved["layout"]) if "layout" in saved.files else ""
            offsets = saved["offsets"].astype(np.int64, copy=False)
            listed = saved_layout != ""
            order = (
                np.arange(int(offsets[-1]), dtype=np.int64)
                if listed
                else saved["order"].astype(np.int64, copy=False)
            )
            ivf = IVF(saved["centroids"].astype(np.float32, copy=False), offsets, order, listed)
    except (OSError, ValueError, KeyError, IndexError):
        return None
    if saved_layout != (layout or "") or stored[:-1] != list(key):
        return None
    if ivf.rows > rows or len(ivf.order) != ivf.rows or (listed and ivf.rows != rows):
        return None
    return ivf, int(stored[-1])


def listed(
    path: Path,
    kinds: Sequence[Kind],
    parts: Sequence[Rows],
    order: Ints,
    *,
    max_id: int,
    gone: tuple[int, ...],
    last: tuple[str, int, str] | None,
) -> tuple[Rows, str]:
    """The rows of ``parts`` (one position space, the first part's rows first) written
    to the file at ``path`` in ``order`` (an IVF's, list by list), mapped; with the
    layout token the file records (``Loaded.layout``).

    Streamed: ``_CHUNK`` rows are gathered at a time. Searches then score each probed
    list in place: gathering 125k rows scattered over a 1M-row file cost twice the
    CPU of reading them contiguously.
    """
    dim = parts[0].codes.shape[1]
    starts = np.cumsum([0, *(len(p) for p in parts)])
    n = int(starts[-1])
    layout = secrets.token_hex(8)

    def gathered() -> Iterator[Rows]:
        for at in range(0, len(order), _CHUNK * 4):
            chunk = order[at : at + _CHUNK * 4]
            which = np.searchsorted(starts, chunk, side="right") - 1
            if (which == which[0]).all():
                yield parts[int(which[0])].take(chunk - starts[which[0]])
                continue
            out = Rows(*(np.empty((len(chunk), *c.shape[1:]), c.dtype) for c in _columns(parts[0])))
            for i, part in enumerate(parts):
                mine = which == i
                if mine.any():
                    taken = part.take(chunk[mine] - starts[i])
                    for buffer, column in zip(_columns(out), _columns(taken), strict=True):
                        buffer[mine] = column
            yield out

    rows = write_file(
        path, kinds, dim, gathered(), n, max_id=max_id, gone=gone, last=last, layout=layout
    )
    return rows, layout


def folded(
    path: Path | None,
    kinds: Sequence[Kind],
    base: Rows,
    tail: Rows,
    *,
    max_id: int,
    gone: tuple[int, ...],
    last: tuple[str, int, str] | None,
) -> tuple[Rows, Path | None]:
    """``base`` followed by ``tail`` as one base: written to the file at ``path`` and
    mapped (the base is streamed from its mapping, never copied in memory), or, with no
    writable file, concatenated in memory."""
    dim = base.codes.shape[1]
    n = len(base) + len(tail)
    if path is not None:
        parts = (
            *(base.head(s + _CHUNK * 4).tail_from(s) for s in range(0, len(base), _CHUNK * 4)),
            tail,
        )
        try:
            return write_file(path, kinds, dim, parts, n, max_id=max_id, gone=gone, last=last), path
        except OSError:
            pass
    return _concatenated((base, tail), n, dim), None


def _read(
    store: Store, kinds: Sequence[Kind], dim: int, *, after: int, upto: int
) -> Iterator[Rows]:
    """Stored vectors of ``kinds`` with ``after < id <= upto``, in id order, in chunks."""
    cursor = store.execute(
        "SELECT kind, row_id, conversation_id, vector FROM vectors "
        "WHERE id > ? AND id <= ? AND kind IN (SELECT value FROM json_each(?)) ORDER BY id",
        (after, upto, orjson.dumps(list(kinds)).decode()),
    )
    codes_of = {kind: KINDS.index(kind) for kind in KINDS}
    while True:
        batch = [row for _, row in zip(range(_CHUNK), cursor, strict=False)]
        if not batch:
            return
        codes, scales = decode_rows([r[3] for r in batch], dim)
        yield Rows(
            codes,
            scales,
            np.fromiter((codes_of[r[0]] for r in batch), np.int8, len(batch)),
            np.fromiter((r[1] for r in batch), np.int64, len(batch)),
            np.fromiter((r[2] for r in batch), np.int64, len(batch)),
        )


def _concatenated(parts: Iterable[Rows], capacity: int, dim: int) -> Rows:
    """``parts`` copied into buffers allocated once (no list of parts held alongside)."""
    out = Rows(
        *(np.zeros((capacity, dim) if n == "codes" else capacity, _DTYPES[n]) for n in _NAMES)
    )
    at = 0
    for part in parts:
        k = min(len(part), capacity - at)
        for buffer, column in zip(_columns(out), _columns(part), strict=True):
            buffer[at : at + k] = column[:k]
        at += k
    return out.head(at)


def _grown(array: npt.NDArray[Any], used: int, capacity: int) -> npt.NDArray[Any]:
    """A new buffer of ``capacity`` rows holding the first ``used`` rows of ``array``."""
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def damaged_files(db_path: Path) -> list[Path]:
    """Matrix and IVF files beside the database that a process would refuse to use:
    not a regular file, an unreadable header, a body shorter than it declares, a kind
    code out of range, or an IVF that does not load. (For ``doctor``: derived caches,
    so its repair removes them and the next search rebuilds.)"""
    bad: list[Path] = []
    for path in sorted(db_path.parent.glob(f"{db_path.name}-vectors.*")):
        if path.name.endswith(".tmp"):
            continue
        if not _sound(path):
            bad.append(path)
    return bad


def _sound(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return False
        if path.name.endswith(".ivf"):
            try:
                with np.load(f, allow_pickle=False) as saved:
                    return all(saved[name].size >= 0 for name in ("key", "centroids", "offsets"))
            except (OSError, ValueError, KeyError, EOFError):
                return False
        try:
            header = orjson.loads(f.read(_HEADER).rstrip(b" \x00"))
            rows, capacity = int(header["rows"]), int(header["capacity"])
            offsets = _offsets(capacity, int(header["dim"]))
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            return False
        if rows > capacity or st.st_size < offsets["end"]:
            return False
        f.seek(offsets["kinds"])
        kinds = np.frombuffer(f.read(rows), dtype=np.int8)
        return len(kinds) == rows and (rows == 0 or (kinds.min() >= 0 and kinds.max() < len(KINDS)))
