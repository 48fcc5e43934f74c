"""Waiting on providers apart from database work.

A call to an LLM or an embeddings endpoint can take seconds, or hang. Run in
the database threads (``Context.db``), a few hung calls would take every one of
them, and an unrelated ``ingest`` would wait for the provider. So each provider
(the chat model, the embedder) gets its own :class:`Provider`: its own worker
threads behind its own limiter, and a deadline no request waits past.

At the deadline the request stops waiting and gets
:class:`~brain.errors.ProviderError` (what a failed provider gives; handlers
turn it into their documented fallback or -32007). The worker thread is
abandoned, not killed (a thread cannot be): the engine bounds each provider
call by the same deadline (``deadline_s`` of ``brain.providers.llm.LLMConfig`` and
``OpenAIEmbedderConfig``), so the thread ends about when the request gave up.
Its limiter slot is freed at once, so ``concurrency`` bounds the requests
waiting on a provider, and the threads alive only briefly exceed it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from brain import ProviderError

T = TypeVar("T")


class Provider:
    """One provider's waits: at most ``concurrency`` at once, none past ``deadline_s``."""

    def __init__(self, name: str, *, concurrency: int, deadline_s: float) -> None:
        self.name = name
        self.deadline_s = deadline_s
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.timeouts = 0
        """Requests that stopped waiting at the deadline (for tests and logs)."""

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` in one of this provider's threads; raise ProviderError at the deadline.

        The deadline covers the wait for a free slot too: a request queued behind
        hung calls gets its answer in time all the same.
        """
        call = functools.partial(fn, *args, **kwargs)
        try:
            with anyio.fail_after(self.deadline_s):
                return await anyio.to_thread.run_sync(
                    call, limiter=self.limiter, abandon_on_cancel=True
                )
        except TimeoutError:
            self.timeouts += 1
            raise ProviderError(
                f"{self.name} provider did not answer within {self.deadline_s:g}s",
                deadline_s=self.deadline_s,
            ) from None
