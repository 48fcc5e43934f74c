"""Dispatch: a line in, a frame out; the single exception-to-wire boundary.

``prepare`` runs synchronously in arrival order: it parses the line, finds the
method, validates params into their typed object and computes the request's
*lane* (requests on one lane, e.g. one session, run in arrival order). Errors
found here are answered at once. ``execute`` runs the handler and turns its
result or exception into a frame. A call carrying a grant is admitted by it
first (checked, with a token reserved and the grant held, in one database
transaction) and, once answered, charged the estimated tokens of its encoded
result. ``to_wire`` is the only place where engine and foreign exceptions
become protocol errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import apsw

import brain as engine
from daemon import granted, progress
from daemon.context import Context
from daemon.handlers import HANDLERS, Handler
from daemon.logs import log
from daemon.redact import redact
from protocol import errors as wire
from protocol.spec import GRANTABLE, METHODS
from protocol.wire import Rejected, Request, error_frame, parse_request, result_frame

if TYPE_CHECKING:
    from brain import Brain, Reach

HELD_POLL_S: Final = 0.05
"""How often a call waits to ask again while another process's call holds its grant."""


@dataclass(frozen=True, slots=True)
class Call:
    """A validated request ready to run."""

    request: Request
    handler: Handler
    params: Any
    lane: str | None

    @property
    def holds_lane(self) -> bool:
        """Whether later requests on the lane wait for this one."""
        return self.handler.holds_lane


@dataclass(frozen=True, slots=True)
class Answer:
    """A request answered without running anything (``frame`` None for notifications)."""

    frame: bytes | None


