"""Render: selected context (stored messages and summaries) as model-ready messages.

Assembly decides what goes into a context; this module writes it out, in three
steps:

1. ``turn_from_message`` and ``summary_turn`` make a provider-neutral ``Turn``
   (a role and its ``Block``s) from a stored message or a summary. Payload
   files are never inlined: a tool output kept in a file becomes a one-line
   stub naming it (``stub_text``), any other block the compact reference the
   flattened text already holds.
2. ``pair_tools`` makes tool calls and results consistent, as both APIs
   demand: each result directly after the turn holding its call, no result
   without its call, no call without a result unless it is still running.
3. ``render_openai`` and ``render_anthropic`` write turns in one API's shape.

``turn_tokens`` estimates what a turn costs in a budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, cast

import orjson

from brain.lcm.content import FILE_MARKER
from brain.lcm.messages import StoredMessage, StoredPart, speaker, with_speaker
from brain.lcm.pairing import match
from brain.tokens import BLOCK_OVERHEAD, IMAGE_TOKENS, estimate_tokens, message_cost, name_tokens

BlockType = Literal[
    "text", "refusal", "image", "file", "tool_call", "tool_result", "reasoning", "other"
]
Role = Literal["user", "assistant", "system", "tool"]

UNANSWERED: Final = "[tool result unavailable: the tool call was never answered]"
"""Text of the error result ``pair_tools`` adds for a call that was never answered."""

CONTINUES: Final = "[conversation continues]"
"""Text of the user message put first when an Anthropic context would start with the assistant."""

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
    """

    role: Role
    blocks: tuple[Block, ...]
    source: str
    seq: int
    synthetic: bool = False
    name: str | None = None


@dataclass(frozen=True, slots=True)
class PairingReport:
    """What ``pair_tools`` changed: results moved next to their calls, results
    dropped (orphaned or duplicated), calls dropped (their result exists but
    was not selected), and error results synthesized for unanswered calls."""

    moved: int
    dropped_results: int
    dropped_calls: int
    synthesized: int


def turn_from_message(msg: StoredMessage) -> Turn:
    """The turn for a stored message: its parts in order, as blocks.

    An OpenAI tool message becomes one ``tool_result`` block holding its
    content; OpenAI ``tool_calls`` become ``tool_call`` blocks. A tool result
    whose output is in a payload file becomes a ``stub_text`` (``pair_tools``
    adds the call's disambiguator later); any other block with a payload file
    becomes text holding the flattened reference to the file, except
    reasoning, which stays reasoning (it is never shown as text). A message-level
    ``refusal`` (OpenAI) comes last, as a ``refusal`` block.
    """
    role = _role(msg.role)
    name = speaker(msg.role, msg.name)
    refusal = (Block("refusal", msg.refusal),) if msg.refusal is not None else ()
    if not msg.parts:
        plain = msg.content_shape == "string" and msg.content and not msg.no_content
        only = (Block("text", msg.content),) if plain else ()
        return Turn(role, only + refusal, msg.id, msg.seq, name=name)
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
    return Turn(role, tuple(blocks) + refusal, msg.id, msg.seq, name=name)


def summary_turn(summary_id: str, xml: str, seq: int) -> Turn:
    """A summary as a user turn holding its XML."""
    return Turn("user", (Block("text", xml),), summary_id, seq)


def stub_text(
    file_id_or_msg_id: str, tool: str | None, size_bytes: int, call_arguments: str | None
) -> str:
    """A one-line stand-in for a tool output the context leaves out.

    ``[Tool Output: ID | tool=NAME | N bytes] HINT`` where HINT says what the
    call was about: the first of path, file_path, filename, command, cmd,
    pattern, query or url among the call's JSON arguments, on one line and
    cut to about 120 characters (nothing when there is none).
    """
    tool_part = f" | tool={tool}" if tool else ""
    head = f"{STUB_PREFIX}{file_id_or_msg_id}{tool_part} | {size_bytes} bytes]"
    hint = _hint(call_arguments)
    return f"{head} {hint}" if hint else head


