"""Builders of stored messages, blocks and turns shared by the render tests."""

from __future__ import annotations

import base64
import itertools
from typing import Any

from brain.lcm.messages import StoredMessage, StoredPart
from brain.lcm.render import (
    Block,
    Turn,
)
from brain.tokens import estimate_tokens

PNG = base64.b64encode(b"\x89PNG fake image").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()


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
