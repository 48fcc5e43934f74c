"""Message content: from the shapes clients send to stored parts, and back.

Clients send content as a string or as a list of blocks in OpenAI chat shape
(``text``, ``image_url``, ``input_audio``, ``file``, ``refusal``; tool calls as
the message-level ``tool_calls`` list and tool results as ``role: "tool"`` with
``tool_call_id``; Responses-style ``function_call`` / ``function_call_output``)
or Anthropic messages shape (``text``, ``image``, ``document``, ``tool_use``,
``tool_result``, ``thinking``, ``redacted_thinking``, and the blocks of
Anthropic's server tools). OpenAI ``custom`` tool calls (free-text input) and
the Responses ``custom_tool_call`` / ``custom_tool_call_output`` items pair with
their results like function calls. A block of a type not named here is kept
as sent and flattened to a short label (``block_label``). ``normalize`` turns one
message into rows: a flattened text (what FTS indexes and budgets count) and
one part per block keeping the original block. ``restore`` inverts it exactly.

Large payloads: a block estimated above the threshold has its largest string
(or, for a tool result with list content, the whole list) moved out to a
payload file; the stored block keeps a marker ``{"__brain_file__": id,
"encoding": ...}`` in its place and the flattened text keeps a compact
reference. ``restore`` puts the original bytes back.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson

from brain import clock
from brain.errors import InvalidInput
from brain.tokens import MESSAGE_OVERHEAD, estimate_tokens, name_tokens

Role = Literal["user", "assistant", "system", "tool"]
PartKind = Literal["text", "tool_call", "tool_result", "reasoning", "image", "file", "other"]
Origin = Literal["content", "tool_calls", "message"]
Encoding = Literal["utf8", "json"]

ROLES: Final = frozenset({"user", "assistant", "system", "tool", "developer", "function"})
STORED_ROLE: Final = {"developer": "system", "function": "tool"}
"""Roles stored as another (``messages.role`` allows the four of DESIGN §4): OpenAI's
``developer`` is its system role for current models, pinned and rendered as one;
the legacy ``function`` result is a tool message without a call id. ``ROLE_KEY``
in ``messages.extra`` keeps the role sent, for ``restore`` and render."""
ROLE_KEY: Final = "__brain_role__"
RESERVED_PREFIX: Final = "__brain_"
"""Names brain keeps for its markers in ``messages.extra``: refused as message members."""
FILE_MARKER: Final = "__brain_file__"
NO_CONTENT_KEY: Final = "__brain_content__"
"""The key of ``messages.extra`` that records content sent as null (``"null"``) or
left out (``"absent"``); SDK field names never take this form."""
NO_CONTENT_NEEDS: Final = ("tool_calls", "function_call", "refusal", "audio")
"""An assistant message may come without content when it has one of these."""
MESSAGE_FIELDS: Final = (
    "role",
    "content",
    "id",
    "name",
    "created_at",
    "tool_calls",
    "tool_call_id",
)
"""The message members brain reads itself; every other (non-null) member is the
host's and kept in ``MessageIn.extra``. The same list as
``protocol.methods.MESSAGE_FIELDS`` (``brain`` never imports ``protocol``; a test
keeps the two equal), for messages read from files rather than requests."""
SERVER_BLOCKS: Final = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
    }
)
"""Anthropic assistant blocks of tools the provider runs (a call and its result in
one message): the Anthropic API takes them back as sent, so Anthropic output
replays them; their whole JSON counts in the message's tokens."""
SPEAKER_ROLES: Final = frozenset({"user", "assistant", "system"})
"""Roles whose ``name`` says who spoke (a tool message's ``name`` is its tool's)."""
_PREVIEW_CHARS: Final = 160


@dataclass(frozen=True, slots=True)
class MessageIn:
    """One message as a client sent it (already type-checked at the edge)."""

    role: str
    content: str | list[dict[str, Any]] | None
    client_id: str | None = None
    name: str | None = None
    created_at: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] | None = None
    """Other message-level SDK fields (``refusal``, ``annotations``, ...), kept as sent."""
    content_absent: bool = False
    """With ``content`` None: the member was missing rather than null."""


@dataclass(frozen=True, slots=True)
class Payload:
    """A large value moved out of a block into a payload file."""

    file_id: str
    data: bytes
    encoding: Encoding
    token_count: int
    part_kind: PartKind


