"""brain.lcm.render: stored messages to turns, tool pairing, OpenAI and Anthropic rendering."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import Brain, BrainConfig, MessageIn
from brain.lcm.messages import StoredMessage, StoredPart, load_range
from brain.lcm.render import (
    CONTINUES,
    UNANSWERED,
    Block,
    PairingReport,
    Turn,
    pair_tools,
    render_anthropic,
    render_openai,
    stub_text,
    summary_turn,
    turn_from_message,
    turn_tokens,
)
from brain.tokens import BLOCK_OVERHEAD, IMAGE_TOKENS, estimate_tokens, message_cost

PNG = base64.b64encode(b"\x89PNG fake image").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()

# -- builders ---------------------------------------------------------------------------


def _part(
    kind: str,
    origin: str = "content",
    block: Any = None,
    *,
    call_id: str | None = None,
    tool: str | None = None,
    file_id: str | None = None,
    file_bytes: int | None = None,
) -> StoredPart:
    return StoredPart(kind, origin, call_id, tool, file_id, file_bytes, block)


def _msg(
    role: str,
    parts: tuple[StoredPart, ...] = (),
    *,
    content: str = "",
    shape: str = "blocks",
    name: str | None = None,
    msg_id: str = "m1",
    seq: int = 1,
) -> StoredMessage:
    return StoredMessage(
        row_id=seq,
        id=msg_id,
        seq=seq,
        role=role,
        name=name,
        content=content,
        content_shape=shape,
        token_count=estimate_tokens(content),
        created_at="2024-01-01T00:00:00.000Z",
        parts=parts,
    )


def _text(text: str) -> Block:
    return Block("text", text)


def _call(call_id: str, name: str = "f", args: str = "{}") -> Block:
    return Block("tool_call", call_id=call_id, name=name, arguments=args)


def _result(call_id: str, text: str = "ok", **kw: Any) -> Block:
    return Block("tool_result", text, call_id=call_id, **kw)


_seq = itertools.count(1)


def _turn(role: str, *blocks: Block, source: str | None = None) -> Turn:
    seq = next(_seq)
    return Turn(role, blocks, source or f"m{seq}", seq)  # type: ignore[arg-type]


def _shape(turns: list[Turn]) -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    """Turns as (role, ((block type, call id or text), ...)) for compact comparisons."""
    return [
        (t.role, tuple((b.type, b.call_id if b.call_id else b.text) for b in t.blocks))
        for t in turns
    ]


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
        Block("other", data={"type": "mystery"}),
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
    assert turn.blocks == (Block("other", data=use),)


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


def test_stub_disambiguator_is_cut_to_about_120_characters() -> None:
    stub = stub_text("file_1", "bash", 1, orjson.dumps({"command": "x" * 500}).decode())
    hint = stub.split("] ", 1)[1]
    assert len(hint) == 120
    assert hint.endswith("…")


# -- pair_tools -------------------------------------------------------------------------


def test_paired_turns_come_through_as_the_same_objects() -> None:
    turns = [
        _turn("user", _text("hi")),
        _turn("assistant", _call("c1"), _call("c2")),
        _turn("tool", _result("c1", name="f")),
        _turn("tool", _result("c2", name="f")),
        _turn("assistant", _text("done")),
    ]
    out, report = pair_tools(turns)
    assert all(a is b for a, b in zip(out, turns, strict=True))
    assert report == PairingReport(0, 0, 0, 0)


def test_a_result_after_later_turns_is_moved_next_to_its_call() -> None:
    turns = [
        _turn("assistant", _call("c1")),
        _turn("user", _text("wait")),
        _turn("tool", _result("c1")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"),)),
        ("tool", (("tool_result", "c1"),)),
        ("user", (("text", "wait"),)),
    ]
    assert out[1].source == turns[2].source
    assert report.moved == 1


def test_a_result_before_its_call_is_moved_after_it() -> None:
    turns = [_turn("tool", _result("c1", "early")), _turn("assistant", _call("c1"))]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"),)),
        ("tool", (("tool_result", "c1"),)),
    ]
    assert out[1].blocks[0].text == "early"
    assert report.moved == 1


def test_results_of_one_turn_follow_the_call_order() -> None:
    turns = [
        _turn("assistant", _call("c1"), _call("c2"), _call("c3")),
        _turn("tool", _result("c3")),
        _turn("tool", _result("c1")),
        _turn("tool", _result("c2")),
    ]
    out, _ = pair_tools(turns)
    assert [t.blocks[0].call_id for t in out[1:]] == ["c1", "c2", "c3"]


def test_results_sharing_a_turn_with_text_are_split_from_it_and_go_first() -> None:
    turns = [
        _turn("assistant", _call("c1"), _call("c2")),
        _turn("user", _text("and also"), _result("c2"), _result("c1")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"), ("tool_call", "c2"))),
        ("user", (("tool_result", "c1"), ("tool_result", "c2"))),
        ("user", (("text", "and also"),)),
    ]
    assert report.moved == 0


def test_a_result_whose_call_is_absent_is_dropped() -> None:
    turns = [_turn("tool", _result("gone")), _turn("user", _text("hi"))]
    out, report = pair_tools(turns)
    assert _shape(out) == [("user", (("text", "hi"),))]
    assert report.dropped_results == 1


def test_a_second_result_for_one_call_is_dropped_keeping_the_first_after_the_call() -> None:
    turns = [
        _turn("tool", _result("c1", "before")),
        _turn("assistant", _call("c1")),
        _turn("tool", _result("c1", "first")),
        _turn("tool", _result("c1", "again")),
    ]
    out, report = pair_tools(turns)
    assert [b.text for t in out for b in t.blocks if b.type == "tool_result"] == ["first"]
    assert report.dropped_results == 2


def test_a_reused_call_id_pairs_each_result_with_its_own_call() -> None:
    turns = [
        _turn("assistant", _call("call_0", "a")),
        _turn("tool", _result("call_0", "from a")),
        _turn("assistant", _call("call_0", "b")),
        _turn("tool", _result("call_0", "from b")),
    ]
    out, report = pair_tools(turns)
    assert all(a is b for a, b in zip(out, turns, strict=True))
    assert report == PairingReport(0, 0, 0, 0)


def test_results_after_two_calls_sharing_an_id_answer_the_later_call() -> None:
    # brain.lcm.pairing's rule, as the fresh tail and compaction read it: the earlier
    # call was never answered, and the second result is a duplicate.
    turns = [
        _turn("assistant", _call("call_0", "a")),
        _turn("assistant", _call("call_0", "b")),
        _turn("tool", _result("call_0", "first")),
        _turn("tool", _result("call_0", "second")),
        _turn("user", _text("next")),
    ]
    out, report = pair_tools(turns)
    assert [(t.seq, b.text) for t in out for b in t.blocks if b.type == "tool_result"] == [
        (turns[0].seq, UNANSWERED),
        (turns[2].seq, "first"),
    ]
    assert (report.synthesized, report.dropped_results) == (1, 1)


def test_a_call_answered_outside_the_selection_is_dropped_with_its_empty_turn() -> None:
    turns = [
        _turn("assistant", _call("c1")),
        _turn("assistant", _text("looking"), _call("c2")),
        _turn("user", _text("next")),
    ]
    out, report = pair_tools(turns, answered_elsewhere=frozenset({"c1", "c2"}))
    assert _shape(out) == [("assistant", (("text", "looking"),)), ("user", (("text", "next"),))]
    assert report.dropped_calls == 2


def test_the_last_call_with_nothing_after_it_is_left_in_progress() -> None:
    turns = [_turn("user", _text("go")), _turn("assistant", _call("c1"), _call("c2"))]
    out, report = pair_tools(turns)
    assert out == turns
    assert report == PairingReport(0, 0, 0, 0)


def test_a_call_followed_only_by_some_of_its_results_is_still_in_progress() -> None:
    turns = [_turn("assistant", _call("c1"), _call("c2")), _turn("tool", _result("c2"))]
    out, report = pair_tools(turns)
    assert out == turns
    assert report.synthesized == 0


def test_an_unanswered_call_gets_a_synthetic_error_result() -> None:
    turns = [
        _turn("assistant", _call("c1", "bash"), _call("c2")),
        _turn("tool", _result("c2")),
        _turn("user", _text("well?")),
    ]
    out, report = pair_tools(turns)
    assert _shape(out) == [
        ("assistant", (("tool_call", "c1"), ("tool_call", "c2"))),
        ("tool", (("tool_result", "c1"),)),
        ("tool", (("tool_result", "c2"),)),
        ("user", (("text", "well?"),)),
    ]
    synthetic = out[1]
    assert synthetic.synthetic
    assert synthetic.blocks == (
        Block("tool_result", UNANSWERED, call_id="c1", name="bash", is_error=True),
    )
    assert (synthetic.source, synthetic.seq) == (turns[0].source, turns[0].seq)
    assert report.synthesized == 1


def test_a_stub_result_gets_its_disambiguator_and_tool_from_the_call() -> None:
    turns = [
        _turn("assistant", _call("c1", "read_file", '{"path": "src/main.py"}')),
        _turn("tool", _result("c1", stub_text("file_9", None, 4096, None))),
    ]
    out, _ = pair_tools(turns)
    result = out[1].blocks[0]
    assert result.text == "[Tool Output: file_9 | tool=read_file | 4096 bytes] src/main.py"
    assert result.name == "read_file"


def test_a_result_merely_starting_like_a_stub_keeps_its_text() -> None:
    text = "[Tool Output: not really a stub\nsecond line"
    turns = [
        _turn("assistant", _call("c1", args='{"path": "x"}')),
        _turn("tool", _result("c1", text)),
    ]
    out, _ = pair_tools(turns)
    assert out[1].blocks[0].text == text


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
    result = _result("t1", "shot", data=block)
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


# -- turn_tokens ------------------------------------------------------------------------


def test_a_one_block_text_turn_costs_what_the_stored_message_costs() -> None:
    text = "a fairly ordinary sentence of text"
    assert turn_tokens(_turn("user", _text(text))) == message_cost(estimate_tokens(text))


def test_each_extra_block_adds_the_block_overhead() -> None:
    one = turn_tokens(_turn("user", _text("abcd")))
    three = turn_tokens(_turn("user", _text("abcd"), _text("abcd"), _text("abcd")))
    assert three == one + 2 * (1 + BLOCK_OVERHEAD)


def test_images_cost_a_flat_figure_and_unrendered_blocks_nothing() -> None:
    image = Block("image", "[image]", data={"type": "image_url", "image_url": {"url": "u" * 9000}})
    assert turn_tokens(_turn("user", image)) == message_cost(IMAGE_TOKENS)
    assert turn_tokens(_turn("user", Block("other", data={"x": "y" * 100}))) == message_cost(0)


def test_calls_and_results_cost_their_ids_names_and_text() -> None:
    call = _call("c1", "read", '{"path": "a"}')
    expected = estimate_tokens("c1") + estimate_tokens("read") + estimate_tokens('{"path": "a"}')
    assert turn_tokens(_turn("assistant", call)) == message_cost(expected)
    result = _result("c1", "hello world")
    expected = estimate_tokens("c1") + estimate_tokens("hello world")
    assert turn_tokens(_turn("tool", result)) == message_cost(expected)


# -- properties over tool-heavy conversations ----------------------------------------------

FATES = ("in_place", "in_place", "later", "anywhere", "missing", "duplicated", "elsewhere")
texts = st.sampled_from(["hi", "", " ", "look at 中文", "ok then", "line\nline"])


@st.composite
def tool_conversations(draw: st.DrawFn) -> tuple[list[Turn], frozenset[str]]:
    """Turns with calls whose results are in place, late, early, missing or doubled.

    Call ids are unique, so every result names exactly one call (or none: an
    orphan). Returns the turns and the ids answered outside them.
    """
    placed: list[tuple[float, int, Turn]] = []
    elsewhere: set[str] = set()
    counter = itertools.count()
    episodes = draw(st.integers(1, 7))
    end = episodes * 10 + 10

    def put(position: float, turn: Turn) -> None:
        placed.append((position, next(counter), turn))

    for i in range(episodes):
        at = i * 10
        kind = draw(st.sampled_from(["user", "summary", "assistant", "assistant"]))
        if kind == "user":
            put(at, Turn("user", (Block("text", draw(texts)),), f"u{i}", at))
            continue
        if kind == "summary":
            put(at, summary_turn(f"sum_{i}", f"<summary>{i}</summary>", at))
            continue
        calls = [
            Block("tool_call", call_id=f"c{i}_{j}", name="read", arguments='{"path": "p"}')
            for j in range(draw(st.integers(0, 3)))
        ]
        head = [Block("text", draw(texts))] if draw(st.booleans()) or not calls else []
        put(at, Turn("assistant", (*head, *calls), f"a{i}", at))
        grouped = draw(st.booleans())  # Anthropic style: results share one user turn
        in_place: list[Block] = []
        for call in calls:
            assert call.call_id is not None
            fate = draw(st.sampled_from(FATES))
            result = Block("tool_result", f"out {call.call_id}", call_id=call.call_id)
            if fate == "elsewhere":
                elsewhere.add(call.call_id)
            if fate in ("in_place", "duplicated"):
                in_place.append(result)
            if fate == "later":
                put(draw(st.floats(at + 2, end)), Turn("tool", (result,), f"r{call.call_id}", at))
            if fate in ("anywhere", "duplicated"):
                again = Block("tool_result", f"dup {call.call_id}", call_id=call.call_id)
                put(draw(st.floats(-1, end)), Turn("tool", (again,), f"d{call.call_id}", at))
        in_place = draw(st.permutations(in_place))
        if grouped and in_place:
            extra = [Block("text", "and")] if draw(st.booleans()) else []
            put(at + 1, Turn("user", (*in_place, *extra), f"g{i}", at))
        else:
            for k, result in enumerate(in_place):
                put(at + 1 + k / 10, Turn("tool", (result,), f"t{i}_{k}", at))
    for k in range(draw(st.integers(0, 2))):
        orphan = Block("tool_result", "orphan", call_id=f"orphan{k}")
        put(draw(st.floats(-1, end)), Turn("tool", (orphan,), f"o{k}", 0))
    placed.sort(key=lambda p: (p[0], p[1]))
    return [t for _, _, t in placed], frozenset(elsewhere)


def _calls(turns: list[Turn]) -> dict[str, Block]:
    return {b.call_id: b for t in turns for b in t.blocks if b.type == "tool_call" and b.call_id}


def _results(turns: list[Turn]) -> list[Block]:
    return [b for t in turns for b in t.blocks if b.type == "tool_result"]


def _check_paired(turns: list[Turn]) -> None:
    """Results directly follow their call's turn in call order; only a trailing call waits."""
    pending: list[str] = []  # calls of the last content turn not answered yet, in order
    skipped: list[str] = []  # calls passed over by a later call's result
    for turn in turns:
        kinds = {b.type for b in turn.blocks}
        assert turn.blocks, "no empty turns"
        if kinds == {"tool_result"}:
            for block in turn.blocks:
                assert block.call_id in pending, f"result {block.call_id} does not follow its call"
                at = pending.index(block.call_id)
                skipped += pending[:at]
                del pending[: at + 1]
            continue
        assert "tool_result" not in kinds, "results are never mixed into other turns"
        assert not pending, f"calls {pending} unanswered before later content"
        assert not skipped, f"calls {skipped} unanswered before later content"
        pending = [b.call_id or "" for b in turn.blocks if b.type == "tool_call"]


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_pairing_leaves_no_orphans_no_unanswered_calls_and_loses_no_result(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    out, report = pair_tools(turns, answered_elsewhere=elsewhere)
    _check_paired(out)

    calls_in, calls_out = _calls(turns), _calls(out)
    results_in, results_out = _results(turns), _results(out)
    answered_in = {b.call_id for b in results_in}
    kept = {b.call_id: b for b in results_out}
    assert len(kept) == len(results_out), "one result per call"
    for call_id in calls_in:
        if call_id in answered_in:
            # Moved, not discarded: a present call keeps one of its results.
            assert call_id in calls_out
            assert not kept[call_id].is_error
            assert kept[call_id].text in {b.text for b in results_in if b.call_id == call_id}
        elif call_id in elsewhere:
            assert call_id not in calls_out
    for kept_id, block in kept.items():
        assert kept_id in calls_out
        assert block.is_error == (kept_id not in answered_in)
    assert report.synthesized == sum(len(t.blocks) for t in out if t.synthetic)
    assert report.dropped_results == len(results_in) - sum(
        1 for b in results_out if b.text != UNANSWERED
    )
    assert report.dropped_calls == len(calls_in) - len(calls_out)
    # Pairing what is already paired changes nothing.
    again, report_again = pair_tools(out, answered_elsewhere=elsewhere)
    assert again == out
    assert report_again == PairingReport(0, 0, 0, 0)


def _trailing_ids(turns: list[Turn]) -> set[str]:
    """Ids of calls left waiting at the end of paired turns (in progress)."""
    answered = {b.call_id for b in _results(turns)}
    content = [t for t in turns if any(b.type != "tool_result" for b in t.blocks)]
    if not content:
        return set()
    last = content[-1]
    return {b.call_id or "" for b in last.blocks if b.type == "tool_call"} - answered


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_anthropic_output_alternates_starts_with_user_and_answers_every_tool_use(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    paired, _ = pair_tools(turns, answered_elsewhere=elsewhere)
    waiting = _trailing_ids(paired)
    _, messages = render_anthropic(paired)
    if not messages:
        return
    assert messages[0]["role"] == "user"
    for i, msg in enumerate(messages):
        assert msg["content"], "no empty content"
        for block in msg["content"]:
            if block["type"] == "text":
                assert block["text"].strip()
        if i:
            assert msg["role"] != messages[i - 1]["role"], "roles alternate"
        types = [b["type"] for b in msg["content"]]
        if msg["role"] == "user":
            assert "tool_use" not in types
            assert types == sorted(types, key=lambda t: t != "tool_result"), "results first"
            given_ids = {b["tool_use_id"] for b in msg["content"] if b["type"] == "tool_result"}
            if given_ids:
                previous = messages[i - 1]["content"]
                assert given_ids <= {b["id"] for b in previous if b["type"] == "tool_use"}
        else:
            assert "tool_result" not in types
            use_ids = {b["id"] for b in msg["content"] if b["type"] == "tool_use"}
            answered = set()
            if i + 1 < len(messages):
                answered = {
                    b["tool_use_id"]
                    for b in messages[i + 1]["content"]
                    if b["type"] == "tool_result"
                }
            assert use_ids - answered <= waiting


@settings(max_examples=300, deadline=None)
@given(tool_conversations())
def test_openai_output_answers_every_tool_call_with_the_following_tool_messages(
    case: tuple[list[Turn], frozenset[str]],
) -> None:
    turns, elsewhere = case
    paired, _ = pair_tools(turns, answered_elsewhere=elsewhere)
    waiting = _trailing_ids(paired)
    messages = render_openai(paired)
    for i, msg in enumerate(messages):
        assert msg["role"] in ("system", "user", "assistant", "tool")
        if msg["role"] == "tool":
            j = i - 1
            while messages[j]["role"] == "tool":
                j -= 1
            call_ids = [c["id"] for c in messages[j].get("tool_calls", ())]
            assert msg["tool_call_id"] in call_ids, "a tool message answers the calls before it"
        if msg.get("tool_calls"):
            ids = [c["id"] for c in msg["tool_calls"]]
            following = []
            for nxt in messages[i + 1 :]:
                if nxt["role"] != "tool":
                    break
                following.append(nxt["tool_call_id"])
            assert following == [c for c in ids if c not in waiting]
            assert set(ids) - set(following) <= waiting
        elif msg["role"] == "assistant":
            assert msg["content"] is not None


# -- end to end through a real store ----------------------------------------------------------


@pytest.fixture
def brain(db_path: Path) -> Iterator[Brain]:
    """An engine with a small payload threshold, so tool outputs go to payload files."""
    engine = Brain(db_path, BrainConfig(large_payload_tokens=64))
    try:
        yield engine
    finally:
        engine.close()


def _stored(brain: Brain, session: str, messages: list[MessageIn]) -> list[Turn]:
    brain.ingest(session, messages)
    row = brain.store.one("SELECT id FROM conversations WHERE session_id = ?", (session,))
    assert row is not None
    return [turn_from_message(m) for m in load_range(brain.store, int(row[0]), 1, 10**9)]


def test_an_openai_agent_conversation_renders_back_in_both_shapes(brain: Brain) -> None:
    big = "line of a large config file\n" * 40
    turns = _stored(
        brain,
        "openai",
        [
            MessageIn("system", "You are a coding agent.", client_id="s"),
            MessageIn("user", "What port does the app use?", client_id="u1"),
            MessageIn(
                "assistant",
                "",
                client_id="a1",
                tool_calls=[
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "conf/app.toml"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ss -ltn"}'},
                    },
                ],
            ),
            MessageIn("tool", big, client_id="t1", tool_call_id="call_1"),
            MessageIn("tool", "LISTEN 0 128 *:8080", client_id="t2", tool_call_id="call_2"),
            MessageIn("assistant", "It listens on 8080.", client_id="a2"),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(0, 0, 0, 0)
    messages = render_openai(paired)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert messages[2]["content"] is None
    assert [c["function"]["name"] for c in messages[2]["tool_calls"]] == ["read_file", "bash"]
    stub = messages[3]["content"]
    assert stub.startswith("[Tool Output: file_")
    assert stub.endswith(f" | tool=read_file | {len(big.encode())} bytes] conf/app.toml")
    assert messages[4] == {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": "LISTEN 0 128 *:8080",
    }

    system, anthropic = render_anthropic(paired)
    assert system == "You are a coding agent."
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user", "assistant"]
    assert anthropic[1]["content"][0] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "read_file",
        "input": {"path": "conf/app.toml"},
    }
    assert [b["tool_use_id"] for b in anthropic[2]["content"]] == ["call_1", "call_2"]
    assert anthropic[2]["content"][0]["content"] == stub


def test_an_anthropic_agent_conversation_renders_back_in_both_shapes(brain: Brain) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    thinking = {"type": "thinking", "thinking": "List the dir.", "signature": "EqQBCgIYAhIM"}
    turns = _stored(
        brain,
        "anthropic",
        [
            MessageIn("user", [{"type": "text", "text": "What is in this dir?"}, image]),
            MessageIn(
                "assistant",
                [
                    thinking,
                    {"type": "text", "text": "Let me look."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "bash",
                        "input": {"command": "ls"},
                    },
                ],
            ),
            MessageIn(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "README.md\nsrc"}],
                    }
                ],
            ),
            MessageIn("assistant", [{"type": "text", "text": "A README and src."}]),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(0, 0, 0, 0)
    system, messages = render_anthropic(paired)
    assert system is None
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "What is in this dir?"}, image]},
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "README.md\nsrc"}],
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "A README and src."}]},
    ]
    openai = render_openai(paired)
    assert openai[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert openai[1]["content"] == "Let me look."  # the thinking is left out
    assert openai[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "README.md\nsrc"}


def test_a_stored_conversation_with_a_late_result_and_a_lost_one_is_repaired(brain: Brain) -> None:
    def call(call_id: str, command: str) -> dict[str, Any]:
        arguments = orjson.dumps({"command": command}).decode()
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": arguments},
        }

    turns = _stored(
        brain,
        "messy",
        [
            MessageIn("user", "build it"),
            MessageIn("assistant", "", tool_calls=[call("c1", "make"), call("c2", "make test")]),
            MessageIn("user", "are you there?"),
            MessageIn("tool", "built", tool_call_id="c1"),
            MessageIn("tool", "stale output", tool_call_id="c0"),
            MessageIn("assistant", "Built; tests never reported."),
        ],
    )
    paired, report = pair_tools(turns)
    assert report == PairingReport(moved=1, dropped_results=1, dropped_calls=0, synthesized=1)
    messages = render_openai(paired)
    assert [(m["role"], m.get("tool_call_id")) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
        ("assistant", None),
    ]
    assert messages[3]["content"] == UNANSWERED


def test_a_large_stored_image_is_shown_as_its_reference(brain: Brain) -> None:
    big = base64.b64encode(bytes(range(256)) * 4).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}}
    (turn,) = _stored(brain, "img", [MessageIn("user", [image])])
    (block,) = turn.blocks
    assert block.type == "text"
    assert block.text.startswith("[Large payload file_")
    assert " | image | " in block.text
    assert big not in block.text
