"""An OpenAI-compatible chat-completions client.

One ``POST {base_url}/chat/completions`` shape serves OpenAI, OpenRouter,
Ollama, vLLM and the llama.cpp server; the retries, deadline and circuit
breaker are :class:`~brain.providers.http.ResilientPoster`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from brain.providers.http import MalformedResponse, ResilientPoster


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Where the chat-completions endpoint is and how hard to try.

    ``base_url`` ends before ``/chat/completions`` (``http://127.0.0.1:11434/v1``
    for Ollama). ``api_key`` is sent as a bearer token when set and is kept out
    of ``repr``. ``max_retries`` counts retries after the first attempt.
    ``timeout_s`` bounds one attempt; ``deadline_s`` the whole call, retries
    and backoff included.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    deadline_s: float = 60.0
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    breaker_threshold: int = 5
    breaker_reset_s: float = 60.0
    temperature: float = 0.2

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("LLMConfig.base_url must start with http:// or https://")
        if not self.model:
            raise ValueError("LLMConfig.model must not be empty")
        if self.timeout_s <= 0 or self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError("LLMConfig timeouts and backoffs must be positive")
        if not self.deadline_s > 0:
            raise ValueError("LLMConfig.deadline_s must be positive")
        if self.max_retries < 0 or self.breaker_threshold < 1 or self.breaker_reset_s < 0:
            raise ValueError("LLMConfig retry and breaker settings are out of range")


class ChatClient:
    """A synchronous, thread-safe chat-completions client with retries and a circuit breaker.

    ``transport`` replaces httpx's network transport (tests, custom TLS);
    ``sleep`` and ``clock`` (monotonic seconds) are injectable so backoff and
    the breaker can be tested without waiting.
    """

    def __init__(
        self,
        config: LLMConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._poster = ResilientPoster.for_endpoint(
            config.base_url,
            "/chat/completions",
            config,
            label="LLM",
            transport=transport,
            sleep=sleep,
            clock=clock,
        )

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """Send ``messages`` and return the assistant's text ("" for a reasoning-only answer).

        Raises :class:`~brain.errors.ProviderError` when the call fails after
        retries, is not retryable, or the breaker is open.
        """
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature if temperature is None else temperature,
            "stream": False,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        return self._poster.call(payload, extract_text, what=f"LLM call to {self.config.model}")

    def close(self) -> None:
        """Close the connection pool."""
        self._poster.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def extract_text(body: object) -> str:
    """The assistant text of a chat-completions response body.

    ``choices[0].message.content`` as a string, or a list of parts whose
    ``text``/``output_text`` are joined; an answer with only
    ``reasoning_content`` (or no content) is empty.
    """
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            raise MalformedResponse(str(error["message"])[:200])
        raise MalformedResponse("no choices")
    choice = choices[0]
    message = choice.get("message")
    if isinstance(message, dict):
        return _content_text(message.get("content"))
    if isinstance(choice.get("text"), str):  # a legacy completions-shaped answer
        return str(choice["text"])
    raise MalformedResponse("first choice has no message")


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""  # None: a reasoning-only answer, a refusal field, or tool calls
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in (None, "text", "output_text"):
            value = part.get("text", part.get("output_text"))
            if isinstance(value, dict):  # {"text": {"value": ...}} in some APIs
                value = value.get("value")
            if isinstance(value, str):
                texts.append(value)
    return "\n".join(texts)
