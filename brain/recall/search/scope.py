"""A search's scope: the conversations a session or a session key names, and its time
bounds in the stored form.

``grep`` itself takes conversation ids and stored timestamps; callers name sessions
and send any ISO-8601 time. Tested in tests/brain/recall/search/test_scope.py.
"""

from __future__ import annotations

from dataclasses import replace

from brain.lcm.content import normalize_time
from brain.lcm.context import conversation_id, session_key_conversations
from brain.recall.search.model import GrepOptions
from brain.store.connection import Store


def narrowed(
    store: Store, options: GrepOptions, *, session: str | None, session_key: str | None
) -> GrepOptions:
    """``options`` narrowed to the session's conversation (``NotFound`` naming a session
    that does not exist), else to the session key's conversations (empty: nothing to
    search); neither given: as they were."""
    if session is not None:
        return replace(options, conversations=(conversation_id(store, session),))
    if session_key is not None:
        return replace(options, conversations=session_key_conversations(store, session_key))
    return options


def scoped(
    store: Store, options: GrepOptions, *, session: str | None, session_key: str | None
) -> GrepOptions:
    """``narrowed``, with ``since`` and ``before`` normalised to stored UTC timestamps
    (``InvalidInput`` naming the field when one is not ISO-8601)."""
    options = narrowed(store, options, session=session, session_key=session_key)
    if options.since is not None:
        options = replace(options, since=normalize_time(options.since, "since"))
    if options.before is not None:
        options = replace(options, before=normalize_time(options.before, "before"))
    return options
