"""Checks for the lossless context layer, reading the tables directly.

``SMALL`` compaction settings fold a conversation of a few dozen messages;
``chat`` makes such a conversation. ``assert_invariants`` checks what must
hold between any two operations on a conversation (coverage, ordering, the
DAG's shape, running totals, describe and expand); ``assert_assembled`` checks
one ``assemble`` result against the stored conversation (budget, fresh tail,
summaries, tool pairing, role order).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from brain import Brain, BrainConfig, MessageIn
from brain.config import CompactionConfig
from brain.lcm.assemble import Assembled
from brain.lcm.context import conversation, tail_start
from brain.lcm.dag import load_summaries, summary_cost
from brain.lcm.ids import public_message_id
from brain.tokens import message_cost
from tests.brain.strategies import WORDS

SMALL = CompactionConfig(
    leaf_chunk_tokens=300,
    threshold_tokens=300,
    fresh_tail_count=4,
    leaf_fanout=3,
    condensed_fanout=2,
    leaf_target_tokens=60,
    condensed_target_tokens=80,
    flush_soft_tokens=100,
)
"""Compaction settings under which a conversation of a few dozen messages compacts."""

SMALL_BRAIN = BrainConfig(large_payload_tokens=100, compaction=SMALL)
"""Payloads over 100 tokens (400 characters) go to files."""

SUMMARY_XML = re.compile(r'<summary id="(sum_[0-9a-f]{16})" kind="(leaf|condensed)" depth="(\d+)"')
"""The head of a summary as ``assemble`` shows it (a user message)."""

_sessions = itertools.count()


def chat(n: int, *, start: int = 0, words: int = 30) -> list[MessageIn]:
    """``n`` alternating user/assistant messages of about ``words * 1.5`` tokens each."""
    out = []
    for i in range(start, start + n):
        text = " ".join(WORDS[(i + k) % len(WORDS)].split()[0] + str(k) for k in range(words))
        out.append(MessageIn("user" if i % 2 == 0 else "assistant", text, client_id=f"c{i}"))
    return out


def new_session() -> str:
    """A session name not used before in this process (property tests share a database)."""
    return f"s{next(_sessions)}"


@dataclass(frozen=True)
class Row:
    """A message row: what the checks need of it."""

    row_id: int
    id: str
    seq: int
    role: str
    content: str
    token_count: int
    human: bool  # a user message that is not only tool results
    name: str | None = None


def message_rows(brain: Brain, session: str) -> list[Row]:
    """The session's messages in seq order."""
    store = brain.store
    conv = conversation(store, session)
    rows = []
    for row_id, client_id, seq, role, content, tokens, name in store.execute(
        "SELECT id, client_id, seq, role, content, token_count, name FROM messages "
        "WHERE conversation_id = ? ORDER BY seq",
        (conv.id,),
    ):
        kinds = {
            str(k[0])
            for k in store.execute("SELECT kind FROM message_parts WHERE message_id = ?", (row_id,))
        }
        human = role == "user" and (not kinds or kinds != {"tool_result"})
        rows.append(
            Row(
                row_id,
                public_message_id(row_id, client_id),
                seq,
                role,
                content,
                tokens,
                human,
                name,
            )
        )
    return rows


def newest_human_seq(brain: Brain, session: str) -> int | None:
    """Seq of the newest user message that is not only tool results."""
    return max((r.seq for r in message_rows(brain, session) if r.human), default=None)


