"""Turns written as OpenAI chat-completions messages.

Tests: tests/brain/lcm/render/test_openai.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from brain.lcm.render.turns import Block, Turn


def render_openai(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns as OpenAI chat-completions messages.

    Assistant tool calls go in ``tool_calls`` (content null when there is no
    text; a custom tool's call as ``type: "custom"``, a call of a type brain
    does not know as it came), a refusal in
    ``refusal``; each tool result is its own ``tool`` message; images become
    ``image_url`` parts. A ``developer`` message stays ``developer``.
    Reasoning is left out (chat completions takes none as input); consecutive
    user turns stay separate messages. What the message cannot carry becomes
    a short placeholder text: an image or file, a block of a type chat
    completions has not (``[web_search_tool_result: ...]``), a text's
    citations (``[cited: ...]``).
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


def _openai_turn(turn: Turn, out: list[dict[str, Any]]) -> None:
    """Append a turn's messages; content is a part list until ``_openai_content``."""
    role = (
        "assistant"
        if turn.role == "assistant"
        else (turn.sent_role or "system")
        if turn.role == "system"
        else "user"
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
            call: dict[str, Any] = {"id": block.call_id or ""}
            if block.data is not None and block.data.get("type") == "custom":  # free-text input
                call |= {
                    "type": "custom",
                    "custom": {"name": block.name or "", "input": block.arguments or ""},
                }
            elif block.data is not None:  # a call type newer than brain: as it came
                call = dict(block.data) | call
            else:
                call |= {
                    "type": "function",
                    "function": {"name": block.name or "", "arguments": block.arguments or ""},
                }
            current.setdefault("tool_calls", []).append(call)
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
        cited = cited_label(block.data.get("citations")) if block.data is not None else ""
        text = f"{block.text}\n{cited}" if cited else block.text
        return {"type": "text", "text": text} if text else None
    if block.type == "other":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type not in ("image", "file"):
        return None  # reasoning: chat completions takes none
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
            url = source_url(source)
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
        url = source_url(source)
        if url is not None and url.startswith("data:"):
            name = title if isinstance(title, str) else "document"
            return {"type": "file", "file": {"filename": name, "file_data": url}}
    return None


def cited_label(citations: Any) -> str:
    """A text's citations as one short line: ``[cited: TITLE <URL>; ...]`` (the
    document title, or the cited text, when there is no URL); "" for none."""
    found = []
    for c in citations if isinstance(citations, list) else ():
        if not isinstance(c, dict):
            continue
        title = c.get("title") or c.get("document_title")
        url = c.get("url")
        named = [v for v in (title, url and f"<{url}>") if isinstance(v, str) and v]
        if not named and isinstance(c.get("cited_text"), str):
            named = [f'"{" ".join(c["cited_text"].split())[:80]}"']
        if named and " ".join(named) not in found:
            found.append(" ".join(named))
    return f"[cited: {'; '.join(found)}]" if found else ""


def source_url(source: Mapping[str, Any]) -> str | None:
    """An Anthropic source (base64 or url) as a URL; a data URL for base64."""
    if source.get("type") == "base64":
        media, data = source.get("media_type"), source.get("data")
        if isinstance(media, str) and isinstance(data, str):
            return f"data:{media};base64,{data}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        return cast(str, source["url"])
    return None
