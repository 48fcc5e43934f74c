"""grep: finding what was said, in messages and summaries, or inside payload files.

Four modes:

* ``full_text``: FTS5 with bm25 ranking. The user's text is reduced to its
  words, each quoted, so punctuation, quotes and operator words (AND, NOT,
  NEAR) are searched for rather than interpreted and never raise. The FTS
  index drives the query even when it is scoped to one conversation (a
  CROSS JOIN fixes the loop order).
* ``regex``: the ``regex`` module's engine with a time budget for the whole
  search; rows are scanned newest first in pages, so a pathological pattern
  ends with an error within the budget and memory stays flat.
* ``semantic``: nearest vectors (``brain.vectors.index``) of the query's embedding;
  only what is embedded so far is found.
* ``hybrid``: the full_text and semantic rankings fused, by reciprocal rank
  (``rrf``, k=60) or by min-max normalised scores averaged (``weighted``).

Scope ``files`` searches the text of large payload files (``brain.payloads.filetext``)
instead: full_text is bm25 over ``files_fts`` (the first ``INDEX_BYTES`` of each
payload), regex reads the files themselves in bounded pieces under the same
budget, and semantic ranks a file by its message's vector (the message's stub
names the file and carries its exploration summary; the payload itself is not
embedded). A file is as visible as its message: same conversation, the
message's ``created_at`` for ``since``/``before``, hidden when it is suppressed.

Hits carry the ids ``describe`` and ``expand`` take: a message's client id
(or ``msg_<n>``), a summary's ``sum_`` id, a payload's ``file_`` id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import orjson
import regex

from brain.errors import InvalidInput, NotFound, StorageError
from brain.lcm.ids import public_message_id
from brain.payloads.filetext import INDEX_BYTES, read_head, text_chunks
from brain.store.connection import Store
from brain.tokens import cjk_run

Mode = Literal["regex", "full_text", "semantic", "hybrid"]
GrepScope = Literal["messages", "summaries", "both", "files"]
Fusion = Literal["rrf", "weighted"]
Nearest = Callable[[int], "list[tuple[str, int, float]]"]
"""``nearest(k)``: up to k (kind, row id, similarity) for the query, best first, in scope."""

_WORD: Final = regex.compile(r"[\p{L}\p{N}_]+")
_PAGE: Final = 500
_SNIPPET_CHARS: Final = 160
REGEX_BUDGET_S: Final = 1.0
RRF_K: Final = 60
NEIGHBOUR_SHARE: Final = 0.5
"""Hybrid: a message also scores this share of its better neighbour's fused score.

LoCoMo dev recall@10/@50 (weighted fusion): without 65.2/79.8; share 0.2 69.1/85.7,
0.35 71.5/87.0, 0.5 73.2/87.3, 0.65 73.9/87.4, 0.8 73.4/87.5, 1.0 72.5/87.1; adding
both neighbours' scores instead of the better one: 0.2 71.8/86.2, 0.5 70.0/86.7 (and
MRR falls to 0.35). Tuned on the dev set itself; 0.5 sits on the flat part."""
LEXICAL_WEIGHT: Final = 0.7
"""Weighted fusion: the full_text share of a hit's score (the semantic share is the rest).

