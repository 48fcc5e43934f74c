"""An offline summarizer run by a child process, so compaction never holds the daemon's GIL.

The offline summarizers are pure Python: a sweep of a 5,000-message tool-heavy
session spent 40 of its 41 s of CPU in ``brain.lcm.facts`` (cProfile). Run on a
daemon thread, that Python took the interpreter lock from every reader: a reader
thread blocked on the lock ~2.3 times per unscoped semantic grep while a
compaction ran in the same process, and never when the same compaction ran in
another process (voluntary context switches of the reading thread,
``getrusage(RUSAGE_THREAD)``; issue 17 saw semantic grep go 18 -> 73 ms and an
assemble of another session 1.3 -> 33 ms during an 86 s compaction).

:class:`ChildSummarizer` keeps one child (``python -m brain.lcm.summary_child
NAME``, this ``brain`` package first on its path) started on the first request,
and sends it each ``SummaryRequest``; the compaction thread waits on the pipe
with the lock released. The child runs the offline summarizer ``NAME``
(``brain.lcm.offline``), so its text is the one the thread would have made, and
the summary keeps that summarizer's name. Requests go one at a time (two
compactions' summaries took turns on the interpreter lock before, too). A child
that cannot start, dies or answers garbage is not an error: that request is
summarised in this process and the next one starts a new child. The child exits
when its stdin closes (``close``, or this process going away), as a thread would
have died with the process.

Frames (``brain.children``) are pickles behind a 4-byte length, between two processes running the
same code. Tested in tests/brain/lcm/test_summary_child.py.
"""

from __future__ import annotations

import atexit
import pickle
import subprocess
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, Final

from brain.children import (
    HasChild,
    child_output,
    kill_after,
    receive_frame,
    send_frame,
    start_child,
)

if TYPE_CHECKING:
    from brain.lcm.summary_contract import Summarizer, SummaryRequest

__all__ = ["ChildSummarizer", "main"]

_NAMES: Final = {
    "default": "facts",
    "extractive_v1": "extractive",
    "truncation": "truncation",
    "random": "random",
}
"""Each offline summarizer's ``name`` by its setting (known here without importing it:
the daemon makes this object before its first answer, and the summarizer loads late)."""


class ChildSummarizer(HasChild):
    """The offline summarizer ``name`` (see ``brain.lcm.offline``), run in a child process."""

    def __init__(self, name: str = "default") -> None:
        if name not in _NAMES:
            from brain.lcm.offline import offline_summarizer

            offline_summarizer(name)  # raises the setting's ValueError
        self._name_arg = name
        self.name = _NAMES[name]
        self._inner: Summarizer | None = None  # this process's own, made when first needed
        self._lock = threading.Lock()
        self._closed = False
        atexit.register(self.close)

    def summarize(self, request: SummaryRequest) -> str:
        """The inner summarizer's text for ``request``, made by the child when it can be."""
        with self._lock:
            if not self._closed:
                text = self._ask(request)
                if text is not None:
                    return text
        if self._inner is None:
            from brain.lcm.offline import offline_summarizer

            self._inner = offline_summarizer(self._name_arg)
        return self._inner.summarize(request)

    def close(self) -> None:
        """End the child (it exits when its stdin closes); later requests run in process."""
        self._closed = True
        # Never waits long for a summary in flight (a stopped child would hold the
        # lock until its answer deadline, past the daemon's shutdown bound): kill
        # the child instead, and that thread makes its summary in process.
        self._stop_within(self._lock)

    def _ask(self, request: SummaryRequest) -> str | None:
        """The child's answer, or None when there is no working child (it is then dropped)."""
        try:
            proc = self._running()
            if proc is None:
                self._stop()
                proc = self._proc = _start(self._name_arg)
            assert proc.stdin is not None
            assert proc.stdout is not None
            with kill_after(proc, ANSWER_DEADLINE_S):
                _send(proc.stdin, request)
                kind, body = _receive(proc.stdout)
        except (OSError, EOFError, ValueError, pickle.PickleError):
            self._stop()
            return None
        if kind == "text" and isinstance(body, str):
            return body
        if kind == "error" and isinstance(body, BaseException):
            raise body  # the summarizer's own error, as the thread would have raised it
        self._stop()
        return None


ANSWER_DEADLINE_S = 60.0
"""How long the child may take over one summary before it is killed (and the summary
made in process). An offline summary of a compaction's chunk takes milliseconds to a
second or two; sixty seconds is only reached by a child that stopped (SIGSTOP, wedged)."""


def _start(name: str) -> subprocess.Popen[bytes]:
    return start_child("brain.lcm.summary_child", name)


def _send(out: IO[bytes], obj: Any) -> None:
    send_frame(out, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(stream: IO[bytes]) -> Any:
    return pickle.loads(receive_frame(stream, "the summarizer child"))  # noqa: S301 (our own child's frame)


def main() -> None:
    """The child: answer each request frame on stdin with ("text", str) or ("error", exc)
    until stdin closes."""
    from brain.lcm.offline import offline_summarizer

    summarizer = offline_summarizer(sys.argv[1] if len(sys.argv) > 1 else "default")
    out = child_output()
    stdin = sys.stdin.buffer
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            break
        try:
            reply: tuple[str, Any] = ("text", summarizer.summarize(request))
        except Exception as exc:
            reply = ("error", exc)
        try:
            _send(out, reply)
        except (pickle.PickleError, TypeError, AttributeError):
            _send(out, ("error", RuntimeError(f"summarizer failed: {reply[1]!r}")))
    out.close()


if __name__ == "__main__":
    main()
