"""POSTing JSON to a provider: retries, backoff, a deadline and a circuit breaker.

:class:`ResilientPoster`, which :class:`brain.providers.llm.ChatClient` and
:class:`brain.vectors.embedders.OpenAIEmbedder` both post through, is the one place
where httpx exceptions and HTTP failures become :class:`~brain.errors.ProviderError`:

* 429, 5xx, timeouts and transport errors are retried with exponential
  backoff and jitter, honouring ``Retry-After`` (seconds or an HTTP date),
  never waiting longer than ``backoff_max_s``;
* a whole call (every attempt and every wait between them) ends within
  ``deadline_s``: each attempt's timeout is cut to what is left, and a retry
  whose wait would pass it is not made (the call fails with the last error);
* other 4xx are not retried (the same request would fail the same way);
* a circuit breaker opens after ``breaker_threshold`` consecutive failed
  calls, refuses calls without touching the network for ``breaker_reset_s``,
  then lets one trial call through (without retries): success closes it,
  failure opens it again. A 400, 413 or 422 answer proves the provider is up,
  so it closes the breaker even though the call fails.

The API key goes into the ``Authorization`` header and nowhere else: it is not
in ``repr(config)``, log records or error messages (a provider that echoes it
back has it replaced by ``***``). The engine never reads the environment, so
httpx is told not to either (no proxy variables, no ``.netrc``).

Tested through its two users, against real loopback servers:
``tests/brain/providers/test_llm.py`` and ``tests/brain/vectors/test_embedders_openai.py``.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import httpx

from brain.errors import ProviderError
from brain.providers.policy import ProviderPolicy
from brain.version import __version__

log = logging.getLogger(__name__)

T = TypeVar("T")
REQUEST_SPECIFIC_STATUS: Final = frozenset({400, 413, 422})
"""Failures caused by the request, not the provider: not retried, and proof the provider is up."""


class ResilientPoster:
    """POSTs JSON to one URL with the retry, backoff and breaker rules in the module docstring.

    The machinery shared by :class:`ChatClient` and
    :class:`brain.vectors.embedders.OpenAIEmbedder`. ``call`` hands a successful answer's JSON
    body to ``parse``; ``parse`` raising :class:`MalformedResponse` (or ``ValueError``)
    fails the call without a retry, since the same request would get the same answer.
    ``label`` names the provider kind in log records and breaker errors (``LLM``).
    Thread-safe.
    """

    @classmethod
    def for_endpoint(
        cls,
        policy: ProviderPolicy,
        path: str,
        *,
        label: str,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> ResilientPoster:
        """A poster for ``path`` under the policy's ``base_url``, trying as hard as it says."""
        return cls(
            policy.base_url.rstrip("/") + path,
            api_key=policy.api_key,
            timeout_s=policy.timeout_s,
            deadline_s=policy.deadline_s,
            max_retries=policy.max_retries,
            backoff_base_s=policy.backoff_base_s,
            backoff_max_s=policy.backoff_max_s,
            breaker_threshold=policy.breaker_threshold,
            breaker_reset_s=policy.breaker_reset_s,
            label=label,
            transport=transport,
            sleep=sleep,
            clock=clock,
        )

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
        backoff_base_s: float,
        backoff_max_s: float,
        breaker_threshold: int,
        breaker_reset_s: float,
        label: str,
        deadline_s: float | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._deadline_s = deadline_s
        self._api_key = api_key
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._label = label
        self._headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": f"brain/{__version__}",
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout_s), transport=transport, trust_env=False
        )
        self._sleep = sleep
        self._clock = clock
        self._breaker = _Breaker(breaker_threshold, breaker_reset_s, clock, label)
        self._random = random.Random()  # noqa: S311 - jitter, not secrets; no global state

    def call(self, payload: dict[str, Any], parse: Callable[[Any], T], *, what: str) -> T:
        """POST ``payload`` and return ``parse(answer JSON)``; ``what`` starts error messages.

        Raises :class:`~brain.errors.ProviderError` when the call fails after
        retries, is not retryable, or the breaker is open.
        """
        trial = self._breaker.admit()
        # Encoded here rather than by httpx: text with a lone surrogate (valid in
        # a str, never in UTF-8) would raise UnicodeEncodeError inside httpx.
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace")
        # A half-open trial is one attempt: a provider still down should cost
        # one request, not a whole retry cycle.
        retries = 0 if trial else self._max_retries
        give_up = None if self._deadline_s is None else self._clock() + self._deadline_s
        settled = False
        try:
            attempt = 0
            while True:
                attempt += 1
                outcome = self._attempt(body, parse, self._attempt_timeout(give_up))
                if not isinstance(outcome, _Failure):
                    self._breaker.succeeded()
                    settled = True
                    return outcome
                if not outcome.retryable or attempt > retries:
                    if outcome.status in REQUEST_SPECIFIC_STATUS:
                        self._breaker.succeeded()
                    else:
                        self._breaker.failed()
                    settled = True
                    raise self._error(outcome, attempt, what)
                delay = self._delay(attempt, outcome.retry_after)
                if give_up is not None and self._clock() + delay >= give_up:
                    # The retry could not finish in time: fail now, not after the wait.
                    self._breaker.failed()
                    settled = True
                    raise self._error(outcome, attempt, what, deadline_s=self._deadline_s)
                log.warning(
                    "%s call failed (%s); retry %d of %d in %.2fs",
                    self._label,
                    outcome.describe(),
                    attempt,
                    retries,
                    delay,
                )
                self._sleep(delay)
        finally:
            if not settled:  # interrupted mid-call: never leave a trial slot taken
                self._breaker.failed()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _attempt_timeout(self, give_up: float | None) -> float:
        """This attempt's timeout: ``timeout_s``, cut to what is left of the deadline."""
        if give_up is None:
            return self._timeout_s
        # A floor keeps httpx from treating a spent deadline as "no timeout" (0 is
        # not None there, but a tiny positive number fails at once, as it should).
        return max(0.001, min(self._timeout_s, give_up - self._clock()))

    def _attempt(self, body: bytes, parse: Callable[[Any], T], timeout: float) -> T | _Failure:
        try:
            response = self._http.post(
                self._url, content=body, headers=self._headers, timeout=httpx.Timeout(timeout)
            )
        except httpx.TimeoutException:
            return _Failure(None, "timed out", retryable=True)
        except httpx.UnsupportedProtocol as exc:
            return _Failure(None, self._redact(str(exc)), retryable=False)
        except httpx.TransportError as exc:
            return _Failure(None, f"{type(exc).__name__}: {self._redact(str(exc))}", retryable=True)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # redirects, broken encodings
            return _Failure(None, f"{type(exc).__name__}: {self._redact(str(exc))}", False)
        status = response.status_code
        if status == 429 or status >= 500:
            retry_after = _parse_retry_after(response.headers.get("Retry-After"))
            return _Failure(status, self._reason(response), retryable=True, retry_after=retry_after)
        if not response.is_success:
            return _Failure(status, self._reason(response), retryable=False)
        try:
            return parse(response.json())
        except (ValueError, MalformedResponse) as exc:
            # A 200 that is not the expected answer: a proxy page or a wrong
            # base_url. Retrying would not change it.
            return _Failure(status, f"malformed response: {self._redact(str(exc))}", False)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cap = self._backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        # Equal jitter: at least half the exponential step, so retries spread
        # out without collapsing to zero.
        step = min(cap, self._backoff_base_s * 2.0 ** (attempt - 1))
        return step / 2 + self._random.uniform(0, step / 2)

    def _reason(self, response: httpx.Response) -> str:
        reason = response.reason_phrase or "error"
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            error = body.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            if isinstance(message, str) and message.strip():
                reason = message.strip()
        return self._redact(reason)[:200]

    def _redact(self, text: str) -> str:
        key = self._api_key
        return text.replace(key, "***") if key else text

    def _error(
        self, failure: _Failure, attempts: int, what: str, *, deadline_s: float | None = None
    ) -> ProviderError:
        where = f"HTTP {failure.status}" if failure.status is not None else "network"
        within = "" if deadline_s is None else f" within its {deadline_s:g}s deadline"
        data: dict[str, Any] = {"status": failure.status, "attempts": attempts}
        if deadline_s is not None:
            data["deadline_s"] = deadline_s
        return ProviderError(
            f"{what} failed after {attempts} attempt(s){within}: {where}: {failure.reason}",
            **data,
        )


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