LoCoMo dev recall@10 by full_text share: 0.5 62.3, 0.6 64.4, 0.7 65.2, 0.8 65.1
(full_text alone 63.9, rrf 61.2), tuned on the dev set itself."""


@dataclass(frozen=True, slots=True)
class GrepOptions:
    """What to search for and where. ``conversations`` None means every conversation."""

    query: str
    mode: Mode = "full_text"
    scope: GrepScope = "both"
    conversations: tuple[int, ...] | None = None
    since: str | None = None
    before: str | None = None
    limit: int = 20
    fusion: Fusion = "weighted"


@dataclass(frozen=True, slots=True)
class Hit:
    """One match: a message, a summary or a payload file, with a snippet around the match."""

    kind: Literal["message", "summary", "file"]
    id: str
    session: str
    score: float
    snippet: str
    created_at: str
    seq: int | None = None
    role: str | None = None
    name: str | None = None
    """Who said a message hit (its ingested ``name``), if it was given."""


def grep(store: Store, options: GrepOptions, nearest: Nearest | None = None) -> list[Hit]:
    """Matches, best first (newest first for regex), at most ``options.limit``.

    ``nearest`` answers the vector side of semantic and hybrid searches.
    """
    if options.mode == "regex":
        hits = _regex(store, options)
    elif options.mode in ("semantic", "hybrid"):
        if nearest is None:
            raise InvalidInput("mode", f"{options.mode} search needs a vector index")
        if options.mode == "semantic":
            hits = _semantic(store, options, nearest)
        else:
            hits = _hybrid(store, options, nearest)
    else:
        hits = _full_text(store, options)
    return _with_names(store, hits)


def _with_names(store: Store, hits: list[Hit]) -> list[Hit]:
    """Message hits with their speakers' names, looked up in one statement.

    Done once here rather than in each search's query: the hits are few, the
    queries many.
    """
    wanted = [[h.session, h.seq] for h in hits if h.kind == "message" and h.seq is not None]
    if not wanted:
        return hits
    names = {
        (str(r[0]), int(r[1])): str(r[2])
        for r in store.execute(
            "SELECT c.session_id, m.seq, m.name FROM json_each(?) j "
            "CROSS JOIN conversations c ON c.session_id = j.value ->> 0 "
            "CROSS JOIN messages m ON m.conversation_id = c.id AND m.seq = j.value ->> 1 "
            "WHERE m.name IS NOT NULL",
            (orjson.dumps(wanted).decode(),),
        )
    }
    return [
        replace(h, name=names[(h.session, h.seq)])
        if h.kind == "message" and h.seq is not None and (h.session, h.seq) in names
        else h
        for h in hits
    ]


# -- semantic and hybrid ------------------------------------------------------------


def _semantic(store: Store, options: GrepOptions, nearest: Nearest) -> list[Hit]:
    # Over-fetch: the time bounds, scope and suppression are applied after ranking.
    ranked = nearest(options.limit * 4 + 32)
    if options.scope == "files":
        return _semantic_files(store, options, ranked)
    wanted = [(k, r) for k, r, _ in ranked if options.scope in ("both", k + "s")]
    found = _resolve(store, options, wanted)
    hits = []
    for kind, row_id, score in ranked:
        hit = found.get((kind, row_id))
        if hit is not None:
            hits.append(replace(hit, score=score))
    return hits[: options.limit]


def _hybrid(store: Store, options: GrepOptions, nearest: Nearest) -> list[Hit]:
    pool = replace(options, limit=max(options.limit * 3, 50))
    lexical = _full_text(store, pool) if fts_query(options.query) is not None else []
    semantic = _semantic(store, pool, nearest)
    fused: dict[tuple[str, str], float] = {}
    by_key: dict[tuple[str, str], Hit] = {}
    for ranking, share in ((lexical, LEXICAL_WEIGHT), (semantic, 1.0 - LEXICAL_WEIGHT)):
        if options.fusion == "rrf":
            weights = [1.0 / (RRF_K + rank + 1) for rank in range(len(ranking))]
        else:
            weights = [share * w for w in _min_max([h.score for h in ranking])]
        for hit, weight in zip(ranking, weights, strict=True):
            key = (hit.kind, hit.id)
            fused[key] = fused.get(key, 0.0) + weight
            by_key.setdefault(key, hit)  # lexical first: its snippet marks the match
    if options.fusion == "weighted":
        _spread_to_neighbours(store, options, fused, by_key)
    order = sorted(fused, key=lambda key: fused[key], reverse=True)
    return [replace(by_key[key], score=fused[key]) for key in order[: options.limit]]


def _spread_to_neighbours(
    store: Store,
    options: GrepOptions,
    fused: dict[tuple[str, str], float],
    by_key: dict[tuple[str, str], Hit],
) -> None:
    """Add to each message a share of its neighbours' scores (the turns before and after).

    A question's words often match the turn that asks or introduces a thing while
    the fact sits in the reply next to it.
    """
    keys = [k for k in fused if k[0] == "message"]
    if not keys:
        return
    positions = {(by_key[k].session, by_key[k].seq): k for k in keys}
    wanted = orjson.dumps([[by_key[k].session, by_key[k].seq] for k in keys])
    rows = store.execute(
        "SELECT c.session_id, m.seq, m.id, m.client_id, m.role, m.created_at, m.content "
        "FROM json_each(?) j CROSS JOIN conversations c ON c.session_id = j.value ->> 0 "
        "CROSS JOIN messages m ON m.conversation_id = c.id "
        "AND m.seq IN ((j.value ->> 1) - 1, (j.value ->> 1) + 1) "
        "WHERE m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL",
        (wanted, options.since or "", options.before or "\uffff"),
    )
    base = dict(fused)
    gains: dict[tuple[str, str], float] = {}
    for session, seq, row_id, client_id, role, created_at, content in rows:
        key = ("message", public_message_id(row_id, client_id))
        if key not in by_key:
            by_key[key] = Hit(
                "message", key[1], session, 0.0, _lead(content), created_at, seq, role
            )
        for other in (seq - 1, seq + 1):
            source = positions.get((session, other))
            if source is not None:
                gains[key] = max(gains.get(key, 0.0), base[source])
    for key, gain in gains.items():
        fused[key] = fused.get(key, 0.0) + NEIGHBOUR_SHARE * gain


def _min_max(scores: list[float]) -> list[float]:
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def _resolve(
    store: Store, options: GrepOptions, keys: list[tuple[str, int]]
) -> dict[tuple[str, int], Hit]:
    """Hits for (kind, row id) keys that pass the time bounds, scope and suppression."""
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    since = options.since or ""
    before = options.before or "\uffff"
    out: dict[tuple[str, int], Hit] = {}
    messages = orjson.dumps([r for k, r in keys if k == "message"])
    for r in store.execute(
        "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
        "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
        "WHERE m.id IN (SELECT value FROM json_each(?)) AND (? IS NULL OR m.conversation_id IN "
        "(SELECT value FROM json_each(?))) AND m.created_at >= ? AND m.created_at < ? "
        "AND m.suppressed_at IS NULL",
        (messages, convs, convs, since, before),
    ):
        out[("message", int(r[0]))] = Hit(
            "message", public_message_id(r[0], r[1]), r[5], 0.0, _lead(r[6]), r[4], r[2], r[3]
        )
    summaries = orjson.dumps([r for k, r in keys if k == "summary"])
    for r in store.execute(
        "SELECT s.id, s.summary_id, s.latest_at, c.session_id, s.content "
        "FROM summaries s JOIN conversations c ON c.id = s.conversation_id "
        "WHERE s.id IN (SELECT value FROM json_each(?)) AND (? IS NULL OR s.conversation_id IN "
        "(SELECT value FROM json_each(?))) AND s.latest_at >= ? AND s.earliest_at < ? "
        "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL",
        (summaries, convs, convs, since, before),
    ):
        out[("summary", int(r[0]))] = Hit("summary", r[1], r[3], 0.0, _lead(r[4]), r[2])
    return out


def _lead(text: str) -> str:
    """A semantic hit's snippet: the start of its text (no single span matched)."""
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"


