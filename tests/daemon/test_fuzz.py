"""Whatever a client sends, the dispatcher answers with a documented code and
never with an internal error (hypothesis over request shapes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, MessageIn
from daemon.context import Context
from daemon.dispatch import Answer, Dispatcher
from protocol.errors import ERROR_CODES, InternalError
from protocol.methods import MAX_DEPTH, METHODS

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
block_types = st.sampled_from(
    [
        "text",
        "tool_use",
        "tool_result",
        "image",
        "image_url",
        "thinking",
        "file",
        "function_call",
        "x",
    ]
)
blocks = st.one_of(
    json_values,
    st.builds(
        lambda t, extra: {"type": t, **extra},
        block_types,
        st.dictionaries(
            st.sampled_from(
                [
                    "text",
                    "id",
                    "name",
                    "input",
                    "content",
                    "tool_use_id",
                    "source",
                    "file",
                    "call_id",
                    "arguments",
                    "output",
                    "thinking",
                    "image_url",
                ]
            ),
            json_values,
            max_size=4,
        ),
    ),
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "robot"]) | json_values},
    optional={
        "content": st.text() | st.lists(blocks, max_size=4) | json_values,
        "id": st.text(max_size=6) | json_values,
        "name": st.text(max_size=6) | json_values,
        "created_at": st.sampled_from(
            ["2026-01-01T00:00:00Z", "yesterday", "0001-01-01T00:00:00+01:00"]
        )
        | json_values,
        "tool_calls": st.lists(
            json_values
            | st.fixed_dictionaries({"id": st.text(max_size=4), "function": json_values}),
            max_size=2,
        )
        | json_values,
        "tool_call_id": st.text(max_size=6) | json_values,
        "extra": json_values,
    },
)
ingest_params = st.fixed_dictionaries(
    {"session": st.text(max_size=8) | json_values},
    optional={
        "messages": st.lists(messages, max_size=3) | json_values,
        "message": messages | json_values,
        "session_key": st.text(max_size=4) | json_values,
    },
)
requests = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"method": st.sampled_from(sorted(METHODS)) | json_values},
        optional={
            "id": st.integers() | st.text(max_size=4) | json_values,
            "params": ingest_params | json_values,
            "jsonrpc": st.just("2.0") | json_values,
        },
    ),
)


@pytest.fixture(scope="module")
def dispatcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dispatcher]:
    path: Path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    engine = Brain(path, BrainConfig(large_payload_tokens=8))
    engine.ingest("s", [MessageIn("user", "a message to find")])
    yield Dispatcher(Context(engine))
    engine.close()


def _answer(dispatcher: Dispatcher, line: bytes) -> dict[str, Any] | None:
    async def once() -> bytes | None:
        item = dispatcher.prepare(line)
        return item.frame if isinstance(item, Answer) else await dispatcher.execute(item)

    frame = anyio.run(once)
    return None if frame is None else orjson.loads(frame)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request=requests)
def test_any_request_gets_a_documented_answer_never_an_internal_error(
    dispatcher: Dispatcher, request: Any
) -> None:
    line = json.dumps(request).encode()  # stdlib: huge integers and Infinity get through too
    answer = _answer(dispatcher, line)
    is_notification = isinstance(request, dict) and "id" not in request and "method" in request
    if answer is None:
        assert is_notification
        return
    if "error" in answer:
        assert answer["error"]["code"] in ERROR_CODES
        assert answer["error"]["code"] != InternalError.CODE, answer
        assert str(dispatcher.brain.path.parent) not in orjson.dumps(answer).decode()
    else:
        assert "result" in answer


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    method=st.sampled_from(["describe", "expand", "suppress", "unsuppress"]),
    number=st.integers(min_value=0, max_value=10**40) | st.integers(2**63 - 2, 2**63 + 2),
    session=st.sampled_from(["s", "absent", None]),
)
def test_any_generated_looking_id_gets_a_documented_answer_never_an_internal_error(
    dispatcher: Dispatcher, method: str, number: int, session: str | None
) -> None:
    msg_id = f"msg_{number}"
    params: dict[str, Any] = {"session": session} if session else {"all": True}
    params |= {"ids": [msg_id]} if method.endswith("suppress") else {"id": msg_id}
    answer = _answer(dispatcher, orjson.dumps({"id": 1, "method": method, "params": params}))
    assert answer is not None
    if session == "absent":  # the session is looked up first: a mistaken name is told first
        assert answer["error"]["code"] == -32001, answer
        assert answer["error"]["message"].startswith("no session 'absent'")
    elif number > 2**63 - 1 and method != "expand":  # expand takes summary ids: not found
        assert answer["error"]["code"] == -32602, answer
    elif "error" in answer:
        assert answer["error"]["code"] in ERROR_CODES
        assert answer["error"]["code"] != InternalError.CODE, answer


def test_a_block_nested_past_the_limit_is_invalid_params_naming_it(dispatcher: Dispatcher) -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    params = {
        "session": "s",
        "message": {"role": "user", "content": [{"type": "text", "text": "x", "d": deep}]},
    }
    answer = _answer(dispatcher, orjson.dumps({"id": 1, "method": "ingest", "params": params}))
    assert answer is not None
    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"].startswith("params.message.content[0]:")
