"""Params of the methods that put messages into a session: ``ingest`` and ``bootstrap``.

``Message`` is one conversation message as the wire carries it (OpenAI or
Anthropic shapes, the SDK extras kept as sent). Tests:
tests/protocol/methods/test_messages.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocol.errors import InvalidParams
from protocol.fields import Fields
from protocol.methods.checks import MAX_ID_LEN, MAX_PATH_LEN, check_depth

ROLES: Final = ("user", "assistant", "system", "tool", "developer", "function")
"""``developer`` is OpenAI's system role for current models (stored and pinned like
``system``); ``function`` is OpenAI's legacy function result (stored like ``tool``)."""
MAX_BATCH: Final = 10_000
MAX_BLOCKS: Final = 10_000

MESSAGE_FIELDS: Final = (
    "role",
    "content",
    "id",
    "name",
    "created_at",
    "tool_calls",
    "tool_call_id",
)
"""The members brain reads itself; any other member of a message is the host's data
(an SDK field such as ``refusal``, ``usage`` or ``stop_details``): kept as sent and
given back by ``get`` and ``describe``. A list of known SDK fields would break at
every SDK release, so there is none."""

RESERVED_PREFIX: Final = "__brain_"
"""Member names brain keeps for its own markers in stored messages: refused."""