@dataclass(slots=True)
class Part:
    """One stored part; ``block`` is the original block (payloads replaced by markers).

    For origin 'message' ``block`` is None, or the original string content when
    the flattened text differs from it (a message with both string content and
    ``tool_calls``, whose flattened text also holds the calls).
    """

    kind: PartKind
    origin: Origin
    block: dict[str, Any] | str | None
    tool_call_id: str | None = None
    tool_name: str | None = None
    payload: Payload | None = None


@dataclass(slots=True)
class Normalized:
    """Everything ingest writes for one message."""

    role: str
    name: str | None
    content: str
    content_shape: Literal["string", "blocks"]
    token_count: int
    created_at: str
    client_id: str | None
    replay_hash: bytes
    parts: list[Part] = field(default_factory=list)
    extra: str | None = None
    """``messages.extra``: JSON of the kept SDK fields and the no-content marker, or None."""

    @property
    def payloads(self) -> list[Payload]:
        """The payload files this message needs written."""
        return [p.payload for p in self.parts if p.payload is not None]


def _content_tokens(content: str, results: list[str], others: list[str]) -> int:
    """What a message's content costs: ``content``'s estimate, but a message holding
    tool_result blocks costs what the same results cost as OpenAI ``tool`` messages,
    one message each (their text and ``MESSAGE_OVERHEAD`` apiece), plus the rest
    as one more message.

    The same conversation then costs the same in either shape: an Anthropic user
    turn holding two results is priced as the two tool messages OpenAI sends
    for it, so a budget takes or gives up the same history whichever shape
    the host ingests (and the costlier shape is the one counted: OpenAI output
    does send them as separate messages).
    """
    if not results:
        return estimate_tokens(content)
    units = len(results) + (1 if others else 0)
    rest = estimate_tokens("\n".join(others)) if others else 0
    return sum(estimate_tokens(r) for r in results) + rest + MESSAGE_OVERHEAD * (units - 1)


def new_file_id() -> str:
    """A fresh payload file id: ``file_`` + 16 hex characters, never from input."""
    return "file_" + secrets.token_hex(8)


def normalize(
    msg: MessageIn, *, where: str, large_tokens: int, now: datetime | None = None
) -> Normalized:
    """Validate and flatten one message; ``where`` prefixes field names in errors."""
    if msg.role not in ROLES:
        raise InvalidInput(f"{where}.role", f"must be one of {sorted(ROLES)}")
    created_at = normalize_time(msg.created_at, f"{where}.created_at", now)
    parts: list[Part] = []
    texts: list[str] = []
    results: list[str] = []  # the text of each tool_result block (blocks content)
    others: list[str] = []  # the text of every other block
    extra = dict(msg.extra or {})
    role = STORED_ROLE.get(msg.role, msg.role)
    if role != msg.role:
        extra[ROLE_KEY] = msg.role
    bulk = 0  # tokens blocks render with beyond their flattened text

    # What message-level fields say that render shows (``extra_texts``):
    # flattened too, so grep finds it and budgets count it.
    said = extra_texts(extra)
    if msg.content is None:
        _check_no_content(msg, where)
        # Stored like an empty string; the marker tells ``restore`` to give null back.
        shape: Literal["string", "blocks"] = "string"
        extra[NO_CONTENT_KEY] = "absent" if msg.content_absent else "null"
    elif isinstance(msg.content, str):
        shape = "string"
        text = msg.content
        result_kind: PartKind = "tool_result" if msg.tool_call_id is not None else "text"
        if estimate_tokens(text) > large_tokens:
            payload = _payload(text.encode("utf-8"), "utf8", result_kind)
            parts.append(Part(result_kind, "message", None, msg.tool_call_id, None, payload))
            text = _reference(payload, None, text)
        elif msg.tool_call_id is not None or msg.tool_calls or said:
            # Tool calls and message-level fields add their text to the flattened
            # content below, so the original string must be kept for ``restore``.
            original = text if msg.tool_calls or said else None
            parts.append(Part(result_kind, "message", original, msg.tool_call_id))
        texts.append(text)
    else:
        shape = "blocks"
        if msg.tool_call_id is not None:
            parts.append(Part("tool_result", "message", None, msg.tool_call_id))
        bulk = _blocks(msg.content, where, large_tokens, parts, (texts, results, others))

    for i, call in enumerate(msg.tool_calls or ()):
        part, text = _openai_tool_call(call, f"{where}.tool_calls[{i}]", large_tokens)
        parts.append(part)
        texts.append(text)
        others.append(text)
    # ``restore`` gives these fields back from ``extra``; render shows them.
    texts.extend(said)
    others.extend(said)

    content = "\n".join(texts)
    speaker_name = msg.name if role in SPEAKER_ROLES else None
    return Normalized(
        role=role,
        name=msg.name,
        content=content,
        content_shape=shape,
        # The speaker's name is shown with the message (OpenAI ``name``, or a
        # ``Name: `` prefix), so it is part of what the message costs.
        token_count=_content_tokens(content, results, others) + bulk + name_tokens(speaker_name),
        created_at=created_at,
        client_id=msg.client_id,
        replay_hash=replay_hash(msg),
        parts=parts,
        extra=orjson.dumps(extra).decode() if extra else None,
    )


