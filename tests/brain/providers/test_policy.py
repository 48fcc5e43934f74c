"""brain.providers.policy: one provider policy, shared by the chat and embeddings configs."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from brain.providers.llm import LLMConfig
from brain.providers.policy import ProviderPolicy
from brain.vectors.embedders import OpenAIEmbedderConfig
from tests import ROOT

CONFIGS = (ProviderPolicy, LLMConfig, OpenAIEmbedderConfig)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"base_url": "localhost:11434/v1"}, "base_url"),
        ({"model": ""}, "model"),
        ({"timeout_s": 0.0}, "timeouts"),
        ({"backoff_base_s": -1.0}, "backoffs"),
        ({"deadline_s": 0.0}, "deadline_s"),
        ({"max_retries": -1}, "retry"),
        ({"breaker_threshold": 0}, "breaker"),
        ({"breaker_reset_s": -1.0}, "breaker"),
    ],
)
def test_every_provider_config_refuses_the_same_settings_naming_itself(
    config: type[ProviderPolicy], setting: dict[str, Any], named: str
) -> None:
    arguments = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **setting}
    with pytest.raises(ValueError, match=rf"^{config.__name__}\b.*{named}"):
        config(**arguments)


@pytest.mark.parametrize("config", CONFIGS)
def test_every_provider_config_keeps_its_key_out_of_repr(config: type[ProviderPolicy]) -> None:
    made = config("http://127.0.0.1:1/v1", "m", api_key="sk-secret-key")
    assert made.api_key == "sk-secret-key"
    assert "sk-secret-key" not in repr(made)


def test_the_chat_and_embeddings_configs_are_the_policy_with_their_own_defaults() -> None:
    chat = LLMConfig("http://x", "m")
    embed = OpenAIEmbedderConfig("http://x", "e")
    assert isinstance(chat, ProviderPolicy)
    assert isinstance(embed, ProviderPolicy)
    assert (chat.timeout_s, chat.temperature) == (60.0, 0.2)
    assert (embed.timeout_s, embed.batch_size, embed.dim) == (30.0, 64, None)
    assert embed.deadline_s == chat.deadline_s == 60.0


def test_naming_the_policy_or_the_embedder_config_does_not_import_httpx() -> None:
    script = (
        "import sys, brain.providers.policy, brain.vectors.embedders\n"
        "print('httpx' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "False"
