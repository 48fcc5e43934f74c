"""brain.lcm.compaction.chunks: what compaction takes and keeps, counted alike in either
message shape."""

from __future__ import annotations

from brain import MessageIn, Store
from brain.lcm.compaction.chunks import newest_within
from brain.lcm.context import conversation_id
from brain.lcm.ingest import ingest

CALLS = ("t0", "t1")
OUTPUTS = ("x" * 240, "ok")  # a large result (inline: under the payload threshold), a tiny one


def _anthropic() -> list[MessageIn]:
    call = MessageIn(
        "assistant", [{"type": "tool_use", "id": c, "name": "read", "input": {}} for c in CALLS]
    )
    results = [
        {"type": "tool_result", "tool_use_id": c, "content": o}
        for c, o in zip(CALLS, OUTPUTS, strict=True)
    ]
    return [call, MessageIn("user", results)]


def _openai() -> list[MessageIn]:
    call = MessageIn(
        "assistant",
        None,
        tool_calls=[
            {"id": c, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for c in CALLS
        ],
    )
    return [
        call,
        *(MessageIn("tool", o, tool_call_id=c) for c, o in zip(CALLS, OUTPUTS, strict=True)),
    ]


def test_the_tail_a_budget_keeps_takes_parallel_results_whole_in_either_shape(
    store: Store,
) -> None:
    # Room for the answer and the tiny result, not the large one: keeping the tiny
    # tool message alone would pull its call and the large result into the tail
    # (tail_start), which the Anthropic turn holding both never does.
    request = MessageIn("user", "read both")
    answer = MessageIn("assistant", "both read")
    ingest(store, "a", [request, *_anthropic(), answer])
    ingest(store, "o", [request, *_openai(), answer])
    costs = [
        int(r[0])
        for r in store.execute(
            "SELECT token_count FROM context_items WHERE conversation_id = ? ORDER BY pos DESC",
            (conversation_id(store, "o"),),
        )
    ]
    cap = costs[0] + costs[1]  # the answer and the tiny result
    kept = {s: newest_within(store, conversation_id(store, s), 32, cap) for s in ("a", "o")}
    assert kept == {"a": 1, "o": 1}  # the answer only