def _blocks(
    blocks: list[dict[str, Any]],
    where: str,
    large_tokens: int,
    parts: list[Part],
    into: tuple[list[str], list[str], list[str]],
) -> int:
    """Flatten content blocks: their parts onto ``parts``, their texts onto ``into``
    (every text, each tool result's, every other block's); returns what they render
    with beyond their flattened text (tokens)."""
    texts, results, others = into
    bulk = 0
    for i, block in enumerate(blocks):
        part, text = _block_part(block, f"{where}.content[{i}]", large_tokens)
        parts.append(part)
        if part.kind == "tool_result":
            results.append(text)
        elif text:
            others.append(text)
        if text:
            texts.append(text)
        if part.payload is None and block.get("type") in SERVER_BLOCKS:
            # Replayed whole in Anthropic output (search results carry
            # encrypted content): count what is sent, not just the label.
            bulk += max(0, estimate_tokens(orjson.dumps(block).decode()) - estimate_tokens(text))
    return bulk


def _check_no_content(msg: MessageIn, where: str) -> None:
    """Only an assistant message carrying something else may come without content."""
    extra = msg.extra or {}
    if msg.role == "assistant" and (
        msg.tool_calls or any(extra.get(k) is not None for k in NO_CONTENT_NEEDS)
    ):
        return
    raise InvalidInput(
        f"{where}.content",
        f"required (only an assistant message with {', '.join(NO_CONTENT_NEEDS)} may omit it)",
    )


def extra_texts(extra: dict[str, Any]) -> list[str]:
    """The text of the message-level fields render shows, in the order it shows them.

    A string ``refusal``, an audio answer's transcript (``[audio] ...``) and a
    legacy ``function_call`` (``[function call] name(arguments)``); other
    message-level members are metadata (``usage``, ``stop_details``, ...), kept
    and given back but not shown, so neither searched nor counted.
    """
    out = []
    refusal = extra.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(refusal)
    if extra.get("audio") is not None:
        out.append(audio_text(extra["audio"]))
    if extra.get("function_call") is not None:
        out.append(function_call_text(extra["function_call"]))
    return out


def audio_text(audio: Any) -> str:
    """What an OpenAI audio answer says: ``[audio]`` and its transcript, if it has one."""
    transcript = audio.get("transcript") if isinstance(audio, dict) else None
    return f"[audio] {transcript}" if isinstance(transcript, str) and transcript else "[audio]"


def function_call_text(call: Any) -> str:
    """A legacy OpenAI ``function_call`` as text: ``[function call] name(arguments)``.

    It has no call id, so brain cannot pair it with its ``function`` result; as
    text it can never leave a request with a call and no result.
    """
    call = call if isinstance(call, dict) else {}
    name, args = call.get("name"), call.get("arguments", "")
    args_text = args if isinstance(args, str) else orjson.dumps(args).decode()
    return f"[function call] {name if isinstance(name, str) else ''}({args_text})"