class MalformedResponse(Exception):
    """A successful status whose body is not the expected answer (raised by parsers)."""


@dataclass(frozen=True, slots=True)
class _Failure:
    status: int | None
    reason: str
    retryable: bool
    retry_after: float | None = None

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.reason}" if self.status is not None else self.reason


class _Breaker:
    """Consecutive-failure circuit breaker: closed, open until a deadline, then one trial."""

    def __init__(
        self, threshold: int, reset_s: float, clock: Callable[[], float], label: str = "LLM"
    ) -> None:
        self._label = label
        self._threshold = threshold
        self._reset_s = reset_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False

    def admit(self) -> bool:
        """Let a call through (True when it is the half-open trial) or raise ProviderError."""
        with self._lock:
            if self._opened_at is None:
                return False
            waited = self._clock() - self._opened_at
            if self._trial or waited < self._reset_s:
                retry_in = max(0.0, self._reset_s - waited)
                raise ProviderError(
                    f"{self._label} circuit open after {self._failures} consecutive failures; "
                    f"next trial in {retry_in:.0f}s",
                    retry_after=round(retry_in, 3),
                )
            self._trial = True
            return True

    def succeeded(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial = False

    def failed(self) -> None:
        with self._lock:
            self._failures += 1
            if self._trial or self._failures >= self._threshold:
                if self._opened_at is None or self._trial:  # closed or half-open -> open
                    log.warning(
                        "%s circuit open after %d consecutive failures", self._label, self._failures
                    )
                self._opened_at = self._clock()  # a late failure restarts the wait
            self._trial = False
