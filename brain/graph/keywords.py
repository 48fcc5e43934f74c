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

import threading
from collections import Counter, OrderedDict
from typing import Final, NamedTuple

import apsw
import numpy as np
import numpy.typing as npt

from brain.store.bm25 import K1, B, idf
from brain.store.connection import Store
from brain.store.stems import TOKENIZE

MAX_NODES: Final = 20_000
"""Above this many nodes the index is not built (FTS5 ranks): building it costs
~20 us a node on the first query after start, and at 100,000 nodes the first query
must stay within a second."""
_AVERAGES: Final = 1
_STRUCTURE: Final = 10
"""FTS5's row ids of its averages and structure records in ``nodes_fts_data``."""
_DENSE_SPAN: Final = 8
"""Scores go into an array indexed by row id while row ids stay within this many times
the node count (else through ``np.unique``)."""
_CACHED: Final = 8
"""Databases whose index is kept (a process usually serves one)."""


class _Postings(NamedTuple):
    """One term's nodes (row ids, ascending), its count in each, and each one's length."""

    nodes: npt.NDArray[np.int64]
    freq: npt.NDArray[np.float64]
    size: npt.NDArray[np.float64]


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
        found = tokens(word, query=True)
        if len(found) > 1:
            return None
        out.append(found[0] if found else None)
    return out


class KeywordIndex:
    """One database's node texts as bm25 postings; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._rows = 0
        self._average = 1.0
        self._text: dict[int, str] = {}
        self._counts: dict[int, Counter[str]] = {}
        self._size: dict[int, int] = {}
        self._docs: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, _Postings] = {}
        self._parts: dict[str, npt.NDArray[np.float64]] = {}

    def ranking(self, store: Store, match: str, n: int) -> list[tuple[int, float]] | None:
        """Up to ``n`` nodes by bm25 (higher is better), best first, as ``bm25(nodes_fts)``
        ranks them in ``store``'s snapshot; None where FTS5 must answer (see module)."""
        terms = _terms(match)
        if terms is None:
            return None
        with self._lock:
            if not self._follow(store):
                return None
            postings = [self._postings(t) if t is not None else None for t in terms]
            return self._ranked(terms, postings, n)

    @property
    def nodes(self) -> int:
        """Nodes indexed."""
        return len(self._text)

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
            return True
        rows, at = _varint(averages, 0) if averages else (0, 0)
        total = _varint(averages, at)[0] if averages else 0
        if rows > MAX_NODES:
            self._clear()
            return False
        self._update(dict(store.execute("SELECT id, coalesce(content, '') FROM nodes")))
        self._rows = rows
        self._average = total / rows if rows else 1.0
        self._parts.clear()
        self._key = key
        return True

    def _clear(self) -> None:
        self._key = None
        self._text.clear()
        self._counts.clear()
        self._size.clear()
        self._docs.clear()
        self._arrays.clear()
        self._parts.clear()

    def _update(self, texts: dict[int, str]) -> None:
        """Make the postings those of ``texts`` (row id -> text), tokenizing only changes."""
        touched: set[str] = set()
        for node in [m for m in self._text if m not in texts]:
            touched.update(self._drop(node))
        for node, text in texts.items():
            if self._text.get(node) == text:
                continue
            touched.update(self._drop(node))
            found = tokens(text)
            counts = Counter(found)
            self._text[node] = text
            self._counts[node] = counts
            self._size[node] = len(found)
            for term, count in counts.items():
                self._docs.setdefault(term, {})[node] = count
            touched.update(counts)
        for term in touched:
            self._arrays.pop(term, None)

    def _drop(self, node: int) -> Counter[str]:
        """Forget ``node``; its terms."""
        counts = self._counts.pop(node, Counter())
        self._text.pop(node, None)
        self._size.pop(node, None)
        for term in counts:
            docs = self._docs.get(term)
            if docs is not None:
                docs.pop(node, None)
                if not docs:
                    del self._docs[term]
        return counts

    def _postings(self, term: str) -> _Postings:
        """``term``'s postings as arrays (made on first use after a change to them)."""
        found = self._arrays.get(term)
        if found is None:
            docs = self._docs.get(term, {})
            nodes = np.fromiter(sorted(docs), dtype=np.int64, count=len(docs))
            found = _Postings(
                nodes,
                np.fromiter((docs[m] for m in nodes.tolist()), np.float64, len(docs)),
                np.fromiter((self._size[m] for m in nodes.tolist()), np.float64, len(docs)),
            )
            self._arrays[term] = found
        return found

    def _part(self, term: str, p: _Postings) -> npt.NDArray[np.float64]:
        """What ``term`` adds to the score of each node of its postings (kept until the
        next write: it depends on the row count and the average length)."""
        found = self._parts.get(term)
        if found is None:
            weight = idf(self._rows, len(p.nodes))
            # fts5_aux.c: idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))),
            # in this order, so the sums are FTS5's to the bit.
            norm = K1 * ((1 - B) + (B * p.size) / self._average)
            found = self._parts[term] = weight * ((p.freq * (K1 + 1.0)) / (p.freq + norm))
        return found

    def _ranked(
        self, terms: list[str | None], postings: list[_Postings | None], n: int
    ) -> list[tuple[int, float]]:
        """The ``n`` best nodes of the phrases' postings by fts5_aux.c's bm25 (phrases
        in the expression's order: FTS5 adds their parts in that order)."""
        present = [p for p in postings if p is not None and len(p.nodes)]
        if not present or n <= 0:
            return []
        top = max(int(p.nodes[-1]) for p in present)
        dense = top < _DENSE_SPAN * max(len(self._text), 1) + 1024
        if dense:
            scores = np.zeros(top + 1)
        else:
            universe, inverse = np.unique(
                np.concatenate([p.nodes for p in present]), return_inverse=True
            )
            scores = np.zeros(len(universe))
            at = 0
        for term, p in zip(terms, postings, strict=True):
            if term is None or p is None or not len(p.nodes):
                continue  # FTS5 adds 0.0 for a phrase absent from a row: nothing changes
            part = self._part(term, p)
            if dense:
                scores[p.nodes] += part
            else:
                scores[inverse[at : at + len(p.nodes)]] += part
                at += len(p.nodes)
        if dense:
            nodes = np.flatnonzero(scores)
            values = scores[nodes]
        else:
            nodes, values = universe, scores
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
