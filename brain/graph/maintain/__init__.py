"""The graph's slow loop: health, decay, merge, prune, connect, scale (one module per task).

Maintenance is never on the request path: ``brain maintain`` (or the daemon's
``maintain`` method) runs it now and then. It reads one snapshot of the graph
into memory, and each task plans its changes against that snapshot, applies
them to it (so later tasks see earlier ones, and a dry run reports what a real
run would do without writing anything), then writes them in bounded chunks:
each chunk is its own short transaction that bumps the graph epoch, so a daemon
serving the same database waits at most one chunk for the write lock and
reloads its mirror before its next answer.

Writes are conditional on the row being as the snapshot saw it (an edge's
``updated_at``; a node still existing, still without edges): a daemon may
learn, teach or query between two chunks, and maintenance then skips that row
rather than overwrite newer state with a value computed from older state.
Decay and prune's edges are set-based instead (a statement per span of sources,
``Writer.sweep``): they act on the rows as they are when each statement runs.

Authority (``brain.graph.nodes``): constitutional nodes and every edge touching them
are never changed by any task; canonical nodes decay at half speed (an edge
touching one uses twice the half-life), are never pruned as nodes and never
merged (merging them would need an LLM's judgement); overlay is the rest.
"""

from brain.graph.maintain.measure import HABITUAL, STRONG, Health, health
from brain.graph.maintain.options import TASKS, MaintainOptions
from brain.graph.maintain.run import MaintainReport, maintain

__all__ = [
    "HABITUAL",
    "STRONG",
    "TASKS",
    "Health",
    "MaintainOptions",
    "MaintainReport",
    "health",
    "maintain",
]
