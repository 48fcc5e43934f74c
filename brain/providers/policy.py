"""``ProviderPolicy``: where an OpenAI-compatible endpoint is and how hard to try.

The one set of provider settings (base URL, model, key, timeout, deadline,
retries, backoff, breaker) that ``ResilientPoster`` follows, and its checks.
``brain.providers.llm.LLMConfig`` and ``brain.vectors.embedders.OpenAIEmbedderConfig``
are this policy plus their own fields. Kept apart from ``brain.providers.http``
so that naming a config does not import httpx (the embedders module builds
its config without loading a network client). Tests:
tests/brain/providers/test_policy.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ProviderPolicy:
    """Where the endpoint is and how hard to try.

    ``base_url`` ends before the endpoint's path (``http://127.0.0.1:11434/v1``
    for Ollama). ``api_key`` is sent as a bearer token when set and is kept out
    of ``repr``. ``max_retries`` counts retries after the first attempt.
    ``timeout_s`` bounds one attempt; ``deadline_s`` the whole call, retries
    and backoff included. The breaker opens after ``breaker_threshold``
    consecutive failed calls and lets a trial through after ``breaker_reset_s``
    (``brain.providers.http``). Invalid settings raise ``ValueError`` naming
    the config type and the setting.
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

    def __post_init__(self) -> None:
        name = type(self).__name__
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"{name}.base_url must start with http:// or https://")
        if not self.model:
            raise ValueError(f"{name}.model must not be empty")
        if self.timeout_s <= 0 or self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError(f"{name} timeouts and backoffs must be positive")
        if not self.deadline_s > 0:
            raise ValueError(f"{name}.deadline_s must be positive")
        if self.max_retries < 0 or self.breaker_threshold < 1 or self.breaker_reset_s < 0:
            raise ValueError(f"{name} retry and breaker settings are out of range")
