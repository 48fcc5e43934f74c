"""Turns: stored messages and summaries as provider-neutral blocks, and tool-output stubs.

``turn_from_message`` makes a ``Turn`` (a role and its ``Block``s) from a
stored message, ``summary_turn`` from a summary. Payload files are never
inlined: a tool output kept in a file becomes a one-line stub naming it
(``stub_text``), any other block the compact reference the flattened text
already holds. Tests: tests/brain/lcm/render/test_turns.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, cast

import orjson

from brain.lcm.content import FILE_MARKER, block_label, foreign_call, nested_text
from brain.lcm.messages import StoredMessage, StoredPart, speaker

BlockType = Literal[
    "text", "refusal", "image", "file", "tool_call", "tool_result", "reasoning", "other"
]
Role = Literal["user", "assistant", "system", "tool"]


STUB_PREFIX: Final = "[Tool Output: "
HINT_CHARS: Final = 120
# Argument keys that best say what a tool call was about, most telling first.
_HINT_KEYS: Final = ("path", "file_path", "filename", "command", "cmd", "pattern", "query", "url")


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of a turn, in neither API's shape.

    ``text`` is the text, refusal, tool result text or reasoning text (for images and
    files a placeholder such as ``[image]``, used where the target API cannot
    carry the block). ``data`` is the original stored block, kept so images,
    files and reasoning signatures render as faithfully as the target allows.
    """

    type: BlockType
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    is_error: bool = False
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """A message or summary as blocks; ``source`` is its message or summary id.

    ``seq`` is the message's seq (a summary's first seq); ``synthetic`` marks
    a turn ``pair_tools`` made up to answer a call that never got a result.
    ``name`` is the speaker's name as ingested (user, assistant and system
    messages; a tool message's name is its tool's, kept on its result block).
    ``sent_role`` is the role the message was sent with when ``role`` is the
    one it is stored and placed as (``developer`` for a system turn).
    """

    role: Role
    blocks: tuple[Block, ...]
    source: str
    seq: int
    synthetic: bool = False
    name: str | None = None
    sent_role: str | None = None


def turn_from_message(msg: StoredMessage) -> Turn:
    """The turn for a stored message: its parts in order, as blocks.

    An OpenAI tool message becomes one ``tool_result`` block holding its
    content; OpenAI ``tool_calls`` become ``tool_call`` blocks. A tool result
    whose output is in a payload file becomes a ``stub_text`` (``pair_tools``
    adds the call's disambiguator later); any other block with a payload file
    becomes text holding the flattened reference to the file, except
    reasoning, which stays reasoning (it is never shown as text). A message-level
    ``refusal`` (OpenAI) comes last, as a ``refusal`` block, after an audio
    answer's transcript and a legacy ``function_call`` as text. A legacy
    ``function`` result is text saying which function answered.
    """
    role = _role(msg.role)
    name = speaker(msg.role, msg.name)
    said = tuple(Block("text", t) for t in (msg.audio, msg.function_call) if t is not None)
    said += (Block("refusal", msg.refusal),) if msg.refusal is not None else ()
    if not msg.parts:
        plain = msg.content_shape == "string" and msg.content and not msg.no_content
        only = (Block("text", msg.content),) if plain else ()
        return _turn(msg, role, only + said, name)
    result = next((p for p in msg.parts if p.origin == "message" and p.kind == "tool_result"), None)
    blocks: list[Block] = []
    if result is not None:
        blocks.append(_message_result(msg, result))
    for part in msg.parts:
        block: Block | None
        if part.origin == "message":
            block = None if part is result else _message_text(msg, part)
        elif part.origin == "tool_calls":
            block = _call_block(msg, part)
        elif result is None:
            block = _content_block(msg, part)
        else:
            block = None  # a tool message's content blocks are its result's text
        if block is not None:
            blocks.append(block)
    return _turn(msg, role, tuple(blocks) + said, name)


def _turn(msg: StoredMessage, role: Role, blocks: tuple[Block, ...], name: str | None) -> Turn:
    if msg.sent_role == "function":
        # A legacy function result has no call id to pair it with its call
        # (which renders as text too): say whose result it is, in words.
        head = f"[function result] {msg.name}:" if msg.name else "[function result]"
        if blocks and blocks[0].type == "text":
            blocks = (replace(blocks[0], text=f"{head} {blocks[0].text}"), *blocks[1:])
        else:
            blocks = (Block("text", head), *blocks)
    return Turn(role, blocks, msg.id, msg.seq, name=name, sent_role=msg.sent_role)