# -- full text ----------------------------------------------------------------------


def fts_query(text: str) -> str | None:
    """The FTS5 query for free text: its words, quoted, OR-ed (None if it has none).

    Stop words are dropped when anything else is left: they match most rows,
    so they cost the most (a query with "the" ranked every row: 15 ms instead
    of 0.5 at 100k messages) and add least to the ranking.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    content = [w for w in words if w not in STOP_WORDS]
    words = content or words
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words[:64])


STOP_WORDS: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def _full_text(store: Store, options: GrepOptions) -> list[Hit]:
    words = fts_query(options.query)
    cjk = cjk_terms(options.query)
    if words is None and not cjk.match and not cjk.short:
        raise InvalidInput("query", "has no words to search for")
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    bounds = (convs, convs, options.since or "", options.before or "\uffff")
    if options.scope == "files":
        # fts_query keeps CJK runs as words, so a query is never only CJK terms here.
        # Inside files a CJK run is one token (no trigram index): whole runs match.
        return _ranked_files(store, options, words, bounds) if words is not None else []
    best: dict[tuple[str, str], Hit] = {}

    def keep(hits: list[Hit]) -> None:
        for hit in hits:
            key = (hit.kind, hit.id)
            if key not in best or best[key].score < hit.score:
                best[key] = hit

    if options.scope in ("messages", "both"):
        low, high = _message_span(store, convs)
        for table, match in (("messages_fts", words), ("messages_cjk", cjk.match)):
            if match is not None:
                rows = store.execute(
                    _RANKED_MESSAGES.format(fts=table),
                    (match, low, high, *bounds, options.limit),
                )
                keep([_message_hit(r, -float(r[6]), r[7]) for r in rows])
        if cjk.short:
            keep(_containing(store, "message", cjk.short, (low, high, *bounds), options.limit))
    if options.scope in ("summaries", "both"):
        for table, match in (("summaries_fts", words), ("summaries_cjk", cjk.match)):
            if match is not None:
                rows = store.execute(
                    _RANKED_SUMMARIES.format(fts=table), (match, *bounds, options.limit)
                )
                keep([Hit("summary", r[0], r[2], -float(r[3]), r[4], r[1]) for r in rows])
        if cjk.short:
            keep(_containing(store, "summary", cjk.short, bounds, options.limit))
    hits = sorted(best.values(), key=lambda h: h.score, reverse=True)
    return hits[: options.limit]


_RANKED_MESSAGES: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, "
    "bm25({fts}), snippet({fts}, 0, '[', ']', '…', 16) "
    "FROM {fts} CROSS JOIN messages m ON m.id = {fts}.rowid "
    "CROSS JOIN conversations c ON c.id = m.conversation_id "
    "WHERE {fts} MATCH ? AND {fts}.rowid BETWEEN ? AND ? "
    "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY bm25({fts}) LIMIT ?"
)
_RANKED_SUMMARIES: Final = (
    "SELECT s.summary_id, s.latest_at, c.session_id, bm25({fts}), "
    "snippet({fts}, 0, '[', ']', '…', 16) "
    "FROM {fts} CROSS JOIN summaries s ON s.id = {fts}.rowid "
    "CROSS JOIN conversations c ON c.id = s.conversation_id "
    "WHERE {fts} MATCH ? AND (? IS NULL OR s.conversation_id IN "
    "(SELECT value FROM json_each(?))) AND s.latest_at >= ? AND s.earliest_at < ? "
    "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
    "ORDER BY bm25({fts}) LIMIT ?"
)


def _message_hit(r: Sequence[Any], score: float, snippet: str) -> Hit:
    """A message hit from a row starting (id, client_id, seq, role, created_at, session)."""
    return Hit("message", public_message_id(r[0], r[1]), r[5], score, snippet, r[4], r[2], r[3])


@dataclass(frozen=True, slots=True)
class CjkTerms:
    """A query's CJK part: a trigram MATCH for runs of 3+ characters, and shorter runs."""

    match: str | None
    short: tuple[str, ...]


