"""What learning may change in a query's answer: it promotes a bounded share, it demotes nothing.

A query's fired nodes come in two orders. The query's own is the seeds ranked by how
well they match the query (their seed score without any learned prior). The learned
one is the traversal's: activation after priors, learned and taught edges spread it.
``bounded_order`` merges them: it follows the learned order, but a node the learned
order places ahead of the query's next one is a promotion, and in every prefix of the
result at most ``LEARNED_SHARE`` of the places are promotions. So a node the query
ranks ``r``-th is never placed below ``r / (1 - LEARNED_SHARE)``: with the default,
the query's best 7 are always in the top 10, whatever was learned (the guarantee
tests/brain/graph/test_safeguard.py checks through ``query``).

The other half of the safeguard is in the learning itself: a learned prior is applied
only where positive (``brain.graph.seeding.positive_prior``), and an outcome never
makes an edge inhibitory (``brain.graph.learning``): only a correction, which a
person teaches, can stop a node the query matches from firing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

LEARNED_SHARE: Final = 0.3
"""The most places of any prefix of a query's answer that learning (and spreading) may
give to nodes the query alone ranks lower. LoCoMo dev R@10 query / query_learned /
query_learned:outcomes: share 0 79.9 / 80.1 / 79.9, 0.3 80.5 / 81.2 / 80.4, 1 (no
bound) 80.2 / 62.8 / 78.7 (taught nodes seeded at full strength then)."""


def bounded_order(
    query_order: Sequence[int],
    learned_order: Sequence[int],
    share: float = LEARNED_SHARE,
    limit: int | None = None,
) -> list[int]:
    """``learned_order``'s nodes, in its order but for promotions past ``share``.

    ``query_order``: the seeds among them, best match first; the nodes only the
    learned order has (reached by spreading) rank after the query's when they
    would exceed the share. ``limit``: only the first ``limit`` of the result (each
    place depends only on the places before it, so it is the whole order's prefix).
    """
    out: list[int] = []
    taken: set[int] = set()
    present = set(learned_order)
    queue = [n for n in query_order if n in present]
    qi = li = 0
    promoted = 0
    wanted = len(learned_order) if limit is None else min(limit, len(learned_order))
    while len(out) < wanted:
        while qi < len(queue) and queue[qi] in taken:
            qi += 1
        while li < len(learned_order) and learned_order[li] in taken:
            li += 1
        head = queue[qi] if qi < len(queue) else None
        nxt = learned_order[li] if li < len(learned_order) else None
        if nxt is None or (
            head is not None and nxt != head and promoted + 1 > math.ceil(share * (len(out) + 1))
        ):
            pick = head
        else:
            pick = nxt
            if head is not None and nxt != head:
                promoted += 1
        assert pick is not None
        out.append(pick)
        taken.add(pick)
    return out