def summary_turn(summary_id: str, xml: str, seq: int) -> Turn:
    """A summary as a user turn holding its XML."""
    return Turn("user", (Block("text", xml),), summary_id, seq)


def stub_text(
    file_id_or_msg_id: str,
    tool: str | None,
    size_bytes: int,
    call_arguments: str | None,
    *,
    block: int | None = None,
) -> str:
    """A one-line stand-in for a tool output the context leaves out.

    ``[Tool Output: ID | tool=NAME | N bytes] HINT`` where HINT says what the
    call was about: the first of path, file_path, filename, command, cmd,
    pattern, query or url among the call's JSON arguments, on one line and
    cut to about 120 characters (nothing when there is none). ``block``: for a
    message holding more than the result, which of its content blocks it is
    (``[Tool Output: ID | content[N] | ...]``: ``describe(ID)`` shows the message
    as sent, and the result is its ``content[N]``).
    """
    block_part = f" | content[{block}]" if block is not None else ""
    tool_part = f" | tool={tool}" if tool else ""
    head = f"{STUB_PREFIX}{file_id_or_msg_id}{block_part}{tool_part} | {size_bytes} bytes]"
    hint = _hint(call_arguments)
    return f"{head} {hint}" if hint else head


def _role(role: str) -> Role:
    # Ingest validates roles; anything else would be a corrupt row, shown as user.
    return cast(Role, role) if role in ("user", "assistant", "system", "tool") else "user"


def _message_result(msg: StoredMessage, part: StoredPart) -> Block:
    """An OpenAI tool message's result: its string content, or its blocks' text."""
    if msg.content_shape == "string":
        if part.file_id is not None:
            text = stub_text(part.file_id, msg.name, part.file_bytes or 0, None)
        elif isinstance(part.block, str):  # the original string beside tool calls
            text = part.block
        else:
            text = msg.content
    else:
        texts = []
        for p in msg.parts:
            if p.origin != "content":
                continue
            if p.file_id is not None:
                texts.append(stub_text(p.file_id, msg.name, p.file_bytes or 0, None))
            elif isinstance(p.block, dict):
                texts.append(_block_text(p.block))
        text = "\n".join(t for t in texts if t)
    return Block("tool_result", text, call_id=part.tool_call_id, name=msg.name)


def _message_text(msg: StoredMessage, part: StoredPart) -> Block | None:
    """A string content kept as a part (beside tool calls, or moved to a payload file)."""
    if part.file_id is not None:
        text = _reference(msg, part)
    elif isinstance(part.block, str):
        text = part.block
    else:
        text = msg.content
    return Block("text", text) if text else None


def _call_block(msg: StoredMessage, part: StoredPart) -> Block:
    stored = part.block if isinstance(part.block, dict) else {}
    if part.file_id is not None:
        # Show the reference where the bulk was; the rest of the call stays
        # (a path or command still says what the call did).
        stored = _replace_marker(stored, part.file_id, _reference(msg, part))
    custom: Mapping[str, Any] | None = None
    raw: Any
    if part.origin == "tool_calls" and stored.get("type") == "custom":
        # ChatCompletionMessageCustomToolCall: {"id", "type", "custom": {"name", "input"}}
        inner = stored.get("custom")
        inner = inner if isinstance(inner, dict) else {}
        raw = inner.get("input", "")
        name = part.tool_name or inner.get("name")
        custom = stored
    elif part.origin == "tool_calls" and (foreign := foreign_call(stored)) is not None:
        # A call type newer than brain: its own shape rides along for OpenAI output.
        name, raw = part.tool_name or foreign[0], foreign[1]
        custom = stored
    elif part.origin == "tool_calls":  # OpenAI {"id", "type", "function": {"name", "arguments"}}
        function = stored.get("function")
        function = function if isinstance(function, dict) else {}
        raw = function.get("arguments", "")
        name = part.tool_name or function.get("name")
    elif stored.get("type") == "function_call":  # Responses
        raw = stored.get("arguments", "")
        name = part.tool_name or stored.get("name")
    elif stored.get("type") == "custom_tool_call":  # Responses, free-text input
        raw = stored.get("input", "")
        name = part.tool_name or stored.get("name")
        custom = stored
    else:  # Anthropic tool_use
        raw = stored.get("input", {})
        name = part.tool_name or stored.get("name")
    arguments = raw if isinstance(raw, str) else orjson.dumps(raw).decode()
    return Block(
        "tool_call",
        call_id=part.tool_call_id,
        name=name if isinstance(name, str) else None,
        arguments=arguments,
        # A custom call (free-text input) or one of a type brain does not know,
        # for the renderers; None for a function call.
        data=custom,
    )