def cjk_terms(text: str) -> CjkTerms:
    """The CJK lookups for free text (nothing when it has no CJK characters).

    Chinese and Japanese put no spaces between words, so a run of CJK characters in
    a query is not one word to find whole. Its overlapping trigrams are OR-ed, and
    bm25 ranks the rows sharing most of them first. Runs of one or two characters
    have no trigram; they are found as substrings (a scan of the rows with CJK).
    """
    if text.isascii():
        return CjkTerms(None, ())
    grams: list[str] = []
    short: list[str] = []
    for run in dict.fromkeys(cjk_run().findall(text)):
        if len(run) < 3:
            short.append(run)
        else:
            grams += [run[i : i + 3] for i in range(len(run) - 2)]
    grams = list(dict.fromkeys(grams))[:64]
    match = " OR ".join(f'"{g}"' for g in grams) if grams else None
    return CjkTerms(match, tuple(short[:8]))


def _containing(
    store: Store,
    kind: Literal["message", "summary"],
    runs: tuple[str, ...],
    params: tuple[Any, ...],
    limit: int,
) -> list[Hit]:
    """Rows with CJK text containing any of ``runs``, those with more runs and newer first."""
    patterns = orjson.dumps([f"%{run}%" for run in runs])
    if kind == "message":
        rows = store.execute(
            "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
            "FROM messages_cjk x CROSS JOIN messages m ON m.id = x.rowid "
            "CROSS JOIN conversations c ON c.id = m.conversation_id "
            "WHERE EXISTS (SELECT 1 FROM json_each(?) p WHERE x.content LIKE p.value) "
            "AND x.rowid BETWEEN ? AND ? "
            "AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
            "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
            "ORDER BY m.id DESC",
            (patterns, *params),
        )
    else:
        rows = store.execute(
            "SELECT s.summary_id, NULL, NULL, NULL, s.latest_at, c.session_id, s.content "
            "FROM summaries_cjk x CROSS JOIN summaries s ON s.id = x.rowid "
            "CROSS JOIN conversations c ON c.id = s.conversation_id "
            "WHERE EXISTS (SELECT 1 FROM json_each(?) p WHERE x.content LIKE p.value) "
            "AND (? IS NULL OR s.conversation_id IN (SELECT value FROM json_each(?))) "
            "AND s.latest_at >= ? AND s.earliest_at < ? "
            "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
            "ORDER BY s.id DESC",
            (patterns, *params),
        )
    hits: list[Hit] = []
    for r in rows:
        text: str = r[6]
        present = [run for run in runs if run in text]
        at = text.find(present[0]) if present else 0
        snippet = _snippet(text, at, at + len(present[0]) if present else 0)
        score = float(len(present))
        if kind == "message":
            hits.append(_message_hit(r, score, snippet))
        else:
            hits.append(Hit("summary", r[0], r[5], score, snippet, r[4]))
    hits.sort(key=lambda h: h.score, reverse=True)  # stable: newest first among equals
    return hits[:limit]


