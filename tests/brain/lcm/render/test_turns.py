"""brain.lcm.render.turns: stored messages and summaries as turns, tool-output stubs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from brain.lcm.render import (
    Block,
    Turn,
    stub_text,
    summary_turn,
    turn_from_message,
)
from tests.brain.lcm.render.builders import (
    PDF,
    PNG,
    _msg,
    _part,
    _text,
)

# -- turn_from_message ------------------------------------------------------------------


def test_a_string_message_without_parts_is_one_text_block() -> None:
    turn = turn_from_message(_msg("user", content="hello", shape="string", msg_id="u7", seq=7))
    assert turn == Turn("user", (Block("text", "hello"),), "u7", 7)


def test_an_empty_message_has_no_blocks() -> None:
    assert turn_from_message(_msg("user", content="", shape="string")).blocks == ()
    assert turn_from_message(_msg("user", content="", shape="blocks")).blocks == ()


def test_openai_tool_calls_become_tool_call_blocks_after_the_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"a":1}'}}
    msg = _msg(
        "assistant",
        (
            _part("text", "message", "let me see"),
            _part("tool_call", "tool_calls", call, call_id="c1", tool="ls"),
        ),
        content='let me see\nls({"a":1})',
        shape="string",
    )
    assert turn_from_message(msg).blocks == (
        Block("text", "let me see"),
        Block("tool_call", call_id="c1", name="ls", arguments='{"a":1}'),
    )


def test_empty_text_beside_tool_calls_leaves_only_the_calls() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    msg = _msg(
        "assistant",
        (_part("text", "message", ""), _part("tool_call", "tool_calls", call, call_id="c1")),
        content="\nls({})",
        shape="string",
    )
    assert [b.type for b in turn_from_message(msg).blocks] == ["tool_call"]


def test_an_openai_tool_message_is_one_result_with_its_string_content() -> None:
    msg = _msg(
        "tool",
        (_part("tool_result", "message", call_id="c1"),),
        content="42 files",
        shape="string",
        name="ls",
    )
    turn = turn_from_message(msg)
    assert turn.role == "tool"
    assert turn.blocks == (Block("tool_result", "42 files", call_id="c1", name="ls"),)


def test_an_openai_tool_message_with_text_blocks_is_one_result_joining_them() -> None:
    msg = _msg(
        "tool",
        (
            _part("tool_result", "message", call_id="c1"),
            _part("text", "content", {"type": "text", "text": "one"}),
            _part("text", "content", {"type": "text", "text": "two"}),
        ),
        content="one\ntwo",
    )
    assert turn_from_message(msg).blocks == (Block("tool_result", "one\ntwo", call_id="c1"),)


def test_anthropic_blocks_become_blocks_in_order() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    use = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "a.pdf",
    }
    msg = _msg(
        "assistant",
        (
            _part("reasoning", block=thinking),
            _part("text", block={"type": "text", "text": "running"}),
            _part("tool_call", block=use, call_id="t1", tool="bash"),
            _part("image", block=image),
            _part("file", block=doc),
            _part("other", block={"type": "mystery"}),
        ),
    )
    assert turn_from_message(msg).blocks == (
        Block("reasoning", "hmm", data=thinking),
        Block("text", "running"),
        Block("tool_call", call_id="t1", name="bash", arguments='{"command":"ls"}'),
        Block("image", "[image]", data=image),
        Block("file", "[file: a.pdf]", data=doc),
        Block("other", "[mystery]", data={"type": "mystery"}),
    )


@pytest.mark.parametrize(
    ("body", "text"),
    [("plain", "plain"), ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb")],
)
def test_anthropic_tool_results_take_string_or_text_block_content(body: Any, text: str) -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": body, "is_error": True}
    turn = turn_from_message(_msg("user", (_part("tool_result", block=block, call_id="t1"),)))
    assert turn.blocks == (Block("tool_result", text, call_id="t1", is_error=True, data=block),)


def test_responses_function_calls_and_outputs_are_calls_and_results() -> None:
    call = {"type": "function_call", "call_id": "r1", "name": "f", "arguments": '{"q":"x"}'}
    output = {"type": "function_call_output", "call_id": "r1", "output": "done"}
    turn = turn_from_message(
        _msg(
            "assistant",
            (
                _part("tool_call", block=call, call_id="r1", tool="f"),
                _part("tool_result", block=output, call_id="r1"),
            ),
        )
    )
    assert turn.blocks[0] == Block("tool_call", call_id="r1", name="f", arguments='{"q":"x"}')
    assert turn.blocks[1].text == "done"


def test_a_server_tool_call_is_not_a_call_pairing_must_answer() -> None:
    use = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}
    turn = turn_from_message(_msg("assistant", (_part("tool_call", block=use, call_id="s1"),)))
    assert turn.blocks == (Block("other", "[server_tool_use] web_search({})", data=use),)


def test_a_tool_output_in_a_payload_file_becomes_a_stub() -> None:
    marker = {"__brain_file__": "file_0123456789abcdef", "encoding": "utf8"}
    block = {"type": "tool_result", "tool_use_id": "t1", "content": marker}
    part = _part(
        "tool_result", block=block, call_id="t1", file_id="file_0123456789abcdef", file_bytes=5000
    )
    turn = turn_from_message(_msg("user", (part,)))
    assert turn.blocks == (
        Block("tool_result", "[Tool Output: file_0123456789abcdef | 5000 bytes]", call_id="t1"),
    )


def test_a_large_text_is_its_flattened_reference_not_its_payload() -> None:
    ref = "[Large payload file_aa | text | 9000 bytes | ~2250 tokens] the start of it"
    marker = {"__brain_file__": "file_aa", "encoding": "utf8"}
    msg = _msg(
        "user",
        (
            _part("text", block={"type": "text", "text": "short"}),
            _part("text", block={"type": "text", "text": marker}, file_id="file_aa"),
        ),
        content=f"short\n{ref}",
    )
    assert turn_from_message(msg).blocks == (Block("text", "short"), Block("text", ref))


def test_large_call_arguments_show_the_reference_where_the_bulk_was() -> None:
    ref = "[Large payload file_bb | tool_call tool=write | 9000 bytes | ~2250 tokens] body"
    marker = {"__brain_file__": "file_bb", "encoding": "utf8"}
    use = {
        "type": "tool_use",
        "id": "t1",
        "name": "write",
        "input": {"path": "a.py", "text": marker},
    }
    msg = _msg(
        "assistant",
        (_part("tool_call", block=use, call_id="t1", tool="write", file_id="file_bb"),),
        content=ref,
    )
    (block,) = turn_from_message(msg).blocks
    assert orjson.loads(block.arguments or "") == {"path": "a.py", "text": ref}


def test_a_missing_reference_is_rebuilt_from_the_part() -> None:
    msg = _msg(
        "user",
        (_part("image", block={"type": "image"}, file_id="file_cc", file_bytes=70000),),
        content="",
    )
    assert turn_from_message(msg).blocks == (
        Block("text", "[Large payload file_cc | image | 70000 bytes]"),
    )


def test_a_summary_is_a_user_turn_holding_its_xml() -> None:
    assert summary_turn("sum_1", "<summary/>", 4) == Turn(
        "user", (Block("text", "<summary/>"),), "sum_1", 4
    )


# -- stub_text --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        ('{"path": "src/app.py"}', "src/app.py"),
        ('{"file_path": "/etc/hosts"}', "/etc/hosts"),
        ('{"filename": "notes.md"}', "notes.md"),
        ('{"command": "ls -la /tmp"}', "ls -la /tmp"),
        ('{"command": ["git", "status", "--short"]}', "git status --short"),
        ('{"cmd": "make test"}', "make test"),
        ('{"pattern": "TODO\\\\b", "path": ""}', "TODO\\b"),
        ('{"query": "weather in Paris"}', "weather in Paris"),
        ('{"url": "https://example.com/a"}', "https://example.com/a"),
        ('{"url": "https://x", "command": "c", "path": "p"}', "p"),
        ('{"command": "echo a\\n\\n   echo b"}', "echo a echo b"),
        ('{"limit": 5}', ""),
        ('["path"]', ""),
        ("not json", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_stub_disambiguator_comes_from_the_most_telling_argument(
    args: str | None, hint: str
) -> None:
    head = "[Tool Output: file_1 | tool=read | 12 bytes]"
    assert stub_text("file_1", "read", 12, args) == (f"{head} {hint}" if hint else head)


def test_stub_without_a_tool_name_leaves_the_tool_out() -> None:
    assert stub_text("msg_3", None, 7, None) == "[Tool Output: msg_3 | 7 bytes]"


def test_a_stub_of_one_of_several_blocks_names_it_for_describe() -> None:
    assert stub_text("msg_3", "read", 7, None, block=2) == (
        "[Tool Output: msg_3 | content[2] | tool=read | 7 bytes]"
    )


def test_stub_disambiguator_is_cut_to_about_120_characters() -> None:
    stub = stub_text("file_1", "bash", 1, orjson.dumps({"command": "x" * 500}).decode())
    hint = stub.split("] ", 1)[1]
    assert len(hint) == 120
    assert hint.endswith("…")


# -- every SDK dump (issue 26) --------------------------------------------------------


def test_a_developer_message_is_a_system_turn_that_remembers_it_was_sent_as_developer() -> None:
    msg = replace(_msg("system", content="be brief", shape="string"), sent_role="developer")
    turn = turn_from_message(msg)
    assert (turn.role, turn.sent_role, turn.blocks) == ("system", "developer", (_text("be brief"),))


def test_a_legacy_function_result_says_which_function_answered() -> None:
    msg = replace(
        _msg("tool", content="18C", shape="string", name="get_weather"), sent_role="function"
    )
    assert turn_from_message(msg).blocks == (_text("[function result] get_weather: 18C"),)


def test_an_audio_answer_and_a_legacy_function_call_are_text_never_nothing() -> None:
    msg = replace(
        _msg("assistant", shape="string"),
        no_content=True,
        audio="[audio] See you Thursday.",
        function_call="[function call] f({})",
    )
    assert turn_from_message(msg).blocks == (
        _text("[audio] See you Thursday."),
        _text("[function call] f({})"),
    )


def test_a_custom_tool_call_is_a_call_block_marked_custom() -> None:
    call = {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin"}}
    msg = _msg("assistant", (_part("tool_call", "tool_calls", call, call_id="c1"),), shape="string")
    [block] = turn_from_message(msg).blocks
    assert (block.type, block.call_id, block.name, block.arguments) == (
        "tool_call",
        "c1",
        "apply_patch",
        "*** Begin",
    )
    assert block.data == call


def test_a_text_with_citations_keeps_its_block_for_the_renderers() -> None:
    text = {"type": "text", "text": "WAL.", "citations": [{"type": "x", "url": "https://a"}]}
    plain = {"type": "text", "text": "no sources", "citations": None}
    msg = _msg("assistant", (_part("text", block=text), _part("text", block=plain)))
    assert turn_from_message(msg).blocks == (Block("text", "WAL.", data=text), _text("no sources"))


def test_a_tool_call_of_a_type_brain_does_not_know_is_a_call_block_keeping_its_shape() -> None:
    call = {"id": "c1", "type": "mcp", "mcp": {"name": "lookup", "server": "kb"}}
    msg = _msg("assistant", (_part("tool_call", "tool_calls", call, call_id="c1"),), shape="string")
    [block] = turn_from_message(msg).blocks
    assert (block.type, block.call_id, block.name, block.arguments, block.data) == (
        "tool_call",
        "c1",
        "lookup",
        '{"server":"kb"}',
        call,
    )