def assert_invariants(brain: Brain, session: str) -> None:
    """Everything that must hold between operations on ``session``'s context."""
    store = brain.store
    conv = conversation(store, session)
    rows = message_rows(brain, session)
    by_row = {r.row_id: r for r in rows}
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1)), "seqs are 1..n"

    summary_rows = [
        int(r[0])
        for r in store.execute("SELECT id FROM summaries WHERE conversation_id = ?", (conv.id,))
    ]
    summaries = load_summaries(store, summary_rows)
    sources: dict[int, list[tuple[int | None, int | None]]] = {}
    for sid, _ordinal, message_id, child_id in store.execute(
        "SELECT ss.summary_id, ss.ordinal, ss.message_id, ss.child_id FROM summary_sources ss "
        "JOIN summaries s ON s.id = ss.summary_id WHERE s.conversation_id = ? "
        "ORDER BY ss.summary_id, ss.ordinal",
        (conv.id,),
    ):
        sources.setdefault(int(sid), []).append((message_id, child_id))

    # The DAG: leaves cover contiguous messages; condensed summaries contiguous
    # children, the deepest one level down; every node has at most one parent.
    parents: Counter[int] = Counter()
    for row_id, s in summaries.items():
        src = sources.get(row_id, [])
        assert src, f"{s.id} has no sources"
        if s.kind == "leaf":
            assert s.depth == 0
            assert all(m is not None and c is None for m, c in src)
            seqs = [by_row[int(m)].seq for m, _ in src if m is not None]
            assert seqs == list(range(s.first_seq, s.last_seq + 1)), (s.id, seqs)
            assert s.message_count == len(seqs)
            assert s.descendant_count == 0
            assert s.descendant_tokens == sum(
                by_row[int(m)].token_count for m, _ in src if m is not None
            )
            parents.update(-int(m) for m, _ in src if m is not None)
        else:
            assert s.depth >= 1
            assert all(c is not None and m is None for m, c in src)
            kids = [summaries[int(c)] for _, c in src if c is not None]
            # One level above its deepest child; shallower children only when summaries
            # were folded to fit a session's budget (``Compactor._fit_summaries``).
            assert max(k.depth for k in kids) == s.depth - 1, (s.id, [k.depth for k in kids])
            assert kids[0].first_seq == s.first_seq
            assert kids[-1].last_seq == s.last_seq
            for a, b in itertools.pairwise(kids):
                assert a.last_seq + 1 == b.first_seq, (s.id, a.id, b.id)
            assert s.message_count == sum(k.message_count for k in kids)
            assert s.descendant_count == sum(k.descendant_count + 1 for k in kids)
            assert s.descendant_tokens == sum(k.descendant_tokens for k in kids)
            parents.update(k.row_id for k in kids)
    assert all(n == 1 for n in parents.values()), "a message or summary has two parents"

    # The context list: ordered, gapless, each item where its range starts.
    items = list(
        store.execute(
            "SELECT pos, message_id, summary_id, depth, token_count FROM context_items "
            "WHERE conversation_id = ? ORDER BY pos",
            (conv.id,),
        )
    )
    covered: Counter[int] = Counter()
    next_seq = 1
    for pos, message_id, summary_id, depth, tokens in items:
        assert pos == next_seq, f"item at {pos}, expected {next_seq}"
        if message_id is not None:
            row = by_row[int(message_id)]
            assert row.seq == pos
            assert depth is None
            assert tokens == message_cost(row.token_count)
            assert parents[-row.row_id] == 0, "a raw item is also in a summary"
            covered[row.row_id] += 1
            next_seq = pos + 1
        else:
            s = summaries[int(summary_id)]
            assert s.first_seq == pos
            assert depth == s.depth
            assert parents[s.row_id] == 0, "a context summary has a parent"
            kid_ids = [summaries[int(c)].id for _, c in sources[s.row_id] if c is not None]
            assert tokens == summary_cost(s, kid_ids)
            for m in _leaf_messages(s.row_id, summaries, sources):
                covered[m] += 1
            next_seq = s.last_seq + 1
    assert next_seq == len(rows) + 1, "the context list does not reach the newest message"
    assert covered == Counter({r.row_id: 1 for r in rows}), "a message is not covered exactly once"
    reachable = set()
    for _pos, _m, summary_id, _d, _t in items:
        if summary_id is not None:
            reachable |= _subtree(int(summary_id), sources)
    assert reachable == set(summaries), "a summary hangs outside the context list"

    # Running totals.
    assert conv.context_tokens == sum(int(i[4]) for i in items)
    assert conv.raw_tokens == sum(int(i[4]) for i in items if i[1] is not None)

    # The fresh tail: as the rule says, and raw.
    start = tail_start(store, conv, brain.config.compaction.fresh_tail_count)
    assert start == expected_tail_start(brain, session, brain.config.compaction.fresh_tail_count)
    assert all(i[1] is not None for i in items if i[0] >= start), "a summary in the fresh tail"
    human = newest_human_seq(brain, session)
    if human is not None:
        assert start <= human, f"the tail starts at {start}, after the newest user message {human}"

    # describe and expand reach the sources.
    public = {r.row_id: r.id for r in rows}
    for s in summaries.values():
        expanded = brain.expand(s.id, session=session, max_tokens=10**9)
        assert not expanded["truncated"]
        reached = [e["id"] for e in expanded["items"] if e["kind"] == "message"]
        wanted = [public[m] for m in _leaf_messages(s.row_id, summaries, sources)]
        # Level by level: children of different depths (folded to fit a budget) put
        # the shallower branch's messages first; each one still comes exactly once.
        seq_of = {r.id: r.seq for r in rows}
        assert sorted(reached, key=seq_of.__getitem__) == wanted, s.id
        described = brain.describe(s.id, session=session)
        assert described["sources"]["first_seq"] == s.first_seq
        assert described["sources"]["last_seq"] == s.last_seq
        assert described["depth"] == s.depth


