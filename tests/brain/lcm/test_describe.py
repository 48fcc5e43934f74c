"""brain.lcm.describe: describe summaries, payload files and messages; expand summaries; scope."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, InvalidInput, MessageIn, NotFound
from tests.brain.lcm.helpers import chat, new_session
from tests.brain.strategies import as_sent, tool_conversations

OUTPUT = "\n".join(f'{{"row": {i}, "name": "item {i}", "ok": true}}' for i in range(80)) + "\n"


def summaries(brain: Brain, session: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every summary of a session, described, oldest and shallowest first."""
    rows = brain.store.execute(
        "SELECT s.summary_id FROM summaries s JOIN conversations c ON c.id = s.conversation_id "
        "WHERE c.session_id = ? ORDER BY s.depth, s.first_seq",
        (session,),
    )
    found = [brain.describe(str(r[0]), session=session) for r in rows]
    return [d for d in found if kind is None or d["summary_kind"] == kind]


def folded(brain: Brain, session: str = "s") -> None:
    """Ingest 60 messages plus a tool round with a payload file, and sweep."""
    brain.ingest(
        session,
        [
            *chat(6),
            MessageIn(
                "assistant",
                "",
                client_id="call",
                tool_calls=[
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "cat", "arguments": '{"path": "rows.jsonl"}'},
                    }
                ],
            ),
            MessageIn("tool", OUTPUT, client_id="out", name="cat", tool_call_id="c1"),
            *chat(54, start=6),
        ],
    )
    brain.compact(session)


def file_id(brain: Brain) -> str:
    return str(brain.store.scalar("SELECT file_id FROM large_files"))


# -- properties -------------------------------------------------------------------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(conversation_=tool_conversations(), data=st.data())
def test_expanding_any_summary_reaches_its_messages_as_they_were_sent(
    small: Brain, conversation_: list[MessageIn], data: st.DataObject
) -> None:
    session = new_session()
    ingested = small.ingest(session, conversation_)
    small.compact(session)
    sent = {
        o.id: m for o, m in zip(ingested.messages, conversation_, strict=True) if not o.duplicate
    }
    for described in summaries(small, session):
        full = small.expand(described["id"], session=session, max_tokens=10**9)
        reached = [e["id"] for e in full["items"] if e["kind"] == "message"]
        if described["summary_kind"] == "leaf":
            assert reached == described["sources"]["messages"]
        assert len(reached) == described["message_count"]
        seqs = [e["seq"] for e in full["items"] if e["kind"] == "message"]
        assert seqs == list(range(described["first_seq"], described["last_seq"] + 1))
        for message_id in reached:
            described_message = small.describe(message_id, session=session)
            assert described_message["id"] == message_id
            assert described_message["message"] == as_sent(sent[message_id])
        # Under a cap: a prefix of the full walk, within the cap, truncated when cut;
        # never empty: a first item over the cap alone comes back cut to it.
        cap = data.draw(st.integers(1, max(1, full["tokens"])), label="cap")
        part = small.expand(described["id"], session=session, max_tokens=cap)
        whole = [e for e in part["items"] if "truncated" not in e]
        assert whole == full["items"][: len(whole)]
        assert part["items"]
        if not whole:
            (cut,) = part["items"]
            first = full["items"][0]
            assert cut["truncated"]
            assert first["content"].startswith(cut["content"])
            same = ("content", "tokens", "truncated")
            assert {k: v for k, v in cut.items() if k not in same} == {
                k: v for k, v in first.items() if k not in same
            }
        else:
            assert whole == part["items"]
        assert part["tokens"] == sum(e["tokens"] for e in part["items"]) <= cap
        assert part["truncated"] == (len(whole) < len(full["items"]))


# -- summaries --------------------------------------------------------------------------------


