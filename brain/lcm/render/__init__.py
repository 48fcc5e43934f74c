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

Each step is a module of this package (``turns``, ``pair``, ``openai``,
``anthropic``, and ``cost`` for ``turn_tokens``); their public names are
re-exported here.
"""

from __future__ import annotations

from brain.lcm.render.anthropic import CONTINUES, render_anthropic
from brain.lcm.render.cost import turn_tokens
from brain.lcm.render.openai import render_openai
from brain.lcm.render.pair import UNANSWERED, Matched, PairingReport, match_turns, pair_tools
from brain.lcm.render.turns import (
    HINT_CHARS,
    STUB_PREFIX,
    Block,
    BlockType,
    Role,
    Turn,
    stub_text,
    summary_turn,
    turn_from_message,
)

__all__ = [
    "CONTINUES",
    "HINT_CHARS",
    "STUB_PREFIX",
    "UNANSWERED",
    "Block",
    "BlockType",
    "Matched",
    "PairingReport",
    "Role",
    "Turn",
    "match_turns",
    "pair_tools",
    "render_anthropic",
    "render_openai",
    "stub_text",
    "summary_turn",
    "turn_from_message",
    "turn_tokens",
]