def expected_tail_start(brain: Brain, session: str, count: int) -> int:
    """Where the fresh tail should start, worked out in Python from the rule.

    The newest ``count`` messages as OpenAI sends them (a message holding
    tool_result blocks is one message per result, plus one for the rest),
    stretched back to the newest user message (not one that only carries tool
    results) and to the call each tool result in the tail answers (the latest
    call of its id at or before it: ids can be reused), up to 8 times; then
    moved past every summary reaching into it.
    """
    store = brain.store
    conv = conversation(store, session)
    rows = message_rows(brain, session)
    if not rows:
        return 1
    calls: dict[str, list[int]] = {}
    results: list[tuple[int, str]] = []
    for seq, kind, call_id in store.execute(
        "SELECT m.seq, p.kind, p.tool_call_id FROM message_parts p "
        "JOIN messages m ON m.id = p.message_id WHERE m.conversation_id = ? "
        "AND p.tool_call_id IS NOT NULL AND p.kind IN ('tool_call', 'tool_result') ORDER BY m.seq",
        (conv.id,),
    ):
        if kind == "tool_call":
            calls.setdefault(call_id, []).append(seq)
        else:
            results.append((seq, call_id))
    results_in: Counter[int] = Counter()  # seq -> its content tool_result blocks
    other_in: set[int] = set()  # seqs holding any other part
    for seq, kind, origin in store.execute(
        "SELECT m.seq, p.kind, p.origin FROM message_parts p "
        "JOIN messages m ON m.id = p.message_id WHERE m.conversation_id = ?",
        (conv.id,),
    ):
        if kind == "tool_result" and origin == "content":
            results_in[seq] += 1
        else:
            other_in.add(seq)
    start, units = len(rows), 0
    for r in reversed(rows):
        start = r.seq
        units += max(1, results_in[r.seq] + (r.seq in other_in))
        if units >= max(count, 1):
            break
    human = [r.seq for r in rows if r.human]
    if human:
        start = min(start, human[-1])
    for _ in range(8):
        answered = [
            max((c for c in calls.get(call_id, ()) if c <= seq), default=None)
            for seq, call_id in results
            if seq >= start
        ]
        earliest = min((c for c in answered if c is not None), default=None)
        if earliest is None or earliest >= start:
            break
        start = earliest
    reaching = store.scalar(
        "SELECT max(last_seq) FROM summaries WHERE conversation_id = ? AND last_seq >= ?",
        (conv.id, start),
    )
    return start if reaching is None else int(reaching) + 1


def _leaf_messages(
    row_id: int, summaries: dict[int, Any], sources: dict[int, list[tuple[int | None, int | None]]]
) -> list[int]:
    out: list[int] = []
    for m, c in sources[row_id]:
        if m is not None:
            out.append(int(m))
        else:
            out += _leaf_messages(int(c or 0), summaries, sources)
    return out


def _subtree(row_id: int, sources: dict[int, list[tuple[int | None, int | None]]]) -> set[int]:
    out = {row_id}
    for _m, c in sources[row_id]:
        if c is not None:
            out |= _subtree(int(c), sources)
    return out


# -- assembled output ----------------------------------------------------------------------


