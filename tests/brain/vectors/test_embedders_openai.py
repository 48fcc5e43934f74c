"""brain.vectors.embedders.OpenAIEmbedder against a real loopback server speaking /v1/embeddings."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from brain.errors import ProviderError
from brain.vectors.embedders import Embedder, OpenAIEmbedder, OpenAIEmbedderConfig
from tests import ROOT
from tests.openai_server import Clock, OpenAIServer, Reply

KEY = "sk-embed-DO-NOT-LEAK-7b2d01"


EmbedderFactory = Callable[..., OpenAIEmbedder]


@pytest.fixture
def make_embedder(
    server: OpenAIServer, sleeps: list[float], clock: Clock
) -> Iterator[EmbedderFactory]:
    """Embedders for the test server with recorded sleeps and a manual clock; closed afterwards."""
    embedders: list[OpenAIEmbedder] = []

    def make(**overrides: Any) -> OpenAIEmbedder:
        options: dict[str, Any] = {"base_url": server.base_url, "model": "nomic-embed-text"}
        options.update(overrides)
        embedder = OpenAIEmbedder(OpenAIEmbedderConfig(**options), sleep=sleeps.append, clock=clock)
        embedders.append(embedder)
        return embedder

    yield make
    for embedder in embedders:
        embedder.close()


def _vectors(count: int, dim: int = 3, start: int = 0) -> list[list[float]]:
    """Distinct, non-unit vectors: row i is (i+1, 2(i+1), ...) shifted by ``start``."""
    return [[float((start + i + 1) * (j + 1)) for j in range(dim)] for i in range(count)]


def _unit(vector: list[float]) -> np.ndarray[Any, np.dtype[np.float32]]:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


# -- requests and answers ---------------------------------------------------------------------


def test_texts_are_sent_in_batches_and_rows_come_back_in_input_order(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    texts = [f"text {i}" for i in range(5)]
    server.enqueue(
        Reply.embeddings(_vectors(2)),
        Reply.embeddings(_vectors(2, start=2)),
        Reply.embeddings(_vectors(1, start=4)),
    )

    matrix = make_embedder(batch_size=2).embed(texts)

    assert [r.path for r in server.requests] == ["/v1/embeddings"] * 3
    bodies = [r.json() for r in server.requests]
    assert [b["input"] for b in bodies] == [texts[0:2], texts[2:4], texts[4:5]]
    assert {b["model"] for b in bodies} == {"nomic-embed-text"}
    assert matrix.dtype == np.float32
    assert matrix.shape == (5, 3)
    for row, vector in enumerate(_vectors(5)):
        np.testing.assert_allclose(matrix[row], _unit(vector), rtol=1e-6)


def test_an_answer_out_of_order_is_put_back_in_order_by_index(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    a, b, c = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    server.enqueue(Reply.embeddings([c, a, b], indices=[2, 0, 1]))

    matrix = make_embedder().embed(["a", "b", "c"])

    np.testing.assert_array_equal(matrix, np.eye(3, dtype=np.float32))


def test_rows_are_l2_normalised(server: OpenAIServer, make_embedder: EmbedderFactory) -> None:
    server.enqueue(Reply.embeddings([[3.0, 4.0], [0.5, 0.0]]))

    matrix = make_embedder().embed(["x", "y"])

    np.testing.assert_allclose(matrix, [[0.6, 0.8], [1.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-6)


def test_blank_texts_are_not_sent_and_get_zero_rows(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    server.enqueue(Reply.embeddings([[1.0, 0.0], [0.0, 2.0]]))

    matrix = make_embedder().embed(["", "first", "  \n", "second"])

    assert server.requests[0].json()["input"] == ["first", "second"]
    np.testing.assert_array_equal(matrix, [[0, 0], [1, 0], [0, 0], [0, 1]])


def test_the_name_is_openai_model_and_dim_is_learned_from_the_first_answer(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    embedder: Embedder = make_embedder()
    assert embedder.name == "openai:nomic-embed-text"
    assert embedder.dim == 0
    assert embedder.embed([]).shape == (0, 0)
    assert server.requests == []

    server.enqueue(Reply.embeddings(_vectors(1, dim=4)))
    embedder.embed(["x"])

    assert embedder.dim == 4
    assert embedder.embed([]).shape == (0, 4)
    assert len(server.requests) == 1


def test_a_configured_dim_is_known_before_any_call(make_embedder: EmbedderFactory) -> None:
    embedder = make_embedder(dim=768)

    assert embedder.dim == 768
    assert embedder.embed([]).shape == (0, 768)


def test_a_single_string_is_refused(make_embedder: EmbedderFactory) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        make_embedder().embed("one text")


def test_the_authorization_header_carries_the_key(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    server.enqueue(Reply.embeddings(_vectors(1)))

    make_embedder(api_key=KEY).embed(["x"])

    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"


def test_no_authorization_header_is_sent_without_a_key(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    server.enqueue(Reply.embeddings(_vectors(1)))

    make_embedder().embed(["x"])

    assert "authorization" not in server.requests[0].headers


# -- malformed answers -----------------------------------------------------------------------


def test_a_dimension_mismatch_raises_provider_error_without_retry(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.embeddings(_vectors(1, dim=3)), Reply.embeddings(_vectors(1, dim=5)))
    embedder = make_embedder()
    embedder.embed(["x"])

    with pytest.raises(ProviderError, match="dimension mismatch: got 5, expected 3"):
        embedder.embed(["y"])
    assert len(server.requests) == 2
    assert sleeps == []
    assert embedder.dim == 3


def test_an_answer_disagreeing_with_the_configured_dim_raises_provider_error(
    server: OpenAIServer, make_embedder: EmbedderFactory
) -> None:
    server.enqueue(Reply.embeddings(_vectors(1, dim=3)))

    with pytest.raises(ProviderError, match="dimension mismatch: got 3, expected 8"):
        make_embedder(dim=8).embed(["x"])


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("<html>proxy login</html>", "malformed response"),
        ({"data": []}, "data list of 2"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"embedding": [1.0]}]}, "integer index"),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]},
            "indices are not 0..1",
        ),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
            "equal-length",
        ),
        (
            {"data": [{"index": 0, "embedding": None}, {"index": 1, "embedding": None}]},
            "are not non-empty lists",
        ),
        (
            '{"data": [{"index": 0, "embedding": [NaN]}, {"index": 1, "embedding": [1.0]}]}',
            "finite numbers",
        ),
    ],
    ids=["not-json", "too-few", "no-index", "duplicate-index", "ragged", "null", "nan"],
)
def test_a_malformed_answer_raises_provider_error_without_retry(
    server: OpenAIServer,
    make_embedder: EmbedderFactory,
    sleeps: list[float],
    body: object,
    problem: str,
) -> None:
    server.enqueue(Reply(body=body))

    with pytest.raises(ProviderError, match=problem):
        make_embedder().embed(["a", "b"])
    assert len(server.requests) == 1
    assert sleeps == []


# -- retries ---------------------------------------------------------------------------------


def test_429_is_retried_after_the_retry_after_seconds(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.enqueue(
        Reply.error(429, "slow down", headers={"Retry-After": "2.5"}),
        Reply.embeddings(_vectors(1)),
    )

    matrix = make_embedder().embed(["x"])

    assert matrix.shape == (1, 3)
    assert sleeps == [2.5]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


def test_5xx_are_retried_with_jittered_backoff_until_success(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.enqueue(Reply.error(500), Reply.error(503), Reply.embeddings(_vectors(1)))

    assert make_embedder(backoff_base_s=1.0).embed(["x"]).shape == (1, 3)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    for attempt, slept in enumerate(sleeps):
        step = 2.0**attempt
        assert step / 2 <= slept <= step


def test_each_batch_gets_its_own_retries(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.enqueue(
        Reply.embeddings(_vectors(1)),
        Reply.error(502),
        Reply.embeddings(_vectors(1, start=1)),
    )

    matrix = make_embedder(batch_size=1).embed(["a", "b"])

    assert len(server.requests) == 3
    assert len(sleeps) == 1
    np.testing.assert_allclose(matrix[1], _unit(_vectors(2)[1]), rtol=1e-6)


def test_retries_give_up_after_max_retries_with_the_last_status(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float]
) -> None:
    server.enqueue(*[Reply.error(503, "overloaded")] * 3)

    with pytest.raises(ProviderError, match="HTTP 503: overloaded") as raised:
        make_embedder(max_retries=2).embed(["x"])

    assert "embedding call to nomic-embed-text failed after 3 attempt(s)" in str(raised.value)
    assert raised.value.data == {"status": 503, "attempts": 3}
    assert len(sleeps) == 2


def test_a_hung_provider_is_given_up_at_the_deadline_not_the_longer_timeout(
    server: OpenAIServer,
) -> None:
    server.hold()  # answers nothing until released
    config = OpenAIEmbedderConfig(
        server.base_url, "e", dim=4, timeout_s=30.0, deadline_s=0.3, max_retries=3
    )
    try:
        with OpenAIEmbedder(config) as embedder, pytest.raises(ProviderError) as raised:
            embedder.embed(["hello"])
    finally:
        server.release()

    assert "within its 0.3s deadline" in str(raised.value)
    assert raised.value.data["attempts"] == 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_other_4xx_are_not_retried(
    server: OpenAIServer, make_embedder: EmbedderFactory, sleeps: list[float], status: int
) -> None:
    server.enqueue(Reply.error(status, "model not found"))

    with pytest.raises(ProviderError, match=f"HTTP {status}: model not found"):
        make_embedder().embed(["x"])
    assert len(server.requests) == 1
    assert sleeps == []


# -- circuit breaker -------------------------------------------------------------------------


def test_the_circuit_opens_after_threshold_failures_and_refuses_without_a_request(
    server: OpenAIServer, make_embedder: EmbedderFactory, clock: Clock
) -> None:
    embedder = make_embedder(max_retries=0, breaker_threshold=2, breaker_reset_s=30.0)
    server.enqueue(Reply.error(500), Reply.error(500))
    for _ in range(2):
        with pytest.raises(ProviderError, match="HTTP 500"):
            embedder.embed(["x"])

    with pytest.raises(ProviderError, match="embedding circuit open") as raised:
        embedder.embed(["x"])
    assert raised.value.data["retry_after"] == 30.0
    assert len(server.requests) == 2

    clock.now += 30.0
    server.enqueue(Reply.embeddings(_vectors(1)))
    assert embedder.embed(["x"]).shape == (1, 3)  # the trial succeeds and closes it
    assert len(server.requests) == 3


# -- secrets ---------------------------------------------------------------------------------


def test_the_api_key_never_appears_in_errors_repr_or_logs(
    server: OpenAIServer, make_embedder: EmbedderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    embedder = make_embedder(api_key=KEY, max_retries=1, breaker_threshold=1)
    server.enqueue(
        Reply.error(500, f"upstream rejected key {KEY}"),
        Reply.error(401, f"Incorrect API key provided: {KEY}"),
    )
    errors: list[ProviderError] = []
    for _ in range(2):  # the 500 then 401 call, then the open circuit
        with pytest.raises(ProviderError) as raised:
            embedder.embed(["x"])
        errors.append(raised.value)

    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "***" in str(errors[0])
    assert "circuit open" in str(errors[1])
    for error in errors:
        assert KEY not in str(error)
        assert KEY not in repr(error)
        assert KEY not in repr(error.data)
        assert error.__cause__ is None
    assert KEY not in repr(embedder.config)
    assert KEY not in str(embedder.config)
    assert "HTTP 500" in caplog.text
    assert KEY not in caplog.text


def test_config_rejects_nonsense_before_any_call() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIEmbedderConfig(base_url="localhost:11434/v1", model="m")
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedderConfig(base_url="http://x", model="m", batch_size=0)
    with pytest.raises(ValueError, match="dim"):
        OpenAIEmbedderConfig(base_url="http://x", model="m", dim=0)


# -- layering --------------------------------------------------------------------------------


def test_importing_the_embedders_loads_neither_httpx_nor_anyio_nor_the_daemon() -> None:
    script = (
        "import sys, brain.vectors.embedders\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'anyio', 'daemon')))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"
