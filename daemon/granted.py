"""Whether the request being handled runs under a grant.

The dispatcher sets ``current`` around a call it admitted under a grant.
Handlers whose engine call narrows under a grant read it and pass an explicit
flag to the engine, which never reads this: ``assemble``'s recall block lets
only the session's own summaries fire (a grant reaches sessions, not taught or
workspace nodes), and ``ingest`` never creates a session or files one under a
key (a grant must not widen what it, or another grant, reaches).
"""

from __future__ import annotations

import contextvars

current: contextvars.ContextVar[bool] = contextvars.ContextVar("brain_granted", default=False)
