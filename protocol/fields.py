"""Reading typed fields out of a JSON object, with errors that name the field.

Every params type's ``from_obj`` uses a ``Fields`` reader, then calls
``done()``, which rejects members it did not read, so a misspelt option is an
error rather than silently ignored. A reader given the ``known`` member names
rejects the others up front, so a misspelt ``sesion`` is reported as itself
(with the likely intended name) rather than as the ``session`` it hides.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any, Final

from protocol.errors import InvalidParams

MAX_STR: Final = 512


class Fields:
    """A cursor over one JSON object; ``where`` is its path (``params.messages[2]``)."""

    def __init__(
        self, obj: Any, where: str = "params", known: Collection[str] | None = None
    ) -> None:
        if not isinstance(obj, dict):
            raise InvalidParams(f"{where}: must be an object")
        self.obj: dict[str, Any] = obj
        self.where = where
        self.known = None if known is None else frozenset(known)
        self._read: set[str] = set()
        if self.known is not None:
            # Before any other check: a misspelt field would otherwise surface as
            # the absence of the one it was meant to be ("session: required").
            unknown = sorted(k for k in obj if k not in self.known)
            if unknown:
                raise self._unknown(unknown, self.known)

    def path(self, name: str) -> str:
        """The dotted path of a member, for error messages."""
        return f"{self.where}.{name}"

    def raw(self, name: str) -> Any:
        """The member's value as it is (None when absent), marked as read."""
        if self.known is not None and name not in self.known:
            # A programming error, hit by any test of the method: keep ``known`` whole.
            raise AssertionError(f"{self.path(name)} is read but not among the known fields")
        self._read.add(name)
        return self.obj.get(name)

    def required_str(self, name: str, *, max_len: int = MAX_STR) -> str:
        """A non-empty string of at most ``max_len`` characters."""
        value = self.optional_str(name, max_len=max_len)
        if value is None:
            raise InvalidParams(f"{self.path(name)}: required")
        return value

    def optional_str(self, name: str, *, max_len: int = MAX_STR) -> str | None:
        """A non-empty string of at most ``max_len`` characters, or None when absent/null."""
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidParams(f"{self.path(name)}: must be a string")
        if not value or len(value) > max_len:
            raise InvalidParams(f"{self.path(name)}: must be 1..{max_len} characters")
        return value

    def optional_choice(self, name: str, choices: Sequence[str]) -> str | None:
        """One of ``choices``, or None when absent/null."""
        value = self.optional_str(name)
        if value is not None and value not in choices:
            raise InvalidParams(f"{self.path(name)}: must be one of {', '.join(choices)}")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        """One of ``choices``, or ``default`` when absent/null."""
        return self.optional_choice(name, choices) or default

    def optional_int(
        self, name: str, *, default: int, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        """An integer within bounds, or ``default`` when absent/null."""
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParams(f"{self.path(name)}: must be an integer")
        if minimum is not None and value < minimum:
            raise InvalidParams(f"{self.path(name)}: must be >= {minimum}")
        if maximum is not None and value > maximum:
            raise InvalidParams(f"{self.path(name)}: must be <= {maximum}")
        return value

    def optional_number(self, name: str, *, default: float | None = None) -> float | None:
        """A finite number, or ``default`` when absent/null."""
        value = self.raw(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidParams(f"{self.path(name)}: must be a number")
        if not math.isfinite(value):
            raise InvalidParams(f"{self.path(name)}: must be finite")
        return float(value)

    def optional_bool(self, name: str, *, default: bool) -> bool:
        """A boolean, or ``default`` when absent/null."""
        value = self.raw(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InvalidParams(f"{self.path(name)}: must be true or false")
        return value

    def optional_list(self, name: str, *, max_items: int | None = None) -> list[Any] | None:
        """An array (at most ``max_items`` long), or None when absent/null."""
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise InvalidParams(f"{self.path(name)}: must be an array")
        if max_items is not None and len(value) > max_items:
            raise InvalidParams(f"{self.path(name)}: at most {max_items} items")
        return value

    def done(self, *, ignore_null: bool = False) -> None:
        """Reject members that were never read (null-valued ones too, unless ``ignore_null``)."""
        unknown = sorted(
            k
            for k, v in self.obj.items()
            if k not in self._read and not (ignore_null and v is None)
        )
        if unknown:
            raise self._unknown(unknown, self._read)

    def _unknown(self, unknown: list[str], known: Collection[str]) -> InvalidParams:
        """The error naming the first unknown member, and the known one it resembles."""
        import difflib  # only to name a typo's likely field

        close = difflib.get_close_matches(unknown[0], sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return InvalidParams(f"{self.path(unknown[0])}: unknown field{hint}", {"unknown": unknown})
