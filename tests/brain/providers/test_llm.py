"""brain.providers.llm (and the http poster it posts through) against a real HTTP server
on loopback speaking the chat-completions shape."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from brain.errors import ProviderError
from brain.providers.llm import ChatClient, LLMConfig
from tests import ROOT
from tests.brain.conftest import ClientFactory
from tests.openai_server import Clock, OpenAIServer, Reply

KEY = "sk-test-DO-NOT-LEAK-4f1c9e"
MESSAGES = [{"role": "user", "content": "hello"}]


# -- requests and answers ---------------------------------------------------------------------


def test_complete_posts_the_openai_shape_and_returns_the_string_content(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply.text("a summary"))

    text = make_client(api_key=KEY).complete(MESSAGES, max_tokens=50)

    assert text == "a summary"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "model": "test-model",
        "messages": MESSAGES,
        "temperature": 0.2,
        "stream": False,
        "max_tokens": 50,
    }


def test_no_authorization_header_is_sent_without_a_key(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply.text("ok"))

    make_client().complete(MESSAGES)

    assert "authorization" not in server.requests[0].headers


def test_content_given_as_a_list_of_parts_is_joined_and_reasoning_parts_skipped(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    parts = [
        {"type": "reasoning", "text": "secret thoughts"},
        {"type": "text", "text": "first part"},
        {"type": "output_text", "text": "second part"},
    ]
    server.enqueue(Reply.text(parts))

    assert make_client().complete(MESSAGES) == "first part\nsecond part"


def test_an_answer_with_only_reasoning_content_is_empty(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply.text(None, reasoning_content="I think the user wants..."))

    assert make_client().complete(MESSAGES) == ""


def test_text_with_a_lone_surrogate_is_sent_with_it_replaced(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply.text("ok"))

    assert make_client().complete([{"role": "user", "content": "bad \ud800 char"}]) == "ok"
    assert server.requests[0].json()["messages"][0]["content"] == "bad ? char"


def test_a_redirect_is_not_followed_or_retried(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply(status=307, headers={"Location": "http://example.invalid/"}))

    with pytest.raises(ProviderError, match="HTTP 307"):
        make_client().complete(MESSAGES)
    assert len(server.requests) == 1


def test_a_success_status_with_a_body_that_is_not_a_completion_fails_without_retry(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply(body="<html>proxy login</html>"))

    with pytest.raises(ProviderError, match="malformed response"):
        make_client().complete(MESSAGES)
    assert len(server.requests) == 1


# -- retries ---------------------------------------------------------------------------------


def test_429_is_retried_after_the_retry_after_seconds(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.error(429, "slow down", headers={"Retry-After": "1.5"}), Reply.text("ok"))

    assert make_client().complete(MESSAGES) == "ok"
    assert sleeps == [1.5]
    assert len(server.requests) == 2


def test_retry_after_as_an_http_date_is_honoured_and_capped_at_backoff_max(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    server.enqueue(
        Reply.error(429, headers={"Retry-After": later}),
        Reply.error(503, headers={"Retry-After": past}),
        Reply.text("ok"),
    )

    assert make_client(backoff_max_s=7.0).complete(MESSAGES) == "ok"
    assert sleeps == [7.0, 0.0]


def test_5xx_are_retried_with_growing_jittered_backoff_until_success(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.error(500), Reply.error(502), Reply.error(503), Reply.text("ok"))

    assert make_client(backoff_base_s=1.0).complete(MESSAGES) == "ok"
    assert len(server.requests) == 4
    assert len(sleeps) == 3
    for attempt, slept in enumerate(sleeps):
        step = 2.0**attempt
        assert step / 2 <= slept <= step


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float], status: int
) -> None:
    server.enqueue(Reply.error(status, "bad request body"))

    with pytest.raises(ProviderError) as raised:
        make_client().complete(MESSAGES)

    assert f"HTTP {status}" in str(raised.value)
    assert "bad request body" in str(raised.value)
    assert raised.value.data["status"] == status
    assert len(server.requests) == 1
    assert sleeps == []


def test_retries_give_up_after_max_retries_with_the_last_status(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    server.enqueue(*[Reply.error(503, "overloaded")] * 3)

    with pytest.raises(ProviderError, match="HTTP 503: overloaded") as raised:
        make_client(max_retries=2).complete(MESSAGES)

    assert raised.value.data == {"status": 503, "attempts": 3}
    assert len(server.requests) == 3
    assert len(sleeps) == 2


def test_timeouts_are_retried_then_raise_provider_error(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.text("late", delay=5.0), Reply.text("late again", delay=5.0))

    with pytest.raises(ProviderError, match="timed out"):
        make_client(timeout_s=0.2, max_retries=1).complete(MESSAGES)

    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_a_timeout_followed_by_an_answer_succeeds(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    server.enqueue(Reply.text("late", delay=5.0), Reply.text("on time"))

    assert make_client(timeout_s=0.2).complete(MESSAGES) == "on time"


def test_a_retry_whose_wait_would_pass_the_deadline_is_not_made(
    server: OpenAIServer, make_client: ClientFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.error(429, "slow down", headers={"Retry-After": "15"}), Reply.text("ok"))

    with pytest.raises(ProviderError, match="within its 10s deadline: HTTP 429") as raised:
        make_client(deadline_s=10.0, backoff_max_s=20.0).complete(MESSAGES)

    assert raised.value.data == {"status": 429, "attempts": 1, "deadline_s": 10.0}
    assert sleeps == []  # failed at once rather than after a wait it could not use
    assert len(server.requests) == 1


def test_a_hung_provider_is_given_up_at_the_deadline_not_the_longer_timeout(
    server: OpenAIServer,
) -> None:
    server.hold()  # answers nothing until released
    config = LLMConfig(server.base_url, "m", timeout_s=30.0, deadline_s=0.3, max_retries=3)
    try:
        with ChatClient(config) as client, pytest.raises(ProviderError) as raised:
            client.complete(MESSAGES)
    finally:
        server.release()

    assert "within its 0.3s deadline" in str(raised.value)
    assert raised.value.data["attempts"] == 1


def test_connection_errors_are_retried_then_raise_provider_error(
    make_client: ClientFactory, sleeps: list[float]
) -> None:
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(ProviderError, match="network: ConnectError"):
        make_client(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2).complete(MESSAGES)
    assert len(sleeps) == 2


# -- circuit breaker -------------------------------------------------------------------------


def test_circuit_opens_after_threshold_failures_and_refuses_without_a_network_call(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    client = make_client(max_retries=0, breaker_threshold=3)
    server.enqueue(*[Reply.error(500)] * 3)
    for _ in range(3):
        with pytest.raises(ProviderError, match="HTTP 500"):
            client.complete(MESSAGES)

    with pytest.raises(ProviderError, match="circuit open") as raised:
        client.complete(MESSAGES)

    assert len(server.requests) == 3
    assert raised.value.data["retry_after"] == 60.0


def test_a_success_resets_the_consecutive_failure_count(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    client = make_client(max_retries=0, breaker_threshold=2)
    server.enqueue(Reply.error(500), Reply.text("ok"), Reply.error(500), Reply.text("ok"))

    for expected in (ProviderError, "ok", ProviderError, "ok"):
        if expected is ProviderError:
            with pytest.raises(ProviderError):
                client.complete(MESSAGES)
        else:
            assert client.complete(MESSAGES) == expected
    assert len(server.requests) == 4


def test_circuit_half_opens_after_reset_and_a_successful_trial_closes_it(
    server: OpenAIServer, make_client: ClientFactory, clock: Clock
) -> None:
    client = make_client(max_retries=0, breaker_threshold=2, breaker_reset_s=30.0)
    server.enqueue(Reply.error(503), Reply.error(503))
    for _ in range(2):
        with pytest.raises(ProviderError):
            client.complete(MESSAGES)
    clock.now += 29.0
    with pytest.raises(ProviderError, match="circuit open"):
        client.complete(MESSAGES)

    clock.now += 1.0
    server.enqueue(Reply.text("back"), Reply.text("still here"))
    assert client.complete(MESSAGES) == "back"
    assert client.complete(MESSAGES) == "still here"
    assert len(server.requests) == 4


def test_a_failed_trial_makes_one_attempt_and_reopens_the_circuit(
    server: OpenAIServer, make_client: ClientFactory, clock: Clock, sleeps: list[float]
) -> None:
    client = make_client(max_retries=3, breaker_threshold=1, breaker_reset_s=10.0)
    server.enqueue(Reply.error(401, "bad key"))
    with pytest.raises(ProviderError, match="HTTP 401"):
        client.complete(MESSAGES)

    clock.now += 10.0
    server.enqueue(Reply.error(500), Reply.text("never reached"))
    with pytest.raises(ProviderError, match="HTTP 500"):
        client.complete(MESSAGES)
    with pytest.raises(ProviderError, match="circuit open"):
        client.complete(MESSAGES)

    assert len(server.requests) == 2
    assert sleeps == []


def test_a_request_specific_400_proves_the_provider_is_up_and_does_not_open_the_circuit(
    server: OpenAIServer, make_client: ClientFactory
) -> None:
    client = make_client(max_retries=0, breaker_threshold=1)
    server.enqueue(Reply.error(400, "context length exceeded"), Reply.text("ok"))

    with pytest.raises(ProviderError, match="HTTP 400"):
        client.complete(MESSAGES)

    assert client.complete(MESSAGES) == "ok"


# -- secrets ---------------------------------------------------------------------------------


def test_the_api_key_never_appears_in_errors_repr_or_logs(
    server: OpenAIServer, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = LLMConfig(base_url=server.base_url, model="m", api_key=KEY)
    client = make_client(api_key=KEY, max_retries=1, breaker_threshold=2)
    server.enqueue(
        Reply.error(500, f"upstream rejected key {KEY}"),
        Reply.error(401, f"Incorrect API key provided: {KEY}"),
    )
    errors: list[ProviderError] = []
    for _ in range(2):  # the 500 then 401 call, then the open circuit
        with pytest.raises(ProviderError) as raised:
            client.complete(MESSAGES)
        errors.append(raised.value)

    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert "***" in str(errors[0])
    for error in errors:
        assert KEY not in str(error)
        assert KEY not in repr(error)
        assert KEY not in repr(error.data)
        assert error.__cause__ is None
    assert KEY not in repr(config)
    assert KEY not in str(config)
    assert "HTTP 500" in caplog.text  # the retry was logged...
    assert KEY not in caplog.text  # ...without the key


def test_config_rejects_nonsense_before_any_call() -> None:
    with pytest.raises(ValueError, match="base_url"):
        LLMConfig(base_url="localhost:11434/v1", model="m")
    with pytest.raises(ValueError, match="breaker"):
        LLMConfig(base_url="http://x", model="m", breaker_threshold=0)


# -- layering --------------------------------------------------------------------------------


def test_the_llm_and_summarize_modules_load_neither_anyio_nor_the_daemon() -> None:
    script = (
        "import sys, brain.providers.llm, brain.lcm.llm_summarizer, brain.lcm.summarize\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anyio', 'daemon')))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"
