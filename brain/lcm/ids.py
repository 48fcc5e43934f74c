"""Message ids: the ``msg_<n>`` ids the store gives messages that came without one,
and the public id every reader shows (ingest makes them; the read side parses them).
"""

from __future__ import annotations

import re
from typing import Final

from brain.errors import InvalidInput

GENERATED_ID: Final = re.compile(r"msg_([0-9]+)")
"""The form of ids the store gives messages that came without one."""
MAX_ROW_ID: Final = 2**63 - 1
"""SQLite's largest rowid: a ``msg_<n>`` beyond it names nothing the store can hold."""


def generated_row_id(public_id: str, field: str) -> int | None:
    """The row id a ``msg_<n>`` id names, None for any other id.

    An ``n`` past SQLite's rowid range is refused as invalid input (naming
    ``field``) before it reaches a query, where it would overflow the binding.
    """
    generated = GENERATED_ID.fullmatch(public_id)
    if generated is None:
        return None
    digits = generated.group(1).lstrip("0") or "0"
    # Length first: int() refuses strings over 4,300 digits with a ValueError.
    if len(digits) > len(str(MAX_ROW_ID)) or int(digits) > MAX_ROW_ID:
        raise InvalidInput(field, f"{public_id!r} is past the largest message number")
    return int(digits)


def public_message_id(row_id: int, client_id: str | None) -> str:
    """The id clients see: their own id when they gave one, else ``msg_<n>``."""
    return client_id if client_id is not None else f"msg_{row_id}"