def _content_block(msg: StoredMessage, part: StoredPart) -> Block | None:
    stored: dict[str, Any] = part.block if isinstance(part.block, dict) else {}
    kind = part.kind
    if kind == "tool_call":
        if stored.get("type") == "server_tool_use":
            # Run by the provider, answered inside the same message by a
            # result block we do not model: not a call for pairing to answer.
            call = _call_block(msg, part)
            text = f"[server_tool_use] {call.name or ''}({call.arguments or ''})"
            return Block("other", text, data=stored)
        return _call_block(msg, part)
    if kind == "tool_result":
        is_error = stored.get("is_error") is True
        if part.file_id is not None:
            text = stub_text(part.file_id, part.tool_name, part.file_bytes or 0, None)
            return Block("tool_result", text, part.tool_call_id, part.tool_name, is_error=is_error)
        responses = stored.get("type") in ("function_call_output", "custom_tool_call_output")
        body = stored.get("output" if responses else "content")
        text = nested_text(body)
        return Block(
            "tool_result", text, part.tool_call_id, part.tool_name, is_error=is_error, data=stored
        )
    if part.file_id is not None:
        reference = _reference(msg, part)
        if kind == "reasoning":  # never shown as text; the marker keeps it from rendering
            return Block("reasoning", reference, data=stored)
        return Block("text", reference)
    match kind:
        case "text":
            text = _block_text(stored)
            cited = isinstance(stored.get("citations"), list) and stored["citations"]
            # The block rides along only when it has citations for the renderers.
            return Block("text", text, data=stored if cited else None) if text else None
        case "reasoning":
            return Block("reasoning", _reasoning_text(stored), data=stored)
        case "image":
            return Block("image", "[image]", data=stored)
        case "file":
            return Block("file", _file_label(stored), data=stored)
        case _:
            return Block("other", block_label(stored), data=stored)


def _reference(msg: StoredMessage, part: StoredPart) -> str:
    """The flattened text's reference to a part's payload file.

    References are single lines (their preview has its whitespace collapsed)
    that start ``[Large payload FILE_ID ``; a reference we cannot find is
    rebuilt without its preview.
    """
    file_id = part.file_id or ""
    start = msg.content.find(f"[Large payload {file_id} ")
    if start < 0:
        tool = f" tool={part.tool_name}" if part.tool_name else ""
        return f"[Large payload {file_id} | {part.kind}{tool} | {part.file_bytes or 0} bytes]"
    end = msg.content.find("\n", start)
    return msg.content[start:] if end < 0 else msg.content[start:end]


def _replace_marker(value: Any, file_id: str, text: str) -> Any:
    if isinstance(value, dict):
        if value.get(FILE_MARKER) == file_id and len(value) == 2 and "encoding" in value:
            return text
        return {k: _replace_marker(v, file_id, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_marker(v, file_id, text) for v in value]
    return value


def _block_text(block: Mapping[str, Any]) -> str:
    for key in ("text", "refusal"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    return ""


def _reasoning_text(block: Mapping[str, Any]) -> str:
    for key in ("thinking", "text"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    return nested_text(block.get("summary") or block.get("content"))


def _file_label(block: Mapping[str, Any]) -> str:
    """The placeholder content.py flattens a file block to: ``[file: TITLE]``."""
    inner = block.get("file")
    title = block.get("title") or (inner.get("filename") if isinstance(inner, dict) else None)
    return f"[file: {title}]" if isinstance(title, str) else "[file]"


def _hint(arguments: str | None) -> str:
    if not arguments:
        return ""
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(parsed, dict):
        return ""
    for key in _HINT_KEYS:
        value = parsed.get(key)
        if isinstance(value, list):  # a command as argv
            value = " ".join(str(v) for v in value if isinstance(v, str | int | float))
        if isinstance(value, str) and value.strip():
            # Cut before splitting: a command can be a whole script.
            line = " ".join(value[: HINT_CHARS * 4].split())
            return line if len(line) <= HINT_CHARS else line[: HINT_CHARS - 1] + "…"
    return ""
