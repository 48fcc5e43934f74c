"""Compaction: folding old context into leaf and condensed summaries.

Each pass has three phases: read the chunk (database lock held briefly),
summarise it (no lock, no transaction: an LLM call may take seconds), then
write the summary and replace the chunk's context items in one transaction,
after checking the items are still exactly what was read. A crash leaves the
old state or the new one, never half. Passes on one conversation never
interleave (a per-conversation lock); other conversations are not blocked.

Cost: a pass touches only its chunk and the items next to it, found through
the ``(conversation_id, pos)`` key, so a full sweep is linear in the number
of messages.

Suppression: text hidden when a chunk is read is left out (its source link is
kept, marked ``omitted``); the commit re-checks that nothing fed to the
summarizer was hidden meanwhile, and if something was, rolls back and reads the
chunk again. A summary withheld because a source was suppressed later
(``brain.lcm.suppress``) is rebuilt by a *rebuild pass* before any other pass: its
remaining sources (visible child summaries, and the visible messages under
withheld ones) are summarised into a replacement of the same span, swapped into
the context list in its place. The original stays stored and comes back on
unsuppress.
"""

from brain.lcm.compaction.compactor import Compactor
from brain.lcm.compaction.report import CompactionReport

__all__ = ["CompactionReport", "Compactor"]