class Dispatcher:
    """Turns request lines into response frames against one ``Brain``."""

    def __init__(self, context: Context, handlers: dict[str, Handler] | None = None) -> None:
        self.context = context
        self.handlers = HANDLERS if handlers is None else handlers
        # Calls carrying one grant run one at a time, check to charge, so together
        # they pass its cap by at most the one call that crosses it. Entries live
        # while a call holds or waits for them.
        self._grant_locks: dict[str, tuple[anyio.Lock, int]] = {}

    @property
    def brain(self) -> Brain:
        """The engine requests run against."""
        return self.context.brain

    def prepare(self, line: bytes) -> Call | Answer:
        """Parse and validate one line (cheap, synchronous, in arrival order)."""
        parsed = parse_request(line)
        if isinstance(parsed, Rejected):
            return self._reject(parsed.id, parsed.error, parsed.notification, parsed.jsonrpc)
        handler = self.handlers.get(parsed.method)
        spec = METHODS.get(parsed.method)
        if handler is None or spec is None:
            err = wire.MethodNotFound(f"unknown method {parsed.method!r}")
            return self._reject(parsed.id, err, parsed.notification, parsed.jsonrpc)
        if parsed.grant is not None and parsed.method not in GRANTABLE:
            # Refused here, not in ``execute``: ``shutdown`` never reaches it,
            # and no grant may stop the daemon.
            denied = wire.ScopeDenied(f"{parsed.method!r} cannot be granted", {"reason": "method"})
            return self._reject(parsed.id, denied, parsed.notification, parsed.jsonrpc)
        try:
            params = spec.params.from_obj(parsed.params)
        except wire.RPCError as exc:
            return self._reject(parsed.id, exc, parsed.notification, parsed.jsonrpc)
        except Exception as exc:  # a parser bug must cost one answer, not the read loop
            failure = to_wire(exc, parsed.method, hide=(self.brain.path.parent,))
            return self._reject(parsed.id, failure, parsed.notification, parsed.jsonrpc)
        return Call(parsed, handler, params, handler.lane(params))

    def answer_now(self, call: Call) -> Answer | None:
        """Answer ``call`` synchronously with its handler's ``now``, or None if it cannot.

        Only calls with no lane, no grant (admitting one writes) and no progress
        qualify. Errors become frames here as in ``execute``.
        """
        request = call.request
        now = call.handler.now
        if now is None or call.lane is not None or request.grant is not None or request.progress:
            return None
        try:
            result = now(self.context, call.params)
        except Exception as exc:  # the same boundary as ``_execute``
            err = to_wire(exc, request.method, hide=(self.brain.path.parent,))
            return self._reject(request.id, err, request.notification, request.jsonrpc)
        if result is None:
            return None
        if request.notification:
            return Answer(None)
        return Answer(result_frame(request.id, result, request.jsonrpc))

    async def execute(
        self,
        call: Call,
        send: Callable[[bytes], Awaitable[None]] | None = None,
        applied: Callable[[], None] | None = None,
    ) -> bytes | None:
        """Run a prepared call; return its response frame (None for a notification).

        ``send`` writes a frame to the client: with it, a request that asked for
        ``progress`` gets progress notifications while it runs (``daemon.progress``).
        ``applied`` is called, with group commit, once the call's writes are
        committed and before the shared fsync that makes them durable is awaited:
        the server releases the call's lane there, so the lane's next write can
        join that fsync. The answer still waits for it.
        """
        request = call.request
        token = None
        if request.progress and send is not None and not request.notification:
            token = progress.current.set(progress.reporter(request.id, send))
        try:
            return await self._execute(call, applied)
        finally:
            if token is not None:
                progress.current.reset(token)

    async def _execute(self, call: Call, applied: Callable[[], None] | None = None) -> bytes | None:
        request = call.request
        try:
            if self._defers_fsync(call):
                result = await self._group_committed(call, applied)
                frame = result_frame(request.id, result, request.jsonrpc)
            elif request.grant is None:
                result = await call.handler.run(self.context, call.params)
                frame = result_frame(request.id, result, request.jsonrpc)
            else:
                frame = await self._granted(call, request.grant)
        except Exception as exc:  # the boundary: every failure becomes a wire error
            if isinstance(exc, engine.DatabaseFileLost):
                self.context.note_lost(exc)  # no more writes here: the daemon stops
            err = to_wire(exc, request.method, hide=(self.brain.path.parent,))
            return None if request.notification else error_frame(request.id, err, request.jsonrpc)
        if call.handler.mutates:
            self.context.note_write()
        return None if request.notification else frame

    def _defers_fsync(self, call: Call) -> bool:
        """Whether ``call`` writes with group commit and its answer waits for the fsync
        here (a granted call, or one run with no event loop, waits in the engine)."""
        return (
            call.handler.mutates
            and call.request.grant is None
            and not self.context.inline
            and self.brain.group_commit
        )

    async def _group_committed(self, call: Call, applied: Callable[[], None] | None) -> Any:
        """Run a writing call whose commits skip their fsync, then wait for a shared one.

        The wait is in a thread of its own, not a database thread: writers waiting
        for the fsync hold up no other request's database work.
        """
        from brain import defer_durability

        with defer_durability() as pending:
            result = await call.handler.run(self.context, call.params)
        if pending.needed:
            if applied is not None:
                applied()
            await anyio.to_thread.run_sync(self.brain.durable, abandon_on_cancel=True)
        return result

    async def _granted(self, call: Call, grant: str) -> bytes:
        """Admit, run and settle a call carrying ``grant``, one such call at a time."""
        lock, users = self._grant_locks.get(grant) or (anyio.Lock(), 0)
        self._grant_locks[grant] = (lock, users + 1)
        try:
            async with lock:
                return await self._run_granted(call, grant)
        finally:
            lock, users = self._grant_locks[grant]
            if users == 1:
                del self._grant_locks[grant]
            else:
                self._grant_locks[grant] = (lock, users - 1)

    async def _run_granted(self, call: Call, grant: str) -> bytes:
        """Hold the grant across processes while the call runs; settle what it cost.

        The in-process lock orders this process's calls; the grant's hold in
        the database orders calls in other processes serving the same file,
        so across all of them one call at a time runs under a grant and only
        that one can cross its cap. A call that fails is refunded.
        """
        import secrets

        from brain import estimate_tokens

        request = call.request
        reach = reach_of(call.params)
        holder = secrets.token_hex(8)
        while True:
            # Shielded: a hold taken in the worker thread must reach the settle below.
            with anyio.CancelScope(shield=True):
                admitted = await self.context.db(
                    self.brain.admit_grant, grant, request.method, reach, holder
                )
            if admitted is not None:
                break
            await anyio.sleep(HELD_POLL_S)  # another process's call holds the grant
        tokens = 0
        try:
            failure: Exception | None = None
            async with anyio.create_task_group() as renewing:
                renewing.start_soon(self._keep_holding, grant, holder)
                flag = granted.current.set(True)
                try:
                    result = await call.handler.run(self.context, call.params)
                except Exception as exc:  # re-raised below, not grouped by the task group
                    failure = exc
                finally:
                    granted.current.reset(flag)
                    renewing.cancel_scope.cancel()
            if failure is not None:
                raise failure
            frame = result_frame(request.id, result, request.jsonrpc)
            tokens = estimate_tokens(frame.decode("utf-8", "replace"))
            return frame
        finally:
            with anyio.CancelScope(shield=True):
                await self._settle(grant, holder, tokens)

    async def _keep_holding(self, grant: str, holder: str) -> None:
        """Renew the call's hold on its grant until cancelled (a long call keeps it)."""
        from brain import GRANT_HOLD_S

        while True:
            await anyio.sleep(GRANT_HOLD_S / 3)
            try:
                if not await self.context.db(self.brain.renew_grant, grant, holder):
                    log.warning("grant hold lapsed during a call")
                    return
            except (engine.BrainError, apsw.Error) as exc:
                log.warning("grant hold renewal failed", error=str(exc))

    async def _settle(self, grant: str, holder: str, tokens: int) -> None:
        """Charge a grant for an answer already built (0: refund), releasing its hold.

        A call that passes the cap still returns (it was allowed when it
        started; the next is refused). A settle that fails (a busy database)
        is logged, not reported: the call has happened, and answering it with
        an error would hide a committed write from the client. Its reserved
        token stays charged and its hold lapses.
        """
        try:
            await self.context.db(self.brain.settle_grant, grant, holder, tokens)
        except (engine.BrainError, apsw.Error) as exc:
            # No grant id in the log: it works as a credential.
            log.warning("grant charge failed", tokens=tokens, error=str(exc))

    def reject(self, call: Call, error: wire.RPCError) -> Answer:
        """Answer a prepared call with an error instead of running it."""
        request = call.request
        return self._reject(request.id, error, request.notification, request.jsonrpc)

    @staticmethod
    def _reject(request_id: Any, error: wire.RPCError, notification: bool, jsonrpc: bool) -> Answer:
        return Answer(None if notification else error_frame(request_id, error, jsonrpc))


