"""Turns written as Anthropic messages: a system text and alternating messages.

Tests: tests/brain/lcm/render/test_anthropic.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from brain.lcm.content import SERVER_BLOCKS, nested_text
from brain.lcm.messages import with_speaker
from brain.lcm.render.openai import cited_label, source_url
from brain.lcm.render.turns import Block, Turn

CONTINUES: Final = "[conversation continues]"
"""Text of the user message put first when an Anthropic context would start with the assistant."""


def render_anthropic(turns: Sequence[Turn]) -> tuple[str | None, list[dict[str, Any]]]:
    """Turns as Anthropic messages: (system text or None, messages).

    System turns (``developer`` ones too) are joined into the system text. Anthropic messages carry
    no name: a named speaker's first text block starts ``Name: ``. A refusal
    (which Anthropic has no field for) is the assistant's text. Tool results go in user
    messages (before any other block there, as the API requires), tool calls
    are ``tool_use`` blocks whose ``input`` is the parsed arguments (``{}``
    when they do not parse to an object). Consecutive messages of one role
    are merged, since the API wants roles to alternate; content is always a
    non-empty block list. Thinking is kept only with its signature; a
    conversation that would start with the assistant gets a first user
    message saying it continues. The blocks of tools Anthropic runs itself
    (``server_tool_use``, ``web_search_tool_result``, ...) are replayed as
    sent in assistant messages, web-search citations stay on their text;
    what the API cannot take back (other blocks, document citations, whose
    document may not be in the context) is a short placeholder text.
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


# Anthropic ids must match ^[a-zA-Z0-9_-]+$; ids from other providers may not.
_UNSAFE_ID: Final = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL: Final = re.compile(r"data:([^;,]+)(?:;[^,;]*)*;base64,(.*)", re.DOTALL)


def _anthropic_blocks(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
    """(role, block) for each block of a turn the Anthropic API can take."""
    role = "assistant" if turn.role == "assistant" else "user"
    out: list[tuple[str, dict[str, Any]]] = []
    name = turn.name  # said once, before the turn's first text
    replayed = _replayable(turn) if role == "assistant" else set()
    for b, block in enumerate(turn.blocks):
        match block.type:
            case "tool_result":
                out.append(("user", _anthropic_result(block)))
            case "tool_call":
                out.append(("assistant", _anthropic_call(block)))
            case "text" | "refusal":
                if block.text.strip():  # the API rejects whitespace-only text
                    text = with_speaker(block.text, name)
                    name = None
                    out.append((role, _anthropic_text(text, block.data)))
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
            case "other":
                if b in replayed:
                    out.append((role, _as_param(block.data or {})))
                elif block.text.strip():
                    out.append((role, {"type": "text", "text": block.text}))
            case _:
                pass
    return out


def _replayable(turn: Turn) -> set[int]:
    """The indexes of a turn's server-tool blocks Anthropic output replays as sent.

    A ``server_tool_use`` and its result go back together or not at all (the
    API refuses a server call without its result): a result moved to a payload
    file is a text reference, so its call becomes a placeholder too.
    """
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    alone: set[int] = set()
    for b, block in enumerate(turn.blocks):
        data = block.data if block.type == "other" and block.data is not None else {}
        kind = data.get("type")
        if kind == "server_tool_use" and isinstance(data.get("id"), str):
            calls[data["id"]] = b
        elif kind in SERVER_BLOCKS and isinstance(data.get("tool_use_id"), str):
            results[data["tool_use_id"]] = b
        elif kind == "container_upload":  # answers no call
            alone.add(b)
    paired = calls.keys() & results.keys()
    return alone | {calls[i] for i in paired} | {results[i] for i in paired}


# Web-search citations name their source themselves; document citations point
# at a document of the original request, which the context may not hold.
_SELF_CONTAINED_CITATIONS: Final = frozenset({"web_search_result_location"})


def _anthropic_text(text: str, data: Mapping[str, Any] | None) -> dict[str, Any]:
    """A text block, with the citations the API takes back and a label for the rest."""
    citations = data.get("citations") if data is not None else None
    if not isinstance(citations, list):
        return {"type": "text", "text": text}
    kept = [
        _as_param(c)
        for c in citations
        if isinstance(c, dict) and c.get("type") in _SELF_CONTAINED_CITATIONS
    ]
    rest = cited_label(
        [
            c
            for c in citations
            if not (isinstance(c, dict) and c.get("type") in _SELF_CONTAINED_CITATIONS)
        ]
    )
    out: dict[str, Any] = {"type": "text", "text": f"{text}\n{rest}" if rest else text}
    if kept:
        out["citations"] = kept
    return out


def _as_param(block: Mapping[str, Any]) -> dict[str, Any]:
    """A response block as a request takes it: null members (``"caller": null``) and
    ``cache_control`` (a stale breakpoint) left out."""
    return {k: v for k, v in block.items() if v is not None and k != "cache_control"}


def _anthropic_call(block: Block) -> dict[str, Any]:
    try:
        parsed = orjson.loads(block.arguments or "{}")
    except orjson.JSONDecodeError:
        parsed = None
    custom = block.data is not None and block.data.get("type") == "custom"
    if isinstance(parsed, dict) and not custom:
        arguments: dict[str, Any] = parsed
    elif block.data is not None:  # free text (a custom tool's input): kept, as the one field
        arguments = {"input": block.arguments or ""}
    else:
        arguments = {}
    return {
        "type": "tool_use",
        "id": _safe_id(block.call_id),
        "name": block.name or "tool",
        "input": arguments,
    }


def _anthropic_result(block: Block) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": _safe_id(block.call_id)}
    content: str | list[dict[str, Any]] = block.text
    body = block.data.get("content") if block.data is not None else None
    # The original list (it may hold images) only while it still says what
    # ``text`` says: a caller that swapped the text for a stub meant the stub.
    if isinstance(body, list) and nested_text(body) == block.text:
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
    image = _anthropic_image(item)
    if image is not None:
        return image
    # Never nothing: what cannot be carried is its placeholder.
    label = nested_text([item])
    return {"type": "text", "text": label} if label.strip() else None


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
        if isinstance(source, dict) and source_url(source) is not None:
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