def _message_span(store: Store, convs: bytes | None) -> tuple[int, int]:
    """The message row ids the conversations' messages lie between (all rows for None).

    FTS5 seeks to a rowid range in its posting lists instead of reading them whole,
    so a search scoped to one conversation costs what that conversation's share of
    the index costs (measured at 100k messages, 20 conversations: 6.0 -> 0.7 ms p50).
    A conversation's row ids grow with its seq, so the ends come from the
    (conversation_id, seq) index.
    """
    if convs is None:
        return 0, _MAX_ROWID
    row = store.one(
        "SELECT min(low), max(high) FROM (SELECT "
        "(SELECT id FROM messages WHERE conversation_id = j.value ORDER BY seq LIMIT 1) low, "
        "(SELECT id FROM messages WHERE conversation_id = j.value ORDER BY seq DESC LIMIT 1) "
        "high FROM json_each(?) j)",
        (convs,),
    )
    if row is None or row[0] is None:
        return 1, 0  # no messages: an empty range
    return int(row[0]), int(row[1])


_MAX_ROWID: Final = (1 << 63) - 1


# -- regex --------------------------------------------------------------------------


_FUZZY: Final = regex.compile(r"\\.|(\{[\s\d<=+]*[eids][\s<=+,:}])", regex.DOTALL)
"""An escape (skipped), or the start of a fuzzy constraint: ``{e<=2}``, ``{i}``, ``{1<=s<3}``,
``{2i+1d<=4}``, ``{e<=1:[a-z]}``."""


def _refuse_fuzzy(pattern: str) -> None:
    """Refuse the ``regex`` module's fuzzy matching.

    It does not honour the match timeout (``(?:...){e<=10}`` over 3,000 rows
    ran 2.1 s against a 1 s budget, holding the engine's lock), and grep
    never promised approximate matching. Escapes are skipped, so ``\\{e}``
    is a literal; a brace inside a set (``[{e}]``) is refused too, which
    costs nothing but an escape.
    """
    for found in _FUZZY.finditer(pattern):
        if found.group(1) is not None:
            construct = pattern[found.start(1) : pattern.find("}", found.start(1)) + 1]
            raise InvalidInput(
                "query",
                f"fuzzy matching ({construct}) is not supported in a regular expression; "
                "escape the brace (\\{) to match it literally",
            )


def _regex(store: Store, options: GrepOptions) -> list[Hit]:
    _refuse_fuzzy(options.query)
    try:
        pattern = regex.compile(options.query, regex.IGNORECASE if options.query.islower() else 0)
    except regex.error as exc:
        raise InvalidInput("query", f"is not a valid regular expression: {exc}") from None
    deadline = time.monotonic() + REGEX_BUDGET_S
    hits: list[Hit] = []
    if options.scope in ("messages", "both"):
        hits += _scan(store, options, pattern, deadline, _MESSAGE_PAGE, "message")
    if options.scope in ("summaries", "both") and len(hits) < options.limit:
        hits += _scan(store, options, pattern, deadline, _SUMMARY_PAGE, "summary")
    if options.scope == "files":
        hits += _scan_files(store, options, pattern, deadline)
    return hits[: options.limit]


