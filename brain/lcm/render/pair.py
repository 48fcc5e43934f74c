"""Pairing tool calls with their results, as both APIs demand.

``pair_tools`` puts each result directly after the turn holding its call,
drops a result without its call, and answers a call without a result unless
it is still running; the rule itself is ``brain.lcm.pairing``'s. Tests:
tests/brain/lcm/render/test_pair.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from brain.lcm.pairing import match
from brain.lcm.render.turns import STUB_PREFIX, Block, Role, Turn, stub_text

UNANSWERED: Final = "[tool result unavailable: the tool call was never answered]"
"""Text of the error result ``pair_tools`` adds for a call that was never answered."""


@dataclass(frozen=True, slots=True)
class PairingReport:
    """What ``pair_tools`` changed: results moved next to their calls, results
    dropped (orphaned or duplicated), calls dropped (their result exists but
    was not selected), and error results synthesized for unanswered calls."""

    moved: int
    dropped_results: int
    dropped_calls: int
    synthesized: int


class Matched(NamedTuple):
    """``match_turns``'s answer: what ``pair_tools`` and its callers need of one match."""

    answer: dict[tuple[int, int], tuple[int, int]]
    """call (turn index, block index) -> the result that answers it"""
    results: int
    """the number of tool results in the turns"""
    has_content: list[bool]
    """for each turn, whether it has a block other than a tool result"""
    calls: list[tuple[int, int]]
    """every tool call with an id, in order"""


def pair_tools(
    turns: Sequence[Turn],
    *,
    answered_elsewhere: AbstractSet[str | tuple[int, str]] = frozenset(),
    matched: Matched | None = None,
) -> tuple[list[Turn], PairingReport]:
    """Pair tool calls with their results, in time linear in the blocks.

    * A result pairs with a call by ``brain.lcm.pairing``'s rule (the latest call
      of its id before it, else the earliest after it). Paired results are
      placed right after the turn holding the call, in call order;
      consecutive results from one turn stay one turn.
    * A result left unpaired is dropped: its call is not in ``turns`` (evicted
      or summarised), or it is a second result for an answered call.
    * A call with no result: dropped when ``answered_elsewhere`` holds its id
      (every call of that id) or ``(its turn's seq, its id)`` (that message's
      calls of it): the result exists but was not selected; kept as is when
      nothing but tool results follows its turn (the call is still running);
      otherwise answered by a synthetic error result.

    Stub results (``[Tool Output: ...]``) get their disambiguator and tool
    name from their call. Turns that come through unchanged are the same
    objects, so callers may key cached costs by identity. ``matched``: the
    pairing of ``turns`` when the caller already has it (``match_turns``).
    """
    answer, results, has_content, _ = matched if matched is not None else match_turns(turns)
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
                    (t, b) not in answer
                    and (
                        block.call_id in answered_elsewhere
                        or (turn.seq, block.call_id) in answered_elsewhere
                    )
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


# The header stub_text writes; what follows it is the disambiguator.
_STUB: Final = re.compile(
    r"\[Tool Output: (?P<id>.+?)(?: \| content\[(?P<block>\d+)\])?(?: \| tool=(?P<tool>.*?))?"
    r" \| (?P<size>\d+) bytes\](?: .*)?"
)


def match_turns(turns: Sequence[Turn]) -> Matched:
    """Pair calls and results by (turn index, block index) (``brain.lcm.pairing``'s rule),
    with the counts ``pair_tools`` needs, in one more pass over the blocks."""
    results = 0
    has_content: list[bool] = []
    calls: list[tuple[int, int]] = []
    for t, turn in enumerate(turns):
        content = False
        for b, block in enumerate(turn.blocks):
            kind = block.type
            if kind == "tool_result":
                results += 1
            else:
                content = True
                if kind == "tool_call" and block.call_id is not None:
                    calls.append((t, b))
        has_content.append(content)
    return Matched(match([turn.blocks for turn in turns]), results, has_content, calls)


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
    block = int(found["block"]) if found["block"] is not None else None
    text = stub_text(
        found["id"], found["tool"] or name, int(found["size"]), call.arguments, block=block
    )
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
