"""The per-conversation view ``assemble`` works on: the context list and the rendered
entries of its items, cached and revalidated on every call.

A view is revalidated by the conversation's ``context_version`` (any process's
commit bumps it); appends since it was built are fetched incrementally, and a
compaction or suppression (the epochs) rebuilds it, keeping the rendered
messages (a message never changes). Entries are rendered only when an item is
shown or a stub must be priced; an entry offers a stub for each of its tool
results (``Stub``), so a message holding several is stubbed result by result.
Tested through ``Brain.assemble`` in tests/brain/lcm/assemble/test_assembler.py (its
cache tests compare a warm engine with a cold one after appends, compactions and
other engines' commits).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import orjson

from brain.lcm.context import Conversation, Item, items
from brain.lcm.dag import Summary, load_summaries, summary_xml, withheld_xml
from brain.lcm.messages import StoredMessage, load_messages
from brain.lcm.render import (
    STUB_PREFIX,
    Block,
    Turn,
    stub_text,
    summary_turn,
    turn_from_message,
)
from brain.store.connection import Store
from brain.tokens import estimate_tokens, message_cost

_VIEW_LIMIT: Final = 64  # conversations whose views stay cached
_ENTRY_BATCH: Final = 256  # entries loaded at once while walking back for stubs


Stubs = int
"""Which tool results of a message are shown as stubs: bit ``n`` set stubs the result
at ``turn.blocks[n]`` (0: none; ``True``, bit 0, stubs a lone result)."""


@dataclass(frozen=True, slots=True)
class Stub:
    """One tool result of a message that can be shown as a one-line stub.

    Stubs are per result, not per message, and priced as the result alone: an
    Anthropic user turn holding two results offers two stubs, each costing and
    saving what stubbing the same result saves in OpenAI shape (where it is a
    ``tool`` message of its own), so budgets make the same choice in both shapes.
    """

    index: int
    """The result's index in the entry's ``turn.blocks``."""
    block: Block
    """The stub shown in its place."""
    cost: int
    """What the result costs shown whole, as its own message."""
    saved: int
    """What showing the stub instead saves (always > 0: a stub costing as much is not offered)."""


@dataclass
class Entry:
    """A cached rendering of one context item."""

    turn: Turn
    stubs: tuple[Stub, ...] = ()
    """The tool results that can be shown as stubs, in block order."""
    withheld: bool = False  # a placeholder for a withheld summary

    def shown(self, stubbed: Stubs) -> Turn:
        """The turn with the results ``stubbed`` names shown as their stubs."""
        if not stubbed:
            return self.turn
        blocks = list(self.turn.blocks)
        for stub in self.stubs:
            if stubbed >> stub.index & 1:
                blocks[stub.index] = stub.block
        return replace(self.turn, blocks=tuple(blocks))


@dataclass
class View:
    """One conversation's context list at a version, with the entries rendered so far."""

    version: int
    epoch: tuple[int, int]  # (compaction, suppression): a change means rebuild, not append
    items: list[Item]
    positions: list[int]
    entries: dict[tuple[str, int], Entry] = field(default_factory=dict)
    summary_indices: list[int] = field(default_factory=list)
    system_positions: set[int] = field(default_factory=set)
    """Positions of the (visible) system messages: pinned, never dropped."""
    sources: dict[tuple[str, int], list[Item] | None] = field(default_factory=dict)
    """A summary's sources as items, by the summary's entry key (``history``); None:
    it is not to be opened. A summary never changes, and a suppression rebuilds the
    view."""


class Views:
    """The cached views of one engine's conversations (at most ``_VIEW_LIMIT``).

    Thread-safe for the dict; a view itself is used by one assemble of its
    conversation at a time (the ``Assembler`` takes a lock per conversation).
    """

    def __init__(self) -> None:
        self._views: dict[int, View] = {}
        self._guard = threading.Lock()

    def get(self, store: Store, conv: Conversation) -> View:
        """The view of ``conv`` as of this read's snapshot (``store``): cached,
        brought up to date, or built."""
        with self._guard:
            view = self._views.get(conv.id)
        epoch = (conv.compaction_epoch, conv.suppress_epoch)
        if view is not None and (view.version > conv.context_version or view.epoch > epoch):
            # This read's snapshot is older than the cached view (another read, begun
            # later, refreshed it): build one for this snapshot and leave the cache be.
            return _load_view(store, conv, None)
        if view is not None and view.version == conv.context_version and view.epoch == epoch:
            return view
        if view is not None and view.epoch == epoch and view.items:
            # Only appends since the view was built: fetch the new items.
            new = items(store, conv.id, after_pos=view.items[-1].pos)
            view.summary_indices += [
                len(view.items) + n for n, i in enumerate(new) if not i.is_message
            ]
            view.system_positions |= _system_positions(store, conv.id, view.items[-1].pos)
            view.items += new
            view.positions += [i.pos for i in new]
            view.version = conv.context_version
            return view
        view = _load_view(store, conv, view)
        with self._guard:
            if len(self._views) >= _VIEW_LIMIT:
                self._views.pop(next(iter(self._views)))
            self._views[conv.id] = view
        return view

    def forget(self, conversation_id: int | None = None) -> None:
        """Drop cached views (one conversation, or all)."""
        with self._guard:
            if conversation_id is None:
                self._views.clear()
            else:
                self._views.pop(conversation_id, None)


