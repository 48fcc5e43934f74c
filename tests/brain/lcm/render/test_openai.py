"""brain.lcm.render.openai: turns as OpenAI chat-completions messages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from brain.lcm.render import (
    Block,
    render_openai,
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

# -- render_openai ----------------------------------------------------------------------


def test_openai_renders_roles_calls_and_tool_messages() -> None:
    turns = [
        _turn("system", _text("be brief")),
        _turn("user", _text("list files")),
        _turn("assistant", _call("c1", "ls", '{"path": "."}')),
        _turn("tool", _result("c1", "a\nb")),
        _turn("assistant", _text("two files:"), _text("a and b")),
    ]
    assert render_openai(turns) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a\nb"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "two files:"},
                {"type": "text", "text": "a and b"},
            ],
        },
    ]


def test_openai_keeps_assistant_text_beside_its_calls() -> None:
    (msg,) = render_openai([_turn("assistant", _text("checking"), _call("c1"))])
    assert msg["content"] == "checking"
    assert [c["id"] for c in msg["tool_calls"]] == ["c1"]


def test_openai_keeps_consecutive_user_turns_separate() -> None:
    out = render_openai([_turn("user", _text("a")), summary_turn("sum_1", "<s/>", 1)])
    assert out == [{"role": "user", "content": "a"}, {"role": "user", "content": "<s/>"}]


def test_openai_leaves_out_reasoning_and_unknown_blocks() -> None:
    thinking = Block("reasoning", "secret", data={"type": "thinking", "signature": "s"})
    out = render_openai(
        [
            _turn("assistant", thinking, _text("answer"), Block("other", data={"type": "x"})),
            _turn("assistant", thinking),
        ]
    )
    assert out == [{"role": "assistant", "content": "answer"}]


@pytest.mark.parametrize(
    ("data", "image_url"),
    [
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"url": f"data:image/png;base64,{PNG}"},
        ),
        (
            {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
            {"url": "https://x/a.png"},
        ),
        (
            {"type": "image_url", "image_url": {"url": "https://x/b.png", "detail": "low"}},
            {"url": "https://x/b.png", "detail": "low"},
        ),
        ({"type": "input_image", "image_url": "https://x/c.png"}, {"url": "https://x/c.png"}),
    ],
)
def test_openai_renders_images_as_image_url_parts(
    data: dict[str, Any], image_url: dict[str, str]
) -> None:
    (msg,) = render_openai([_turn("user", _text("see"), Block("image", "[image]", data=data))])
    assert msg["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": image_url},
    ]


def test_openai_shows_an_image_it_cannot_carry_as_its_placeholder() -> None:
    image = Block(
        "image", "[image]", data={"type": "image", "source": {"type": "file", "file_id": "f"}}
    )
    assistant_image = Block(
        "image", "[image]", data={"type": "image_url", "image_url": {"url": "u"}}
    )
    out = render_openai([_turn("user", image), _turn("assistant", assistant_image)])
    assert out == [
        {"role": "user", "content": "[image]"},
        {"role": "assistant", "content": "[image]"},
    ]


@pytest.mark.parametrize(
    ("data", "part"),
    [
        (
            {
                "type": "file",
                "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,QQ=="},
            },
            {
                "type": "file",
                "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,QQ=="},
            },
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "QQ==", "format": "wav"}},
            {"type": "input_audio", "input_audio": {"data": "QQ==", "format": "wav"}},
        ),
        (
            {
                "type": "document",
                "title": "r.pdf",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            },
            {
                "type": "file",
                "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
            },
        ),
        (
            {
                "type": "document",
                "title": "n",
                "source": {"type": "text", "media_type": "text/plain", "data": "body"},
            },
            {"type": "text", "text": "[file: n]\nbody"},
        ),
        (
            {
                "type": "input_file",
                "filename": "b.pdf",
                "file_data": "data:application/pdf;base64,QQ==",
            },
            {
                "type": "file",
                "file": {"filename": "b.pdf", "file_data": "data:application/pdf;base64,QQ=="},
            },
        ),
    ],
)
def test_openai_renders_files_in_its_own_shape(data: dict[str, Any], part: dict[str, Any]) -> None:
    (msg,) = render_openai([_turn("user", _text("read"), Block("file", "[file]", data=data))])
    assert msg["content"][1] == part


def test_openai_tool_result_content_is_its_text() -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x"}]}
    out = render_openai(
        [
            _turn("assistant", _call("t1")),
            _turn("user", _result("t1", "x", data=block, is_error=True)),
        ]
    )
    assert out[1] == {"role": "tool", "tool_call_id": "t1", "content": "x"}


# -- every SDK dump (issue 26) --------------------------------------------------------


def test_a_developer_turn_renders_as_developer() -> None:
    turn = replace(_turn("system", _text("be brief")), sent_role="developer")
    assert render_openai([turn]) == [{"role": "developer", "content": "be brief"}]


def test_a_custom_call_renders_as_a_custom_tool_call() -> None:
    custom = {"id": "c1", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}}
    call = Block("tool_call", call_id="c1", name="patch", arguments="*** Begin", data=custom)
    assert render_openai([_turn("assistant", call), _turn("tool", _result("c1", "done"))]) == [
        {"role": "assistant", "content": None, "tool_calls": [custom]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]


def test_blocks_chat_completions_has_no_slot_for_are_their_placeholder_text() -> None:
    other = Block("other", "[web_search_tool_result: WAL <https://x>]", data={"type": "x"})
    cited = {"citations": [{"type": "char_location", "document_title": "a.pdf", "cited_text": "q"}]}
    text = Block("text", "WAL moves pages.", data=cited)
    assert render_openai([_turn("assistant", other, text)]) == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "[web_search_tool_result: WAL <https://x>]"},
                {"type": "text", "text": "WAL moves pages.\n[cited: a.pdf]"},
            ],
        }
    ]


def test_a_call_of_a_type_brain_does_not_know_renders_as_it_came() -> None:
    sent = {"id": "c1", "type": "mcp", "mcp": {"name": "lookup", "server": "kb"}}
    call = Block("tool_call", call_id="c1", name="lookup", arguments='{"server":"kb"}', data=sent)
    assert render_openai([_turn("assistant", call)]) == [
        {"role": "assistant", "content": None, "tool_calls": [sent]}
    ]