def test_describe_a_leaf_summary_gives_its_messages_range_and_parent(small: Brain) -> None:
    folded(small)
    leaf = summaries(small, "s", "leaf")[0]
    assert leaf["kind"] == "summary"
    assert leaf["id"].startswith("sum_")
    assert leaf["depth"] == 0
    assert leaf["session"] == "s"
    assert leaf["sources"]["first_seq"] == leaf["first_seq"] == 1
    assert leaf["sources"]["messages"] == [f"c{i}" for i in range(leaf["last_seq"])]
    assert leaf["children"] == []
    assert leaf["parent"] is not None  # folded into a condensed summary
    assert leaf["subtree"]["messages"] == leaf["message_count"] == leaf["last_seq"]
    assert leaf["subtree"]["summary_tokens"] == leaf["token_count"]
    assert leaf["content"].strip()


def test_describe_a_condensed_summary_gives_children_and_subtree_costs(small: Brain) -> None:
    folded(small)
    top = summaries(small, "s")[-1]
    assert top["summary_kind"] == "condensed"
    assert top["parent"] is None
    kids = [small.describe(k["id"], session="s") for k in top["children"]]
    assert [k["depth"] for k in kids] == [top["depth"] - 1] * len(kids)
    assert kids[0]["first_seq"] == top["first_seq"]
    assert kids[-1]["last_seq"] == top["last_seq"]
    assert all(k["parent"] == top["id"] for k in kids)
    assert top["subtree"]["summary_tokens"] == top["token_count"] + sum(
        k["subtree"]["summary_tokens"] for k in kids
    )
    assert top["subtree"]["source_tokens"] == sum(k["subtree"]["source_tokens"] for k in kids)
    assert top["message_count"] == sum(k["message_count"] for k in kids)
    assert "sources" in top
    assert "messages" not in top["sources"]


def test_summaries_remember_the_payload_files_below_them(small: Brain) -> None:
    folded(small)
    holder = next(s for s in summaries(small, "s", "leaf") if s["first_seq"] <= 8 <= s["last_seq"])
    assert holder["file_ids"] == [file_id(small)]
    assert file_id(small) in summaries(small, "s")[-1]["file_ids"]


def test_expand_walks_level_by_level_under_the_cap(small: Brain) -> None:
    folded(small)
    top = summaries(small, "s")[-1]
    full = small.expand(top["id"], session="s", max_tokens=10**9)
    kinds = [e["kind"] for e in full["items"]]
    # Summaries (each level in time order) before any message.
    assert kinds == sorted(kinds, key=lambda k: k == "message")
    assert [e["id"] for e in full["items"][: len(top["children"])]] == [
        k["id"] for k in top["children"]
    ]
    assert all(e["parent"] for e in full["items"])
    children_only = sum(k["tokens"] for k in top["children"])
    part = small.expand(top["id"], session="s", max_tokens=children_only)
    assert [e["id"] for e in part["items"]] == [k["id"] for k in top["children"]]
    assert part["truncated"]


# -- messages ---------------------------------------------------------------------------------


def test_describe_a_message_gives_it_as_sent_and_the_summary_covering_it(small: Brain) -> None:
    folded(small)
    small.ingest("s", [MessageIn("user", "no id here")])
    leaf = summaries(small, "s", "leaf")[0]
    described = small.describe("c0", session="s")
    assert described["kind"] == "message"
    assert described["seq"] == 1
    assert described["covered_by"] == leaf["id"]
    assert described["id"] == "c0"
    assert described["message"] == {"role": "user", "content": chat(1)[0].content}
    generated = str(small.store.scalar("SELECT 'msg_' || id FROM messages WHERE client_id IS NULL"))
    raw = small.describe(generated, session="s")
    assert raw["covered_by"] is None
    assert raw["message"]["content"] == "no id here"
    out = small.describe("out", session="s")["message"]
    assert out["content"] == OUTPUT  # read back from its payload file


# -- payload files ----------------------------------------------------------------------------


