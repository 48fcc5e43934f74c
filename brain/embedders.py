"""Text embedders that run offline: a shipped static model and a hashing embedder for tests.

``StaticEmbedder`` is brain's default. It reads a model2vec-style static model that ships in
the package (``brain/models/minilm-static/``, distilled from all-MiniLM-L6-v2 by
``scripts/build_static_model.py``; Apache-2.0, see the NOTICE and LICENSE there). Nothing is
downloaded, ever: the model is read from package files via :mod:`importlib.resources`, and
at run time only numpy and tokenizers are needed. A text's vector is the mean of its
WordPiece tokens' rows (at most ``max_tokens`` tokens, unknown tokens dropped), L2-normalised.

``HashEmbedder`` hashes word unigrams and character trigrams into a fixed dimension. It needs
no files, is deterministic across processes and platforms, and is meant for tests.

Both return ``float32`` arrays of shape ``(len(texts), dim)`` with unit-length rows, except
that a text with no usable token (empty, whitespace only, or only unknown tokens such as a
single word longer than 100 characters) gets the zero vector, so that it is similar to
nothing rather than to an arbitrary direction.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "HashEmbedder", "StaticEmbedder", "default_embedder"]

Matrix = npt.NDArray[np.float32]

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
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


class _StaticModel:
    """The loaded artifact: tokenizer plus dequantised float32 embedding matrix."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        root = resources.files(_MODEL_PACKAGE).joinpath(*_MODEL_DIR)
        config: dict[str, Any] = json.loads(root.joinpath("config.json").read_text("utf-8"))
        q = np.load(io.BytesIO(root.joinpath("embeddings.npy").read_bytes()), allow_pickle=False)
        scales = np.load(io.BytesIO(root.joinpath("scales.npy").read_bytes()), allow_pickle=False)
        self.matrix: Matrix = (q.astype(np.float32) * scales[:, None]).astype(np.float32)
        self.tokenizer = Tokenizer.from_str(root.joinpath("tokenizer.json").read_text("utf-8"))
        self.tokenizer.no_padding()
        self.max_tokens = int(config["max_tokens"])
        self.tokenizer.enable_truncation(self.max_tokens)
        unk = config.get("unk_token_id")
        self.unk_token_id: int | None = None if unk is None else int(unk)
        self.name = str(config["name"])
        self.dim = int(config["dim"])
        if self.matrix.shape != (int(config["vocab_size"]), self.dim):
            raise ValueError(f"static model matrix has shape {self.matrix.shape}, config disagrees")


class StaticEmbedder:
    """The default embedder: mean of static token vectors distilled from all-MiniLM-L6-v2.

    The model is loaded on first use (about 30 MB of float32 in memory, a fraction of a
    second); ``name`` and ``dim`` do not load it. Instances are safe to share between threads.
    """

    name = "minilm-static-v1"
    dim = 256

    def __init__(self, batch_size: int = 4096) -> None:
        self._batch_size = batch_size
        self._model: _StaticModel | None = None
        self._lock = threading.Lock()

    def _load(self) -> _StaticModel:
        model = self._model
        if model is None:
            with self._lock:
                model = self._model
                if model is None:
                    model = _StaticModel()
                    if (model.name, model.dim) != (self.name, self.dim):
                        raise ValueError(
                            f"shipped model is {model.name}/{model.dim}, "
                            f"expected {self.name}/{self.dim}"
                        )
                    self._model = model
        return model

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``: float32 ``(len(texts), dim)``, unit rows, zero rows for empty."""
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
        encodings = model.tokenizer.encode_batch(batch, add_special_tokens=False)
        id_lists = [enc.ids for enc in encodings]
        lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(batch))
        if not lengths.any():
            return
        ids = np.fromiter(
            (i for ids_ in id_lists for i in ids_), dtype=np.int64, count=int(lengths.sum())
        )
        rows = np.repeat(np.arange(len(batch)), lengths)
        if model.unk_token_id is not None:
            keep = ids != model.unk_token_id
            ids, rows = ids[keep], rows[keep]
        if ids.size == 0:
            return
        # rows is sorted, so each text's tokens are one contiguous run: sum runs with reduceat.
        counts = np.bincount(rows, minlength=len(batch))
        nonempty = np.flatnonzero(counts)
        starts = (np.cumsum(counts) - counts)[nonempty]
        sums = np.add.reduceat(model.matrix[ids], starts, axis=0)
        out[nonempty] = sums / counts[nonempty, None].astype(np.float32)


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
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, (value >> 1) % self.dim] += 1.0 if value & 1 else -1.0
        return _normalise_rows(out)


def default_embedder() -> StaticEmbedder:
    """Brain's default embedder (the shipped static model, loaded on first use)."""
    return StaticEmbedder()