def key(item: Item) -> tuple[str, int]:
    """The key of an item's entry in ``View.entries``."""
    return ("m", item.message_id) if item.message_id else ("s", int(item.summary_id or 0))


def shown_cost(view: View, item: Item, stubbed: Stubs) -> int:
    """What ``item`` costs with the results ``stubbed`` names shown as stubs (its entry
    must be rendered when some are: pricing one is what renders it)."""
    if not stubbed:
        return item.token_count
    stubs = view.entries[key(item)].stubs
    return item.token_count - sum(s.saved for s in stubs if stubbed >> s.index & 1)


def entry(store: Store, view: View, item: Item) -> Entry:
    """The rendered entry of one item, loading it (and a batch before it) if needed."""
    found = key(item)
    if found not in view.entries:
        index = bisect.bisect_left(view.positions, item.pos)
        ensure_entries(store, view, view.items[max(0, index - _ENTRY_BATCH) : index + 1])
    return view.entries[found]


def ensure_entries(store: Store, view: View, wanted: Sequence[Item]) -> None:
    """Render the entries of ``wanted`` not rendered yet (in two bulk loads)."""
    missing_m = [
        i.message_id for i in wanted if i.message_id and ("m", i.message_id) not in view.entries
    ]
    missing_s = [
        i.summary_id for i in wanted if i.summary_id and ("s", i.summary_id) not in view.entries
    ]
    if missing_m:
        for msg in load_messages(store, missing_m):
            view.entries[("m", msg.row_id)] = _message_entry(msg)
    if missing_s:
        found = load_summaries(store, missing_s)
        kids = _child_ids(store, missing_s)
        for row_id, summary in found.items():
            view.entries[("s", row_id)] = _summary_entry(summary, kids.get(row_id, ()))


def _load_view(store: Store, conv: Conversation, old_view: View | None) -> View:
    """A view of ``conv`` read whole from ``store`` (keeping ``old_view``'s messages)."""
    loaded = items(store, conv.id)
    old = old_view.entries if old_view is not None else {}
    return View(
        conv.context_version,
        (conv.compaction_epoch, conv.suppress_epoch),
        loaded,
        [i.pos for i in loaded],
        {k: v for k, v in old.items() if k[0] == "m"},  # messages never change
        [n for n, i in enumerate(loaded) if not i.is_message],
        _system_positions(store, conv.id, 0),
    )


def _message_entry(msg: StoredMessage) -> Entry:
    turn = turn_from_message(msg)
    # Where each content block's result is in the message as sent (describe shows
    # ``message.content``): the n-th tool_result block of the turn is the n-th
    # tool_result among the content parts (render makes one block of each).
    content = [p for p in msg.parts if p.origin == "content"]
    places = iter([n for n, p in enumerate(content) if p.kind == "tool_result"])
    lone = len(turn.blocks) == 1
    stubs: list[Stub] = []
    for index, block in enumerate(turn.blocks):
        if block.type != "tool_result":
            continue
        place = next(places, None) if content else None
        if block.text.startswith(STUB_PREFIX):
            # Kept in a payload file: already a stub (naming the file, with the
            # output's real size); a stub of that stub would only hide both.
            continue
        # describe(msg id) recovers the result; in a message holding more than
        # this block the stub also says which one (``content[n]``).
        text = stub_text(
            msg.id,
            block.name,
            len(block.text.encode()),
            None,
            block=None if lone or len(content) < 2 else place,
        )
        # A lone result costs what its message does; one of several costs what it
        # would as its own message (as ingest prices it: ``content._content_tokens``).
        cost = message_cost(msg.token_count if lone else estimate_tokens(block.text))
        saved = cost - message_cost(estimate_tokens(text))
        if saved > 0:
            stubs.append(Stub(index, replace(block, text=text), cost, saved))
    return Entry(turn, tuple(stubs))


def _summary_entry(summary: Summary, child_ids: Sequence[str]) -> Entry:
    # A withheld summary still holds suppressed text: its span is shown without it
    # until compaction swaps the rebuilt summary in.
    text = withheld_xml(summary, child_ids) if summary.hidden else summary_xml(summary, child_ids)
    return Entry(summary_turn(summary.id, text, summary.first_seq), withheld=summary.hidden)


def _child_ids(store: Store, row_ids: list[int]) -> dict[int, tuple[str, ...]]:
    found: dict[int, list[str]] = {}
    for parent, child in store.execute(
        "SELECT ss.summary_id, s.summary_id FROM summary_sources ss "
        "JOIN summaries s ON s.id = ss.child_id "
        "WHERE ss.summary_id IN (SELECT value FROM json_each(?)) "
        "ORDER BY ss.summary_id, ss.ordinal",
        (orjson.dumps(row_ids).decode(),),
    ):
        found.setdefault(int(parent), []).append(str(child))
    return {k: tuple(v) for k, v in found.items()}


def _system_positions(store: Store, conversation_id: int, after_pos: int) -> set[int]:
    """Positions after ``after_pos`` of the visible system messages in the context list."""
    return {
        int(r[0])
        for r in store.execute(
            "SELECT c.pos FROM context_items c CROSS JOIN messages m ON m.id = c.message_id "
            "WHERE c.conversation_id = ? AND c.pos > ? AND m.role = 'system' "
            "AND m.suppressed_at IS NULL",
            (conversation_id, after_pos),
        )
    }
