"""An OpenAI-compatible chat-completions client.

One ``POST {base_url}/chat/completions`` shape serves OpenAI, OpenRouter,
Ollama, vLLM and the llama.cpp server; the retries, deadline and circuit
breaker are :class:`~brain.providers.http.ResilientPoster`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from brain.providers.http import MalformedResponse, ResilientPoster
from brain.providers.policy import ProviderPolicy


@dataclass(frozen=True, slots=True)
class LLMConfig(ProviderPolicy):
    """Where the chat-completions endpoint is and how hard to try (``ProviderPolicy``:
    ``base_url`` ends before ``/chat/completions``), and the sampling temperature."""

    temperature: float = 0.2


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
            config,
            "/chat/completions",
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