NO_CONTENT_NEEDS: Final = ("tool_calls", "function_call", "refusal", "audio")
"""An assistant message may omit content (or send null) when one of these is given."""


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message (DESIGN §4), content as a string or a list of blocks.

    Besides the pinned fields, OpenAI's message-level ``tool_calls`` (assistant)
    and ``tool_call_id`` (tool) are read; every other member is kept as sent in
    ``extra``, except null-valued ones, which say nothing (SDKs emit
    ``"refusal": null``; dropping them also keeps the replay hashes of messages
    stored before). An assistant message with one of ``NO_CONTENT_NEEDS`` may
    have ``content`` null (``content_absent`` records that the member was
    missing rather than null). Only names starting ``__brain_`` are refused.
    """

    role: str
    content: str | list[dict[str, Any]] | None
    id: str | None = None
    name: str | None = None
    created_at: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    extra: dict[str, Any] | None = None
    content_absent: bool = False

    @classmethod
    def from_obj(cls, obj: Any, where: str) -> Self:
        """Validate one message object found at ``where``."""
        f = Fields(obj, where)
        role = f.required_str("role")
        if role not in ROLES:
            raise InvalidParams(f"{f.path('role')}: must be one of {', '.join(ROLES)}")
        content_absent = "content" not in f.obj
        content = f.raw("content")
        if isinstance(content, list):
            if len(content) > MAX_BLOCKS:
                raise InvalidParams(f"{f.path('content')}: at most {MAX_BLOCKS} blocks")
            for i, block in enumerate(content):
                _check_block(block, f"{f.path('content')}[{i}]")
        elif content is not None and not isinstance(content, str):
            raise InvalidParams(f"{f.path('content')}: must be a string or an array of blocks")
        tool_calls = f.optional_list("tool_calls", max_items=MAX_BLOCKS)
        for i, call in enumerate(tool_calls or ()):
            if not isinstance(call, dict):
                raise InvalidParams(f"{f.path('tool_calls')}[{i}]: must be an object")
            check_depth(call, f"{f.path('tool_calls')}[{i}]")
        extra: dict[str, Any] = {}
        for key, value in f.obj.items():
            if key in MESSAGE_FIELDS or value is None:  # a null member says nothing
                continue
            if key.startswith(RESERVED_PREFIX):
                raise InvalidParams(f"{f.path(key)}: names starting {RESERVED_PREFIX} are reserved")
            check_depth(value, f.path(key))
            extra[key] = value
        if content is None and not (
            role == "assistant" and (tool_calls or any(k in extra for k in NO_CONTENT_NEEDS))
        ):
            raise InvalidParams(
                f"{f.path('content')}: required (only an assistant message with "
                f"{', '.join(NO_CONTENT_NEEDS)} may omit it)"
            )
        return cls(
            role=role,
            content=content,
            id=f.optional_str("id", max_len=MAX_ID_LEN),
            name=f.optional_str("name"),
            created_at=f.optional_str("created_at", max_len=64),
            tool_calls=tool_calls,
            tool_call_id=f.optional_str("tool_call_id", max_len=MAX_ID_LEN),
            extra=extra or None,
            content_absent=content_absent,
        )


HOST_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class TurnMark:
    """``ingest``'s ``turn``: ``{"host", "key"?}``, the batch is one turn the named host
    integration committed through brain; ``info.hosts`` reports each host's last one.

    ``host``: 1..64 letters, digits, ``.``, ``_`` or ``-`` (``openclaw``); ``key``:
    the host's own id for the turn (OpenClaw's advancement key).
    """

    host: str
    key: str | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("host", "key")
    """The members it takes; any other is refused."""

    @classmethod
    def from_obj(cls, obj: Any, where: str = "params.turn") -> Self:
        f = Fields(obj, where, known=cls.FIELDS)
        host = f.required_str("host", max_len=64)
        if not HOST_NAME.fullmatch(host):
            raise InvalidParams(
                f"{where}.host: letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        key = f.optional_str("key", max_len=MAX_ID_LEN)
        f.done()
        return cls(host, key)


@dataclass(frozen=True, slots=True)
class IngestParams:
    """``ingest``: ``{"session", "messages": [Message]}`` or ``{"session", "message"}``.

    ``session_key`` optionally files the session under a key (a family of
    sessions, e.g. one agent's). ``single`` records which form was used.
    ``turn`` marks the batch as one turn a host committed (``TurnMark``).
    """

    session: str
    messages: tuple[Message, ...]
    session_key: str | None = None
    single: bool = False
    turn: TurnMark | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "session_key", "messages", "message", "turn")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        session_key = f.optional_str("session_key")
        batch = f.optional_list("messages", max_items=MAX_BATCH)
        one = f.raw("message")
        if (batch is None) == (one is None):
            raise InvalidParams("params.messages: give exactly one of messages or message")
        if batch is not None:
            if not batch:
                raise InvalidParams("params.messages: must not be empty")
            messages = tuple(
                Message.from_obj(m, f"params.messages[{i}]") for i, m in enumerate(batch)
            )
        else:
            messages = (Message.from_obj(one, "params.message"),)
        raw_turn = f.raw("turn")
        turn = None if raw_turn is None else TurnMark.from_obj(raw_turn)
        f.done()
        return cls(session, messages, session_key, single=batch is None, turn=turn)


ON_FORK: Final = ("refuse", "append")


@dataclass(frozen=True, slots=True)
class BootstrapParams:
    """``bootstrap``: ``{"session", "path", "session_key"?, "on_fork"?}``.

    ``path`` is a JSONL transcript the daemon can read (relative paths are the
    daemon's working directory's: prefer absolute ones): a regular file, never
    under ``/proc``, ``/sys`` or ``/dev``. ``on_fork``: ``refuse``
    (the default: a Conflict when stored messages of the session follow the
    newest transcript message stored) or ``append`` (add the transcript's
    branch after them).
    """

    session: str
    path: str
    session_key: str | None = None
    on_fork: str = "refuse"

    FIELDS: ClassVar[tuple[str, ...]] = ("session", "path", "session_key", "on_fork")
    """The params members it takes; any other is refused before anything else."""

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        f = Fields(obj, known=cls.FIELDS)
        session = f.required_str("session")
        path = f.required_str("path", max_len=MAX_PATH_LEN)
        session_key = f.optional_str("session_key")
        on_fork = f.choice("on_fork", ON_FORK, "refuse")
        f.done()
        return cls(session, path, session_key, on_fork)


def _check_block(block: Any, where: str) -> None:
    if not isinstance(block, dict):
        raise InvalidParams(f"{where}: must be an object")
    kind = block.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidParams(f"{where}.type: must be a non-empty string")
    check_depth(block, where)