def assert_assembled(brain: Brain, session: str, result: Assembled, fmt: str) -> None:
    """One ``assemble`` result against the stored conversation."""
    store = brain.store
    conv = conversation(store, session)
    tail = result.fresh_tail
    if result.over_budget:  # the tail alone does not fit: it comes whole, and nothing else
        assert result.tokens > result.budget or tail["tokens"] > result.budget
        assert result.included["summaries"] == 0
        assert result.included["messages"] == tail["count"]
    else:
        assert result.tokens <= result.budget, (result.tokens, result.budget, result.pairing)
    # The tail: every item from its first seq on, raw, reaching the newest user message.
    tail_items = list(
        store.execute(
            "SELECT message_id FROM context_items WHERE conversation_id = ? AND pos >= ?",
            (conv.id, tail["first_seq"]),
        )
    )
    assert tail["count"] == len(tail_items)
    assert all(m is not None for (m,) in tail_items)
    human = newest_human_seq(brain, session)
    if human is not None:
        assert tail["first_seq"] <= human, "the tail does not reach the newest user message"

    texts = output_texts(result.messages, fmt)
    summary_ids = [m.group(1) for t in texts if (m := SUMMARY_XML.match(t))]
    assert len(summary_ids) == result.included["summaries"]
    # A summary shown is in the context list, or under one there (shown as its sources
    # to use the room for detail).
    in_context = {
        str(r[0])
        for r in store.execute(
            "WITH RECURSIVE under(id) AS ("
            "SELECT summary_id FROM context_items WHERE conversation_id = ? "
            "AND summary_id IS NOT NULL UNION "
            "SELECT ss.child_id FROM summary_sources ss JOIN under u ON ss.summary_id = u.id "
            "WHERE ss.child_id IS NOT NULL) "
            "SELECT s.summary_id FROM under u JOIN summaries s ON s.id = u.id",
            (conv.id,),
        )
    }
    assert set(summary_ids) <= in_context
    # Nothing is left out silently: what is not shown is named by a stand-in, unless not
    # even a stand-in fits (then it is counted as dropped and no stand-in is shown).
    gap_texts = [t for t in texts if t.startswith("<history_gap ")]
    assert len(gap_texts) == result.gaps["count"]
    if result.dropped["messages"] or result.dropped["summaries"]:
        assert result.gaps["count"] == 0, (result.dropped, result.gaps)
    assert all(t.startswith('<summary id="sum_') for t in texts if "<summary" in t[:10])

    # Every text of the tail's messages is in the output, in order, after the summaries.
    # Anthropic has no name field: a named speaker's text starts "Name: ".
    wanted = [
        f"{r.name}: {r.content}" if fmt == "anthropic" and r.name else r.content
        for r in message_rows(brain, session)
        if r.seq >= tail["first_seq"] and r.role in ("user", "assistant") and _plain(brain, r)
    ]
    last_summary = max((i for i, t in enumerate(texts) if SUMMARY_XML.match(t)), default=-1)
    rest = iter(texts[last_summary + 1 :])
    for text in wanted:
        assert any(t == text for t in rest), f"tail text missing from output: {text[:60]!r}"

    if fmt == "anthropic":
        assert_anthropic_pairs(result.messages)
    else:
        assert_openai_pairs(result.messages)


def output_texts(messages: list[dict[str, Any]], fmt: str) -> list[str]:
    """Text of user/assistant text content in output order (summaries included)."""
    out: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b["text"] for b in content if b.get("type") == "text"]
    return out


def _plain(brain: Brain, row: Row) -> bool:
    """A message shown as exactly its stored text: string content with no tool parts."""
    kinds = list(
        brain.store.execute("SELECT kind FROM message_parts WHERE message_id = ?", (row.row_id,))
    )
    return not kinds and bool(row.content.strip())


def assert_openai_pairs(messages: list[dict[str, Any]]) -> None:
    """Each assistant ``tool_calls`` message is followed by exactly its ``tool`` answers
    (only the last call message may wait for some); no other ``tool`` message."""
    last_call = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")),
        default=-1,
    )
    trailing = last_call >= 0 and all(m["role"] == "tool" for m in messages[last_call + 1 :])
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"orphan tool result at {i}: {m}"
        i += 1
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        wanted = [c["id"] for c in m["tool_calls"]]
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        assert len(answered) == len(set(answered)), f"a call answered twice: {answered}"
        assert set(answered) <= set(wanted), f"results {answered} for calls {wanted}"
        if not (trailing and i == len(messages)):
            assert sorted(answered) == sorted(wanted), f"calls {wanted} answered by {answered}"


def assert_anthropic_pairs(messages: list[dict[str, Any]]) -> None:
    """Roles alternate starting with the user; every ``tool_use`` is answered in the next
    user message (results first), unless it is the in-progress last message; no
    ``tool_result`` answers anything but the message before it."""
    assert not messages or messages[0]["role"] == "user"
    for a, b in itertools.pairwise(messages):
        assert a["role"] != b["role"], "roles do not alternate"
    for i, m in enumerate(messages):
        assert isinstance(m["content"], list), m
        assert m["content"], m
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        if m["role"] == "user":
            kinds = [b["type"] for b in m["content"]]
            assert kinds[: len(results)] == ["tool_result"] * len(results), "results not first"
            before = messages[i - 1] if i else None
            calls = (
                [b["id"] for b in before["content"] if b["type"] == "tool_use"] if before else []
            )
            assert len(results) == len(set(results))
            if i == len(messages) - 1 and len(results) == len(kinds):
                assert set(results) <= set(calls), f"results {results} for calls {calls}"
            else:
                assert set(results) == set(calls), f"results {results} for calls {calls}"
        else:
            assert not results
            calls = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if calls and i == len(messages) - 1:
                continue  # still running
