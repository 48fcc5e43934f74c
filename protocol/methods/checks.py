"""Bounds and checks several method families share: id and path lengths, nesting depth.

Tested through the params types that use them (tests/protocol/methods/).
"""

from __future__ import annotations

from typing import Any, Final

from protocol.errors import InvalidParams

MAX_ID_LEN: Final = 512
MAX_DEPTH: Final = 64
MAX_PATH_LEN: Final = 4_096


def strings(values: list[Any], where: str) -> list[str]:
    """``values`` if each is a string of 1..``MAX_ID_LEN`` characters; else the bad one named."""
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value or len(value) > MAX_ID_LEN:
            raise InvalidParams(f"{where}[{i}]: must be a string of 1..{MAX_ID_LEN} characters")
    return values


def check_depth(value: Any, where: str) -> None:
    """Refuse structures nested deeper than ``MAX_DEPTH``.

    Blocks are stored as JSON again, and orjson refuses to encode more than
    254 levels: without this bound such a block would be a crash, not an
    answer naming the field.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidParams(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
