"""brain.lcm.render.anthropic: turns as Anthropic messages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from brain.lcm.render import (
    CONTINUES,
    Block,
    render_anthropic,
    summary_turn,
)
from tests.brain.lcm.render.builders import (
    PDF,
    PNG,
    _call,
    _result,
    _text,
    _turn,
)

# -- render_anthropic -------------------------------------------------------------------


def test_anthropic_puts_system_turns_in_the_system_text() -> None:
    system, messages = render_anthropic(
        [
            _turn("system", _text("rule one")),
            _turn("user", _text("hi")),
            _turn("system", _text("rule two")),
        ]
    )
    assert system == "rule one\n\nrule two"
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_anthropic_without_system_turns_has_no_system_text() -> None:
    assert render_anthropic([_turn("user", _text("hi"))])[0] is None


def test_anthropic_renders_calls_as_tool_use_and_results_in_the_next_user_message() -> None:
    turns = [
        _turn("user", _text("run it")),
        _turn(
            "assistant",
            _text("ok"),
            _call("c1", "bash", '{"command": "ls"}'),
            _call("c2", "x", "oops"),
        ),
        _turn("tool", _result("c1", "a b")),
        _turn("tool", _result("c2", "boom", is_error=True)),
        _turn("user", _text("thanks")),
    ]
    _, messages = render_anthropic(turns)
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "run it"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "c2", "name": "x", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "a b"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": True},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_anthropic_merges_consecutive_same_role_turns_keeping_block_order() -> None:
    _, messages = render_anthropic(
        [
            summary_turn("sum_1", "<a/>", 1),
            _turn("user", _text("b")),
            _turn("assistant", _text("c")),
            _turn("assistant", _text("d")),
        ]
    )
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in messages] == [
        ("user", ["<a/>", "b"]),
        ("assistant", ["c", "d"]),
    ]


def test_anthropic_puts_tool_results_before_other_blocks_of_a_user_message() -> None:
    _, messages = render_anthropic(
        [_turn("assistant", _call("c1")), _turn("user", _text("note"), _result("c1"))]
    )
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]


def test_anthropic_starts_with_a_user_message_saying_the_conversation_continues() -> None:
    _, messages = render_anthropic([_turn("assistant", _text("where was I"))])
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": CONTINUES}]}
    assert messages[1]["role"] == "assistant"


def test_anthropic_prepends_nothing_when_the_first_message_is_a_user_one() -> None:
    _, messages = render_anthropic([_turn("user", _text("hi"))])
    assert len(messages) == 1


def test_anthropic_drops_whitespace_text_and_messages_left_empty() -> None:
    _, messages = render_anthropic(
        [
            _turn("user", _text("hi")),
            _turn("assistant", _text("  \n")),
            _turn("user", _text("again")),
        ]
    )
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_anthropic_keeps_thinking_only_with_its_signature() -> None:
    signed = {"type": "thinking", "thinking": "plan", "signature": "sig=="}
    unsigned = {"type": "thinking", "thinking": "plan", "signature": ""}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    responses = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]}
    _, messages = render_anthropic(
        [
            _turn("user", _text("q")),
            _turn(
                "assistant",
                Block("reasoning", "plan", data=signed),
                Block("reasoning", "plan", data=unsigned),
                Block("reasoning", "", data=redacted),
                Block("reasoning", "s", data=responses),
                _text("answer"),
            ),
        ]
    )
    assert messages[1]["content"] == [
        signed,
        redacted,
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize(
    ("data", "source"),
    [
        (
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}},
            {"type": "base64", "media_type": "image/jpeg", "data": PNG},
        ),
        (
            {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
            {"type": "url", "url": "https://x/a.png"},
        ),
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "base64", "media_type": "image/png", "data": PNG},
        ),
        (
            {"type": "input_image", "image_url": "https://x/c.png"},
            {"type": "url", "url": "https://x/c.png"},
        ),
    ],
)
def test_anthropic_renders_images_as_image_blocks(
    data: dict[str, Any], source: dict[str, str]
) -> None:
    _, messages = render_anthropic([_turn("user", Block("image", "[image]", data=data))])
    assert messages[0]["content"] == [{"type": "image", "source": source}]


def test_anthropic_renders_documents_and_pdf_files_as_document_blocks() -> None:
    doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "r.pdf",
        "cache_control": {"type": "ephemeral"},
    }
    file = {
        "type": "file",
        "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
    }
    audio = {"type": "input_audio", "input_audio": {"data": "QQ==", "format": "wav"}}
    _, messages = render_anthropic(
        [
            _turn(
                "user",
                Block("file", "[file: r.pdf]", data=doc),
                Block("file", "[file: a.pdf]", data=file),
                Block("file", "[file]", data=audio),
            )
        ]
    )
    pdf = {"type": "base64", "media_type": "application/pdf", "data": PDF}
    assert messages[0]["content"] == [
        {"type": "document", "source": pdf, "title": "r.pdf"},
        {"type": "document", "source": pdf, "title": "a.pdf"},
        {"type": "text", "text": "[file]"},
    ]


def test_anthropic_tool_results_keep_their_image_content() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    block = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "shot"}, image],
    }
    # The text a stored result's turn has: the image says itself as its placeholder.
    result = _result("t1", "shot\n[image]", data=block)
    _, messages = render_anthropic([_turn("assistant", _call("t1")), _turn("user", result)])
    assert messages[-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "shot"}, image],
        }
    ]


def test_anthropic_tool_result_with_replaced_text_renders_the_text_not_the_original() -> None:
    block = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "long"}],
    }
    result = _result("t1", "[Tool Output: msg_4 | 4 bytes]", data=block)
    _, messages = render_anthropic([_turn("assistant", _call("t1")), _turn("user", result)])
    assert messages[-1]["content"][0]["content"] == "[Tool Output: msg_4 | 4 bytes]"


def test_anthropic_leaves_out_empty_tool_result_content() -> None:
    _, messages = render_anthropic(
        [_turn("assistant", _call("t1")), _turn("tool", _result("t1", ""))]
    )
    assert messages[-1]["content"] == [{"type": "tool_result", "tool_use_id": "t1"}]


def test_anthropic_makes_foreign_call_ids_safe_on_both_sides() -> None:
    _, messages = render_anthropic(
        [_turn("assistant", _call("functions.get:0")), _turn("tool", _result("functions.get:0"))]
    )
    assert messages[-1]["content"][0]["tool_use_id"] == "functions_get_0"
    assert messages[-2]["content"][0]["id"] == "functions_get_0"


# -- every SDK dump (issue 26) --------------------------------------------------------


def test_a_developer_turn_joins_the_system_text() -> None:
    turn = replace(_turn("system", _text("be brief")), sent_role="developer")
    assert render_anthropic([turn, _turn("user", _text("hi"))])[0] == "be brief"


def test_server_tool_blocks_are_replayed_without_null_members_in_assistant_messages() -> None:
    use = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}, "caller": None}
    result = {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [], "caller": None}
    blocks = [Block("other", "[server_tool_use]", data=use), Block("other", "[r]", data=result)]
    _, messages = render_anthropic([_turn("user", _text("q")), _turn("assistant", *blocks)])
    assert messages[1]["content"] == [
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
    ]


def test_blocks_the_api_cannot_take_back_are_their_placeholder_text() -> None:
    # A server block sent as the user's, and a block of no known type.
    use = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
    turn = _turn("user", Block("other", "[server_tool_use]", data=use), Block("other", "[x]"))
    _, messages = render_anthropic([turn])
    assert messages[0]["content"] == [
        {"type": "text", "text": "[server_tool_use]"},
        {"type": "text", "text": "[x]"},
    ]


def test_web_search_citations_stay_on_their_text_and_document_ones_become_a_label() -> None:
    web = {"type": "web_search_result_location", "url": "https://a", "title": "A", "x": None}
    doc = {"type": "char_location", "document_index": 0, "document_title": "a.pdf"}
    text = Block("text", "WAL.", data={"citations": [web, doc]})
    _, messages = render_anthropic([_turn("user", _text("q")), _turn("assistant", text)])
    assert messages[1]["content"] == [
        {
            "type": "text",
            "text": "WAL.\n[cited: a.pdf]",
            "citations": [{"type": "web_search_result_location", "url": "https://a", "title": "A"}],
        }
    ]


def test_a_custom_calls_free_text_input_is_kept_as_its_one_field() -> None:
    custom = {"id": "c1", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}
    call = Block("tool_call", call_id="c1", name="patch", arguments="*** Begin", data=custom)
    _, messages = render_anthropic([_turn("user", _text("q")), _turn("assistant", call)])
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "patch", "input": {"input": "*** Begin"}}
    ]


def test_a_document_inside_a_tool_result_is_its_placeholder_not_dropped() -> None:
    doc = {"type": "document", "source": {"type": "text", "data": "x"}, "title": "a.txt"}
    block = {"type": "tool_result", "tool_use_id": "t1", "content": [doc]}
    result = _result("t1", "[file: a.txt]", data=block)
    _, messages = render_anthropic([_turn("assistant", _call("t1")), _turn("user", result)])
    assert messages[-1]["content"][0]["content"] == [{"type": "text", "text": "[file: a.txt]"}]


def test_a_server_call_whose_result_is_not_there_is_a_placeholder_never_a_lone_call() -> None:
    # Its result was large enough to move to a payload file: a text reference now.
    use = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
    reference = _text("[Large payload file_0123456789abcdef | other | 90000 bytes]")
    turn = _turn(
        "assistant", Block("other", "[server_tool_use] web_search({})", data=use), reference
    )
    _, messages = render_anthropic([_turn("user", _text("q")), turn])
    assert [b["type"] for b in messages[1]["content"]] == ["text", "text"]
    assert messages[1]["content"][0]["text"] == "[server_tool_use] web_search({})"


def test_a_call_of_a_type_brain_does_not_know_is_a_tool_use_with_its_arguments() -> None:
    sent = {"id": "c1", "type": "mcp", "mcp": {"name": "lookup", "server": "kb"}}
    call = Block("tool_call", call_id="c1", name="lookup", arguments='{"server":"kb"}', data=sent)
    _, messages = render_anthropic([_turn("user", _text("q")), _turn("assistant", call)])
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"server": "kb"}}
    ]
