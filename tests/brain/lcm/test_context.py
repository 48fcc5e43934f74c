"""brain.context: the one session-to-conversation lookup and the visibility scope.

The context list and the fresh tail are exercised through compaction and
assembly (tests/brain/lcm/compaction/test_compactor.py, tests/brain/lcm/assemble/test_assembler.py).
"""

from __future__ import annotations

import pytest

from brain import MessageIn, NotFound, Store
from brain.lcm.context import conversation, conversation_id, find_session, visible
from brain.lcm.ingest import ingest


def test_a_session_is_found_with_its_conversation_and_session_key(store: Store) -> None:
    ingest(store, "alpha", [MessageIn("user", "hi")], session_key="team")
    ingest(store, "beta", [MessageIn("user", "hi")])
    alpha, beta = find_session(store, "alpha"), find_session(store, "beta")
    assert alpha is not None
    assert beta is not None
    assert (alpha.id, alpha.session_key) == (conversation(store, "alpha").id, "team")
    assert (beta.id, beta.session_key) == (conversation(store, "beta").id, None)
    assert conversation_id(store, "beta") == beta.id


def test_an_unknown_session_is_none_or_not_found(store: Store) -> None:
    assert find_session(store, "nobody") is None
    with pytest.raises(NotFound):
        conversation_id(store, "nobody")


def test_a_scope_is_a_predicate_or_the_visible_ids() -> None:
    assert [visible([2, 3])(i) for i in (1, 2, 3)] == [False, True, True]
    assert visible(lambda i: i > 1)(2)
    assert not visible(())(1)