def test_describe_a_payload_file_gives_an_exploration_and_its_content(small: Brain) -> None:
    folded(small)
    described = small.describe(file_id(small), session="s")
    assert described["kind"] == "file"
    assert described["message_id"] == "out"
    assert described["tool"] == "cat"
    assert described["bytes"] == len(OUTPUT.encode())
    assert described["content"] == OUTPUT
    assert not described["truncated"]
    exploration = described["exploration"]
    assert exploration["lines"] == 80
    assert exploration["summary"]
    assert exploration["kind"]


def test_describe_a_payload_file_gives_a_line_range_or_a_capped_head(small: Brain) -> None:
    folded(small)
    fid = file_id(small)
    lines = small.describe(fid, session="s", lines=(2, 3))
    assert lines["content"] == "".join(OUTPUT.splitlines(keepends=True)[1:3])
    assert lines["lines"] == [2, 3]
    capped = small.describe(fid, session="s", max_tokens=50)
    assert capped["truncated"]
    assert OUTPUT.startswith(capped["content"])
    with pytest.raises(InvalidInput):
        small.describe(fid, session="s", lines=(3, 2))


# -- scope ------------------------------------------------------------------------------------


def test_ids_of_another_session_are_not_found(small: Brain) -> None:
    folded(small, "a")
    small.ingest("b", chat(3, start=100))
    ids = [summaries(small, "a")[0]["id"], file_id(small), "c0", "out"]
    for target in ids:
        with pytest.raises(NotFound):
            small.describe(target, session="b")
        with pytest.raises(NotFound):
            small.describe(target, session="nobody")
        assert small.describe(target, session=None)["kind"] in ("summary", "file", "message")
    with pytest.raises(NotFound):
        small.expand(ids[0], session="b")
    with pytest.raises(NotFound):
        small.expand(ids[0], session="nobody")
    assert small.expand(ids[0], session=None)["items"]


def test_ids_that_do_not_exist_are_not_found(small: Brain) -> None:
    folded(small)
    for target in ("sum_0000000000000000", "file_0000000000000000", "nope", "msg_999999"):
        with pytest.raises(NotFound):
            small.describe(target, session="s")
    with pytest.raises(NotFound):
        small.expand("sum_0000000000000000", session="s")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("sum_0123456789abcdef", "no summary 'sum_0123456789abcdef'"),
        ("sum_abc", "no summary 'sum_abc' (a summary id is sum_ and 16 hex digits)"),
        ("SUM_0123", "no message 'SUM_0123'"),
        ("rol_42", "no rollup 'rol_42' (a rollup id is rol_ and 16 hex digits)"),
        ("file_12", "no file 'file_12' (a file id is file_ and 16 hex digits)"),
        ("nd_0123456789abcdef", "no message 'nd_0123456789abcdef' (nd_ ids are graph nodes"),
        ("msg_99", "no message 'msg_99'"),
    ],
)
def test_an_id_that_names_nothing_is_not_found_as_the_kind_its_prefix_says(
    fresh_brain: Brain, target: str, message: str
) -> None:
    """A model that mistypes a summary id hears of a summary, not of a message."""
    fresh_brain.ingest("s", [MessageIn("user", "hello")])
    with pytest.raises(NotFound) as raised:
        fresh_brain.describe(target, session="s")
    assert raised.value.message.startswith(message)
    assert raised.value.data["id"] == target
    # The prefix only words the error: a message whose own id looks like one is found.
    fresh_brain.ingest("s", [MessageIn("user", "hi", client_id="sum_abc")])
    assert fresh_brain.describe("sum_abc", session="s")["kind"] == "message"


def test_describe_and_expand_in_a_session_that_does_not_exist_name_the_session(
    fresh_brain: Brain,
) -> None:
    fresh_brain.ingest("s", [MessageIn("user", "hello", client_id="m1")])
    with pytest.raises(NotFound, match="no session 'nobody'"):
        fresh_brain.describe("m1", session="nobody")
    with pytest.raises(NotFound, match="no session 'nobody'"):
        fresh_brain.expand("sum_0123456789abcdef", session="nobody")
