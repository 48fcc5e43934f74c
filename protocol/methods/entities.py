"""Params of the entity methods: ``entities`` (find by name) and ``entity`` (one
entity's mentions).

Tested where the daemon refuses bad params and answers good ones
(tests/e2e/test_entities_daemon.py) and, for ``FIELDS``, by tests/protocol/test_methods.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields

ENTITY_KINDS: Final = (
    "url",
    "path",
    "code",
    "error",
    "version",
    "date",
    "quantity",
    "identifier",
    "name",
)
"""The kinds the index records (``brain.lcm.entities.extract.KINDS``; a test keeps them equal)."""
MAX_NAME: Final = 512


_Named = tuple[str, str | None, str | None, bool, str | None, int]


def _named(obj: dict[str, Any], known: tuple[str, ...], *, limit: int, max_limit: int) -> _Named:
    """What both methods take: ``name``, exactly one of ``session`` | ``session_key`` |
    ``all`` (as for ``grep``), ``kind`` and ``limit`` (default ``limit``)."""
    f = Fields(obj, known=known)
    name = f.required_str("name", max_len=MAX_NAME)
    if not name.strip():
        raise InvalidParams("params.name: must name an entity (not only whitespace)")
    session = f.optional_str("session")
    session_key = f.optional_str("session_key")
    everything = f.optional_bool("all", default=False)
    if sum((session is not None, session_key is not None, everything)) != 1:
        raise InvalidParams("params.session: give exactly one of session, session_key, all")
    kind = f.optional_choice("kind", ENTITY_KINDS)
    count = f.optional_int("limit", default=limit, minimum=1, maximum=max_limit)
    f.done()
    return name, session, session_key, everything, kind, count


@dataclass(frozen=True, slots=True)
class EntitiesParams:
    """``entities``: ``{"name", "session"? | "session_key"? | "all"?, "kind"?, "limit"?}``.

    Entities whose name starts with ``name`` (or one of whose later words does), else
    close to it (fuzzy), with mention counts and first/last seen, scoped like ``grep``.
    """

    name: str
    session: str | None = None
    session_key: str | None = None
    all: bool = False
    kind: str | None = None
    limit: int = 20

    FIELDS: ClassVar[tuple[str, ...]] = ("name", "session", "session_key", "all", "kind", "limit")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls(*_named(obj, cls.FIELDS, limit=20, max_limit=200))


@dataclass(frozen=True, slots=True)
class EntityParams:
    """``entity``: ``{"name", "session"? | "session_key"? | "all"?, "kind"?, "limit"?}``.

    One entity (its name as ``entities`` returns it, any case) and the messages
    that mention it, oldest first, with snippets; ``limit`` caps the mentions
    returned (``total`` counts them all).
    """

    name: str
    session: str | None = None
    session_key: str | None = None
    all: bool = False
    kind: str | None = None
    limit: int = 50

    FIELDS: ClassVar[tuple[str, ...]] = ("name", "session", "session_key", "all", "kind", "limit")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        return cls(*_named(obj, cls.FIELDS, limit=50, max_limit=1_000))
