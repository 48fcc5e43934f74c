"""expand_query: cited answers from the source messages under summaries and search hits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from brain import Brain, MessageIn, NotFound
from brain.providers.llm import ChatClient, LLMConfig
from brain.recall.expand import expand_query
from tests.brain.lcm.helpers import chat
from tests.openai_server import OpenAIServer, Reply

ANSWER = "The staging database password rotates every Tuesday at noon."


def _conversation(brain: Brain, session: str = "s") -> list[str]:
    """A conversation whose answer sits in message ``c2``, folded into summaries."""
    messages = chat(30)
    messages[2] = MessageIn("assistant", f"Noted.\n{ANSWER}", client_id="c2")
    messages[5] = MessageIn("user", "When does the staging password rotate again?", client_id="c5")
    brain.ingest(session, messages)
    report = brain.compact(session)
    assert report.summaries
    return [str(r[0]) for r in brain.store.execute("SELECT summary_id FROM summaries")]


def test_the_answer_is_reached_through_a_summary_and_cited_with_its_message_id(
    small: Brain,
) -> None:
    summaries = _conversation(small)
    leaf = small.store.scalar(
        "SELECT s.summary_id FROM summaries s JOIN summary_sources x ON x.summary_id = s.id "
        "JOIN messages m ON m.id = x.message_id WHERE m.client_id = 'c2'"
    )
    result = small.expand_query(
        "when does the staging database password rotate", session="s", summary_ids=summaries
    )
    assert result["mode"] == "extractive"
    assert f"{ANSWER} [c2]" in result["answer"]
    cited = {c["id"]: c for c in result["citations"]}
    assert cited["c2"]["summary"] == leaf
    assert cited["c2"]["session"] == "s"
    assert cited["c2"]["kind"] == "message"
    assert set(result["summaries"]) <= set(summaries)
    assert leaf in result["summaries"]


def test_a_query_alone_finds_the_candidates(small: Brain) -> None:
    _conversation(small)
    result = small.expand_query("password rotation day", session="s", query="staging password")
    assert "[c2]" in result["answer"]


def test_passages_are_in_time_order_and_deduplicated(fresh_brain: Brain) -> None:
    fresh_brain.ingest(
        "s",
        [
            MessageIn("user", "The deploy key lives in vault.", client_id="a"),
            MessageIn("assistant", "Unrelated chatter about lunch.", client_id="b"),
            MessageIn("user", "The deploy key lives in vault!", client_id="c"),
            MessageIn(
                "assistant", "Rotate the deploy key monthly, deploy key owners say.", client_id="d"
            ),
        ],
    )
    result = fresh_brain.expand_query("where is the deploy key", session="s", query="deploy key")
    ids = [c["id"] for c in result["citations"]]
    assert ids == ["a", "d"]
    assert result["answer"].index("[a]") < result["answer"].index("[d]")
    assert "lunch" not in result["answer"]


def test_the_answer_stays_within_the_token_cap(small: Brain) -> None:
    summaries = _conversation(small)
    result = small.expand_query(
        "staging password", session="s", summary_ids=summaries, max_tokens=20
    )
    assert result["tokens"] <= 20
    assert result["truncated"] is True


def test_other_sessions_are_not_found(small: Brain) -> None:
    summaries = _conversation(small)
    small.ingest("other", [MessageIn("user", "hello", client_id="x")])
    result = small.expand_query(
        "staging password", session="other", summary_ids=summaries, query="staging password"
    )
    assert result["citations"] == []
    assert result["answer"] == ""
    assert result["summaries"] == []
    with pytest.raises(NotFound, match="no session 'nobody'"):
        small.expand_query(
            "staging password", session="nobody", summary_ids=summaries, query="staging password"
        )


def test_suppressed_messages_are_never_cited(small: Brain) -> None:
    summaries = _conversation(small)
    small.suppress(["c2"], session="s")
    result = small.expand_query(
        "staging database password rotates tuesday",
        session="s",
        summary_ids=summaries,
        query="tuesday noon",
    )
    assert "c2" not in {c["id"] for c in result["citations"]}
    assert "Tuesday at noon" not in result["answer"]


def test_a_scope_of_conversation_ids_works_like_a_predicate(small: Brain) -> None:
    summaries = _conversation(small)
    found = expand_query(small.store, "staging password", summary_ids=summaries, scope=[1])
    assert "[c2]" in found["answer"]
    assert (
        expand_query(small.store, "staging password", summary_ids=summaries, scope=[])["citations"]
        == []
    )


# -- with an LLM ------------------------------------------------------------------------


@pytest.fixture
def llm_brain(small: Brain, server: OpenAIServer) -> Iterator[Brain]:
    client = ChatClient(LLMConfig(base_url=server.base_url, model="m", max_retries=0))
    small.chat = client
    yield small
    small.chat = None


def test_an_llm_answer_that_cites_the_passages_is_used(
    llm_brain: Brain, server: OpenAIServer
) -> None:
    summaries = _conversation(llm_brain)
    server.enqueue(Reply.text("It rotates on Tuesdays at noon [c2]."))
    result = llm_brain.expand_query(
        "when does the password rotate", session="s", summary_ids=summaries
    )
    assert result["mode"] == "llm:m"
    assert result["answer"] == "It rotates on Tuesdays at noon [c2]."
    assert [c["id"] for c in result["citations"]] == ["c2"]
    assert "fallback" not in result
    prompt = server.requests[0].json()["messages"]
    assert "data, not instructions" in prompt[0]["content"]
    assert "[c2]" in prompt[1]["content"]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.text("It rotates on Tuesdays."),
        Reply.text("Invented [msg_999999]."),
        Reply.text(""),
        Reply.text("[c2] " + "far too long " * 2_000),
        Reply.error(500),
    ],
)
def test_an_llm_answer_without_citations_or_a_failure_falls_back_to_extractive(
    llm_brain: Brain, server: OpenAIServer, reply: Reply
) -> None:
    summaries = _conversation(llm_brain)
    server.enqueue(reply)
    result = llm_brain.expand_query(
        "when does the password rotate", session="s", summary_ids=summaries
    )
    assert result["mode"] == "extractive"
    assert result["fallback"] is True
    assert f"{ANSWER} [c2]" in result["answer"]


def test_the_model_is_called_without_holding_the_engine_lock(
    llm_brain: Brain, server: OpenAIServer
) -> None:
    summaries = _conversation(llm_brain)
    server.enqueue(Reply.text("Tuesdays [c2].", delay=2.0))
    out: dict[str, Any] = {}

    def ask() -> None:
        out.update(llm_brain.expand_query("staging password", session="s", summary_ids=summaries))

    worker = threading.Thread(target=ask)
    worker.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.requests
    # Ordering, not timing: had the lock been held across the model call,
    # info() could only return after the answer, when the worker is done.
    llm_brain.info()
    assert worker.is_alive()
    worker.join(timeout=10)
    assert out["mode"] == "llm:m"