_MESSAGE_PAGE: Final = (
    "SELECT m.id, m.client_id, m.seq, m.role, m.created_at, c.session_id, m.content "
    "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
    "WHERE m.id < ? AND (? IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY m.id DESC LIMIT ?"
)
_SUMMARY_PAGE: Final = (
    "SELECT s.id, s.summary_id, NULL, NULL, s.latest_at, c.session_id, s.content "
    "FROM summaries s JOIN conversations c ON c.id = s.conversation_id "
    "WHERE s.id < ? AND (? IS NULL OR s.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND s.latest_at >= ? AND s.earliest_at < ? "
    "AND s.suppressed_at IS NULL AND s.hidden_by IS NULL "
    "ORDER BY s.id DESC LIMIT ?"
)


def _scan(
    store: Store,
    options: GrepOptions,
    pattern: Any,
    deadline: float,
    page_sql: str,
    kind: Literal["message", "summary"],
) -> list[Hit]:
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    hits: list[Hit] = []
    cursor_id = 1 << 62
    while len(hits) < options.limit:
        rows: Sequence[Any] = list(
            store.execute(
                page_sql,
                (cursor_id, convs, convs, options.since or "", options.before or "\uffff", _PAGE),
            )
        )
        if not rows:
            break
        for row in rows:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InvalidInput("query", "regular expression took too long (over 1 s)")
            try:
                found = pattern.search(row[6], timeout=remaining)
            except TimeoutError:
                raise InvalidInput("query", "regular expression took too long (over 1 s)") from None
            if found is None:
                continue
            hit_id = public_message_id(row[0], row[1]) if kind == "message" else str(row[1])
            hits.append(
                Hit(
                    kind,
                    hit_id,
                    row[5],
                    1.0,
                    _snippet(row[6], found.start(), found.end()),
                    row[4],
                    row[2],
                    row[3],
                )
            )
            if len(hits) >= options.limit:
                break
        cursor_id = int(rows[-1][0])
    return hits


