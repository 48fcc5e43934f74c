"""Requests to the daemon's dispatcher on behalf of MCP tools, resources and prompts.

A call is built as the NDJSON request line a client would send and goes
through ``Dispatcher.prepare`` and ``execute``, exactly as in ``brain serve``:
params are validated by ``protocol.methods``, engine failures mapped and paths
redacted by ``daemon.dispatch``, and acknowledged writes counted for
auto-save. Calls on one lane (one session, one chat) that hold it run one at
a time, as the NDJSON server orders them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from daemon import progress
from daemon.dispatch import Answer
from protocol import errors as wire

if TYPE_CHECKING:
    from brain import Progress
    from daemon.dispatch import Dispatcher

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]
"""Where a call's progress goes: ``(done, total, phase)``, awaited on the event loop."""


class Calls:
    """Runs methods through one dispatcher."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.answered = anyio.Event()
        """Set once the first call has been answered (background work waits for it)."""
        self._lanes: dict[str, anyio.Lock] = {}

    async def call(
        self, method: str, params: dict[str, Any], report: ProgressSink | None = None
    ) -> Any:
        """The method's result; raises the ``protocol.errors.RPCError`` it was answered with.

        ``report``: the call's progress (long methods report it; others ignore it).
        """
        line = orjson.dumps({"id": 0, "method": method, "params": params})
        prepared = self.dispatcher.prepare(line)
        if isinstance(prepared, Answer):
            assert prepared.frame is not None  # a request with an id is always answered
            return _decode(prepared.frame)
        lane = prepared.lane if prepared.holds_lane else None
        lock = None
        if lane is not None:
            lock = self._lanes.setdefault(lane, anyio.Lock())
            await lock.acquire()
        try:
            token = progress.current.set(_reporter(report)) if report is not None else None
            try:
                frame = await self.dispatcher.execute(prepared)
            finally:
                if token is not None:
                    progress.current.reset(token)
        finally:
            if lock is not None and lane is not None:
                lock.release()
                if not lock.locked() and not lock.statistics().tasks_waiting:
                    del self._lanes[lane]  # only sessions with calls running keep a lock
        self.answered.set()
        assert frame is not None
        return _decode(frame)


def _decode(frame: bytes) -> Any:
    answer = orjson.loads(frame)
    if "error" in answer:
        raise wire.error_from_obj(answer["error"])
    return answer["result"]


def _reporter(report: ProgressSink) -> Progress:
    """The engine-side progress function of a call (``daemon.progress``'s, so throttled alike)."""

    async def send(frame: bytes) -> None:
        params = orjson.loads(frame)["params"]
        await report(params["done"], params["total"], params["phase"])

    return progress.reporter(0, send)
