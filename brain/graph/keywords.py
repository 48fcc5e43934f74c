"""The nodes' keyword ranking in memory: ``bm25(nodes_fts)`` without scoring in SQLite.

``SELECT rowid, bm25(nodes_fts) ... ORDER BY rank LIMIT n`` scores every node the
query matches, one auxiliary-function call per row (~1.7 us each): with common
words that is most of the graph, and it was the largest stage of a graph query
(0.9 ms at 1,000 nodes, 2.1 ms at 5,000). ``KeywordIndex`` holds, per term, the
nodes that hold it, how often, and each node's length in tokens, so bm25 over every
match is a few numpy operations on arrays (tens of microseconds).

It gives the ranking FTS5 gives, to the last bit: the tokens are SQLite's own
(FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer called through apsw, the
text as ``nodes_fts`` indexed it, the ``nodes`` table being its content), the row
count and total length are FTS5's own (its averages record), and the score is
fts5_aux.c's bm25 evaluated in the same order of floating-point operations. Ties go
to the lower row id. Anything the index cannot answer exactly (a quoted word that
tokenizes to several tokens, an expression that is not an OR of quoted words) is
answered by FTS5, as is every query on a graph above ``MAX_NODES``: building the
index there would cost the first query after start more than it saves (FTS5 with
frequent words left out stays below a few ms there).

Kept current by what it reads, not by the writers: each use reads FTS5's
averages and structure records (one indexed read of two rows, in the caller's
transaction). Every committed write to ``nodes_fts`` changes the structure record
(a new segment), whoever made it (teach, sync, maintain's merges and prunes,
another process); when it changed, the nodes' texts are read again and only the
nodes whose text changed are tokenized again. Costs about the texts' size plus 12
bytes per (term, node) pair in memory.

Tested in tests/brain/graph/test_keywords.py.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter, OrderedDict
from typing import Final, NamedTuple

import apsw
import numpy as np
import numpy.typing as npt

from brain.store.bm25 import K1, B, idf
from brain.store.connection import Store
from brain.store.stems import TOKENIZE

MAX_NODES: Final = 10_000
"""Above this many nodes the index is not built (FTS5 ranks): building it costs
~30 us a node on the first query after start, and the first query after a write
reads every node's text again (~0.7 us a node)."""
_AVERAGES: Final = 1
_STRUCTURE: Final = 10
"""FTS5's row ids of its averages and structure records in ``nodes_fts_data``."""
_DENSE_SPAN: Final = 8
"""Scores go into an array indexed by row id while row ids stay within this many times
the node count (else through ``np.unique``)."""
_CACHED: Final = 8
"""Databases whose index is kept (a process usually serves one)."""


class _Postings(NamedTuple):
    """One term's nodes (row ids), its count in each, and each one's length."""

    nodes: npt.NDArray[np.int64]
    freq: npt.NDArray[np.float64]
    size: npt.NDArray[np.float64]


class _Doc(NamedTuple):
    """A node as indexed: its text, its term ids then their counts (one array), its length."""

    text: str
    terms: npt.NDArray[np.int32]
    size: int


_I32: Final = np.zeros(0, np.int32)
_EMPTY: Final = _Postings(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))


_local = threading.local()


def _tokenizer() -> apsw.FTS5Tokenizer:
    """This thread's FTS5 tokenizer, configured as the full-text tables are."""
    tok: apsw.FTS5Tokenizer | None = getattr(_local, "tok", None)
    if tok is None:
        conn = apsw.Connection(":memory:")
        name, *args = TOKENIZE.split()
        tok = conn.fts5_tokenizer(name, args)
        _local.conn = conn  # the tokenizer lives as long as its connection
        _local.tok = tok
    return tok


def tokens(text: str, *, query: bool = False) -> list[str]:
    """``text``'s tokens as FTS5 indexes (or, with ``query``, matches) them, in order."""
    flags = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
    found = _tokenizer()(
        text.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False
    )
    return [str(t) for t in found]  # without offsets nor colocated tokens: the tokens


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at``: (value, position after it)."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


@functools.lru_cache(maxsize=16_384)
def _query_tokens(word: str) -> tuple[str, ...]:
    """``word``'s tokens in a query (remembered: queries repeat their words)."""
    return tuple(tokens(word, query=True))


def _terms(match: str) -> list[str | None] | None:
    """Each phrase's term for an OR of quoted words (``fts_query``'s form), in order.

    None for anything else, or when a word makes a phrase of several tokens (only
    FTS5 matches those exactly). A word with no token is a phrase that matches
    nothing: None in its place.
    """
    out: list[str | None] = []
    for phrase in match.split(" OR "):
        word = phrase[1:-1]
        if len(phrase) < 3 or phrase[0] != '"' or phrase[-1] != '"' or '"' in word:
            return None
        found = _query_tokens(word)
        if len(found) > 1:
            return None
        out.append(found[0] if found else None)
    return out