def pair_tools(
    turns: Sequence[Turn], *, answered_elsewhere: frozenset[str] = frozenset()
) -> tuple[list[Turn], PairingReport]:
    """Pair tool calls with their results, in time linear in the blocks.

    * A result pairs with a call by ``brain.lcm.pairing``'s rule (the latest call
      of its id before it, else the earliest after it). Paired results are
      placed right after the turn holding the call, in call order;
      consecutive results from one turn stay one turn.
    * A result left unpaired is dropped: its call is not in ``turns`` (evicted
      or summarised), or it is a second result for an answered call.
    * A call with no result: dropped when its id is in ``answered_elsewhere``
      (the result exists but was not selected); kept as is when nothing but
      tool results follows its turn (the call is still running); otherwise
      answered by a synthetic error result.

    Stub results (``[Tool Output: ...]``) get their disambiguator and tool
    name from their call. Turns that come through unchanged are the same
    objects, so callers may key cached costs by identity.
    """
    answer, results, has_content = _match(turns)
    last_content = max((t for t, c in enumerate(has_content) if c), default=-1)
    content_before = [0] * (len(turns) + 1)
    for t, c in enumerate(has_content):
        content_before[t + 1] = content_before[t] + c

    out: list[Turn] = []
    moved = dropped_calls = synthesized = 0
    for t, turn in enumerate(turns):
        residual: list[Block] = []
        kept: list[tuple[int, Block]] = []
        for b, block in enumerate(turn.blocks):
            if block.type == "tool_result":
                continue  # placed after its call, or dropped
            if block.type == "tool_call":
                if block.call_id is None or (
                    (t, b) not in answer and block.call_id in answered_elsewhere
                ):
                    dropped_calls += 1
                    continue
                kept.append((b, block))
            residual.append(block)
        if residual:
            out.append(
                turn if len(residual) == len(turn.blocks) else replace(turn, blocks=tuple(residual))
            )
        groups: list[tuple[int, list[Block]]] = []  # (source turn or -1 if synthetic, results)
        for b, call in kept:
            found = answer.get((t, b))
            if found is None:
                if t == last_content:
                    continue  # still in progress: its result has not arrived yet
                synthesized += 1
                key, block = -1, _unanswered(call)
            else:
                key, rb = found
                # In place: after the call with only tool results in between.
                if not (key > t and content_before[key] == content_before[t + 1]):
                    moved += 1
                block = _refine(turns[key].blocks[rb], call)
            if groups and groups[-1][0] == key:
                groups[-1][1].append(block)
            else:
                groups.append((key, [block]))
        out.extend(_result_turn(turns, turn, key, blocks) for key, blocks in groups)
    report = PairingReport(moved, results - len(answer), dropped_calls, synthesized)
    return out, report


