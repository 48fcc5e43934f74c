"""brain.context: the one session-to-conversation lookup and the visibility scope.

The context list and the fresh tail are exercised through compaction and
assembly (tests/brain/lcm/compaction/test_compactor.py, tests/brain/lcm/assemble/test_assembler.py).
"""

from __future__ import annotations

import pytest

from brain import MessageIn, NotFound, Store
from brain.lcm.context import conversation, conversation_id, find_session, tail_start, visible
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


@pytest.mark.parametrize("count", [7, 8])
def test_the_fresh_tail_counts_parallel_tool_results_as_the_messages_openai_sends(
    store: Store, count: int
) -> None:
    # One user turn holding three results is three tool messages in OpenAI shape:
    # the tail counted in either shape begins at the same message. (The user's
    # newest request is after them, so the count decides where the tail starts.)
    calls = [f"t{n}" for n in range(3)]
    before = [MessageIn("user", "read three files"), MessageIn("assistant", "reading them")]
    anthropic_call = MessageIn(
        "assistant", [{"type": "tool_use", "id": c, "name": "read", "input": {}} for c in calls]
    )
    openai_call = MessageIn(
        "assistant",
        None,
        tool_calls=[
            {"id": c, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for c in calls
        ],
    )
    results = [{"type": "tool_result", "tool_use_id": c, "content": "ok"} for c in calls]
    after = [
        MessageIn("assistant", "all three are ok"),
        MessageIn("user", "thanks"),
        MessageIn("assistant", "welcome"),
    ]
    ingest(store, "a", [*before, anthropic_call, MessageIn("user", results), *after])
    ingest(
        store,
        "o",
        [*before, openai_call, *(MessageIn("tool", "ok", tool_call_id=c) for c in calls), *after],
    )
    first = {}
    for session in ("a", "o"):
        start = tail_start(store, conversation(store, session), count)
        first[session] = store.scalar(
            "SELECT content FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.session_id = ? AND m.seq = ?",
            (session, start),
        )
    assert first["a"] == first["o"]
