"""brain.lcm.content: validation, flattening, payload offload, timestamps, restore."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from brain import InvalidInput, MessageIn
from brain.lcm.content import (
    FILE_MARKER,
    Normalized,
    message_part_block,
    new_file_id,
    normalize,
    normalize_time,
    replay_hash,
    restore,
)
from brain.payloads.files import FILE_ID_RE
from brain.tokens import estimate_tokens, message_cost

BIG = 1_000_000
NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def _norm(msg: MessageIn, large_tokens: int = BIG) -> Normalized:
    return normalize(msg, where="messages[0]", large_tokens=large_tokens, now=NOW)


def _roundtrip(msg: MessageIn, large_tokens: int) -> dict[str, Any]:
    """normalize then restore, with payload files held in a dict."""
    n = _norm(msg, large_tokens)
    files = {p.file_id: p.data for p in n.payloads}
    rows = [
        (
            p.kind,
            p.origin,
            p.tool_call_id,
            message_part_block(p),
            None if p.payload is None else p.payload.file_id,
        )
        for p in n.parts
    ]
    return restore(n.role, n.name, n.content, n.content_shape, rows, files.__getitem__, n.extra)


# -- validation -------------------------------------------------------------------


def test_unknown_role_is_invalid_input_naming_the_role_field() -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn("robot", "hi"))
    assert err.value.field == "messages[0].role"


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"text": "no type"}, "messages[0].content[1].type"),
        ({"type": 7}, "messages[0].content[1].type"),
        ({"type": "text"}, "messages[0].content[1].text"),
        ({"type": "thinking", "thinking": None}, "messages[0].content[1].thinking"),
        ({"type": "tool_use", "name": "f", "input": {}}, "messages[0].content[1].id"),
        ({"type": "tool_use", "id": "t1", "input": {}}, "messages[0].content[1].name"),
        ({"type": "tool_result", "content": "x"}, "messages[0].content[1].tool_use_id"),
        ({"type": "function_call", "name": "f"}, "messages[0].content[1].call_id"),
    ],
)
def test_malformed_block_is_invalid_input_naming_the_field(
    block: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn("assistant", [{"type": "text", "text": "ok"}, block]))
    assert err.value.field == field
    assert err.value.data == {"field": field}


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ("not an object", "messages[0].tool_calls[0]"),
        ({"function": {"name": "f"}}, "messages[0].tool_calls[0].id"),
        ({"id": "c1", "function": "f"}, "messages[0].tool_calls[0].function"),
        ({"id": "c1", "function": {"arguments": "{}"}}, "messages[0].tool_calls[0].function.name"),
    ],
)
def test_malformed_openai_tool_call_is_invalid_input_naming_the_field(
    call: Any, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn("assistant", "", tool_calls=[call]))
    assert err.value.field == field


def test_unknown_block_types_are_kept_as_other_parts_flattened_to_their_label() -> None:
    block = {"type": "future_thing", "payload": [1, 2, 3]}
    n = _norm(MessageIn("user", [block]))
    assert [(p.kind, p.block) for p in n.parts] == [("other", block)]
    assert n.content == "[future_thing]"  # what a format without a slot for it shows


# -- flattening ---------------------------------------------------------------------


def test_string_content_is_its_own_flattened_text_with_no_parts() -> None:
    n = _norm(MessageIn("user", "hello world", name="ann"))
    assert (n.content, n.content_shape, n.parts) == ("hello world", "string", [])
    # The speaker's name is shown with the message, so it is counted too.
    assert n.token_count == estimate_tokens("hello world") + estimate_tokens("ann: ")
    assert n.name == "ann"


def test_blocks_flatten_to_searchable_text_one_line_each() -> None:
    blocks = [
        {"type": "text", "text": "look at this"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "x"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "hit"}]},
        {"type": "document", "title": "spec.pdf", "source": {}},
        {"type": "file", "file": {"filename": "a.txt"}},
        {"type": "file", "file": "not-an-object"},
    ]
    n = _norm(MessageIn("assistant", blocks))
    assert n.content_shape == "blocks"
    assert n.content.split("\n") == [
        "look at this",
        "[image]",
        "hmm",
        'grep({"q":"x"})',
        "hit",
        "[file: spec.pdf]",
        "[file: a.txt]",
        "[file]",
    ]
    assert [p.kind for p in n.parts] == [
        "text",
        "image",
        "reasoning",
        "reasoning",
        "tool_call",
        "tool_result",
        "file",
        "file",
        "file",
    ]
    assert [p.tool_call_id for p in n.parts][4:6] == ["t1", "t1"]
    assert n.parts[4].tool_name == "grep"


def test_openai_tool_calls_and_tool_results_become_parts_with_call_ids() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "[1]"}}
    asked = _norm(MessageIn("assistant", "let me add", tool_calls=[call]))
    assert asked.content == "let me add\nadd([1])"
    assert [(p.kind, p.origin, p.tool_call_id) for p in asked.parts] == [
        ("text", "message", None),
        ("tool_call", "tool_calls", "call_1"),
    ]

    answered = _norm(MessageIn("tool", "2", tool_call_id="call_1"))
    assert answered.content == "2"
    assert [(p.kind, p.origin, p.tool_call_id) for p in answered.parts] == [
        ("tool_result", "message", "call_1")
    ]


def test_string_content_with_tool_calls_restores_without_the_calls_text() -> None:
    # Regression: the flattened text holds the calls too; restore must not return it.
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msg = MessageIn("assistant", "calling f", tool_calls=[call])
    assert _roundtrip(msg, BIG) == {
        "role": "assistant",
        "content": "calling f",
        "tool_calls": [call],
    }


# -- timestamps -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2024-03-01T12:00:00Z", "2024-03-01T12:00:00.000Z"),
        ("2024-03-01T12:00:00.123456Z", "2024-03-01T12:00:00.123Z"),
        ("2024-03-01T12:00:00.999999+00:00", "2024-03-01T12:00:00.999Z"),
        ("2024-03-01T14:30:00+02:30", "2024-03-01T12:00:00.000Z"),
        ("2024-03-01T07:00:00-05:00", "2024-03-01T12:00:00.000Z"),
        ("2024-03-01T12:00:00", "2024-03-01T12:00:00.000Z"),  # naive means UTC
        ("2024-03-01", "2024-03-01T00:00:00.000Z"),
        ("2024-01-01T00:30:00+01:00", "2023-12-31T23:30:00.000Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
    ],
)
def test_timestamps_are_normalised_to_utc_milliseconds(given: str, stored: str) -> None:
    assert normalize_time(given, "created_at") == stored


def test_a_missing_timestamp_means_now() -> None:
    assert normalize_time(None, "created_at", NOW) == "2024-05-06T07:08:09.123Z"


def test_normalised_timestamps_sort_like_the_moments_they_name() -> None:
    given = ["0999-01-01T00:00:00Z", "2024-01-01T00:00:00+05:00", "2023-12-31T20:00:00Z"]
    stored = [normalize_time(g, "t") for g in given]
    assert sorted(stored) == [stored[0], stored[1], stored[2]]


@pytest.mark.parametrize(
    "bad",
    ["yesterday", "", "2024-13-01T00:00:00Z", "2024-01-01T25:00:00Z", "0001-01-01T00:00:00+01:00"],
)
def test_a_bad_timestamp_is_invalid_input_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn("user", "hi", created_at=bad))
    assert err.value.field == "messages[0].created_at"


# -- replay hash ------------------------------------------------------------------------


def test_replay_hash_ignores_the_client_id_only() -> None:
    base = MessageIn("user", "ok", created_at="2024-01-01T00:00:00Z")
    assert replay_hash(base) == replay_hash(
        MessageIn("user", "ok", client_id="x", created_at="2024-01-01T00:00:00Z")
    )
    variants = [
        MessageIn("assistant", "ok", created_at="2024-01-01T00:00:00Z"),
        MessageIn("user", "ok!", created_at="2024-01-01T00:00:00Z"),
        MessageIn("user", "ok", name="n", created_at="2024-01-01T00:00:00Z"),
        MessageIn("user", "ok", created_at="2024-01-01T00:00:01Z"),
        MessageIn("user", "ok"),
        MessageIn("user", [{"type": "text", "text": "ok"}], created_at="2024-01-01T00:00:00Z"),
        MessageIn("user", "ok", tool_call_id="c", created_at="2024-01-01T00:00:00Z"),
    ]
    hashes = {replay_hash(v) for v in variants} | {replay_hash(base)}
    assert len(hashes) == len(variants) + 1


# -- payloads ----------------------------------------------------------------------------


def test_new_file_ids_are_generated_and_distinct() -> None:
    ids = {new_file_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(FILE_ID_RE.fullmatch(i) for i in ids)


def test_a_large_string_content_moves_to_a_payload_and_leaves_a_reference() -> None:
    text = "word " * 400
    n = _norm(MessageIn("tool", text, tool_call_id="c9"), large_tokens=50)
    [payload] = n.payloads
    assert payload.data == text.encode()
    assert (payload.encoding, payload.part_kind) == ("utf8", "tool_result")
    assert n.content.startswith(f"[Large payload {payload.file_id} | tool_result | 2000 bytes")
    assert text not in n.content
    assert n.token_count < 100
    assert orjson.loads(message_part_block(n.parts[0]) or "null") == {
        FILE_MARKER: payload.file_id,
        "encoding": "utf8",
    }


def test_a_small_block_stays_inline() -> None:
    n = _norm(MessageIn("user", [{"type": "text", "text": "short"}]), large_tokens=50)
    assert n.payloads == []
    assert n.content == "short"


def test_a_large_block_offloads_its_largest_string() -> None:
    data = "QUJD" * 500
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    n = _norm(MessageIn("user", [block]), large_tokens=50)
    [payload] = n.payloads
    assert payload.data == data.encode()
    stored = n.parts[0].block
    assert isinstance(stored, dict)
    assert stored["source"]["data"] == {FILE_MARKER: payload.file_id, "encoding": "utf8"}
    assert stored["source"]["media_type"] == "image/png"
    assert block["source"]["data"] == data  # the caller's block is not mutated


def test_a_tool_result_made_of_many_small_blocks_offloads_the_whole_list_as_json() -> None:
    body = [{"type": "text", "text": f"line {i}"} for i in range(100)]
    block = {"type": "tool_result", "tool_use_id": "t", "content": body}
    n = _norm(MessageIn("user", [block]), large_tokens=50)
    [payload] = n.payloads
    assert payload.encoding == "json"
    assert orjson.loads(payload.data) == body
    assert n.content.startswith(f"[Large payload {payload.file_id} | tool_result")


@pytest.mark.parametrize("large_tokens", [BIG, 8])
def test_restore_inverts_normalize(large_tokens: int) -> None:
    msg = MessageIn(
        "assistant",
        [
            {"type": "text", "text": "x" * 300},
            {"type": "tool_use", "id": "t", "name": "run", "input": {"cmd": "ls " * 50}},
        ],
        name="bot",
    )
    assert _roundtrip(msg, large_tokens) == {
        "role": "assistant",
        "content": msg.content,
        "name": "bot",
    }


def test_a_marker_shaped_object_sent_by_a_client_is_returned_as_sent() -> None:
    # Regression: restore used to read any file a marker named, so a client could
    # plant another message's file id and read its payload back.
    planted = {FILE_MARKER: "file_0123456789abcdef", "encoding": "utf8"}
    msg = MessageIn("user", [{"type": "tool_use", "id": "t", "name": "n", "input": planted}])
    for large_tokens in (BIG, 1):
        assert _roundtrip(msg, large_tokens)["content"] == msg.content


# -- message shapes as the SDKs send them ------------------------------------------


OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


@pytest.mark.parametrize("absent", [False, True])
def test_an_assistant_message_with_tool_calls_and_no_content_is_given_back_as_sent(
    absent: bool,
) -> None:
    msg = MessageIn("assistant", None, tool_calls=[OPENAI_CALL], content_absent=absent)
    n = _norm(msg)
    assert n.content == "ls({})"  # the calls are still what is searched and counted
    expected: dict[str, Any] = {"role": "assistant", "tool_calls": [OPENAI_CALL]}
    if not absent:
        expected["content"] = None
    assert _roundtrip(msg, BIG) == expected


@pytest.mark.parametrize(
    ("role", "extra"),
    [
        ("user", None),
        ("system", None),
        ("tool", None),
        ("assistant", None),
        ("assistant", {"annotations": []}),
        ("user", {"refusal": "no"}),
    ],
)
def test_content_may_be_left_out_only_by_an_assistant_with_something_else_to_say(
    role: str, extra: dict[str, Any] | None
) -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn(role, None, extra=extra))
    assert err.value.field == "messages[0].content"


def test_sdk_message_fields_are_kept_and_given_back_as_sent() -> None:
    extra = {
        "refusal": "I can't help with that.",
        "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x"}}],
        "audio": {"id": "audio_1", "transcript": "hi"},
        "reasoning_content": "thought",
    }
    msg = MessageIn("assistant", None, extra=extra)
    assert _roundtrip(msg, BIG) == {"role": "assistant", "content": None} | extra
    with_text = MessageIn("assistant", "hello", extra={"annotations": []})
    assert _roundtrip(with_text, BIG) == {
        "role": "assistant",
        "content": "hello",
        "annotations": [],
    }


def test_the_replay_hash_of_a_message_without_sdk_fields_is_unchanged() -> None:
    # Hashes stored before SDK fields were kept must still match an exact replay.
    msg = MessageIn("user", "hi", name="a", created_at="2024-01-01T00:00:00Z")
    key = ["user", "a", "hi", None, None, "2024-01-01T00:00:00Z"]
    old = hashlib.blake2b(orjson.dumps(key, option=orjson.OPT_SORT_KEYS), digest_size=16)
    assert replay_hash(msg) == old.digest()
    assert replay_hash(msg) != replay_hash(
        MessageIn(
            "user", "hi", name="a", created_at="2024-01-01T00:00:00Z", extra={"annotations": []}
        )
    )


# -- every SDK dump (issue 26) --------------------------------------------------------


@pytest.mark.parametrize(("sent", "stored"), [("developer", "system"), ("function", "tool")])
def test_developer_and_function_are_stored_as_system_and_tool_and_given_back_as_sent(
    sent: str, stored: str
) -> None:
    msg = MessageIn(sent, "Answer in French.", name="ops")
    n = _norm(msg)
    assert n.role == stored  # pinned and placed as the role it stands for
    assert n.content == "Answer in French."
    assert _roundtrip(msg, BIG) == {"role": sent, "content": "Answer in French.", "name": "ops"}
    assert replay_hash(msg) != replay_hash(MessageIn(stored, "Answer in French.", name="ops"))


def test_a_developer_name_counts_like_a_system_speakers_name() -> None:
    named = _norm(MessageIn("developer", "x", name="operations"))
    assert named.token_count > _norm(MessageIn("developer", "x")).token_count


def test_an_openai_custom_tool_call_is_a_tool_call_part_with_its_id_and_free_text_input() -> None:
    call = {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin"}}
    msg = MessageIn("assistant", None, tool_calls=[call])
    n = _norm(msg)
    assert [(p.kind, p.origin, p.tool_call_id, p.tool_name) for p in n.parts] == [
        ("tool_call", "tool_calls", "c1", "apply_patch")
    ]
    assert n.content == "apply_patch(*** Begin)"
    assert _roundtrip(msg, BIG)["tool_calls"] == [call]


def test_a_custom_tool_call_without_its_custom_object_is_invalid_input_naming_it() -> None:
    with pytest.raises(InvalidInput) as err:
        _norm(MessageIn("assistant", None, tool_calls=[{"id": "c1", "type": "custom"}]))
    assert err.value.field == "messages[0].tool_calls[0].custom"


def test_responses_custom_tool_call_items_pair_by_call_id() -> None:
    call = {"type": "custom_tool_call", "call_id": "c1", "name": "grep", "input": "TODO"}
    result = {"type": "custom_tool_call_output", "call_id": "c1", "output": "3 hits"}
    n = _norm(MessageIn("assistant", [call, result]))
    assert [(p.kind, p.tool_call_id) for p in n.parts] == [
        ("tool_call", "c1"),
        ("tool_result", "c1"),
    ]
    assert n.content == "grep(TODO)\n3 hits"


def test_an_audio_answer_and_a_legacy_function_call_flatten_to_what_they_say() -> None:
    audio = {"id": "a", "data": "UklGRg==", "expires_at": 1, "transcript": "See you Thursday."}
    spoken = _norm(MessageIn("assistant", None, extra={"audio": audio}))
    assert spoken.content == "[audio] See you Thursday."  # not the base64 data
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    msg = MessageIn("assistant", "Checking.", extra={"function_call": call})
    n = _norm(msg)
    assert n.content == 'Checking.\n[function call] get_weather({"city": "Paris"})'
    assert _roundtrip(msg, BIG) == {
        "role": "assistant",
        "content": "Checking.",
        "function_call": call,
    }


def test_an_image_in_a_tool_result_flattens_to_its_placeholder() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}
    block = {"type": "tool_result", "tool_use_id": "t1", "content": [image]}
    assert _norm(MessageIn("user", [block])).content == "[image]"


def test_a_server_tool_result_is_labelled_with_its_sources_and_counted_whole() -> None:
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "s1",
        "content": [
            {
                "type": "web_search_result",
                "title": "WAL",
                "url": "https://sqlite.org/wal.html",
                "encrypted_content": "E" * 4_000,
            }
        ],
    }
    n = _norm(MessageIn("assistant", [result]))
    assert n.content == "[web_search_tool_result: WAL <https://sqlite.org/wal.html>]"
    # Anthropic output replays it whole, encrypted content and all.
    assert n.token_count >= estimate_tokens(orjson.dumps(result).decode())


def test_a_tool_call_of_a_type_brain_does_not_know_is_kept_and_paired_by_its_id() -> None:
    # The next API release's call type must not refuse the host's batch.
    call = {"id": "c1", "type": "mcp", "mcp": {"name": "lookup", "server": "kb", "args": {"q": 1}}}
    msg = MessageIn("assistant", None, tool_calls=[call])
    n = _norm(msg)
    assert [(p.kind, p.tool_call_id, p.tool_name) for p in n.parts] == [
        ("tool_call", "c1", "lookup")
    ]
    assert n.content == 'lookup({"server":"kb","args":{"q":1}})'
    assert _roundtrip(msg, BIG)["tool_calls"] == [call]


def test_a_turn_of_parallel_tool_results_costs_what_they_cost_as_openai_tool_messages() -> None:
    outputs = ["x" * 1_001, "ok", "y" * 37]
    blocks = [
        {"type": "tool_result", "tool_use_id": f"t{n}", "content": text}
        for n, text in enumerate(outputs)
    ]
    anthropic = _norm(MessageIn("user", blocks))
    openai = [
        _norm(MessageIn("tool", text, tool_call_id=f"t{n}")) for n, text in enumerate(outputs)
    ]
    # Each message costs MESSAGE_OVERHEAD more in a context: one turn of three
    # results is priced as the three messages OpenAI sends for it.
    assert message_cost(anthropic.token_count) == sum(message_cost(o.token_count) for o in openai)