def render_openai(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns as OpenAI chat-completions messages.

    Assistant tool calls go in ``tool_calls`` (content null when there is no
    text), a refusal in ``refusal``; each tool result is its own ``tool`` message; images become
    ``image_url`` parts. Reasoning is left out (chat completions takes none as
    input), as are unknown blocks; consecutive user turns stay separate
    messages. An image or file the message cannot carry becomes its
    placeholder text.
    """
    out: list[dict[str, Any]] = []
    for turn in turns:
        start = len(out)
        _openai_turn(turn, out)
        for msg in out[start:]:
            if msg["role"] != "tool":
                msg["content"] = _openai_content(msg["content"])
                if turn.name:
                    msg["name"] = turn.name
    return out


def render_anthropic(turns: Sequence[Turn]) -> tuple[str | None, list[dict[str, Any]]]:
    """Turns as Anthropic messages: (system text or None, messages).

    System turns are joined into the system text. Anthropic messages carry
    no name: a named speaker's first text block starts ``Name: ``. A refusal
    (which Anthropic has no field for) is the assistant's text. Tool results go in user
    messages (before any other block there, as the API requires), tool calls
    are ``tool_use`` blocks whose ``input`` is the parsed arguments (``{}``
    when they do not parse to an object). Consecutive messages of one role
    are merged, since the API wants roles to alternate; content is always a
    non-empty block list. Thinking is kept only with its signature; a
    conversation that would start with the assistant gets a first user
    message saying it continues.
    """
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "system":
            texts = [b.text for b in turn.blocks if b.type == "text" and b.text.strip()]
            if texts:
                texts[0] = with_speaker(texts[0], turn.name)
            system.extend(texts)
            continue
        for role, block in _anthropic_blocks(turn):
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": role, "content": [block]})
    for msg in messages:
        if msg["role"] == "user":
            _results_first(msg["content"])
    if messages and messages[0]["role"] == "assistant":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUES}]})
    return ("\n\n".join(system) or None), messages


def turn_tokens(turn: Turn) -> int:
    """Estimated cost of a turn: ``message_cost`` of its blocks' content plus
    ``BLOCK_OVERHEAD`` per block after the first.

    A one-block text turn thus costs what ``message_cost`` gives for its text,
    the same as the stored message; a speaker's name adds ``name_tokens``, as it
    does to the stored count. Images cost ``IMAGE_TOKENS``; blocks no
    renderer shows ("other") cost nothing.
    """
    content = sum(_block_tokens(b) for b in turn.blocks) + name_tokens(turn.name)
    return message_cost(content) + BLOCK_OVERHEAD * max(0, len(turn.blocks) - 1)


# -- from stored messages -------------------------------------------------------------


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
    if part.origin == "tool_calls":  # OpenAI {"id", "type", "function": {"name", "arguments"}}
        function = stored.get("function")
        function = function if isinstance(function, dict) else {}
        raw: Any = function.get("arguments", "")
        name = part.tool_name or function.get("name")
    elif stored.get("type") == "function_call":  # Responses
        raw = stored.get("arguments", "")
        name = part.tool_name or stored.get("name")
    else:  # Anthropic tool_use
        raw = stored.get("input", {})
        name = part.tool_name or stored.get("name")
    arguments = raw if isinstance(raw, str) else orjson.dumps(raw).decode()
    return Block(
        "tool_call",
        call_id=part.tool_call_id,
        name=name if isinstance(name, str) else None,
        arguments=arguments,
    )


def _content_block(msg: StoredMessage, part: StoredPart) -> Block | None:
    stored: dict[str, Any] = part.block if isinstance(part.block, dict) else {}
    kind = part.kind
    if kind == "tool_call":
        if stored.get("type") == "server_tool_use":
            # Run by the provider, answered inside the same message by a
            # result block we do not model: not a call for pairing to answer.
            return Block("other", data=stored)
        return _call_block(msg, part)
    if kind == "tool_result":
        is_error = stored.get("is_error") is True
        if part.file_id is not None:
            text = stub_text(part.file_id, part.tool_name, part.file_bytes or 0, None)
            return Block("tool_result", text, part.tool_call_id, part.tool_name, is_error=is_error)
        body = stored.get("output" if stored.get("type") == "function_call_output" else "content")
        text = _nested_text(body)
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
            return Block("text", text) if text else None
        case "reasoning":
            return Block("reasoning", _reasoning_text(stored), data=stored)
        case "image":
            return Block("image", "[image]", data=stored)
        case "file":
            return Block("file", _file_label(stored), data=stored)
        case _:
            return Block("other", data=stored)


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


def _nested_text(value: Any) -> str:
    """Text of a tool result body: a string, or the text of its blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            item if isinstance(item, str) else item["text"]
            for item in value
            if isinstance(item, str)
            or (isinstance(item, dict) and isinstance(item.get("text"), str))
        )
    return ""