def replay_hash(msg: MessageIn) -> bytes:
    """Hash of everything the client sent except its id: equal hashes mean a replay.

    Null and missing content hash alike (they mean the same), and the SDK
    fields join the key only when there are some, so messages without them
    hash as they did before those fields were kept.
    """
    key: list[Any] = [
        msg.role,
        msg.name,
        msg.content,
        msg.tool_calls,
        msg.tool_call_id,
        msg.created_at,
    ]
    if msg.extra:
        key.append(msg.extra)
    return hashlib.blake2b(orjson.dumps(key, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def normalize_time(value: str | None, where: str, now: datetime | None = None) -> str:
    """ISO-8601 in, UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ`` out; None means now."""
    if value is None:
        moment = now or datetime.now(UTC)
    else:
        try:
            moment = clock.parse(value)
        except ValueError:
            raise InvalidInput(where, "must be an ISO-8601 timestamp") from None
    try:
        return clock.iso(moment)
    except OverflowError:  # an offset pushing year 1 or 9999 out of range
        raise InvalidInput(where, "is out of the representable range") from None


def restore(
    role: str,
    name: str | None,
    content: str,
    content_shape: str,
    parts: list[tuple[str, str, str | None, str | None, str | None]],
    read_file: Callable[[str], bytes | None],
    extra: str | None = None,
) -> dict[str, Any]:
    """Rebuild the message a client sent from stored rows.

    ``parts`` are (kind, origin, tool_call_id, block JSON, file id) in ordinal
    order, with ``block`` usually None for origin 'message'; ``read_file``
    returns a payload file's bytes (None: the marker stays in its place). Only
    the marker naming the part's own file id is replaced: a marker-shaped
    object sent by a client stays as sent and can never read another
    message's payload. ``extra`` is the stored ``messages.extra`` JSON. The
    result has ``role``, ``content`` (null, or left out, when it was sent so)
    and, when present, ``name``, ``tool_calls``, ``tool_call_id`` and the SDK
    fields that were kept.
    """
    out: dict[str, Any] = {"role": role}
    blocks: list[Any] = []
    calls: list[Any] = []
    restored: Any = content
    for _kind, origin, tool_call_id, block_json, file_id in parts:
        if origin == "message":
            if tool_call_id is not None:
                out["tool_call_id"] = tool_call_id
            if block_json is not None:  # the original string, or a marker for its file
                restored = _restore_markers(orjson.loads(block_json), file_id, read_file)
            continue
        value = _restore_markers(orjson.loads(block_json or "null"), file_id, read_file)
        (calls if origin == "tool_calls" else blocks).append(value)
    out["content"] = blocks if content_shape == "blocks" else restored
    if name is not None:
        out["name"] = name
    if calls:
        out["tool_calls"] = calls
    if extra is not None:
        fields = orjson.loads(extra)
        no_content = fields.pop(NO_CONTENT_KEY, None)
        out["role"] = fields.pop(ROLE_KEY, role)
        if no_content == "null":
            out["content"] = None
        elif no_content == "absent":
            del out["content"]
        out.update(fields)
    return out


def message_part_block(part: Part) -> str | None:
    """The JSON stored in ``message_parts.block`` for a part."""
    if part.origin == "message":
        if part.payload is None:
            return None if part.block is None else orjson.dumps(part.block).decode()
        # The whole string content is in a file: store just the marker.
        return orjson.dumps(_marker(part.payload)).decode()
    return orjson.dumps(part.block).decode()


# -- blocks --------------------------------------------------------------------


def _block_part(block: dict[str, Any], where: str, large_tokens: int) -> tuple[Part, str]:
    kind_name = block.get("type")
    if not isinstance(kind_name, str):
        raise InvalidInput(f"{where}.type", "must be a string")
    kind, text, call_id, tool = _classify(block, kind_name, where)
    stored, payload = _offload(block, kind, large_tokens)
    if payload is not None:
        text = _reference(payload, tool, text)
    return Part(kind, "content", stored, call_id, tool, payload), text


def _classify(
    block: dict[str, Any], kind_name: str, where: str
) -> tuple[PartKind, str, str | None, str | None]:
    """(part kind, searchable text, tool call id, tool name) for one block."""
    match kind_name:
        case "text" | "input_text" | "output_text":
            return "text", _str_field(block, "text", where), None, None
        case "refusal":
            return "text", _str_field(block, "refusal", where), None, None
        case "thinking":
            return "reasoning", _str_field(block, "thinking", where), None, None
        case "redacted_thinking":
            return "reasoning", "", None, None
        case "reasoning":
            return "reasoning", _reasoning_text(block), None, None
        case "tool_use" | "server_tool_use":
            call_id = _str_field(block, "id", where)
            name = _str_field(block, "name", where)
            args = orjson.dumps(block.get("input", {})).decode()
            return "tool_call", f"{name}({args})", call_id, name
        case "function_call":
            call_id = _str_field(block, "call_id", where)
            name = _str_field(block, "name", where)
            args = block.get("arguments", "")
            args_text = args if isinstance(args, str) else orjson.dumps(args).decode()
            return "tool_call", f"{name}({args_text})", call_id, name
        case "custom_tool_call":  # Responses: a custom tool's free-text input
            call_id = _str_field(block, "call_id", where)
            name = _str_field(block, "name", where)
            return "tool_call", f"{name}({_text_of(block.get('input', ''))})", call_id, name
        case "tool_result" | "function_call_output" | "custom_tool_call_output":
            id_key, body_key = (
                ("tool_use_id", "content") if kind_name == "tool_result" else ("call_id", "output")
            )
            call_id = _str_field(block, id_key, where)
            return "tool_result", nested_text(block.get(body_key, "")), call_id, None
        case "image" | "image_url" | "input_image":
            return "image", "[image]", None, None
        case "document" | "file" | "input_file" | "input_audio":
            file_obj = block.get("file")
            filename = file_obj.get("filename") if isinstance(file_obj, dict) else None
            title = block.get("title") or filename
            return "file", f"[file: {title}]" if isinstance(title, str) else "[file]", None, None
        case _:
            return "other", block_label(block), None, None


def block_label(block: Any) -> str:
    """The short stand-in for a block a format has no slot for: ``[type]``, with the
    titles and URLs of the results it holds (a web search's), at most five."""
    kind = block.get("type") if isinstance(block, dict) else None
    label = kind if isinstance(kind, str) and kind else "block"
    body = block.get("content") if isinstance(block, dict) else None
    found = []
    for item in body if isinstance(body, list) else ():
        if not isinstance(item, dict):
            continue
        title, url = item.get("title"), item.get("url")
        named = [v for v in (title, url and f"<{url}>") if isinstance(v, str) and v]
        if named:
            found.append(" ".join(named))
    return f"[{label}: {'; '.join(found[:5])}]" if found else f"[{label}]"


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _openai_tool_call(call: Any, where: str, large_tokens: int) -> tuple[Part, str]:
    if not isinstance(call, dict):
        raise InvalidInput(where, "must be an object")
    call_id = _str_field(call, "id", where)
    if call.get("type") == "custom":  # ChatCompletionMessageCustomToolCall: free-text input
        custom = call.get("custom")
        if not isinstance(custom, dict):
            raise InvalidInput(f"{where}.custom", "must be an object")
        name = _str_field(custom, "name", f"{where}.custom")
        args: Any = custom.get("input", "")
    elif (foreign := foreign_call(call)) is not None:
        name, args = foreign
    else:
        function = call.get("function")
        if not isinstance(function, dict):
            raise InvalidInput(f"{where}.function", "must be an object")
        name = _str_field(function, "name", f"{where}.function")
        args = function.get("arguments", "")
    text = f"{name}({_text_of(args)})"
    stored, payload = _offload(call, "tool_call", large_tokens)
    if payload is not None:
        text = _reference(payload, name, text)
    return Part("tool_call", "tool_calls", stored, call_id, name, payload), text


def foreign_call(call: dict[str, Any]) -> tuple[str, str] | None:
    """(name, arguments) of an OpenAI tool call of a type brain does not know yet
    (``{"id", "type": T, T: {...}}``); None for a function or custom call.

    Kept as sent and paired by its id like any call, rather than refused: the
    next API release's call type must not cost the host its turn. The name is
    its object's ``name`` (else the type), the arguments the rest of it as JSON.
    """
    kind = call.get("type")
    if not isinstance(kind, str) or not kind or kind in ("function", "custom"):
        return None
    if "function" in call:
        return None  # a function call under another type name: checked as one
    inner = call.get(kind)
    if isinstance(inner, dict):
        name = inner.get("name")
        rest = {k: v for k, v in inner.items() if k != "name"}
        return (name if isinstance(name, str) and name else kind), orjson.dumps(rest).decode()
    return kind, "" if inner is None else _text_of(inner)


def _str_field(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}", "must be a string")
    return value


def nested_text(value: Any) -> str:
    """Text of a tool result body: a string, or its blocks' text.

    A block without text (an image, a document) is its placeholder (``[image]``,
    ``[file: TITLE]``, ``[type]``), so a result holding only an image says so
    rather than nothing, where the output format cannot carry the image.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for item in value:
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, dict):
                if isinstance(item.get("text"), str):
                    texts.append(item["text"])
                elif isinstance(item.get("type"), str):
                    texts.append(_item_label(item))
        return "\n".join(texts)
    return ""


def _item_label(item: dict[str, Any]) -> str:
    try:
        kind, text, _, _ = _classify(item, item["type"], "")
    except InvalidInput:  # a malformed nested block: its type is all we can say
        return f"[{item['type']}]"
    return text if kind in ("image", "file") else block_label(item)


def _reasoning_text(block: dict[str, Any]) -> str:
    if isinstance(block.get("text"), str):
        return str(block["text"])
    return nested_text(block.get("summary") or block.get("content") or "")


# -- large payloads ---------------------------------------------------------------


def _offload(
    block: dict[str, Any], kind: PartKind, large_tokens: int
) -> tuple[dict[str, Any], Payload | None]:
    """Move a block's bulk to a payload when the block is over the threshold."""
    encoded = orjson.dumps(block)
    # Fast path: no estimate exceeds one token per 3 UTF-8 bytes (a CJK
    # character is 3 bytes and counts as one token), so this bounds it.
    if (len(encoded) + 2) // 3 <= large_tokens:
        return block, None
    path, leaf = _largest_string(block, ())
    if leaf is not None and estimate_tokens(leaf) > large_tokens:
        payload = _payload(leaf.encode("utf-8"), "utf8", kind)
        return _replace(block, path, _marker(payload)), payload
    body = block.get("content")
    if isinstance(body, list):
        data = orjson.dumps(body)
        payload = _payload(data, "json", kind)
        return _replace(block, ("content",), _marker(payload)), payload
    return block, None


def _largest_string(value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str | None]:
    """Path to and value of the longest string anywhere inside ``value``."""
    if isinstance(value, str):
        return path, value
    if isinstance(value, dict):
        children: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    else:
        return (), None
    best: tuple[tuple[Any, ...], str | None] = ((), None)
    for key, child in children:
        found_path, found = _largest_string(child, (*path, key))
        if found is not None and (best[1] is None or len(found) > len(best[1])):
            best = (found_path, found)
    return best


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        copy[head] = _replace(value[head], rest, new)
        return copy
    copy_list = list(value)
    copy_list[head] = _replace(value[head], rest, new)
    return copy_list


def _payload(data: bytes, encoding: Encoding, kind: PartKind) -> Payload:
    return Payload(new_file_id(), data, encoding, (len(data) + 3) // 4, kind)


def _marker(payload: Payload) -> dict[str, str]:
    return {FILE_MARKER: payload.file_id, "encoding": payload.encoding}


def _reference(payload: Payload, tool: str | None, text: str) -> str:
    """The compact stand-in the flattened text keeps for a payload file."""
    tool_part = f" tool={tool}" if tool else ""
    preview = " ".join(text[: _PREVIEW_CHARS * 2].split())[:_PREVIEW_CHARS]
    return (
        f"[Large payload {payload.file_id} | {payload.part_kind}{tool_part} | "
        f"{len(payload.data)} bytes | ~{payload.token_count} tokens] {preview}"
    ).rstrip()


def _restore_markers(
    value: Any, file_id: str | None, read_file: Callable[[str], bytes | None]
) -> Any:
    if file_id is None:
        return value
    if isinstance(value, dict):
        if value.get(FILE_MARKER) == file_id and len(value) == 2 and "encoding" in value:
            data = read_file(file_id)
            if data is None:
                return value
            return data.decode("utf-8") if value["encoding"] == "utf8" else orjson.loads(data)
        return {k: _restore_markers(v, file_id, read_file) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_markers(v, file_id, read_file) for v in value]
    return value
