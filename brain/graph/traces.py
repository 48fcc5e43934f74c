"""Query traces: what one query seeded, the steps it took and what fired, stored.

A trace is written in the same transaction as the fire counts of its nodes, so
``learn`` and ``correction`` can find it after a restart. Node references are
row ids inside the stored body (stable: row ids are never reused while the
node exists; a node deleted since is skipped when the trace is read back) and
public ids in what callers see.

Traces are bounded: storing one deletes the oldest beyond ``trace_max_count``,
and maintenance deletes those older than ``trace_max_age_days`` as well
(``expired_traces``).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from brain.clock import now_iso
from brain.errors import NotFound
from brain.graph.traverse import Step, Traversal
from brain.store.connection import Store


@dataclass(frozen=True, slots=True)
class Trace:
    """A stored trace."""

    row_id: int
    id: str
    chat_id: str | None
    query: str
    seeds: list[tuple[int, float]]
    steps: list[Step]
    fired: list[tuple[int, float]]
    inhibited: list[tuple[int, float]]
    shown: list[int]
    """The fired nodes the context block held (what the caller got), best first."""
    timings: dict[str, float]
    created_at: str
    outcome: float | None
    learned_at: str | None


def new_trace_id() -> str:
    """A fresh trace id: ``tr_`` + 16 hex characters."""
    return "tr_" + secrets.token_hex(8)


def save_trace(
    store: Store,
    query: str,
    chat_id: str | None,
    traversal: Traversal,
    timings: dict[str, float],
    shown: list[int] | None = None,
) -> str:
    """Store a traversal as a trace (inside the caller's transaction); its id."""
    trace_id = new_trace_id()
    body = {
        "seeds": [[n, round(s, 6)] for n, s in traversal.seeds],
        "steps": [
            [s.source, s.target, round(s.weight, 6), round(s.activation, 6), s.hop]
            for s in traversal.steps
        ],
        "fired": [[n, round(a, 6)] for n, a in traversal.fired.items()],
        "inhibited": [[n, round(a, 6)] for n, a in traversal.inhibited.items()],
        "shown": list(traversal.fired) if shown is None else shown,
        "timings": timings,
    }
    row = store.one(
        "INSERT INTO traces (trace_id, chat_id, query, body, created_at) VALUES (?, ?, ?, ?, ?) "
        "RETURNING id",
        (trace_id, chat_id, query, orjson.dumps(body).decode(), now_iso()),
    )
    assert row is not None
    # Keep at most ``trace_max_count``: a new row takes the largest id plus one,
    # so the rows left, all at or below this id, hold at most that many ids above
    # ``id - max``. One range delete on the primary key, usually of one row.
    store.execute("DELETE FROM traces WHERE id <= ?", (int(row[0]) - store.config.trace_max_count,))
    return trace_id


_COLUMNS = "id, trace_id, chat_id, query, body, created_at, outcome, learned_at"


def _trace(row: Any) -> Trace:
    body = orjson.loads(row[4])
    return Trace(
        row_id=int(row[0]),
        id=str(row[1]),
        chat_id=row[2],
        query=str(row[3]),
        seeds=[(int(n), float(s)) for n, s in body["seeds"]],
        steps=[Step(int(a), int(b), float(w), float(x), int(h)) for a, b, w, x, h in body["steps"]],
        fired=[(int(n), float(a)) for n, a in body["fired"]],
        inhibited=[(int(n), float(a)) for n, a in body["inhibited"]],
        shown=[int(n) for n in body.get("shown", [n for n, _ in body["fired"]])],
        timings=dict(body["timings"]),
        created_at=str(row[5]),
        outcome=row[6],
        learned_at=row[7],
    )


def find_trace(store: Store, trace_id: str | None = None, chat_id: str | None = None) -> Trace:
    """A trace by id, else the chat's latest, else the latest of all; NotFound if none."""
    if trace_id is not None:
        row = store.one(f"SELECT {_COLUMNS} FROM traces WHERE trace_id = ?", (trace_id,))  # noqa: S608
        what = f"no trace {trace_id!r}"
    elif chat_id is not None:
        row = store.one(
            f"SELECT {_COLUMNS} FROM traces WHERE chat_id = ? ORDER BY id DESC LIMIT 1",  # noqa: S608
            (chat_id,),
        )
        what = f"no trace for chat {chat_id!r}"
    else:
        row = store.one(f"SELECT {_COLUMNS} FROM traces ORDER BY id DESC LIMIT 1")  # noqa: S608
        what = "no trace yet"
    if row is None:
        raise NotFound(what, id=trace_id or chat_id)
    return _trace(row)


def mark_learned(store: Store, row_id: int, outcome: float) -> None:
    """Record the latest outcome given for a trace."""
    store.execute(
        "UPDATE traces SET outcome = ?, learned_at = ? WHERE id = ?", (outcome, now_iso(), row_id)
    )


def trace_view(trace: Trace, public: Mapping[int, str]) -> dict[str, Any]:
    """A trace as callers see it: public node ids, steps as objects."""

    def name(node: int) -> str:
        return public.get(node, f"(deleted {node})")

    return {
        "trace_id": trace.id,
        "chat_id": trace.chat_id,
        "query": trace.query,
        "created_at": trace.created_at,
        "seeds": [[name(n), s] for n, s in trace.seeds],
        "steps": [
            {
                "source": name(s.source),
                "target": name(s.target),
                "weight": s.weight,
                "activation": s.activation,
                "hop": s.hop,
            }
            for s in trace.steps
        ],
        "fired_nodes": [name(n) for n, _ in trace.fired],
        "scores": {name(n): a for n, a in trace.fired},
        "inhibited": [name(n) for n, _ in trace.inhibited],
        "shown": [name(n) for n in trace.shown],
        "timings": trace.timings,
        "outcome": trace.outcome,
        "learned_at": trace.learned_at,
    }


def expired_traces(store: Store, max_age_cutoff: str, max_count: int) -> list[int]:
    """Row ids of traces made before ``max_age_cutoff`` or beyond the newest ``max_count``."""
    keep_from = store.scalar(
        "SELECT id FROM traces ORDER BY id DESC LIMIT 1 OFFSET ?", (max_count - 1,)
    )
    return [
        int(r[0])
        for r in store.execute(
            "SELECT id FROM traces WHERE created_at < ? OR id < ? ORDER BY id",
            (max_age_cutoff, 0 if keep_from is None else int(keep_from)),
        )
    ]
