"""Which clauses a fact summary keeps: greedy by new fact weight per token, within its room.

A fact counts once per summary, so a clause repeating what was taken gains
nothing (that is the deduplication across the chunk); the gain of each
candidate is re-evaluated lazily when it comes up. A clause said in the
previous summary is skipped; a clause of plain words carrying less than one
fact weight per two tokens is left out even when room remains (one naming a
new entity, number or path is not). When no clause fits whole, the best one
is cut to the room: a summary says something.
Tests: tests/brain/lcm/facts/test_summarizer.py.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Final

from brain.lcm.facts.layout import Layout
from brain.lcm.facts.scoring import Clause
from brain.lcm.summary_contract import clip_text, units

_MIN_DENSITY: Final = 1 / 2 / 4  # plain words: at least one fact weight per two tokens
MIN_GAIN: Final = 1.5  # below this a clause says nothing new worth a line
AGGRESSIVE_MIN_GAIN: Final = 3.0
_COST_PAD: Final = 24  # units: favours fuller clauses over fragments at equal density
_MIN_CLIPPED: Final = 40  # units: a cut clause shorter than this says nothing


def gain(clause: Clause, covered: set[str]) -> float:
    """What ``clause`` adds to a summary already holding the facts ``covered``."""
    return clause.bonus + sum(w for k, w in clause.facts.items() if k not in covered)


def pick(
    clauses: list[Clause],
    layout: Layout,
    room: int,
    previous: str,
    min_gain: float,
    *,
    sparse: bool = True,
) -> list[Clause]:
    """Greedy by new fact weight per unit, lazily re-evaluated (facts count once);
    the clauses picked (``layout.place`` marks them), in order. ``previous``: the
    lowercased text of the previous summary. ``sparse``: leave out plain clauses
    saying little for their tokens even when room remains."""
    covered: set[str] = set()
    seen: set[str] = set()
    heap: list[tuple[float, int]] = []
    for clause in clauses:
        low = clause.text.lower()
        if low in seen or (len(low) >= 24 and low in previous):
            continue  # said already, here or in the previous summary
        seen.add(low)
        value = gain(clause, covered)
        if value >= min_gain:
            cost = clause.size + units(layout.joint(None, clause)) + 1 + _COST_PAD
            heap.append((-clause.share * value / cost, clause.pos))
    heapq.heapify(heap)
    order: list[int] = []  # picked positions, sorted
    spent = 0
    while heap and spent < room:
        _, pos = heapq.heappop(heap)
        clause = clauses[pos]
        value = gain(clause, covered)
        if value < min_gain:
            continue
        at = bisect.bisect(order, pos)
        before = clauses[order[at - 1]] if at else None
        after = clauses[order[at]] if at < len(order) else None
        size = layout.size(clause, before, after)
        density = clause.share * value / (size + _COST_PAD)
        if heap and density < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-density, pos))  # stale: facts covered since
            continue
        if spent + size > room:
            continue
        if sparse and order and value < _MIN_DENSITY * size and _plain(clause, covered):
            continue  # says too little for its tokens (but a summary says something)
        spent += size
        covered.update(clause.facts)
        layout.place(clause)
        order.insert(at, pos)
    if not order:
        _clipped(clauses, layout, room, covered, min_gain)
        order = [c.pos for c in clauses if c.picked]
    return [clauses[p] for p in order]


def _clipped(
    clauses: list[Clause], layout: Layout, room: int, covered: set[str], min_gain: float
) -> None:
    """When no clause fits whole, the best one cut to the room: a summary says something."""
    best = max(
        (c for c in clauses if gain(c, covered) >= min_gain),
        key=lambda c: (gain(c, covered), -c.pos),
        default=None,
    )
    if best is None:
        return
    avail = room - units(layout.joint(None, best)) - 1
    if avail < _MIN_CLIPPED:
        return
    text = clip_text(best.text, avail)
    while text and units(text) > avail:  # non-ASCII text costs more than its length
        text = clip_text(text[:-1], len(text) - 2)
    if text:
        best.text, best.size, best.picked = text, units(text), True


def _plain(clause: Clause, covered: set[str]) -> bool:
    """Whether all the clause adds is words: no new name, number, date or path."""
    return all(k.startswith("w:") for k in clause.facts if k not in covered)