class KeywordIndex:
    """One database's node texts as bm25 postings; safe to share between threads.

    The postings are a base (every node's, by term, in three flat arrays: made at
    once from every node, again once the nodes written since pass an eighth of the
    graph) and the postings of the nodes written since (``_fresh``); a node written
    since is left out of the base (``_stale``). A write then costs what it wrote.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        """Forget everything (the graph grew past ``MAX_NODES``, or nothing read yet)."""
        self._key: bytes | None = None
        self._above = False
        self._rows = 0
        self._average = 1.0
        self._vocab: dict[str, int] = {}
        self._docs: dict[int, _Doc] = {}
        self._offsets: npt.NDArray[np.int64] = np.zeros(1, np.int64)
        self._base_nodes: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._base_freq: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self._base_size: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self._stale: set[int] = set()
        self._stale_nodes: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._fresh: dict[int, dict[int, int]] = {}
        self._parts: dict[int, tuple[_Postings, npt.NDArray[np.float64]]] = {}

    def ranking(self, store: Store, match: str, n: int) -> list[tuple[int, float]] | None:
        """Up to ``n`` nodes by bm25 (higher is better), best first, as ``bm25(nodes_fts)``
        ranks them in ``store``'s snapshot; None where FTS5 must answer (see module)."""
        terms = _terms(match)
        if terms is None:
            return None
        with self._lock:
            if not self._follow(store):
                return None
            ids = [self._vocab.get(t, -1) if t is not None else -1 for t in terms]
            return self._ranked([self._part(i) for i in ids], n)

    @property
    def nodes(self) -> int:
        """Nodes indexed."""
        return len(self._docs)

    def _follow(self, store: Store) -> bool:
        """Bring the index to ``store``'s snapshot; False if the graph is above ``MAX_NODES``."""
        records = dict(
            store.execute(
                "SELECT id, block FROM nodes_fts_data WHERE id IN (?, ?)", (_AVERAGES, _STRUCTURE)
            )
        )
        averages = bytes(records.get(_AVERAGES) or b"")
        key = averages + b"/" + bytes(records.get(_STRUCTURE) or b"")
        if key == self._key:
            return not self._above
        rows, at = _varint(averages, 0) if averages else (0, 0)
        total = _varint(averages, at)[0] if averages else 0
        if rows > MAX_NODES:
            if self._docs:
                self._clear()
            self._key, self._above = key, True  # until the next write: FTS5 ranks
            return False
        # The texts are read after the records: outside a transaction a write between
        # the two leaves the index holding newer texts under an older key, which the next
        # use reads again (the other order would keep older texts under a newer key).
        self._update(dict(store.execute("SELECT id, coalesce(content, '') FROM nodes")))
        self._rows = rows
        self._average = total / rows if rows else 1.0
        self._parts.clear()  # idf and average length changed
        self._key, self._above = key, False
        return True

    def _update(self, texts: dict[int, str]) -> None:
        """Make the postings those of ``texts`` (row id -> text), tokenizing only changes."""
        if not self._docs:
            for node, text in texts.items():
                self._docs[node] = self._doc(text)
            self._fold()
            return
        for node in [m for m in self._docs if m not in texts]:
            self._drop(node)
        for node, text in texts.items():
            known = self._docs.get(node)
            if known is not None and known.text == text:
                continue
            if known is not None:
                self._drop(node)
            doc = self._docs[node] = self._doc(text)
            self._stale.add(node)
            half = len(doc.terms) // 2
            for term, count in zip(
                doc.terms[:half].tolist(), doc.terms[half:].tolist(), strict=True
            ):
                self._fresh.setdefault(term, {})[node] = count
        if len(self._stale) * 8 > max(len(self._docs), 512):
            self._fold()
        else:
            self._stale_nodes = np.fromiter(self._stale, np.int64, len(self._stale))

    def _doc(self, text: str) -> _Doc:
        """``text`` tokenized: its term ids (new terms added) and their counts."""
        found = tokens(text)
        counts = Counter(self._vocab.setdefault(t, len(self._vocab)) for t in found)
        terms = np.fromiter(counts.keys(), np.int32, len(counts))
        freq = np.fromiter(counts.values(), np.int32, len(counts))
        return _Doc(text, np.concatenate([terms, freq]), len(found))

    def _drop(self, node: int) -> None:
        """Forget ``node``: out of the base, its fresh postings gone."""
        doc = self._docs.pop(node, None)
        self._stale.add(node)
        if doc is None:
            return
        for term in doc.terms[: len(doc.terms) // 2].tolist():
            fresh = self._fresh.get(term)
            if fresh is not None:
                fresh.pop(node, None)
                if not fresh:
                    del self._fresh[term]

    def _fold(self) -> None:
        """Make the base of every node's postings (nothing stale, nothing fresh)."""
        docs = list(self._docs.items())
        halves = [len(d.terms) // 2 for _, d in docs]
        packed = [d.terms for _, d in docs]
        terms = np.concatenate([t[:h] for t, h in zip(packed, halves, strict=True)] or [_I32])
        freq = np.concatenate([t[h:] for t, h in zip(packed, halves, strict=True)] or [_I32])
        nodes = np.repeat(np.array([n for n, _ in docs], np.int64), halves)
        size = np.repeat(np.array([d.size for _, d in docs], np.int32), halves)
        order = np.argsort(terms, kind="stable")
        self._base_nodes = nodes[order]
        self._base_freq = freq[order]
        self._base_size = size[order]
        self._offsets = np.concatenate(
            [[0], np.cumsum(np.bincount(terms, minlength=len(self._vocab)))]
        ).astype(np.int64)
        self._stale.clear()
        self._stale_nodes = np.zeros(0, np.int64)
        self._fresh.clear()

    def _postings(self, term: int) -> _Postings:
        """Term id ``term``'s postings: the base's, less stale nodes, and the fresh ones."""
        if 0 <= term < len(self._offsets) - 1:
            start, end = int(self._offsets[term]), int(self._offsets[term + 1])
            nodes = self._base_nodes[start:end]
            freq = self._base_freq[start:end]
            size = self._base_size[start:end]
            if len(self._stale_nodes) and len(nodes):
                keep = ~np.isin(nodes, self._stale_nodes)
                nodes, freq, size = nodes[keep], freq[keep], size[keep]
        else:
            nodes, freq, size = _EMPTY.nodes, _I32, _I32
        fresh = self._fresh.get(term)
        if fresh:
            more = list(fresh.items())
            nodes = np.concatenate([nodes, np.array([m for m, _ in more], np.int64)])
            freq = np.concatenate([freq, np.array([c for _, c in more], np.int32)])
            size = np.concatenate([size, np.array([self._docs[m].size for m, _ in more], np.int32)])
        return _Postings(nodes, freq.astype(np.float64), size.astype(np.float64))

    def _part(self, term: int) -> tuple[_Postings, npt.NDArray[np.float64]] | None:
        """Term id ``term``'s postings and what it adds to each one's score (kept until the
        next write: it depends on the row count and the average length); None if no node
        holds it."""
        if term < 0:
            return None
        found = self._parts.get(term)
        if found is None:
            p = self._postings(term)
            if not len(p.nodes):
                return None
            weight = idf(self._rows, len(p.nodes))
            # fts5_aux.c: idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))),
            # in this order, so the sums are FTS5's to the bit.
            norm = K1 * ((1 - B) + (B * p.size) / self._average)
            found = self._parts[term] = (p, weight * ((p.freq * (K1 + 1.0)) / (p.freq + norm)))
        return found

    def _ranked(
        self, parts: list[tuple[_Postings, npt.NDArray[np.float64]] | None], n: int
    ) -> list[tuple[int, float]]:
        """The ``n`` best nodes by fts5_aux.c's bm25, the phrases' parts added in the
        expression's order as FTS5 adds them (a phrase absent from a row adds 0.0:
        nothing changes)."""
        present = [p for p in parts if p is not None]
        if not present or n <= 0:
            return []
        top = max(int(p.nodes.max()) for p, _ in present)
        dense = top < _DENSE_SPAN * max(len(self._docs), 1) + 1024
        if dense:
            scores = np.zeros(top + 1)
            for p, part in present:
                scores[p.nodes] += part
            nodes = np.flatnonzero(scores)
            values = scores[nodes]
        else:
            nodes, inverse = np.unique(
                np.concatenate([p.nodes for p, _ in present]), return_inverse=True
            )
            values = np.zeros(len(nodes))
            at = 0
            for p, part in present:
                values[inverse[at : at + len(p.nodes)]] += part
                at += len(p.nodes)
        if len(values) > n:
            cut = np.partition(values, len(values) - n)[len(values) - n]
            keep = values >= cut
            nodes, values = nodes[keep], values[keep]
        order = np.lexsort((nodes, -values))[:n]
        return list(zip(nodes[order].tolist(), values[order].tolist(), strict=True))


_INDEXES: Final[OrderedDict[tuple[str, tuple[int, int]], KeywordIndex]] = OrderedDict()
_INDEXES_LOCK: Final = threading.Lock()


def index_for(store: Store) -> KeywordIndex:
    """The keyword index of ``store``'s database (by path and file identity)."""
    key = (str(store.path), store.identity)
    with _INDEXES_LOCK:
        found = _INDEXES.get(key)
        if found is None:
            found = _INDEXES[key] = KeywordIndex()
            while len(_INDEXES) > _CACHED:
                _INDEXES.popitem(last=False)
        else:
            _INDEXES.move_to_end(key)
        return found
