"""What a turn costs in a context budget.

Tests: tests/brain/lcm/render/test_cost.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from brain.lcm.content import SERVER_BLOCKS
from brain.lcm.render.turns import Block, Turn
from brain.tokens import BLOCK_OVERHEAD, IMAGE_TOKENS, estimate_tokens, message_cost, name_tokens


def turn_tokens(turn: Turn) -> int:
    """Estimated cost of a turn: ``message_cost`` of its blocks' content plus
    ``BLOCK_OVERHEAD`` per block after the first.

    A one-block text turn thus costs what ``message_cost`` gives for its text,
    the same as the stored message; a speaker's name adds ``name_tokens``, as it
    does to the stored count. Images cost ``IMAGE_TOKENS``; a block only one
    format can carry ("other") costs its placeholder, or its JSON when it is
    one Anthropic replays whole (a server tool's), as ingest counts it.
    """
    content = sum(_block_tokens(b) for b in turn.blocks) + name_tokens(turn.name)
    return message_cost(content) + BLOCK_OVERHEAD * max(0, len(turn.blocks) - 1)


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
        case "other":
            text = estimate_tokens(block.text)
            if block.data is not None and block.data.get("type") in SERVER_BLOCKS:
                return max(text, _data_tokens(block.data))
            return text
        case _:
            return 0  # not rendered


def _data_tokens(data: Mapping[str, Any] | None) -> int:
    if data is None:
        return 0
    try:
        return estimate_tokens(orjson.dumps(dict(data)).decode())
    except TypeError:  # a caller's mapping holding something JSON cannot say
        return 0
