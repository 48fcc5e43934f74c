"""What ``assemble`` is asked (``AssembleOptions``) and what it answers (``Assembled``).

Tested through ``Brain.assemble`` in tests/brain/lcm/assemble/test_assembler.py (these are
its arguments and results: plain records).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from brain.lcm.render import PairingReport

Format = Literal["openai", "anthropic"]
GAP_COUNTS: Final = ("count", "messages", "summaries")
"""The members of ``Assembled.gaps``."""


@dataclass(frozen=True, slots=True)
class AssembleOptions:
    """How to assemble: budget in tokens, output shape, tail size, stub tier."""

    budget: int
    format: Format = "openai"
    fresh_tail_count: int | None = None
    stubs: bool = False
    stub_tokens: int = 1_000
    recall_block: str | None = None
    """Text to show after the summaries (a graph query's context block), if it fits."""
    detail: bool = True
    """Spend the room left on detail: summaries shown as their sources
    (``brain.lcm.assemble.history``)."""


@dataclass(frozen=True, slots=True)
class RecallReport:
    """What the recall block of an ``assemble`` did: its query's trace and what fired."""

    mode: str
    trace_id: str | None
    fired: list[str]
    injected: bool
    tokens: int


@dataclass(frozen=True, slots=True)
class Assembled:
    """An assembled context and an account of what went into it."""

    messages: list[dict[str, Any]]
    system: str | None
    tokens: int
    budget: int
    over_budget: bool
    fresh_tail: dict[str, int]
    included: dict[str, int]
    dropped: dict[str, int]
    pairing: dict[str, int]
    stubbed: int
    context_tokens: int
    flush_recommended: bool
    recall_tokens: int = 0
    """What the recall block cost (0: none was given, or it did not fit)."""
    recall: RecallReport | None = None
    """The graph query behind the recall block, when one ran."""
    withheld: int = 0
    """Summaries shown as placeholders: a source was suppressed and the rebuild of the
    rest has not landed yet (``brain.lcm.suppress``)."""
    gaps: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GAP_COUNTS, 0))
    """Stand-ins for history left out (``brain.lcm.assemble.history``): how many, and the
    raw messages and summaries of the context list they stand for (not ``dropped``)."""
    expanded: int = 0
    """Summaries shown as their sources, to use the budget for detail."""
    budget_changed: bool = False
    """The session follows this call's budget from now on (``brain.lcm.budgets``): the
    daemon then looks for compaction to do. Not sent on the wire."""


def empty(options: AssembleOptions) -> Assembled:
    """The context of a session with no messages: nothing, at no cost."""
    return Assembled(
        messages=[],
        system=None,
        tokens=0,
        budget=options.budget,
        over_budget=False,
        fresh_tail={"count": 0, "tokens": 0, "first_seq": 1},
        included={"summaries": 0, "messages": 0},
        dropped={"summaries": 0, "messages": 0},
        pairing=asdict(PairingReport(0, 0, 0, 0)),
        stubbed=0,
        context_tokens=0,
        flush_recommended=False,
    )