def reach_of(params: Any) -> Reach:
    """What a call's params touch, for the grant check.

    Every params type with a ``session`` field is session-scoped: without a
    session or session key it reaches every conversation (``all: true``).
    """
    from brain import Reach

    session = getattr(params, "session", None)
    session_key = getattr(params, "session_key", None)
    scoped = hasattr(params, "session")
    everything = bool(getattr(params, "all", False)) or (
        scoped and session is None and session_key is None
    )
    suppressed = bool(getattr(params, "include_suppressed", False))
    return Reach(session, session_key, everything, suppressed)


_ENGINE_ERRORS: dict[type[engine.BrainError], type[wire.RPCError]] = {
    engine.GrantDenied: wire.ScopeDenied,
    engine.GrantExhausted: wire.BudgetExceeded,
    engine.NotFound: wire.NotFound,
    engine.Conflict: wire.Conflict,
    engine.StoreBusy: wire.Busy,
    engine.StorageError: wire.StorageFailure,
    engine.ProviderError: wire.ProviderUnavailable,
}


def to_wire(exc: BaseException, method: str = "?", *, hide: Sequence[Path] = ()) -> wire.RPCError:
    """Map any exception to the protocol error a client should see.

    Unexpected exceptions are logged with their traceback to stderr and reach
    the client only as a generic internal error. No answer names a server
    path: the directories in ``hide`` (the database's) are cut from messages
    and data, and what storage failures say of any other absolute path is cut
    to its last component (see ``daemon.redact``).
    """
    return redact(_mapped(exc, method), hide)


def _mapped(exc: BaseException, method: str) -> wire.RPCError:
    if isinstance(exc, wire.RPCError):
        return exc
    if isinstance(exc, engine.InvalidInput):
        return wire.InvalidParams(f"params.{exc.message}", {"field": f"params.{exc.field}"})
    if isinstance(exc, engine.BrainError):
        cls = next((w for e, w in _ENGINE_ERRORS.items() if isinstance(exc, e)), wire.InternalError)
        return cls(exc.message, exc.data or None)
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return wire.Busy("database stayed locked by another process")
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        # Not a bug to report but damage to repair; the operator needs the detail.
        log.error("database corrupt", method=method, error=repr(exc), exc_info=exc)
        return wire.StorageFailure(
            f"database corrupt ({type(exc).__name__}); run brain doctor", {"reason": "corrupt"}
        )
    if isinstance(exc, apsw.ConstraintError):
        # The engine checks what it writes, so a constraint that still fails means
        # another process wrote a contradicting row first (or the request names
        # something stored in between): nothing was written, and the caller may retry.
        log.warning("constraint failed", method=method, error=repr(exc), exc_info=exc)
        return wire.Conflict(
            "the write contradicts what another writer stored (a constraint failed); "
            "nothing was written",
            {"reason": "constraint"},
        )
    if isinstance(exc, apsw.FullError | apsw.IOError | apsw.CantOpenError | apsw.ReadOnlyError):
        return wire.StorageFailure(f"storage failure: {type(exc).__name__}")
    if isinstance(exc, OSError):
        return wire.StorageFailure(f"storage failure: {exc.strerror or type(exc).__name__}")
    # Everything else, an apsw.SQLError included (a statement the schema does not
    # support: a bug, or a schema changed under us), is internal: the client can
    # do nothing with the detail, the operator needs all of it.
    log.error("internal error", method=method, error=repr(exc), exc_info=exc)
    return wire.InternalError()
