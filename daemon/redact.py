"""Keeping server paths out of error answers.

An error's text often carries a path: an ``OSError`` names the file it failed
on, a payload write names its temp file, a failed open names the database.
The client (perhaps a sub-agent holding a grant) has no business learning
where the server keeps its data, so every error passes through ``redact``
before it is sent: the hidden directories (the database's) are cut from the
message and from every string in ``data``, leaving names relative to them
(``brain.db-files/file_…``), and a storage or internal failure, whose text
never echoes the request, loses any other absolute path but its last
component. The full text stays in the daemon's log.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from protocol import errors as wire


@functools.cache
def _absolute() -> re.Pattern[str]:
    """An absolute POSIX path not glued to a preceding word (``a/b`` is not one).

    Compiled on first use: only a failure's answer needs it.
    """
    return re.compile(r"(?<![\w./~-])(?:/[^\s/'\"(),;:]+)+/?")


_ENGINE_TEXT: Final = (wire.StorageFailure, wire.InternalError, wire.Busy)
"""Errors whose text the daemon writes itself, never quoting the request."""


def redact(error: wire.RPCError, hide: Sequence[Path]) -> wire.RPCError:
    """``error`` (changed in place) with no hidden directory, nor other absolute path where
    the text is the daemon's own."""
    prefixes = _prefixes(hide)
    strip_all = isinstance(error, _ENGINE_TEXT)

    def clean(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix + os.sep, "")
            text = re.sub(re.escape(prefix) + r"(?![\w.~-])", ".", text)
        if strip_all:
            text = _absolute().sub(_last_component, text)
        return text

    error.message = clean(error.message)
    error.args = (error.message,)
    if error.data:
        error.data = _clean_data(error.data, clean)
    return error


def _prefixes(hide: Sequence[Path]) -> list[str]:
    """Each directory as given and resolved, longest first, never the filesystem root."""
    found: set[str] = set()
    for directory in hide:
        for form in (str(directory), os.path.realpath(directory)):
            trimmed = form.rstrip(os.sep)
            if len(trimmed) > 1:
                found.add(trimmed)
    return sorted(found, key=len, reverse=True)


def _last_component(match: re.Match[str]) -> str:
    return Path(match.group(0)).name or "."


def _clean_data(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: _clean_data(v, clean) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_data(v, clean) for v in value]
    return value