def _snippet(text: str, start: int, end: int) -> str:
    """The match with context around it, marked like FTS snippets: ``…before [match] after…``."""
    pad = max(0, (_SNIPPET_CHARS - (end - start)) // 2)
    left = max(0, start - pad)
    right = min(len(text), end + pad)
    return (
        ("…" if left > 0 else "")
        + text[left:start]
        + "["
        + text[start:end]
        + "]"
        + text[end:right]
        + ("…" if right < len(text) else "")
    )


# -- payload files ------------------------------------------------------------------

# Each query joins a file to its message and conversation: a file is as visible as
# its message (scope, since/before by the message's created_at, suppression).
_RANKED_FILES: Final = (
    "SELECT f.file_id, c.session_id, m.created_at, bm25(files_fts) "
    "FROM files_fts CROSS JOIN files_index q ON q.id = files_fts.rowid "
    "CROSS JOIN large_files f ON f.file_id = q.file_id "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE files_fts MATCH ? "
    "AND (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY bm25(files_fts) LIMIT ?"
)
_FILE_PAGE: Final = (
    "SELECT q.id, f.file_id, c.session_id, m.created_at FROM files_index q "
    "CROSS JOIN large_files f ON f.file_id = q.file_id "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE q.id < ? AND q.state = 'text' "
    "AND (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL "
    "ORDER BY q.id DESC LIMIT ?"
)
_FILES_OF_MESSAGES: Final = (
    "SELECT f.file_id, c.session_id, m.created_at, m.id "
    "FROM json_each(?) j CROSS JOIN large_files f ON f.message_id = j.value "
    "CROSS JOIN files_index q ON q.file_id = f.file_id AND q.state = 'text' "
    "CROSS JOIN messages m ON m.id = f.message_id "
    "CROSS JOIN conversations c ON c.id = f.conversation_id "
    "WHERE (? IS NULL OR f.conversation_id IN (SELECT value FROM json_each(?))) "
    "AND m.created_at >= ? AND m.created_at < ? AND m.suppressed_at IS NULL"
)
_SNIPPET_READ: Final = 256 * 1024
_LEAD_READ: Final = 4 * _SNIPPET_CHARS


def _ranked_files(
    store: Store, options: GrepOptions, words: str, bounds: tuple[Any, ...]
) -> list[Hit]:
    """Payload files by bm25 of their indexed text; the snippet is read from the file."""
    rows = list(store.execute(_RANKED_FILES, (words, *bounds, options.limit)))
    needles = _needles(options.query)
    return [
        Hit("file", r[0], r[1], -float(r[3]), _file_snippet(store, r[0], needles), r[2])
        for r in rows
    ]


def _needles(query: str) -> Any:
    """A pattern finding the query's words in a file's text (case-insensitive, longest first).

    The index stems words (porter), so a file can match a query word it does not
    contain as typed; a word's stem-like prefix is tried after the words themselves.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    words = [w for w in words if w not in STOP_WORDS] or words
    words.sort(key=len, reverse=True)
    prefixes = [w[: max(3, len(w) - 3)] for w in words]
    return (
        regex.compile("|".join(regex.escape(w) for w in words), regex.IGNORECASE),
        regex.compile("|".join(regex.escape(w) for w in prefixes), regex.IGNORECASE),
    )


def _file_snippet(store: Store, file_id: str, needles: Any) -> str:
    """``…before [word] after…`` around the first query word in the indexed part of a file.

    Reads in pieces and stops at the first match, so a hit near the top of a large
    file costs one piece; at most ``INDEX_BYTES`` are read (what the index saw).
    """
    try:
        for pattern in needles:
            read = 0
            for chunk in text_chunks(store.files_dir, file_id, _SNIPPET_READ):
                found = pattern.search(chunk)
                if found is not None:
                    return _snippet(chunk, found.start(), found.end())
                read += len(chunk)
                if read >= INDEX_BYTES:
                    break
        return _lead(read_head(store.files_dir, file_id, _LEAD_READ))
    except (NotFound, StorageError):
        return ""  # the row outlived its file (removed by hand): still a hit, by the index


def _scan_files(store: Store, options: GrepOptions, pattern: Any, deadline: float) -> list[Hit]:
    """Payload files whose text matches, newest first, each read in bounded pieces."""
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    bounds = (convs, convs, options.since or "", options.before or "\uffff")
    hits: list[Hit] = []
    cursor_id = 1 << 62
    while len(hits) < options.limit:
        rows: Sequence[Any] = list(store.execute(_FILE_PAGE, (cursor_id, *bounds, _PAGE)))
        if not rows:
            break
        for _, file_id, session, created_at in rows:
            snippet = _search_file(store, file_id, pattern, deadline)
            if snippet is not None:
                hits.append(Hit("file", file_id, session, 1.0, snippet, created_at))
                if len(hits) >= options.limit:
                    break
        cursor_id = int(rows[-1][0])
    return hits


def _search_file(store: Store, file_id: str, pattern: Any, deadline: float) -> str | None:
    """The snippet of the first match in a file, or None; an error past the deadline."""
    try:
        for chunk in text_chunks(store.files_dir, file_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InvalidInput("query", "regular expression took too long (over 1 s)")
            try:
                found = pattern.search(chunk, timeout=remaining)
            except TimeoutError:
                raise InvalidInput("query", "regular expression took too long (over 1 s)") from None
            if found is not None:
                return _snippet(chunk, found.start(), found.end())
    except (NotFound, StorageError):
        return None
    return None


def _semantic_files(
    store: Store, options: GrepOptions, ranked: list[tuple[str, int, float]]
) -> list[Hit]:
    """Payload files ranked by their message's similarity (its stub is what is embedded)."""
    scores = {row_id: score for kind, row_id, score in ranked if kind == "message"}
    if not scores:
        return []
    convs = None if options.conversations is None else orjson.dumps(list(options.conversations))
    rows = store.execute(
        _FILES_OF_MESSAGES,
        (
            orjson.dumps(list(scores)),
            convs,
            convs,
            options.since or "",
            options.before or "\uffff",
        ),
    )
    found = [(scores[int(r[3])], str(r[0]), str(r[1]), str(r[2])) for r in rows]
    found.sort(key=lambda t: t[0], reverse=True)
    hits = []
    for score, file_id, session, created_at in found[: options.limit]:
        try:
            lead = _lead(read_head(store.files_dir, file_id, _LEAD_READ))
        except (NotFound, StorageError):
            lead = ""
        hits.append(Hit("file", file_id, session, score, lead, created_at))
    return hits