def _reasoning_text(block: Mapping[str, Any]) -> str:
    for key in ("thinking", "text"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    return _nested_text(block.get("summary") or block.get("content"))


def _file_label(block: Mapping[str, Any]) -> str:
    """The placeholder content.py flattens a file block to: ``[file: TITLE]``."""
    inner = block.get("file")
    title = block.get("title") or (inner.get("filename") if isinstance(inner, dict) else None)
    return f"[file: {title}]" if isinstance(title, str) else "[file]"


# -- pairing ----------------------------------------------------------------------------

# The header stub_text writes; what follows it is the disambiguator.
_STUB: Final = re.compile(
    r"\[Tool Output: (?P<id>.+?)(?: \| tool=(?P<tool>.*?))? \| (?P<size>\d+) bytes\](?: .*)?"
)


def _match(
    turns: Sequence[Turn],
) -> tuple[dict[tuple[int, int], tuple[int, int]], int, list[bool]]:
    """Pair calls and results by (turn index, block index) (``brain.lcm.pairing``'s rule).

    Returns call -> result, the number of results, and for each turn whether
    it has a block other than a tool result.
    """
    answer = match([turn.blocks for turn in turns])
    results = sum(1 for turn in turns for block in turn.blocks if block.type == "tool_result")
    has_content = [any(b.type != "tool_result" for b in turn.blocks) for turn in turns]
    return answer, results, has_content


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


def _refine(result: Block, call: Block) -> Block:
    """A stub result with its call's disambiguator and tool name; any other result as is.

    Other results keep their identity (no name filled in: neither API shows
    it), so turns holding them come through as the same objects.
    """
    if not result.text.startswith(STUB_PREFIX):
        return result
    found = _STUB.fullmatch(result.text)
    if found is None:
        return result
    name = result.name or call.name
    text = stub_text(found["id"], found["tool"] or name, int(found["size"]), call.arguments)
    if name == result.name and text == result.text:
        return result
    return replace(result, text=text, name=name)


def _unanswered(call: Block) -> Block:
    return Block("tool_result", UNANSWERED, call.call_id, call.name, is_error=True)


def _result_turn(turns: Sequence[Turn], call_turn: Turn, key: int, blocks: list[Block]) -> Turn:
    if key < 0:
        return Turn("tool", tuple(blocks), call_turn.source, call_turn.seq, synthetic=True)
    source = turns[key]
    if tuple(blocks) == source.blocks:
        return source  # unchanged: keep the object (and any cost cached by identity)
    role: Role = source.role if source.role in ("user", "tool") else "tool"
    return Turn(role, tuple(blocks), source.source, source.seq, source.synthetic)


# -- OpenAI -----------------------------------------------------------------------------


def _openai_turn(turn: Turn, out: list[dict[str, Any]]) -> None:
    """Append a turn's messages; content is a part list until ``_openai_content``."""
    role = (
        "assistant" if turn.role == "assistant" else "system" if turn.role == "system" else "user"
    )
    current: dict[str, Any] | None = None
    for block in turn.blocks:
        if block.type == "tool_result":
            out.append({"role": "tool", "tool_call_id": block.call_id or "", "content": block.text})
            current = None
        elif block.type == "refusal":
            # Its own field, as the API gives it (content stays null when that is all).
            if current is None or current["role"] != role:
                current = {"role": role, "content": []}
                out.append(current)
            previous = current.get("refusal")
            current["refusal"] = block.text if previous is None else f"{previous}\n{block.text}"
        elif block.type == "tool_call":
            if current is None or current["role"] != "assistant":
                current = {"role": "assistant", "content": []}
                out.append(current)
            current.setdefault("tool_calls", []).append(
                {
                    "id": block.call_id or "",
                    "type": "function",
                    "function": {"name": block.name or "", "arguments": block.arguments or ""},
                }
            )
        else:
            part = _openai_part(block, role)
            if part is None:
                continue
            if current is None or current["role"] != role:
                current = {"role": role, "content": []}
                out.append(current)
            current["content"].append(part)


def _openai_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    if not parts:
        return None  # an assistant message with only tool calls
    if len(parts) == 1 and parts[0]["type"] == "text":
        return cast(str, parts[0]["text"])
    return parts


def _openai_part(block: Block, role: str) -> dict[str, Any] | None:
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type not in ("image", "file"):
        return None  # reasoning and unknown blocks: chat completions takes neither
    data = block.data or {}
    part: dict[str, Any] | None = None
    if role == "user":  # only user messages carry images and files
        part = _openai_image(data) if block.type == "image" else _openai_file(data)
    return part or {"type": "text", "text": block.text or f"[{block.type}]"}


def _openai_image(data: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = data.get("type")
    url: Any = None
    detail: Any = None
    if kind == "image_url":
        inner = data.get("image_url")
        if isinstance(inner, dict):
            url, detail = inner.get("url"), inner.get("detail")
        else:
            url = inner
    elif kind == "input_image":
        url, detail = data.get("image_url"), data.get("detail")
    elif kind == "image":
        source = data.get("source")
        if isinstance(source, dict):
            url = _source_url(source)
    if not isinstance(url, str):
        return None
    image: dict[str, Any] = {"url": url}
    if isinstance(detail, str):
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _openai_file(data: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = data.get("type")
    if kind in ("file", "input_audio") and isinstance(data.get(kind), dict):
        return {"type": kind, kind: data[kind]}
    if kind == "input_file":
        wanted = ("filename", "file_data", "file_id")
        inner = {k: data[k] for k in wanted if isinstance(data.get(k), str)}
        return (
            {"type": "file", "file": inner} if "file_data" in inner or "file_id" in inner else None
        )
    if kind == "document":
        source = data.get("source")
        if not isinstance(source, dict):
            return None
        title = data.get("title")
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            label = f"[file: {title}]" if isinstance(title, str) else "[file]"
            return {"type": "text", "text": f"{label}\n{source['data']}"}
        url = _source_url(source)
        if url is not None and url.startswith("data:"):
            name = title if isinstance(title, str) else "document"
            return {"type": "file", "file": {"filename": name, "file_data": url}}
    return None


def _source_url(source: Mapping[str, Any]) -> str | None:
    """An Anthropic source (base64 or url) as a URL; a data URL for base64."""
    if source.get("type") == "base64":
        media, data = source.get("media_type"), source.get("data")
        if isinstance(media, str) and isinstance(data, str):
            return f"data:{media};base64,{data}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        return cast(str, source["url"])
    return None


# -- Anthropic --------------------------------------------------------------------------

# Anthropic ids must match ^[a-zA-Z0-9_-]+$; ids from other providers may not.
_UNSAFE_ID: Final = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL: Final = re.compile(r"data:([^;,]+)(?:;[^,;]*)*;base64,(.*)", re.DOTALL)


def _anthropic_blocks(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    """(role, block) for each block of a turn the Anthropic API can take."""
    role = "assistant" if turn.role == "assistant" else "user"
    out: list[tuple[str, dict[str, Any]]] = []
    name = turn.name  # said once, before the turn's first text
    for block in turn.blocks:
        match block.type:
            case "tool_result":
                out.append(("user", _anthropic_result(block)))
            case "tool_call":
                out.append(("assistant", _anthropic_call(block)))
            case "text" | "refusal":
                if block.text.strip():  # the API rejects whitespace-only text
                    text = with_speaker(block.text, name)
                    name = None
                    out.append((role, {"type": "text", "text": text}))
            case "reasoning":
                thinking = _anthropic_thinking(block.data or {})
                if thinking is not None and role == "assistant":
                    out.append((role, thinking))
            case "image" | "file":
                data = block.data or {}
                converted = None
                if role == "user":  # assistant content takes no images or documents
                    converted = (
                        _anthropic_image(data)
                        if block.type == "image"
                        else _anthropic_document(data)
                    )
                placeholder = {"type": "text", "text": block.text or f"[{block.type}]"}
                out.append((role, converted or placeholder))
            case _:
                pass  # unknown, or run by the provider (server tools): not replayed
    return out


def _anthropic_call(block: Block) -> dict[str, Any]:
    try:
        parsed = orjson.loads(block.arguments or "{}")
    except orjson.JSONDecodeError:
        parsed = None
    return {
        "type": "tool_use",
        "id": _safe_id(block.call_id),
        "name": block.name or "tool",
        "input": parsed if isinstance(parsed, dict) else {},
    }


def _anthropic_result(block: Block) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": _safe_id(block.call_id)}
    content: str | list[dict[str, Any]] = block.text
    body = block.data.get("content") if block.data is not None else None
    # The original list (it may hold images) only while it still says what
    # ``text`` says: a caller that swapped the text for a stub meant the stub.
    if isinstance(body, list) and _nested_text(body) == block.text:
        items = [item for item in (_anthropic_result_item(i) for i in body) if item is not None]
        if items:
            content = items
    if content:  # content is optional; an empty one is left out
        out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _anthropic_result_item(item: Any) -> dict[str, Any] | None:
    if isinstance(item, str):
        return {"type": "text", "text": item} if item.strip() else None
    if not isinstance(item, dict):
        return None
    if item.get("type") == "text" and isinstance(item.get("text"), str):
        return {"type": "text", "text": item["text"]} if item["text"].strip() else None
    return _anthropic_image(item)


def _anthropic_thinking(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """Thinking as the API wants it back: signed, or redacted (already opaque)."""
    kind = data.get("type")
    if kind == "thinking":
        thinking, signature = data.get("thinking"), data.get("signature")
        if isinstance(thinking, str) and isinstance(signature, str) and signature:
            return {"type": "thinking", "thinking": thinking, "signature": signature}
    elif kind == "redacted_thinking" and isinstance(data.get("data"), str):
        return {"type": "redacted_thinking", "data": data["data"]}
    return None


def _anthropic_image(data: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = data.get("type")
    if kind == "image":
        source = data.get("source")
        if isinstance(source, dict) and _source_url(source) is not None:
            return {"type": "image", "source": source}
        return None
    url: Any = None
    if kind == "image_url":
        inner = data.get("image_url")
        url = inner.get("url") if isinstance(inner, dict) else inner
    elif kind == "input_image":
        url = data.get("image_url")
    if not isinstance(url, str):
        return None
    source = _data_source(url)
    return {"type": "image", "source": source or {"type": "url", "url": url}}


def _anthropic_document(data: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = data.get("type")
    if kind == "document":
        wanted = ("source", "title", "context", "citations")  # not cache_control: stale breakpoints
        return {"type": "document", **{k: data[k] for k in wanted if k in data}}
    file_data: Any = None
    name: Any = None
    if kind == "file" and isinstance(data.get("file"), dict):
        file_data, name = data["file"].get("file_data"), data["file"].get("filename")
    elif kind == "input_file":
        file_data, name = data.get("file_data"), data.get("filename")
    source = _data_source(file_data) if isinstance(file_data, str) else None
    if source is None or source["media_type"] != "application/pdf":
        return None  # base64 documents must be PDFs
    document: dict[str, Any] = {"type": "document", "source": source}
    if isinstance(name, str):
        document["title"] = name
    return document


def _data_source(url: str) -> dict[str, str] | None:
    found = _DATA_URL.fullmatch(url)
    if found is None:
        return None
    return {"type": "base64", "media_type": found[1], "data": found[2]}


def _safe_id(call_id: str | None) -> str:
    return _UNSAFE_ID.sub("_", call_id or "") or "_"


def _results_first(content: list[dict[str, Any]]) -> None:
    """Move tool results before other blocks of a user message, keeping both orders."""
    seen_other = False
    for block in content:
        if block["type"] != "tool_result":
            seen_other = True
        elif seen_other:
            content[:] = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]
            return


# -- tokens -----------------------------------------------------------------------------


def _block_tokens(block: Block) -> int:
    match block.type:
        case "text" | "refusal" | "reasoning":
            return estimate_tokens(block.text)
        case "tool_call":
            return sum(
                estimate_tokens(s or "") for s in (block.call_id, block.name, block.arguments)
            )
        case "tool_result":
            images = 0
            body = block.data.get("content") if block.data is not None else None
            if isinstance(body, list):
                images = sum(1 for i in body if isinstance(i, dict) and i.get("type") == "image")
            return (
                estimate_tokens(block.call_id or "")
                + estimate_tokens(block.text)
                + images * IMAGE_TOKENS
            )
        case "image":
            return IMAGE_TOKENS
        case "file":
            # Documents cost about their encoded size; a bound, not a bill.
            return estimate_tokens(block.text) + _data_tokens(block.data)
        case _:
            return 0  # not rendered


def _data_tokens(data: Mapping[str, Any] | None) -> int:
    if data is None:
        return 0
    try:
        return estimate_tokens(orjson.dumps(dict(data)).decode())
    except TypeError:  # a caller's mapping holding something JSON cannot say
        return 0
