"""Assemble: the model-ready message list for a session under a token budget.

Order is the context list's order: summaries (as XML-wrapped user messages)
and raw messages, oldest first, except that system messages before the tail
come first. The fresh tail is included whole while it fits (else its tool
results become stubs, then it is cut down to the newest user turn: see
``fit.fit_tail``), and the system messages always are (they are
pinned: the instructions a model runs under are never the "oldest message"
to drop; compaction never folds them either). Their cost
counts against the budget like the tail's.
The rest of the budget goes first to summaries (they are small and stand for
everything older): the deepest first, condensed ones oldest first and leaves
newest first, each depth up to its first summary that does not fit, so what a
tight budget gives up is the middle of the history, never the summary of its
beginning (``fit.summary_rank``); then to the raw messages before the tail,
newest first, up to the first that does not fit. Tool calls and results are
then paired (``render.pair_tools``) and the result rendered in OpenAI or
Anthropic shape.

Costs are the items' stored token counts (one estimator everywhere; a stub's
own cost when stubbed): ``tokens`` never exceeds the budget unless ``over_budget``.

A per-conversation view (items and rendered turns) is cached in memory and
revalidated by the conversation's ``context_version`` on every call, so a
commit by any process is seen; appends since the last call are fetched
incrementally.

One module per concept: ``model`` (options and the result), ``assembler`` (the
call: the lock per conversation, the flush mark, the budget followed), ``view``
(the cached view and its rendered entries), ``fit`` (what fits the budget),
``tools`` (pairing the chosen items' tool calls and results, by
``brain.lcm.pairing``'s rule) and ``recall`` (the recall block). Tested as a
whole through ``Brain.assemble`` in tests/brain/lcm/assemble/test_assembler.py: each part
only means something as the context it helps build.
"""

from __future__ import annotations

from brain.lcm.assemble.assembler import Assembler
from brain.lcm.assemble.model import Assembled, AssembleOptions, Format, RecallReport

__all__ = ["AssembleOptions", "Assembled", "Assembler", "Format", "RecallReport"]
